"""How big must the acceptance rate be for drafting to pay? The expected-speedup model
(``core.cost.theory``) as a curve over the per-token acceptance alpha, for the run's own drafter,
shape and machine, with the run's running point on it.

The curve is tokens_per_verify(alpha, k) / (k*c + v): k the run's mean draft depth, k*c its drafting
time per step and v what the verify-cost curve v(n) measured on this machine says its steps cost,
both in plain steps -- the run's one plain reference (``core.records.metrics.plain_reference``, the
value its why-lines and timeline read; ``core.cost.theory.in_plain_steps`` turns v(n), a ratio of
forwards, into plain steps). The point: x is the alpha at which the model yields the run's measured
tokens per verify (tau), y the run's measured speedup, tau over its undisturbed steps' drafting and
verify time and a plain step's bookkeeping, in plain steps.
"""
from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from core.cost.curve import CostCurve
from core.cost.theory import bookkeeping_share, in_plain_steps, tokens_per_verify
from core.records.metrics import expected_verify_cost, plain_reference, tally
from core.records.steps import StepRecord

from ..i18n import t
from ..palette import COLORS
from .style import empty, finish

ALPHAS = [i / 100 for i in range(101)]


@dataclass(frozen=True)
class BreakEven:
    k: int  # the run's mean draft depth over its drafting steps, rounded
    draft_cost: float  # k*c: drafting seconds per step in plain steps (measured in this run)
    verify_cost: float  # v: what v(n) says the run's steps cost, in plain steps (measured on this machine)
    forward_s: float  # the plain step everything is counted in (the run's ``plain_reference``)
    speedups: list[float]  # the model at ALPHAS
    alpha_even: float | None  # the least alpha at which the model pays (None: not even at alpha = 1)
    alpha: float  # the alpha at which the model yields the run's tau
    tau: float
    measured: float  # the run's tau / (its drafting + verify time and bookkeeping per step, in plain steps)
    disturbed: bool = False  # the CPU disturbed every step's timing: ``measured`` is not this machine's own


def alpha_for_tau(tau: float, k: int) -> float:
    """The per-token acceptance at which a k-chain yields ``tau`` tokens per verify (bisection)."""
    if tau <= 1.0:
        return 0.0
    if tau >= k + 1:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (mid, high) if tokens_per_verify(mid, k) < tau else (low, mid)
    return (low + high) / 2


def break_even(records: list[StepRecord], curve: CostCurve) -> BreakEven | None:
    """The model for this run so far, its times counted in the run's plain reference (the same value
    as its timeline's plain lane and its why-lines); None before a step that drafted."""
    drafting = [r for r in records if r.nodes]
    reference = plain_reference(records, curve.forward_s)
    totals = tally(records)
    cost = totals.step_cost(reference.seconds) if reference is not None else None
    if not drafting or cost is None:
        return None
    k = max(1, round(sum(max(n.depth for n in r.nodes) for r in drafting) / len(drafting)))
    verify = in_plain_steps(expected_verify_cost(records, curve.v), curve.forward_s, reference.seconds)
    per_step = cost.draft + verify
    speedups = [tokens_per_verify(a, k) / per_step for a in ALPHAS]
    even = next((a for a, s in zip(ALPHAS, speedups) if s >= 1.0), None)
    bookkeeping = bookkeeping_share(curve.forward_s, reference.seconds)  # in a plain step, not in draft + verify
    return BreakEven(k=k, draft_cost=cost.draft, verify_cost=verify, forward_s=cost.forward_s, speedups=speedups,
                     alpha_even=even, alpha=alpha_for_tau(totals.tau, k), tau=totals.tau,
                     measured=totals.tau / (cost.draft + cost.verify + bookkeeping), disturbed=cost.disturbed)


def breakeven_figure(model: BreakEven | None, lang: str) -> go.Figure:
    if model is None:
        return empty(t("even.none", lang), height=200)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=ALPHAS, y=model.speedups, mode="lines", line={"color": COLORS["correction"], "width": 3},
                             name=t("even.model", lang, k=model.k, d=model.draft_cost, v=model.verify_cost)))
    fig.add_hline(y=1.0, line={"color": COLORS["rejected"], "dash": "dot"},
                  annotation_text=t("even.plain", lang), annotation_position="bottom right")
    if model.alpha_even is not None:
        fig.add_vline(x=model.alpha_even, line={"color": "#888888", "dash": "dash"},
                      annotation_text=t("even.alpha_even", lang, a=model.alpha_even), annotation_position="top left")
    fig.add_trace(go.Scatter(
        x=[model.alpha], y=[model.measured], mode="markers+text",
        name=t("even.run_disturbed" if model.disturbed else "even.run", lang),
        text=[f"{model.measured:.2f}×"], textposition="middle right",
        hovertext=[t("even.run_hover", lang, alpha=model.alpha, tau=model.tau, s=model.measured)], hoverinfo="text",
        marker={"color": "#111111", "size": 13, "symbol": "diamond", "line": {"color": "white", "width": 2}}))
    fig.update_xaxes(title=t("even.axis_alpha", lang), range=[0, 1])
    fig.update_yaxes(title=t("even.axis_speedup", lang), rangemode="tozero")
    return finish(fig, t("even.title", lang), 340)
