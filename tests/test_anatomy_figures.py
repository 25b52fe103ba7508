"""The anatomy figures (``app/figures/anatomy*.py``) drawn from real tiny StepRecords: Medusa's heads
grid, EAGLE-2's scored candidates, EAGLE-3's fused layers, the training-time test with tiny's shipped
held-out measurement (read here from the shipped config.json files), and the hybrid tree's branches.
The expected values come from the records and the drafters (tests/anatomy_runs.py), not from the page."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from anatomy_runs import eagle3_run, medusa_run, run

from app.figures.anatomy import anatomy_scenes, branch_counts, expansion_figure, head_cells, hybrid_figure, medusa_figure
from app.figures.anatomy_eagle3 import fusion_caption, fusion_figure, token_label, ttt_caption, ttt_figure

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def medusa():
    return medusa_run()


@pytest.fixture(scope="module")
def eagle3():
    return eagle3_run()


def test_medusa_figure_draws_every_cell_and_marks_the_tree_cut_from_them(medusa):
    record = medusa[0][1]
    fig = medusa_figure(record, "en")
    cells = [tr for tr in fig.data if tr.mode == "markers+text" and tr.customdata is not None]
    shown = {(x, y): text for tr in cells for x, y, text in zip(tr.x, tr.y, tr.text)}
    for head in record.anatomy.heads:
        for rank, (text, prob) in enumerate(zip(head.texts, head.probs)):
            assert shown[head.depth, rank] == f"{token_label(text)}<br>{prob:.2f}"
    used = head_cells(record)
    outside = next(tr for tr in cells if tr.name == "became no node")
    assert len(outside.x) == sum(len(h.tokens) for h in record.anatomy.heads) - len(used)
    assert sum(len(nodes) for nodes in used.values()) == len(record.nodes)  # every node sits in a cell
    edges = fig.data[0]
    assert len([x for x in edges.x if x is None]) == len(record.nodes)  # one edge per node, root to depth 1 included
    _, scenes = anatomy_scenes(record, "zh")
    assert [s.name for s in scenes] == ["medusa"]
    assert f"树一共 {len(record.nodes)} 个节点" in scenes[0].caption


def test_fusion_figure_marks_the_layers_the_drafter_reads(eagle3):
    record = eagle3[0][-1]
    fig = fusion_figure(record, "en")
    read = next(tr for tr in fig.data if tr.name == "target layer the drafter reads")
    assert list(read.x) == record.anatomy.target_layers
    assert [text.split("<br>")[1] for text in read.text] == ["low", "middle", "high"]
    unread = next(tr for tr in fig.data if tr.name == "target layer (not read)")
    assert sorted([*unread.x, *read.x]) == list(range(record.anatomy.target_num_layers + 1))
    caption = fusion_caption(record.anatomy, "en")
    assert "layers 1 (low), 2 (middle), 4 (high) of the target's 4" in caption
    assert "1,024 tokens (12.8% of the target's 8,000)" in caption


def test_expansion_figure_fades_what_eagle2_pruned(eagle3):
    record = eagle3[0][-1]
    expansion = record.expansion
    fig = expansion_figure(record, "en")
    pruned = next(tr for tr in fig.data if tr.name == "scored, pruned")
    assert len(pruned.x) == expansion.kept_as.count(-1) > 0
    kept = [tr for tr in fig.data if tr.name in ("accepted draft", "rejected", "not reached")]
    assert sum(len(tr.x) for tr in kept) == len(record.nodes) == 10
    ys = sorted(y for tr in kept for y in tr.y)
    assert ys == pytest.approx(sorted(math.exp(s) for s, k in zip(expansion.scores, expansion.kept_as) if k >= 0))
    rings = [w for tr in (*kept, pruned) for w in tr.marker.line.width]
    assert rings.count(3) == sum(expansion.expanded)


def shipped_chain(folder: str) -> list[float]:
    config = json.loads((ROOT / "assets" / "tiny" / folder / "config.json").read_text())
    return next(row for row in config["heldout"] if row["label"] == "eagle3 k=5")["per_position"]


@pytest.mark.parametrize("preset", ["tiny", "gemma-270m"])
def test_ttt_figure_reads_tinys_shipped_measurement_and_says_whose(eagle3, preset):
    anatomy = eagle3[0][-1].anatomy
    fig = ttt_figure(anatomy, "en", preset)
    lines = {tr.name: list(tr.y) for tr in fig.data if tr.mode == "lines+markers+text"}
    assert lines == {"tiny eagle3 (trained unrolled 4 steps)": shipped_chain("eagle3"),
                     "tiny eagle3-no-ttt (trained unrolled 1 step)": shipped_chain("eagle3-no-ttt")}
    plan = [tr for tr in fig.data if tr.mode == "markers+text"]
    assert [list(tr.text) for tr in plan] == [["f"] * 4, ["f", "f̂", "f̂", "f̂"]]  # teacher forcing, then the unroll
    caption = ttt_caption(anatomy, "en", preset)
    assert "0.32 against 0.06" in caption
    assert ("No eagle3 trained without the test (eagle3-no-ttt) ships for gemma-270m" in caption) == (preset != "tiny")


def test_hybrid_figure_colours_each_branch_by_its_proposer():
    records = run("hybrid", steps=4)
    record = next(r for r in records if {n.proposer.split("-")[0] for n in r.nodes} >= {"ngram", "eagle3"})
    assert record.anatomy.drafter == "hybrid" and record.anatomy.feature_drafter == "eagle3"
    fig = hybrid_figure(record, "en")
    counts = branch_counts(record)
    legends = {tr.name for tr in fig.data if tr.mode == "markers+text" and tr.customdata is not None}
    assert legends == {f"{who}: {n} nodes, {a} accepted".replace(": 1 nodes", ": 1 node") for who, (n, a)
                       in counts.items()}
    assert sum(n for n, _ in counts.values()) == len(record.nodes)


def test_token_texts_are_shown_escaped():
    assert token_label("<b> x") == "&lt;b&gt;␣x"  # a tag-like token stays text in Plotly and Markdown


def test_drafters_without_learned_parts_get_a_sentence():
    for drafter, word in (("draft", "`draft`"), ("ngram", "`ngram`")):
        record = next(r for r in run(drafter, steps=3) if r.nodes)
        assert record.anatomy is None
        sentence, scenes = anatomy_scenes(record, "en")
        assert sentence.startswith(word) and scenes == []


def test_medusa_caption_counts_sampled_nodes_below_the_heads_top_tokens():
    records = run("medusa", steps=4, tree="3x3", temperature=1.0, seed=1)
    for record in records:
        below = len(record.nodes) - sum(len(nodes) for nodes in head_cells(record).values())
        caption = anatomy_scenes(record, "en")[1][0].caption
        assert (f"{below} more node" in caption) == (below > 0)
