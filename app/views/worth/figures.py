"""The expected-speedup model as curves over the acceptance rate, with measured runs as points, and the
machine's verify-cost curve v(n) with each run's own verifies beside it."""
from __future__ import annotations

import statistics
from collections.abc import Callable

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.cost.curve import CostCurve
from core.cost.theory import tokens_per_verify, wallclock_speedup

from ...figures.style import finish
from ...i18n import t
from ...palette import COLORS, OTHER_DRAFTER
from ...shared import MeasuredPoint

ALPHAS = [i / 100 for i in range(0, 100)] + [0.995]
REFERENCE_KS = (1, 2, 4, 8)


def worth_figure(alpha: float, k: int, c: float, points: list[MeasuredPoint], lang: str,
                 curves: dict[str, CostCurve] | None = None, chosen: str = "float32") -> go.Figure:
    """Tokens per verify and speedup against alpha at (k, c, v(k+1) of the ``chosen`` precision's curve),
    and v(n) itself: every precision's measured curve, the chosen one bold."""
    curves = curves or {}
    curve = curves.get(chosen)
    v = curve.v(k + 1) if curve is not None else 1.0
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.07, subplot_titles=(
        t("worth.plot_tokens", lang), t("worth.plot_speedup", lang, k=k, c=c, v=v), t("worth.plot_cost", lang)))
    for ref_k in REFERENCE_KS:
        if ref_k != k:
            fig.add_trace(go.Scatter(
                x=ALPHAS, y=[tokens_per_verify(a, ref_k) for a in ALPHAS], mode="lines", name=f"k={ref_k}",
                line={"color": "#c8c8c8", "width": 1.2}, showlegend=False, hoverinfo="name+y"), 1, 1)
    fig.add_trace(go.Scatter(x=ALPHAS, y=[tokens_per_verify(a, k) for a in ALPHAS], mode="lines",
                             name=t("worth.model", lang, k=k), line={"color": COLORS["bonus"], "width": 3}), 1, 1)
    fig.add_trace(go.Scatter(x=ALPHAS, y=[wallclock_speedup(a, k, c, v) for a in ALPHAS], mode="lines",
                             name=t("worth.model_speedup", lang),
                             line={"color": COLORS["correction"], "width": 3}), 1, 2)
    fig.add_hline(y=1.0, line={"color": COLORS["rejected"], "dash": "dot"}, row=1, col=2,
                  annotation_text=t("worth.break_even", lang), annotation_position="bottom right")
    for col, y in ((1, tokens_per_verify(alpha, k)), (2, wallclock_speedup(alpha, k, c, v))):
        color = COLORS["bonus"] if col == 1 else COLORS["correction"]
        fig.add_trace(go.Scatter(x=[alpha], y=[y], mode="markers", showlegend=False, hoverinfo="x+y",
                                 marker={"color": color, "size": 13, "line": {"color": "white", "width": 2}}), 1, col)
    _add_points(fig, points, lang)
    _add_cost(fig, curves, chosen, points, lang)
    fig.update_xaxes(title=t("worth.alpha", lang), range=[0, 1], row=1, col=1)
    fig.update_xaxes(title=t("worth.alpha", lang), range=[0, 1], row=1, col=2)
    fig.update_xaxes(title=t("axis.query_tokens", lang), rangemode="tozero", row=1, col=3)
    fig.update_yaxes(rangemode="tozero")
    fig = finish(fig, "", 440, below=True)
    fig.update_layout(margin={"t": 40})
    return fig


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "—" if value is None else format(value, spec)


MAX_LABELLED = 3  # more measured points than this: names on hover and in the table below, not on the plot


