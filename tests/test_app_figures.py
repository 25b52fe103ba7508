"""The app's figure builders and text views, fed with StepRecords from real short runs on tiny."""
from __future__ import annotations

import re
import string
import time
import unicodedata
from dataclasses import replace
from pathlib import Path

import pytest
from app_server import TINY_MISSING, TINY_READY

from app.figures import kv_grid_figure, live_figure, pool_figure, tree_figure
from app.i18n import TEXT, t
from app.render import markdown_text, step_sentence, summary_markdown, text_html
from app.runs import Run
from app.series import run_series
from app.shared import MeasuredPoint, comparison_points, measured_point
from app.views.compare.figures import compare_figure
from app.views.compare.view import flag_lines
from app.views.compare.view import table as compare_table
from app.views.worth.figures import worth_figure
from app.views.worth.view import points_table, readout
from core import UserError, generate, read_trace
from core.cost.curve import CostCurve
from app.palette import drafter_color
from core.studies.comparison import Spread

pytestmark = pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_TRACE = ROOT / "assets" / "traces" / "example-tiny.jsonl"


@pytest.fixture(scope="module")
def runs():
    """A chain, a tree, an n-gram and a baseline run of the same prompt (greedy, 24 tokens)."""
    prompt = "我爱"
    options = dict(preset="tiny", max_new_tokens=24, temperature=0.0, seed=0)
    return {
        "chain": generate(prompt, drafter="draft", k=4, **options),
        "tree": generate(prompt, drafter="draft", k=2, tree="2x2", **options),
        "ngram": generate("the cat sat on the mat and the cat sat on the", drafter="ngram", k=3, **options),
        "none": generate(prompt, drafter="none", **options),
    }


def _points(fig):
    """The traces that draw boxes or markers (not the edges)."""
    return [trace for trace in fig.data if trace.mode and "markers" in trace.mode]


@pytest.mark.parametrize("kind", ["chain", "tree", "ngram", "none"])
def test_series_end_where_the_engine_ends(runs, kind):
    """The live plots' last values are the RunResult's own numbers."""
    result = runs[kind]
    s = run_series(result.steps)
    assert s.steps == list(range(1, len(result.steps) + 1))
    assert s.running_tokens_per_forward[-1] == pytest.approx(result.tau)
    assert s.per_position_acceptance == pytest.approx(result.per_position_acceptance)
    if result.draft_tokens_proposed:
        assert s.running_acceptance[-1] == pytest.approx(result.acceptance_rate)
    assert sum(s.step_tokens) == result.new_tokens


@pytest.mark.parametrize("kind", ["chain", "tree", "ngram", "none"])
def test_tree_figure_draws_every_node_in_its_colour(runs, kind):
    from app.palette import COLORS

    for record in runs[kind].steps[:6]:
        fig = tree_figure(record, "en")
        boxes = [(trace.marker.color, text) for trace in _points(fig) for text in trace.text]
        assert len(boxes) == len(record.nodes) + 2  # the root and the target's token
        colors = [color for color, _ in boxes]
        for status in ("accepted", "rejected", "not_reached"):
            assert colors.count(COLORS[status]) == sum(n.status == status for n in record.nodes)
        assert colors.count(COLORS[record.next.kind]) == 1
        assert colors.count(COLORS["accepted"]) == record.accepted_length
        assert f"step {record.step + 1}" in fig.layout.title.text
        hovers = " ".join(h for trace in _points(fig) for h in trace.hovertext)
        for node in record.nodes:
            assert f"q (draft confidence) = {node.draft_prob:.3f}" in hovers
            assert f"p (target probability) = {node.target_prob:.3f}" in hovers


def test_eagle_tree_shows_what_its_expansion_pruned():
    """EAGLE-2 keeps the N best of the nodes it scored; the figure draws the rest faded, under their parents."""
    from app.palette import COLORS

    result = generate("我爱", preset="tiny", drafter="eagle3", tree="3x4", eagle_nodes=10, max_new_tokens=8)
    record = result.steps[0]
    expansion = record.expansion
    pruned = [i for i, node in enumerate(expansion.kept_as) if node < 0]
    assert len(record.nodes) == 10 and len(pruned) == len(expansion.tokens) - 10 > 0
    fig = tree_figure(record, "en")
    colors = [trace.marker.color for trace in _points(fig) for _ in trace.text]
    assert colors.count(COLORS["pruned"]) == len(pruned)
    assert len(colors) == len(record.nodes) + 2 + len(pruned)
    hovers = " ".join(h for trace in _points(fig) for h in trace.hovertext)
    assert "cumulative confidence" in hovers


def test_kv_grid_shows_the_slot_grid(runs):
    for record in runs["tree"].steps[:5]:
        fig = kv_grid_figure(record, "en")
        grid = record.kv.slot_grid
        by_state = {trace.name: len(trace.x) for trace in fig.data}
        for char, name in (("L", "live (earlier)"), ("W", "written this step, kept"),
                           ("F", "written this step, freed"), (".", "free")):
            assert by_state[name] == sum(row.count(char) for row in grid.values())
        assert len(fig.layout.yaxis.ticktext) == len(grid)
        assert f"{record.kv.slots_written} slots written" in fig.layout.title.text


def _axes(fig) -> list:
    return [fig.layout[name] for name in fig.layout if name.startswith(("xaxis", "yaxis"))]


