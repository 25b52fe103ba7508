"""Drafters, chosen by name from one registry. Each subclasses ``base.Drafter`` and owns its
options (``Drafter.Options``); a new drafter is one module plus one line in ``DRAFTERS``."""
from __future__ import annotations

from pydantic.fields import FieldInfo

from core.drafters.base import Capabilities, Drafter, DrafterInputs, DrafterOptions, DraftShape, ProposeContext
from core.drafters.draft_model import DraftModelDrafter
from core.drafters.eagle import Eagle3Drafter, EagleDrafter
from core.drafters.hybrid import HybridDrafter
from core.drafters.medusa import MedusaDrafter
from core.drafters.ngram import NgramDrafter
from core.drafters.none import NoDrafter
from core.drafters.peagle import PEagleDrafter
from core.common.errors import UserError

DRAFTERS: dict[str, type[Drafter]] = {
    cls.name: cls for cls in (NoDrafter, DraftModelDrafter, NgramDrafter, MedusaDrafter, EagleDrafter, Eagle3Drafter,
                              PEagleDrafter, HybridDrafter)
}
BASELINE = NoDrafter.name  # plain decoding through the same engine: what speedups are measured against

DEFAULT_DRAFTER = DraftModelDrafter.name  # what a request drafts with when it names no drafter


def lookup(name: str) -> tuple[type[Drafter], dict]:
    """The drafter class a name asks for, and the options the name fixes (``draft-xs``: size xs)."""
    for cls in DRAFTERS.values():
        if name in cls.names():
            return cls, dict(cls.aliases.get(name, {}))
    raise UserError(f"unknown drafter {name!r}: use one of {', '.join(drafter_names())}")


def drafter_names() -> list[str]:
    """Every name a run may ask for, in the order the app shows them."""
    return [name for cls in DRAFTERS.values() for name in cls.names()]


def option_fields() -> dict[str, FieldInfo]:
    """Every drafter option by field name (first definition), for flags and recorded settings."""
    fields: dict[str, FieldInfo] = {}
    for cls in DRAFTERS.values():
        for name, info in cls.Options.model_fields.items():
            fields.setdefault(name, info)
    return fields


def option_owners(field_name: str) -> list[str]:
    """The drafters that take option ``field_name``."""
    return [cls.name for cls in DRAFTERS.values() if field_name in cls.Options.model_fields]


__all__ = ["BASELINE", "Capabilities", "DEFAULT_DRAFTER", "DRAFTERS", "DraftModelDrafter", "DraftShape", "Drafter",
           "DrafterInputs", "DrafterOptions", "HybridDrafter", "NgramDrafter", "ProposeContext", "drafter_names", "lookup",
           "option_fields", "option_owners"]
