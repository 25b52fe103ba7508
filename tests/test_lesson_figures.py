"""The lesson's panels as pure functions of StepRecords: the lossless picture draws the recorded laws
(its residual sums to 1), the timeline's bars are the recorded times, the break-even curve is the
speedup model with this run's costs, and trees up to the engine's 128 nodes keep every label apart."""
from __future__ import annotations

import itertools
import math
import random

import pytest

from app.figures.breakeven import ALPHAS, alpha_for_tau, break_even, breakeven_figure
from app.figures.lossless import bars, lossless_figure, lossless_text
from app.figures.timeline import Lane, timeline_figure
from app.figures.tree import FOLDED, TreeDrawing, draw_tree, layout_tree, tree_boxes, tree_figure
from core import DecodeRequest, build_decoder
from core.cost.curve import CostCurve
from core.cost.theory import tokens_per_verify
from core.records.steps import NodeRecord, TokenRecord



def inspected_run(temperature: float, **options):
    request = DecodeRequest.of("我爱", drafter="draft", k=4, temperature=temperature, seed=3, max_new_tokens=12,
                               **options)
    decoder, prompt_ids = build_decoder(request, inspect=True)
    return list(decoder.steps(prompt_ids))


@pytest.fixture(scope="module")
def sampled():
    return inspected_run(0.8)


@pytest.fixture(scope="module")
def greedy():
    return inspected_run(0.0)


def refused(records):
    return next(r for r in records if r.inspect.rejection is not None)


def test_the_lossless_picture_draws_the_recorded_laws(sampled):
    record = refused(sampled)
    rejection = record.inspect.rejection
    drawn = bars(record)
    assert math.fsum(drawn.residual) == pytest.approx(1.0, abs=1e-5)
    assert drawn.target == [*rejection.target_probs, rejection.target_other]
    assert drawn.residual == [*rejection.residual_probs, rejection.residual_other]
    fig = lossless_figure(record, "en")
    by_name = {trace.name: list(trace.y) for trace in fig.data}
    assert by_name["residual"] == drawn.residual and by_name["q (draft)"] == drawn.draft
    drafted = record.nodes[rejection.tried[0]]
    assert drawn.labels[drawn.drafted[0]] == drafted.text.replace(" ", "␣").replace("\n", "↵") or drafted.text
    notes = " ".join(a.text for a in fig.layout.annotations)
    assert f"kept with {rejection.accept_probs[0]:.3f}" in notes and "the resample drawn" in notes
    text = lossless_text(record, "en")
    assert "min(1, p(x)/q(x))" in text and "norm(max(0, p − q))" in text
    assert f"{rejection.accept_probs[0]:.3f} chance" in text


def test_a_resample_is_called_a_resample_and_a_greedy_miss_a_correction(sampled, greedy):
    """At temperature > 0 the target's token after a refusal is drawn from the residual: the sentence,
    the tree's legend and hover, and the text's colour key say "resample" (重采样), never "correction"."""
    from app.render import step_sentence, text_html

    record = refused(sampled)
    assert record.next.kind == "correction"  # the engine's one name for the token after a miss
    sentence, names = step_sentence(record, "en"), [trace.name for trace in tree_figure(record, "en").data]
    assert "resampled the" in sentence and "corrected" not in sentence
    assert "resample" in names and "correction" not in names
    hover = " ".join(str(h) for trace in tree_figure(record, "en").data for h in (trace.hovertext or []))
    assert "· resample" in hover and "· correction" not in hover
    text = text_html("我爱", sampled, "en")
    assert ">resample</span>" in text and ">correction</span>" not in text
    assert "重采样" in step_sentence(record, "zh") and "重采样" in text_html("我爱", sampled, "zh")
    miss = refused(greedy)
    assert "corrected the" in step_sentence(miss, "en") and "correction" in [t.name for t in tree_figure(miss, "en").data]
    assert ">correction</span>" in text_html("我爱", greedy, "en")


