"""The draft tree of one step: every drafted node with its token, q and p, coloured by fate.

The root (the last committed token) sits on the left; depth grows to the right. The target's
own token of the step -- correction, bonus, or the plain next token -- is drawn as one more
node under the last accepted node, in its own colour. For EAGLE-2's dynamic tree the nodes its
expansion scored but pruned before the verify are drawn too, faded (when there are few enough).

Two numbers are drawn, not only written: a box's opacity is min(1, p/q) of its drafted token, and,
for an inspected step, its size grows with the target's entropy at its position (a box never grows
past the size the label layout reserves, so the labels stay where they are). Notes under the plot
say so, with the range of each.
"""
from __future__ import annotations

import html
import math
import unicodedata
from dataclasses import dataclass

import plotly.graph_objects as go

from core.records.detail import PositionRecord
from core.records.steps import ExpansionRecord, NodeRecord, StepRecord, TokenRecord

from ..i18n import t
from ..palette import COLORS, kind_key, proposer_color, resampled, visible
from .style import finish

ROOT = -1
NEXT = -2  # the target's token of the step
PRUNED = 100_000  # key of pruned expansion candidate i: PRUNED + i
FOLDED = 200_000  # key of the "+N" box under node k: FOLDED + k (FOLDED - 1 under the root)
MAX_DRAWN_PRUNED = 72  # more would crowd the figure: then only the verified tree is drawn
COLLAPSE_OVER = 40  # boxes: a larger tree folds its unreached branches (unless asked to expand them)
SMALL = 24  # boxes: up to this many, big boxes with q and p written under them
HIDDEN_KINDS = ("not_reached", "pruned")
SMALLEST = 0.55  # a box where the target is certain (entropy 0), as a share of its full size
ENTROPY_SCALE = 2.0  # nats: at this entropy a box has grown 63 % of the way from SMALLEST to full
FAINT = 0.5  # a box fainter than this gets dark text (white would vanish into the background)


@dataclass(frozen=True)
class Look:
    """Sizes in pixels: the box, its text, and the row each leaf gets (box, q·p line, a gap)."""

    marker: int
    font: int
    row: int
    chars: int  # token text longer than this is cut (the tooltip has it whole)

    @classmethod
    def of(cls, boxes: int, probs_below: bool) -> "Look":
        if boxes <= SMALL:
            return cls(44, 14, 44 + (20 if probs_below else 8), 5)
        return cls(28, 10, 28 + 6, 4)


MARGIN_TOP, MARGIN_BOTTOM = 60, 60  # title, depth axis


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


def _fold(boxes: list[_Box]) -> list[_Box]:
    """The boxes with every unreached branch (a not-reached or pruned node and all under it) folded
    into one "+N" box under its drawn parent."""
    hidden: set[int] = set()
    for box in boxes:  # parents come before children
        if box.kind in HIDDEN_KINDS or box.parent in hidden:
            hidden.add(box.key)
    counts: dict[int, int] = {}
    first: dict[int, _Box] = {}
    for box in boxes:
        if box.key in hidden and box.parent not in hidden:
            counts[box.parent] = counts.get(box.parent, 0)
            first.setdefault(box.parent, box)
    for box in boxes:
        if box.key in hidden:
            anchor = box
            while anchor.parent in hidden:
                anchor = next(b for b in boxes if b.key == anchor.parent)
            counts[anchor.parent] += 1
    kept = [b for b in boxes if b.key not in hidden]
    for parent, n in counts.items():
        x = first[parent].x
        kept.append(_Box(FOLDED + (parent if parent >= 0 else -1), parent, x, f"+{n}", "folded"))
    return kept


def text_width(text: str, font: int) -> float:
    """Pixels a label takes, roughly: a wide (CJK) character one em, any other 0.62 em."""
    return sum(font if unicodedata.east_asian_width(ch) in "WF" else 0.62 * font for ch in text)


@dataclass(frozen=True)
class TreeLayout:
    """Where each drawn box is: column (depth) and row, and the pixel sizes the figure uses."""

    keys: list[int]
    columns: list[int]
    rows: list[float]
    labels: list[str]
    look: Look
    depth: int  # columns 0..depth
    leaves: int
    probs_below: bool  # "q 0.12 · p 0.34" written under each drafted node

    @property
    def height(self) -> int:
        return MARGIN_TOP + MARGIN_BOTTOM + self.leaves * self.look.row

    def label_boxes(self, plot_width: float) -> list[tuple[float, float, float, float]]:
        """Each label's box ``(left, top, right, bottom)`` in pixels of the plot area, for a plot
        area ``plot_width`` wide: the marker or its text, whichever is larger."""
        column = plot_width / (self.depth + 1.2)  # the x range is [-0.6, depth + 0.6]
        out = []
        for key, col, row, label in zip(self.keys, self.columns, self.rows, self.labels):
            x, y = (col + 0.6) * column, (row + 0.5) * self.look.row
            half_w = max(self.look.marker, text_width(label, self.look.font)) / 2
            half_h = max(self.look.marker, self.look.font * 1.3) / 2
            bottom = y + half_h
            if self.probs_below and 0 <= key < PRUNED:  # the q · p line under the box (10 px text)
                half_w = max(half_w, text_width(PROBS_SAMPLE, 10) / 2)
                bottom = y + 27 + 7
            out.append((x - half_w, y - half_h, x + half_w, bottom))
        return out


