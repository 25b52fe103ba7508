"""Validation of every control value before it reaches the engine. A bad value raises UserError
with a message in the page's language; the engine validates again (e.g. tree size, context)."""
from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass
from pathlib import Path

from core import UserError
from core.drafters import BASELINE, lookup
from core.limits import (MAX_DEPTH, MAX_WIDTH, PAGE_MAX_COMPARE_RUNS, PAGE_MAX_MODEL_REF, PAGE_MAX_NEW_TOKENS,
                         PAGE_MAX_PROMPT_CHARS, PAGE_MAX_SEED, PAGE_MAX_TEMPERATURE)
from core.request import DecodeRequest, drafter_names

from .i18n import t

HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
DRAFTER_NAMES = drafter_names()
COMPARE_CHOICES = [name for name in DRAFTER_NAMES if name != BASELINE]  # draft-xs, draft, draft-l: three sizes


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
    if not lookup(drafter)[0].uses_draft_model:
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
        own = not no_own_models and (allow_own_models or is_loopback(host))
        return cls(own_models=own, trust_remote_code=trust_remote_code)


def is_loopback(host: str) -> bool:
    """localhost, 127.x.x.x or ::1."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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


def run_request(lang: str, presets: list[str], prompt, preset, drafter, k, width, temperature, seed,
                max_new_tokens, eagle_nodes=None, target=None, draft=None, auto=False, *,
                policy: ModelPolicy = ModelPolicy()) -> DecodeRequest:
    """Check the step-by-step controls; ``width`` 1 means a chain of ``k``, more a full tree (for
    eagle/eagle3 ``width`` is EAGLE-2's top-k and ``eagle_nodes`` the nodes it keeps); ``target`` and
    ``draft`` replace the preset's models where ``policy`` allows; ``auto`` lets the goodput
    controller verify as much of that shape as pays, step by step."""
    k = number(k, "ctl.k", lang, 1, MAX_DEPTH, integer=True)
    width = number(width, "ctl.width", lang, 1, MAX_WIDTH, integer=True)
    drafter = choice(drafter, DRAFTER_NAMES, "ctl.drafter", lang)
    options = {}
    if takes_option(drafter, "eagle_nodes") and eagle_nodes not in (None, ""):
        low, high = option_limits(drafter, "eagle_nodes")
        options["eagle_nodes"] = number(eagle_nodes, "ctl.eagle_n", lang, low, high, integer=True)
    return request(
        lang, policy, drafter, target, draft, **options,
        prompt=prompt_text(prompt, lang),
        preset=choice(preset, presets, "ctl.preset", lang),
        k=k,
        tree=None if width == 1 else (width, k),
        auto=auto is True,
        temperature=number(temperature, "ctl.temperature", lang, 0, PAGE_MAX_TEMPERATURE),
        seed=number(seed, "ctl.seed", lang, 0, PAGE_MAX_SEED, integer=True),
        max_new_tokens=number(max_new_tokens, "ctl.max_new_tokens", lang, 1, PAGE_MAX_NEW_TOKENS, integer=True),
    )


def shapes(value, lang: str) -> list[tuple]:
    """Parse the comparison's shapes into (k, tree) pairs, e.g. "4, 2x3, auto" -> [(4, None), (3, (2, 3)),
    ("auto", None)]; "auto-tree" is (None, "auto")."""
    items = [item for item in re.split(r"[,\s;]+", str(value or "").strip().lower()) if item]
    if not items:
        raise UserError(t("err.shapes", lang, value=value))
    parsed = []
    for item in items:
        tree = re.fullmatch(r"(\d+)x(\d+)", item)
        if tree:
            width = number(tree.group(1), "ctl.width", lang, 1, MAX_WIDTH, integer=True)
            depth = number(tree.group(2), "ctl.k", lang, 1, MAX_DEPTH, integer=True)
            parsed.append((depth, (width, depth) if width > 1 else None))
        elif item.isdigit():
            parsed.append((number(item, "ctl.k", lang, 1, MAX_DEPTH, integer=True), None))
        elif item in ("auto", "auto-tree"):
            parsed.append(("auto", None) if item == "auto" else (None, "auto"))
        else:
            raise UserError(t("err.shapes", lang, value=value))
    return list(dict.fromkeys(parsed))


def compare_requests(lang: str, presets: list[str], prompt, preset, drafters, shape_text, temperature, seed,
                     max_new_tokens, target=None, draft=None, *, policy: ModelPolicy = ModelPolicy()
                     ) -> list[DecodeRequest]:
    """The baseline first, then every chosen drafter in every shape, all on one target (the
    preset's, or ``target``)."""
    if not isinstance(drafters, (list, tuple)):
        drafters = [drafters] if isinstance(drafters, str) else []
    if not drafters:
        raise UserError(t("err.no_drafters", lang))
    for name in drafters:
        choice(name, COMPARE_CHOICES, "ctl.drafter", lang)
    drafters = [name for name in COMPARE_CHOICES if name in drafters]  # the page's order, not the click order
    base = dict(
        prompt=prompt_text(prompt, lang),
        preset=choice(preset, presets, "ctl.preset", lang),
        temperature=number(temperature, "ctl.temperature", lang, 0, PAGE_MAX_TEMPERATURE),
        seed=number(seed, "ctl.seed", lang, 0, PAGE_MAX_SEED, integer=True),
        max_new_tokens=number(max_new_tokens, "ctl.max_new_tokens", lang, 1, PAGE_MAX_NEW_TOKENS, integer=True),
    )
    shape_list = shapes(shape_text, lang)
    if 1 + len(drafters) * len(shape_list) > PAGE_MAX_COMPARE_RUNS:
        raise UserError(t("err.too_many_runs", lang, n=1 + len(drafters) * len(shape_list), limit=PAGE_MAX_COMPARE_RUNS))
    requests = [request(lang, policy, BASELINE, target, draft, k=1, **base)]
    requests += [request(lang, policy, name, target, draft, k=k, tree=tree, **base)
                 for name in drafters for k, tree in shape_list]
    return requests
