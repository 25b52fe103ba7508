"""``none``: propose nothing, so every step is one plain target forward (the baseline)."""
from __future__ import annotations

from .base import Drafter


class NoDrafter(Drafter):
    name = "none"

    def __init__(self, **_):
        super().__init__(shape=None)
