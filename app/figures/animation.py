"""The current step replayed as an animation: draft -> verify -> accept -> the target's token -> KV
slots freed, one frame per event of the StepRecord, in the order the engine did them.

Gradio draws a figure with ``Plotly.react(data, layout)``: a figure's ``frames`` never reach the page.
So the frames travel inside the layout, as the arguments of the slider's steps (one per frame: the
frame-by-frame control) and of the Play button (all of them, in order); ``Plotly.animate`` takes frame
objects as well as names, and plays them in the browser with no call to the server.

The figure is two stacked parts, narrow enough for a 390 px screen: the draft (root on the left, depth
to the right, one row per leaf) and the KV slots of the blocks the step wrote or freed. Each frame
recolours them and carries its caption (an annotation, wrapped for a narrow screen) with the step's
own numbers.
"""
from __future__ import annotations

import html
import unicodedata
from dataclasses import dataclass

import plotly.graph_objects as go

from core.records.steps import NodeRecord, StepRecord

from ..i18n import t
from ..palette import COLORS, KV_COLORS, resampled, visible
from .style import FONT

ROOT, NEXT = -1, -2  # keys of the root box and of the target's own token in the layout
WRITTEN = COLORS["target"]  # a slot the verify forward wrote, not yet judged (the target's blue)
CAPTION_CELLS = 40  # caption line width in cells (a CJK character or a curly quote is two): fits a 390 px screen
CAPTION_LINE_PX = 17
KV_ROW_PX = 20
FRAME_MS, TRANSITION_MS = 1600, 300  # Play: each frame held this long


@dataclass(frozen=True)
class StepEvent:
    """One event of a recorded step, as one frame of the animation shows it."""

    name: str  # "draft" | "verify" | "accept" | "correction" | "resample" | "bonus" | "target" | "kv"
    node_colors: tuple[str, ...]  # one per drafted node (record.nodes order)
    next_shown: bool  # the target's own token is drawn
    slot_states: tuple[str, ...]  # one per drawn KV cell: a KV_COLORS key or "written"
    caption: str


def step_events(record: StepRecord, lang: str) -> list[StepEvent]:
    """The step's events in the order the engine did them: it drafted the nodes, verified root + nodes in
    one target forward (writing their KV slots), accepted a path (none when nothing was drafted), added its
    own token (a correction, a resample, a bonus or a plain target token) and released the refused slots."""
    nodes, kv = record.nodes, record.kv
    proposed = tuple(COLORS["proposed"] for _ in nodes)
    judged = tuple(COLORS[n.status] for n in nodes)
    cells = _cells(record)

    def slots(stage: str) -> tuple[str, ...]:  # what each written cell looks like at a stage
        look = {"draft": {"W": ".", "F": "."}, "verify": {"W": "written", "F": "written"},
                "accept": {"W": "W", "F": "written"}, "kv": {"W": "W", "F": "F"}}[stage]
        return tuple(look.get(state, state) for _, _, state in cells)

    next_kind = "resample" if record.next.kind == "correction" and resampled(record) else record.next.kind
    token = _quoted(record.next.text)
    accepted = [n for n in nodes if n.status == "accepted"]
    events = [StepEvent("draft", proposed, False, slots("draft"), _draft_caption(nodes, lang)),
              StepEvent("verify", proposed, False, slots("verify"),
                        t("anim.verify" if nodes else "anim.verify_none", lang, positions=len(nodes) + 1,
                          root=_quoted(record.root.text), drafted=len(nodes), written=kv.slots_written))]
    if nodes:
        refused = [n for n in nodes if n.status == "rejected" and n.depth == record.accepted_length + 1]
        key = "anim.accept_all" if record.next.kind == "bonus" else (
            "anim.accept_none" if not accepted else "anim.accept_some")
        events.append(StepEvent("accept", judged, False, slots("accept"),
                                t(key, lang, kept=len(accepted), drafted=len(nodes), tokens=_tokens(accepted),
                                  refused=_tokens(refused), not_reached=sum(n.status == "not_reached" for n in nodes))))
    events.append(StepEvent(next_kind, judged, True, slots("accept"),
                            t(f"anim.{next_kind}", lang, token=token, depth=record.accepted_length + 1,
                              emitted=len(record.emitted), kept=record.accepted_length)))
    freed_blocks = ", ".join(map(str, kv.freed_blocks))
    events.append(StepEvent("kv", judged, True, slots("kv"),
                            t("anim.kv_blocks" if kv.freed_blocks else "anim.kv_slots" if kv.slots_freed else
                              "anim.kv_none", lang, freed=kv.slots_freed,
                              kept=kv.slots_written - kv.slots_freed, blocks=freed_blocks,
                              n_blocks=len(kv.freed_blocks), before=kv.blocks_before, after=kv.blocks_after)))
    return events


