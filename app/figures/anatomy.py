"""The drafter's anatomy at one step, drawn from what the engine recorded (``StepRecord.anatomy``, its
``expansion`` and ``nodes``): Medusa's heads and the tree cut from their top tokens, EAGLE-2's scored
candidates by depth, and which branch of a hybrid tree each proposer drafted. EAGLE-3's fused layers and
its training-time test are in ``anatomy_eagle3``. Every figure stacks its parts and keeps its legend
below, so it reads on a 390 px phone."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import plotly.graph_objects as go

from core.records.steps import StepRecord

from ..i18n import t
from ..palette import COLORS, proposer_color
from ..phone import narrow
from .anatomy_eagle3 import fusion_caption, fusion_figure, token_label, ttt_caption, ttt_figure
from .style import empty, finish
from .tree import proposer_family

STATUS_ORDER = ("accepted", "rejected", "not_reached")  # a cell several nodes share shows the best of them
OUTSIDE = "outside"  # a head's cell that became no node
PHONE_MIN_WIDTH = 290  # pixels: every scene's labels and legend still fit (app/phone.py)


@dataclass(frozen=True)
class Scene:
    """One anatomy picture and the sentence that reads it."""

    name: str  # "medusa" | "expansion" | "fusion" | "ttt" | "hybrid"
    figure: go.Figure
    caption: str


def drafter_kind(record: StepRecord) -> str:
    """Which drafter drafted the step: the anatomy's name, else the proposer of its nodes ("" when none)."""
    if record.anatomy is not None:
        return record.anatomy.drafter
    return proposer_family(record.nodes[0].proposer) if record.nodes else ""


def anatomy_scenes(record: StepRecord, lang: str, preset: str | None = None) -> tuple[str, list[Scene]]:
    """The step's anatomy: a sentence on the drafter and its pictures (none for the drafters without
    learned parts), each drawn as narrow as a phone's screen. ``preset``: the run's, for the training-time
    test's measurement."""
    sentence, scenes = _scenes(record, lang, preset)
    return sentence, [replace(s, figure=narrow(s.figure, PHONE_MIN_WIDTH)) for s in scenes]


def _scenes(record: StepRecord, lang: str, preset: str | None) -> tuple[str, list[Scene]]:
    kind, anatomy = drafter_kind(record), record.anatomy
    if anatomy is None:
        key = {"draft": "anat.draft", "ngram": "anat.ngram"}.get(kind, "anat.nothing")
        return t(key, lang), []
    if kind == "medusa":
        return t("anat.medusa", lang, heads=len(anatomy.heads)), [Scene("medusa", medusa_figure(record, lang),
                                                                       medusa_caption(record, lang))]
    if kind == "hybrid":
        return t("anat.hybrid", lang, feature=anatomy.feature_drafter), [Scene("hybrid", hybrid_figure(record, lang),
                                                                               hybrid_caption(record, lang))]
    scenes = [Scene("expansion", expansion_figure(record, lang), expansion_caption(record, lang))]
    if kind == "peagle":
        return t("anat.peagle", lang), scenes
    scenes.append(Scene("fusion", fusion_figure(record, lang), fusion_caption(anatomy, lang)))
    if kind == "eagle3":
        scenes.append(Scene("ttt", ttt_figure(anatomy, lang, preset), ttt_caption(anatomy, lang, preset)))
    return t(f"anat.{kind}", lang), scenes


# ---- Medusa ---------------------------------------------------------------------------------------
def head_cells(record: StepRecord) -> dict[tuple[int, int], list]:
    """(depth, rank in that head's top tokens) -> the tree nodes drafted from that cell."""
    heads = record.anatomy.heads
    cells: dict[tuple[int, int], list] = {}
    for node in record.nodes:
        if node.depth <= len(heads) and node.token in heads[node.depth - 1].tokens:
            cells.setdefault((node.depth, heads[node.depth - 1].tokens.index(node.token)), []).append(node)
    return cells


