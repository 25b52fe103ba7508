"""``DecodeRequest``: one typed, validated object per run.

Everything a run is set up from -- the prompt, the models, the drafter and its own options, the
draft shape, the decode settings -- lives here and is checked once, at the boundary. The CLI's
``generate`` flags, the app's controls and limits, the run's recorded ``settings``, trace headers
and labels are all derived from it (and from each drafter's ``Options``).

    request = DecodeRequest.of("我爱", preset="tiny", drafter="eagle3", tree="4x5", eagle_nodes=24)
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from core.drafters import (DEFAULT_DRAFTER, Drafter, DrafterOptions, DraftShape, drafter_names, lookup, option_fields,
                           option_owners)
from core.engine.decoder import DecodeSettings
from core.runtime.quantized import PRECISIONS  # noqa: F401  (the target_precision values, for the page)
from core.common.errors import UserError
from core.common.limits import (MAX_BLOCK_SIZE, MAX_MODEL_REF, MAX_NEW_TOKENS, MAX_PROMPT_CHARS, MAX_SEED, MAX_TEMPERATURE,
                         MAX_TREE_NODES, MIN_TEMPERATURE)


def _no_bool(value):
    if isinstance(value, bool):
        raise ValueError("expected a number, not true/false")
    return value


def _greedy_or_sampling(value: float) -> float:
    if 0 < value < MIN_TEMPERATURE:
        raise ValueError(f"must be 0 (greedy) or at least {MIN_TEMPERATURE} (sampling)")
    return value


def _utf8_text(value: str) -> str:
    if not value.strip():
        raise ValueError("the prompt is empty")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the prompt is not valid UTF-8 text") from None
    return value


Int = Annotated[int, BeforeValidator(_no_bool)]
Float = Annotated[float, BeforeValidator(_no_bool)]
Prompt = Annotated[str, Field(max_length=MAX_PROMPT_CHARS), AfterValidator(_utf8_text)]
ModelRef = Annotated[str, Field(min_length=1, max_length=MAX_MODEL_REF)]


class DecodeRequest(BaseModel):
    """A whole run's set-up. Build it with ``DecodeRequest.of(...)`` (flat keyword options, as the
    CLI and ``core.generate`` take them) or directly; any bad value is a ``UserError`` naming the field."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)

    prompt: Prompt
    preset: ModelRef = Field("tiny", description="tiny, gemma-270m, a local model folder, or a hub id")
    target: ModelRef | None = Field(None, description="target model folder or hub id (overrides the preset's)")
    draft: ModelRef | None = Field(None, description="draft model folder or hub id, for drafters that read one "
                                                     "(overrides the preset's)")
    drafter: str = Field(DEFAULT_DRAFTER, description="a drafter name (core.drafters)")
    options: DrafterOptions = Field(default_factory=DrafterOptions)  # the drafter's own ``Options``
    shape: DraftShape = DraftShape(1, 4)
    max_new_tokens: Int = Field(64, ge=1, le=MAX_NEW_TOKENS, description="how many new tokens to decode")
    temperature: Annotated[Float, AfterValidator(_greedy_or_sampling)] = Field(
        0.0, ge=0.0, le=MAX_TEMPERATURE, allow_inf_nan=False,
        description=f"0 = greedy; {MIN_TEMPERATURE} to {MAX_TEMPERATURE} = speculative sampling")
    seed: Int = Field(0, ge=0, le=MAX_SEED, description="sampling seed (runs are reproducible from it)")
    block_size: Int = Field(16, ge=1, le=MAX_BLOCK_SIZE, description="KV cache block size in tokens")
    device: str = Field("auto", pattern=r"^(auto|cpu|cuda(:\d{1,2})?)$",
                        description="auto (CUDA if available), cpu or cuda")
    trust_remote_code: Annotated[bool, Field(strict=True)] = Field(
        False, description="allow model code shipped with the model folder / hub repo")
    target_precision: Literal["float32", "int8"] = Field(
        "float32", description="the target body's arithmetic on CPU: float32, or int8 weights with per-row "
                               "activations (a target of its own; core.runtime.quantized)")

    @model_validator(mode="after")
    def _drafter_fits(self) -> "DecodeRequest":
        cls, _ = lookup(self.drafter)
        if not isinstance(self.options, cls.Options):
            raise ValueError(f"drafter {self.drafter!r} takes {cls.Options.__name__}, "
                             f"not {type(self.options).__name__}")
        self.shape.validate(cls.capabilities.drafts_full_tree)
        return self

    # ---- construction from flat options ---------------------------------------------------------
    @classmethod
    def of(cls, prompt: str, preset: str = "tiny", drafter: str = DEFAULT_DRAFTER, k: int | str = 4, tree=None,
           auto: bool = False, **flat: Any) -> "DecodeRequest":
        """From flat keyword options: request fields (``max_new_tokens``, ``temperature``, ...), the
        shape as ``k`` / ``tree`` ("WxD" or (W, D); ``k="auto"`` or ``tree="auto"`` for the goodput
        controller with the drafter's largest shape, or ``auto=True`` with the given shape as its
        limit) and the drafter's own options by field name
        (a drafter option left ``None`` takes its default, as an unset command-line flag does)."""
        if not isinstance(drafter, str):
            raise UserError(f"drafter must be a name (got {drafter!r})")
        drafter_cls, fixed = lookup(drafter)
        own = {name: flat.pop(name) for name in list(flat) if name in option_fields()}
        unknown = set(flat) - set(cls.model_fields)
        if unknown:
            raise UserError(f"unknown option(s): {', '.join(sorted(unknown))}")
        options = _drafter_options(drafter, drafter_cls, fixed, {k_: v for k_, v in own.items() if v is not None})
        capabilities = drafter_cls.capabilities
        shape = DraftShape.parse(k, tree, capabilities.drafts_full_tree, auto=auto, auto_tree=capabilities.auto_tree)
        return cls.checked(prompt=prompt, preset=preset, drafter=drafter, options=options, shape=shape, **flat)

    @classmethod
    def checked(cls, **fields: Any) -> "DecodeRequest":
        """``DecodeRequest(**fields)`` with a validation failure turned into a UserError."""
        try:
            return cls(**fields)
        except ValidationError as e:
            raise UserError(validation_message(e)) from None

    # ---- what is derived from it ----------------------------------------------------------------
    @property
    def drafter_class(self) -> type[Drafter]:
        return lookup(self.drafter)[0]

    def decode_settings(self, record: bool = True, inspect: bool = False) -> DecodeSettings:
        return DecodeSettings(max_new_tokens=self.max_new_tokens, temperature=self.temperature, seed=self.seed,
                              block_size=self.block_size, record=record, inspect=inspect)

    def settings(self, settings: DecodeSettings) -> dict[str, Any]:
        """The run's recorded ``settings``: decode settings, shape, and every drafter option (None
        where this drafter has no such option)."""
        return {
            **asdict(settings),
            "k": self.shape.depth,
            "tree": self.shape.tree_text,
            "auto": self.shape.auto,
            "target_precision": self.target_precision,
            **dict.fromkeys(option_fields()),
            **self.options.model_dump(),
        }

    @property
    def max_nodes(self) -> int:
        """The most draft nodes one verify of this run may hold (0 for the baseline)."""
        if not self.drafter_class.capabilities.drafts:
            return 0
        return min(self.options.node_limit() or self.shape.num_nodes, MAX_TREE_NODES)

    def label(self) -> str:
        """A short name for tables and legends, e.g. ``eagle3 · tree 4x5 · N=24``."""
        if not self.drafter_class.capabilities.drafts:
            return self.drafter
        return " · ".join([self.drafter, self.shape.label, *self.options.labels()])