def test_axis_labels_are_whole_and_get_the_room_they_need():
    """A block returned this step has a long row label, written out in full; every axis widens its
    margin to fit its labels (automargin) instead of having them cut at the figure's edge."""
    steps = read_trace(EXAMPLE_TRACE).steps
    record = next(r for r in steps if r.kv.freed_blocks)
    kv = kv_grid_figure(record, "en")
    assert f"block {record.kv.freed_blocks[0]} (returned this step)" in kv.layout.yaxis.ticktext
    for fig in (kv, pool_figure(steps, "en"), live_figure(steps, "en"), tree_figure(record, "en"),
                compare_figure([("draft", steps)], "en")):
        assert all(axis.automargin for axis in _axes(fig)), fig.layout.title.text


@pytest.mark.parametrize("n", [2, 32])
def test_step_axes_tick_whole_steps(n):
    """Left to itself, plotly marks step 1.5 of a two-step run: every step axis ticks whole steps,
    about ten at most; so does the pool's count of blocks."""
    from app.figures.style import whole_ticks

    steps = read_trace(EXAMPLE_TRACE).steps[:n]
    live, pool, compare = live_figure(steps, "en"), pool_figure(steps, "en"), compare_figure([("draft", steps)], "en")
    for axis in (live.layout.xaxis, live.layout.xaxis2, pool.layout.xaxis, compare.layout.xaxis, compare.layout.xaxis2):
        assert (axis.tickformat, axis.dtick) == ("d", whole_ticks(n)["dtick"])
    assert (pool.layout.yaxis.tickformat, pool.layout.yaxis.dtick) == ("d", 1)  # a few blocks in use
    assert [whole_ticks(n)["dtick"] for n in (1, 2, 10, 11, 32, 100, 101, 512)] == [1, 1, 1, 2, 5, 10, 20, 100]


def test_pool_and_live_figures_have_one_point_per_step(runs):
    records = runs["chain"].steps
    pool = pool_figure(records, "zh")
    assert list(pool.data[0].y) == [r.kv.pool_in_use for r in records]
    live = live_figure(records, "zh")
    assert list(live.data[0].x) == list(range(1, len(records) + 1))
    assert list(live.data[2].y) == [len(r.emitted) for r in records]


def test_compare_figure_overlays_each_run(runs):
    fig = compare_figure([(name, runs[name].steps) for name in ("none", "chain", "ngram")], "en")
    assert [trace.name for trace in fig.data] == ["none", "none", "chain", "chain", "ngram", "ngram"]
    assert fig.data[4].line.color == drafter_color("ngram") != fig.data[0].line.color == drafter_color("none")


CURVE = CostCurve(tokens=[1, 2, 5, 9], ratio=[1.0, 1.2, 1.6, 2.4], forward_s=0.02, device="cpu", threads=2,
                  model="tiny")


def test_worth_figure_draws_the_model_the_cost_curve_and_the_measured_points():
    from core.cost.theory import tokens_per_verify, wallclock_speedup

    point = MeasuredPoint("draft · k=4", alpha=0.5, k=4, draft_cost=0.4, c=0.1, tokens_per_verify=1.8, speedup=1.2,
                          v=1.7, v_model=1.6, predicted=0.9, v_by_nodes={1: 1.0, 5: 1.7})
    fig = worth_figure(0.6, 4, 0.05, [point], "en", {"float32": CURVE})
    model = next(trace for trace in fig.data if trace.name == "model, k=4")
    assert model.y[60] == pytest.approx(tokens_per_verify(0.6, 4))
    speed = next(trace for trace in fig.data if trace.name == "model speedup")
    assert speed.y[60] == pytest.approx(wallclock_speedup(0.6, 4, 0.05, 1.6))  # v(k+1) from the curve
    assert speed.y[60] == pytest.approx(tokens_per_verify(0.6, 4) / (4 * 0.05 + 1.6))
    measured = [trace for trace in fig.data if trace.name == "measured here"]
    assert [(m.x[0], m.y[0]) for m in measured] == [(0.5, 1.8), (0.5, 1.2)]
    curve = next(trace for trace in fig.data if trace.name == "v(n) measured on this machine")
    assert list(curve.x) == CURVE.tokens and list(curve.y) == CURVE.ratio
    own = next(trace for trace in fig.data if trace.name == "runs' own verifies")
    assert list(own.x) == [1, 5] and list(own.y) == [1.0, 1.7]
    assert own.hovertext[1] == "draft · k=4: verifies of 5 tokens, v = 1.70"
    assert "v = 1 is assumed" not in readout(0.6, 4, 0.05, "en", CURVE)
    assert "v = 1 is assumed" in readout(0.6, 4, 0.05, "en")  # no curve yet: the paper's assumption, said so
    assert measured[0].mode == "markers+text" and measured[0].text[0] == "draft · k=4"
    crowd = worth_figure(0.6, 4, 0.05, [point] * 6, "en", {"float32": CURVE})
    assert all(t.mode == "markers" for t in crowd.data if t.name == "measured here")  # six names would overlap


