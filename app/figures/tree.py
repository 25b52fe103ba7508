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
    """Sizes in pixels: the box, its text and how many lines of q · p go under it (0: left to the
    tooltip)."""

    marker: int
    font: int
    chars: int  # token text longer than this is cut (the tooltip has it whole)
    probs_lines: int = 0  # "q 0.12 · p 0.34" on one line, "q 0.12" over "p 0.34" on two, or none

    @property
    def above(self) -> float:
        """Pixels a node takes above its centre."""
        return max(self.marker, self.font * LINE) / 2

    @property
    def below(self) -> float:
        """Pixels a node takes below its centre, its q · p lines included."""
        return self.above + (PROBS_GAP + self.probs_lines * PROBS_LINE if self.probs_lines else 0)

    @property
    def row(self) -> float:
        """Pixels between two leaves: one node, its q · p lines, a gap."""
        return self.above + self.below + ROW_GAP

    @property
    def probs_shift(self) -> float:
        """How far below its node's centre the q · p text's centre sits."""
        return self.above + PROBS_GAP + self.probs_lines * PROBS_LINE / 2


# Every label is laid out for a plot area at least MIN_PLOT_WIDTH wide (a phone keeps plots 660 px
# wide, app/page.css): a node's column must hold its box, its text and its q · p lines side by side
# with the next column's, else a smaller look is taken, q and p go on two lines, then to the tooltip.
MIN_PLOT_WIDTH = 560
LOOKS = ((44, 14, 5), (28, 10, 4), (20, 9, 2))  # (marker, font, chars), largest first; the first only up to SMALL boxes
LINE = 1.3  # a text line's height, in ems
PROBS_FONT, PROBS_LINE, PROBS_GAP = 10, 13, 3  # the q · p text: size, line height, gap under its box
ROW_GAP, COLUMN_GAP = 6, 6  # pixels kept free between two rows, two columns
PROBS_SAMPLE, PROBS_LINES = "q 0.00 · p 0.00", ("q 0.00", "p 0.00")
TICK_FONT, TICK_GAP, TICK_SAMPLE = 12, 4, "root"  # the depth axis's numbers, under the plot area
PAD = 4  # pixels kept free between the plot area's edge and the outermost labels


def probs_text(draft_prob: float, target_prob: float, lines: int) -> str:
    """The q · p label of a node, on ``lines`` lines."""
    q, p = f"q {draft_prob:.2f}", f"p {target_prob:.2f}"
    return f"{q} · {p}" if lines == 1 else f"{q}<br>{p}"


def pick_look(boxes: int, depth: int, texts: list[str], show_probs: bool) -> Look:
    """The largest look whose columns hold every label at MIN_PLOT_WIDTH, with as many q · p lines
    as fit (a small tree only)."""
    column = MIN_PLOT_WIDTH / (depth + 1.2)  # the x range is [-0.6, depth + 0.6]
    looks = LOOKS if boxes <= SMALL else LOOKS[1:]
    for marker, font, chars in looks:
        widest = max(max(text_width(_short(text, chars), font) for text in texts), marker)
        if widest + COLUMN_GAP <= column or (marker, font, chars) == looks[-1]:
            lines = 0
            if show_probs and boxes <= SMALL:
                one, two = text_width(PROBS_SAMPLE, PROBS_FONT), max(text_width(x, PROBS_FONT) for x in PROBS_LINES)
                lines = 1 if one + COLUMN_GAP <= column else 2 if two + COLUMN_GAP <= column else 0
            return Look(marker, font, chars, lines)
    raise AssertionError("unreachable: the last look is always taken")


