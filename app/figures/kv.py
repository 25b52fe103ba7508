"""The paged KV cache as the engine reports it: the request's blocks as a grid of slots for one
step, and the pool's usage over the run."""
from __future__ import annotations

import plotly.graph_objects as go

from core.records.steps import StepRecord

from ..i18n import t
from ..palette import COLORS, KV_COLORS
from .style import finish, whole_ticks

STATES = ("L", "W", "F", ".")


def kv_grid_figure(record: StepRecord, lang: str) -> go.Figure:
    """One row per block (the request's block table plus blocks freed this step), one cell per slot."""
    grid = record.kv.slot_grid
    blocks = sorted(grid, key=int)
    fig = go.Figure()
    for state in STATES:
        xs, ys, hover = [], [], []
        for row, block in enumerate(blocks):
            for slot, char in enumerate(grid[block]):
                if char == state:
                    xs.append(slot)
                    ys.append(row)
                    hover.append(t("kv.cell", lang, block=block, slot=slot, state=t("kv." + state, lang)))
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="markers", name=t("kv." + state, lang), hovertext=hover, hoverinfo="text",
            marker={"symbol": "square", "size": 17, "color": KV_COLORS[state], "line": {"color": "white", "width": 1}},
        ))
    freed = {str(b) for b in record.kv.freed_blocks}
    labels = [
        f"{t('kv.block', lang)} {b}" + (f" ({t('kv.block_freed', lang)})" if b in freed else "") for b in blocks
    ]
    block_size = len(grid[blocks[0]]) if blocks else 0
    fig.update_xaxes(range=[-0.7, block_size - 0.3], title=t("kv.slot", lang), dtick=4, showgrid=False)
    fig.update_yaxes(range=[len(blocks) - 0.5, -0.5], tickmode="array", tickvals=list(range(len(blocks))),
                     ticktext=labels, showgrid=False)
    title = t("kv.grid_title", lang, step=record.step + 1, before=record.kv.blocks_before,
              after=record.kv.blocks_after, written=record.kv.slots_written, freed=record.kv.slots_freed)
    fig = finish(fig, title, 230 + 28 * max(len(blocks), 1))
    fig.update_layout(legend={"orientation": "v", "yanchor": "top", "y": 1.0, "xanchor": "left", "x": 1.02})
    return fig


def pool_figure(records: list[StepRecord], lang: str) -> go.Figure:
    """Blocks in use in the pool after each step, with the steps that freed a whole block marked."""
    steps = [r.step + 1 for r in records]
    fig = go.Figure(go.Scatter(
        x=steps, y=[r.kv.pool_in_use for r in records], mode="lines+markers", name=t("kv.pool_in_use", lang),
        line={"color": KV_COLORS["L"], "shape": "hv", "width": 2.5},
    ))
    freed = [r for r in records if r.kv.freed_blocks]
    fig.add_trace(go.Scatter(
        x=[r.step + 1 for r in freed], y=[r.kv.pool_in_use for r in freed], mode="markers",
        name=t("kv.freed_marker", lang), marker={"color": COLORS["rejected"], "size": 11, "symbol": "x"},
        hovertext=[t("kv.freed_hover", lang, blocks=", ".join(map(str, r.kv.freed_blocks))) for r in freed],
        hoverinfo="text",
    ))
    fig.update_xaxes(title=t("axis.step", lang), rangemode="tozero", **whole_ticks(len(records)))
    fig.update_yaxes(title=t("kv.blocks", lang), rangemode="tozero",
                     **whole_ticks(max((r.kv.pool_in_use for r in records), default=1)))
    return finish(fig, t("kv.pool_title", lang), 260)
