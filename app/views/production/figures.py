"""The production monitor's live figure: one point per polling window of a Prometheus endpoint."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.serving.monitor import Watch

from ...figures.live import RUNNING, per_position_bars
from ...figures.style import finish, whole_ticks
from ...i18n import t
from ...palette import COLORS


def monitor_figure(watch: Watch, lang: str) -> go.Figure:
    """Four panels: tau per window (and since start); per-position acceptance since start (bars,
    as in the live plots) and in the last window; drafted and accepted tokens/s; running and
    waiting requests."""
    fig = make_subplots(rows=2, cols=2, horizontal_spacing=0.1, vertical_spacing=0.28, subplot_titles=(
        t("mon.tau", lang), t("live.per_position", lang), t("mon.tokens_per_s", lang), t("mon.requests", lang)))
    windows = watch.windows
    x = [round(w.end - watch.first.t, 1) for w in windows]
    overall = watch.overall
    fig.add_trace(go.Scatter(x=x, y=[w.tau for w in windows], name="τ", mode="lines+markers",
                             line={"color": COLORS["bonus"]}, showlegend=False), 1, 1)
    if overall.tau is not None and x:
        fig.add_trace(go.Scatter(x=[x[0], x[-1]], y=[overall.tau] * 2, name=t("mon.tau_overall", lang),
                                 mode="lines", line={"color": RUNNING, "dash": "dot"}), 1, 1)
    fig.add_trace(per_position_bars(overall.per_position, lang, name=t("mon.position_overall", lang)), 1, 2)
    if windows and windows[-1].per_position:
        last = windows[-1].per_position
        fig.add_trace(go.Scatter(x=list(range(1, len(last) + 1)), y=last, name=t("mon.last_window", lang),
                                 mode="markers", marker={"color": RUNNING, "size": 9}), 1, 2)
    for name, key, values in (("mon.drafted", "proposed", [w.drafted_per_s for w in windows]),
                              ("mon.accepted", "accepted", [w.accepted_per_s for w in windows])):
        fig.add_trace(go.Scatter(x=x, y=values, name=t(name, lang), mode="lines+markers",
                                 line={"color": COLORS[key]}), 2, 1)
    for name, key, values in (("mon.running", "target", [w.running for w in windows]),
                              ("mon.waiting", "correction", [w.waiting for w in windows])):
        fig.add_trace(go.Scatter(x=x, y=values, name=t(name, lang), mode="lines", line={"color": COLORS[key],
                                 "shape": "hv"}), 2, 2)
    fig.update_yaxes(rangemode="tozero", row=1, col=1)
    fig.update_yaxes(range=[0, 1.05], row=1, col=2)
    fig.update_yaxes(rangemode="tozero", row=2, col=1)
    fig.update_yaxes(rangemode="tozero", row=2, col=2,
                     **whole_ticks(max((max(w.running, w.waiting) for w in windows), default=1)))
    fig.update_xaxes(title=t("live.position", lang), dtick=1, row=1, col=2)
    for row, col in ((1, 1), (2, 1), (2, 2)):
        fig.update_xaxes(title=t("axis.seconds", lang), row=row, col=col)
    fig = finish(fig, "", 680, below=True)
    fig.update_layout(margin={"t": 40, "b": 90}, legend={"y": -0.14})
    return fig
