"""The app's named endpoints, called with gradio_client against ``python app.py --preset tiny``."""
from __future__ import annotations

import json

import pytest
from app_server import ROOT, TINY_MISSING, TINY_READY, client

pytestmark = pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING)
gradio_client = pytest.importorskip("gradio_client")

STEP_ARGS = dict(prompt="我爱", preset="tiny", drafter="draft", k=4, width=1, temperature=0, seed=0,
                 max_new_tokens=16, eagle_nodes=16, target="", draft="")


def step(c, **changes):
    status, summary, download, sentence, tree, text, kv, pool, live, *_ = c.predict(
        "en", *{**STEP_ARGS, **changes}.values(), api_name="/step")
    return dict(status=status, sentence=sentence, tree=json.loads(tree["plot"]), kv=json.loads(kv["plot"]),
                live=json.loads(live["plot"]), download=download)


def test_named_endpoints_are_published(url):
    names = client(url).view_api(print_info=False, return_format="dict")["named_endpoints"]
    for name in ("/step", "/play", "/pause", "/stop", "/reset", "/compare", "/compare_stop", "/lesson_next",
                 "/lesson_step", "/worth_it", "/replay_upload", "/replay_example", "/replay_next", "/language"):
        assert name in names


def test_step_then_stop_returns_the_kv_and_offers_the_trace(url):
    from core import read_trace

    c = client(url)
    step(c)
    second = step(c)
    assert "2/16 tokens, 2 target forwards" in second["status"]
    assert "Step 2:" in second["sentence"]
    assert "step 2" in second["tree"]["layout"]["title"]["text"]
    assert second["live"]["data"][0]["x"] == [1, 2]
    status, _, download, *_ = c.predict("en", api_name="/stop")
    assert "0 blocks in use after the run" in status
    trace = read_trace(download["value"])  # the Download button's update: its file, now enabled
    assert [s.step for s in trace.steps] == [0, 1]
    assert trace.summary["stop_reason"] == "cancelled" and trace.summary["kv"]["blocks_in_use_after"] == 0


def test_sessions_do_not_see_each_other(url):
    a, b = client(url), client(url)
    step(a)
    step(a)
    assert "1/16 tokens" in step(b)["status"]
    assert "3/16 tokens" in step(a)["status"]


@pytest.mark.parametrize("field,value,message", [("k", 0, "must be a number from 1 to 16"),
                                                  ("width", 1.5, "must be a whole number"),
                                                  ("prompt", " ", "the prompt is empty")])
def test_a_bad_value_is_a_message_not_a_crash(url, field, value, message):
    status = client(url).predict("en", *{**STEP_ARGS, field: value}.values(), api_name="/step")[0]
    assert "Error" in status and message in status


def test_a_run_on_the_int8_target_says_so_and_a_bad_precision_is_a_message(url):
    c = client(url)
    args = {**STEP_ARGS, "max_new_tokens": 2, "auto": False, "target_precision": "int8"}
    summaries = [c.predict("en", *args.values(), api_name="/step")[1] for _ in range(3)]
    assert any("| Target precision | int8 |" in summary for summary in summaries)
    status = client(url).predict("en", *{**args, "target_precision": "int4"}.values(), api_name="/step")[0]
    assert "Error" in status and "Target precision cannot be 'int4'" in status


def test_a_value_outside_a_list_is_refused_with_a_message(url):
    status = client(url).predict("en", *{**STEP_ARGS, "preset": "/etc"}.values(), api_name="/step")[0]
    assert "Error" in status and "Model preset cannot be '/etc'; choose one of tiny" in status


