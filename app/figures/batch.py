"""The batch-size study: throughput of each drafter against batch size (where speculation stops
paying marked), and the target's forward latency against the tokens in one forward."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..i18n import t
from .compare import LINE_COLORS
from .style import empty, finish


def batch_figure(result: dict | None, lang: str) -> go.Figure:
    """``result``: a bench result with ``batch_sweep``, ``batch_crossover`` and ``forward_latency``."""
    if not result or not result.get("batch_sweep"):
        return empty(t("hint.load_sweep", lang), 440)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        t("batch.plot_throughput", lang), t("batch.plot_latency", lang)))
    _throughput(fig, result, lang)
    _latency(fig, result.get("forward_latency") or [], lang)
    sizes = sorted({r["batch"] for r in result["batch_sweep"]})
    fig.update_xaxes(type="log", title=t("batch.axis_batch", lang), tickvals=sizes, row=1, col=1)
    fig.update_xaxes(type="log", title=t("batch.axis_tokens", lang), row=1, col=2)
    fig.update_yaxes(rangemode="tozero", title=t("batch.axis_tps", lang), row=1, col=1)
    fig.update_yaxes(type="log", title=t("batch.axis_ms", lang), row=1, col=2)
    fig = finish(fig, "", 460, below=True)
    fig.update_layout(margin={"t": 40})
    return fig


def _throughput(fig: go.Figure, result: dict, lang: str) -> None:
    rows = result["batch_sweep"]
    colors = {}
    for i, name in enumerate(dict.fromkeys(r["drafter"] for r in rows)):
        colors[name] = LINE_COLORS[i % len(LINE_COLORS)]
        mine = sorted((r for r in rows if r["drafter"] == name), key=lambda r: r["batch"])
        fig.add_trace(go.Scatter(
            x=[r["batch"] for r in mine], y=[r["tokens_per_s"] for r in mine], name=name, mode="lines+markers",
            line={"color": colors[name], "width": 3 if name == "none" else 2.5, "dash": "solid"},
            hovertemplate="%{x}: %{y:.1f} tokens/s<extra>" + name + "</extra>"), 1, 1)
    top = max(r["tokens_per_s"] for r in rows)
    smallest = min(r["batch"] for r in rows)
    for i, (name, batch) in enumerate((result.get("batch_crossover") or {}).items()):
        if batch is None:
            continue
        color = colors.get(name, "#888888")
        label_at = top * (1.08 - 0.07 * i)  # one label height apart, so two crossovers at one batch stay readable
        fig.add_trace(go.Scatter(  # a vertical dotted line at the crossover (shapes take log10 x on a log axis)
            x=[batch, batch, batch], y=[0, top, label_at], mode="lines+text", showlegend=False, hoverinfo="skip",
            text=["", "", t("batch.stops_paying", lang, drafter=name)],
            textposition="middle right" if batch == smallest else "middle left",
            textfont={"size": 11, "color": color}, line={"color": color, "dash": "dot", "width": 1.5}), 1, 1)


def _latency(fig: go.Figure, grid: list[dict], lang: str) -> None:
    for i, batch in enumerate(sorted({r["batch"] for r in grid})):
        mine = sorted((r for r in grid if r["batch"] == batch), key=lambda r: r["tokens"])
        label = t("batch.latency_series", lang, batch=batch)
        fig.add_trace(go.Scatter(
            x=[r["tokens"] for r in mine], y=[r["latency_ms"] for r in mine], name=label, mode="lines+markers",
            line={"color": LINE_COLORS[i % len(LINE_COLORS)], "width": 1.5, "dash": "dot"},
            hovertemplate="%{x} tokens: %{y:.2f} ms<extra>" + label + "</extra>"), 1, 2)
