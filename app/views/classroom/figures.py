"""Figures for the classroom's illustration (hand-made, from the article's example)."""
from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from ...figures.style import finish
from ...i18n import t
from ...palette import COLORS, KV_COLORS
from ...phone import narrow

PHONE_MIN_WIDTH = 320  # pixels: the forwards figure's five columns and legend fit a phone (app/phone.py)


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
    return narrow(finish(fig, t("lesson.alone_title", lang, n=steps), 330), PHONE_MIN_WIDTH)


def forwards_bar(labels: list[str], forwards: list[int], lang: str, title: str) -> go.Figure:
    """Target forwards needed for the same tokens, side by side."""
    fig = go.Figure(go.Bar(x=labels, y=forwards, text=forwards, textposition="outside", cliponaxis=False,
                           marker_color=[COLORS["target"], COLORS["accepted"]][: len(labels)]))
    # room above the tallest bar for its number (plotly's own range ends at the bar and cuts the label)
    fig.update_yaxes(title=t("lesson.forwards", lang), range=[0, max(forwards) * 1.25], dtick=1)
    return finish(fig, title, 300, legend=False)


@dataclass(frozen=True)
class Slot:
    """One cell of the serving illustration: a KV-cache slot (or a token still without one)."""

    text: str
    state: str  # a key of SLOT_STYLE


SLOT_STYLE = {  # state -> (fill, legend key)
    "live": (KV_COLORS["L"], "lesson.slot_live"),
    "proposed": (COLORS["proposed"], "lesson.slot_proposed"),
    "reserved": ("#ffffff", "lesson.slot_reserved"),
    "accepted": (KV_COLORS["W"], "lesson.slot_accepted"),
    "rejected": (KV_COLORS["F"], "lesson.slot_rejected"),
    "not_reached": (COLORS["not_reached"], "lesson.slot_not_reached"),
    "correction": (COLORS["correction"], "lesson.slot_correction"),
    "free": (KV_COLORS["."], "lesson.slot_free"),
}


def serving_stages(prefix: list[str], guess: list[str], accepted: int, correction: str,
                   free_after: int = 2) -> list[list[Slot]]:
    """The four moments of one speculative iteration in a serving engine, for one request: the
    draft's guesses (no slot yet), the slots the scheduler reserves for them, the verify's verdict
    on each slot, and the slots kept and given back afterwards."""
    width = len(prefix) + len(guess) + free_after
    committed = [Slot(text, "live") for text in prefix]

    def pad(row: list[Slot]) -> list[Slot]:
        return row + [Slot("", "free")] * (width - len(row))

    verdict = ["accepted"] * accepted + ["rejected"] + ["not_reached"] * (len(guess) - accepted - 1)
    kept = [Slot(text, "live") for text in guess[:accepted]]
    return [
        pad(committed + [Slot(text, "proposed") for text in guess]),
        pad(committed + [Slot(text, "reserved") for text in guess]),
        pad(committed + [Slot(text, state) for text, state in zip(guess, verdict)]),
        pad(committed + kept + [Slot(correction, "correction")]),
    ]


def serving_figure(stages: list[list[Slot]], lang: str) -> go.Figure:
    """``serving_stages`` drawn as rows of slots, top to bottom, one legend entry per kind of slot."""
    fig = go.Figure()
    for state, (fill, key) in SLOT_STYLE.items():
        cells = [(x, y, slot.text) for y, row in enumerate(stages) for x, slot in enumerate(row) if slot.state == state]
        if not cells:
            continue
        xs, ys, texts = zip(*cells)
        dashed = state in ("proposed", "reserved")
        fig.add_trace(go.Scatter(
            x=xs, y=ys, text=texts, mode="markers+text", name=t(key, lang), hoverinfo="skip",
            textfont={"size": 15, "color": "white" if state in ("accepted", "rejected", "correction") else "#222222"},
            marker={"symbol": "square-open" if state == "proposed" else "square", "size": 34, "color": fill,
                    "line": {"color": "#555555" if dashed else "white", "width": 2 if dashed else 1}}))
    rows = len(stages)
    fig.update_yaxes(range=[rows - 0.5, -0.5], tickmode="array", tickvals=list(range(rows)),
                     ticktext=[t(f"lesson.stage{i + 1}", lang) for i in range(rows)], showgrid=False)
    fig.update_xaxes(range=[-0.6, max(len(row) for row in stages) - 0.4], title=t("lesson.slot_axis", lang),
                     dtick=1, showgrid=False)
    return finish(fig, t("lesson.f4_title", lang), 380, below=True)
