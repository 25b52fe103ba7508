"""Every number the lab reports about a run, defined once over its StepRecords.

The engine's summary, the app's live plots and tables, the held-out evaluation, the bench and
the Prometheus exporter all call these, so one run gives one set of numbers everywhere.
Glossary (the names vLLM's spec-decode metrics use where they exist):

* ``drafts`` -- steps that drafted at least one token (vLLM ``num_drafts``);
* ``draft_tokens`` -- drafted tokens sent to the verify (``num_draft_tokens``);
* ``accepted_tokens`` -- drafted tokens the target kept (``num_accepted_tokens``);
* ``accepted_per_position[i]`` -- drafts whose token at depth i+1 was kept
  (``num_accepted_tokens_per_pos``);
* ``tau`` (τ) -- new tokens per target verify forward, over EVERY step (correction or bonus
  included; ``RunResult.tau``, the bench's ``tau``; the ``--json`` / trace field
  ``mean_accepted_tokens`` is its schema-1 name); for a run that always drafts this is vLLM's
  mean acceptance length;
* ``mean_acceptance_length`` -- vLLM's 1 + accepted / drafts, over the steps that DRAFTED (what
  a vLLM server's counters give; equals ``tau`` when every step drafts and none is cut short);
* ``acceptance_rate`` -- accepted / drafted tokens;
* ``draft_cost`` -- drafting seconds per verify second, over the steps that drafted;
* ``step_cost`` -- a run's time per target forward in one-token forwards (``forward_s``: the
  baseline's verify seconds per step, or ``core.cost.curve``'s ``forward_s``), drafting (k*c)
  and verify (v, ``StepCost.verify``) apart: the terms of the speedup model tau / (k*c + v)
  (``core.cost.theory``). This v is what the run's verifies took; what a verify of n tokens
  costs on this machine is probed once, by ``core.cost.probe`` (the curve v(n), ``core.cost.curve``);
  ``verify_cost_by_nodes`` splits a run's v by query tokens n = nodes + 1 (the root): the run's
  own points of that curve. Times are taken over the steps the CPU did not disturb
  (``StepRecord.disturbed``) when there are any; ``disturbed`` counts the others;
* ``plain_reference`` -- THE plain step a run's timed numbers are measured against (its why-lines,
  break-even point, timeline, Worth it?'s point): one value per run, defined here once.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field, fields
from typing import Callable, Iterable

from core.records.steps import StepRecord


@dataclass
class Tallies:
    """Running totals of one run (or of several pooled), built step by step."""

    steps: int = 0  # target verify forwards
    new_tokens: int = 0
    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    accepted_per_position: list[int] = field(default_factory=list)
    draft_s: float = 0.0  # over drafting steps
    verify_s: float = 0.0  # over drafting steps
    all_verify_s: float = 0.0  # over every step
    all_draft_s: float = 0.0  # over every step (a drafter that found nothing still spent its time)
    query_tokens: int = 0  # tokens the verifies ran over: root + nodes, every step
    disturbed: int = 0  # steps whose timing the CPU disturbed (``StepRecord.disturbed``)
    clean_steps: int = 0  # the others, and their seconds and query tokens (``step_cost``)
    clean_draft_s: float = 0.0
    clean_verify_s: float = 0.0
    clean_query_tokens: int = 0

    def add_step(self, *, drafted: int, depth: int, accepted: int, emitted: int,
                 draft_s: float = 0.0, verify_s: float = 0.0, disturbed: bool = False) -> None:
        """One step: ``drafted`` nodes of depth up to ``depth``, ``accepted`` kept, ``emitted`` new tokens;
        ``disturbed``: its times are not this machine's undisturbed ones."""
        self.steps += 1
        self.new_tokens += emitted
        self.all_verify_s += verify_s
        self.all_draft_s += draft_s
        self.query_tokens += drafted + 1
        if disturbed:
            self.disturbed += 1
        else:
            self.clean_steps += 1
            self.clean_draft_s += draft_s
            self.clean_verify_s += verify_s
            self.clean_query_tokens += drafted + 1
        if not drafted:
            return
        self.drafts += 1
        self.draft_tokens += drafted
        self.accepted_tokens += accepted
        self.draft_s += draft_s
        self.verify_s += verify_s
        self.accepted_per_position += [0] * (depth - len(self.accepted_per_position))
        for i in range(accepted):
            self.accepted_per_position[i] += 1

    def add(self, record: StepRecord) -> "Tallies":
        self.add_step(drafted=len(record.nodes), depth=max((n.depth for n in record.nodes), default=0),
                      accepted=record.accepted_length, emitted=len(record.emitted),
                      draft_s=record.draft_s, verify_s=record.verify_s, disturbed=bool(record.disturbed))
        return self

    def __add__(self, other: "Tallies") -> "Tallies":
        """Two runs' totals pooled (every count and time summed; per-position counts by position)."""
        longer, shorter = sorted((self.accepted_per_position, other.accepted_per_position), key=len, reverse=True)
        per_position = [a + (shorter[i] if i < len(shorter) else 0) for i, a in enumerate(longer)]
        return Tallies(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)
                          if f.name != "accepted_per_position"}, accepted_per_position=per_position)

    @property
    def tau(self) -> float:
        return self.new_tokens / self.steps if self.steps else 0.0

    @property
    def mean_acceptance_length(self) -> float | None:
        """vLLM's mean acceptance length, 1 + accepted / drafts; None when nothing was drafted."""
        return 1 + self.accepted_tokens / self.drafts if self.drafts else None

    @property
    def acceptance_rate(self) -> float:
        return self.accepted_tokens / self.draft_tokens if self.draft_tokens else 0.0

    @property
    def per_position_acceptance(self) -> list[float]:
        return [n / self.drafts for n in self.accepted_per_position] if self.drafts else []

    @property
    def draft_cost(self) -> float | None:
        """Drafting time per verify time over the steps that drafted; None when none did."""
        return self.draft_s / self.verify_s if self.drafts and self.verify_s > 0 else None

    @property
    def verify_s_per_forward(self) -> float:
        """Mean seconds of one target verify forward, over the undisturbed steps (every step where
        the CPU disturbed them all)."""
        if self.clean_steps:
            return self.clean_verify_s / self.clean_steps
        return self.all_verify_s / self.steps if self.steps else 0.0

    def step_cost(self, forward_s: float) -> StepCost | None:
        """``StepCost`` over the undisturbed steps (over every step when the CPU disturbed them all:
        ``StepCost.disturbed`` then says so); None without steps or a positive ``forward_s``."""
        if not self.steps or forward_s <= 0:
            return None
        if self.clean_steps:
            steps, draft_s, verify_s, query = (self.clean_steps, self.clean_draft_s, self.clean_verify_s,
                                               self.clean_query_tokens)
        else:
            steps, draft_s, verify_s, query = self.steps, self.all_draft_s, self.all_verify_s, self.query_tokens
        per_step = forward_s * steps
        return StepCost(forward_s=forward_s, draft=draft_s / per_step, verify=verify_s / per_step,
                        query_tokens=query / steps, disturbed=not self.clean_steps)