def _cell_status(nodes: list) -> str:
    statuses = {n.status for n in nodes}
    return next((s for s in STATUS_ORDER if s in statuses), OUTSIDE)


def medusa_figure(record: StepRecord, lang: str) -> go.Figure:
    """Columns: the heads (head i guesses depth i+1); rows: each head's top tokens with their
    probabilities; a cell is coloured by the fate of the tree nodes cut from it (grey: none), and the
    tree's edges join the cells of a node and its parent."""
    heads = record.anatomy.heads
    if not heads:
        return empty(t("anat.none_drafted", lang))
    cells = head_cells(record)
    where = {n.id: (n.depth, rank) for (depth, rank), nodes in cells.items() for n in nodes}
    fig = go.Figure()
    xs, ys = [], []
    for node in record.nodes:
        if node.id not in where:
            continue
        parent = (0, 0) if node.parent < 0 else where.get(node.parent)
        if parent is not None:
            xs += [parent[0], where[node.id][0], None]
            ys += [parent[1], where[node.id][1], None]
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": "#9a9a9a", "width": 1.5}, hoverinfo="skip",
                             showlegend=False))
    fig.add_trace(go.Scatter(x=[0], y=[0], mode="markers+text", text=[token_label(record.root.text)],
                             name=t("tree.root", lang), marker={"symbol": "square", "size": 34, "color": COLORS["root"]},
                             textfont={"color": "white", "size": 13}, hoverinfo="skip"))
    groups: dict[str, list] = {}
    for head in heads:
        for rank, (token, text, prob) in enumerate(zip(head.tokens, head.texts, head.probs)):
            nodes = cells.get((head.depth, rank), [])
            groups.setdefault(_cell_status(nodes), []).append((head.depth, rank, text, prob, len(nodes)))
    for status in (*STATUS_ORDER, OUTSIDE):
        if status not in groups:
            continue
        depth, rank, text, prob, count = zip(*groups[status])
        color = COLORS["pruned"] if status == OUTSIDE else COLORS[status]
        fig.add_trace(go.Scatter(
            x=depth, y=rank, mode="markers+text", name=t(f"anat.cell_{status}", lang),
            text=[f"{token_label(x)}<br>{p:.2f}" for x, p in zip(text, prob)],
            textfont={"size": 11, "color": "#222222" if status in (OUTSIDE, "not_reached") else "white"},
            marker={"symbol": "square", "size": 38, "color": color, "line": {"color": "white", "width": 1}},
            customdata=list(zip(depth, [r + 1 for r in rank], count)),
            hovertemplate=t("anat.cell_hover", lang) + "<extra></extra>"))
    top = max(len(h.tokens) for h in heads)
    fig.update_xaxes(range=[-0.6, len(heads) + 0.6], tickmode="array", tickvals=list(range(len(heads) + 1)),
                     ticktext=[t("tree.root", lang)] + [t("anat.head_tick", lang, i=h.depth) for h in heads],
                     showgrid=False, side="top")
    fig.update_yaxes(range=[top - 0.5, -0.6], tickmode="array", tickvals=list(range(top)),
                     ticktext=[t("anat.rank_tick", lang, r=r + 1) for r in range(top)], showgrid=False)
    return finish(fig, t("anat.medusa_title", lang, step=record.step + 1), 170 + 52 * top, below=True)


def medusa_caption(record: StepRecord, lang: str) -> str:
    """How many nodes the tree cut from each head, and from which of its ranks."""
    heads, cells = record.anatomy.heads, head_cells(record)
    parts = []
    for head in heads:
        ranks = sorted(rank for depth, rank in cells if depth == head.depth)
        nodes = sum(len(cells[head.depth, r]) for r in ranks)
        parts.append(t("anat.head_part", lang, i=head.depth, nodes=nodes, ranks=", ".join(str(r + 1) for r in ranks),
                       token=token_label(head.texts[0]), prob=head.probs[0]) if ranks else t("anat.head_none", lang, i=head.depth))
    caption = t("anat.medusa_caption", lang, parts=_joined(parts, lang), nodes=len(record.nodes))
    if missing := len(record.nodes) - sum(len(nodes) for nodes in cells.values()):  # sampled below the top tokens
        caption += " " + t("anat.below_top", lang, n=missing)
    return caption


