"""The goodput controller (``--k auto`` / ``--tree auto``): before each step, decide how deep to
draft -- possibly not at all -- and then how much of the draft to verify, to maximise expected
tokens per second. It wraps any drafter, stays lossless (the depth is chosen before the draft, the
pruning reads no sampled draw), keeps what a run observed for the next run (``Memory``) and puts
its decision into each StepRecord (``DecisionRecord``).

The design, step by step and in this module's names: docs/drafters.md, "The controller in code".
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from time import perf_counter

from core.common.timing import disturbed, thread_wait_s, waited_since
from core.cost.curve import CostCurve
from core.drafters.base import Drafter, ProposeContext, Wrapper
from core.records.steps import DecisionRecord
from core.runtime.tree import DraftTree

BINS = 10  # draft-confidence bins of the calibration
PRIOR_WEIGHT = 1.0  # pseudo-observations of a prior
MAX_PROBE_GAP = 32  # plain steps at most between two drafting probes
CHEAP_DRAFT = 0.02  # a drafter whose one-level draft costs less than this share of a plain step: full depth
PROBE_OPTIMISM = 1.0  # a probe drafts the depth that would pay best were each level kept once more
PROBE_SHARE = 0.02  # while drafting does not pay, probes may cost this share of the time
FORGET = 0.95  # acceptance by depth: older steps count this much less per step
RUN_MEMORY = 0.75  # the seconds drafting saved per step: the recent runs' average, each new run weighing 1 - this
GUARD_SHARE = 0.02  # the guard: drafting stops for a run while what its drafting steps lost against plain decoding
GUARD_ALLOWANCE = 0.5  # exceeds this share of the run's time plus this many plain steps (``_guarded``)
PLAIN_WINDOW = 5  # a plain step's seconds: the median of the run's latest this many timed plain steps
PLAIN_CHECK_GAP = 16  # while drafting's gain is thin, a timed plain step at least every this many steps ...
CHECK_MARGIN = 0.15  # ... thin: drafting steps gained less than this share of a plain step each, lately
CARRY_WEIGHT = 1.0  # a new run starts from the last run's acceptance (same drafter, shape and target), worth
# this many observations per bin or level at most: the new prompt's own steps soon outweigh it


@dataclass
class Calibration:
    """a(q): acceptance of a reached node against its draft confidence q; and acceptance by level
    (``on_path``). Both learned on the run."""

    hits: list[float] = field(default_factory=lambda: [0.0] * BINS)
    trials: list[float] = field(default_factory=lambda: [0.0] * BINS)
    path_hits: list[float] = field(default_factory=list)  # steps whose kept path reached depth d + 1 ...
    path_trials: list[float] = field(default_factory=list)  # ... of the steps that drafted it with d kept

    def bin(self, q: float) -> int:
        return min(BINS - 1, max(0, int(q * BINS)))

    def __call__(self, q: float, prior: float | None = None) -> float:
        """a(q), from the bin's hits and a prior worth ``PRIOR_WEIGHT`` observations: ``prior`` (the
        acceptance of the node's level on this run) or, without one, q itself."""
        b = self.bin(q)
        return (self.hits[b] + PRIOR_WEIGHT * (q if prior is None else prior)) / (self.trials[b] + PRIOR_WEIGHT)

    def observe(self, q: float, accepted: bool) -> None:
        b = self.bin(q)
        self.trials[b] += 1
        self.hits[b] += accepted

    def carried(self) -> Calibration:
        """The same rates, each worth at most ``CARRY_WEIGHT`` observations: a prior for the next run."""
        def scaled(hits: list[float], trials: list[float]) -> tuple[list[float], list[float]]:
            factors = [min(1.0, CARRY_WEIGHT / t) if t > 0 else 0.0 for t in trials]
            return [h * f for h, f in zip(hits, factors)], [t * f for t, f in zip(trials, factors)]
        return Calibration(*scaled(self.hits, self.trials), *scaled(self.path_hits, self.path_trials))

    def observe_path(self, drafted: int, kept: int) -> None:
        """A step verified a draft ``drafted`` levels deep and kept ``kept`` of them: each level up to
        the first miss was reached, the levels above ``kept`` hit. Older steps fade (``FORGET``)."""
        while len(self.path_trials) < drafted:
            self.path_trials.append(0.0)
            self.path_hits.append(0.0)
        for depth in range(len(self.path_trials)):
            self.path_trials[depth] *= FORGET
            self.path_hits[depth] *= FORGET
        for depth in range(min(drafted, kept + 1)):
            self.path_trials[depth] += 1
            self.path_hits[depth] += depth < kept

    def on_path(self, limit: int, optimism: float = 0.0) -> list[float]:
        """Per level 1..limit, the chance that a step which kept the levels above keeps this one too.
        Each level's prior is the chance of the level above (one half at the first): a level never
        tried is taken to be no better than the one above it. ``optimism``: each level credited with
        that many more kept drafts (what a probe hopes for)."""
        chances, prior = [], 0.5
        for depth in range(limit):
            hits = (self.path_hits[depth] if depth < len(self.path_hits) else 0.0) + optimism
            trials = (self.path_trials[depth] if depth < len(self.path_trials) else 0.0) + optimism
            prior = (hits + PRIOR_WEIGHT * prior) / (trials + PRIOR_WEIGHT)
            chances.append(prior)
        return chances