def test_at_temperature_0_the_panel_says_exact_match_and_shows_the_argmax(greedy):
    record = refused(greedy)
    drawn = bars(record)
    assert drawn.residual is None
    argmax = drawn.target.index(max(drawn.target[:-1]))
    assert drawn.chosen == argmax  # the correction is the target's argmax
    text = lossless_text(record, "en")
    assert "exactly its argmax" in text and f'"{drawn.labels[argmax]}"' in text
    assert "argmax" in " ".join(a.text for a in lossless_figure(record, "zh").layout.annotations)
    assert "贪心" in lossless_text(record, "zh")


def test_a_step_that_refused_nothing_says_so(sampled):
    kept = [r for r in sampled if r.inspect.rejection is None]
    for record in kept:
        assert bars(record) is None and "nothing was refused" in lossless_text(record, "en")


def test_the_timeline_bars_are_the_recorded_times(sampled):
    plain = Lane.plain("plain", sum(len(r.emitted) for r in sampled), 0.01)
    run = Lane.of("run", sampled)
    fig = timeline_figure([run, plain], "en")
    draft, verify = fig.data[0], fig.data[1]
    n = len(sampled)
    pieces = [run.draft_segments(i) for i in range(n)]  # a piece per timed drafting forward, then the rest
    assert [len(p) for p in pieces] == [len(r.draft_forward_s or ()) + (sum(r.draft_forward_s or ()) < r.draft_s)
                                        if r.draft_forward_s else 1 for r in sampled]
    assert [sum(p) for p in pieces] == pytest.approx([r.draft_s for r in sampled])
    assert list(draft.x[:sum(map(len, pieces))]) == [x for p in pieces for x in p]
    assert list(verify.x[:n]) == [r.verify_s for r in sampled]
    ends = list(itertools.accumulate(r.draft_s + r.verify_s for r in sampled))
    assert list(verify.base[:n]) == pytest.approx([e - r.verify_s for e, r in zip(ends, sampled)])
    assert list(verify.x[n:]) == [0.01] * plain.tokens.__len__() and sum(plain.tokens) == len(plain.tokens)
    assert [int(x.lstrip("+")) for x in fig.data[2].text[:n]] == [len(r.emitted) for r in sampled]


CURVE = CostCurve(tokens=[1, 2, 4, 8, 16, 32], ratio=[1.0, 1.05, 1.1, 1.3, 1.8, 2.9], forward_s=0.01, device="cpu",
                  threads=1, model="hand-made")


def test_the_break_even_curve_is_the_model_with_the_runs_costs(sampled):
    model = break_even(sampled, CURVE)
    per_step = model.draft_cost + model.verify_cost
    assert model.speedups == pytest.approx([tokens_per_verify(a, model.k) / per_step for a in ALPHAS])
    if model.alpha_even is not None:
        i = ALPHAS.index(model.alpha_even)
        assert model.speedups[i] >= 1.0 and (i == 0 or model.speedups[i - 1] < 1.0)
    assert tokens_per_verify(model.alpha, model.k) == pytest.approx(min(model.tau, model.k + 1), abs=1e-6)
    timed = [r for r in sampled if not r.disturbed] or sampled  # steps the CPU disturbed are not timings
    assert model.forward_s == CURVE.forward_s  # a run that always drafts and has no controller: the probe's forward
    draft = sum(r.draft_s for r in timed) / len(timed) / CURVE.forward_s
    verify = sum(r.verify_s for r in timed) / len(timed) / CURVE.forward_s
    assert model.measured == pytest.approx(model.tau / (draft + verify))
    fig = breakeven_figure(model, "en")
    assert list(fig.data[1].x) == [model.alpha] and list(fig.data[1].y) == [model.measured]
    assert break_even(sampled[:0], CURVE) is None


def test_alpha_for_tau_inverts_the_model():
    for k in (1, 4, 8):
        for alpha in (0.1, 0.5, 0.9):
            assert alpha_for_tau(tokens_per_verify(alpha, k), k) == pytest.approx(alpha, abs=1e-6)


