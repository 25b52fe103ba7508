"""The lab's one timer and its one speedup (``core.common.timing``): the order, the warm-up, the
samples and the median every measurement reads, and the definition every speedup uses."""
import statistics
from time import perf_counter, sleep

import pytest

from core.common.timing import Samples, prompt_speedups, rounds, speedup, time_interleaved


def test_candidates_run_warmed_up_then_interleaved_round_by_round():
    calls = []
    candidates = {name: (lambda name=name: calls.append(name) or name) for name in ("base", "a", "b")}
    samples = time_interleaved(candidates, repeats=3)
    assert calls == ["base", "a", "b"] + ["base", "a", "b"] * 3  # one warm-up pass, then rounds in turn
    assert list(rounds("xy", 2)) == [(1, "x"), (1, "y"), (2, "x"), (2, "y")]
    assert all(s.results == [name] * 3 and len(s.seconds) == 3 for name, s in samples.items())


def test_the_warm_up_can_be_limited_and_is_never_timed():
    calls = []
    candidates = {key: (lambda key=key: calls.append(key)) for key in ((0, "none"), (0, "draft"), (1, "none"))}
    progress = []
    time_interleaved(candidates, repeats=1, warmup_keys=[(0, "none")], on_sample=lambda r, k: progress.append((r, k)))
    assert calls == [(0, "none"), (0, "none"), (0, "draft"), (1, "none")]
    assert progress == [(1, (0, "none")), (1, (0, "draft")), (1, (1, "none"))]
    slow_first = iter([0.05, 0.0, 0.0, 0.0])
    samples = time_interleaved({"x": lambda: sleep(next(slow_first))}, repeats=3)
    assert max(samples["x"].seconds) < 0.04  # the slow first call was the warm-up


def test_a_sample_is_the_wall_time_around_the_call_or_the_candidates_own():
    start = perf_counter()
    samples = time_interleaved({"sleep": lambda: sleep(0.01)}, repeats=3, warmup=0)
    assert all(0.01 <= s < perf_counter() - start for s in samples["sleep"].seconds)
    own = iter([3.0, 1.0, 2.0])
    samples = time_interleaved({"run": lambda: next(own)}, repeats=3, warmup=0, seconds=lambda result: result)
    assert samples["run"].seconds == [3.0, 1.0, 2.0] and samples["run"].median == 2.0
    with pytest.raises(ValueError):
        time_interleaved({"run": lambda: None}, repeats=0)


def test_the_speedup_is_the_median_over_prompts_of_the_ratio_of_medians():
    baseline = [[10.0, 12.0, 11.0], [4.0, 4.0, 40.0], [9.0, 9.0, 9.0]]  # one disturbed repeat on prompt 2
    candidate = [[5.0, 5.5, 6.0], [1.0, 2.0, 2.0], [3.0, 3.0, 30.0]]
    assert prompt_speedups(baseline, candidate) == [11.0 / 5.5, 4.0 / 2.0, 9.0 / 3.0]
    assert speedup(baseline, candidate) == 2.0
    # not the ratio of the medians over everything, nor the median of paired per-round ratios
    pooled = statistics.median(sum(baseline, [])) / statistics.median(sum(candidate, []))
    paired = statistics.median(b / c for bs, cs in zip(baseline, candidate) for b, c in zip(bs, cs))
    assert speedup(baseline, candidate) not in (pytest.approx(pooled), pytest.approx(paired))
    assert speedup([[10.0, 6.0, 9.0]], [[6.0, 9.0, 7.0]]) == 9.0 / 7.0  # one prompt: the ratio of the medians
    with pytest.raises(ValueError):
        speedup([[1.0]], [[1.0], [2.0]])


def test_samples_report_their_median():
    assert Samples(results=[None] * 4, seconds=[4.0, 1.0, 3.0, 2.0]).median == 2.5