# ---- EAGLE-2's expansion --------------------------------------------------------------------------
def expansion_figure(record: StepRecord, lang: str) -> go.Figure:
    """Every candidate EAGLE-2 scored this step: x its depth, y its cumulative confidence (log scale);
    the kept ones in the colour of their verdict, the pruned faded, the ones fed again ringed."""
    expansion = record.expansion
    if expansion is None or not expansion.tokens:
        return empty(t("anat.none_drafted", lang))
    confidence = [math.exp(s) for s in expansion.scores]
    status = [record.nodes[k].status if k >= 0 else "pruned" for k in expansion.kept_as]
    fig = go.Figure()
    xs, ys = [], []
    for i, parent in enumerate(expansion.parents):
        xs += [0 if parent < 0 else expansion.depths[parent], expansion.depths[i], None]
        ys += [1.0 if parent < 0 else confidence[parent], confidence[i], None]
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": "#d0d0d0", "width": 1}, hoverinfo="skip",
                             showlegend=False))
    fig.add_trace(go.Scatter(x=[0], y=[1.0], mode="markers+text", text=[token_label(record.root.text)],
                             textposition="middle left", name=t("tree.root", lang), hoverinfo="skip",
                             marker={"size": 14, "color": COLORS["root"]}))
    for kind in ("pruned", *STATUS_ORDER):
        idx = [i for i, s in enumerate(status) if s == kind]
        if not idx:
            continue
        kept = kind != "pruned"
        fig.add_trace(go.Scatter(
            x=[expansion.depths[i] for i in idx], y=[confidence[i] for i in idx],
            mode="markers+text" if kept else "markers", text=[token_label(expansion.texts[i]) for i in idx],
            textposition="middle right", name=t("anat.pruned" if not kept else f"kind.{kind}", lang),
            opacity=1.0 if kept else 0.55,
            marker={"size": [14 if expansion.expanded[i] else 10 for i in idx],
                    "color": COLORS[kind] if kept else COLORS["pruned"],
                    "line": {"color": ["#1a202c" if expansion.expanded[i] else "#9a9a9a" for i in idx],
                             "width": [3 if expansion.expanded[i] else 1 for i in idx]}},
            customdata=[[expansion.depths[i], expansion.probs[i], confidence[i]] for i in idx],
            hovertext=[token_label(expansion.texts[i]) for i in idx],
            hovertemplate=t("anat.cand_hover", lang) + "<extra></extra>"))
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=t("anat.fed", lang),
                             marker={"size": 14, "color": "white", "line": {"color": "#1a202c", "width": 3}}))
    depth = max(expansion.depths)
    fig.update_xaxes(title=t("tree.depth", lang), range=[-0.5, depth + 0.8], dtick=1, showgrid=False)
    fig.update_yaxes(title=t("tree.score", lang), type="log", dtick=1)  # 1, 0.1, 0.01: no minor labels
    return finish(fig, t("anat.expansion_title", lang, step=record.step + 1), 420, below=True)


def expansion_caption(record: StepRecord, lang: str) -> str:
    """Per depth: how many candidates were scored, fed again and kept; the nodes kept in all."""
    expansion = record.expansion
    if expansion is None or not expansion.tokens:
        return t("anat.none_drafted", lang)
    parts = []
    for depth in range(1, max(expansion.depths) + 1):
        at = [i for i, d in enumerate(expansion.depths) if d == depth]
        parts.append(t("anat.depth_part", lang, d=depth, scored=len(at), fed=sum(expansion.expanded[i] for i in at),
                       kept=sum(expansion.kept_as[i] >= 0 for i in at)))
    return t("anat.expansion_caption", lang, parts=_joined(parts, lang), scored=len(expansion.tokens),
             kept=sum(k >= 0 for k in expansion.kept_as))


