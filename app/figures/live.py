"""The live plots of a run, redrawn after every step: acceptance, tokens per target forward,
per-position acceptance."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.records.steps import StepRecord

from ..i18n import t
from ..palette import COLORS
from ..series import run_series
from .style import finish, whole_ticks

RUNNING = "#222222"


def per_position_bars(values: list[float], lang: str, name: str | None = None) -> go.Bar:
    """Acceptance by draft position (1 = the first drafted token), in the accepted colour."""
    return go.Bar(x=list(range(1, len(values) + 1)), y=values, name=name or t("live.position", lang),
                  showlegend=name is not None, marker_color=COLORS["accepted"])


def live_figure(records: list[StepRecord], lang: str) -> go.Figure:
    """Three panels: acceptance per step and running; tokens per forward per step and running
    mean; acceptance by draft position."""
    s = run_series(records)
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08, subplot_titles=(
        t("live.acceptance", lang), t("live.tokens_per_forward", lang), t("live.per_position", lang)))
    fig.add_trace(go.Bar(x=s.steps, y=s.step_acceptance, name=t("live.per_step", lang),
                         marker_color=COLORS["accepted"], opacity=0.55, legendgroup="step"), 1, 1)
    fig.add_trace(go.Scatter(x=s.steps, y=s.running_acceptance, name=t("live.running", lang),
                             mode="lines+markers", line={"color": RUNNING}, legendgroup="run"), 1, 1)
    fig.add_trace(go.Bar(x=s.steps, y=s.step_tokens, name=t("live.per_step", lang), showlegend=False,
                         marker_color=COLORS["bonus"], opacity=0.55, legendgroup="step"), 1, 2)
    fig.add_trace(go.Scatter(x=s.steps, y=s.running_tokens_per_forward, name=t("live.running", lang),
                             showlegend=False, mode="lines+markers", line={"color": RUNNING},
                             legendgroup="run"), 1, 2)
    fig.add_trace(per_position_bars(s.per_position_acceptance, lang), 1, 3)
    fig.update_yaxes(range=[0, 1.05], row=1, col=1)
    fig.update_yaxes(rangemode="tozero", row=1, col=2)
    fig.update_yaxes(range=[0, 1.05], row=1, col=3)
    fig.update_xaxes(title=t("axis.step", lang), row=1, col=1, **whole_ticks(len(records)))
    fig.update_xaxes(title=t("axis.step", lang), row=1, col=2, **whole_ticks(len(records)))
    fig.update_xaxes(title=t("live.position", lang), dtick=1, row=1, col=3)
    fig = finish(fig, "", 360, below=True)
    fig.update_layout(margin={"t": 40})
    return fig
