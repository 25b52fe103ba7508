"""``none``: propose nothing, so every step is one plain target forward (the baseline)."""
from __future__ import annotations

from ..tree import DraftTree
from .base import ProposeContext


class NoDrafter:
    name = "none"
    model_path = None

    def __init__(self, **_):
        self.forwards = 0

    max_nodes = 0

    def start(self, prompt_ids: list[int], capacity_tokens: int) -> None:
        pass

    def propose(self, ctx: ProposeContext) -> DraftTree:
        return DraftTree()

    def commit(self, tree: DraftTree, accepted: tuple[int, ...]) -> None:
        pass

    def stop(self) -> None:
        pass

    def kv_summary(self) -> None:
        return None
