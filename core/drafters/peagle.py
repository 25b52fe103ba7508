"""``peagle``: P-EAGLE, EAGLE-3 that drafts every token of a step in one forward.

EAGLE-3 drafts autoregressively: depth d needs the drafter's output at depth d-1, so a k-token
chain costs k drafter forwards (one catch-up, then one per level). P-EAGLE keeps EAGLE-3's
network -- the fused low/middle/high target features, one decoder layer, the reduced draft
vocabulary -- and adds ``parallel_tokens`` placeholder pairs, one per depth: the newest true feature
shifted by a learned offset, and a learned token embedding. Each step is **one** forward over::

    the pairs whose target features arrived since the last step   (feature t, token t+1)        -> token 1
    placeholder 1 .. placeholder k-1, at the positions after them  (feature t + offset_d, mask_d) -> tokens 2..k

Every placeholder attends to the committed context and to the placeholders before it, exactly as
it was trained (``core.train.eagle.unroll`` with placeholders in place of the drafter's own
outputs), so the outputs at the last real pair and at the k-1 placeholders guess the k tokens of
the step at once. The placeholders' cache entries are dropped as soon as the forward is done; the
real pairs stay, as EAGLE's catch-up keeps them.

Each depth's guess is the drafter's law for that position given the context only (not given the
tokens drafted before it), so a tree is their top-k per depth: EAGLE-2's expansion and pruning
with the same candidates under every parent (``Expansion``, cumulative confidence, ``eagle_nodes``
kept). Lossless exactly as ``eagle3``: the tree is a deterministic function of the committed
tokens and every node's draft law is one-hot on its token when sampling.
"""
from __future__ import annotations

import math

import torch

from core.common.errors import UserError
from core.drafters.base import Capabilities, DraftShape
from core.drafters.eagle import Eagle3Drafter, Expansion, Recipe
from core.drafters.eagle_net import run_segment

PARALLEL_TOKENS = 7  # placeholders a P-EAGLE drafter is trained with: steps of up to 8 tokens (``--k auto``'s chain)


class PEagleDrafter(Eagle3Drafter):
    """P-EAGLE on EAGLE-3's weights layout plus the placeholders; ``shape.depth`` tokens a step in
    one drafter forward (at most ``parallel_tokens + 1``), ``shape.width`` candidates per depth."""

    name = "peagle"
    recipe = Recipe(fused_layers=True, output_norm=True, ttt_steps=PARALLEL_TOKENS + 1, feature_weight=0.0,
                    parallel_tokens=PARALLEL_TOKENS)
    capabilities = Capabilities(drafts_full_tree=False, auto_tree=DraftShape(4, 6, auto=True))

    def __init__(self, shape: DraftShape, target, weights: str | None = None, block_size: int = 16,
                 eagle_nodes: int | None = None, half_products: bool = True, draft_vocab_only: bool = False):
        super().__init__(shape, target, weights, block_size, eagle_nodes, half_products, draft_vocab_only)
        self.anchor: torch.Tensor | None = None  # the fused feature of the newest position the target computed
        most = self.net.config.parallel_tokens + 1
        if self.depth > most:
            raise UserError(f"the peagle drafter in {self.model_path} drafts at most {most} tokens a step "
                            f"(asked for depth {self.depth})")

    def start(self, prompt_ids: list[int], capacity_tokens: int) -> None:
        super().start(prompt_ids, capacity_tokens)
        self.anchor = None

    def _scored(self, tokens: list[int], depth: int, temperature: float) -> Expansion:
        return self._expand_parallel(self._draft_all(tokens, depth), temperature)

    def _draft_all(self, tokens: list[int], depth: int) -> torch.Tensor:
        """The one drafter forward of a step: the new real pairs, then ``depth - 1`` placeholders.
        Returns the outputs that guess tokens 1..depth of the step, [depth, H]."""
        real = None
        if self.waiting:
            real = self.net.fuse_target([torch.cat(layer) for layer in zip(*self.waiting)])  # [n, H]
            self.waiting = []
            self.anchor = real[-1]
        features, embedded = self.net.placeholders(self.anchor, depth - 1)
        fresh = 0 if real is None else len(real)
        if fresh:
            ids = torch.tensor(tokens[self.fed + 1 : self.fed + 1 + fresh], device=real.device)
            features = torch.cat([real, features])
            embedded = torch.cat([torch.nn.functional.embedding(ids, self.net.embed_weight), embedded])
        if not len(features):  # a one-token step, no new pair: the root's guess is known
            return self.root_out[None]
        with self.counted_forward():
            out = run_segment(self.net, self.kv, features, embedded)
        self.kv.commit(list(range(fresh)))  # the real pairs stay, the placeholders go
        self.fed += fresh
        if fresh:
            self.root_out = out[fresh - 1]
        return torch.cat([self.root_out[None], out[fresh:]])

    def _expand_parallel(self, outs: torch.Tensor, temperature: float) -> Expansion:
        """EAGLE-2's expansion over the parallel guesses: at each depth the ``top_k`` best nodes of the
        level above get that depth's ``top_k`` candidates (the same under every parent)."""
        columns = self.net.columns if self.context is None else self.context.columns
        logits = columns.proposable(self.net.draft_logits(outs, self.context)).float()
        logprobs = torch.log_softmax(logits / (temperature if temperature > 0 else 1.0), dim=-1)  # [depth, columns]
        top = torch.topk(logprobs, self.top_k, dim=-1)
        tokens = columns.target_ids(top.indices).tolist()
        values = top.values.tolist()
        expansion = Expansion()
        frontier = [-1]
        for level in range(1, len(outs) + 1):
            level_nodes = []
            for parent in frontier:
                base = 0.0 if parent < 0 else expansion.scores[parent]
                if parent >= 0:
                    expansion.expanded[parent] = True
                for logprob, token in zip(values[level - 1], tokens[level - 1]):
                    level_nodes.append(expansion.add(token, parent, level, math.exp(logprob), base + logprob))
            frontier = expansion.best(level_nodes, self.top_k)
        return expansion