def test_compare_reports_every_drafter_against_the_same_baseline(url):
    """Warmed up, timed in 2 interleaved rounds; medians with their range, a note where the timing is off;
    Worth it? then shows the same draft cost and a predicted speedup beside the measured one."""
    c = client(url)
    status, table, plot, _timeline = c.predict("en", "It is a truth universally acknowledged", "tiny",
                                    ["draft-xs", "ngram", "eagle3"], "3", 0, 0, 12, "", "", 2, api_name="/compare")
    assert "Done: 4 set-ups, each warmed up once (untimed), then timed in 2 interleaved rounds" in status
    rows = table["data"]
    assert [row[0] for row in rows] == ["none", "draft-xs · k=3", "ngram · k=3", "eagle3 · k=3"]
    assert rows[0][5] == "—" and float(rows[1][5]) > 0 and float(rows[3][5]) > 0  # draft time / verify time
    assert all(float(row[6]) > 0 for row in rows)  # ms per target forward
    assert float(rows[0][7]) == pytest.approx(1.0) and all(float(row[7]) > 0 for row in rows)  # v
    assert rows[0][9] == "1.00×" and all("×" in row[9] for row in rows)  # median speedup (range)
    assert [row[10] for row in rows[1:]] == ["✓", "✓", "✓"]  # greedy: every drafter matches the baseline
    for row in rows:  # a speedup above tau x 1.05 never goes without its note, in the table and the status
        if float(row[9].split("×")[0]) > float(row[3]) * 1.05:
            assert "above τ" in row[11] and f"⚠ {row[0]}: the speedup reaches" in status
    assert len(json.loads(plot["plot"])["data"]) == 8
    *_, points, _scaling = c.predict("en", 0.6, 4, 0.05, api_name="/worth_it")
    worth = {row[0]: row for row in points["data"]}
    for row in rows[1:]:
        assert worth[row[0]][3] == row[5]  # one draft-cost number for one run in both views
        assert worth[row[0]][9].endswith("×") and worth[row[0]][10].endswith("×")  # measured, predicted


def test_own_target_and_draft_by_folder(url):
    """The target / draft fields replace the preset's models: here tiny's small draft-xs decodes as
    the target, drafted for by the draft folder; the trace names both."""
    from core import read_trace

    c = client(url)
    target, draft = ROOT / "assets" / "tiny" / "draft", ROOT / "assets" / "tiny" / "draft-xs"
    assert "1/16 tokens" in step(c, target=str(target), draft=str(draft))["status"]
    download = c.predict("en", api_name="/stop")[2]
    header = read_trace(download["value"]).header
    assert (header["target"], header["draft"]) == (str(target), str(draft))
    status, table, *_ = c.predict("en", "It is a truth", "tiny", ["draft", "ngram"], "3", 0, 0, 8, str(target), "", 1,
                                 api_name="/compare")
    assert "Done: 3 set-ups" in status and [row[10] for row in table["data"][1:]] == ["✓", "✓"]


@pytest.mark.parametrize("changes,message", [
    (dict(draft=str(ROOT / "assets" / "gemma-270m" / "draft")), "the draft's tokenizer differs from the target's"),
    (dict(target="not a model"), "is neither a local model folder nor a hub id"),
    (dict(target=str(ROOT / "assets")), "has no config.json"),
])
def test_own_models_are_checked(url, changes, message):
    status = client(url).predict("en", *{**STEP_ARGS, **changes}.values(), api_name="/step")[0]
    assert "Error" in status and message in status


def test_worth_it_and_replay_and_language(url):
    c = client(url)
    status, alpha, k, c_, readout, plot, points, scaling = c.predict("en", 0.6, 4, 0.05, api_name="/worth_it")
    assert "2.31" in readout and "1.92×" in readout
    runs = {(t["name"].split(" · ")[0], t["line"].get("dash")) for t in json.loads(scaling["plot"])["data"]
            if t.get("showlegend", True)}
    assert ("eagle3", "solid") in runs and ("eagle", "solid") in runs  # the shipped scaling result, all of the data
    c.predict("en", api_name="/replay_example")
    outputs = c.predict("en", api_name="/replay_next")
    header, sentence = outputs[1], outputs[4]
    assert "Prompt:" in header and "Step 2:" in sentence
    outputs = c.predict("zh", 0.6, 4, 0.05, api_name="/language")
    assert any(isinstance(o, str) and "第 2 步" in o for o in outputs)  # the replayed step, now in Chinese


def test_batch_size_view_loads_the_cpu_result_and_refuses_a_bad_file(url, tmp_path):
    c = client(url)
    status, verdict, plot = c.predict("en", api_name="/batch_example")
    assert "Error" not in status and "preset tiny" in verdict and "ngram" in verdict
    names = [trace.get("name") for trace in json.loads(plot["plot"])["data"]]
    assert names[:3] == ["none", "draft", "ngram"] and "batch 16" in names
    bad = tmp_path / "bench.json"
    bad.write_text("{\"batch_sweep\": []}", encoding="utf-8")
    status, *_ = c.predict("en", gradio_client.handle_file(str(bad)), api_name="/batch_upload")
    assert "Error" in status and "no batch sweep" in status
