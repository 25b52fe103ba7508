"""Worth it?, Batch size and the serving view's readouts, fed hand-made numbers (no model runs): the
table wraps to the page, the measured line is a sentence, an outlier v stays off the scale, Worth it?
reads the curve Step by step reads, crossover labels never overlap, and Q1 says memory-bound only
when the timings' spread carries it."""
from __future__ import annotations

from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pytest

from app.session import Session
from app.shared import MeasuredPoint
from app.views.batch_sizes.figures import batch_figure
from app.views.serving_engine.view import _bound, bound_verdict
from app.views.stepper import StepperState
from app.views.worth.figures import worth_figure
from app.views.worth.view import WorthView, measured_line
from core.cost.curve import CostCurve
from core.studies.batch_size_figure import LABEL_LINE_PX

ROOT = Path(__file__).resolve().parent.parent
CURVE = CostCurve(tokens=[1, 2, 5, 9], ratio=[1.0, 1.2, 1.6, 2.4], forward_s=0.02, device="cpu", threads=2,
                  model="tiny")
POINT = MeasuredPoint("draft · k=4", alpha=0.5, k=4, draft_cost=None, c=None, tokens_per_verify=1.8, speedup=None)


def test_the_worth_it_table_wraps_to_the_page_as_compares_does():
    """Twelve columns: unwrapped, the predicted ones ran off the page's right edge. Compare's table of
    twelve wraps and fits (its browser test measures it); Worth it?'s wraps by the same rules."""
    from app.ui import build_app

    tables = {block.elem_id: block for block in build_app("tiny").blocks.values() if isinstance(block, gr.Dataframe)}
    assert tables["worth-table"].wrap and tables["cmp-table"].wrap
    rules = [line for line in (ROOT / "app" / "page.css").read_text().splitlines() if "#cmp-table" in line]
    assert rules and all("#worth-table" in line for line in rules)


def test_an_untimed_run_is_said_in_a_sentence_of_its_own():
    """The reason for no speedup once stood in the number's place: "... against the target alone speedup"."""
    en, zh = measured_line(POINT, "en"), measured_line(POINT, "zh")
    assert en.startswith("**Measured** (this session's latest run, draft · k=4): no speedup, since the run was not "
                         "timed: Step by step has no baseline to time it against; Compare times each run against "
                         "the target alone. With its own α")
    assert zh.startswith("**实测**（本会话最近的运行 draft · k=4）：没有加速比，因为这次运行没有计时")
    assert "加速 **" not in zh and "即下表" not in zh
    timed = measured_line(replace(POINT, speedup=1.24), "en")
    assert timed.startswith("**Measured** (this session's latest run, draft · k=4): **1.24×** speedup (the table's")


def test_an_outlier_v_is_flagged_at_the_axis_edge_and_never_sets_the_scale():
    point = replace(POINT, v_by_nodes={1: 1.0, 5: 1.7, 9: 40.0})  # 40: a verify timed while the machine was busy
    fig = worth_figure(0.6, 4, 0.05, [point], "en", {"float32": CURVE})
    top = fig.layout.yaxis3.range[1]
    assert top == pytest.approx(2.4 * 1.15)  # the curve's highest point sets the scale, not the outlier
    own = next(trace for trace in fig.data if trace.name == "runs' own verifies")
    assert list(own.x) == [1, 5]
    [flagged] = [trace for trace in fig.data if trace.name == "v of disturbed timings and outliers (off the axis scale)"]
    assert list(flagged.x) == [9] and flagged.y[0] <= top and flagged.marker.symbol == "triangle-up-open"
    assert flagged.hovertext[0].startswith("draft · k=4: verifies of 9 tokens, v = 40.00 -- 16.7× the expected v(9)")
    steady = [replace(point, v_by_nodes={5: v}) for v in (1.5, 1.6, 30.0)]  # no curve: the runs' middle is the gauge
    fig = worth_figure(0.6, 4, 0.05, steady, "zh", {})
    assert fig.layout.yaxis3.range[1] < 3
    assert [trace.x for trace in fig.data if trace.name == "计时受扰或离群的 v（不计入坐标范围）"] == [(5,)]


