"""Timing a comparison of decoding set-ups on one prompt so that its speedups can be trusted.

1. **Warm-up**: every set-up decodes once, untimed and short (``WARMUP_TOKENS``), so model
   loading, first-call allocations and caches are not charged to the first timed run.
2. **Interleaving**: the timed runs go round by round -- baseline, A, B; baseline, A, B; ... --
   so a change in the machine's load falls on every set-up alike (``core.common.timing.rounds``,
   the order of the lab's one timer; Compare runs it one decode at a time so that a page shows
   each run as it ends and Stop is heard between runs).
3. **Repeats**: the speedup is the lab's one definition (``core.common.timing.speedup``): on one
   prompt, the baseline's median time over the set-up's; its range is that of the paired
   per-round ratios (that round's baseline time over the set-up's).

A speedup above tau x ``ABOVE_TAU`` in any round (the top of its range) is flagged: a lossless
decoder's step costs at least one target forward, so it cannot beat its own tokens per forward by
more than noise. So is a verify cost v below ``BELOW_ONE`` (a forward over more tokens cannot be cheaper than one over a single
token: the baseline's forwards were slowed). A set-up whose repeats spread (max - min over median)
by more than ``NOISY_SPREAD`` is flagged as noisy.
Times are the engine's own (``RunResult.wall_s``); model loading is outside them.

**How long is left** (``estimate_left``): every run still to go at its set-up's seconds per token as
measured (its timed runs' median, else its warm-up, else the baseline's, else one forward per
token), times the machine's ``slowdown`` now against when that set-up was first measured -- read
from the run under way as it decodes and from the latest finished run -- so a machine that turned
busy mid-way makes the estimate grow at once, not only after a run ends.
"""
from __future__ import annotations

import statistics
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from time import monotonic
from typing import Callable, ContextManager, Iterator

from core.api import build_decoder
from core.cost.curve import CostCurve, cost_curve
from core.common.timing import rounds, speedup
from core.common.errors import UserError
from core.records.metrics import forward_seconds, step_cost, tally
from core.records.steps import RunResult, StepRecord
from core.api.request import DecodeRequest

WARMUP_TOKENS = 8
ABOVE_TAU = 1.05
BELOW_ONE = 0.9
NOISY_SPREAD = 0.15
MAX_REPEATS = 10
TICK_S = 0.5  # while a run decodes, yield this often (a page notices a client that went away)