def test_the_prediction_is_tau_over_draft_plus_curve_verify(runs):
    """Worth it?'s prediction for a run: its own tau and drafting time, v(nodes + 1) from the curve."""
    from core.cost.theory import predicted_speedup
    from core.records import metrics

    records, forward_s = runs["chain"].steps, metrics.forward_seconds(runs["none"].steps)
    point = measured_point("chain", records, 4, speedup=1.1, forward_s=forward_s, curve=CURVE)
    cost = metrics.step_cost(records, forward_s)
    v_model = sum(CURVE.v(len(r.nodes) + 1) for r in records) / len(records)
    assert point.v_model == pytest.approx(v_model)
    assert point.c == pytest.approx(cost.draft / 4)
    assert point.predicted == pytest.approx(runs["chain"].tau / (cost.draft + v_model))
    assert point.predicted == pytest.approx(predicted_speedup(point.tokens_per_verify, 4, point.c, v_model))
    assert point.draft_cost == metrics.draft_cost(records)
    timed = [r for r in records if not r.disturbed] or records  # steps the CPU disturbed are not timings
    assert point.v == pytest.approx(sum(r.verify_s for r in timed) / len(timed) / forward_s)
    by_nodes = metrics.verify_cost_by_nodes(records, forward_s)
    assert point.v_by_nodes == by_nodes and set(by_nodes) == {len(r.nodes) + 1 for r in timed}
    assert metrics.verify_cost_by_nodes(runs["none"].steps, forward_s) == {1: pytest.approx(1.0)}


def test_the_summary_of_a_tree_run_says_why_its_acceptance_is_low_beside_its_tau(runs):
    note = "The acceptance rate counts every drafted node of the tree"
    assert note in summary_markdown(runs["tree"].to_dict(), "en", runs["tree"].steps)
    assert "接受率把树上每个草稿节点都算进去" in summary_markdown(runs["tree"].to_dict(), "zh", runs["tree"].steps)
    assert note not in summary_markdown(runs["chain"].to_dict(), "en", runs["chain"].steps)


def test_worth_it_says_which_number_is_measured_and_why_the_model_differs(runs):
    """The headline is the model's at the sliders and says so; the latest run's measured speedup is the
    table's number; its measured τ stands beside the independent-α model's, with the reason for the gap."""
    from core.cost.theory import tokens_per_verify
    from core.records import metrics

    forward_s = metrics.forward_seconds(runs["none"].steps)
    point = measured_point("draft · k=4", runs["chain"].steps, 4, speedup=1.24, forward_s=forward_s, curve=CURVE)
    text = readout(round(point.alpha, 2), 4, round(point.c, 2), "en", CURVE, point)
    model, measured = text.split("<br>")
    assert model.startswith("**Model** (every drafted token accepted independently")
    assert measured.startswith("**Measured** (this session's latest run, draft · k=4): **1.24×** speedup")
    assert points_table([point], "en")["speedup"][0] == "1.24×"  # the same number as the table's
    tau_model = tokens_per_verify(point.alpha, 4)
    assert f"predicts τ = {tau_model:.2f}" in measured and f"the run measured {point.tokens_per_verify:.2f}" in measured
    if abs(point.tokens_per_verify - tau_model) > 0.05 * tau_model:
        assert "correlated, not independent" in measured
    assert "相关" in readout(0.5, 4, 0.1, "zh", CURVE, replace(point, tokens_per_verify=tau_model * 1.5))
    tree = measured_point("draft · tree 2x2", runs["tree"].steps, 2, forward_s=forward_s, curve=CURVE)
    assert tree.tree and not point.tree
    assert "α counts every node" in readout(0.5, 2, 0.1, "en", CURVE, tree)
    assert "not timed: Step by step has no baseline" in readout(0.5, 2, 0.1, "en", CURVE, tree)


def test_a_step_run_made_before_any_compare_gets_c_and_v_once_a_curve_is_measured(runs):
    """No one-token forward of this machine is known: c and v are dashes, and the page says why and
    how to get them; once a Compare has measured the curve, the run gets them."""
    from app.session import Session
    from app.views.worth.view import missing_cost

    session = Session().shared
    target = runs["chain"].target
    session.add_run("draft · k=4", runs["chain"].steps, 4, (target, "float32"), None)
    [point] = session.points
    assert point.c is None and point.v is None
    assert list(points_table(list(session.points), "en")["c"]) == ["—"]
    assert "draft · k=4: c and v are dashes" in missing_cost(list(session.points), "en")
    assert "Run Compare once" in missing_cost(list(session.points), "en")
    session.cost_points()  # no curve yet: still waiting
    assert session.points[0] is point
    session.set_curve(target, "int8", CURVE)  # another precision's curve is another target's
    session.cost_points()
    assert session.points[0] is point
    session.set_curve(target, "float32", CURVE)
    session.cost_points()
    [costed] = session.points
    assert costed.c == pytest.approx(measured_point("x", runs["chain"].steps, 4, curve=CURVE).c) and costed.c > 0
    assert costed.v is not None and not session.uncosted and missing_cost(list(session.points), "en") == ""


def _timed(result, walls, verify_s):
    """Repeats of a real run with the given wall times, every verify taking ``verify_s``."""
    steps = [replace(record, verify_s=verify_s) for record in result.steps]
    return [replace(result, wall_s=w, steps=steps) for w in walls]


