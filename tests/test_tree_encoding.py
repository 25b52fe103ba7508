"""The draft tree draws its numbers, not only writes them: a box grows with the target's entropy at
its position (inspected steps), its opacity is min(1, p/q) of its token, notes under the plot say so
in both languages with the range drawn, and no box grows past the room the label layout gave it."""
from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from app_server import TINY_MISSING, TINY_READY

from app.figures.tree import NEXT, ROOT, TreeDrawing, draw_tree, layout_tree, tree_boxes, tree_figure
from core import DecodeRequest, build_decoder
from core.records.detail import PositionRecord
from core.records.steps import NodeRecord, TokenRecord

LANGS = ("zh", "en")


def drawn(fig) -> dict[tuple[float, float], dict]:
    """Every box the figure draws, by where it sits: its marker size, opacity and text colour."""
    out = {}
    for trace in fig.data:
        if trace.mode != "markers+text":
            continue
        for i, (x, y) in enumerate(zip(trace.x, trace.y)):
            out[(x, y)] = {"size": trace.marker.size[i], "opacity": trace.marker.opacity[i],
                           "text_color": trace.textfont.color[i], "label": trace.text[i]}
    return out


def by_key(fig, drawing: TreeDrawing) -> tuple[dict[int, dict], int]:
    """The drawn boxes by node id (ROOT, NEXT, node ids), and the full box size of the layout."""
    layout = layout_tree(tree_boxes(drawing))
    points = drawn(fig)
    return {key: points[(col, row)] for key, col, row in zip(layout.keys, layout.columns, layout.rows)}, \
        layout.look.marker


def notes(fig) -> list[str]:
    """The texts written under the plot (paper-placed annotations; the q · p lines sit on the nodes)."""
    return [a.text for a in fig.layout.annotations if a.xref == "paper"]


# ---- a tree written out by hand: every number known ----------------------------------------------
HAND_ROOT, HAND_NEXT = TokenRecord(1, "我", "root"), TokenRecord(9, "国", "correction")
HAND_NODES = [  # a chain: kept, kept, refused; (draft_prob q, target_prob p) chosen for their ratios
    NodeRecord(0, 10, "爱", -1, 1, 0.40, 0.20, "accepted", "draft"),  # min(1, p/q) = 0.5
    NodeRecord(1, 11, "中", 0, 2, 0.30, 0.90, "accepted", "draft"),  # 1 (p > q)
    NodeRecord(2, 12, "华", 1, 3, 0.50, 0.05, "rejected", "draft"),  # 0.1
]
HAND_ENTROPY = {-1: 0.10, 0: 2.00, 1: 0.50, 2: 3.00}  # the target's entropy after each node (nats)
HAND_POSITIONS = {parent: PositionRecord(parent, [5], ["x"], [0.5], h) for parent, h in HAND_ENTROPY.items()}


def hand_drawing(positions=HAND_POSITIONS) -> TreeDrawing:
    return TreeDrawing(HAND_ROOT, HAND_NODES, HAND_NEXT, positions=positions)


def test_a_hand_made_tree_draws_entropy_as_size_and_keep_chance_as_opacity():
    drawing = hand_drawing()
    fig = draw_tree(drawing, "en", "t")
    boxes, full = by_key(fig, drawing)
    # each node sits at the position after its parent: node 0 at 0.10 nats, node 1 at 2.00, node 2 at 0.50
    assert boxes[0]["size"] < boxes[2]["size"] < boxes[1]["size"] < full
    assert full / 2 < boxes[0]["size"]  # the most certain position still gets a readable box
    assert boxes[ROOT]["size"] == full  # the root has no law drawn from this step
    # the correction takes the refused node 2's place, after node 1: the same law, the same size (the
    # law after the refused node, 3.00 nats, is drawn nowhere)
    correction = boxes[NEXT]
    assert correction["size"] == boxes[2]["size"]
    assert [boxes[i]["opacity"] for i in (0, 1, 2)] == pytest.approx([0.5, 1.0, 0.1])
    assert boxes[ROOT]["opacity"] == correction["opacity"] == 1.0
    assert boxes[2]["text_color"] != "white" and boxes[0]["text_color"] == boxes[1]["text_color"] == "white"
    en, zh = notes(fig), notes(draw_tree(drawing, "zh", "t"))
    assert en == ["size: the target's entropy there, 0.10–2.00 nats",
                  "opacity: chance kept, min(1, p/q), 0.10–1.00"]
    assert zh == ["大小：目标模型在该处的熵，0.10–2.00 nats",
                  "不透明度：被保留的概率 min(1, p/q)，0.10–1.00"]