@dataclass
class TimedSetup:
    """One set-up of the comparison and its timed runs, in round order."""

    request: DecodeRequest
    results: list[RunResult] = field(default_factory=list)
    warmup: RunResult | None = None  # the untimed short run (first-call costs included)

    @property
    def label(self) -> str:
        return self.request.label()

    @property
    def walls(self) -> list[float]:
        return [r.wall_s for r in self.results]

    @property
    def records(self) -> list[StepRecord]:
        """Every timed run's StepRecords, pooled (for the cost numbers)."""
        return [record for r in self.results for record in r.steps]

    @property
    def tau(self) -> float:
        return tally(self.records).tau

    @property
    def median_run(self) -> RunResult:
        """The timed run whose wall time is the median's (the lower middle one of an even count): the
        run a table's median wall time describes."""
        ordered = sorted(self.results, key=lambda r: r.wall_s)
        return ordered[(len(ordered) - 1) // 2]

    @property
    def seconds_per_token(self) -> float | None:
        """The timed runs' median seconds per token, else the warm-up's steps after its first (the first
        pays first-call costs: a route picked, buffers made); None before either."""
        if not self.results:
            return None if self.warmup is None else _steady_seconds_per_token(self.warmup)
        rates = [rate for rate in map(_seconds_per_token, self.results) if rate is not None]
        return statistics.median(rates) if rates else None

    @property
    def tokens(self) -> int:
        """Tokens a timed run of this set-up makes: as its runs did (an EOS cuts), else its budget."""
        return round(statistics.median(len(r.tokens) for r in self.results)) if self.results \
            else self.request.max_new_tokens

    def slowdown(self) -> float | None:
        """Its latest timed run's seconds per token over its first's (None before two runs)."""
        rates = [rate for rate in map(_seconds_per_token, self.results) if rate is not None]
        return rates[-1] / rates[0] if len(rates) > 1 and rates[0] > 0 else None


def _seconds_per_token(result: RunResult) -> float | None:
    return result.wall_s / len(result.tokens) if result.tokens else None


def _steady_seconds_per_token(result: RunResult) -> float | None:
    """A short run's seconds per token past its first step (its whole time where it has one step)."""
    steady = result.steps[1:]
    tokens = sum(len(r.emitted) for r in steady)
    if not tokens:
        return _seconds_per_token(result)
    return sum(r.draft_s + r.verify_s for r in steady) / tokens


@dataclass(frozen=True)
class Spread:
    """A median and its range over repeats."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> "Spread | None":
        return cls(statistics.median(values), min(values), max(values)) if values else None

    @property
    def relative(self) -> float:
        """(max - min) / median: 0 for a single value."""
        return (self.high - self.low) / self.median if self.median > 0 else 0.0


@dataclass
class Comparison:
    """The baseline (``setups[0]``) and the set-ups compared with it."""

    setups: list[TimedSetup]
    repeats: int
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (label, why) of set-ups that could not run
    stopped: RunResult | None = None  # the run Stop cancelled (its KV blocks returned), if stopped
    curve: CostCurve | None = None  # the target's verify-cost curve v(n) (``core.cost.curve``, cached per machine)

    @property
    def baseline(self) -> TimedSetup:
        return self.setups[0]

    @property
    def forward_s(self) -> float:
        """One one-token target forward: the baseline's mean verify seconds per step, over its repeats."""
        return forward_seconds(self.baseline.records)

    def speedups(self, setup: TimedSetup) -> list[float]:
        """Per round: the baseline's time over the set-up's, both from that round."""
        return [b.wall_s / r.wall_s for b, r in zip(self.baseline.results, setup.results) if r.wall_s > 0]

    def speedup(self, setup: TimedSetup) -> Spread | None:
        """``core.common.timing.speedup`` (the baseline's median time over the set-up's), with the
        range of the paired per-round ratios."""
        ratios = self.speedups(setup)
        if not ratios:
            return None
        return Spread(speedup([self.baseline.walls], [setup.walls]), min(ratios), max(ratios))

    def verify_cost(self, setup: TimedSetup) -> float | None:
        """v of a set-up: its verify seconds per target forward over the baseline's one-token forward
        (``core.records.metrics.step_cost``)."""
        cost = step_cost(setup.records, self.forward_s)
        return None if cost is None else cost.verify

    def wall(self, setup: TimedSetup) -> Spread | None:
        return Spread.of(setup.walls)

    def flags(self, setup: TimedSetup) -> list[str]:
        """``above_tau`` (a speedup no lossless decoder can reach), ``v_below_one`` (verifies cheaper
        than the baseline's one-token forwards): the timing was disturbed; ``noisy`` (the repeats
        disagree by more than ``NOISY_SPREAD``)."""
        flags = []
        speedup = self.speedup(setup)
        if speedup is not None and speedup.high > setup.tau * ABOVE_TAU:  # any round: the whole measured range
            flags.append("above_tau")
        v = self.verify_cost(setup)
        if v is not None and v < BELOW_ONE:
            flags.append("v_below_one")
        spreads = [s.relative for s in (self.wall(setup), speedup) if s is not None]
        if len(setup.results) > 1 and max(spreads, default=0.0) > NOISY_SPREAD:
            flags.append("noisy")
        return flags


@dataclass(frozen=True)
class Progress:
    """Where the comparison is: ``phase`` "warmup" or "timed", round (1-based, 0 in the warm-up),
    the set-up about to run (None: the round or the whole comparison just finished)."""

    phase: str
    round: int
    setup: TimedSetup | None
    comparison: Comparison
    tick: bool = False  # yielded while ``setup`` decodes (not before it starts)
    run: RunProgress | None = None  # with a tick: how far the run under way has come


@dataclass(frozen=True)
class RunProgress:
    """The run under way since its first step (its prefill left out, which would make a run's first
    tokens look slow): the engine's seconds and the tokens made."""

    seconds: float
    tokens: int


@dataclass(frozen=True)
class Estimate:
    """What is left of a comparison, and how much slower the machine runs now than when each set-up
    was first measured (1.0: as then; above ``BUSIER``: say so)."""

    left_s: float
    slowdown: float

    @property
    def busier(self) -> bool:
        return self.slowdown > BUSIER


BUSIER = 1.3


def estimate_left(requests: list[DecodeRequest], repeats: int, comparison: Comparison | None = None,
                  forward_s: float | None = None, progress: Progress | None = None) -> Estimate | None:
    """Seconds still to go (module docstring, "How long is left"); ``forward_s`` (a one-token forward
    measured earlier) stands in before anything of this comparison is measured, ``progress`` (the
    latest ``Progress``, a tick with its ``run``) tells how far the run under way has come. None with
    nothing measured yet."""
    c = comparison
    setups = {s.request: s for s in c.setups} if c is not None else {}
    baseline_rate = c.baseline.seconds_per_token if c is not None and c.setups else None
    if c is not None and c.curve is not None and not forward_s:
        forward_s = c.curve.forward_s
    fallback = baseline_rate or forward_s
    if not fallback:
        return None

    def rate(request: DecodeRequest) -> float:
        setup = setups.get(request)
        return (setup.seconds_per_token if setup is not None else None) or fallback

    current = progress.setup if progress is not None and progress.phase == "timed" else None
    slowdown = _slowdown(c, current, progress.run if progress is not None else None, rate)
    warmed = len(c.setups) + len(c.skipped) if c is not None else 0
    left = sum(min(WARMUP_TOKENS, r.max_new_tokens) * fallback for r in requests[warmed:])
    if warmed >= len(requests):  # the warm-up is over: a request without a set-up was skipped in it
        requests = [r for r in requests if r in setups]
    for request in requests:
        setup = setups.get(request)
        runs = max(0, repeats - (len(setup.results) if setup is not None else 0))
        tokens = setup.tokens if setup is not None else request.max_new_tokens
        if setup is not None and setup is current and runs:
            runs -= 1  # the run under way: what it has still to make
            done = progress.run.tokens if progress.run is not None else 0
            left += max(0, tokens - done) * rate(request) * slowdown
        left += runs * tokens * rate(request) * slowdown
    return Estimate(left, slowdown)


def _slowdown(c: Comparison | None, current: TimedSetup | None, run: RunProgress | None, rate) -> float:
    """The machine's speed now against when the set-ups were first measured: the run under way's
    seconds per token so far over its set-up's (once it has made a few tokens), else the latest
    finished run's over its set-up's first."""
    if current is not None and run is not None and run.tokens >= MIN_TOKENS_TO_JUDGE and run.seconds > 0:
        return (run.seconds / run.tokens) / rate(current.request)
    if c is not None and c.setups:  # the latest finished run: the last set-up of the round furthest on
        rounds_done = max(len(s.results) for s in c.setups)
        latest = next(s for s in reversed(c.setups) if len(s.results) == rounds_done)
        if latest.slowdown() is not None:
            return latest.slowdown()
    return 1.0


MIN_TOKENS_TO_JUDGE = 4  # a run under way tells the machine's speed once it has made this many tokens


def run_comparison(requests: list[DecodeRequest], repeats: int = 3,
                   should_stop: Callable[[], bool] = lambda: False,
                   metered: Callable[[DecodeRequest], ContextManager] | None = None) -> Iterator[Progress]:
    """Warm up every request, then time them ``repeats`` rounds, interleaved (the first request is the
    baseline). Yields before each run and after each timed run; a request whose drafter cannot run
    here (a UserError while warming up) is skipped with its reason, the baseline's error is raised.
    After the baseline's warm-up the target's verify-cost curve is read (measured on first use: phase "cost").
    ``metered(request)``, if given, is entered around each timed run and its ``observe`` sees every step
    (the server's /metrics)."""
    if not 1 <= repeats <= MAX_REPEATS:
        raise UserError(f"repeats must be from 1 to {MAX_REPEATS} (got {repeats})")
    comparison = Comparison([], repeats)
    for request in requests:
        setup = TimedSetup(request)
        yield Progress("warmup", 0, setup, comparison)
        try:
            warm = yield from _decode(
                request.model_copy(update={"max_new_tokens": min(WARMUP_TOKENS, request.max_new_tokens)}),
                should_stop, tick=Progress("warmup", 0, setup, comparison, tick=True))
        except UserError as e:
            if not comparison.setups:
                raise
            comparison.skipped.append((setup.label, str(e)))
            continue
        if warm.result.stop_reason == "cancelled":
            comparison.stopped = warm.result
            return
        setup.warmup = warm.result
        comparison.setups.append(setup)
        if comparison.curve is None:
            yield Progress("cost", 0, None, comparison)
            comparison.curve = cost_curve(warm.target)
    for round_, setup in rounds(comparison.setups, repeats):
        yield Progress("timed", round_, setup, comparison)
        with metered(setup.request) if metered else nullcontext() as meter:
            decoder = yield from _decode(setup.request, should_stop, meter.observe if meter else None,
                                         tick=Progress("timed", round_, setup, comparison, tick=True))
        result = decoder.result
        if result.stop_reason == "cancelled":
            comparison.stopped = result
            return
        setup.results.append(result)
        yield Progress("timed", round_, None, comparison)


def _decode(request: DecodeRequest, should_stop: Callable[[], bool],
            on_step: Callable[[StepRecord], None] | None = None,
            tick: Progress | None = None) -> Iterator[Progress]:
    """Decode one request to its end, or until ``should_stop`` (its result then says "cancelled");
    returns the decoder. Yields ``tick`` every ``TICK_S`` seconds on the way, so a caller serving a
    page notices a client that went away (closing this generator cancels the run; its KV comes back)."""
    decoder, prompt_ids = build_decoder(request)
    steps = decoder.steps(prompt_ids)
    last, first = monotonic(), None
    try:
        for record in steps:
            if on_step is not None:
                on_step(record)
            if should_stop():
                break
            if first is None:  # the run's speed is read from its steps, the prefill left out
                first = (decoder.state.clock(), len(decoder.state.new_tokens))
            if tick is not None and monotonic() - last >= TICK_S:
                last = monotonic()
                yield replace(tick, run=RunProgress(decoder.state.clock() - first[0],
                                                    len(decoder.state.new_tokens) - first[1]))
    finally:
        steps.close()
    return decoder