def test_compare_flags_a_speedup_above_tau_and_noisy_repeats(runs):
    from core.api.request import DecodeRequest
    from core.studies.comparison import Comparison, TimedSetup

    def setup(result, walls, verify_s=None):
        request = DecodeRequest.of("我爱", drafter=result.drafter, k=int(result.settings["k"]))
        return TimedSetup(request, _timed(result, walls, verify_s or (0.1 if result.drafter == "none" else 0.15)))

    base, chain = setup(runs["none"], [10.0, 10.0, 10.0]), setup(runs["chain"], [2.0, 2.0, 2.0])
    comparison = Comparison([base, chain], repeats=3)
    assert comparison.speedup(chain).median == pytest.approx(5.0) and chain.tau < 5 / 1.05
    assert comparison.flags(chain) == ["above_tau"] and comparison.flags(base) == []
    steady = setup(runs["chain"], [10 / (chain.tau * 0.9)] * 3)
    noisy = setup(runs["chain"], [6.0, 9.0, 7.0])
    comparison = Comparison([base, steady, noisy], repeats=3)
    assert comparison.flags(steady) == [] and comparison.flags(noisy) == ["noisy"]
    assert comparison.speedup(noisy) == Spread(10 / 7.0, 10 / 9.0, 10 / 6.0)
    lines = flag_lines(Comparison([base, chain, noisy], repeats=3), "en")
    assert "above 1.05 × τ" in lines[0] and "the numbers are noisy" in lines[1]
    table = compare_table(Comparison([base, chain, noisy], repeats=3), "en")
    assert list(table["note"]) == ["", "above τ", "noisy"]
    assert table["speedup"][2] == "1.43× (1.11–1.67)"
    assert table["v (verify ÷ 1 forward)"][1] == "1.50"
    cheap = setup(runs["chain"], [10 / (chain.tau * 0.9)] * 3, verify_s=0.05)  # verifies at half a forward
    comparison = Comparison([base, cheap], repeats=3)
    assert comparison.flags(cheap) == ["v_below_one"]
    assert "cannot be faster than the baseline's one-token forward" in flag_lines(comparison, "en")[0]
    # a median under tau whose range reaches above it: one round beat what a lossless decoder can
    reaching = setup(runs["chain"], [10 / (chain.tau * 0.9), 10 / (chain.tau * 0.9), 10 / (chain.tau * 1.3)])
    comparison = Comparison([base, reaching], repeats=3)
    assert comparison.speedup(reaching).median < reaching.tau < comparison.speedup(reaching).high
    assert comparison.flags(reaching) == ["above_tau", "noisy"]
    assert f"reaches {chain.tau * 1.3:.2f}×" in flag_lines(comparison, "en")[0]


def test_compare_folds_its_warnings_into_one_counted_line(runs):
    from app.views.compare.view import warnings_html
    from core.api.request import DecodeRequest
    from core.studies.comparison import Comparison, TimedSetup

    def setup(result, walls, verify_s):
        request = DecodeRequest.of("我爱", drafter=result.drafter, k=int(result.settings["k"]))
        return TimedSetup(request, _timed(result, walls, verify_s))

    base = setup(runs["none"], [10.0, 10.0, 10.0], 0.1)
    fast = setup(runs["chain"], [2.0, 2.0, 2.0], 0.15)  # above tau
    noisy = setup(runs["chain"], [6.0, 9.0, 7.0], 0.15)
    comparison = Comparison([base, fast, noisy, setup(runs["chain"], [6.0, 9.0, 7.0], 0.15)], repeats=3)
    html = warnings_html(comparison, "en", ["skipped medusa: no weights"])
    summary, details = html.split("</summary>")
    assert html.startswith('<details class="sdl-warnings"') and " open" not in html.split(">")[0]
    assert summary.endswith("⚠ 4 notes (above τ × 1, noisy × 2, skipped × 1) — open for details")
    assert details.count("<br>") == 3 and "skipped medusa" in details
    assert "4 条提示（高于 τ × 1, 有噪声 × 2, 跳过 × 1）" in warnings_html(comparison, "zh", ["x"])
    assert warnings_html(Comparison([base], repeats=3), "en", []) == ""


def test_a_comparison_warms_up_interleaves_and_repeats(tmp_path, monkeypatch):
    """Each set-up once untimed (short), then rounds baseline, A, baseline, A; Compare and Worth it?
    show one draft-cost number for a set-up, and Worth it? predicts next to the measured speedup."""
    from core.api.request import DecodeRequest
    from core.studies.comparison import WARMUP_TOKENS, run_comparison

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # a fresh cost curve, measured here
    requests = [DecodeRequest.of("It is a truth", drafter=d, k=3, max_new_tokens=10) for d in ("none", "draft")]
    order = [(p.phase, p.round, p.setup.label) for p in run_comparison(requests, repeats=2)
             if p.setup is not None and not p.tick]  # ticks: "still decoding", every TICK_S
    assert order == [("warmup", 0, "none"), ("warmup", 0, "draft · k=3"),
                     ("timed", 1, "none"), ("timed", 1, "draft · k=3"), ("timed", 2, "none"), ("timed", 2, "draft · k=3")]
    progress = list(run_comparison(requests, repeats=2))
    comparison = progress[-1].comparison
    assert WARMUP_TOKENS < 10 and [len(s.results) for s in comparison.setups] == [2, 2]
    assert all(r.new_tokens == 10 for s in comparison.setups for r in s.results)
    assert comparison.curve is not None and comparison.curve.tokens[0] == 1
    table = compare_table(comparison, "en")
    [point] = comparison_points(comparison)
    worth = points_table([point], "en")
    assert table["draft time / verify time"][1] == worth["draft time / verify time"][0] != "—"
    assert float(table["v (verify ÷ 1 forward)"][0]) == pytest.approx(1.0)
    assert float(table["ms / target forward"][0]) > 0
    assert point.speedup == comparison.speedup(comparison.setups[1]).median
    assert worth["speedup (predicted)"][0] == f"{point.predicted:.2f}×"

    from app.views.compare.view import duration, estimate_line
    from core.studies.comparison import estimate_left

    def seconds_left(*args, **kwargs):
        estimate = estimate_left(*args, **kwargs)
        return None if estimate is None else estimate.left_s

    # the time left, from what was measured: before the start one forward per token, at the end nothing
    assert seconds_left(requests, 2, forward_s=0.01) == pytest.approx(2 * (WARMUP_TOKENS + 2 * 10) * 0.01)
    assert seconds_left(requests, 2) is None and "No estimate yet" in estimate_line(requests, 2, None, "en")
    assert "about 1 min 5 s (4 runs" in estimate_line(requests, 1, 65 / (2 * (WARMUP_TOKENS + 10)), "en")
    assert seconds_left(requests, 2, comparison) == 0
    after_round_one = [p.comparison for p in progress if p.phase == "timed" and p.round == 2 and p.setup is not None
                       and p.setup.label == "none" and not p.tick][0]  # a copy is not kept: recompute from walls
    assert after_round_one is comparison
    walls = [s.walls for s in comparison.setups]
    one_round = replace(comparison, setups=[replace(s, results=s.results[:1]) for s in comparison.setups])
    assert seconds_left(requests, 2, one_round) == pytest.approx(walls[0][0] + walls[1][0])
    assert duration(59.6, "zh") == "1 分 0 秒" and duration(12, "en") == "12 s"


