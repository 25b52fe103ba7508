"""``draft``: an independent small LM that shares the target's tokenizer proposes a chain or tree.

A draft over a reduced vocabulary (``LoadedModel.vocab_map``, e.g. 4,096 of Gemma's 262,144
tokens) reads target ids mapped to its own (a token outside it is read as "other") and its
logits are scattered back to target ids (-inf elsewhere).

Each depth of the tree is one draft forward over that level's nodes (tree attention in the
draft too); the first forward also catches the draft's cache up with tokens the target
committed since the last step. The draft owns a paged KV cache like the target's: nodes the
target accepted keep their slots, the rest are released.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch
from pydantic import Field

from core.drafters.base import (Capabilities, Drafter, DrafterInputs, DrafterOptions, DraftShape, ProposeContext,
                                pick_children)
from core.drafters.vocab import Columns, draft_rows
from core.common.errors import UserError
from core.models.loading import check_same_tokenizer
from core.runtime.forward import chain_parents, forward_segment
from core.runtime.kv_cache import PagedKVCache, RequestKV
from core.runtime.tree import DraftTree

SIZE_FOLDERS = {"xs": "draft-xs", "s": "draft", "l": "draft-l"}  # size -> folder next to the preset's draft


class DraftOptions(DrafterOptions):
    draft_size: Literal["xs", "s", "l"] | None = Field(
        None, description="which of the preset's draft models (default: s, the preset's draft)")


def draft_model_path(options: DraftOptions, inputs: DrafterInputs) -> str:
    """The draft model to load: the ``draft`` reference, a sized sibling of the preset's draft, or the preset's."""
    preset = inputs.preset
    if options.draft_size is not None:
        if inputs.draft_ref:
            raise UserError("pass either --draft PATH or --draft-size, not both")
        folder = Path(preset.draft).parent / SIZE_FOLDERS[options.draft_size] if preset.draft else None
        if folder is None or not (folder / "config.json").is_file():
            raise UserError(f"preset {preset.name!r} has no draft of size {options.draft_size!r}")
        return str(folder)
    path = inputs.draft_ref or preset.draft
    if path is None:
        raise UserError(f"drafter 'draft' needs a draft model: pass --draft PATH for preset {preset.name!r}")
    return path



class DraftModelDrafter(Drafter):
    name = "draft"
    Options = DraftOptions
    aliases = {"draft-xs": {"draft_size": "xs"}, "draft": {}, "draft-l": {"draft_size": "l"}}
    capabilities = Capabilities(uses_draft_model=True)

    @classmethod
    def build(cls, options: DraftOptions, inputs: DrafterInputs) -> "DraftModelDrafter":
        draft = inputs.load_model(draft_model_path(options, inputs))
        check_same_tokenizer(inputs.target, draft)
        return cls(inputs.shape, draft, inputs.target.vocab_size, inputs.block_size)

    def __init__(self, shape: DraftShape, draft, vocab_size: int, block_size: int = 16):
        super().__init__(shape)
        self.draft = draft  # models.LoadedModel
        self.model_path = draft.path
        self.block_size = block_size
        self.kv: RequestKV | None = None
        self.capacity_tokens = 0  # the run's largest sequence (``start``): the draft cache is sized for it
        self.synced = 0  # committed tokens whose K/V the draft holds
        self.fed: list[int] = []  # tree node of each pending draft-cache entry, in write order
        target_ids = self.to_draft = None
        if draft.vocab_map is not None:
            target_ids = torch.tensor(draft.vocab_map.target_ids, device=draft.model.device)  # [draft vocab]
            self.to_draft = draft_rows(target_ids, vocab_size, outside=draft.vocab_map.other_id)
        self.columns = Columns(target_ids, vocab_size)  # which target id each draft logit scores

    def _draft_ids(self, tokens: list[int]) -> list[int]:
        if self.to_draft is None:
            return tokens
        return self.to_draft[torch.tensor(tokens, dtype=torch.long, device=self.to_draft.device)].tolist()

    def start(self, prompt_ids: list[int], capacity_tokens: int) -> None:
        self.capacity_tokens = capacity_tokens
        self.kv = None  # made at the first draft: a run that never drafts (--k auto) holds no draft cache
        self.synced = 0
        self.fed = []

    def propose(self, ctx: ProposeContext) -> DraftTree:
        tree = DraftTree()
        depth = min(self.shape.depth, ctx.max_depth)
        if depth <= 0:
            return tree
        model = self.draft.model
        if self.kv is None:
            num_blocks = -(-self.capacity_tokens // self.block_size) + 1
            self.kv = PagedKVCache.for_model(model, num_blocks, self.block_size).new_request()
            self.kv.begin_step()  # made mid-step: its step log starts now, as a batch step would start it
        catch_up = ctx.tokens[self.synced :]
        with self.counted_forward():
            logits = forward_segment(model, self.kv, self._draft_ids(catch_up), chain_parents(len(catch_up)))
        self.kv.commit(list(range(len(catch_up))))
        self.synced += len(catch_up)

        self.fed = []
        fed_parents: list[int] = []  # segment parents of the fed entries
        frontier = [(-1, self.columns.proposable(logits[-1]))]
        for level in range(1, depth + 1):
            level_nodes = [
                tree.add(token, parent, prob, dist, proposer="draft")
                for parent, row in frontier
                for token, prob, dist in pick_children(row, self.shape.width, ctx.temperature, ctx.generator,
                                                        self.columns)
            ]
            if level == depth:
                break
            fed_parents = fed_parents + [
                -1 if tree.parents[n] < 0 else self.fed.index(tree.parents[n]) for n in level_nodes
            ]
            with self.counted_forward():
                logits = forward_segment(model, self.kv, self._draft_ids([tree.tokens[n] for n in level_nodes]),
                                         fed_parents)
            self.fed += level_nodes
            frontier = list(zip(level_nodes, self.columns.proposable(logits)))
        return tree

    def commit(self, tree: DraftTree, accepted: tuple[int, ...]) -> None:
        if self.kv is None:  # nothing drafted yet (e.g. a one-token budget): nothing to keep
            return
        keep = [self.fed.index(n) for n in accepted if n in self.fed]
        self.kv.commit(keep)
        self.synced += len(keep)
        self.fed = []

    def stop(self) -> None:
        if self.kv is not None:
            self.kv.release_all()

    def own_kv(self):
        return self.kv