def animation_figure(record: StepRecord, lang: str) -> go.Figure:
    """The step as frames (``step_events``) with Play / Pause and a slider of one step per frame."""
    events = step_events(record, lang)
    layout = _TreeLayout.of(record)
    cells = _cells(record)
    blocks = sorted({block for block, _, _ in cells}, key=int)
    captions = [_wrap(f"{i + 1}/{len(events)} · {e.caption}") for i, e in enumerate(events)]
    caption_px = CAPTION_LINE_PX * max(c.count("<br>") + 1 for c in captions) + 12
    tree_px, kv_px = layout.height, KV_ROW_PX * len(blocks) + 24
    controls_px = 120
    height = caption_px + tree_px + kv_px + 30 + controls_px
    plot_px = tree_px + kv_px + 30
    kv_top = kv_px / plot_px

    frames = [_frame(i, event, record, layout, cells, blocks, captions[i], kv_top, lang)
              for i, event in enumerate(events)]
    fig = go.Figure(data=frames[0]["data"])
    fig.update_layout(
        template="none", height=height, showlegend=False, font={"family": FONT, "size": 12, "color": "#2a2a2a"},
        margin={"l": 8, "r": 8, "t": caption_px, "b": controls_px}, paper_bgcolor="white", plot_bgcolor="white",
        hoverlabel={"font": {"family": FONT}}, annotations=frames[0]["layout"]["annotations"],
        meta={"step": record.step + 1, "frames": [e.name for e in events]},
        xaxis={"domain": [0, 1], "range": [-0.6, layout.depth + 0.6], "visible": False, "fixedrange": True},
        yaxis={"domain": [kv_top + 30 / plot_px, 1], "range": [layout.rows - 0.5, -0.5], "visible": False,
               "fixedrange": True},
        xaxis2={"domain": [0.16, 1], "anchor": "y2", "range": [-0.7, _block_size(record) - 0.3], "dtick": 4,
                "showgrid": False, "zeroline": False, "fixedrange": True, "tickfont": {"size": 10}},
        yaxis2={"domain": [0, kv_top], "anchor": "x2", "range": [len(blocks) - 0.5, -0.5], "tickmode": "array",
                "tickvals": list(range(len(blocks))), "showgrid": False, "zeroline": False, "fixedrange": True,
                "ticktext": [f"{t('kv.block', lang)} {b}" for b in blocks], "tickfont": {"size": 10}},
        updatemenus=[{
            "type": "buttons", "direction": "right", "showactive": False, "x": 0, "xanchor": "left",
            "y": 0, "yanchor": "top", "pad": {"t": 30, "r": 6},
            "buttons": [
                {"label": t("anim.play", lang), "method": "animate",
                 "args": [frames, {"frame": {"duration": FRAME_MS, "redraw": True}, "mode": "immediate",
                                   "transition": {"duration": TRANSITION_MS}}]},
                {"label": t("anim.pause", lang), "method": "animate",
                 "args": [[None], {"frame": {"duration": 0, "redraw": False}, "mode": "immediate",
                                   "transition": {"duration": 0}}]},
            ]}],
        sliders=[{
            "active": 0, "x": 0, "len": 1, "y": 0, "yanchor": "top", "pad": {"t": 62, "b": 0, "l": 8, "r": 8},
            "currentvalue": {"visible": False}, "font": {"size": 11}, "ticklen": 3,
            "steps": [{"label": t(f"anim.tab.{e.name}", lang), "value": e.name, "method": "animate",
                       "args": [[frame], {"frame": {"duration": 0, "redraw": True}, "mode": "immediate",
                                          "transition": {"duration": 0}}]}
                      for e, frame in zip(events, frames)],
        }],
    )
    return fig


def animation_frames(fig: go.Figure | dict) -> list[dict]:
    """The frames a figure built by ``animation_figure`` plays, in order (each with name, data, layout)."""
    layout = fig["layout"] if isinstance(fig, dict) else fig.layout.to_plotly_json()
    return [step["args"][0][0] for step in layout["sliders"][0]["steps"]]