def test_a_stepped_run_reports_compute_time_not_the_waits_between_steps():
    """Step by step: the time a user (or Play) waits between steps is not the run's."""
    from core.api.request import DecodeRequest

    run = Run(DecodeRequest.of("我爱", drafter="draft", k=3, max_new_tokens=40))
    start, waited = time.perf_counter(), 0.0
    for _ in range(3):
        assert run.step() is not None
        time.sleep(1.0)
        waited += 1.0
    run.stop()
    elapsed = time.perf_counter() - start
    result = run.result
    busy = sum(r.draft_s + r.verify_s for r in result.steps)
    assert busy <= result.wall_s <= elapsed - waited
    summary = summary_markdown(result.to_dict(), "en", run.records)
    assert f"| Compute time | {result.wall_s:.2f} s (draft " in summary and "waits between steps not counted" in summary


def test_text_colours_every_emitted_token_by_kind(runs):
    from app.palette import COLORS

    result = runs["chain"]
    html = text_html(result.prompt, result.steps, "en")
    tokens = [token for record in result.steps for token in record.emitted]
    assert html.count('class="sdl-tok') == len(tokens)
    for kind in {token.kind for token in tokens}:
        assert html.count(f"border-bottom:3px solid {COLORS[kind]}") == sum(t.kind == kind for t in tokens)
    assert "step 1 · " in html


def test_text_shows_newline_tokens():
    """The shipped trace writes poems, one line a sentence: each newline token is drawn as ↵ before its
    line break (else its box is empty) and named so in its tooltip."""
    steps = read_trace(EXAMPLE_TRACE).steps
    html = text_html("我爱", steps, "en")
    newlines = sum(token.text == "\n" for record in steps for token in record.emitted)
    assert newlines == 3
    assert html.count("↵<br>") == html.count("“↵”") == newlines


def test_step_sentence_tells_what_happened(runs):
    for record in runs["chain"].steps:
        sentence = step_sentence(record, "en")
        if not record.nodes:  # e.g. the last step, when one token of budget is left
            assert "no draft" in sentence
        elif record.next.kind == "correction":
            assert f"drafted {len(record.nodes)}" in sentence
            assert f"accepted {record.accepted_length} and corrected" in sentence
        else:
            assert "bonus" in sentence
    assert "no draft" in step_sentence(runs["none"].steps[0], "en")
    assert "草稿" in step_sentence(runs["chain"].steps[0], "zh")


def test_summary_reads_a_run_and_a_partial_dict(runs):
    table = summary_markdown(runs["chain"].to_dict(), "en")
    assert f"| New tokens | {runs['chain'].new_tokens} |" in table
    assert "| KV blocks in use after | 0 |" in table
    assert "| Compute time | – |" in summary_markdown({}, "en")


def test_example_trace_is_a_real_tiny_run():
    trace = read_trace(EXAMPLE_TRACE)
    assert trace.header["preset"] == "tiny" and trace.header["drafter"] == "draft"
    assert trace.steps and trace.summary["new_tokens"] == trace.steps[-1].new_tokens_total
    assert tree_figure(trace.steps[-1], "zh").data


def test_the_example_button_loads_the_trace_of_the_apps_preset(tmp_path):
    """Replay's "Load the example trace" on the Gemma app loads the Gemma trace (it loaded tiny's); a
    preset with none says so; an uploaded file leaves the box empty for the next one (no Clear first)."""
    from app.session import Session
    from app.views.panels import StepPanels
    from app.views.replay import ReplayState
    from app.views.replay.view import EXAMPLE_TRACES, ReplayView, handlers

    state, status, upload = object(), object(), object()
    view = ReplayView(StepPanels(*(object() for _ in range(6))), status, object(), object(), object())
    for preset, path in EXAMPLE_TRACES.items():
        assert read_trace(path).header["preset"] == preset
        out = handlers(view, state, upload, preset)["example"]("en", Session())
        assert out[state].of(ReplayState).trace.header["preset"] == preset and f"example trace of the {markdown_text(preset)}" in out[status]
    out = handlers(view, state, upload, "my/own-model")["example"]("en", Session())
    assert out[state].of(ReplayState).trace.header["preset"] == "tiny" and "own\\-model has no example trace" in out[status]
    on_upload = handlers(view, state, upload, "tiny")["upload"]
    session = Session()
    for path in (EXAMPLE_TRACES["gemma-270m"], EXAMPLE_TRACE):  # a second file, straight after the first
        out = on_upload("en", session, str(path))
        assert out[upload] is None and out[state].of(ReplayState).trace.header["prompt"] == read_trace(path).header["prompt"]