def split_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """A drafter spec as used by the bench and the batch sweep -- a name, optionally ``:SHAPE`` (k,
    WxD, auto or auto-tree: ``DraftShape.k_tree``) and ``:option=value`` parts -- as (name, flat options for ``of``).
    ``"eagle3:4x5:eagle_nodes=24"`` -> ``("eagle3", {"k": None, "tree": "4x5", "eagle_nodes": "24"})``."""
    name, *parts = spec.split(":")
    flat: dict[str, Any] = {}
    for part in parts:
        if "=" in part:
            key, value = part.split("=", 1)
            flat[key] = value
        else:
            flat.update(zip(("k", "tree"), DraftShape.k_tree(part)))
    return name, flat


def _drafter_options(name: str, drafter_cls: type[Drafter], fixed: dict, given: dict) -> DrafterOptions:
    """The drafter's ``Options`` from the options given, refusing options of other drafters and
    ones that contradict what the drafter's name fixes (``draft-xs`` fixes ``draft_size``)."""
    own_fields = drafter_cls.Options.model_fields
    for field_name in given:
        if field_name not in own_fields:
            owners = " or ".join(option_owners(field_name))
            raise UserError(f"--{flag(field_name)} applies to --drafter {owners}, not {name}")
    for field_name, value in fixed.items():
        if given.get(field_name, value) != value:
            raise UserError(f"--drafter {name} already sets --{flag(field_name)} {value}; "
                            f"drop --{flag(field_name)} {given[field_name]}")
    try:
        return drafter_cls.Options(**{**given, **fixed})
    except ValidationError as e:
        raise UserError(validation_message(e)) from None


def flag(field_name: str) -> str:
    """A field's command-line spelling: ``eagle_nodes`` -> ``eagle-nodes``."""
    return field_name.replace("_", "-")


def validation_message(error: ValidationError, as_flags: bool = False) -> str:
    """One line per failing field: ``field: what is wrong (got value)`` (``--field-name: ...`` with ``as_flags``,
    for settings read from command-line flags)."""
    lines = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "request"
        if as_flags and item["loc"]:
            where = "--" + flag(str(item["loc"][0]))
        message = item["msg"].removeprefix("Value error, ")
        got = item.get("input")
        shown = repr(got) if len(repr(got)) <= 60 else repr(got)[:57] + "..."
        lines.append(f"{where}: {message}" + ("" if item["type"] == "missing" else f" (got {shown})"))
    return "; ".join(lines)


__all__ = ["DecodeRequest", "drafter_names", "flag", "validation_message"]