PROBS_SAMPLE = "q 0.00 · p 0.00"


def layout_tree(boxes: list[_Box], show_probs: bool = True) -> TreeLayout:
    """Rows and sizes for ``boxes``; q and p are written under the boxes of a small, shallow tree."""
    rows = _rows(boxes)
    depth = max(b.x for b in boxes)
    probs_below = show_probs and len(boxes) <= SMALL and depth <= 6
    look = Look.of(len(boxes), probs_below)
    labels = [_short(visible(b.token_text), look.chars) for b in boxes]
    return TreeLayout([b.key for b in boxes], [b.x for b in boxes], [rows[b.key] for b in boxes], labels, look,
                      depth, int(max(rows.values())) + 1, probs_below)


def _log(value: float) -> str:
    return f"{math.log(value):.2f}" if value > 0 else "−∞"


def _alternatives(position: PositionRecord, lang: str) -> list[str]:
    """The target's top tokens at a position and the entropy of its law there."""
    lines = [t("tree.top5", lang, h=position.entropy)]
    lines += [f"&nbsp;&nbsp;{html.escape(visible(text))} · {prob:.3f}"
              for text, prob in zip(position.texts, position.probs)]
    return lines


def _hover(box: _Box, lang: str, show_probs: bool, positions: dict[int, PositionRecord] | None = None,
           resample: bool = False) -> str:
    if box.kind == "folded":
        return t("tree.folded", lang, n=box.token_text.removeprefix("+"))
    lines = [f"<b>{html.escape(visible(box.token_text))}</b> · {t(kind_key(box.kind, resample), lang)}"]
    if box.kind == "pruned":
        lines.append(f"{t('tree.depth', lang)} {box.x}")
        lines.append(f"q ({t('tree.q', lang)}) = {box.draft_prob:.3f}")
        lines.append(f"{t('tree.score', lang)} = {math.exp(box.score):.3g}")
    elif box.key >= 0:
        lines.append(f"{t('tree.depth', lang)} {box.x}")
        if show_probs:
            lines.append(f"q ({t('tree.q', lang)}) = {box.draft_prob:.3f} · log q = {_log(box.draft_prob)}")
            lines.append(f"p ({t('tree.p', lang)}) = {box.target_prob:.3f} · log p = {_log(box.target_prob)}")
        if box.proposer:
            lines.append(f"{t('tree.proposer', lang)}: {html.escape(box.proposer)}")
    if positions and box.key >= 0 or positions and box.key == NEXT:
        position = positions.get(box.parent)
        if position is not None and box.key < PRUNED:
            lines += _alternatives(position, lang)
    return "<br>".join(lines)


def entropy_size(full: float, entropy: float) -> float:
    """A box's size in pixels for the target's ``entropy`` (nats) at its position: ``SMALLEST`` of
    ``full`` at 0 nats, growing with the entropy towards ``full``, never past it."""
    return full * (SMALLEST + (1 - SMALLEST) * -math.expm1(-max(0.0, entropy) / ENTROPY_SCALE))


def position_entropy(box: _Box, positions: dict[int, PositionRecord] | None) -> float | None:
    """The entropy of the target's law at a drafted node's (or the target token's) position -- the
    law after its parent; None where the step was not inspected."""
    if not positions or not (0 <= box.key < PRUNED or box.key == NEXT):
        return None
    position = positions.get(box.parent)
    return None if position is None else position.entropy


def acceptance_probability(box: _Box) -> float | None:
    """min(1, p/q) of a drafted node, the chance the sampling rule keeps it (at temperature 0 the
    greedy rule keeps the target's argmax instead); None where p or q is unknown."""
    q, p = box.draft_prob, box.target_prob
    if not (0 <= box.key < PRUNED) or not (math.isfinite(q) and math.isfinite(p)) or q <= 0:
        return None
    return min(1.0, p / q)


