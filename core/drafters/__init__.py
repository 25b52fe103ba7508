"""Drafters, chosen by name from one registry. Each subclasses ``base.Drafter``."""
from __future__ import annotations

from ..errors import UserError
from .base import DraftShape, Drafter, ProposeContext
from .draft_model import DraftModelDrafter
from .eagle import Eagle3Drafter, EagleDrafter
from .medusa import MedusaDrafter
from .ngram import NgramDrafter
from .none import NoDrafter

DRAFTERS: dict[str, type] = {
    "none": NoDrafter,
    "draft": DraftModelDrafter,
    "ngram": NgramDrafter,
    "medusa": MedusaDrafter,
    "eagle": EagleDrafter,
    "eagle3": Eagle3Drafter,
}
NEEDS_DRAFT_MODEL = {"draft"}


def drafter_class(name: str) -> type:
    if name not in DRAFTERS:
        raise UserError(f"unknown drafter {name!r}: use one of {', '.join(DRAFTERS)}")
    return DRAFTERS[name]


__all__ = ["DRAFTERS", "NEEDS_DRAFT_MODEL", "DraftShape", "Drafter", "ProposeContext", "drafter_class"]
