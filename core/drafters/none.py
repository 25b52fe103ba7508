"""``none``: propose nothing, so every step is one plain target forward (the baseline)."""
from __future__ import annotations

from core.drafters.base import Capabilities, Drafter, DrafterInputs, DrafterOptions


class NoDrafter(Drafter):
    name = "none"
    capabilities = Capabilities(drafts=False)

    def __init__(self):
        super().__init__(shape=None)

    @classmethod
    def build(cls, options: DrafterOptions, inputs: DrafterInputs) -> "NoDrafter":
        return cls()
