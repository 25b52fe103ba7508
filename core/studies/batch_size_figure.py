"""The batch-size study's figure, drawn once for the bench report (``bench.html``) and the app's
Batch size view: throughput of each drafter against batch size, where speculation stops paying
marked, beside the target's forward latency against the tokens in one forward.

It reads a bench result (``core.studies.batch_size``'s ``batch_sweep``, ``batch_crossover`` and
``forward_latency``) and knows no language: the words come in a :class:`SweepFigureText`
(English by default; the app passes its own).
"""
from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Callable

import plotly.graph_objects as go
from plotly.colors import qualitative, sequential
from plotly.subplots import make_subplots

from core.drafters import BASELINE
from core.studies.batch_size import VLLM

LABEL_LINE_PX = 16  # one "stops paying here" label's line: its 11 px text and a gap
KNEE = 1.5  # the knee: the fewest tokens whose forward costs this many one-token forwards


@dataclass(frozen=True)
class SweepFigureText:
    plot_throughput: str = "Throughput against batch size"
    plot_latency: str = "Target forward latency against tokens in the forward"
    axis_batch: str = "batch size"
    axis_tps: str = "tokens/s (all requests)"
    axis_tokens: str = "tokens in the forward (batch × new tokens per request)"
    axis_ms: str = "ms per forward"
    latency_series: str = "batch {batch}"
    stops_paying: str = "{drafter} stops paying here"
    peer_series: str = "vLLM-CPU {method}"
    knee: str = "knee: {tokens} tokens cost {factor:.1f}× one"


def sweep_figure(result: dict, text: SweepFigureText = SweepFigureText(),
                 color: Callable[[str], str] | None = None) -> go.Figure:
    """``result`` holds a non-empty ``batch_sweep``; each drafter in its own colour (``color`` of its
    spec -- the app passes its palette's; by default Tableau 10 in order), the latency curves shaded
    by batch size, the knee of the batch-1 curve marked."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=(text.plot_throughput, text.plot_latency))
    _throughput(fig, result, text, color)
    _latency(fig, result.get("forward_latency") or [], text)
    sizes = sorted({r["batch"] for r in result["batch_sweep"]})
    fig.update_xaxes(type="log", title=text.axis_batch, tickvals=sizes, row=1, col=1)
    fig.update_xaxes(type="log", title=text.axis_tokens, row=1, col=2)
    fig.update_yaxes(rangemode="tozero", title=text.axis_tps, row=1, col=1)
    fig.update_yaxes(type="log", title=text.axis_ms, row=1, col=2)
    return fig


def _throughput(fig: go.Figure, result: dict, text: SweepFigureText, color_of: Callable[[str], str] | None) -> None:
    """One line per drafter; vLLM's rows (``vllm:<method>``) dotted, in their method's colour."""
    rows = result["batch_sweep"]
    color = {}
    for name in dict.fromkeys(r["drafter"] for r in rows):
        method = name.removeprefix(VLLM)
        if method not in color:
            color[method] = color_of(method) if color_of else qualitative.T10[len(color) % len(qualitative.T10)]
        color[name] = color[method]
        label = text.peer_series.format(method=method) if name.startswith(VLLM) else name
        mine = sorted((r for r in rows if r["drafter"] == name), key=lambda r: r["batch"])
        fig.add_trace(go.Scatter(
            x=[r["batch"] for r in mine], y=[r["tokens_per_s"] for r in mine], name=label, mode="lines+markers",
            line={"color": color[name], "width": 3 if method == BASELINE else 2.5,
                  "dash": "dot" if name.startswith(VLLM) else "dash" if "auto" in name else "solid"},
            marker={"symbol": "diamond-open" if name.startswith(VLLM) else "circle"},
            hovertemplate="%{x}: %{y:.1f} tokens/s<extra>" + label + "</extra>"), 1, 1)
    top = max(r["tokens_per_s"] for r in rows)
    largest = max(r["batch"] for r in rows)
    marks = [(name, batch) for name, batch in (result.get("batch_crossover") or {}).items() if batch is not None]
    for line, (name, batch) in enumerate(marks):
        line_color = color.get(name, "#888888")
        fig.add_trace(go.Scatter(  # a vertical dotted line at the crossover
            x=[batch, batch], y=[0, top], mode="lines", showlegend=False, hoverinfo="skip",
            line={"color": line_color, "dash": "dot", "width": 1.5}), 1, 1)
        # its label on a line of its own, counted down from the plot's top in pixels: labels spaced in data
        # units pile up when a long legend (vLLM's series) squeezes the plot
        right = batch != largest  # into the plot, never cut
        fig.add_annotation(text=text.stops_paying.format(drafter=name), x=math.log10(batch), xref="x", y=1,
                           yref="y domain", xanchor="left" if right else "right", xshift=4 if right else -4,
                           yanchor="top", yshift=-LABEL_LINE_PX * line, showarrow=False,
                           font={"size": 11, "color": line_color})


def _latency(fig: go.Figure, grid: list[dict], text: SweepFigureText) -> None:
    sizes = sorted({r["batch"] for r in grid})
    shades = sequential.Blues[3:][:: max(1, 6 // max(1, len(sizes)))]
    for i, batch in enumerate(sizes):
        mine = sorted((r for r in grid if r["batch"] == batch), key=lambda r: r["tokens"])
        label = text.latency_series.format(batch=batch)
        fig.add_trace(go.Scatter(
            x=[r["tokens"] for r in mine], y=[r["latency_ms"] for r in mine], name=label, mode="lines+markers",
            line={"color": shades[min(i, len(shades) - 1)], "width": 1.5, "dash": "dot"},
            hovertemplate="%{x} tokens: %{y:.2f} ms<extra>" + label + "</extra>"), 1, 2)
    knee = find_knee(grid)
    if knee is not None:
        tokens, factor = knee
        low, high = min(r["latency_ms"] for r in grid), max(r["latency_ms"] for r in grid)
        fig.add_trace(go.Scatter(
            x=[tokens, tokens], y=[low, high], mode="lines+text", showlegend=False, hoverinfo="skip",
            text=["", text.knee.format(tokens=tokens, factor=factor)], textposition="top left",
            textfont={"size": 11, "color": "#c05621"}, line={"color": "#c05621", "dash": "dash", "width": 1.5}),
            1, 2)


def find_knee(grid: list[dict]) -> tuple[int, float] | None:
    """Where forwards stop being memory-bound: the fewest tokens whose forward costs ``KNEE`` times
    the one-token forward (the smallest batch's curve); (tokens, that factor) or None."""
    if not grid:
        return None
    smallest = min(r["batch"] for r in grid)
    curve = sorted((r for r in grid if r["batch"] == smallest), key=lambda r: r["tokens"])
    base = curve[0]["latency_ms"]
    for r in curve:
        if r["latency_ms"] >= KNEE * base:
            return r["tokens"], r["latency_ms"] / base
    return None
