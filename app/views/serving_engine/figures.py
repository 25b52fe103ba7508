"""In a serving engine: a continuous batch drawn from the engine's batched records (``BatchStep``).

* the timeline: one row per request of the queue, one column per batched verify forward, the
  tokens each request emitted in that forward (coloured by how they came), when it waited,
  joined and left;
* each request's tree-attention mask at one step, built by the engine's own
  ``core.runtime.tree.attention_mask`` from the recorded tree (the committed prefix collapsed to one column);
* the target's paged blocks (one pool shared by the batch) beside the draft model's own cache,
  per request, with the blocks the step returned marked.
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.engine.batch import BatchStep
from core.records.steps import KVStepRecord, StepRecord
from core.runtime.tree import attention_mask, with_root

from ...figures.kv import STATES
from ...figures.style import finish, whole_ticks
from ...i18n import t
from ...palette import COLORS, KV_COLORS, visible

TOKEN_KINDS = ("accepted", "correction", "bonus", "target")
MASK_KINDS = ("blocked", "root", "accepted", "rejected", "not_reached")  # z value = index
# the root's row in a mid slate, not the near-black root colour of the trees: a request with nothing
# drafted (its last step) has a mask of the root row alone, which then read as a black box
MASK_ROOT = "#7d8da3"
MASK_COLORS = ["#f4f4f4", MASK_ROOT, COLORS["accepted"], COLORS["rejected"], COLORS["not_reached"]]
MAX_TICK_CHARS = 8  # characters of a token in a mask's tick label (the hover has it whole)


def short(label: str) -> str:
    return label if len(label) <= MAX_TICK_CHARS else label[: MAX_TICK_CHARS - 1] + "…"


def request_label(i: int, prompt: str) -> str:
    short = " ".join(prompt.split())
    return f"#{i + 1} " + (short if len(short) <= 14 else short[:13] + "…")


def timeline_figure(steps: list[BatchStep], prompts: list[str], lang: str) -> go.Figure:
    """Rows = requests, columns = batched steps; a square per emitted token, the waiting time
    dotted, a triangle where a request joined, a cross where it left (its blocks returned)."""
    fig = go.Figure()
    rows = {i: request_label(i, p) for i, p in enumerate(prompts)}
    _waiting(fig, steps, rows, lang)
    for kind in TOKEN_KINDS:
        xs, ys, hover = [], [], []
        for s in steps:
            for i, record in s.records.items():
                n = len(record.emitted)
                gap = min(0.17, 0.84 / max(n, 1))
                for j, token in enumerate(record.emitted):
                    if token.kind == kind:
                        xs.append(s.step + 1 + (j - (n - 1) / 2) * gap)
                        ys.append(rows[i])
                        hover.append(t("serve.token_hover", lang, request=i + 1, step=s.step + 1,
                                       text=visible(token.text), kind=t("kind." + kind, lang)))
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name=t("kind." + kind, lang), hovertext=hover,
                                 hoverinfo="text", marker={"symbol": "square", "size": 11, "color": COLORS[kind]}))
    _events(fig, steps, rows, lang)
    if steps:
        now = steps[-1].step + 1
        fig.add_vrect(x0=now - 0.5, x1=now + 0.5, fillcolor="#fff3c4", opacity=0.5, line_width=0, layer="below")
    fig.update_xaxes(title=t("serve.axis_step", lang), range=[0.4, max(len(steps), 1) + 0.6],
                     **whole_ticks(len(steps)))
    fig.update_yaxes(categoryorder="array", categoryarray=list(rows.values())[::-1], showgrid=False)
    fig = finish(fig, t("serve.timeline_title", lang, steps=len(steps)), max(340, 150 + 34 * len(rows)))
    fig.update_layout(margin={"l": 170, "r": 210},
                      legend={"orientation": "v", "yanchor": "top", "y": 1.0, "xanchor": "left", "x": 1.02})
    return fig


def _waiting(fig: go.Figure, steps: list[BatchStep], rows: dict[int, str], lang: str) -> None:
    """A dotted line over the steps a request spent in the queue."""
    first = {}
    for s in steps:
        for i in s.records:
            first.setdefault(i, s.step + 1)
    waiting_now = set(steps[-1].waiting) if steps else set()
    xs, ys = [], []
    for i, label in rows.items():
        end = first.get(i, len(steps) + 0.5 if i in waiting_now else None)
        if end is not None and end > 1:
            xs += [0.5, end - 0.5, None]
            ys += [label, label, None]
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=t("serve.waiting", lang), hoverinfo="skip",
                             line={"color": COLORS["not_reached"], "dash": "dot", "width": 2}))


def _events(fig: go.Figure, steps: list[BatchStep], rows: dict[int, str], lang: str) -> None:
    joined = [(s.step + 1, i) for s in steps for i in s.joined]
    left = [(s.step + 1, i, s.returned_blocks[i]) for s in steps for i in s.left]
    fig.add_trace(go.Scatter(
        x=[x - 0.47 for x, _ in joined], y=[rows[i] for _, i in joined], mode="markers", name=t("serve.joined", lang),
        hovertext=[t("serve.joined_hover", lang, request=i + 1, step=x) for x, i in joined], hoverinfo="text",
        marker={"symbol": "triangle-right", "size": 12, "color": COLORS["root"]}))
    fig.add_trace(go.Scatter(
        x=[x + 0.47 for x, _, _ in left], y=[rows[i] for _, i, _ in left], mode="markers", name=t("serve.left", lang),
        hovertext=[t("serve.left_hover", lang, request=i + 1, step=x, blocks=b) for x, i, b in left],
        hoverinfo="text", marker={"symbol": "x-thin", "size": 12, "color": COLORS["rejected"],
                                  "line": {"width": 3, "color": COLORS["rejected"]}}))


def mask_matrix(record: StepRecord) -> tuple[list[list[int]], list[str]]:
    """The verify's tree-attention mask of one request (``core.runtime.tree.attention_mask`` over
    ``[root] + tree``, the committed prefix as ONE column), each visible cell coded by its row's
    fate (``MASK_KINDS``); and the row / column labels after the prefix column."""
    parents = with_root([n.parent for n in record.nodes])
    mask = attention_mask(1, parents, len(parents))[0, 0]  # [1 + nodes, 1 + 1 + nodes]
    fates = ["root"] + [n.status for n in record.nodes]
    z = [[MASK_KINDS.index(fates[r]) if mask[r, c] == 0 else 0 for c in range(mask.shape[1])]
         for r in range(mask.shape[0])]
    labels = [visible(record.root.text)] + [f"{n.id + 1}:{visible(n.text)}" for n in record.nodes]
    return z, labels


def _mask_title(step: BatchStep, i: int, lang: str) -> str:
    title = t("serve.mask_sub", lang, request=i + 1, rows=1 + len(step.records[i].nodes), padded=step.query_rows,
              prefix=step.prefix_tokens[i])
    return title + (t("serve.mask_done", lang) if i in step.left else "")


def masks_figure(step: BatchStep | None, lang: str) -> go.Figure:
    """One heatmap per request in ``step``: rows = the verify's query tokens (root + tree nodes),
    columns = the committed prefix (one column) + the same tokens; a cell is filled where the row
    may attend, in the colour of the row's fate."""
    order = sorted(step.records) if step else []
    if not order:
        return finish(go.Figure(), t("serve.masks_title", lang), 200, legend=False)
    # room between the heatmaps for the next one's row labels (at most MAX_TICK_CHARS + 3 characters)
    fig = make_subplots(rows=1, cols=len(order), horizontal_spacing=0.12 if len(order) > 1 else 0.06,
                        subplot_titles=[_mask_title(step, i, lang) for i in order])
    for col, i in enumerate(order, start=1):
        z, labels = mask_matrix(step.records[i])
        columns = [t("serve.prefix_col", lang, n=step.prefix_tokens[i])] + labels
        if not step.records[i].nodes:  # nothing drafted (a request's last step): the root row alone, said in words
            fig.add_annotation(x=0.5, y=0, text=t("serve.mask_root_only", lang), showarrow=False,
                               font={"color": "white", "size": 12}, row=1, col=col)
        hover = [[t("serve.mask_hover", lang, row=labels[r], col=columns[c],
                    seen=t("serve.sees" if z[r][c] else "serve.blocked", lang)) for c in range(len(columns))]
                 for r in range(len(labels))]
        fig.add_trace(go.Heatmap(z=z, x=list(range(len(columns))), y=list(range(len(labels))), zmin=0,
                                 zmax=len(MASK_KINDS) - 1, colorscale=_discrete(MASK_COLORS), showscale=False,
                                 xgap=1, ygap=1, hovertext=hover, hoverinfo="text"), 1, col)
        fig.update_xaxes(tickmode="array", tickvals=list(range(len(columns))), ticktext=[short(c) for c in columns],
                         tickangle=-60, row=1, col=col)
        fig.update_yaxes(tickmode="array", tickvals=list(range(len(labels))), ticktext=[short(r) for r in labels],
                         autorange="reversed", row=1, col=col)
    for kind in MASK_KINDS[1:]:  # a legend of the row colours
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=t("serve.mask_" + kind, lang),
                                 marker={"symbol": "square", "size": 11, "color": MASK_COLORS[MASK_KINDS.index(kind)]}))
    height = 300 + 18 * max(step.query_rows, 2)
    fig = finish(fig, t("serve.masks_title", lang), height)
    fig.update_layout(margin={"t": 80, "b": 110, "r": 190},
                      legend={"orientation": "v", "yanchor": "top", "y": 1.0, "xanchor": "left", "x": 1.02})
    return fig


