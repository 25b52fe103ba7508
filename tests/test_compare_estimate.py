"""Compare's estimate of what is left (``core.studies.comparison.estimate_left``), played on an
injected clock: a schedule of warm-ups and interleaved rounds whose runs take what a busy machine
gives them, ticked every half second as the page is. At half-way the estimate (time so far plus time
left) is within 30% of the final time, though the first guess -- a one-token forward measured on an
idle machine -- was several times too short; when the machine turns busier mid-way it says so."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from core.api.request import DecodeRequest
from core.studies.comparison import (WARMUP_TOKENS, Comparison, Progress, RunProgress, TimedSetup,
                                     estimate_left)

TOKENS = 40
IDLE_FORWARD_S = 0.01  # what an earlier, idle measurement says a token costs
SECONDS_PER_TOKEN = {"none": 0.04, "ngram": 0.02, "draft": 0.03}  # what this busy machine gives each set-up
TICK_S = 0.5


def play(repeats: int, load) -> tuple[list[tuple[float, float, bool]], float]:
    """Run the schedule on a simulated clock; ``load(round)`` multiplies every run's seconds in that
    round. Returns (elapsed, estimated total, busier) at every tick, and the final time."""
    requests = [DecodeRequest.of("我爱", "tiny", name, max_new_tokens=TOKENS) for name in SECONDS_PER_TOKEN]
    comparison = Comparison([], repeats)
    now, seen = 0.0, []

    def run(setup: TimedSetup | None, request: DecodeRequest, tokens: int, factor: float, round_: int):
        nonlocal now
        per_token = SECONDS_PER_TOKEN[request.drafter] * factor
        made = 0.0
        while made < tokens:
            step = min(TICK_S / per_token, tokens - made)
            made += step
            now += step * per_token
            progress = Progress("timed" if round_ else "warmup", round_, setup, comparison, tick=True,
                                run=RunProgress(made * per_token, int(made)))
            estimate = estimate_left(requests, repeats, comparison, IDLE_FORWARD_S, progress)
            seen.append((now, now + estimate.left_s, estimate.busier))
        return SimpleNamespace(wall_s=tokens * per_token, tokens=[0] * tokens, steps=[])

    for request in requests:
        setup = TimedSetup(request)
        setup.warmup = run(None, request, WARMUP_TOKENS, 1.5 * load(1), 0)  # first calls cost more
        comparison.setups.append(setup)
    for round_ in range(1, repeats + 1):
        for setup in comparison.setups:
            setup.results.append(run(setup, setup.request, TOKENS, load(round_), round_))
    return seen, now


def at_half_way(seen, final):
    return next(total for elapsed, total, _ in seen if elapsed >= final / 2)


@pytest.mark.parametrize("repeats", [2, 3, 5])
def test_on_a_steadily_busy_machine_the_estimate_at_half_way_is_within_30_percent(repeats):
    seen, final = play(repeats, lambda round_: 1.0)
    first = estimate_left([DecodeRequest.of("我爱", "tiny", n, max_new_tokens=TOKENS) for n in SECONDS_PER_TOKEN],
                          repeats, forward_s=IDLE_FORWARD_S)
    assert first.left_s < final / 2  # the idle guess: far too short
    assert at_half_way(seen, final) == pytest.approx(final, rel=0.3)
    assert not any(busier for *_, busier in seen)


def test_a_machine_that_turns_busy_mid_way_is_seen_and_the_estimate_follows():
    seen, final = play(4, lambda round_: 1.0 if round_ <= 2 else 3.0)  # two busier processes arrive in round 3
    assert at_half_way(seen, final) == pytest.approx(final, rel=0.3)
    assert any(busier for *_, busier in seen)  # the page says the machine is busier than at the start
    assert not any(busier for elapsed, _, busier in seen[: len(seen) // 4])
