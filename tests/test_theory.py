"""The expected-speedup model: closed forms, edge cases, validation, and a simulation check."""
import math
import random

import pytest

from core import UserError
from core.cost.theory import predicted_speedup, tokens_per_verify, wallclock_speedup


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.6, 0.9, 0.99])
@pytest.mark.parametrize("k", [0, 1, 4, 8])
def test_tokens_per_verify_is_the_geometric_sum(alpha, k):
    assert tokens_per_verify(alpha, k) == pytest.approx(sum(alpha**i for i in range(k + 1)))


def test_edges():
    assert tokens_per_verify(0.0, 5) == 1.0  # nothing accepted: only the correction
    assert tokens_per_verify(1.0, 5) == 6.0  # everything accepted plus the bonus
    assert tokens_per_verify(0.7, 0) == 1.0  # no draft at all
    assert wallclock_speedup(0.8, 4, 0.0) == tokens_per_verify(0.8, 4)  # a free draft


def test_worked_example_from_the_docstring():
    assert tokens_per_verify(0.6, 4) == pytest.approx(2.3056)
    assert wallclock_speedup(0.6, 4, 0.05) == pytest.approx(2.3056 / 1.2)


def test_an_expensive_draft_is_slower_than_the_target_alone():
    assert wallclock_speedup(0.5, 4, 0.5) < 1.0
    assert wallclock_speedup(0.9, 4, 0.05) > 1.0


def test_more_acceptance_never_hurts():
    values = [wallclock_speedup(a / 100, 4, 0.1) for a in range(100)]
    assert values == sorted(values)


def test_simulated_chain_matches_the_closed_form():
    """Draft k tokens, each kept with probability alpha until the first miss; +1 for correction/bonus."""
    rng = random.Random(0)
    alpha, k, trials = 0.7, 4, 40_000
    total = 0
    for _ in range(trials):
        accepted = 0
        while accepted < k and rng.random() < alpha:
            accepted += 1
        total += accepted + 1
    assert total / trials == pytest.approx(tokens_per_verify(alpha, k), rel=0.02)


@pytest.mark.parametrize("alpha,k,c", [(-0.1, 4, 0.1), (1.5, 4, 0.1), (math.nan, 4, 0.1), (0.5, -1, 0.1),
                                       (0.5, 2.5, 0.1), (0.5, True, 0.1), (0.5, 4, -1.0), (0.5, 4, math.inf),
                                       ("0.5", 4, 0.1)])
def test_bad_inputs_raise_user_errors(alpha, k, c):
    with pytest.raises(UserError):
        wallclock_speedup(alpha, k, c)


def test_the_verify_cost_enters_the_denominator():
    """A verify of k+1 tokens that costs v one-token forwards: speedup = tau / (k*c + v)."""
    assert wallclock_speedup(0.6, 4, 0.05, 1.0) == wallclock_speedup(0.6, 4, 0.05)
    assert wallclock_speedup(0.6, 4, 0.05, 1.67) == pytest.approx(2.3056 / (0.2 + 1.67), rel=1e-4)  # 1.23x
    assert predicted_speedup(1.8, 4, 0.05, 1.6) == pytest.approx(1.8 / 1.8)
    assert predicted_speedup(2.0, 0, 0.0, 1.0) == 2.0
    for bad in (0.0, -1.0, math.nan):
        with pytest.raises(UserError):
            wallclock_speedup(0.6, 4, 0.05, bad)
    with pytest.raises(UserError):
        predicted_speedup(-1.0, 4, 0.05, 1.0)
