"""The expected-speedup model as curves over the acceptance rate, with measured runs as points."""
from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.theory import tokens_per_verify, wallclock_speedup

from ..i18n import t
from ..palette import COLORS
from .style import finish

ALPHAS = [i / 100 for i in range(0, 100)] + [0.995]
REFERENCE_KS = (1, 2, 4, 8)


@dataclass(frozen=True)
class MeasuredPoint:
    """One finished run of this session, reduced to what the model talks about."""

    label: str
    alpha: float  # the run's acceptance rate
    k: int  # draft depth from its settings
    c: float  # measured draft cost per drafted position, relative to one verify forward
    tokens_per_verify: float  # measured tau
    speedup: float | None  # wall-clock speedup over the baseline measured in the same comparison


def worth_figure(alpha: float, k: int, c: float, points: list[MeasuredPoint], lang: str) -> go.Figure:
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        t("worth.plot_tokens", lang), t("worth.plot_speedup", lang, k=k, c=c)))
    for ref_k in REFERENCE_KS:
        if ref_k != k:
            fig.add_trace(go.Scatter(
                x=ALPHAS, y=[tokens_per_verify(a, ref_k) for a in ALPHAS], mode="lines", name=f"k={ref_k}",
                line={"color": "#c8c8c8", "width": 1.2}, showlegend=False, hoverinfo="name+y"), 1, 1)
    fig.add_trace(go.Scatter(x=ALPHAS, y=[tokens_per_verify(a, k) for a in ALPHAS], mode="lines",
                             name=t("worth.model", lang, k=k), line={"color": COLORS["bonus"], "width": 3}), 1, 1)
    fig.add_trace(go.Scatter(x=ALPHAS, y=[wallclock_speedup(a, k, c) for a in ALPHAS], mode="lines",
                             name=t("worth.model_speedup", lang),
                             line={"color": COLORS["correction"], "width": 3}), 1, 2)
    fig.add_hline(y=1.0, line={"color": COLORS["rejected"], "dash": "dot"}, row=1, col=2,
                  annotation_text=t("worth.break_even", lang), annotation_position="bottom right")
    fig.add_trace(go.Scatter(x=[alpha], y=[tokens_per_verify(alpha, k)], mode="markers", showlegend=False,
                             marker={"color": COLORS["bonus"], "size": 13, "line": {"color": "white", "width": 2}},
                             hoverinfo="x+y"), 1, 1)
    fig.add_trace(go.Scatter(x=[alpha], y=[wallclock_speedup(alpha, k, c)], mode="markers", showlegend=False,
                             marker={"color": COLORS["correction"], "size": 13, "line": {"color": "white", "width": 2}},
                             hoverinfo="x+y"), 1, 2)
    _add_points(fig, points, lang)
    fig.update_xaxes(title=t("worth.alpha", lang), range=[0, 1])
    fig.update_yaxes(rangemode="tozero")
    fig = finish(fig, "", 440, below=True)
    fig.update_layout(margin={"t": 40})
    return fig


def _add_points(fig: go.Figure, points: list[MeasuredPoint], lang: str) -> None:
    if not points:
        return
    hover = [t("worth.point_hover", lang, label=p.label, alpha=p.alpha, k=p.k, c=p.c, tau=p.tokens_per_verify,
               tau_model=tokens_per_verify(p.alpha, p.k)) for p in points]
    fig.add_trace(go.Scatter(
        x=[p.alpha for p in points], y=[p.tokens_per_verify for p in points], mode="markers+text",
        name=t("worth.measured", lang), text=[p.label for p in points], textposition="top center",
        textfont={"size": 10, "color": "#555555"}, hovertext=hover, hoverinfo="text",
        marker={"color": "#111111", "size": 10, "symbol": "diamond"}), 1, 1)
    timed = [p for p in points if p.speedup is not None]
    if timed:
        fig.add_trace(go.Scatter(
            x=[p.alpha for p in timed], y=[p.speedup for p in timed], mode="markers+text", showlegend=False,
            name=t("worth.measured", lang), text=[p.label for p in timed], textposition="top center",
            textfont={"size": 10, "color": "#555555"},
            hovertext=[t("worth.speedup_hover", lang, label=p.label, alpha=p.alpha, k=p.k, c=p.c, speedup=p.speedup,
                         model=wallclock_speedup(p.alpha, p.k, p.c)) for p in timed],
            hoverinfo="text", marker={"color": "#111111", "size": 10, "symbol": "diamond"}), 1, 2)
