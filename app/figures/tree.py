"""The draft tree of one step: every drafted node with its token, q and p, coloured by fate.

The root (the last committed token) sits on the left; depth grows to the right. The target's
own token of the step -- correction, bonus, or the plain next token -- is drawn as one more
node under the last accepted node, in its own colour. For EAGLE-2's dynamic tree the nodes its
expansion scored but pruned before the verify are drawn too, faded (when there are few enough).
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass

import plotly.graph_objects as go

from core.records.steps import ExpansionRecord, NodeRecord, StepRecord, TokenRecord

from ..i18n import t
from ..palette import COLORS, proposer_color, visible
from .style import finish

ROOT = -1
NEXT = -2  # the target's token of the step
PRUNED = 100_000  # key of pruned expansion candidate i: PRUNED + i
MAX_DRAWN_PRUNED = 72  # more would crowd the figure: then only the verified tree is drawn


@dataclass(frozen=True)
class _Box:
    """One drawn node: where it is, what it says, what it is."""

    key: int
    parent: int | None
    x: int
    token_text: str
    kind: str  # a COLORS key
    draft_prob: float = math.nan
    target_prob: float = math.nan
    proposer: str = ""
    score: float = math.nan  # EAGLE-2: cumulative log confidence of a pruned candidate


def _boxes(root: TokenRecord, nodes: list[NodeRecord], next_token: TokenRecord | None) -> list[_Box]:
    boxes = [_Box(ROOT, None, 0, root.text, "root")]
    boxes += [_Box(n.id, n.parent, n.depth, n.text, n.status, n.draft_prob, n.target_prob, n.proposer) for n in nodes]
    if next_token is not None:
        last_accepted = max((n for n in nodes if n.status == "accepted"), key=lambda n: n.depth, default=None)
        anchor, depth = (ROOT, 1) if last_accepted is None else (last_accepted.id, last_accepted.depth + 1)
        boxes.append(_Box(NEXT, anchor, depth, next_token.text, next_token.kind))
    return boxes


def _pruned_boxes(expansion: ExpansionRecord | None) -> list[_Box]:
    """The candidates EAGLE-2 scored and cut, hung under their (kept or cut) parents."""
    if not expansion:
        return []
    kept_as, parents = expansion.kept_as, expansion.parents
    cut = [i for i, node in enumerate(kept_as) if node < 0]
    if not cut or len(cut) > MAX_DRAWN_PRUNED:
        return []

    def key(i: int) -> int:
        return ROOT if i < 0 else (kept_as[i] if kept_as[i] >= 0 else PRUNED + i)

    return [_Box(PRUNED + i, key(parents[i]), expansion.depths[i], expansion.texts[i], "pruned",
                 draft_prob=expansion.probs[i], score=expansion.scores[i]) for i in cut]


def _rows(boxes: list[_Box]) -> dict[int, float]:
    """A tidy vertical position per node: leaves one row apart, parents centred on children."""
    children: dict[int, list[int]] = {}
    for box in boxes:
        if box.parent is not None:
            children.setdefault(box.parent, []).append(box.key)
    rows: dict[int, float] = {}
    next_leaf = 0

    def place(key: int) -> float:
        nonlocal next_leaf
        kids = children.get(key, [])
        if not kids:
            rows[key] = float(next_leaf)
            next_leaf += 1
        else:
            ys = [place(kid) for kid in kids]
            rows[key] = sum(ys) / len(ys)
        return rows[key]

    place(ROOT)
    return rows


def _short(text: str, limit: int = 5) -> str:
    """Box text: long tokens are cut (the tooltip has the whole token)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _hover(box: _Box, lang: str, show_probs: bool) -> str:
    lines = [f"<b>{html.escape(visible(box.token_text))}</b> · {t('kind.' + box.kind, lang)}"]
    if box.kind == "pruned":
        lines.append(f"{t('tree.depth', lang)} {box.x}")
        lines.append(f"q ({t('tree.q', lang)}) = {box.draft_prob:.3f}")
        lines.append(f"{t('tree.score', lang)} = {math.exp(box.score):.3g}")
    elif box.key >= 0:
        lines.append(f"{t('tree.depth', lang)} {box.x}")
        if show_probs:
            lines.append(f"q ({t('tree.q', lang)}) = {box.draft_prob:.3f}")
            lines.append(f"p ({t('tree.p', lang)}) = {box.target_prob:.3f}")
        if box.proposer:
            lines.append(f"{t('tree.proposer', lang)}: {html.escape(box.proposer)}")
    return "<br>".join(lines)


def proposer_family(proposer: str) -> str:
    """``eagle3-d2`` -> ``eagle3``, ``ngram+eagle3`` stays: the proposer without its position."""
    return "+".join(part.split("-")[0] for part in proposer.split("+"))