def tally(records: Iterable[StepRecord]) -> Tallies:
    totals = Tallies()
    for record in records:
        totals.add(record)
    return totals


def running(records: Iterable[StepRecord]) -> Iterable[Tallies]:
    """The totals after each step (one shared object, updated in place: copy what you keep)."""
    totals = Tallies()
    for record in records:
        yield totals.add(record)


def per_position_acceptance(records: Iterable[StepRecord]) -> list[float]:
    return tally(records).per_position_acceptance


def tau(records: Iterable[StepRecord]) -> float:
    return tally(records).tau


def acceptance_rate(records: Iterable[StepRecord]) -> float:
    return tally(records).acceptance_rate


def draft_cost(records: Iterable[StepRecord]) -> float | None:
    return tally(records).draft_cost


@dataclass(frozen=True)
class StepCost:
    """A run's time per target forward, in one-token forwards of the same target."""

    forward_s: float  # seconds of the one-token forward everything is measured in
    draft: float  # drafting seconds per step / forward_s: k * c in the speedup model
    verify: float  # verify seconds per step / forward_s: v, measured
    query_tokens: float  # mean tokens per verify (root + nodes)
    disturbed: bool = False  # every step's timing was disturbed: these numbers are not this machine's own


def step_cost(records: Iterable[StepRecord], forward_s: float) -> StepCost | None:
    """``StepCost`` over every step of a run (``Tallies.step_cost``); None without steps or a positive ``forward_s``."""
    return tally(records).step_cost(forward_s)


def verify_cost_by_nodes(records: Iterable[StepRecord], forward_s: float) -> dict[int, float]:
    """The run's own v(n): for each query-token count n (nodes + 1), the mean verify seconds of the
    steps that verified n tokens over ``forward_s``; ascending n. Steps the CPU disturbed are left
    out (all are kept where every step was)."""
    if forward_s <= 0:
        return {}
    records = list(records)
    timed = [r for r in records if not r.disturbed] or records
    by_n: dict[int, list[float]] = defaultdict(list)
    for record in timed:
        by_n[len(record.nodes) + 1].append(record.verify_s)
    return {n: statistics.fmean(by_n[n]) / forward_s for n in sorted(by_n)}


def forward_seconds(records: Iterable[StepRecord]) -> float:
    """Mean verify seconds per step: for a run that drafts nothing (``none``), one one-token forward."""
    return tally(records).verify_s_per_forward


def expected_verify_cost(records: Iterable[StepRecord], v: Callable[[int], float]) -> float | None:
    """The mean of ``v(nodes + 1)`` over a run's steps: what a verify-cost curve says its verifies cost."""
    costs = [v(len(record.nodes) + 1) for record in records]
    return sum(costs) / len(costs) if costs else None


@dataclass(frozen=True)
class PlainReference:
    """The plain step a run's timed numbers are measured against: seconds of one plain decoding step
    on this machine, and where it comes from -- "run": the goodput controller's measure over the run's
    undisturbed plain steps (the latest step's ``DecisionRecord.plain_step_s``); "plain": the run's own
    undisturbed steps, for a run that drafts nothing; "probe": the cost probe's one-token forward
    (``core.cost.curve``). ``disturbed`` of the run's ``steps`` had their timing disturbed."""

    seconds: float
    source: str
    disturbed: int
    steps: int


MIN_PLAIN_STEPS = 3  # a run's own plain steps stand for plain decoding once there are this many


def plain_reference(records: Iterable[StepRecord], probe_forward_s: float | None = None) -> PlainReference | None:
    """THE plain reference of a run (``PlainReference``), read from its records up to the step shown;
    ``probe_forward_s``: the cost probe's one-token forward, where nothing of the run measured one.
    None with neither."""
    records = list(records)
    disturbed = sum(1 for r in records if r.disturbed)
    decided = next((r.decision for r in reversed(records) if r.decision is not None), None)
    if decided is not None:
        return PlainReference(decided.plain_step_s, "run", disturbed, len(records))
    plain = [r.draft_s + r.verify_s for r in records if not r.nodes and not r.disturbed]
    if len(plain) >= MIN_PLAIN_STEPS and len(plain) == sum(1 for r in records if not r.disturbed):
        return PlainReference(statistics.median(plain), "plain", disturbed, len(records))
    if probe_forward_s:
        return PlainReference(probe_forward_s, "probe", disturbed, len(records))
    return None
