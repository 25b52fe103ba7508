"""Validation of every control value before it reaches the engine. A bad value raises UserError
with a message in the page's language; the engine validates again (e.g. tree size, context)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from core import UserError
from core.drafters import (BASELINE, DRAFTERS, DraftModelDrafter, DraftShape, HybridDrafter, NgramDrafter,
                           lookup)
from core.common.limits import MAX_DEPTH, MAX_WIDTH
from core.api.request import PRECISIONS, DecodeRequest, drafter_names
from core.serving.monitor import is_loopback_host  # localhost, 127.x.x.x, ::1

from .i18n import t
from .page_limits import (PAGE_MAX_COMPARE_RUNS, PAGE_MAX_MODEL_REF, PAGE_MAX_NEW_TOKENS, PAGE_MAX_PROMPT_CHARS,
                          PAGE_MAX_SEED, PAGE_MAX_TEMPERATURE)

HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
DRAFTER_NAMES = drafter_names()
COMPARE_CHOICES = [name for name in DRAFTER_NAMES if name != BASELINE]  # draft-xs, draft, draft-l: three sizes

# What the page offers first: every drafter side by side in Compare; the Batch size sweep starts with
# the two that need no learned features, and offers the goodput controller on three of them.
COMPARE_DEFAULT = [cls.name for cls in DRAFTERS.values() if cls.capabilities.drafts]
SWEEP_DEFAULT = [DraftModelDrafter.name, NgramDrafter.name]
SERVING_DEFAULT = DraftModelDrafter.name  # a draft model holds KV of its own: both caches to watch
SWEEP_AUTO = [f"{DraftModelDrafter.name}:auto", f"{NgramDrafter.name}:auto", f"{HybridDrafter.name}:auto-tree"]


def number(value, name: str, lang: str, low: float, high: float, *, integer: bool = False) -> float | int:
    """``value`` as a number within [low, high] (a whole number if ``integer``)."""
    label = t(name, lang)
    if isinstance(value, bool) or value is None or value == "":
        raise UserError(t("err.number", lang, name=label, low=low, high=high))
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise UserError(t("err.number", lang, name=label, low=low, high=high)) from None
    if not math.isfinite(x) or not low <= x <= high:
        raise UserError(t("err.number", lang, name=label, low=low, high=high))
    if integer:
        if x != int(x):
            raise UserError(t("err.integer", lang, name=label))
        return int(x)
    return x


def prompt_text(value, lang: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UserError(t("err.prompt_empty", lang))
    if len(value) > PAGE_MAX_PROMPT_CHARS:
        raise UserError(t("err.prompt_long", lang, limit=PAGE_MAX_PROMPT_CHARS, got=len(value)))
    return value


def takes_option(drafter: str, option: str) -> bool:
    """Whether drafter ``drafter`` has option ``option`` (e.g. eagle_nodes), so its control applies."""
    return drafter in DRAFTER_NAMES and option in lookup(drafter)[0].Options.model_fields


def option_limits(drafter: str, option: str) -> tuple[float, float]:
    """``ge`` / ``le`` of a drafter option, read off its pydantic field."""
    info = lookup(drafter)[0].Options.model_fields[option]
    bounds = {type(m).__name__: m for m in info.metadata}
    return bounds["Ge"].ge, bounds["Le"].le


def request(lang: str, policy: "ModelPolicy", drafter: str, target, draft, **fields) -> DecodeRequest:
    """The engine's DecodeRequest from checked control values; the draft field goes only to drafters
    that read a draft model."""
    if not lookup(drafter)[0].capabilities.uses_draft_model:
        draft = None
    return DecodeRequest.of(drafter=drafter, **fields, **own_models(lang, policy, target, draft))


def choice(value, options, name: str, lang: str) -> str:
    if value not in options:
        raise UserError(t("err.choice", lang, name=t(name, lang), value=value, options=", ".join(options)))
    return value


@dataclass(frozen=True)
class ModelPolicy:
    """What the page may load besides its presets; fixed when the server starts (app.py)."""

    own_models: bool = True  # the target / draft fields: a local model folder or a hub id
    trust_remote_code: bool = False  # model code shipped with a model runs only when the server was told so

    @classmethod
    def for_server(cls, host: str, *, allow_own_models: bool = False, no_own_models: bool = False,
                   trust_remote_code: bool = False) -> "ModelPolicy":
        """Own models are on when only this machine can reach the server (a loopback ``host``);
        elsewhere a visitor could make it read any folder or download any model, so only when
        allowed."""
        own = not no_own_models and (allow_own_models or is_loopback_host(host))
        return cls(own_models=own, trust_remote_code=trust_remote_code)


@dataclass(frozen=True)
class MonitorPolicy:
    """Fixed when the server starts (app.py): the URL the field starts with, and whether targets
    off this machine may be polled (off by default: no request forgery through a public page)."""

    default_url: str = "http://127.0.0.1:7860/metrics"
    allow_remote: bool = False

    @classmethod
    def for_server(cls, host: str, port: int, allow_remote: bool = False) -> "MonitorPolicy":
        """The lab's own /metrics, reached over loopback when the server listens there or everywhere."""
        own = "127.0.0.1" if is_loopback_host(host) or host in ("0.0.0.0", "::", "") else host
        own = f"[{own}]" if ":" in own else own  # an IPv6 address: http://[2001:db8::1]:7860/metrics
        return cls(default_url=f"http://{own}:{port}/metrics", allow_remote=allow_remote)