def test_worth_it_reads_the_curve_step_by_step_reads_until_a_compare_measures_one():
    """A fresh session: no Compare yet, but Step by step's run read this machine's cached curve; Worth it?
    reads the same one instead of assuming v = 1. A Compare's curve, once there, is the one read."""
    session = Session()
    view = WorthView([], "readout", "plot", "table", "scaling")
    assert "v = 1 is assumed" in view.render(session, "en")["readout"]
    session.of(StepperState).run = SimpleNamespace(curve=lambda: CURVE, target=SimpleNamespace(precision="float32"))
    shown = view.render(session, "en")
    assert "v = 1 is assumed" not in shown["readout"] and "v(5) = 1.60" in shown["readout"]
    assert [trace.y for trace in shown["plot"].data if trace.name == "v(n) measured on this machine"] == [
        tuple(CURVE.ratio)]
    session.shared.set_curve("tiny", "float32", replace(CURVE, ratio=[1.0, 1.1, 1.3, 2.0]))
    assert "v(5) = 1.30" in view.render(session, "en")["readout"]


def _sweep(crossover: dict[str, int]) -> dict:
    drafters = ("none", "ngram", "draft", "vllm:none", "vllm:ngram", "vllm:draft")
    rows = [{"batch": b, "drafter": d, "tokens_per_s": 100.0 * b * (1 + i / 10)}
            for b in (1, 2, 4, 8, 16) for i, d in enumerate(drafters)]
    return {"batch_sweep": rows, "batch_crossover": crossover, "forward_latency": []}


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_crossover_labels_at_near_batches_each_get_a_line_of_their_own(lang):
    """Three series stop paying at batch 8 and 16 (the lab's and vLLM's): each label a line of its own,
    a line apart in pixels whatever height the legend leaves the plot, none left drawn as trace text."""
    fig = batch_figure(_sweep({"ngram": 8, "vllm:ngram": 8, "vllm:draft": 16}), lang)
    stops = "不再划算" if lang == "zh" else "stops paying here"
    labels = [note for note in fig.layout.annotations if stops in note.text]
    assert sorted(note.text.split(" ")[0] for note in labels) == ["ngram", "vllm:draft", "vllm:ngram"]
    shifts = sorted(note.yshift for note in labels)
    assert all(b - a >= LABEL_LINE_PX for a, b in pairwise(shifts)) and LABEL_LINE_PX >= 1.3 * 11
    assert all(note.yref == "y domain" and note.y == 1 for note in labels)
    assert {round(10 ** note.x) for note in labels} == {8, 16}  # at their lines (a log axis takes log10 x)
    assert not [trace for trace in fig.data if trace.text is not None and any(stops in str(s) for s in trace.text)]


def _served(timings_ms: dict[int, list[float]]) -> SimpleNamespace:
    """A batch whose verify forwards took ``timings_ms`` at n = requests × 5 padded rows, after a warm-up."""
    steps = [SimpleNamespace(records={0: None}, query_rows=5, verify_s=1.0)]  # the warm-up: left out
    steps += [SimpleNamespace(records=dict.fromkeys(range(n // 5)), query_rows=5, verify_s=ms / 1000)
              for n, timings in timings_ms.items() for ms in timings]
    return SimpleNamespace(steps=steps)


STEADY = [10.0, 10.1, 9.9, 10.0]


def test_q1_counts_its_timings_in_words_and_says_memory_bound_only_when_the_spread_allows():
    """"n = 10: 922.7 ms (21×)" read as a ratio; and medians 1.2× apart for 4× the tokens were called
    memory-bound though the timings at each n spread over 3×."""
    noisy = _bound(_served({5: [10, 30, 11, 29], 20: [12, 40, 13, 35]}), "en")
    assert "n = 5: 20.0 ms (median of 4 forwards)" in noisy and "×)" not in noisy
    assert "4 次前向的中位数" in _bound(_served({5: STEADY, 20: STEADY}), "zh")
    assert "reading the weights dominates" not in noisy.lower()
    assert "can't tell, since within their spread" in noisy and "anywhere from 0% to 79%" in noisy
    assert bound_verdict(STEADY, [11.0, 11.1, 10.9, 11.0], 4, "en").startswith("memory-bound: even at the slow end")
    assert bound_verdict(STEADY, [40.0, 40.5, 39.5, 40.0], 4, "en").startswith("compute-bound: even at the fast end")
    assert bound_verdict(STEADY[:2], [11.0, 11.1], 4, "en").startswith("can't tell yet")
    assert "n = 5: 10.0 ms (median of 1 forward)" in _bound(_served({5: [10.0], 10: [11.0]}), "en")