@dataclass
class DraftCost:
    """Seconds of a draft: ``fixed + per_token * catch_up + level * depth``, fitted by (slightly
    ridged) least squares over this run's drafts, older ones fading. ``catch_up`` is the tokens
    committed since the drafter last ran (it reads them first: a draft model's forward, EAGLE's
    feature layer), ``depth`` the levels asked for. A probe after many plain steps pays a long
    catch-up that steady drafting does not."""

    gram: list[float] = field(default_factory=lambda: [0.0] * 9)  # faded sum of x x^T, 3 x 3 row-major,
    # x = (1, catch_up, depth)
    moment: list[float] = field(default_factory=lambda: [0.0] * 3)  # faded sum of x * seconds
    coefficients: tuple[float, float, float] = (0.0, 0.0, 0.0)  # (fixed, per_token, level), refitted per draft

    def observe(self, catch_up: int, depth: int, seconds: float) -> None:
        x = (1.0, float(catch_up), float(depth))
        self.gram = [FORGET * g + x[i // 3] * x[i % 3] for i, g in enumerate(self.gram)]
        self.moment = [FORGET * m + xi * seconds for m, xi in zip(self.moment, x)]
        ridge = 1e-3 * self.gram[0]
        self.coefficients = tuple(max(b, 0.0) for b in _solve3(
            [g + (ridge if i in (0, 4, 8) else 0.0) for i, g in enumerate(self.gram)], self.moment))

    @property
    def known(self) -> bool:
        return self.gram[0] > 0

    def seconds(self, catch_up: float, depth: int) -> float:
        fixed, per_token, level = self.coefficients
        return fixed + per_token * catch_up + level * depth

    def carried(self) -> DraftCost:
        factor = min(1.0, CARRY_WEIGHT / self.gram[0]) if self.known else 0.0
        return DraftCost([factor * g for g in self.gram], [factor * m for m in self.moment], self.coefficients)


def _solve3(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """x with A x = b for a symmetric positive definite 3 x 3 A (row-major), by Cramer's rule: a
    microsecond, where a linear-algebra call costs a hundred on every step."""
    def det(m: list[float]) -> float:
        return (m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6])
                + m[2] * (m[3] * m[7] - m[4] * m[6]))
    whole = det(a)
    columns = []
    for j in range(3):
        m = list(a)
        m[j], m[3 + j], m[6 + j] = b
        columns.append(det(m) / whole)
    return tuple(columns)


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


def _faded(old: float | None, new: float) -> float:
    """0.8 old + 0.2 new, the new value first brought within a factor 2 of the old: one stall (a
    first call that builds a cache, a garbage collection) must not teach the controller that a
    verify is slow for the rest of the run."""
    if old is None:
        return new
    return 0.8 * old + 0.2 * min(max(new, old / 2), old * 2)


@dataclass(frozen=True)
class Memory:
    """What a run taught the controller, kept for the next run of the same drafter and shape on the
    same target in this process -- as a server keeps its acceptance statistics across requests --
    so that a drafter known not to pay is not probed at once again, nor a good one relearned."""

    calibration: Calibration
    draft_cost: DraftCost
    plain_walls: tuple[float, ...]  # the latest timed plain steps' seconds, at most ``PLAIN_WINDOW``
    overrun: float
    verify_scale: float
    saved_per_step: float  # seconds drafting saved against plain decoding, per step, over the recent runs


_MEMORY: dict[tuple, Memory] = {}


class GoodputController(Wrapper):
    """Wraps ``inner``: asks it for the depth that pays and verifies the goodput-best part of its draft."""

    def __init__(self, inner: Drafter, curve: CostCurve):
        super().__init__(inner.shape, inner)
        self.curve = curve
        self.name = inner.name
        self.max_nodes = inner.max_nodes
        self.memory_key = (inner.name, str(inner.shape), curve.model, curve.device, curve.threads)
        self._begin_run(None)

    # ---- the run ------------------------------------------------------------------------------
    def _begin_run(self, last: Memory | None) -> None:
        """What one run learns and counts, from the last run's memory (``last``) where there is one."""
        self.calibration = Calibration() if last is None else last.calibration.carried()
        self.verify_scale = 1.0 if last is None else last.verify_scale  # this run's verify seconds / the curve's
        self.draft_cost = DraftCost() if last is None else last.draft_cost.carried()
        self.drafted_upto = 0  # committed tokens when the drafter last ran (it reads the rest first)
        self.plain_walls: list[float] = []  # this run's timed plain steps' seconds, the latest ``PLAIN_WINDOW``
        self.carried_walls = () if last is None else last.plain_walls  # the last run's, until this run has one
        self.since_plain = 0  # drafting steps since the last timed plain step
        self.margin: float | None = None  # seconds a drafting step gained against a plain step, lately (faded)
        self.overrun = 1.0 if last is None else last.overrun  # wall seconds of a drafting step / the model's
        self.plain_steps = 0  # plain steps since drafting was last tried
        self.probe_loss: float | None = None  # what this step's probe loses against plain decoding (None: no probe)
        self.saved_s = 0.0  # seconds this run's drafting steps saved against plain decoding
        self.run_s = 0.0  # the engine's seconds of this run's timed steps
        self.drafting_s = 0.0  # the engine's seconds of this run's timed drafting steps, probes included ...
        self.drafting_tokens = 0  # ... and the tokens they brought (``lost_s``)
        self.step_tokens = 0  # tokens the step under way brought
        self.saved_per_step = 0.0 if last is None else last.saved_per_step  # seconds drafting saved per step lately
        self.probe_gap = 0  # plain steps between probes (``_affordable_gap``)
        self.first_probe_loss = 0.0  # what the run's first probe may lose (``_first_probe``)
        self.step_start: float | None = None  # the engine's clock when the step under way began
        self.wait_start: float | None = None  # the engine's wait clock then (``ProposeContext.wait_clock``)
        self.slow_plain: list[float] = []  # the seconds of the latest plain steps in a row far slower than measured
        self.steps = 0  # steps begun in this run
        self.step_estimate: float | None = None  # the model's seconds for the step under way (None: plain)
        self.proposed: DraftTree | None = None  # the inner drafter's whole tree this step
        self.kept: list[int] = []  # its nodes this step verifies
        self.last_decision: DecisionRecord | None = None
        self._verify_start, self._verify_waited = 0.0, None  # perf_counter() and thread_wait_s() as the verify began

    def start(self, prompt_ids: list[int], capacity_tokens: int) -> None:
        super().start(prompt_ids, capacity_tokens)
        last = _MEMORY.get(self.memory_key)
        self._begin_run(last)
        # a new prompt: with nothing learned, probe at once; else once a probe (catching up on the prompt)
        # is affordable -- or at once, where what drafting saved on recent prompts is worth it (``_first_probe``)
        if last is not None:
            depth, expected, _ = self._best_depth(self.shape.depth, self._plain_s())
            self.first_probe_loss = self._probe_loss(self.draft_cost.seconds(len(prompt_ids), depth)
                                                     + self._verify_s(depth + 1) - self._verify_s(1), expected)
            self.probe_gap = self._affordable_gap(self.first_probe_loss)

    def propose(self, ctx: ProposeContext) -> DraftTree:
        self._time_last_step(perf_counter() if ctx.clock is None else ctx.clock, ctx.wait_clock)
        self.proposed, self.kept = None, []
        plain_s = self._plain_s()
        limit = min(ctx.max_depth, self.shape.depth)
        if self.steps == 1:
            self._first_probe(remaining=ctx.max_depth + 1)
        # a step held plain, whatever the model says: by the guard ("off"), or to time one ("check")
        held = "off" if self._guarded(plain_s) else "check" if self._check_due(plain_s) else ""
        depth, probe = (0, False) if held else self._depth(limit, plain_s)
        # the free part may go deeper than asked
        free = self.inner.capabilities.free_levels and depth < limit and not held
        tree = DraftTree()
        if depth or free:
            start, waited = perf_counter(), thread_wait_s()
            tree = self.inner.propose(replace(ctx, max_depth=depth, free_depth=limit if free else None))
            draft_s, draft_wait_s = perf_counter() - start, waited_since(waited)
        if depth:
            catch_up = len(ctx.tokens) - self.drafted_upto
            expected_s = self.draft_cost.seconds(catch_up, depth) if self.draft_cost.known else None
            if not self.draft_cost.known or not disturbed(draft_s, draft_wait_s, expected_s):
                self.draft_cost.observe(catch_up, depth, draft_s)  # a disturbed draft teaches nothing (but the first)
            self.drafted_upto = len(ctx.tokens)
        else:
            self.plain_steps += 1
            if not len(tree):
                self.last_decision = DecisionRecord(0, 0, 1.0, 1.0, held or "off", round(plain_s, 6), depth=0)
                return tree
        self.proposed = tree
        self.kept, expected, gain = self._choose(tree, plain_s, sampled=_sampled(tree), at_least_one=probe)
        self.probe_loss = self._probe_loss(draft_s + self._verify_s(len(self.kept) + 1) - self._verify_s(1),
                                           expected) if probe else None
        self.step_estimate = self._step_s(len(self.kept), plain_s, draft_s)
        reason = "empty" if not len(tree) else ("all" if len(self.kept) == len(tree) else
                                                 "part" if self.kept else "none")
        self.last_decision = DecisionRecord(len(tree), len(self.kept), round(expected, 4), round(gain, 4), reason,
                                            round(plain_s, 6), depth=depth, probe=probe)
        self.renumbering = {node: i for i, node in enumerate(self.kept)}  # the nodes it drops count as pruned
        self._verify_start, self._verify_waited = perf_counter(), thread_wait_s()
        return subtree(tree, self.kept)

    def commit(self, tree: DraftTree, accepted: tuple[int, ...]) -> None:
        if self.proposed is None:
            return
        verify_s = perf_counter() - self._verify_start
        self._learn(tree, accepted, verify_s, waited_since(self._verify_waited))
        self.inner.commit(self.proposed, tuple(self.kept[i] for i in accepted))

    def stop(self) -> None:
        """The run ends (finished, cancelled or failed): what it learned, if it took a step, is kept
        for the next run."""
        if self.steps:
            saved = RUN_MEMORY * self.saved_per_step + (1 - RUN_MEMORY) * self.saved_s / self.steps
            _MEMORY[self.memory_key] = Memory(self.calibration, self.draft_cost,
                                              tuple(self.plain_walls) or self.carried_walls, self.overrun,
                                              self.verify_scale, saved)
        super().stop()

    def decision(self) -> DecisionRecord | None:
        return self.last_decision

    def expansion(self):
        return None if self.proposed is None else super().expansion()  # a step that drafted nothing scored nothing

    def anatomy(self, piece):
        return None if self.proposed is None else super().anatomy(piece)  # nor read anything

    # ---- what things cost ---------------------------------------------------------------------
    def _verify_s(self, n: int) -> float:
        return self.curve.seconds(n) * self.verify_scale

    def _plain_s(self) -> float:
        """Seconds of a whole plain step: the median of this run's latest timed ones, else of the last
        run's, else the model's one-token verify. Every decision and the guard weigh drafting against
        it, so it is measured, not modelled: the model's verify(1) can be 10-30% off a real plain step
        (the curve was measured at another time; a drafting step's verify carries the step's own work),
        and a plain step timed minutes ago by 10% (the machine's speed drifts: ``_check_due``)."""
        walls = self.plain_walls or self.carried_walls
        return statistics.median(walls) if walls else self._verify_s(1)

    def _step_s(self, nodes: int, plain_s: float, draft_s: float) -> float:
        """The model's seconds for a step that drafts for ``draft_s`` and verifies ``nodes`` nodes: a
        plain step, the drafting, the larger verify."""
        return plain_s + draft_s + self._verify_s(nodes + 1) - self._verify_s(1)

    def _time_last_step(self, now: float, waited_now: float | None = None) -> None:
        """The engine's time from the last propose to this one (``now``: ``ProposeContext.clock``, which
        stops while the run waits between steps -- a user's pause between Step clicks is not a step)
        is the whole last step (draft, verify, acceptance, bookkeeping): a plain step's is kept
        (``_plain_s``), a drafting step's counts towards ``lost_s`` and corrects the model
        (``overrun``) for what it does not see (hidden-state outputs, the records of more nodes).
        Without an engine clock (a drafter driven by hand) the wall clock stands in.

        A disturbed step (``core.common.timing.disturbed``: its thread waited for a core, ``waited_now``
        being the engine's wait clock, or it took far longer than the model said) teaches nothing: the plain
        reference, the guard's account and the model's corrections are made of undisturbed steps, so
        a burst of load neither makes plain decoding look dear (and every draft a win) nor drafting
        look dear (and shut it off): the decisions stay what they were on undisturbed steps."""
        last_waited, self.wait_start = self.wait_start, waited_now
        if self.step_start is not None and self.steps > 1:  # a run's first step pays first-call costs: not timed
            wall = now - self.step_start
            waited = None if waited_now is None or last_waited is None else waited_now - last_waited
            # a plain step is the measure of what a plain step costs: one far slower than the last ones
            # (the GIL or the cores shared within the process, which no wait for a core shows) is left
            # out -- but ``PLAIN_WINDOW`` in a row are the plain step now: the whole process is slower
            expected = (self.step_estimate or 0.0) * self.overrun if self.proposed is not None else self._plain_s()
            reason = disturbed(wall, waited, expected or None)
            if self.proposed is None:
                self.slow_plain = self.slow_plain + [wall] if reason == "slow" else []
                if len(self.slow_plain) >= PLAIN_WINDOW:
                    self.plain_walls, self.slow_plain = self.slow_plain[-PLAIN_WINDOW:], []
            if reason:  # the step's record carries its own label (``SpeculativeDecoder.disturbance``)
                self.step_start = now
                self.steps += 1
                return
            self.run_s += wall
            if self.proposed is not None:
                self.drafting_s += wall
                self.drafting_tokens += self.step_tokens
            if self.proposed is None:  # a plain step
                self.plain_walls = (self.plain_walls + [wall])[-PLAIN_WINDOW:]
                self.since_plain = 0
            elif self.step_estimate:
                self.overrun = _faded(self.overrun, wall / self.step_estimate)
                self.since_plain += 1
                if self.probe_loss is None:
                    gained = self.step_tokens * self._plain_s() - wall
                    self.saved_s += gained
                    self.margin = gained if self.margin is None else 0.8 * self.margin + 0.2 * gained
        self.step_start = now
        self.steps += 1

    @property
    def lost_s(self) -> float:
        """Seconds this run's timed drafting steps, probes included, lost against plain decoding (< 0:
        won): their engine time against their tokens at a plain step's seconds as now measured, so a
        fresher plain step re-weighs the whole run, not only the steps after it."""
        return self.drafting_s - self.drafting_tokens * self._plain_s()

    # ---- the decisions ------------------------------------------------------------------------
    def _guarded(self, plain_s: float) -> bool:
        """The guard: whether this run's drafting steps (probes included) have lost more than
        ``GUARD_SHARE`` of its time plus ``GUARD_ALLOWANCE`` plain steps against plain decoding, as
        measured (each step's engine time against its tokens at the measured plain step). Then the
        step is plain, whatever the model predicts -- the model may be wrong on this prompt -- until
        plain steps have brought the loss back under the share. So no run loses much more than that
        share and one step to drafting: the allowance lets a first losing probe or two pass without
        shutting drafting off for a prompt that suits it."""
        return self.lost_s > GUARD_SHARE * self.run_s + GUARD_ALLOWANCE * plain_s

    def _check_due(self, plain_s: float) -> bool:
        """Whether this step is a timed plain step, to keep ``plain_s`` true: drafting has gone on for
        ``PLAIN_CHECK_GAP`` steps and gained too little per step lately (``CHECK_MARGIN``) for a
        plain step's seconds from a while ago -- the machine's speed drifts by 10% in a minute -- to
        say whether it still pays. A drafter far ahead is not checked -- there the answer cannot flip
        -- unless no plain step was ever timed (the model's guess stands in, and it can be far off)."""
        unmeasured = not (self.plain_walls or self.carried_walls)
        return (self.since_plain >= PLAIN_CHECK_GAP
                and (unmeasured or self.margin is None or self.margin < CHECK_MARGIN * plain_s))

    def _depth(self, limit: int, plain_s: float) -> tuple[int, bool]:
        """(levels to ask the drafter for, whether the step is a probe): the depth with the most
        expected tokens per second -- acceptance by depth on this run against the measured cost of
        drafting that deep and verifying that many nodes -- if it beats a plain step; else 0, or
        that same depth as a probe when one is due (the first step, knowing nothing, probes one
        level)."""
        if limit <= 0:
            return 0, False
        if not self.draft_cost.known:
            return 1, True
        if self.draft_cost.seconds(1, 1) < CHEAP_DRAFT * plain_s:
            return limit, False
        if 0 < self.plain_steps < self.probe_gap:
            return 0, False  # off since the last look, and nothing about drafting learned since
        depth, _, pays = self._best_depth(limit, plain_s)
        if pays:
            self.plain_steps, self.probe_gap = 0, min(self.probe_gap, 1)
            return depth, False
        if self.plain_steps >= self.probe_gap:
            self.plain_steps = 0
            return self._best_depth(limit, plain_s, optimism=PROBE_OPTIMISM)[0], True
        return 0, False

    def _best_depth(self, limit: int, plain_s: float, optimism: float = 0.0) -> tuple[int, float, bool]:
        """(the drafting depth with the most expected tokens per second, its expected tokens, whether
        it beats a plain step); ``optimism`` as in ``Calibration.on_path``."""
        best, best_rate, best_expected, expected, reach = 1, 0.0, 1.0, 1.0, 1.0
        for depth, chance in enumerate(self.calibration.on_path(limit, optimism), start=1):
            reach *= chance
            expected += reach
            drafting = self.draft_cost.seconds(expected, depth)  # steady drafting: catch up on the last step's tokens
            rate = expected / (self.overrun * self._step_s(depth, plain_s, drafting))
            if rate > best_rate:
                best, best_rate, best_expected = depth, rate, expected
            elif reach < 0.01:
                break  # deeper levels add almost nothing
        return best, best_expected, best_rate > 1.0 / plain_s

    def _next_probe(self, hit: bool) -> None:
        """Plain steps before the next probe: enough that probing costs at most ``PROBE_SHARE`` of the
        time, and after a miss at least twice the last gap. Right after any probe the depths are
        weighed again with what it taught (``_depth``), so a kept token that turns drafting on is
        acted on at once; probing again at once would only repeat the loss."""
        affordable = self._affordable_gap(self.probe_loss)
        self.probe_gap = affordable if hit else min(MAX_PROBE_GAP, max(2 * self.probe_gap, affordable))

    def _probe_loss(self, probe_s: float, tokens: float) -> float:
        """Seconds a probe costing ``probe_s`` beyond a plain step and expected to bring ``tokens``
        loses against plain decoding. A probe step takes what the model says a drafting step takes
        (overrun included: the same seconds that keep drafting off)."""
        plain_s = self._plain_s()
        return max(0.0, self.overrun * (plain_s + probe_s) - tokens * plain_s)

    def _affordable_gap(self, loss: float) -> int:
        """Plain steps between probes that lose ``loss`` seconds each, so that probing costs at most
        ``PROBE_SHARE`` of the time; at most ``MAX_PROBE_GAP``."""
        return min(MAX_PROBE_GAP, math.ceil(loss / (PROBE_SHARE * self._plain_s())))

    def _first_probe(self, remaining: int) -> None:
        """A new prompt's first probe comes at once where what it may find is worth more than what it
        loses: drafting saved ``saved_per_step`` seconds per step on the recent prompts (nothing where
        it was off), so on this one it may save about that on each of the ``remaining`` steps."""
        if self.saved_per_step * remaining > self.first_probe_loss:
            self.probe_gap = 0

    def _choose(self, tree: DraftTree, plain_s: float, sampled: bool = False,
                at_least_one: bool = False) -> tuple[list[int], float, float]:
        """The best-first prefix of ``tree`` with the most expected tokens per verify second; returns
        (nodes kept, expected tokens, expected gain over a plain step). ``at_least_one`` (a probe):
        never an empty prefix, a probe must learn something.

        ``sampled``: the draft's tokens were drawn at random (a draft model at temperature > 0). Then
        whether a node is verified must not depend on the node's own draw -- keeping only the
        confident draws would bias the output away from the target's law -- so every node is judged
        by its level's acceptance on this run so far, which its draw does not touch."""
        depths = tree.depths
        levels = self.calibration.on_path(max(depths, default=0))
        chance = ([levels[d - 1] for d in depths] if sampled else
                  [self.calibration(q, levels[d - 1]) for q, d in zip(tree.draft_probs, depths)])
        order = best_first(tree, chance)
        path = {}
        best, best_rate, expected = 0, 1.0 / plain_s, 1.0
        total = 1.0
        for i, node in enumerate(order, start=1):
            parent = tree.parents[node]
            path[node] = chance[node] * (1.0 if parent < 0 else path[parent])
            total += path[node]
            rate = total / self._verify_step_s(i + 1, plain_s)
            if rate > best_rate or (at_least_one and not best):
                best, best_rate, expected = i, rate, total
        return sorted(order[:best]), expected, best_rate * plain_s

    def _verify_step_s(self, n: int, plain_s: float) -> float:
        """Seconds of a step that verifies ``n`` tokens once its draft is made: a plain step and the
        larger verify's extra, in the plain step's own measure -- so the gain over a plain step,
        tokens x plain_s / this, never exceeds the tokens (v(n) never falls: ``core.cost.curve``)."""
        return plain_s + self._verify_s(n) - self._verify_s(1)

    def _learn(self, tree: DraftTree, accepted: tuple[int, ...], verify_s: float,
               verify_wait_s: float | None = None) -> None:
        """Calibrate a(q) on the reached nodes and the acceptance by depth (counts: always); rescale
        the cost curve by an undisturbed verify's seconds (a time: only when the CPU gave it in full)."""
        kept, depths = set(accepted), tree.depths
        self.step_tokens = len(accepted) + 1
        for node, parent in enumerate(tree.parents):
            if parent < 0 or parent in kept:  # reached: its parent was the root or was accepted
                self.calibration.observe(tree.draft_probs[node], node in kept)
        if self.probe_loss is not None:
            self._next_probe(bool(accepted))
        if len(tree):
            asked = self.last_decision.depth  # the levels asked for (a free part may reach deeper)
            if asked:
                self.calibration.observe_path(min(max(depths), asked), min(len(accepted), asked))
            expected_s = self._verify_s(len(tree) + 1)
            if self.steps > 1 and not disturbed(verify_s, verify_wait_s, expected_s):
                self.verify_scale = _faded(self.verify_scale, verify_s / self.curve.seconds(len(tree) + 1))