def test_stopping_a_run_returns_its_kv_blocks():
    from app.controls import StepControls, run_request
    from app.runs import Run
    from app.session import Session

    run = Run(run_request("en", ["tiny"], StepControls("我爱", "tiny", "draft", 3, 2, 0, 0, 40)))
    for _ in range(3):
        run.step()
    run.stop()
    assert run.done and run.step() is None
    assert run.result.stop_reason == "cancelled"
    assert run.result.kv["blocks_in_use_after"] == 0
    assert len(run.result.steps) == 3
    session = Session()
    path = session.shared.traces.save(run)
    assert len(read_trace(path).steps) == 3
    session.close()
    assert not Path(path).exists()


@pytest.mark.parametrize("field,value,message", [
    ("k", 0, "k: draft length / tree depth must be a number from 1 to 16"),
    ("k", "x", "must be a number"),
    ("k", 2.5, "must be a whole number"),
    ("width", 9, "Tree width (1 = chain) must be a number from 1 to 8"),
    ("temperature", -1, "Temperature must be"),
    ("seed", None, "Seed must be"),
    ("prompt", "  ", "the prompt is empty"),
    ("preset", "../../etc", "cannot be"),
    ("drafter", "magic", "cannot be"),
    ("eagle_nodes", 500, "EAGLE nodes N must be a number from 1 to 128"),
    ("target", "a/b/c", "Target model 'a/b/c' is neither a local model folder nor a hub id"),
    ("draft", str(ROOT / "assets"), "has no config.json: it is not a transformers model folder"),
])
def test_controls_refuse_bad_values_with_a_message(field, value, message):
    from app.controls import StepControls, run_request

    values = dict(prompt="我爱", preset="tiny", drafter="eagle" if field == "eagle_nodes" else "draft", k=4,
                  width=1, temperature=0, seed=0, max_new_tokens=16)
    values[field] = value
    with pytest.raises(UserError, match=re.escape(message)):
        run_request("en", ["tiny"], StepControls(**values))


def test_own_models_follow_the_server_policy():
    from app.controls import ModelPolicy, StepControls, run_request

    values = dict(prompt="hi", preset="tiny", drafter="draft", k=4, width=1, temperature=0, seed=0, max_new_tokens=8)
    request = run_request("en", ["tiny"], StepControls(**values, target="  Qwen/Qwen2.5-7B ", draft=""))
    assert (request.target, request.draft, request.trust_remote_code) == ("Qwen/Qwen2.5-7B", None, False)
    assert run_request("en", ["tiny"], StepControls(**values, target="a/b"), policy=ModelPolicy(trust_remote_code=True)
                       ).trust_remote_code
    assert run_request("en", ["tiny"], StepControls(**values),
                       policy=ModelPolicy(own_models=False)).target is None  # presets work
    with pytest.raises(UserError, match="does not take your own models"):
        run_request("en", ["tiny"], StepControls(**values, target="a/b"), policy=ModelPolicy(own_models=False))
    assert ModelPolicy.for_server("127.0.0.1").own_models and ModelPolicy.for_server("::1").own_models
    assert not ModelPolicy.for_server("0.0.0.0").own_models
    assert ModelPolicy.for_server("0.0.0.0", allow_own_models=True).own_models
    assert not ModelPolicy.for_server("127.0.0.1", no_own_models=True).own_models
    assert not ModelPolicy.for_server("127.0.0.1").trust_remote_code


def test_compare_requests_put_the_baseline_first():
    from app.controls import CompareControls, compare_requests

    requests = compare_requests("en", ["tiny"], CompareControls("hi", "tiny", ["draft", "ngram"], "4, 2x3", 0, 0, 16))
    assert [r.label() for r in requests] == ["none", "draft · k=4", "draft · tree 2x3", "ngram · k=4",
                                             "ngram · tree 2x3"]
    with pytest.raises(UserError, match="draft shapes"):
        compare_requests("en", ["tiny"], CompareControls("hi", "tiny", ["draft"], "4, big", 0, 0, 16))
    with pytest.raises(UserError, match="at least one drafter"):
        compare_requests("en", ["tiny"], CompareControls("hi", "tiny", [], "4", 0, 0, 16))
    sizes = compare_requests("en", ["tiny"],
                             CompareControls("hi", "tiny", ["eagle3", "draft-l", "draft-xs"], "4", 0, 0, 16))
    assert [r.drafter for r in sizes] == ["none", "draft-xs", "draft-l", "eagle3"]
    assert sizes[1].label() == "draft-xs · k=4"


def test_every_drafter_name_has_a_colour_of_its_own():
    from app.palette import DRAFTER_COLORS, OTHER_DRAFTER
    from core.api.request import drafter_names

    assert set(DRAFTER_COLORS) == set(drafter_names())
    assert len(set(DRAFTER_COLORS.values()) | {OTHER_DRAFTER}) == len(DRAFTER_COLORS) + 1
    assert drafter_color("eagle3 · tree 4x5") == drafter_color("eagle3:auto") == DRAFTER_COLORS["eagle3"]
    assert drafter_color("something else") == OTHER_DRAFTER


def test_every_text_exists_in_both_languages_with_the_same_fields():
    names = lambda s: {f[1] for f in string.Formatter().parse(s) if f[1]}  # noqa: E731
    for key, (zh, en) in TEXT.items():
        assert zh and en, key
        assert names(zh) == names(en), key


