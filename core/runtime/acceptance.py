"""Acceptance rules: which drafted nodes the target keeps, and which token it adds.

Glossary (after vLLM's rejection sampler):

* **accepted** -- drafted tokens the target keeps, a path from the root down;
* **correction** -- the target's own token at the first node where no child was kept
  (the "recovered" token of vLLM);
* **bonus** -- the target's next token after a fully accepted path (a free extra token);
* **target** -- the plain next token when nothing was drafted (the baseline, or a drafter that
  found nothing to propose).

Both rules are pure functions of the tree and a ``TargetView`` of the verify; randomness comes
only from the ``torch.Generator`` passed in.

The view's rows follow the verify input ``[root] + tree nodes``: row 0 is the target's
next-token distribution after the root, row ``i + 1`` the one after node ``i``.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable

import torch

from core.runtime.head import LMHead
from core.runtime.tree import DraftTree


@dataclass(frozen=True)
class TargetView:
    """What the acceptance rules read of a verify: per row the target's argmax, and its law on demand.

    The logits stay where the forward left them (the model's device); nothing of vocabulary size is
    computed until a rule asks for it. Greedy decoding reads ``argmax`` only; sampling reads
    ``probs(row)`` for the rows it visits; a StepRecord reads ``node_probs``.
    """

    logits: torch.Tensor  # [1 + len(tree), vocab] float32 (may be a strided view); a cheap route's raw product
    temperature: float  # > 0: the law is softmax(logits / temperature); 0: greedy (the law at temperature 1)
    argmax: tuple[int, ...]  # [1 + len(tree)], the target's greedy token after each row
    finish: Callable[[torch.Tensor], torch.Tensor] | None = None  # raw rows -> the model's logits (soft-capping...),
    # applied only to the rows read: most verifies read none

    @classmethod
    def of(cls, logits: torch.Tensor, temperature: float = 0.0) -> TargetView:
        return cls(logits, float(temperature), tuple(logits.argmax(dim=-1).tolist()))

    @classmethod
    def from_head(cls, head: LMHead, hidden: torch.Tensor, temperature: float) -> TargetView:
        """The view of a verify's last hidden states ``[n, hidden_size]``. Greedy decoding with a head
        that has a cheap route (``core.runtime.head``: bf16, fp16 or int8) takes its exact argmax from there,
        and the cheap logits for the records' target_prob; sampling reads the float32 logits."""
        return cls.split_from_head(head, [hidden], [temperature])[0]

    @classmethod
    def split_from_head(cls, head: LMHead, hidden: list[torch.Tensor], temperatures: list[float]) -> list[TargetView]:
        """One view per request of a batched verify, from ONE head product over all their rows (the
        cheap route when every request decodes greedily)."""
        sizes = [h.shape[0] for h in hidden]
        rows = torch.cat(hidden) if len(hidden) > 1 else hidden[0]
        if not any(temperatures) and head.certified_argmax:
            raw, argmax = head.greedy(rows)
            ends = list(itertools.accumulate(sizes))
            finish = head.finish if head.finishes or raw.dtype != torch.float32 else None
            return [cls(part, 0.0, argmax[end - size:end], finish)
                    for part, end, size in zip(raw.split(sizes), ends, sizes)]
        return [cls.of(part, t) for part, t in zip(head(rows).split(sizes), temperatures)]

    @property
    def _scale(self) -> float:
        return self.temperature if self.temperature > 0 else 1.0

    def _rows(self, index) -> torch.Tensor:
        """``logits[index]`` as the model's float32 logits."""
        picked = self.logits[index]
        return picked.float() if self.finish is None else self.finish(picked)

    def probs(self, row: int) -> torch.Tensor:
        """target_probs after row ``row``: ``[vocab]``, summing to 1."""
        return torch.softmax(self._rows(row) / self._scale, dim=-1)

    def node_probs(self, tree: DraftTree) -> list[float]:
        """Per node i, target_probs[parent(i) + 1][token i]: ``exp(z / T - logsumexp(row / T))``, over
        only the rows that are some node's parent (no full softmax)."""
        if not len(tree):
            return []
        rows = sorted({parent + 1 for parent in tree.parents})
        log_total = dict(zip(rows, torch.logsumexp(self._rows(rows) / self._scale, dim=-1).tolist()))
        picked = self._rows(([p + 1 for p in tree.parents], tree.tokens)).tolist()
        return [math.exp(z / self._scale - log_total[p + 1]) for z, p in zip(picked, tree.parents)]


@dataclass(frozen=True)
class Acceptance:
    accepted: tuple[int, ...]  # node indices, root's child first
    next_token: int  # correction, bonus or plain target token
    next_kind: str  # "correction" | "bonus" | "target"


def _next_kind(tree: DraftTree, had_children: bool) -> str:
    if had_children:
        return "correction"
    return "bonus" if len(tree) else "target"


def greedy_accept(tree: DraftTree, target: TargetView) -> Acceptance:
    """Follow the child equal to the target's argmax; stop at the first miss or a leaf."""
    target_argmax = target.argmax
    accepted: list[int] = []
    node, row = -1, 0
    while True:
        children = tree.children(node)
        match = next((c for c in children if tree.tokens[c] == target_argmax[row]), None)
        if match is None:
            return Acceptance(tuple(accepted), target_argmax[row], _next_kind(tree, bool(children)))
        accepted.append(match)
        node, row = match, match + 1


def residual_probs(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    """norm(max(0, target_probs - draft_probs)): what is left to sample after a rejection."""
    residual = (target_probs - draft_probs).clamp_min(0)
    total = residual.sum()
    if total <= 0:  # target == draft: a rejection had probability 0, keep the target's law
        return target_probs
    return residual / total


def speculative_accept(tree: DraftTree, target: TargetView, generator: torch.Generator) -> Acceptance:
    """Speculative sampling (Leviathan et al., Chen et al.) extended to trees.

    At each node on the path, its children are tried in order (recursive rejection sampling,
    as in SpecInfer / RSD): child x drawn from draft_dist q is accepted with probability
    min(1, p(x) / q(x)); on rejection the target's law becomes residual_probs(p, q) for the next
    sibling. When every child is rejected the correction is drawn from what is left; after a
    leaf the bonus token is drawn from the target's law. Each sibling's ``draft_dists`` must be
    the law it was drawn from (with earlier siblings removed when drawn without replacement);
    then the emitted token follows the target's law exactly. Only the rows on the path are
    turned into distributions.
    """
    accepted: list[int] = []
    node, row = -1, 0
    while True:
        target_dist = target.probs(row)
        children = tree.children(node)
        chosen = None
        for child in children:
            draft_dist = tree.draft_dists[child]
            if draft_dist is None:
                raise ValueError("speculative_accept needs draft_dists for every node")
            token = tree.tokens[child]
            ratio = target_dist[token] / draft_dist[token]
            if torch.rand((), generator=generator, dtype=torch.float64).item() < min(1.0, ratio.item()):
                chosen = child
                break
            target_dist = residual_probs(target_dist, draft_dist)
        if chosen is None:
            token = int(torch.multinomial(target_dist, 1, generator=generator).item())
            return Acceptance(tuple(accepted), token, _next_kind(tree, bool(children)))
        accepted.append(chosen)
        node, row = chosen, chosen + 1


def node_status(tree: DraftTree, accepted: tuple[int, ...]) -> list[str]:
    """Per node: "accepted", "rejected" (tried against the target and refused) or "not_reached"."""
    on_path = set(accepted)
    status = []
    for i, parent in enumerate(tree.parents):
        if i in on_path:
            status.append("accepted")
        elif parent == -1 or parent in on_path:
            status.append("rejected")
        else:
            status.append("not_reached")
    return status
