"""Figures for the classroom's illustration (hand-made, from the article's example)."""
from __future__ import annotations

import plotly.graph_objects as go

from ..i18n import t
from ..palette import COLORS
from .style import finish


def forwards_figure(sequence: list[str], lang: str) -> go.Figure:
    """The target alone: forward i reads the first i tokens of ``sequence`` and writes the next one."""
    fig = go.Figure()
    xs, ys, texts = [], [], []
    out_x, out_y, out_text = [], [], []
    for i in range(1, len(sequence)):
        xs += list(range(i))
        ys += [i] * i
        texts += sequence[:i]
        out_x.append(i)
        out_y.append(i)
        out_text.append(sequence[i])
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers+text", text=texts, name=t("lesson.input", lang),
                             textfont={"size": 16, "color": "#333333"}, hoverinfo="skip",
                             marker={"symbol": "square", "size": 40, "color": "#f3f3f3",
                                     "line": {"color": "#9a9a9a", "width": 1}}))
    fig.add_trace(go.Scatter(x=out_x, y=out_y, mode="markers+text", text=out_text, name=t("kind.target", lang),
                             textfont={"size": 16, "color": "white"}, hoverinfo="skip",
                             marker={"symbol": "square", "size": 40, "color": COLORS["target"]}))
    steps = len(sequence) - 1
    fig.update_yaxes(range=[steps + 0.6, 0.4], tickmode="array", tickvals=list(range(1, steps + 1)),
                     ticktext=[t("lesson.forward_n", lang, n=i) for i in range(1, steps + 1)], showgrid=False)
    fig.update_xaxes(visible=False, range=[-0.6, len(sequence) - 0.4])
    return finish(fig, t("lesson.alone_title", lang, n=steps), 330)


def forwards_bar(labels: list[str], forwards: list[int], lang: str, title: str) -> go.Figure:
    """Target forwards needed for the same tokens, side by side."""
    fig = go.Figure(go.Bar(x=labels, y=forwards, text=forwards, textposition="outside",
                           marker_color=[COLORS["target"], COLORS["accepted"]][: len(labels)]))
    fig.update_yaxes(title=t("lesson.forwards", lang), rangemode="tozero", dtick=1)
    return finish(fig, title, 300, legend=False)