# ---- the frames --------------------------------------------------------------------------------
def _frame(index: int, event: StepEvent, record: StepRecord, layout: "_TreeLayout", cells: list,
           blocks: list[str], caption: str, kv_top: float, lang: str) -> dict:
    nodes = record.nodes
    verify = event.name == "verify"
    outline = {"color": COLORS["target"] if verify else "white", "width": 3 if verify else 1}
    size, font = layout.marker, layout.font
    edge_x, edge_y = [], []
    for node in nodes:
        parent = layout.position(node.parent)
        child = layout.position(node.id)
        edge_x += [parent[0], child[0], None]
        edge_y += [parent[1], child[1], None]
    anchor = layout.position(layout.next_parent)
    there = layout.position(NEXT)
    traces = [
        go.Scatter(x=edge_x, y=edge_y, mode="lines", line={"color": "#c8c8c8", "width": 1.5}, hoverinfo="skip"),
        go.Scatter(x=[anchor[0], there[0]] if event.next_shown else [],
                   y=[anchor[1], there[1]] if event.next_shown else [], mode="lines",
                   line={"color": COLORS[record.next.kind], "width": 2, "dash": "dot"}, hoverinfo="skip"),
        go.Scatter(x=[0], y=[layout.position(ROOT)[1]], mode="markers+text", text=[_short(record.root.text)],
                   marker={"symbol": "square", "size": size, "color": COLORS["root"], "line": outline},
                   textfont={"color": "white", "size": font}, hoverinfo="text",
                   hovertext=[t("anim.hover_root", lang, token=_quoted(record.root.text))]),
        go.Scatter(x=[layout.position(n.id)[0] for n in nodes], y=[layout.position(n.id)[1] for n in nodes],
                   mode="markers+text", text=[_short(n.text) for n in nodes], customdata=[n.id for n in nodes],
                   marker={"symbol": "square", "size": size, "color": list(event.node_colors), "line": outline},
                   textfont={"color": "white", "size": font}, hoverinfo="text",
                   hovertext=[_node_hover(n, event, lang) for n in nodes]),
        go.Scatter(x=[there[0]] if event.next_shown else [], y=[there[1]] if event.next_shown else [],
                   mode="markers+text", text=[_short(record.next.text)] if event.next_shown else [],
                   marker={"symbol": "square", "size": size, "color": COLORS[record.next.kind],
                           "line": {"color": "white", "width": 1}},
                   textfont={"color": "white", "size": font}, hoverinfo="text",
                   hovertext=[t(f"anim.tab.{_next_name(record)}", lang) + " " + _quoted(record.next.text)]
                   if event.next_shown else []),
        go.Scatter(x=[slot for _, slot, _ in cells], y=[blocks.index(block) for block, _, _ in cells],
                   xaxis="x2", yaxis="y2", mode="markers", customdata=list(event.slot_states),
                   marker={"symbol": "square", "size": 14, "line": {"color": "white", "width": 1},
                           "color": [WRITTEN if s == "written" else KV_COLORS[s] for s in event.slot_states]},
                   hoverinfo="text",
                   hovertext=[t("kv.cell", lang, block=block, slot=slot, state=_slot_words(s, lang))
                              for (block, slot, _), s in zip(cells, event.slot_states)]),
    ]
    annotations = [
        {"text": caption, "xref": "paper", "yref": "paper", "x": 0, "y": 1, "yanchor": "bottom", "xanchor": "left",
         "align": "left", "showarrow": False, "yshift": 8, "font": {"size": 12.5}},
        {"text": t("anim.kv_label", lang), "xref": "paper", "yref": "paper", "x": 0, "y": kv_top, "yanchor": "bottom",
         "xanchor": "left", "showarrow": False, "yshift": 4, "font": {"size": 11, "color": "#555555"}},
    ]
    return {"name": event.name, "data": [trace.to_plotly_json() for trace in traces],
            "layout": {"annotations": annotations, "sliders": [{"active": index}]}}  # Play moves the slider


def _next_name(record: StepRecord) -> str:
    return "resample" if record.next.kind == "correction" and resampled(record) else record.next.kind


def _node_hover(node: NodeRecord, event: StepEvent, lang: str) -> str:
    """A node's token and the draft's q; the target's p once it has verified; the fate once judged."""
    text = t("anim.hover_draft", lang, token=_quoted(node.text), q=node.draft_prob)
    if event.name != "draft":
        text += "<br>" + t("anim.hover_target", lang, p=node.target_prob)
    if event.name not in ("draft", "verify"):
        text += "<br>" + t(f"kind.{node.status}", lang)
    return text


