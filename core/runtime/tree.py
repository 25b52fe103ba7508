"""Draft trees as data, and the pure functions that turn them into attention masks and positions.

A draft tree hangs under a **root**: the last committed token, whose K/V the target has not
computed yet. Nodes are stored in breadth-first order; ``parents[i]`` is the index of node i's
parent, or -1 when its parent is the root. A chain of k tokens is the tree
``parents = [-1, 0, 1, ..., k-2]``.

Worked example -- root "我", children "爱" (0) and "是" (1), "爱" has child "中" (2)::

    parents = [-1, -1, 0]      depths = [1, 1, 2]

    verify input  = [root, 爱, 是, 中]           position ids = n_past + [0, 1, 1, 2]
    mask (1 = may attend), columns: committed prefix | root 爱 是 中
        root   1...1 | 1 0 0 0
        爱     1...1 | 1 1 0 0
        是     1...1 | 1 0 1 0
        中     1...1 | 1 1 0 1
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class DraftTree:
    """What a drafter proposes: tokens under the root, parent links, and the draft's belief.

    ``draft_probs[i]`` is the draft's probability of ``tokens[i]`` given its ancestors (q of the
    papers). ``draft_dists[i]``, needed only for sampling, is the full distribution node i was
    drawn from (``[vocab]``, already excluding siblings drawn before it).
    ``proposer[i]`` says which part of the drafter proposed node i (e.g. "draft", "ngram").
    """

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    draft_probs: list[float] = field(default_factory=list)
    draft_dists: list[torch.Tensor | None] = field(default_factory=list)
    proposer: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.tokens)

    def add(self, token: int, parent: int, draft_prob: float, draft_dist=None, proposer: str = "") -> int:
        if parent >= len(self.tokens):
            raise ValueError("a parent must come before its children")
        self.tokens.append(int(token))
        self.parents.append(int(parent))
        self.draft_probs.append(float(draft_prob))
        self.draft_dists.append(draft_dist)
        self.proposer.append(proposer)
        return len(self.tokens) - 1

    @property
    def depths(self) -> list[int]:
        return node_depths(self.parents)

    def children(self, parent: int) -> list[int]:
        """Children of ``parent`` (-1 = root) in the order they were added."""
        return [i for i, p in enumerate(self.parents) if p == parent]

    def path_to(self, node: int) -> list[int]:
        """Node indices from the root's child down to ``node``."""
        path = []
        while node != -1:
            path.append(node)
            node = self.parents[node]
        return path[::-1]


def node_depths(parents: list[int]) -> list[int]:
    """Depth of each node; children of the root have depth 1."""
    depths: list[int] = []
    for i, parent in enumerate(parents):
        if parent >= i:
            raise ValueError("parents must point to earlier nodes")
        depths.append(1 if parent < 0 else depths[parent] + 1)
    return depths


def ancestor_matrix(parents: list[int]) -> torch.Tensor:
    """``[n, n]`` bool: entry (i, j) is True when j is i itself or one of its ancestors."""
    n = len(parents)
    visible = torch.eye(n, dtype=torch.bool)
    for i, parent in enumerate(parents):
        if parent >= 0:
            visible[i] |= visible[parent]
    return visible


def with_root(parents: list[int]) -> list[int]:
    """Parents for the verify input ``[root] + nodes``: the root becomes node 0."""
    return [-1] + [p + 1 for p in parents]


def attention_mask(n_prefix: int, parents: list[int], n_query: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """Additive 4D mask for a forward whose K/V are ``prefix + segment``.

    ``parents`` describes the whole segment written so far this step (earlier forwards' part
    first); the last ``n_query`` segment entries are this forward's queries. Every query sees
    the whole prefix plus its own ancestors in the segment.

    Returns ``[1, 1, n_query, n_prefix + len(parents)]``: 0 where attention is allowed,
    the dtype's minimum where it is not.
    """
    n_segment = len(parents)
    if n_segment == 1:  # a plain step's one token (or a first catch-up token): it sees every key
        return torch.zeros(1, 1, 1, n_prefix + 1, dtype=dtype, device=device)
    visible = torch.ones(n_query, n_prefix + n_segment, dtype=torch.bool)
    visible[:, n_prefix:] = ancestor_matrix(parents)[n_segment - n_query :]
    mask = torch.zeros(visible.shape, dtype=dtype)
    mask.masked_fill_(~visible, torch.finfo(dtype).min)
    return mask[None, None].to(device)


def position_ids(n_prefix: int, parents: list[int], n_query: int, device=None) -> torch.Tensor:
    """``[1, n_query]`` positions of the last ``n_query`` segment entries: prefix length + depth - 1.

    In a segment whose first entry has no parent (a chain of catch-up tokens, or the verify
    root) the first entry sits right after the prefix.
    """
    depths = node_depths(parents)
    positions = [n_prefix + d - 1 for d in depths[len(parents) - n_query :]]
    return torch.tensor([positions], dtype=torch.long, device=device)