def random_tree(n: int, seed: int, width: int = 8) -> list[NodeRecord]:
    """A tree of ``n`` nodes, up to ``width`` children each, with one accepted path and CJK and Latin tokens."""
    rng = random.Random(seed)
    parents, depth = [], {-1: 0}
    for i in range(n):
        options = [p for p in [-1, *range(i)] if parents.count(p) < width and depth[p] < 16]
        parent = rng.choice(options[-12:])
        parents.append(parent)
        depth[i] = depth[parent] + 1
    accepted, node = set(), -1
    while True:
        kids = [i for i, p in enumerate(parents) if p == node]
        if not kids or len(accepted) >= 3:
            break
        node = kids[0]
        accepted.add(node)
    texts = ["中国人", " the", "我", "ing", "，", "春眠不觉晓"]
    nodes = []
    for i, parent in enumerate(parents):
        status = ("accepted" if i in accepted else
                  "rejected" if parent == -1 or parent in accepted else "not_reached")
        nodes.append(NodeRecord(i, i, texts[i % len(texts)], parent, depth[i], 0.5, 0.25, status, "draft"))
    return nodes


def overlaps(boxes) -> list[tuple[int, int]]:
    return [(i, j) for i, j in itertools.combinations(range(len(boxes)), 2)
            if boxes[i][0] < boxes[j][2] and boxes[j][0] < boxes[i][2]
            and boxes[i][1] < boxes[j][3] and boxes[j][1] < boxes[i][3]]


@pytest.mark.parametrize("n", [24, 60, 128])
@pytest.mark.parametrize("collapse", [False, None])
def test_no_two_labels_overlap(n, collapse):
    root, nxt = TokenRecord(1, "我", "root"), TokenRecord(2, "爱", "correction")
    for seed in range(3):
        nodes = random_tree(n, seed)
        layout = layout_tree(tree_boxes(TreeDrawing(root, nodes, nxt), collapse=collapse))
        assert not overlaps(layout.label_boxes(plot_width=900)), (n, seed)
        fig = tree_figure_of(root, nodes, nxt, collapse)
        drawn = sum(len(trace.text) for trace in fig.data if trace.mode == "markers+text")
        margin = fig.layout.margin  # the plot area is the rows' height: every label where label_boxes says
        assert drawn == len(layout.keys) and fig.layout.height - margin.t - margin.b == pytest.approx(
            layout.plot_height, abs=1)


def tree_figure_of(root, nodes, nxt, collapse):
    return draw_tree(TreeDrawing(root, nodes, nxt), "en", "t", collapse=collapse)


def test_folding_keeps_the_reached_tree_and_counts_the_rest():
    root, nxt = TokenRecord(1, "我", "root"), TokenRecord(2, "爱", "correction")
    nodes = random_tree(128, 0)
    boxes = tree_boxes(TreeDrawing(root, nodes, nxt))  # large: folded by default
    folded = [b for b in boxes if b.key >= FOLDED]
    unreached = sum(n.status == "not_reached" for n in nodes)
    assert sum(int(b.token_text.lstrip("+")) for b in folded) == unreached > 0
    assert {b.key for b in boxes if 0 <= b.key < FOLDED} == {n.id for n in nodes if n.status != "not_reached"}
    assert len(tree_boxes(TreeDrawing(root, nodes, nxt), collapse=False)) == len(nodes) + 2


def test_a_node_tooltip_has_log_probs_alternatives_and_entropy(sampled):
    record = sampled[0]
    fig = tree_figure(record, "en")
    hovers = " ".join(h for trace in fig.data if trace.hovertext for h in trace.hovertext)
    root_position = next(p for p in record.inspect.positions if p.parent == -1)
    assert f"entropy {root_position.entropy:.2f} nats" in hovers
    assert "log q = " in hovers and "log p = " in hovers
    assert f"{root_position.probs[0]:.3f}" in hovers