def _add_points(fig: go.Figure, points: list[MeasuredPoint], lang: str) -> None:
    if not points:
        return
    mode = "markers+text" if len(points) <= MAX_LABELLED else "markers"  # a crowd of names is unreadable
    hover = [t("worth.point_hover", lang, label=p.label, alpha=p.alpha, k=p.k, c=_fmt(p.c), tau=p.tokens_per_verify,
               tau_model=tokens_per_verify(p.alpha, p.k)) for p in points]
    fig.add_trace(go.Scatter(
        x=[p.alpha for p in points], y=[p.tokens_per_verify for p in points], mode=mode,
        name=t("worth.measured", lang), text=[p.label for p in points], textposition="top center",
        textfont={"size": 10, "color": "#555555"}, hovertext=hover, hoverinfo="text",
        marker={"color": "#111111", "size": 10, "symbol": "diamond"}), 1, 1)
    timed = [p for p in points if p.speedup is not None]
    if timed:
        fig.add_trace(go.Scatter(
            x=[p.alpha for p in timed], y=[p.speedup for p in timed], mode=mode, showlegend=False,
            name=t("worth.measured", lang), text=[p.label for p in timed], textposition="top center",
            textfont={"size": 10, "color": "#555555"},
            hovertext=[t("worth.speedup_hover", lang, label=p.label, alpha=p.alpha, k=p.k, c=_fmt(p.c),
                         speedup=p.speedup, model=_fmt(p.predicted, ".2f")) for p in timed],
            hoverinfo="text", marker={"color": "#111111", "size": 10, "symbol": "diamond"}), 1, 2)


OUTLIER = 3.0  # a run's own v above this many times the expected v(n) is a disturbance, not what a verify costs


def _add_cost(fig: go.Figure, curves: dict[str, CostCurve], chosen: str, points: list[MeasuredPoint],
              lang: str) -> None:
    """v(n): the machine's measured curves as lines (one per target precision, the chosen one bold),
    each run's own verifies as points; a disturbed run's verifies and outliers flagged, off the scale."""
    for precision, curve in curves.items():
        mine = precision == chosen
        fig.add_trace(go.Scatter(
            x=curve.tokens, y=curve.ratio, mode="lines+markers",
            name=t("worth.curve", lang) + (f" · {precision}" if len(curves) > 1 else ""),
            line={"color": COLORS["target"] if mine else OTHER_DRAFTER, "width": 3 if mine else 2,
                  "dash": "solid" if mine else "dash"}, marker={"size": 6 if mine else 4}), 1, 3)
    fig.add_hline(y=1.0, line={"color": "#999999", "dash": "dot"}, row=1, col=3)
    steady = [(p.label, n, v) for p in points if not p.disturbed for n, v in p.v_by_nodes.items()]
    expected = _expected_v(curves, chosen, steady)
    outliers = [(label, n, v) for label, n, v in steady if v > OUTLIER * expected(n)]
    own = [verify for verify in steady if verify not in outliers]
    if own:
        fig.add_trace(go.Scatter(
            x=[n for _, n, _ in own], y=[v for _, _, v in own], mode="markers", name=t("worth.runs_v", lang),
            hovertext=[t("worth.run_v", lang, label=label, n=n, v=v) for label, n, v in own], hoverinfo="text",
            marker={"color": "#111111", "size": 8, "symbol": "diamond-open"}), 1, 3)
    top = max([*(r for curve in curves.values() for r in curve.ratio), *(v for *_, v in own), 2.0]) * 1.15
    fig.update_yaxes(range=[0, top], row=1, col=3)  # a disturbed run or an outlier never sets the scale
    flagged = [(n, v, t("worth.run_v_disturbed", lang, label=p.label, n=n, v=v))
               for p in points if p.disturbed for n, v in p.v_by_nodes.items()]
    flagged += [(n, v, t("worth.run_v_outlier", lang, label=label, n=n, v=v, times=v / expected(n)))
                for label, n, v in outliers]
    if flagged:  # drawn at most at the top edge, an open marker, its real value on hover
        fig.add_trace(go.Scatter(
            x=[n for n, _, _ in flagged], y=[min(v, top * 0.97) for _, v, _ in flagged], mode="markers",
            name=t("worth.runs_v_disturbed", lang), hovertext=[hover for *_, hover in flagged], hoverinfo="text",
            marker={"color": COLORS["rejected"], "size": 8, "symbol": "triangle-up-open"}), 1, 3)


def _expected_v(curves: dict[str, CostCurve], chosen: str,
                own: list[tuple[str, int, float]]) -> Callable[[int], float]:
    """What a verify of n tokens should cost, to tell an outlier by: the chosen precision's curve
    (another measured one where it has none), else the middle of the runs' own verifies."""
    curve = curves.get(chosen) or next(iter(curves.values()), None)
    if curve is not None:
        return curve.v
    middle = statistics.median(v for *_, v in own) if own else 1.0
    return lambda n: middle