# ---- hybrid ---------------------------------------------------------------------------------------
def branch_counts(record: StepRecord) -> dict[str, tuple[int, int]]:
    """Proposer (``ngram``, ``eagle3``, ``ngram+eagle3`` ...) -> (nodes it proposed, of them accepted)."""
    counts: dict[str, tuple[int, int]] = {}
    for node in record.nodes:
        family = proposer_family(node.proposer)
        nodes, accepted = counts.get(family, (0, 0))
        counts[family] = (nodes + 1, accepted + (node.status == "accepted"))
    return counts


def _leaf_rows(record: StepRecord) -> dict[int, int]:
    """A row per leaf in depth-first order; a node sits on its first child's row."""
    children: dict[int, list[int]] = {}
    for node in record.nodes:
        children.setdefault(node.parent, []).append(node.id)
    rows: dict[int, int] = {}

    def place(node: int) -> int:
        below = [place(c) for c in children.get(node, [])]
        rows[node] = below[0] if below else len(set(rows.values()) | {-1}) - 1
        return rows[node]

    for top in children.get(-1, []):
        place(top)
    return rows


def hybrid_figure(record: StepRecord, lang: str) -> go.Figure:
    """The verify tree with each node filled in its proposer's colour (dark: both proposed it) and its
    verdict as the outline: which branch the n-gram drafted and which EAGLE-3."""
    if not record.nodes:
        return empty(t("anat.none_drafted", lang))
    rows = _leaf_rows(record)
    by_id = {n.id: n for n in record.nodes}
    fig = go.Figure()
    xs, ys = [], []
    for node in record.nodes:
        xs += [0 if node.parent < 0 else by_id[node.parent].depth, node.depth, None]
        ys += [0 if node.parent < 0 else rows[node.parent], rows[node.id], None]
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": "#c9c9c9", "width": 1.5}, hoverinfo="skip",
                             showlegend=False))
    fig.add_trace(go.Scatter(x=[0], y=[0], mode="markers+text", text=[token_label(record.root.text)],
                             name=t("tree.root", lang), hoverinfo="skip", textfont={"color": "white"},
                             marker={"symbol": "square", "size": 30, "color": COLORS["root"]}))
    for family, (count, accepted) in branch_counts(record).items():
        group = [n for n in record.nodes if proposer_family(n.proposer) == family]
        fig.add_trace(go.Scatter(
            x=[n.depth for n in group], y=[rows[n.id] for n in group], mode="markers+text",
            text=[token_label(n.text) for n in group], textfont={"color": "white", "size": 12},
            name=t("anat.branch_legend", lang, who=family, n=count, a=accepted),
            marker={"symbol": "square", "size": 30, "color": proposer_color(family),
                    "line": {"color": [COLORS[n.status] for n in group], "width": 3}},
            customdata=[[n.proposer, t(f"kind.{n.status}", lang)] for n in group],
            hovertemplate="%{text} · %{customdata[0]} · %{customdata[1]}<extra></extra>"))
    depth = max(n.depth for n in record.nodes)
    last = max(rows.values())
    fig.update_xaxes(title=t("tree.depth", lang), range=[-0.6, depth + 0.6], dtick=1, showgrid=False)
    fig.update_yaxes(visible=False, range=[last + 0.6, -0.6])
    return finish(fig, t("anat.hybrid_title", lang, step=record.step + 1), 280 + 40 * (last + 1), below=True)


def hybrid_caption(record: StepRecord, lang: str) -> str:
    counts = branch_counts(record)
    if not counts:
        return t("anat.none_drafted", lang)
    parts = [t("anat.branch_part", lang, who=who, n=n, a=a) for who, (n, a) in counts.items()]
    return t("anat.hybrid_caption", lang, parts=_joined(parts, lang))


def _joined(parts: list[str], lang: str) -> str:
    return ("；" if lang == "zh" else "; ").join(parts)
