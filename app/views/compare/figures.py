"""Drafters side by side on one target: running acceptance and tokens per target forward, overlaid."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.records.steps import StepRecord

from ...figures.style import finish, whole_ticks
from ...i18n import t
from ...palette import drafter_color
from ...series import run_series


def drafter_line(label: str) -> dict:
    """A run's line: its drafter's colour; dashed under the goodput controller (``auto``)."""
    return {"color": drafter_color(label), "width": 2.5, "dash": "dash" if "auto" in label else "solid"}


def compare_figure(runs: list[tuple[str, list[StepRecord]]], lang: str) -> go.Figure:
    """``runs``: (label, the run's StepRecords) in the order they ran; the first is the baseline."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        t("compare.plot_acceptance", lang), t("compare.plot_tokens", lang)))
    for label, records in runs:
        s = run_series(records)
        line = drafter_line(label)
        fig.add_trace(go.Scatter(x=s.steps, y=s.running_acceptance, name=label, legendgroup=label,
                                 mode="lines", line=line), 1, 1)
        fig.add_trace(go.Scatter(x=s.steps, y=s.running_tokens_per_forward, name=label, legendgroup=label,
                                 showlegend=False, mode="lines", line=line), 1, 2)
    fig.update_yaxes(range=[0, 1.05], row=1, col=1)
    fig.update_yaxes(rangemode="tozero", row=1, col=2)
    fig.update_xaxes(title=t("axis.step", lang), **whole_ticks(max((len(records) for _, records in runs), default=1)))
    fig = finish(fig, "", 380, below=True)
    fig.update_layout(margin={"t": 40})
    return fig
