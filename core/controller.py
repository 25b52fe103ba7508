"""The goodput controller (``--k auto`` / ``--tree auto``): before each verify, decide how much of
the draft to send -- all of it, a part, or nothing -- to maximise expected tokens per second.

It wraps any drafter. Each step:

1. **whether to draft at all** -- drafting costs time before anything is known. When the steps
   that drafted have yielded fewer tokens per second than plain decoding is expected to
   (``1 / forward(1)``), the controller stops drafting and probes again after 1, 2, 4, ... 16
   plain steps. A drafter that costs (almost) nothing (n-gram lookup) is always asked.
2. **how much to verify** -- the drafter proposes its largest tree. Each node gets an acceptance
   chance ``a(q)`` from its draft confidence q, calibrated on this run: the share of reached
   nodes with a similar q that the target accepted (a Beta prior centred on q itself, so an
   uncalibrated drafter starts by being believed). A node's chance to be kept is the product of
   ``a`` along its path, and ``1 + sum`` over the chosen nodes is the expected tokens of the step.
   Nodes are taken best-first (a node only after its parent and its earlier siblings, so the
   sampling rule's sibling order stays intact) and the prefix with the most expected tokens per
   second of verify, ``(1 + E) / (forward(1) * v(n + 1))`` with v from ``core.cost``, is kept --
   possibly none: then the step is a plain decode. When the draft's tokens were sampled
   (temperature > 0, a draft model), a node is judged by its depth's acceptance so far instead of
   its own q: dropping a node because of its own draw would bias the output.

Verify time is the cost curve scaled by what this run's verifies actually took. The decision of
every step (nodes offered and chosen, expected tokens and gain, the reason) goes into its
StepRecord (``DecisionRecord``); the realised gain is filled in from the step's real timings.
Lossless: pruning a draft never changes what the target would accept from what remains.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from time import perf_counter

from .cost import CostCurve
from .drafters.base import Drafter, ProposeContext, Wrapper
from .records import DecisionRecord
from .tree import DraftTree

BINS = 10  # draft-confidence bins of the calibration
PRIOR_WEIGHT = 2.0  # pseudo-observations of the prior a(q) = q
MAX_PROBE_GAP = 16  # plain steps at most between two drafting probes
CHEAP_DRAFT_S = 1e-3  # a drafter this fast is always asked


@dataclass
class Calibration:
    """a(q): acceptance of a reached node against its draft confidence q, learned on the run."""

    hits: list[float] = field(default_factory=lambda: [0.0] * BINS)
    trials: list[float] = field(default_factory=lambda: [0.0] * BINS)
    depth_hits: list[float] = field(default_factory=list)  # the same, by depth (for sampled drafts)
    depth_trials: list[float] = field(default_factory=list)

    def bin(self, q: float) -> int:
        return min(BINS - 1, max(0, int(q * BINS)))

    def __call__(self, q: float) -> float:
        b = self.bin(q)
        return (self.hits[b] + PRIOR_WEIGHT * q) / (self.trials[b] + PRIOR_WEIGHT)

    def observe(self, q: float, depth: int, accepted: bool) -> None:
        b = self.bin(q)
        self.trials[b] += 1
        self.hits[b] += accepted
        while len(self.depth_trials) < depth:
            self.depth_trials.append(0.0)
            self.depth_hits.append(0.0)
        self.depth_trials[depth - 1] += 1
        self.depth_hits[depth - 1] += accepted

    def at_depth(self, depth: int) -> float:
        """Acceptance of reached nodes at ``depth`` on this run (prior: one half)."""
        hits = self.depth_hits[depth - 1] if depth <= len(self.depth_hits) else 0.0
        trials = self.depth_trials[depth - 1] if depth <= len(self.depth_trials) else 0.0
        return (hits + PRIOR_WEIGHT * 0.5) / (trials + PRIOR_WEIGHT)


def _sampled(tree: DraftTree) -> bool:
    """Whether the tree's tokens were drawn at random (a draft law that is not one-hot)."""
    return any(dist is not None and float(dist.max()) < 1.0 for dist in tree.draft_dists)


def best_first(tree: DraftTree, chance: list[float]) -> list[int]:
    """Nodes in the order the controller would add them: highest path chance first, a node only
    once its parent and its earlier siblings are in."""
    children: dict[int, list[int]] = {}
    for node, parent in enumerate(tree.parents):
        children.setdefault(parent, []).append(node)
    path = [0.0] * len(tree)
    for node, parent in enumerate(tree.parents):
        path[node] = chance[node] * (1.0 if parent < 0 else path[parent])
    order, frontier = [], list(children.get(-1, [])[:1])
    while frontier:
        node = max(frontier, key=lambda n: (path[n], -n))
        frontier.remove(node)
        order.append(node)
        siblings = children[tree.parents[node]]
        position = siblings.index(node)
        frontier += siblings[position + 1 : position + 2] + children.get(node, [])[:1]
    return order


def subtree(tree: DraftTree, keep: list[int]) -> DraftTree:
    """The nodes ``keep`` (parents before children) as a tree of their own, in ``keep``'s order."""
    index = {node: i for i, node in enumerate(keep)}
    out = DraftTree()
    for node in keep:
        parent = tree.parents[node]
        out.add(tree.tokens[node], -1 if parent < 0 else index[parent], tree.draft_probs[node],
                tree.draft_dists[node], tree.proposer[node])
    return out


