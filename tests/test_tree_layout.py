"""The tree's label layout rule, without a browser: at any node count, depth and token width, no two
labels overlap -- nodes with their q · p lines, the target's correction box, the depth axis's numbers --
for a plot area as narrow as MIN_PLOT_WIDTH or wide; q and p go on two lines, then to the tooltip, when a
column has no room for them; and the figure gives its plot area exactly the rows' height, above
Gradio's top margin for a titled plot (100 px), so the labels sit where the rule put them. The same
labels in Chromium: tests/test_tree_labels_browser.py."""
from __future__ import annotations

import pytest
from test_lesson_figures import overlaps, random_tree

from app.figures.tree import (
    MIN_PLOT_WIDTH,
    PRUNED,
    TreeDrawing,
    draw_tree,
    layout_tree,
    tree_boxes,
)
from core.common.limits import MAX_DEPTH
from core.records.steps import NodeRecord, TokenRecord

ROOT, RESAMPLE = TokenRecord(1, "我", "root"), TokenRecord(2, "爱", "correction")
WIDTHS = (MIN_PLOT_WIDTH, 900, 1300)


def chain(depth: int, text: str, refused_at: int) -> list[NodeRecord]:
    """A chain of ``depth`` nodes, kept up to ``refused_at`` (0-based), refused there, unreached after."""
    status = ["accepted"] * refused_at + ["rejected"] + ["not_reached"] * (depth - refused_at - 1)
    return [NodeRecord(i, 10 + i, text, i - 1, i + 1, 0.5, 0.123, status[i], "draft") for i in range(depth)]


def check(nodes: list[NodeRecord], collapse=None):
    drawing = TreeDrawing(ROOT, nodes, RESAMPLE)
    layout = layout_tree(tree_boxes(drawing, collapse))
    for width in WIDTHS:
        assert not overlaps(layout.label_boxes(plot_width=width)), (len(nodes), width, layout.look)
    fig = draw_tree(drawing, "en", "t", collapse=collapse)
    margin = fig.layout.margin
    assert margin.t >= 100  # Gradio's floor for a titled plot with a label: no row squeezed by it
    assert fig.layout.height - margin.t - margin.b == pytest.approx(layout.plot_height, abs=1)
    low, high = fig.layout.yaxis.range  # reversed: rows run down from the top, a row per look.row pixels
    assert (low - high) * layout.look.row == pytest.approx(layout.plot_height)
    return layout, fig


@pytest.mark.parametrize("n", [24, 60, 128])
@pytest.mark.parametrize("collapse", [False, None])
def test_random_trees_keep_labels_apart_at_any_width(n, collapse):
    for seed in range(3):
        check(random_tree(n, seed), collapse)


@pytest.mark.parametrize("text", ["我", "春眠不觉晓", " the"])
def test_chains_of_every_depth_keep_labels_apart(text):
    for depth in range(1, MAX_DEPTH + 1):
        for refused_at in {0, depth // 2, depth - 1}:
            check(chain(depth, text, refused_at))


def probs_annotations(fig) -> list[str]:
    return [a.text for a in fig.layout.annotations if a.xref != "paper"]


def test_q_and_p_take_one_line_two_lines_or_the_tooltip_as_room_allows():
    lines = {}
    for depth in range(1, MAX_DEPTH + 1):
        layout, fig = check(chain(depth, "我", depth - 1))
        lines[depth] = layout.look.probs_lines
        written = probs_annotations(fig)
        drafted = [k for k in layout.keys if 0 <= k < PRUNED]
        if lines[depth]:
            assert len(written) == len(drafted)
            assert all(x == ("q 0.50 · p 0.12" if lines[depth] == 1 else "q 0.50<br>p 0.12") for x in written)
        else:
            assert written == []
            hovers = " ".join(h for trace in fig.data if trace.hovertext for h in trace.hovertext)
            assert "q (" in hovers and "p (" in hovers  # left to the tooltip
    assert lines[1] == 1 and 2 in lines.values() and lines[MAX_DEPTH] == 0
    order = [{1: 0, 2: 1, 0: 2}[n] for n in lines.values()]  # one line, then two, then none, as columns narrow
    assert order == sorted(order)


def test_the_resample_box_sits_below_the_refused_nodes_q_p_line():
    """The known case: kept, kept, refused; the resample hangs under the last kept node, beside the
    refused one, one row down. Its box starts below the refused node's q · p line."""
    nodes = chain(3, "esh", 2)
    layout, _ = check(nodes)
    boxes = dict(zip(layout.keys, layout.label_boxes(plot_width=MIN_PLOT_WIDTH)))
    refused, resample = boxes[2], boxes[-2]
    assert layout.probs_below and resample[1] >= refused[3]