MARGIN_TOP = 100  # title and legend (Gradio gives a titled plot with a label at least 100)
MARGIN_BOTTOM, MARGIN_NOTES = 60, 36  # the depth axis; the lines of notes under it


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

    @property
    def probs_below(self) -> bool:
        """q and p are written under each drafted node."""
        return self.look.probs_lines > 0

    @property
    def plot_height(self) -> float:
        """The plot area: the first leaf's top, one row per leaf, the last leaf's q · p lines."""
        return PAD + self.look.above + (self.leaves - 1) * self.look.row + self.look.below + PAD

    @property
    def y_range(self) -> list[float]:
        """The y axis's range (reversed: row 0 at the top), in rows, matching ``plot_height``."""
        top = (PAD + self.look.above) / self.look.row
        return [self.plot_height / self.look.row - top, -top]

    def height(self, notes: int = 0) -> int:
        """The figure's height with ``notes`` lines of notes under the depth axis."""
        return math.ceil(MARGIN_TOP + self.plot_height + MARGIN_BOTTOM + (MARGIN_NOTES if notes else 0))

    def label_boxes(self, plot_width: float) -> list[tuple[float, float, float, float]]:
        """Each label's box ``(left, top, right, bottom)`` in pixels of the plot area, for a plot
        area ``plot_width`` wide: every node (its box or its text, whichever is larger, and its
        q · p lines), then the depth axis's numbers under the plot area."""
        column = plot_width / (self.depth + 1.2)  # the x range is [-0.6, depth + 0.6]
        look, out = self.look, []
        top = PAD + look.above
        for key, col, row, label in zip(self.keys, self.columns, self.rows, self.labels):
            x, y = (col + 0.6) * column, top + row * look.row
            half_w = max(look.marker, text_width(label, look.font)) / 2
            below = look.above
            if self.probs_below and 0 <= key < PRUNED:
                sample = PROBS_SAMPLE if look.probs_lines == 1 else PROBS_LINES[0]
                half_w, below = max(half_w, text_width(sample, PROBS_FONT) / 2), look.below
            out.append((x - half_w, y - look.above, x + half_w, y + below))
        for col in range(self.depth + 1):
            x, half_w = (col + 0.6) * column, text_width(TICK_SAMPLE, TICK_FONT) / 2
            out.append((x - half_w, self.plot_height + TICK_GAP, x + half_w, self.plot_height + TICK_GAP + TICK_FONT * LINE))
        return out


def layout_tree(boxes: list[_Box], show_probs: bool = True) -> TreeLayout:
    """Rows and sizes for ``boxes``; q and p are written under the boxes of a small tree, where
    its columns have room for them (``pick_look``)."""
    rows = _rows(boxes)
    depth = max(b.x for b in boxes)
    texts = [visible(b.token_text) for b in boxes]
    look = pick_look(len(boxes), depth, texts, show_probs)
    labels = [_short(text, look.chars) for text in texts]
    return TreeLayout([b.key for b in boxes], [b.x for b in boxes], [rows[b.key] for b in boxes], labels, look,
                      depth, int(max(rows.values())) + 1)


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
                    lang: str) -> list[str]:
    """What the boxes' size and opacity stand for, with the range each spans in this figure (a line
    each under the depth axis's title, so neither runs into it or the other at any width)."""
    notes = []
    entropies = [h for h in (position_entropy(b, positions) for b in boxes) if h is not None]
    if entropies:
        notes.append(t("tree.size_note", lang, lo=min(entropies), hi=max(entropies)))
    chances = [a for a in (acceptance_probability(b) for b in boxes) if a is not None] if show_probs else []
    if chances:
        notes.append(t("tree.opacity_note", lang, lo=min(chances), hi=max(chances)))
    return notes


def proposer_family(proposer: str) -> str:
    """``eagle3-d2`` -> ``eagle3``, ``ngram+eagle3`` stays: the proposer without its position."""
    return "+".join(part.split("-")[0] for part in proposer.split("+"))


def _proposer_outlines(boxes: list[_Box], rows: dict[int, float], size: float, lang: str) -> list[go.Scatter]:
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
        marker={"symbol": "square-open", "size": size,
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
    depth = layout.depth
    rows = dict(zip(layout.keys, layout.rows))
    label = dict(zip(layout.keys, layout.labels))
    look = layout.look
    accepted_path = {b.key for b in boxes if b.kind == "accepted"}
    fig = go.Figure(_edges(boxes, rows, accepted_path))
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
    for trace in _proposer_outlines(boxes, rows, look.marker + 8, lang):
        fig.add_trace(trace)
    if layout.probs_below:
        for box in boxes:
            if 0 <= box.key < PRUNED:
                fig.add_annotation(x=box.x, y=rows[box.key], yshift=-look.probs_shift, showarrow=False,
                                   text=probs_text(box.draft_prob, box.target_prob, look.probs_lines),
                                   font={"size": PROBS_FONT, "color": "#555555"})
    notes = _encoding_notes(boxes, positions, show_probs, lang)
    for i, note in enumerate(notes):  # under the depth axis's title, a line each
        fig.add_annotation(text=note, xref="paper", yref="paper", x=0.0, y=0.0, yanchor="top", xanchor="left",
                           yshift=-MARGIN_BOTTOM + 6 - i * 16, showarrow=False, font={"size": 10, "color": "#555555"})
    fig.update_xaxes(range=[-0.6, depth + 0.6], tickmode="array", tickvals=list(range(depth + 1)),
                     ticktext=[t("tree.root", lang)] + [str(d) for d in range(1, depth + 1)],
                     title=t("tree.depth", lang), showgrid=False)
    fig.update_yaxes(visible=False, range=layout.y_range)
    fig = finish(fig, title, layout.height(len(notes)))
    fig.update_layout(margin={"t": MARGIN_TOP, "b": MARGIN_BOTTOM + (MARGIN_NOTES if notes else 0)}, dragmode="zoom")
    return fig