class GoodputController(Wrapper):
    """Wraps ``inner`` and prunes each of its drafts to the expected-goodput-best prefix."""

    def __init__(self, inner: Drafter, curve: CostCurve):
        super().__init__(inner.shape, inner)
        self.curve = curve
        self.name = inner.name
        self.max_nodes = inner.max_nodes

    # ---- the run ------------------------------------------------------------------------------
    def start(self, prompt_ids: list[int], capacity_tokens: int) -> None:
        super().start(prompt_ids, capacity_tokens)
        self.calibration = Calibration()
        self.verify_scale = 1.0  # this run's verify seconds / the curve's
        self.draft_s = 0.0  # typical drafting seconds per drafting step
        self.drafting_rate: float | None = None  # tokens per second of the steps that drafted
        self.plain_steps, self.probe_gap = 0, 1
        self.proposed: DraftTree | None = None
        self.kept: list[int] = []
        self.last_decision: DecisionRecord | None = None

    def propose(self, ctx: ProposeContext) -> DraftTree:
        self.proposed, self.kept = None, []
        plain_s = self._verify_s(1)
        if ctx.max_depth <= 0 or not self._should_draft(plain_s):
            self.plain_steps += 1
            self.last_decision = DecisionRecord(0, 0, 1.0, 1.0, "off", round(plain_s, 6))
            return DraftTree()
        start = perf_counter()
        tree = self.inner.propose(ctx)
        self.forwards = self.inner.forwards
        draft_s = perf_counter() - start
        self.draft_s = draft_s if self.draft_s == 0 else 0.8 * self.draft_s + 0.2 * draft_s
        self.proposed = tree
        self.kept, expected, gain = self._choose(tree, plain_s, sampled=_sampled(tree))
        reason = "empty" if not len(tree) else ("all" if len(self.kept) == len(tree) else
                                                 "part" if self.kept else "none")
        self.last_decision = DecisionRecord(len(tree), len(self.kept), round(expected, 4), round(gain, 4), reason,
                                            round(plain_s, 6))
        self._verify_start = perf_counter()
        return subtree(tree, self.kept)

    def commit(self, tree: DraftTree, accepted: tuple[int, ...]) -> None:
        if self.proposed is None:
            return
        verify_s = perf_counter() - self._verify_start
        self._learn(tree, accepted, verify_s)
        self.inner.commit(self.proposed, tuple(self.kept[i] for i in accepted))

    def decision(self) -> DecisionRecord | None:
        return self.last_decision

    # ---- the decision -------------------------------------------------------------------------
    def _verify_s(self, n: int) -> float:
        return self.curve.seconds(n) * self.verify_scale

    def _should_draft(self, plain_s: float) -> bool:
        if self.draft_s < CHEAP_DRAFT_S or self.drafting_rate is None or self.drafting_rate * plain_s >= 1.0:
            self.probe_gap = 1
            return True
        if self.plain_steps >= self.probe_gap:  # probe: has drafting become worth it again?
            self.plain_steps, self.probe_gap = 0, min(2 * self.probe_gap, MAX_PROBE_GAP)
            return True
        return False

    def _choose(self, tree: DraftTree, plain_s: float, sampled: bool = False) -> tuple[list[int], float, float]:
        """The best-first prefix of ``tree`` with the most expected tokens per verify second; returns
        (nodes kept, expected tokens, expected gain over a plain step).

        ``sampled``: the draft's tokens were drawn at random (a draft model at temperature > 0). Then
        whether a node is verified must not depend on the node's own draw -- keeping only the
        confident draws would bias the output away from the target's law -- so every node is judged
        by its depth's acceptance on this run so far, which its draw does not touch."""
        depths = tree.depths
        chance = ([self.calibration.at_depth(d) for d in depths] if sampled else
                  [self.calibration(q) for q in tree.draft_probs])
        order = best_first(tree, chance)
        path = {}
        best, best_rate, expected = 0, 1.0 / plain_s, 1.0
        total = 1.0
        for i, node in enumerate(order, start=1):
            parent = tree.parents[node]
            path[node] = chance[node] * (1.0 if parent < 0 else path[parent])
            total += path[node]
            rate = total / self._verify_s(i + 1)
            if rate > best_rate:
                best, best_rate, expected = i, rate, total
        return sorted(order[:best]), expected, best_rate * plain_s

    def _learn(self, tree: DraftTree, accepted: tuple[int, ...], verify_s: float) -> None:
        """Calibrate a(q) on the reached nodes; rescale the cost curve; update the drafting rate."""
        kept, depths = set(accepted), tree.depths
        for node, parent in enumerate(tree.parents):
            if parent < 0 or parent in kept:  # reached: its parent was the root or was accepted
                self.calibration.observe(tree.draft_probs[node], depths[node], node in kept)
        if len(tree):
            scale = verify_s / self.curve.seconds(len(tree) + 1)
            self.verify_scale = 0.8 * self.verify_scale + 0.2 * scale
        rate = (len(accepted) + 1) / (self.draft_s + verify_s)
        self.drafting_rate = rate if self.drafting_rate is None else 0.7 * self.drafting_rate + 0.3 * rate
