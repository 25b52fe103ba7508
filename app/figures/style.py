"""Shared look of every figure: a light, compact layout that renders Chinese and English."""
from __future__ import annotations

import plotly.graph_objects as go

FONT = "Noto Sans CJK SC, Noto Sans SC, Microsoft YaHei, PingFang SC, sans-serif"


LEGEND_TOP = {"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "right", "x": 1.0}
LEGEND_BELOW = {"orientation": "h", "yanchor": "top", "y": -0.42, "xanchor": "left", "x": 0.0}
NICE_DTICKS = [m * 10**e for e in range(7) for m in (1, 2, 5)]  # 1, 2, 5, 10, 20, 50, ...


def finish(fig: go.Figure, title: str, height: int, *, legend: bool = True, below: bool = False) -> go.Figure:
    """Apply the common layout: title, height, margins, fonts, a light grid; ``below`` puts the
    legend under the plot (for figures with several panels, whose titles sit on top). The margins
    are the least: every axis widens its own to fit its tick labels and title (automargin), else a
    long label such as "block 1 (returned this step)" is cut at the figure's edge."""
    fig.update_layout(
        template="none",
        title={"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 15}},
        height=height,
        margin={"l": 50, "r": 20, "t": 50, "b": 120 if below and legend else 40},
        font={"family": FONT, "size": 12, "color": "#2a2a2a"},
        paper_bgcolor="white",
        plot_bgcolor="white",
        showlegend=legend,
        legend=LEGEND_BELOW if below else LEGEND_TOP,
        hoverlabel={"font": {"family": FONT}},
    )
    fig.update_xaxes(gridcolor="#eeeeee", zeroline=False, automargin=True)
    fig.update_yaxes(gridcolor="#eeeeee", zeroline=False, automargin=True)
    return fig


def whole_ticks(largest: float) -> dict:
    """Axis settings for whole numbers (step numbers, request counts) up to ``largest``: ticks on
    whole numbers only, about ten at most (left to itself, plotly marks step 1.5 of a two-step run)."""
    return {"tickformat": "d", "dtick": next((d for d in NICE_DTICKS if largest <= 10 * d), None)}


def empty(message: str, height: int = 260) -> go.Figure:
    """A blank figure that says why it is blank (e.g. "press Step")."""
    fig = go.Figure()
    fig.add_annotation(text=message, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
                       font={"size": 14, "color": "#888888"})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return finish(fig, "", height, legend=False)
