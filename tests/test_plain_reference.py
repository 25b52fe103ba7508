"""A run's timed numbers, on records whose times are set by hand: the one plain reference
(``core.records.metrics.plain_reference``), costs that leave disturbed steps out, and the break-even
model counted in plain steps (``core.cost.theory.in_plain_steps``)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from app.figures.breakeven import break_even
from core import generate
from core.cost.curve import CostCurve
from core.records import metrics
from core.records.steps import DecisionRecord

CURVE = CostCurve(tokens=[1, 2, 3, 4, 5], ratio=[1.0, 1.2, 1.4, 1.6, 1.8], forward_s=0.008, device="cpu", threads=1,
                  model="hand-made")


@pytest.fixture(scope="module")
def steps():
    return generate("我爱", drafter="draft", k=2, max_new_tokens=16).steps  # real records, times set below


def timed(record, draft_s, verify_s, disturbed="", decision=None, plain=False):
    return replace(record, draft_s=draft_s, verify_s=verify_s, disturbed=disturbed, decision=decision,
                   nodes=[] if plain else record.nodes)


def test_costs_leave_disturbed_steps_out_and_say_when_all_were(steps):
    run = [timed(steps[0], 0.002, 0.010), timed(steps[1], 0.004, 0.012), timed(steps[2], 0.020, 0.500, "cpu")]
    cost = metrics.step_cost(run, 0.01)
    assert cost.draft == pytest.approx(0.3) and cost.verify == pytest.approx(1.1) and not cost.disturbed
    assert metrics.tally(run).disturbed == 1 and metrics.forward_seconds(run) == pytest.approx(0.011)
    everything = metrics.step_cost([replace(r, disturbed="slow") for r in run], 0.01)
    assert everything.disturbed and everything.verify == pytest.approx(0.522 / 3 / 0.01)


def test_the_plain_reference_is_the_controllers_else_the_runs_own_plain_steps_else_the_probe(steps):
    drafted = [timed(steps[0], 0.002, 0.010), timed(steps[1], 0.004, 0.012, "cpu")]
    probe = metrics.plain_reference(drafted, 0.008)
    assert (probe.seconds, probe.source, probe.disturbed, probe.steps) == (0.008, "probe", 1, 2)
    assert metrics.plain_reference(drafted) is None
    plain = [timed(steps[i], 0.0, s, plain=True) for i, s in enumerate((0.009, 0.011, 0.010))]
    own = metrics.plain_reference(plain + [timed(steps[3], 0.0, 0.5, "cpu", plain=True)], 0.008)
    assert (own.seconds, own.source) == (0.010, "plain")  # the disturbed one is left out
    decision = DecisionRecord(offered=2, chosen=2, expected_tokens=2.0, expected_gain=1.5, reason="all",
                              plain_step_s=0.011)
    controlled = drafted + [timed(steps[2], 0.002, 0.010, decision=decision)]
    ref = metrics.plain_reference(controlled, 0.008)
    assert (ref.seconds, ref.source) == (0.011, "run")


def test_the_break_even_point_counts_in_the_runs_plain_steps(steps):
    decision = DecisionRecord(offered=2, chosen=2, expected_tokens=2.0, expected_gain=1.5, reason="all",
                              plain_step_s=0.010)
    run = [timed(r, 0.001, 0.009, decision=decision) for r in steps[:4] if r.nodes]
    model = break_even(run, CURVE)
    assert model.forward_s == 0.010  # the why-lines' plain step, not the probe's 8 ms forward
    v = sum(CURVE.v(len(r.nodes) + 1) for r in run) / len(run)
    assert model.verify_cost == pytest.approx(1 + (v - 1) * 0.008 / 0.010)
    assert model.draft_cost == pytest.approx(0.1)
    tau = sum(len(r.emitted) for r in run) / len(run)
    assert model.measured == pytest.approx(tau / (0.1 + 0.9 + 0.2))  # draft, verify, and 2 ms of bookkeeping
