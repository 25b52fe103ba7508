"""The Batch size view: its figure and verdict from a real (small) sweep, and bench-file checks."""
from __future__ import annotations

import json

import pytest
import torch

from app.views.batch_sizes.figures import batch_figure
from app.views.batch_sizes.sweeps import EXAMPLE_RESULTS, live_sweep
from app.views.batch_sizes.view import verdict_markdown
from core import UserError
from app.palette import drafter_color
from core.studies.batch_size import crossover, read_sweep_result
from core.studies.batch_size_figure import find_knee


@pytest.fixture(scope="module")
def sweep():
    """ngram against none at batch 1 and 2, 6 new tokens per request, measured by the view's own sweep."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        steps = list(live_sweep("tiny", ["ngram"], (1, 2), 6))
    finally:
        torch.set_num_threads(threads)
    return steps


def test_the_live_sweep_grows_batch_by_batch(sweep):
    assert [b for b, _ in sweep] == [1, 2]
    result = sweep[-1][1]
    assert [(r["batch"], r["drafter"]) for r in result["batch_sweep"]] == [(1, "none"), (1, "ngram"), (2, "none"),
                                                                          (2, "ngram")]
    assert all(r["identical_to_baseline"] for r in result["batch_sweep"])
    assert {r["batch"] for r in result["forward_latency"]} == {1, 2}
    assert set(result["batch_crossover"]) == {"ngram"}


def test_the_live_sweep_runs_on_the_int8_target_when_asked():
    """The batched engine on the int8 target: identical to its own none at each batch size, and labelled."""
    from app.views.batch_sizes.view import verdict_markdown

    *_, (_, result) = live_sweep("tiny", ["draft"], (2,), 6, target_precision="int8")
    assert result["target_precisions"] == ["int8"]
    assert all(r["identical_to_baseline"] for r in result["batch_sweep"])
    assert "(int8 target)" in verdict_markdown(result, "en")


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_figure_draws_throughput_and_latency_and_marks_the_crossover(sweep, lang):
    result = dict(sweep[-1][1], batch_crossover={"ngram": 2})
    fig = batch_figure(result, lang)
    shown = [trace for trace in fig.data if trace.showlegend is not False]
    assert [trace.name for trace in shown] == ["none", "ngram"] + (["批 1", "批 2"] if lang == "zh" else
                                                                 ["batch 1", "batch 2"])
    assert list(shown[0].x) == [1, 2] and list(shown[-1].x) == [2, 4, 8, 16, 32, 64]
    assert shown[0].line.color == drafter_color("none") and shown[1].line.color == drafter_color("ngram")
    knee = find_knee(result["forward_latency"])
    if knee is not None:  # marked where the batch-1 forward first costs 1.5x a one-token forward
        line = next(trace for trace in fig.data if trace.showlegend is False and list(trace.x) == [knee[0]] * 2)
        assert ("拐点" if lang == "zh" else "knee") in line.text[-1]
    mark = next(trace for trace in fig.data if trace.showlegend is False)  # the dotted line at the crossover
    label = next(note for note in fig.layout.annotations if note.yref == "y domain")  # its label, at its top
    assert list(mark.x) == [2, 2] and label.text == ("ngram 从这里起不再划算" if lang == "zh" else
                                                      "ngram stops paying here")
    verdict = verdict_markdown(result, lang)
    assert ("从批大小 **2** 起" if lang == "zh" else "from batch **2** on") in verdict


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_vllms_continuous_batching_is_a_second_series(sweep, lang):
    """vLLM's rows (``vllm:<method>``, bench --batch-sweep --compare-vllm) draw dotted beside the lab's,
    in their method's colour, and are judged against vLLM's own plain decoding."""
    result = dict(sweep[-1][1])
    base = {r["batch"]: r["tokens_per_s"] for r in result["batch_sweep"] if r["drafter"] == "none"}
    result["batch_sweep"] = result["batch_sweep"] + [
        {"batch": b, "drafter": d, "tokens_per_s": base[b] * f}
        for b, d, f in [(1, "vllm:none", 1.1), (1, "vllm:ngram", 1.3), (2, "vllm:none", 1.8), (2, "vllm:ngram", 1.7)]]
    result["batch_crossover"] = crossover(result["batch_sweep"])
    assert result["batch_crossover"]["vllm:ngram"] == 2
    fig = batch_figure(result, lang)
    peer = [trace for trace in fig.data if trace.showlegend is not False and "vLLM-CPU" in trace.name]
    assert [trace.name.split(" ")[1].split("（")[0] for trace in peer] == ["none", "ngram"]
    assert all(trace.line.dash == "dot" for trace in peer)
    assert peer[1].line.color == drafter_color("ngram")
    verdict = verdict_markdown(result, lang)
    assert "vLLM-CPU ngram" in verdict and f"{1.7 / 1.8:.2f}×" in verdict
    assert ("vLLM 自己的 none" if lang == "zh" else "vLLM's own none") in verdict


def test_empty_figure_says_what_to_do():
    fig = batch_figure(None, "en")
    assert fig.layout.annotations[0].text == "Load a bench result or run a small sweep"
    assert verdict_markdown(None, "en") == ""


def test_the_shipped_cpu_results_load():
    result = read_sweep_result(EXAMPLE_RESULTS["tiny"])
    assert {r["batch"] for r in result["batch_sweep"]} == {1, 2, 4, 8, 16}
    assert result["preset"] == "tiny" and result["forward_latency"]
    vllm = [r for r in result["batch_sweep"] if r["drafter"].startswith("vllm:")]  # vLLM-CPU's continuous batching
    assert {(r["batch"], r["drafter"]) for r in vllm} == {(b, d) for b in (1, 2, 4, 8, 16) for d in ("vllm:none", "vllm:ngram")}
    assert all(r["identical_to_baseline"] for r in result["batch_sweep"])
    gemma = read_sweep_result(EXAMPLE_RESULTS["gemma-270m"])
    assert gemma["preset"] == "gemma-270m" and {r["batch"] for r in gemma["batch_sweep"]} >= {1, 2, 4}
    assert gemma["verify_ratio"]["rows"]  # with the verify-cost curve of the same run


@pytest.mark.parametrize("content,message", [
    ("not json", "not JSON"),
    ("[1, 2]", "no batch sweep"),
    (json.dumps({"batch_sweep": []}), "no batch sweep"),
    (json.dumps({"batch_sweep": [{"batch": 0, "drafter": "none", "tokens_per_s": 1}]}), "entry 0 needs batch"),
    (json.dumps({"batch_sweep": [{"batch": 2, "drafter": "draft", "tokens_per_s": 1}]}), "no baseline for none at batch 2"),
    (json.dumps({"batch_sweep": [{"batch": 1, "drafter": "none", "tokens_per_s": 1},
                                 {"batch": 1, "drafter": "vllm:ngram", "tokens_per_s": 1}]}),
     "no baseline for vllm:none at batch 1"),
    (json.dumps({"batch_sweep": [{"batch": 1, "drafter": "none", "tokens_per_s": 1}],
                 "forward_latency": [{"batch": 1}]}), "forward_latency entries need"),
])
def test_bad_bench_files_are_refused_with_a_message(tmp_path, content, message):
    path = tmp_path / "bench.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UserError, match=message):
        read_sweep_result(path)


def test_an_oversized_bench_file_is_refused(tmp_path):
    path = tmp_path / "big.json"
    path.write_text(" " * 2000, encoding="utf-8")
    with pytest.raises(UserError, match="the limit is"):
        read_sweep_result(path, max_bytes=1000)


def test_the_knee_is_the_fewest_tokens_costing_one_and_a_half_one_token_forwards():
    curve = [{"batch": 1, "tokens": n, "latency_ms": ms} for n, ms in ((1, 10.0), (4, 11.0), (8, 14.9), (16, 15.0),
                                                                     (32, 30.0))]
    wider = [{"batch": 4, "tokens": 4, "latency_ms": 100.0}]  # only the smallest batch's curve counts
    assert find_knee(curve + wider) == (16, 1.5)
    assert find_knee(curve[:3]) is None and find_knee([]) is None