def test_without_laws_or_probabilities_the_boxes_look_as_before():
    """An uninspected step keeps full-size boxes and writes no size note; the classroom's hand-made
    drawing (q and p hidden) keeps every box solid and writes no note at all."""
    plain = hand_drawing(positions=None)
    fig = draw_tree(plain, "en", "t")
    boxes, full = by_key(fig, plain)
    assert {box["size"] for box in boxes.values()} == {full}
    assert [boxes[i]["opacity"] for i in (0, 1, 2)] == pytest.approx([0.5, 1.0, 0.1])
    assert notes(fig) == ["opacity: chance kept, min(1, p/q), 0.10–1.00"]
    hidden = draw_tree(plain, "zh", "t", show_probs=False)
    boxes, _ = by_key(hidden, plain)
    assert {box["opacity"] for box in boxes.values()} == {1.0} and notes(hidden) == []


def labels(fig) -> list[tuple]:
    return [(tr.x, tr.y, tr.text, tr.textfont.size) for tr in fig.data if tr.mode == "markers+text"]


def test_the_encoding_moves_no_label():
    """Size and opacity change the boxes only: every label is where, and as large as, it was."""
    with_laws, without = draw_tree(hand_drawing(), "en", "t"), draw_tree(hand_drawing(None), "en", "t")
    assert labels(with_laws) == labels(without)
    assert with_laws.layout.height == without.layout.height


# ---- real inspected steps of the tiny pair ---------------------------------------------------------
@pytest.fixture(scope="module")
def records():
    if not TINY_READY:
        pytest.skip(TINY_MISSING)
    request = DecodeRequest.of("我爱", "tiny", "draft", k=4, temperature=0.8, seed=3, max_new_tokens=12)
    decoder, prompt_ids = build_decoder(request, inspect=True)
    return list(decoder.steps(prompt_ids))


def drawing_of(record) -> TreeDrawing:
    """Where tree_figure puts the boxes (positions and the verdict do not move them)."""
    return TreeDrawing(record.root, record.nodes, record.next, record.expansion)


def test_real_steps_size_boxes_by_the_recorded_entropy(records):
    pairs = []  # (entropy, size) of every drafted node over the run
    for record in records:
        fig = tree_figure(record, "en")
        boxes, full = by_key(fig, drawing_of(record))
        entropy = {p.parent: p.entropy for p in record.inspect.positions}
        for node in record.nodes:
            size = boxes[node.id]["size"]
            assert full / 2 < size < full
            pairs.append((entropy[node.parent], size))
        assert boxes[ROOT]["size"] == full
    assert len({h for h, _ in pairs}) > 3  # the run has positions the target is more and less sure of
    for (h1, s1), (h2, s2) in itertools.combinations(pairs, 2):  # one scale for every step
        if h1 != h2:
            assert (s1 < s2) == (h1 < h2), (h1, s1, h2, s2)
        else:
            assert s1 == s2


def test_real_steps_fade_each_node_by_its_keep_chance(records):
    seen = []
    for record in records:
        boxes, _ = by_key(tree_figure(record, "en"), drawing_of(record))
        for node in record.nodes:
            chance = min(1.0, node.target_prob / node.draft_prob)
            assert boxes[node.id]["opacity"] == pytest.approx(chance), node
            seen.append(chance)
    assert min(seen) < 1.0 and max(seen) == 1.0  # both faded and solid boxes were drawn and checked


@pytest.mark.parametrize("lang", LANGS)
def test_real_steps_write_the_range_each_encoding_spans(records, lang):
    for record in records:
        if not record.nodes:
            continue
        entropy = {p.parent: p.entropy for p in record.inspect.positions}
        drawn_entropies = [entropy[n.parent] for n in record.nodes if n.parent in entropy]
        drawn_entropies += [entropy[p] for p in [last_kept(record)] if p in entropy]  # the target's token
        chances = [min(1.0, n.target_prob / n.draft_prob) for n in record.nodes]
        size_note, opacity_note = notes(tree_figure(record, lang))
        assert f"{min(drawn_entropies):.2f}–{max(drawn_entropies):.2f} nats" in size_note
        assert "min(1, p/q)" in opacity_note and opacity_note.endswith(f"{min(chances):.2f}–{max(chances):.2f}")
        assert ("熵" in size_note and "不透明度" in opacity_note) if lang == "zh" else \
            (size_note.startswith("size: ") and opacity_note.startswith("opacity: "))


def last_kept(record) -> int:
    """The node the target's token hangs under (-1: the root)."""
    kept = [n for n in record.nodes if n.status == "accepted"]
    return max(kept, key=lambda n: n.depth).id if kept else -1


def test_an_uninspected_copy_of_a_real_step_keeps_full_size_boxes(records):
    record = next(r for r in records if r.nodes)
    boxes, full = by_key(tree_figure(replace(record, inspect=None), "en"), drawing_of(record))
    assert {box["size"] for box in boxes.values()} == {full}