def test_predict_mode_scores_each_drafted_token(sampled):
    from app.views.classroom.prediction import Predict, hidden, judged

    record = next(r for r in sampled if r.nodes and 0 < r.accepted_length < len(r.nodes))
    kept = {n.id for n in record.nodes if n.status == "accepted"}
    ruled = judged(record)  # the tokens the target reached: the unreached ones are not scored
    state = Predict().next_step(record.step)
    assert all(n.status == "proposed" for n in hidden(record))  # nothing of the verdict shows before the reveal
    assert state.reveal(sampled[record.step - 1] if record.step else record, kept).phase in ("guess", "revealed")
    exact = state.reveal(record, kept)
    assert (exact.last.right, exact.last.total, exact.phase) == (len(ruled), len(ruled), "revealed")
    assert exact.reveal(record, kept) == exact  # a second reveal changes nothing
    everything = Predict().next_step(record.step).reveal(record, [n.id for n in record.nodes])
    assert everything.last.right == len(kept)  # right on the kept ones, wrong on each refused one
    nothing = everything.next_step(record.step).reveal(record, [])
    assert nothing.last.right == len(ruled) - len(kept)
    assert nothing.score.right == len(kept) + len(ruled) - len(kept)
    assert nothing.score.total == 2 * len(ruled)


def test_the_batch_question_is_answered_by_the_shipped_sweep():
    import json
    from pathlib import Path

    from app.views.classroom.prediction import batch_question

    sweep = json.loads((Path(__file__).resolve().parent.parent / "docs/benchmarks/tiny-cpu-vllm/bench.json").read_text())
    q = batch_question(sweep)
    rows = {(r["batch"], r["drafter"]): r["tokens_per_s"] for r in sweep["batch_sweep"]}
    assert q.batch == max(b for b, _ in rows)
    assert q.speedup == pytest.approx(rows[q.batch, q.drafter] / rows[q.batch, "none"])
    assert q.pays == (q.speedup > 1)
    assert batch_question(None) is None


def test_crossover_labels_open_into_the_plot():
    """A crossover's label runs right of its line, except at the largest batch (left): near the
    left edge of a log axis a label run leftwards was cut off (the tiny sweep's batch-2 labels)."""
    import json
    from pathlib import Path

    from core.studies.batch_size_figure import sweep_figure

    sweep = json.loads((Path(__file__).resolve().parent.parent / "docs/benchmarks/tiny-cpu-vllm/bench.json").read_text())
    sweep["batch_crossover"] = {"ngram": 2, "draft": 16}
    labels = {note.text: note.xanchor for note in sweep_figure(sweep).layout.annotations if "stops paying" in note.text}
    assert labels == {"ngram stops paying here": "left", "draft stops paying here": "right"}


def _quant_result(llamacpp: bool) -> dict:
    rows = [{"model": model, "lm_head": True, "n": n, "ms": ms * v, "verify_ratio": v}
            for model, ms, vs in (("target", 40.0, (1.0, 1.05, 1.1)), ("target int8", 25.0, (1.0, 1.3, 1.5)))
            for n, v in zip((1, 3, 5), vs)]
    speed = {"none": 25.0, "eagle3:auto": 50.0, "hybrid:auto": 60.0, "none:target_precision=int8": 40.0,
             "eagle3:auto:target_precision=int8": 70.0, "hybrid:auto:target_precision=int8": 65.0}
    result = {"hardware": "some CPU", "verify_ratio": {"rows": rows},
              "drafters": {k: {"tokens_per_s": v} for k, v in speed.items()}}
    if llamacpp:
        result["llamacpp"] = {"llamacpp:none": {"tokens_per_s": 45.0}, "llamacpp:lookup": {"tokens_per_s": 30.0}}
    return result


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_quantization_scene_reads_its_numbers_from_the_result(lang):
    from app.views.classroom.quantization import quant_caption, quant_figure

    caption = quant_caption(_quant_result(True), lang)
    for number in ("25.0", "40.0", "1.50", "1.10", "2.40", "1.75", "1.60", "70.0", "45.0", "hybrid:auto", "eagle3:auto"):
        assert number in caption, number
    fig = quant_figure(_quant_result(False), lang)
    assert [trace.name for trace in fig.data[:2]] == ["float32 (40.0 ms @ n=1)", "int8 (25.0 ms @ n=1)"]
    assert list(fig.data[3].y) == [40.0, 70.0, 65.0]
    assert "llama" not in quant_caption(_quant_result(False), lang)
    from app.i18n import t

    assert quant_caption(None, lang) == t("quant.none", lang)
