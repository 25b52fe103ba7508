"""``ngram``: prompt lookup decoding. No model: find the last n tokens earlier in the prompt and
output so far, and propose what followed them there.

With a tree shape the W most recent distinct continuations become siblings (a trie: shared
prefixes are merged). Each proposal is deterministic, so its draft law is one-hot; the
recursive rejection rule then stays exact.
"""
from __future__ import annotations

import torch
from pydantic import Field

from core.drafters.base import Drafter, DrafterInputs, DrafterOptions, DraftShape, ProposeContext
from core.runtime.tree import DraftTree


class NgramOptions(DrafterOptions):
    ngram_n: int = Field(3, ge=1, le=8, description="longest n-gram the ngram drafter matches")


class NgramDrafter(Drafter):
    name = "ngram"
    Options = NgramOptions

    def __init__(self, shape: DraftShape, vocab_size: int, max_ngram: int = 3):
        super().__init__(shape)
        self.vocab_size = vocab_size
        self.max_ngram = max_ngram

    @classmethod
    def build(cls, options: NgramOptions, inputs: DrafterInputs) -> "NgramDrafter":
        return cls(inputs.shape, inputs.target.vocab_size, options.ngram_n)

    def continuations(self, tokens: list[int], depth: int) -> list[list[int]]:
        """Up to ``width`` continuations of the longest suffix n-gram that occurred before, newest first."""
        for n in range(min(self.max_ngram, len(tokens) - 1), 0, -1):
            suffix = tokens[-n:]
            found: list[list[int]] = []
            # start positions of earlier occurrences, newest first; the suffix itself is excluded
            for start in range(len(tokens) - n - 1, -1, -1):
                if tokens[start : start + n] == suffix:
                    follow = tokens[start + n : start + n + depth]
                    if follow and follow not in found:
                        found.append(follow)
                        if len(found) == self.shape.width:
                            return found
            if found:
                return found
        return []

    def propose(self, ctx: ProposeContext) -> DraftTree:
        tree = DraftTree()
        depth = min(self.shape.depth, ctx.max_depth)
        if depth <= 0:
            return tree
        need_dists = ctx.temperature > 0
        for continuation in self.continuations(ctx.tokens, depth):
            parent = -1
            for token in continuation:
                existing = next((c for c in tree.children(parent) if tree.tokens[c] == token), None)
                if existing is None:
                    dist = None
                    if need_dists:
                        dist = torch.zeros(self.vocab_size)
                        dist[token] = 1.0
                    existing = tree.add(token, parent, 1.0, dist, proposer="ngram")
                parent = existing
        return tree