def test_bold_closes_where_markdown_can_close_it():
    """A closing ``**`` right after punctuation and right before a letter (``**能。**实测``) is not a
    closer in Markdown: the page shows the asterisks. Every text's bold closes after a letter or
    before a space or punctuation."""
    def unclosed(text: str) -> list[str]:
        found = []
        for line in text.split("\n"):
            marks = [m.start() for m in re.finditer(r"\*\*", line)]
            for pos in marks[1::2]:  # the closers
                before, after = line[pos - 1], line[pos + 2:pos + 3] or " "
                if unicodedata.category(before)[0] == "P" and not after.isspace() \
                        and unicodedata.category(after)[0] not in "PS":
                    found.append(line[max(0, pos - 10):pos + 5])
        return found

    assert [(key, bad) for key, texts in TEXT.items() for text in texts for bad in unclosed(text)] == []
    for lesson in ("zh", "en"):
        assert unclosed((ROOT / "assets" / "lesson" / f"{lesson}.md").read_text(encoding="utf-8")) == []


def test_english_counts_of_one_are_singular():
    assert t("class.ledger", "en", tokens=1, forwards=1, saved=0).startswith(
        "So far: **1** new token took **1** target forward;")
    assert "**11** new tokens took **21** target forwards" in t("class.ledger", "en", tokens=11, forwards=21, saved=0)


def test_the_live_lesson_says_what_the_real_run_did(runs):
    from app.views.classroom.content import ILLUSTRATED, live_note

    steps = runs["chain"].steps  # tiny on 我爱: it accepts drafts, and does not write 爱中国 next
    best = max(steps, key=lambda s: s.accepted_length)
    assert best.accepted_length > 0
    note = live_note(steps, "en")
    assert f"**{steps[-1].new_tokens_total}** new tokens took **{steps[-1].target_forwards_total}** target" in note
    assert f"Step {best.step + 1}: the target accepted {best.accepted_length} draft token" in note
    assert f"“{ILLUSTRATED}”" in note  # the run differs from the illustration, and the page says so
    assert "一个也没被接受" in live_note(runs["none"].steps, "zh")  # plain decoding accepts nothing
    assert live_note([], "zh") == ""


def test_lesson_frames_tell_the_article_example():
    from app.views.classroom.content import FRAMES, frame_caption, frame_figure, lesson_text

    texts = lambda fig: [x for trace in fig.data for x in (trace.text or [])]  # noqa: E731
    assert len(frame_figure(0, "zh").data[1].text) == 4  # four forwards of the target alone
    assert texts(frame_figure(1, "zh"))[1:] == ["爱", "中", "国", "EOS"]
    assert "国" in texts(frame_figure(2, "en")) and "华" in texts(frame_figure(2, "en"))
    for frame in range(FRAMES):
        assert "Illustration" in frame_caption(frame, "en") and "示意图" in frame_caption(frame, "zh")
    for lang in ("zh", "en"):
        text = lesson_text(lang)
        for word in ("Medusa", "EAGLE", "EAGLE-3", "memory-bound", "compute-bound", "1.38"):
            assert word in text, (lang, word)


def test_the_scene_4_bars_keep_their_numbers_inside_the_figure():
    """Presentation scene 4 ("3 vs 1"): plotly's own range ends at the tallest bar and cut its label."""
    from app.views.classroom.content import frame_figure

    fig = frame_figure(3, "zh")
    [bars] = fig.data
    assert list(bars.y) == [3, 1] and bars.cliponaxis is False
    assert fig.layout.yaxis.range[1] >= 3 * 1.2  # room above the 3 for its label


def test_the_vllm_scene_follows_one_request_through_a_serving_step():
    """Scene 5: the draft proposes, the scheduler reserves a slot per candidate, one verify and the
    rejection sampler judge them, the refused slots are given back; the caption names the lab's bridge."""
    from app.views.classroom.figures import serving_stages
    from app.views.classroom.content import FRAMES, MISSED_GUESS, frame_caption, frame_figure

    proposed, reserved, judged, after = serving_stages(["我"], MISSED_GUESS, accepted=2, correction="国")
    states = lambda row: [slot.state for slot in row]  # noqa: E731
    assert states(proposed)[:5] == ["live"] + ["proposed"] * 4 and states(reserved)[1:5] == ["reserved"] * 4
    assert states(judged)[1:5] == ["accepted", "accepted", "rejected", "not_reached"]
    assert [s.text for s in after if s.state != "free"] == ["我", "爱", "中", "国"]
    assert states(after)[1:] == ["live", "live", "correction", "free", "free", "free"]  # 2 slots given back
    fig = frame_figure(FRAMES - 1, "en")
    assert list(fig.layout.yaxis.ticktext) == ["① draft proposes", "② scheduler reserves",
                                               "③ one verify + rejection", "④ rejected slots freed"]
    for lang, words in (("en", ("vLLM", "scheduler", "rejection sampler", "one** forward")),
                        ("zh", ("vLLM", "调度器", "拒绝采样器", "**一次**前向"))):
        caption = frame_caption(FRAMES - 1, lang)
        assert all(word in caption for word in words), lang
        assert "python -m core vllm compare" in caption and "--format vllm" in caption