def _proposer_outlines(boxes: list[_Box], rows: dict[int, float], small: bool, lang: str) -> list[go.Scatter]:
    """When a tree mixes proposers (hybrid), an outline per proposer around its nodes."""
    families: dict[str, list[_Box]] = {}
    for box in boxes:
        if 0 <= box.key < PRUNED and box.proposer:
            families.setdefault(proposer_family(box.proposer), []).append(box)
    if len(families) < 2:
        return []
    return [go.Scatter(
        x=[b.x for b in group], y=[rows[b.key] for b in group], mode="markers", hoverinfo="skip",
        name=t("tree.proposer", lang) + f": {family}",
        marker={"symbol": "square-open", "size": 52 if small else 34,
                "color": proposer_color(family), "line": {"width": 3}},
    ) for family, group in families.items()]


def _edges(boxes: list[_Box], rows: dict[int, float], accepted_path: set[int]) -> list[go.Scatter]:
    plain_x, plain_y, path_x, path_y = [], [], [], []
    by_key = {b.key: b for b in boxes}
    for box in boxes:
        if box.parent is None:
            continue
        parent = by_key[box.parent]
        on_path = box.key in accepted_path or box.key == NEXT
        xs, ys = (path_x, path_y) if on_path else (plain_x, plain_y)
        xs += [parent.x, box.x, None]
        ys += [rows[parent.key], rows[box.key], None]
    style = {"mode": "lines", "hoverinfo": "skip", "showlegend": False}
    return [
        go.Scatter(x=plain_x, y=plain_y, line={"color": "#c9c9c9", "width": 1.5}, **style),
        go.Scatter(x=path_x, y=path_y, line={"color": COLORS["accepted"], "width": 3.5}, **style),
    ]


@dataclass(frozen=True)
class TreeDrawing:
    """What a tree figure shows: the drafted ``nodes`` under ``root``, the target's ``next_token``
    (None: not verified yet) and EAGLE-2's scored tree (StepRecord.expansion), whose pruned nodes
    are drawn faded."""

    root: TokenRecord
    nodes: list[NodeRecord]
    next_token: TokenRecord | None = None
    expansion: ExpansionRecord | None = None


def tree_figure(record: StepRecord, lang: str) -> go.Figure:
    """The draft tree of one step of a run."""
    drawing = TreeDrawing(record.root, record.nodes, record.next, record.expansion)
    return draw_tree(drawing, lang, t("tree.title", lang, step=record.step + 1))


def draw_tree(drawing: TreeDrawing, lang: str, title: str, *, show_probs: bool = True) -> go.Figure:
    """A draft tree; ``show_probs=False`` hides q and p, for the hand-made illustration of the classroom."""
    boxes = _boxes(drawing.root, drawing.nodes, drawing.next_token) + _pruned_boxes(drawing.expansion)
    rows = _rows(boxes)
    accepted_path = {b.key for b in boxes if b.kind == "accepted"}
    fig = go.Figure(_edges(boxes, rows, accepted_path))
    small = len(boxes) <= 24
    for kind in ("root", "proposed", "accepted", "rejected", "not_reached", "correction", "bonus", "target",
                 "pruned"):
        group = [b for b in boxes if b.kind == kind]
        if not group:
            continue
        fig.add_trace(go.Scatter(
            x=[b.x for b in group],
            y=[rows[b.key] for b in group],
            mode="markers+text",
            name=t("kind." + kind, lang),
            text=[html.escape(_short(visible(b.token_text))) for b in group],
            textfont={"color": "#555555" if kind == "pruned" else "white", "size": 14 if small else 10},
            marker={"symbol": "square", "size": 44 if small else 28, "color": COLORS[kind],
                    "line": {"color": "white", "width": 1}},
            hovertext=[_hover(b, lang, show_probs) for b in group],
            hoverinfo="text",
        ))
    for trace in _proposer_outlines(boxes, rows, small, lang):
        fig.add_trace(trace)
    if show_probs and small:
        for box in boxes:
            if 0 <= box.key < PRUNED:
                fig.add_annotation(x=box.x, y=rows[box.key], yshift=-27, showarrow=False,
                                   text=f"q {box.draft_prob:.2f} · p {box.target_prob:.2f}",
                                   font={"size": 10, "color": "#555555"})
    leaves = max(rows.values()) + 1
    depth = max(b.x for b in boxes)
    fig.update_xaxes(range=[-0.6, depth + 0.6], tickmode="array", tickvals=list(range(depth + 1)),
                     ticktext=[t("tree.root", lang)] + [str(d) for d in range(1, depth + 1)],
                     title=t("tree.depth", lang), showgrid=False)
    fig.update_yaxes(visible=False, range=[leaves - 0.4, -0.6])
    height = int(min(900, 150 + 62 * leaves)) if small else int(min(1400, 150 + 32 * leaves))
    return finish(fig, title, height)
