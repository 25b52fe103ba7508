"""``ngram``: prompt lookup decoding. No model: find the last n tokens earlier in the prompt and
output so far, and propose what followed them there.

Two lookup rules: ``newest`` (the lab's: the longest suffix n-gram, its most recent earlier
occurrences) and ``vllm`` (vLLM's ``NgramProposer``: the longest suffix n-gram of at least
``ngram_min`` tokens, its earliest occurrence, one chain), so the lab can replay vLLM's drafts.

With a tree shape the W most recent distinct continuations become siblings (a trie: shared
prefixes are merged). Each proposal is deterministic, so its draft law is one-hot; the
recursive rejection rule then stays exact.
"""
from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from core.drafters.base import Drafter, DrafterInputs, DrafterOptions, DraftShape, ProposeContext
from core.runtime.tree import DraftTree


class NgramOptions(DrafterOptions):
    ngram_n: int = Field(3, ge=1, le=8, description="longest n-gram the ngram drafter matches")
    ngram_min: int = Field(1, ge=1, le=8, description="shortest n-gram the ngram drafter matches")
    ngram_lookup: Literal["newest", "vllm"] = Field(
        "newest", description="which earlier occurrence is continued: the newest ones, or vLLM's rule "
                              "(longest match, earliest occurrence, one chain)")


class NgramDrafter(Drafter):
    name = "ngram"
    Options = NgramOptions

    def __init__(self, shape: DraftShape, vocab_size: int, max_ngram: int = 3, min_ngram: int = 1,
                 lookup: str = "newest"):
        super().__init__(shape)
        self.vocab_size = vocab_size
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self.lookup = lookup

    @classmethod
    def build(cls, options: NgramOptions, inputs: DrafterInputs) -> "NgramDrafter":
        return cls(inputs.shape, inputs.target.vocab_size, options.ngram_n, options.ngram_min, options.ngram_lookup)

    def continuations(self, tokens: list[int], depth: int) -> list[list[int]]:
        if self.lookup == "vllm":
            found = vllm_lookup(tokens, self.min_ngram, self.max_ngram, depth)
            return [found] if found else []
        return self.newest(tokens, depth)

    def newest(self, tokens: list[int], depth: int) -> list[list[int]]:
        """Up to ``width`` continuations of the longest suffix n-gram that occurred before, newest first."""
        for n in range(min(self.max_ngram, len(tokens) - 1), self.min_ngram - 1, -1):
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


def vllm_lookup(tokens: list[int], min_ngram: int, max_ngram: int, k: int) -> list[int]:
    """vLLM's prompt lookup (``vllm/v1/spec_decode/ngram_proposer.py``, written plainly): the longest n,
    ``min_ngram <= n <= max_ngram``, such that the last n tokens occurred earlier with a token after
    them; of those occurrences the earliest; up to ``k`` tokens that followed it.

    Worked example: tokens ``[1, 2, 3, 9, 1, 2, 3, 7, 1, 2, 3]``, n in 2..3: the suffix ``1 2 3`` occurs
    at 0 and at 4; the earliest wins, so k=2 proposes ``[9, 1]`` (the newest rule would propose ``[7, 1]``).
    """
    total = len(tokens)
    best, start = 0, -1
    for s in range(total - 1):  # an occurrence starting at s, with at least one token after it
        n = max((n for n in range(1, min(max_ngram, total - 1 - s) + 1) if tokens[s : s + n] == tokens[total - n :]),
                default=0)
        if n > best:  # ties keep the earliest
            best, start = n, s
    if best < min_ngram:
        return []
    return tokens[start + best : start + best + k]