def model_ref(value, name: str, lang: str, policy: ModelPolicy) -> str | None:
    """A target or draft field: empty -> None (the preset's model); else an existing model folder
    (one with a config.json) or a hub id ``org/name``."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    label = t(name, lang)
    text = value.strip() if isinstance(value, str) else ""
    if not policy.own_models:
        raise UserError(t("err.own_models_off", lang, name=label))
    if not text or len(text) > PAGE_MAX_MODEL_REF:
        raise UserError(t("err.model_ref", lang, name=label, value=str(value)[:80]))
    folder = Path(text).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise UserError(t("err.model_folder", lang, name=label, value=text))
        return str(folder)
    if HUB_ID.fullmatch(text) and ".." not in text:
        return text
    raise UserError(t("err.model_ref", lang, name=label, value=text))


def own_models(lang: str, policy: ModelPolicy, target, draft) -> dict:
    """The DecodeRequest fields of the target / draft fields."""
    return dict(target=model_ref(target, "ctl.target", lang, policy), draft=model_ref(draft, "ctl.draft", lang, policy),
                trust_remote_code=policy.trust_remote_code)


@dataclass(frozen=True)
class Controls:
    """A view's control values as the page sends them, unchecked (Gradio passes them to a handler in
    field order: ``StepControls(*values)``); ``components`` lists a view's widgets in that order."""

    def components(self) -> list:
        return [getattr(self, f.name) for f in fields(self)]


@dataclass(frozen=True)
class StepControls(Controls):
    """Step by step's controls: ``width`` 1 means a chain of ``k``, more a full tree (for eagle/eagle3
    ``width`` is EAGLE-2's top-k and ``eagle_nodes`` the nodes it keeps); ``target`` and ``draft``
    replace the preset's models where the policy allows; ``auto`` lets the goodput controller verify
    as much of that shape as pays, step by step."""

    prompt: Any
    preset: Any
    drafter: Any
    k: Any
    width: Any
    temperature: Any
    seed: Any
    max_new_tokens: Any
    eagle_nodes: Any = None
    target: Any = None
    draft: Any = None
    auto: Any = False
    target_precision: Any = "float32"


@dataclass(frozen=True)
class CompareControls(Controls):
    """Compare's controls: the drafters (each in every shape, beside the baseline), the shapes as
    text ("4, 2x3, auto"), the decode settings, own models, and the timed rounds."""

    prompt: Any
    preset: Any
    drafters: Any
    shapes: Any
    temperature: Any
    seed: Any
    max_new_tokens: Any
    target: Any = None
    draft: Any = None
    repeats: Any = 1
    target_precision: Any = "float32"


