""""Why it is lossless": the refused node of one step, drawn from its StepRecord's ``inspect``.

Left, the target's p and the draft's q over the candidate tokens; the drafted token is marked with
min(1, p/q), the chance it had to be kept. Right, the residual norm(max(0, p - q)) the correction
was drawn from. At temperature 0 there is no residual: greedy keeps a drafted token only if it is
the target's argmax, so the panel shows p with the argmax marked. Everything drawn is a number the
engine recorded; nothing is recomputed here.
"""
from __future__ import annotations

import html
from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.records.detail import RejectionRecord
from core.records.steps import StepRecord

from ..i18n import t
from ..palette import COLORS, visible
from .style import empty, finish

OTHER = "…"


@dataclass(frozen=True)
class Bars:
    """What the panel draws: one bar per candidate token, then one for every other token."""

    labels: list[str]
    target: list[float]
    draft: list[float] | None
    residual: list[float] | None
    drafted: list[int]  # bar indices of the refused drafted tokens, in the order the rule tried them
    accept_probs: list[float]  # min(1, p/q) of each, as recorded
    chosen: int  # bar index of the correction (sampled) or the argmax (greedy)
    temperature: float


def refused(record: StepRecord) -> RejectionRecord | None:
    return None if record.inspect is None else record.inspect.rejection


def bars(record: StepRecord) -> Bars | None:
    """The recorded laws of the step's refused node as bars, each summing to 1 with its "every
    other token" bar; None when the step refused nothing or was not inspected."""
    rejection = refused(record)
    if rejection is None:
        return None
    labels = [visible(text) for text in rejection.texts] + [OTHER]
    draft = None if rejection.draft_probs is None else [*rejection.draft_probs, rejection.draft_other]
    residual = None if rejection.residual_probs is None else [*rejection.residual_probs, rejection.residual_other]
    drafted = [rejection.tokens.index(record.nodes[c].token) for c in rejection.tried]
    return Bars(labels, [*rejection.target_probs, rejection.target_other], draft, residual, drafted,
                list(rejection.accept_probs), rejection.tokens.index(rejection.next_token), rejection.temperature)


def lossless_figure(record: StepRecord, lang: str) -> go.Figure:
    drawn = bars(record)
    if drawn is None:
        return empty(t("lossless.none", lang), height=200)
    greedy = drawn.temperature == 0
    fig = make_subplots(rows=1, cols=1 if greedy else 2, horizontal_spacing=0.1, subplot_titles=(
        (t("lossless.plot_pq", lang),) if greedy else (t("lossless.plot_pq", lang), t("lossless.plot_residual", lang))))
    x = list(range(len(drawn.labels)))
    fig.add_trace(go.Bar(x=x, y=drawn.target, name=t("lossless.p", lang), marker_color=COLORS["target"],
                         hovertemplate="%{customdata}: p = %{y:.4f}<extra></extra>", customdata=drawn.labels), 1, 1)
    if drawn.draft is not None:
        fig.add_trace(go.Bar(x=x, y=drawn.draft, name=t("lossless.q", lang), marker_color=COLORS["proposed"],
                             hovertemplate="%{customdata}: q = %{y:.4f}<extra></extra>", customdata=drawn.labels), 1, 1)
    if drawn.residual is not None:
        colors = [COLORS["correction"] if i == drawn.chosen else "#f3c48a" for i in x]
        fig.add_trace(go.Bar(x=x, y=drawn.residual, name=t("lossless.residual", lang), marker_color=colors,
                             hovertemplate="%{customdata}: %{y:.4f}<extra></extra>", customdata=drawn.labels), 1, 2)
    top = max(drawn.target + (drawn.draft or []))
    for i, (bar, accept) in enumerate(zip(drawn.drafted, drawn.accept_probs)):
        text = t("lossless.drafted_greedy", lang) if greedy else t("lossless.drafted", lang, a=accept)
        fig.add_annotation(x=bar, y=max(drawn.target[bar], (drawn.draft or drawn.target)[bar]), text=text,
                           showarrow=True, arrowhead=2, ay=-30 - 18 * i, font={"color": COLORS["rejected"], "size": 11},
                           xref="x", yref="y")
    chosen_label = t("lossless.argmax", lang) if greedy else t("lossless.drawn", lang)
    fig.add_annotation(x=drawn.chosen, y=(drawn.target if greedy else drawn.residual)[drawn.chosen], text=chosen_label,
                       showarrow=True, arrowhead=2, ay=-26, font={"color": COLORS["correction"], "size": 11},
                       xref="x" if greedy else "x2", yref="y" if greedy else "y2")
    ticks = {"tickmode": "array", "tickvals": x, "ticktext": [html.escape(label) for label in drawn.labels]}
    fig.update_xaxes(**ticks)
    fig.update_yaxes(range=[0, min(1.05, top * 1.35 + 0.02)], row=1, col=1)
    if not greedy:
        fig.update_yaxes(range=[0, 1.05], row=1, col=2)
    fig.update_layout(barmode="group")
    fig = finish(fig, t("lossless.title", lang, step=record.step + 1), 420, below=True)  # the legend clear of
    fig.update_layout(margin={"t": 70})  # the subplot titles
    return fig


def lossless_text(record: StepRecord, lang: str) -> str:
    """The sentence under the picture: the article's rule, with this step's numbers."""
    drawn, rejection = bars(record), refused(record)
    if drawn is None:
        return t("lossless.none", lang)
    drafted = html.escape(drawn.labels[drawn.drafted[0]])
    chosen = html.escape(drawn.labels[drawn.chosen])
    if drawn.temperature == 0:
        return t("lossless.say_greedy", lang, drafted=drafted, argmax=chosen, p=drawn.target[drawn.chosen])
    first = drawn.drafted[0]
    return t("lossless.say_sampled", lang, drafted=drafted, p=drawn.target[first], q=drawn.draft[first],
             a=drawn.accept_probs[0], chosen=chosen, r=drawn.residual[drawn.chosen],
             tried=len(rejection.tried))