def _discrete(colors: list[str]) -> list[list]:
    """A plotly colorscale that maps integer z 0..n-1 to ``colors`` exactly."""
    n = len(colors)
    return [[edge, color] for k, color in enumerate(colors) for edge in (k / n, (k + 1) / n)]


def kv_pair_figure(step: BatchStep | None, lang: str) -> go.Figure:
    """Per request in ``step``: the target's blocks in the batch's shared pool (left) and the
    draft's blocks in its own cache (right), one row per block, one cell per slot."""
    order = sorted(step.records) if step else []
    if not order:
        return finish(go.Figure(), t("serve.kv_title", lang), 200, legend=False)
    titles = []
    for i in order:
        kv, draft = step.records[i].kv, step.draft_kv.get(i)
        gone = t("serve.kv_left", lang, blocks=step.returned_blocks[i]) if i in step.left else ""
        titles.append(t("serve.kv_target", lang, request=i + 1, blocks=len(kv.block_table), freed=len(kv.freed_blocks))
                      + gone)
        titles.append(t("serve.kv_draft", lang, request=i + 1, blocks=len(draft.block_table),
                        freed=len(draft.freed_blocks)) if draft else t("serve.kv_no_draft", lang, request=i + 1))
    heights = [max(len(step.records[i].kv.slot_grid), len(step.draft_kv[i].slot_grid) if i in step.draft_kv else 0, 1)
               for i in order]
    fig = make_subplots(rows=len(order), cols=2, subplot_titles=titles, horizontal_spacing=0.2,
                        vertical_spacing=0.5 / len(order), row_heights=heights)
    for row, i in enumerate(order, start=1):
        _grid(fig, step.records[i].kv, row, 1, lang, first=row == 1)
        if step.draft_kv.get(i) is not None:
            _grid(fig, step.draft_kv[i], row, 2, lang, first=False)
    fig = finish(fig, t("serve.kv_title", lang, used=step.pool_in_use, total=step.pool_blocks),
                 160 + 34 * sum(heights) + 50 * len(order))
    fig.update_layout(margin={"t": 110, "l": 150, "r": 190},
                      legend={"orientation": "v", "yanchor": "top", "y": 1.0, "xanchor": "left", "x": 1.02})
    return fig


