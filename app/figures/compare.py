"""Drafters side by side on one target: running acceptance and tokens per target forward, overlaid."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.records import StepRecord

from ..i18n import t
from ..series import run_series
from .style import finish

LINE_COLORS = ("#444444", "#2b6cb0", "#2e9e44", "#f08a00", "#7b4fd6", "#d62f2f", "#0f9d9a", "#a0522d")


def compare_figure(runs: list[tuple[str, list[StepRecord]]], lang: str) -> go.Figure:
    """``runs``: (label, the run's StepRecords) in the order they ran; the first is the baseline."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        t("compare.plot_acceptance", lang), t("compare.plot_tokens", lang)))
    for i, (label, records) in enumerate(runs):
        s = run_series(records)
        color = LINE_COLORS[i % len(LINE_COLORS)]
        fig.add_trace(go.Scatter(x=s.steps, y=s.running_acceptance, name=label, legendgroup=label,
                                 mode="lines", line={"color": color, "width": 2.5}), 1, 1)
        fig.add_trace(go.Scatter(x=s.steps, y=s.running_tokens_per_forward, name=label, legendgroup=label,
                                 showlegend=False, mode="lines", line={"color": color, "width": 2.5}), 1, 2)
    fig.update_yaxes(range=[0, 1.05], row=1, col=1)
    fig.update_yaxes(rangemode="tozero", row=1, col=2)
    fig.update_xaxes(title=t("axis.step", lang))
    fig = finish(fig, "", 380, below=True)
    fig.update_layout(margin={"t": 40})
    return fig
