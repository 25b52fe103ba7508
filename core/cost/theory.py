"""The expected-speedup model of speculative decoding (Leviathan et al., 2023, section 3).

Assume every drafted token is accepted independently with probability ``alpha`` and the
draft proposes a chain of ``k`` tokens per step. One verify forward of the target then yields

    tokens_per_verify = (1 - alpha**(k + 1)) / (1 - alpha)

tokens on average (the accepted prefix plus the correction or bonus token). If one draft
forward costs ``c`` one-token target forwards and verifying the k drafted tokens plus the root
costs ``v`` of them (v = v(k + 1), the verify-cost curve of ``core.cost.curve``: 1 where a forward is
memory-bound, growing once it turns compute-bound), a step costs ``k * c + v`` forwards of time, so

    wallclock_speedup = (1 - alpha**(k + 1)) / ((1 - alpha) * (k * c + v)).

The paper takes v = 1. Worked example: alpha = 0.6, k = 4, c = 0.05 gives 2.31 tokens per
verify and a 1.92x speedup with v = 1, 1.23x with v(5) = 1.67.

For a measured run the same model reads ``predicted_speedup(tau, k, c, v)``: its measured tokens
per forward over its measured drafting cost and the verify cost the curve gives for its trees
(``run_model`` reads every term off the run's StepRecords).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from core.cost.curve import CostCurve
from core.common.errors import UserError
from core.records.metrics import expected_verify_cost, tally, verify_cost_by_nodes
from core.records.steps import StepRecord


def _check(alpha: float, k: int, c: float = 0.0, v: float = 1.0) -> None:
    if not (isinstance(alpha, (int, float)) and math.isfinite(alpha) and 0.0 <= alpha <= 1.0):
        raise UserError(f"the acceptance rate alpha must be between 0 and 1 (got {alpha!r})")
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise UserError(f"k must be a whole number >= 0 (got {k!r})")
    if not (isinstance(c, (int, float)) and math.isfinite(c) and c >= 0.0):
        raise UserError(f"the draft cost c must be a number >= 0 (got {c!r})")
    if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0.0):
        raise UserError(f"the verify cost v must be a number > 0 (got {v!r})")


def tokens_per_verify(alpha: float, k: int) -> float:
    """Expected tokens one target verify forward yields: 1 + alpha + ... + alpha**k."""
    _check(alpha, k)
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def wallclock_speedup(alpha: float, k: int, c: float, v: float = 1.0) -> float:
    """Expected speedup over the target alone when one draft forward costs ``c`` one-token target
    forwards and the verify of k + 1 tokens costs ``v`` of them."""
    _check(alpha, k, c, v)
    return tokens_per_verify(alpha, k) / (k * c + v)


def predicted_speedup(tau: float, k: int, c: float, v: float) -> float:
    """The model's speedup for a run that yielded ``tau`` tokens per target forward: tau / (k*c + v)."""
    _check(0.0, k, c, v)
    if not (isinstance(tau, (int, float)) and math.isfinite(tau) and tau >= 0):
        raise UserError(f"tau must be a number >= 0 (got {tau!r})")
    return tau / (k * c + v)


@dataclass(frozen=True)
class RunModel:
    """A measured run (or a set-up's repeats, pooled) in the model's terms, every number from its
    StepRecords (``core.records.metrics``); None where its inputs are unknown."""

    alpha: float  # acceptance rate
    tau: float  # tokens per target forward
    draft_cost: float | None  # drafting time / verify time, over the drafting steps
    c: float | None  # drafting time per drafted position, in one-token target forwards
    v: float | None  # measured verify time per step, in one-token forwards
    v_model: float | None  # what the cost curve says the run's verifies cost
    predicted: float | None  # tau / (k*c + v_model)
    v_by_nodes: dict[int, float]  # the run's own v(n) points
    disturbed: bool = False  # the CPU disturbed every timed step: c and v are not this machine's own


def run_model(records: list[StepRecord], k: int, forward_s: float | None = None,
              curve: CostCurve | None = None) -> RunModel:
    """``records`` of a run drafting ``k`` deep, with times counted in ``forward_s`` (a one-token
    forward: a comparison's baseline, else the curve's -- the model's own unit, in which v(n) is a
    ratio of forwards) and ``curve`` the target's v(n) for the prediction. Steps the CPU disturbed
    are left out of c and v (``core.records.metrics.Tallies.step_cost``)."""
    totals = tally(records)
    forward_s = forward_s or (curve.forward_s if curve else None)
    cost = totals.step_cost(forward_s) if forward_s else None
    c = cost.draft / k if cost is not None and k > 0 else None
    v_model = expected_verify_cost(records, curve.v) if curve is not None else None
    return RunModel(
        alpha=totals.acceptance_rate, tau=totals.tau, draft_cost=totals.draft_cost, c=c,
        v=None if cost is None else cost.verify, v_model=v_model,
        predicted=predicted_speedup(totals.tau, k, c, v_model) if c is not None and v_model else None,
        v_by_nodes=verify_cost_by_nodes(records, forward_s) if forward_s else {},
        disturbed=cost is not None and cost.disturbed,
    )


def in_plain_steps(v: float, forward_s: float, plain_s: float) -> float:
    """A step verifying n tokens, v = forward(n) / forward(1) in the probe's one-token forwards
    (``forward_s``), counted in plain steps of ``plain_s`` (a whole plain step: its forward and its
    bookkeeping): a plain step and the larger verify's extra, 1 + (v - 1) * forward_s / plain_s --
    as the goodput controller counts a step (``GoodputController._step_s``)."""
    return 1.0 + (v - 1.0) * forward_s / plain_s


def bookkeeping_share(forward_s: float, plain_s: float) -> float:
    """What of a plain step of ``plain_s`` is not its one-token forward (``forward_s``): acceptance,
    commit and records, which a step's draft and verify seconds do not hold; 0 where the forward
    measured as long as the step (a probe on a busier machine)."""
    return max(0.0, 1.0 - forward_s / plain_s)