def _encoding_notes(boxes: list[_Box], positions: dict[int, PositionRecord] | None, show_probs: bool,
                    lang: str) -> list[tuple[str, float]]:
    """What the boxes' size and opacity stand for, with the range each spans in this figure, and
    where each note sits under the plot (paper x: size on the left, opacity on the right, clear of
    the depth axis's title in the middle)."""
    notes = []
    entropies = [h for h in (position_entropy(b, positions) for b in boxes) if h is not None]
    if entropies:
        notes.append((t("tree.size_note", lang, lo=min(entropies), hi=max(entropies)), 0.0))
    chances = [a for a in (acceptance_probability(b) for b in boxes) if a is not None] if show_probs else []
    if chances:
        notes.append((t("tree.opacity_note", lang, lo=min(chances), hi=max(chances)), 1.0))
    return notes


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
    (None: not verified yet), EAGLE-2's scored tree (StepRecord.expansion), whose pruned nodes
    are drawn faded, and the target's top alternatives after each node (StepRecord.inspect, by
    parent id), for the tooltips."""

    root: TokenRecord
    nodes: list[NodeRecord]
    next_token: TokenRecord | None = None
    expansion: ExpansionRecord | None = None
    positions: dict[int, PositionRecord] | None = None
    resampled: bool = False  # the target's token after the refusal was sampled from the residual


def tree_figure(record: StepRecord, lang: str, collapse: bool | None = None) -> go.Figure:
    """The draft tree of one step of a run; ``collapse``: fold unreached branches (None: when large)."""
    positions = {p.parent: p for p in record.inspect.positions} if record.inspect is not None else None
    drawing = TreeDrawing(record.root, record.nodes, record.next, record.expansion, positions, resampled(record))
    return draw_tree(drawing, lang, t("tree.title", lang, step=record.step + 1), collapse=collapse)


def tree_boxes(drawing: TreeDrawing, collapse: bool | None = None) -> list[_Box]:
    """The boxes drawn: every node, the target's token, EAGLE-2's pruned candidates, and -- folding
    (``collapse``; None: when there are more than ``COLLAPSE_OVER``) -- unreached branches as "+N"."""
    boxes = _boxes(drawing.root, drawing.nodes, drawing.next_token) + _pruned_boxes(drawing.expansion)
    if collapse or (collapse is None and len(boxes) > COLLAPSE_OVER):
        boxes = _fold(boxes)
    return boxes


def draw_tree(drawing: TreeDrawing, lang: str, title: str, *, show_probs: bool = True,
              collapse: bool | None = None) -> go.Figure:
    """A draft tree; ``show_probs=False`` hides q and p, for the hand-made illustration of the classroom."""
    boxes = tree_boxes(drawing, collapse)
    positions = drawing.positions
    layout = layout_tree(boxes, show_probs)
    depth, probs_below = layout.depth, layout.probs_below
    rows = dict(zip(layout.keys, layout.rows))
    label = dict(zip(layout.keys, layout.labels))
    look = layout.look
    accepted_path = {b.key for b in boxes if b.kind == "accepted"}
    fig = go.Figure(_edges(boxes, rows, accepted_path))
    small = len(boxes) <= SMALL
    for kind in ("root", "proposed", "accepted", "rejected", "not_reached", "correction", "bonus", "target",
                 "pruned", "folded"):
        group = [b for b in boxes if b.kind == kind]
        if not group:
            continue
        sizes = [look.marker if h is None else entropy_size(look.marker, h)
                 for h in (position_entropy(b, positions) for b in group)]
        opacities = [1.0 if a is None or not show_probs else a for a in map(acceptance_probability, group)]
        text_color = "#555555" if kind in ("pruned", "folded") else "white"
        fig.add_trace(go.Scatter(
            x=[b.x for b in group],
            y=[rows[b.key] for b in group],
            mode="markers+text",
            name=t(kind_key(kind, drawing.resampled), lang),
            text=[html.escape(label[b.key]) for b in group],
            textfont={"color": [text_color if o >= FAINT else "#2a2a2a" for o in opacities], "size": look.font},
            marker={"symbol": "square", "size": sizes, "opacity": opacities, "color": COLORS[kind],
                    "line": {"color": "white", "width": 1}},
            hovertext=[_hover(b, lang, show_probs, positions, drawing.resampled) for b in group],
            hoverinfo="text",
        ))
    for trace in _proposer_outlines(boxes, rows, small, lang):
        fig.add_trace(trace)
    if probs_below:
        for box in boxes:
            if 0 <= box.key < PRUNED:
                fig.add_annotation(x=box.x, y=rows[box.key], yshift=-27, showarrow=False,
                                   text=f"q {box.draft_prob:.2f} · p {box.target_prob:.2f}",
                                   font={"size": 10, "color": "#555555"})
    for note, side in _encoding_notes(boxes, positions, show_probs, lang):  # on the row of the axis title
        fig.add_annotation(text=note, xref="paper", yref="paper", x=side, y=0.0, yanchor="top", yshift=-34,
                           xanchor="left" if side == 0.0 else "right", showarrow=False,
                           font={"size": 10, "color": "#555555"})
    leaves = layout.leaves
    fig.update_xaxes(range=[-0.6, depth + 0.6], tickmode="array", tickvals=list(range(depth + 1)),
                     ticktext=[t("tree.root", lang)] + [str(d) for d in range(1, depth + 1)],
                     title=t("tree.depth", lang), showgrid=False)
    fig.update_yaxes(visible=False, range=[leaves - 0.5, -0.5])
    fig = finish(fig, title, layout.height)
    fig.update_layout(margin={"t": MARGIN_TOP, "b": MARGIN_BOTTOM}, dragmode="zoom")
    return fig