def test_part_2_says_what_the_chosen_drafter_really_drafts():
    """The shape line under the live run's buttons, checked against real runs at the classroom's k."""
    from app.views.classroom.content import drafted_range, drafting_sentence
    from app.views.classroom.view import LIVE_K

    options = dict(preset="tiny", k=LIVE_K, max_new_tokens=12)
    hybrid = [len(s.nodes) for s in generate("我爱", drafter="hybrid", **options).steps if s.nodes]
    chain = [len(s.nodes) for s in generate("我爱", drafter="draft", **options).steps if s.nodes]
    assert max(hybrid) <= 2 * LIVE_K and max(hybrid) > LIVE_K  # a tree, not 4 tokens
    assert f"at most {2 * LIVE_K} nodes" in drafting_sentence("hybrid", LIVE_K, "en")
    assert max(chain) == LIVE_K and f"chain of up to {LIVE_K} tokens" in drafting_sentence("draft", LIVE_K, "en")
    assert "不起草" in drafting_sentence("none", LIVE_K, "zh") and "up to 4" in drafting_sentence("ngram", 4, "en")
    steps = generate("我爱", drafter="hybrid", **options).steps
    assert f"drafted {min(hybrid)}–{max(hybrid)} tokens" in drafted_range(steps, "en")
    assert "4 个 token" not in t("class.part2", "zh") and "4 tokens" not in t("class.part2", "en")


def test_the_lesson_names_the_live_plot_it_points_at():
    """The lesson said "the curve at the bottom right" of a plot drawn at the left: it names the panel."""
    from app.figures.live import live_figure
    from app.views.classroom.content import lesson_text

    for lang in ("zh", "en"):
        titles = [a.text for a in live_figure([], lang).layout.annotations]
        assert titles[0] == t("live.acceptance", lang)
        assert f"“{titles[0]}”" in lesson_text(lang) and f"“{t('panel.live', lang)}”" in lesson_text(lang)
    assert "右下" not in lesson_text("zh") and "bottom right" not in lesson_text("en")


def test_the_scaling_figure_draws_each_share_of_the_data_in_its_drafters_colour():
    from app.views.worth.scaling_figure import scaling_figure

    runs = [{"drafter": d, "fraction": f, "positions": round(f * 1_000_000), "tau": 1 + f, "per_position": [0.5] * 6}
            for f in (1, 0.2, 0.05) for d in ("eagle3", "eagle")]
    fig = scaling_figure({"depth": 6, "runs": runs}, "en")
    by_depth = [trace for trace in fig.data if trace.showlegend is not False]
    assert len(by_depth) == 6 and {trace.line.color for trace in by_depth} == {drafter_color("eagle"),
                                                                                 drafter_color("eagle3")}
    assert [trace.line.dash for trace in by_depth[:3]] == ["dot", "dash", "solid"]  # 5 %, 20 %, all of the data
    tau = [trace for trace in fig.data if trace.showlegend is False]
    assert [list(trace.x) for trace in tau] == [[50_000, 200_000, 1_000_000]] * 2
    assert "No scaling result" in scaling_figure(None, "en").layout.annotations[0].text


def test_a_compare_lane_ends_at_the_runs_engine_time_the_table_reads():
    """The bar of a set-up ends at its run's whole engine time (what the table's wall column reads), the
    time outside draft and verify drawn as its own segment; Compare draws the median repeat."""
    from types import SimpleNamespace

    from app.figures.timeline import Lane, timeline_figure
    from core.studies.comparison import TimedSetup

    lane = Lane("hybrid · k=4", [0.1, 0.2], [0.5, 0.7], [3, 2], wall_s=2.0)
    fig = timeline_figure([lane], "en")
    other = [trace for trace in fig.data if trace.name == "the rest (prefill, bookkeeping)"]
    assert lane.steps_s == pytest.approx(1.5) and lane.total_s == 2.0
    assert other and other[0].base[0] == pytest.approx(1.5) and other[0].x[0] == pytest.approx(0.5)
    assert fig.layout.annotations[0].text.startswith("2.00 s")
    runs = [SimpleNamespace(wall_s=w) for w in (3.0, 1.0, 2.0)]
    assert TimedSetup(request=None, results=runs).median_run.wall_s == 2.0


def test_worth_it_draws_each_precisions_curve_and_reads_the_chosen_one():
    """Two Compares on one target, at float32 and int8: both v(n) drawn, the chosen one bold and read by
    the model; a Compare on another target lets them go."""
    from app.session import Session

    int8 = replace(CURVE, ratio=[1.0, 1.4, 1.9, 2.5][:len(CURVE.ratio)], forward_s=CURVE.forward_s / 2)
    session = Session().shared
    session.set_curve("t", "float32", CURVE)
    session.set_curve("t", "int8", int8)
    assert list(session.curves) == ["float32", "int8"]
    fig = worth_figure(0.6, 2, 0.05, [], "en", session.curves, "int8")
    lines = [trace for trace in fig.data if trace.name and trace.name.startswith("v(n) measured")]
    assert [trace.name.rsplit(" ", 1)[-1] for trace in lines] == ["float32", "int8"]
    assert [trace.line.width for trace in lines] == [2, 3]
    assert f"v={int8.v(3):.2f}" in fig.layout.annotations[1].text  # the speedup panel reads int8's v(k+1)
    from app.views.worth.view import precision_note

    assert "float32 " in precision_note(session.curves, "int8", "en") and " ms" in precision_note(
        session.curves, "int8", "en")
    session.set_curve("other", "float32", CURVE)
    assert list(session.curves) == ["float32"]
    assert "Run Compare at int8 too" in precision_note(session.curves, "float32", "en")
    assert "No v(n) of the int8 target yet" in precision_note(session.curves, "int8", "en")