def _grid(fig: go.Figure, kv: KVStepRecord, row: int, col: int, lang: str, *, first: bool) -> None:
    blocks = sorted(kv.slot_grid, key=int)
    freed = {str(b) for b in kv.freed_blocks}
    for state in STATES:
        xs, ys, hover = [], [], []
        for y, block in enumerate(blocks):
            for slot, char in enumerate(kv.slot_grid[block]):
                if char == state:
                    xs.append(slot)
                    ys.append(y)
                    hover.append(t("kv.cell", lang, block=block, slot=slot, state=t("kv." + state, lang)))
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="markers", name=t("kv." + state, lang), legendgroup=state, showlegend=first,
            hovertext=hover, hoverinfo="text",
            marker={"symbol": "square", "size": 14, "color": KV_COLORS[state], "line": {"color": "white", "width": 1}},
        ), row, col)
    # short row labels ("block 6 ↩"), so the draft column's labels stay clear of the target's grid
    labels = [f"{t('kv.block', lang)} {b}" + (" ↩" if b in freed else "") for b in blocks]
    size = len(kv.slot_grid[blocks[0]]) if blocks else 1
    fig.update_xaxes(range=[-0.7, size - 0.3], dtick=max(1, size // 4), showgrid=False, row=row, col=col)
    fig.update_yaxes(range=[max(len(blocks), 1) - 0.5, -0.5], tickmode="array", tickvals=list(range(len(blocks))),
                     ticktext=labels, showgrid=False, row=row, col=col)