def run_request(lang: str, presets: list[str], controls: StepControls, *,
                policy: ModelPolicy = ModelPolicy()) -> DecodeRequest:
    """Check the step-by-step controls; the run's DecodeRequest."""
    c = controls
    k = number(c.k, "ctl.k", lang, 1, MAX_DEPTH, integer=True)
    width = number(c.width, "ctl.width", lang, 1, MAX_WIDTH, integer=True)
    drafter = choice(c.drafter, DRAFTER_NAMES, "ctl.drafter", lang)
    options = {}
    if takes_option(drafter, "eagle_nodes") and c.eagle_nodes not in (None, ""):
        low, high = option_limits(drafter, "eagle_nodes")
        options["eagle_nodes"] = number(c.eagle_nodes, "ctl.eagle_n", lang, low, high, integer=True)
    return request(
        lang, policy, drafter, c.target, c.draft, **options,
        prompt=prompt_text(c.prompt, lang),
        preset=choice(c.preset, presets, "ctl.preset", lang),
        k=k,
        tree=None if width == 1 else (width, k),
        auto=c.auto is True,
        target_precision=precision(c.target_precision, lang),
        **decode_settings(lang, c.temperature, c.seed, c.max_new_tokens),
    )


def precision(value, lang: str) -> str:
    """The target precision chosen (float32 when the control is left out, as an older API call does)."""
    return choice(value or PRECISIONS[0], PRECISIONS, "ctl.precision", lang)


def decode_settings(lang: str, temperature, seed, max_new_tokens) -> dict:
    """The checked temperature, seed and token budget."""
    return dict(
        temperature=number(temperature, "ctl.temperature", lang, 0, PAGE_MAX_TEMPERATURE),
        seed=number(seed, "ctl.seed", lang, 0, PAGE_MAX_SEED, integer=True),
        max_new_tokens=number(max_new_tokens, "ctl.max_new_tokens", lang, 1, PAGE_MAX_NEW_TOKENS, integer=True),
    )


def shapes(value, lang: str) -> list[tuple]:
    """The comparison's shapes as (k, tree) pairs for ``DecodeRequest.of``, each read by ``DraftShape``:
    "4, 2x3, auto" -> [(4, None), (3, "2x3"), ("auto", None)]; "auto-tree" is (None, "auto")."""
    items = [item for item in re.split(r"[,\s;]+", str(value or "").strip().lower()) if item]
    if not items:
        raise UserError(t("err.shapes", lang, value=value))
    parsed = []
    for item in items:
        k, tree = DraftShape.k_tree(item)
        if "auto" not in (k, tree):
            try:
                shape = DraftShape.parse(k, tree, full_tree=False)  # the node limit is the drafter's, checked later
            except UserError:
                raise UserError(t("err.shapes", lang, value=value)) from None
            k, tree = shape.depth, shape.tree_text
        parsed.append((k, tree))
    return list(dict.fromkeys(parsed))


def compare_requests(lang: str, presets: list[str], controls: CompareControls, *,
                     policy: ModelPolicy = ModelPolicy()) -> list[DecodeRequest]:
    """The baseline first, then every chosen drafter in every shape, all on one target (the
    preset's, or ``target``)."""
    c = controls
    drafters = c.drafters
    if not isinstance(drafters, (list, tuple)):
        drafters = [drafters] if isinstance(drafters, str) else []
    if not drafters:
        raise UserError(t("err.no_drafters", lang))
    for name in drafters:
        choice(name, COMPARE_CHOICES, "ctl.drafter", lang)
    drafters = [name for name in COMPARE_CHOICES if name in drafters]  # the page's order, not the click order
    base = dict(prompt=prompt_text(c.prompt, lang), preset=choice(c.preset, presets, "ctl.preset", lang),
                target_precision=precision(c.target_precision, lang),
                **decode_settings(lang, c.temperature, c.seed, c.max_new_tokens))
    shape_list = shapes(c.shapes, lang)
    if 1 + len(drafters) * len(shape_list) > PAGE_MAX_COMPARE_RUNS:
        raise UserError(t("err.too_many_runs", lang, n=1 + len(drafters) * len(shape_list),
                          limit=PAGE_MAX_COMPARE_RUNS))
    requests = [request(lang, policy, BASELINE, c.target, c.draft, k=1, **base)]
    requests += [request(lang, policy, name, c.target, c.draft, k=k, tree=tree, **base)
                 for name in drafters for k, tree in shape_list]
    return requests