# ---- the draft's layout and the KV cells -----------------------------------------------------------
@dataclass(frozen=True)
class _TreeLayout:
    """Where each box sits: x the depth, y a row (one per leaf, a parent level with its first child). The
    target's own token counts as a child of the last accepted node (the root when none), so that no box
    moves when it appears."""

    rows_of: dict[int, float]
    depth_of: dict[int, int]
    next_parent: int
    rows: int
    depth: int

    @classmethod
    def of(cls, record: StepRecord) -> "_TreeLayout":
        nodes = record.nodes
        last = max((n for n in nodes if n.status == "accepted"), key=lambda n: n.depth, default=None)
        next_parent = ROOT if last is None else last.id
        depth_of = {ROOT: 0, **{n.id: n.depth for n in nodes}, NEXT: record.accepted_length + 1}
        children: dict[int, list[int]] = {}
        for n in nodes:
            children.setdefault(n.parent, []).append(n.id)
        children.setdefault(next_parent, []).append(NEXT)
        rows_of: dict[int, float] = {}
        leaves = 0

        def place(key: int) -> float:
            nonlocal leaves
            kids = children.get(key, [])
            if not kids:
                rows_of[key], leaves = float(leaves), leaves + 1
            else:
                rows_of[key] = [place(kid) for kid in kids][0]  # level with its first child: a chain is a line
            return rows_of[key]

        place(ROOT)
        return cls(rows_of, depth_of, next_parent, leaves, max(depth_of.values()))

    def position(self, key: int) -> tuple[int, float]:
        return self.depth_of[key], self.rows_of[key]

    @property
    def row_px(self) -> int:
        return 40 if self.rows <= 6 else 28 if self.rows <= 12 else 22 if self.rows <= 24 else 16

    @property
    def marker(self) -> int:
        return min(self.row_px - 6, 34 if self.depth <= 8 else 20)

    @property
    def font(self) -> int:
        return 12 if self.marker >= 30 else 10 if self.marker >= 20 else 8

    @property
    def height(self) -> int:
        return self.row_px * self.rows + 20


def _cells(record: StepRecord) -> list[tuple[str, int, str]]:
    """(block, slot, state) of every slot of the blocks the step wrote to or freed, block by block."""
    kv = record.kv
    freed = {str(b) for b in kv.freed_blocks}
    touched = [b for b in sorted(kv.slot_grid, key=int) if b in freed or set(kv.slot_grid[b]) & {"W", "F"}]
    return [(block, slot, state) for block in touched for slot, state in enumerate(kv.slot_grid[block])]


def _block_size(record: StepRecord) -> int:
    return max((len(g) for g in record.kv.slot_grid.values()), default=1)


# ---- words -------------------------------------------------------------------------------------------
def _slot_words(state: str, lang: str) -> str:
    return t("anim.slot_written", lang) if state == "written" else t("kv." + state, lang)


def _draft_caption(nodes: list[NodeRecord], lang: str) -> str:
    if not nodes:
        return t("anim.draft_none", lang)
    chain = all(n.depth == i + 1 for i, n in enumerate(nodes))
    if chain:
        return t("anim.draft_chain", lang, drafted=len(nodes), tokens=_tokens(nodes))
    return t("anim.draft_tree", lang, drafted=len(nodes), depth=max(n.depth for n in nodes),
             first=_tokens([n for n in nodes if n.depth == 1]))


def _quoted(text: str) -> str:
    return f"“{html.escape(visible(text))}”"


def _tokens(nodes: list[NodeRecord]) -> str:
    return " ".join(_quoted(n.text) for n in nodes)


def _short(text: str, limit: int = 3) -> str:
    shown = visible(text)
    return html.escape(shown if len(shown) <= limit else shown[: limit - 1] + "…")


def _cells_wide(ch: str) -> int:
    """Two cells for a character the CJK font draws full width: CJK, and the ambiguous ones (“ ” · →)."""
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F", "A") else 1


def _wrap(text: str, width: int = CAPTION_CELLS) -> str:
    """``text`` broken into lines of at most ``width`` cells with ``<br>``: at spaces (English) or between CJK
    characters, never inside a quoted token or an escaped entity (``&amp;``), never before a closing mark
    (，。）”) nor after an opening one."""
    lines, line, cells = [], "", 0
    for unit in _units(text):
        size = sum(_cells_wide(ch) for ch in html.unescape(unit))
        if cells + size > width and line.strip():
            lines.append(line.rstrip())
            line = unit.lstrip()
            cells = sum(_cells_wide(ch) for ch in html.unescape(line))
        else:
            line, cells = line + unit, cells + size
    lines.append(line.rstrip())
    return "<br>".join(lines)


NO_LINE_START = set("，。；：、）」”！？,.;:)!?")
NO_LINE_END = set("（「“(")


def _units(text: str) -> list[str]:
    """The pieces a line may break between: a space with the word after it, one CJK character, a quoted
    token (“…”), each with the closing marks after it and the opening marks before it."""
    units: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "“" and "”" in text[i + 1:]:
            end = text.index("”", i + 1) + 1
            if units and units[-1][-1] in NO_LINE_END:
                units[-1] += text[i:end]
            else:
                units.append(text[i:end])
            i = end
            continue
        if ch == "&" and ";" in text[i:i + 8]:
            end = text.index(";", i) + 1
            piece = text[i:end]
        else:
            end, piece = i + 1, ch
        if units and (piece[0] in NO_LINE_START or (units[-1] and units[-1][-1] in NO_LINE_END)
                      or (piece[0] not in " " and _cells_wide(piece[0]) == 1 and units[-1][-1] != " "
                          and _cells_wide(units[-1][-1]) == 1)):
            units[-1] += piece
        else:
            units.append(piece)
        i = end
    return units
