"""The lab's one timer and its one speedup: how every number of ``seconds`` and ``x faster`` is taken.

**The timer** (``time_interleaved``): every candidate runs once untimed (the warm-up: first-call
allocations, caches and lazy loading are not charged to a timed run), then ``repeats`` rounds in
which every candidate runs once, in turn -- A, B, C; A, B, C; ... -- so a change in the machine's
load falls on every candidate alike. Each candidate keeps its samples; the number it reports is
their median. The verify-cost probe (``core.cost.probe``), the bench (``core.studies.bench``),
the batch-size study (``core.studies.batch_size``) and the LM head's choice of route
(``core.runtime.head``) time with it; Compare (``core.studies.comparison``) runs the same rounds
(``rounds``) one decode at a time, so a page can show each run as it ends. It imports nothing of
the lab, so every layer may use it (tests/import_graph.py).

**The speedup** (``speedup``): the median over prompts of (median baseline seconds / median
candidate seconds) on that prompt, both timed in the same interleaved run. A prompt's own
medians make it robust to one disturbed repeat; the median over prompts makes it robust to one
odd prompt. With one prompt (Compare, a batch of the batch-size study) it is the ratio of the
two medians. ``prompt_speedups`` gives the per-prompt ratios it is the median of (the bench
also reports their minimum and their median per language).

**A disturbed timing** (``disturbed``): a time the CPU did not give the lab in full -- other
processes on the cores (a class on one server), another run of the same process, a stall -- is
labelled, never taken at face value. Two signs, either enough: the engine's thread spent more than
``DISTURBED_WAIT_SHARE`` of the stretch runnable but waiting for a core (``thread_wait_s``: the
kernel's own count, Linux's schedstat; its CPU time would not do -- torch's idle threads spin, so a
process short of cores still burns about a core), or the stretch took more than
``DISTURBED_SLOWDOWN`` times what was expected of it. What the goodput controller learns from a step,
and the plain reference the page compares with, come from undisturbed timings only.
"""
from __future__ import annotations

import os
import statistics
import threading
from dataclasses import dataclass, field
from time import perf_counter
from typing import Callable, Generic, Hashable, Iterable, Iterator, Mapping, Sequence, TypeVar

DISTURBED_WAIT_SHARE = 0.2  # a stretch whose thread waited for a core this share of its time was disturbed
DISTURBED_SLOWDOWN = 1.75  # a stretch this many times slower than expected was disturbed
SCHEDSTAT = "/proc/thread-self/schedstat"  # on-CPU ns, run-queue wait ns, timeslices (Linux)

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


@dataclass
class Samples(Generic[T]):
    """One candidate's timed runs, in round order: what each returned and the seconds it took."""

    results: list[T] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def rounds(keys: Iterable[K], repeats: int) -> Iterator[tuple[int, K]]:
    """The timed order: ``(round, key)`` for rounds 1 .. ``repeats``, every key once per round, in turn."""
    keys = list(keys)
    for round_ in range(1, repeats + 1):
        for key in keys:
            yield round_, key


def time_interleaved(candidates: Mapping[K, Callable[[], T]], repeats: int, warmup: int = 1, *,
                     warmup_keys: Iterable[K] | None = None, seconds: Callable[[T], float] | None = None,
                     on_sample: Callable[[int, K], None] | None = None) -> dict[K, Samples[T]]:
    """Run every candidate ``warmup`` times untimed (only those in ``warmup_keys`` when given), then
    ``repeats`` interleaved rounds (``rounds``); returns each candidate's ``Samples``.

    A sample is the wall time around the call, or ``seconds(result)`` when the candidate times
    itself (a decode that leaves its set-up out). ``on_sample(round, key)`` is called after each
    timed run (progress)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1 (got {repeats})")
    warm = list(candidates) if warmup_keys is None else list(warmup_keys)
    for _ in range(warmup):
        for key in warm:
            candidates[key]()
    samples: dict[K, Samples[T]] = {key: Samples() for key in candidates}
    for round_, key in rounds(candidates, repeats):
        start = perf_counter()
        result = candidates[key]()
        elapsed = perf_counter() - start
        samples[key].results.append(result)
        samples[key].seconds.append(elapsed if seconds is None else seconds(result))
        if on_sample is not None:
            on_sample(round_, key)
    return samples


def prompt_speedups(baseline: Sequence[Sequence[float]], candidate: Sequence[Sequence[float]]) -> list[float]:
    """Per prompt: the baseline's median seconds over the candidate's (``[prompt][repeat]`` seconds each)."""
    if len(baseline) != len(candidate):
        raise ValueError(f"{len(baseline)} baseline prompts against {len(candidate)} candidate prompts")
    return [statistics.median(b) / statistics.median(c) for b, c in zip(baseline, candidate)]


def speedup(baseline: Sequence[Sequence[float]], candidate: Sequence[Sequence[float]]) -> float:
    """The lab's speedup: the median over prompts of (median baseline seconds / median candidate
    seconds) on that prompt; ``[prompt][repeat]`` seconds each, timed in the same interleaved run."""
    return statistics.median(prompt_speedups(baseline, candidate))


def disturbed(wall_s: float, wait_s: float | None = None, expected_s: float | None = None) -> str:
    """Why a timing of ``wall_s`` seconds cannot be taken at face value, or "" when it can: "cpu"
    when its thread waited for a core more than ``DISTURBED_WAIT_SHARE`` of it (``wait_s``: the
    difference of two ``thread_wait_s`` readings), "slow" when it took more than
    ``DISTURBED_SLOWDOWN`` times ``expected_s``. Unknown readings (None) are not evidence either way."""
    if wall_s <= 0:
        return ""
    if wait_s is not None and wait_s > DISTURBED_WAIT_SHARE * wall_s:
        return "cpu"
    if expected_s is not None and expected_s > 0 and wall_s > DISTURBED_SLOWDOWN * expected_s:
        return "slow"
    return ""


class _Schedstat(threading.local):
    """The calling thread's schedstat file, opened once per thread and closed with it."""

    def __init__(self):
        try:
            self.fd: int | None = os.open(SCHEDSTAT, os.O_RDONLY)
        except OSError:
            self.fd = None

    def __del__(self):
        if self.fd is not None:
            os.close(self.fd)


_schedstat = _Schedstat()


def thread_wait_s() -> float | None:
    """Seconds the calling thread has spent runnable but waiting for a core since it started (the
    kernel's run-queue delay); None where the kernel does not say. A microsecond or two a reading."""
    if _schedstat.fd is None:
        return None
    try:
        return int(os.pread(_schedstat.fd, 128, 0).split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def waited_since(reading: float | None) -> float | None:
    """Seconds the calling thread waited for a core since a ``thread_wait_s`` reading (None: unknown)."""
    now = thread_wait_s()
    return None if reading is None or now is None else max(0.0, now - reading)
