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
from dataclasses import dataclass
from time import perf_counter
from typing import Callable

import torch

from core.runtime.head import LMHead
from core.runtime.tree import DraftTree


LOOKAHEAD_ROWS: int | None = 4  # rows the head computes at once on a CPU: the row read and the drafted chain below
# it (None: every row of the verify at once, as on an accelerator)


class TargetView:
    """What the acceptance rules read of a verify: per row the target's argmax, and its law on demand.

    Rows follow the verify input ``[root] + tree nodes``: row 0 is the target after the root, row
    ``i + 1`` the target after node ``i``. Greedy decoding reads ``argmax_at`` on the rows its walk
    visits; sampling reads ``probs(row)`` there; a StepRecord reads ``node_probs`` (every parent row).

    A view of a verify (:meth:`from_head`) applies the LM head only to the rows read, so a verify
    of n drafted nodes pays the decoder body over all n + 1 rows but the head over the few its
    acceptance walk visits. The head of a small model with a large vocabulary is much of a verify
    (``core.runtime.head``: Gemma 3 270M's greedy head is ~15 ms at 1 row, ~25 at 8, ~60 at 25 on 2
    cores of an AVX2 CPU), and it is flat over the first few rows, so a row is computed together
    with the drafted chain below it (the drafter's first guess at each depth, its first child), up
    to ``LOOKAHEAD_ROWS`` rows: the rows the walk reads next if those guesses hold. (On an
    accelerator, where more rows cost next to nothing, the first read computes them all.) ``head_s`` is the
    time spent in the head so far (a verify's own time: ``finish_step`` adds it). The rows read and
    the order of reading do not change any row's value: each is the head applied to that row.
    """

    def __init__(self, rows: int, temperature: float, compute: Callable[[list[int]], tuple[torch.Tensor, list[int]]],
                 lookahead: Callable[[int], list[int]] = lambda row: [row],
                 finish: Callable[[torch.Tensor], torch.Tensor] | None = None):
        self.rows = rows
        self.temperature = float(temperature)  # > 0: the law is softmax(logits / temperature); 0: greedy
        self.finish = finish  # raw rows -> the model's logits (soft-capping...): a cheap route's product
        self.head_s = 0.0
        self._compute = compute  # rows -> (their logits or raw product [len(rows), vocab], their argmax)
        self._lookahead = lookahead  # a row -> the rows to compute with it (itself first)
        self._logits: dict[int, torch.Tensor] = {}
        self._argmax: dict[int, int] = {}

    @classmethod
    def of(cls, logits: torch.Tensor, temperature: float = 0.0,
           finish: Callable[[torch.Tensor], torch.Tensor] | None = None, argmax: list[int] | None = None) -> TargetView:
        """A view of logits already computed (``[rows, vocab]``: every row known)."""
        view = cls(len(logits), temperature, compute=None, finish=finish)
        view._store(range(len(logits)), logits, logits.argmax(dim=-1).tolist() if argmax is None else argmax)
        return view

    @classmethod
    def from_head(cls, head: LMHead, hidden: torch.Tensor, temperature: float, tree: DraftTree) -> TargetView:
        """The view of a verify of ``tree``: its last hidden states ``[1 + len(tree), hidden_size]``, the
        head applied as rows are read. Greedy decoding with a head that has a cheap route
        (``core.runtime.head``: bf16, fp16 or int8) takes its exact argmax from there, and the cheap
        logits for the records' target_prob; sampling reads the float32 logits."""
        greedy = not temperature and head.certified_argmax
        first_child = {}
        for node, parent in reversed(list(enumerate(tree.parents))):
            first_child[parent] = node  # the lowest index wins: the first child added

        at_once = LOOKAHEAD_ROWS if hidden.device.type == "cpu" else None  # an accelerator's costs the same over all

        def lookahead(row: int) -> list[int]:
            if at_once is None:
                return [row] + [other for other in range(len(hidden)) if other != row]
            rows, node = [row], row - 1
            while len(rows) < at_once and node in first_child:
                node = first_child[node]
                rows.append(node + 1)
            return rows

        def compute(rows: list[int]) -> tuple[torch.Tensor, list[int]]:
            if greedy:
                raw, argmax = head.greedy(hidden[rows])
                return raw, list(argmax)
            logits = head(hidden[rows])
            return logits, logits.argmax(dim=-1).tolist()

        return cls(len(hidden), temperature, compute, lookahead, head.finish if greedy and head.finishes else None)

    @classmethod
    def split_from_head(cls, head: LMHead, hidden: list[torch.Tensor], temperatures: list[float]) -> list[TargetView]:
        """One view per request of a batched verify, from ONE head product over all their rows (the
        cheap route when every request decodes greedily): over many requests one product beats
        reading each one's path."""
        sizes = [h.shape[0] for h in hidden]
        rows = torch.cat(hidden) if len(hidden) > 1 else hidden[0]
        if not any(temperatures) and head.certified_argmax:
            raw, argmax = head.greedy(rows)
            ends = list(itertools.accumulate(sizes))
            finish = head.finish if head.finishes else None
            return [cls.of(part, 0.0, finish, list(argmax[end - size:end]))
                    for part, end, size in zip(raw.split(sizes), ends, sizes)]
        return [cls.of(part, t) for part, t in zip(head(rows).split(sizes), temperatures)]

    def _store(self, rows, logits: torch.Tensor, argmax: list[int]) -> None:
        for i, row in enumerate(rows):
            self._logits[row] = logits[i]
            self._argmax[row] = argmax[i]

    def _read(self, rows: list[int]) -> None:
        """Compute the rows of ``rows`` not yet known, each with its lookahead, in one head product."""
        missing = [row for row in rows if row not in self._logits]
        if not missing:
            return
        if len(missing) == 1:
            missing = [row for row in self._lookahead(missing[0]) if row not in self._logits]
        start = perf_counter()
        logits, argmax = self._compute(missing)
        self.head_s += perf_counter() - start
        self._store(missing, logits, argmax)

    @property
    def _scale(self) -> float:
        return self.temperature if self.temperature > 0 else 1.0

    def _finished(self, rows: list[int]) -> torch.Tensor:
        """The rows' logits ``[len(rows), vocab]`` as the model's float32 logits."""
        self._read(rows)
        picked = torch.stack([self._logits[row] for row in rows])
        return picked.float() if self.finish is None else self.finish(picked)

    def argmax_at(self, row: int) -> int:
        """The target's greedy token after row ``row``."""
        self._read([row])
        return self._argmax[row]

    def probs(self, row: int) -> torch.Tensor:
        """target_probs after row ``row``: ``[vocab]``, summing to 1."""
        return torch.softmax(self._finished([row])[0] / self._scale, dim=-1)

    def node_probs(self, tree: DraftTree) -> list[float]:
        """Per node i, target_probs[parent(i) + 1][token i]: ``exp(z / T - logsumexp(row / T))``, over
        only the rows that are some node's parent (no full softmax)."""
        if not len(tree):
            return []
        rows = sorted({parent + 1 for parent in tree.parents})
        logits = self._finished(rows) / self._scale
        index = {row: i for i, row in enumerate(rows)}
        at = torch.tensor([index[parent + 1] for parent in tree.parents])
        picked = logits[at, torch.tensor(tree.tokens)]
        return torch.exp(picked - torch.logsumexp(logits, dim=-1)[at]).tolist()



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
    accepted: list[int] = []
    node, row = -1, 0
    while True:
        children = tree.children(node)
        best = target.argmax_at(row)
        match = next((c for c in children if tree.tokens[c] == best), None)
        if match is None:
            return Acceptance(tuple(accepted), best, _next_kind(tree, bool(children)))
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
