"""The trace reader (``core.read_trace``, schema in ``core.records.trace``): every trace the engine
writes reads back as it was written; anything a real run could not have written is a UserError
naming the line and the field, quickly, however large or deep the file; the Replay view escapes
every text that comes from the file."""
from __future__ import annotations

import copy
import dataclasses
import time

import pytest
from trace_cases import (EXAMPLE_TRACE, GEMMA_TRACE, RENDER_BUDGET_S, RESPONSE_BUDGET_BYTES, read_lines, render_replay,
                         write_blow_up_traces, write_lines, write_real_traces)

from core import UserError, read_trace
from core.records import detail
from core.records import steps as records
from core.records import trace as trace_schema



@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    return write_real_traces(tmp_path_factory.mktemp("traces"))


def test_every_trace_the_engine_writes_reads_back(traces):
    for name, path in [*traces.items(), ("example", EXAMPLE_TRACE), ("gemma example", GEMMA_TRACE)]:
        lines = read_lines(path)
        trace = read_trace(path)
        assert [s.to_dict() for s in trace.steps] == [
            line | {"expansion": line.get("expansion"), "decision": line.get("decision"), "inspect": line.get("inspect"),
                    "wait_s": line.get("wait_s"), "disturbed": line.get("disturbed", ""),
                    "draft_forward_s": line.get("draft_forward_s"), "anatomy": line.get("anatomy")}  # older traces have none
            for line in lines[1:-1]], name
        assert trace.summary["tokens"] == lines[-1]["tokens"] and trace.header["prompt"] == lines[0]["prompt"]
    assert read_trace(traces["eagle3"]).steps[0].expansion.kept_as
    stopped = read_trace(traces["stopped"])
    assert stopped.summary["stop_reason"] == "cancelled" and len(stopped.steps) == 2


def test_the_schema_has_every_field_of_the_records():
    pairs = [(trace_schema.TraceStep, records.StepRecord), (trace_schema.TraceNode, records.NodeRecord),
             (trace_schema.TraceToken, records.TokenRecord), (trace_schema.TraceKV, records.KVStepRecord),
             (trace_schema.TraceInspect, detail.InspectRecord), (trace_schema.TracePosition, detail.PositionRecord),
             (trace_schema.TraceRejection, detail.RejectionRecord), (trace_schema.TraceAnatomy, records.AnatomyRecord),
             (trace_schema.TraceHead, records.HeadRecord)]
    for model, record in pairs:
        assert set(model.model_fields) == {f.name for f in dataclasses.fields(record)}, model.__name__


def _mutated(tmp_path, source, change, line=1):
    """``source`` with ``change(record)`` applied to its line ``line`` (0 = header, -1 = summary)."""
    lines = read_lines(source)
    lines[line] = copy.deepcopy(lines[line])
    change(lines[line])
    return write_lines(tmp_path / "bad.jsonl", lines)


def _set(path: str, value):
    """A change that sets a dotted path (list indices as numbers) to ``value``."""
    def change(record):
        *parents, last = path.split(".")
        for part in parents:
            record = record[int(part)] if isinstance(record, list) else record[part]
        record[int(last) if isinstance(record, list) else last] = value
    return change


# The inconsistent traces of the hardening pass, and their neighbours: each must name line and field.
@pytest.mark.parametrize("line,change,message", [
    (1, _set("accepted_length", 9), "accepted_length must count the accepted nodes"),
    (1, _set("nodes.1.parent", 7), "nodes[1]: ids must be 0, 1, ... and a parent must come before"),
    (1, _set("nodes.1.parent", 1000), "field nodes.1.parent: Input should be less than 127"),
    (1, _set("target_forwards_total", 0), "field target_forwards_total: Input should be greater than or equal to 1"),
    (1, _set("new_tokens_total", 0), "field new_tokens_total"),
    (2, _set("new_tokens_total", 40), "field step: expected step 1 with running totals"),
    (1, _set("nodes.0.status", "maybe"), "field nodes.0.status: Input should be 'accepted', 'rejected'"),
    (1, _set("kv.slot_grid", {"x": "L"}), "field kv.slot_grid.x.[key]: String should match pattern"),
    (1, _set("kv.slot_grid", {"7": "LLLL"}), "slot_grid keys must be the block_table's"),
    (1, _set("kv.block_table", [0, 999]), "block_table must list blocks_after distinct blocks"),
    (1, _set("kv.slot_grid.0", "LLLLLLLLLLLLLLLX"), "slot_grid[0] must be 16 characters from 'LWF.'"),
    (1, _set("nodes.0.depth", 1_000_000), "field nodes.0.depth: Input should be less than or equal to 16"),
    (1, _set("nodes.0.draft_prob", float("nan")), "field nodes.0.draft_prob: Input should be a finite number"),
    (1, _set("nodes.0.target_prob", 1.5), "field nodes.0.target_prob"),
    (1, _set("nodes.0.text", "x" * 5000), "field nodes.0.text: String should have at most 1024 characters"),
    (1, _set("emitted", []), "field emitted: List should have at least 1 item"),
    (1, _set("next.kind", "root"), "root.kind must be 'root' and next.kind correction, bonus or target"),
    (1, _set("finished", True), "field finished: only the last step can finish the run"),
    (1, _set("draft_s", float("inf")), "field draft_s"),
    (1, _set("kv.pool_in_use", 10**6), "field kv.pool_in_use"),
    (0, _set("settings.block_size", 4096), "trace line 1, field settings.block_size"),
    (0, _set("settings.seed", 2**70), "field settings.seed"),
    (0, _set("prompt_tokens", []), "field prompt_tokens"),
    (0, _set("prompt", 123), "field prompt: Input should be a valid string"),
    (-1, _set("new_tokens", 3), "new_tokens is 3 but tokens has 48"),
    (-1, _set("kv.blocks_total", 5000), "field kv: a pool of 5000 blocks"),
    (-1, _set("stop_reason", ["list"]), "field stop_reason"),
])
def test_an_inconsistent_trace_names_the_line_and_the_field(tmp_path, line, change, message):
    bad = _mutated(tmp_path, EXAMPLE_TRACE, change, line)
    number = {0: 1, -1: len(read_lines(EXAMPLE_TRACE))}.get(line, line + 1)
    with pytest.raises(UserError, match=f"trace line {number}") as error:
        read_trace(bad)
    assert message in str(error.value)


def test_an_expansion_must_be_parallel_lists(tmp_path, traces):
    bad = _mutated(tmp_path, traces["eagle3"], lambda r: r["expansion"]["texts"].pop())
    with pytest.raises(UserError, match="trace line 2, field expansion: the expansion's lists must all"):
        read_trace(bad)


@pytest.mark.parametrize("text,message", [
    ("[" * 100_000 + "]" * 100_000, "trace line 2 is nested too deeply"),
    ('{"schema": 1, "type": "step", "step": ' + "9" * 5000 + "}", "trace line 2 is not JSON"),
    ("{not json", "trace line 2 is not JSON"),
    ('{"schema": 2, "type": "step"}', 'trace line 2: expected an object with "schema": 1'),
    ('{"schema": 1, "type": "header"}', "trace line 2: expected a step record"),
])
def test_a_line_that_is_no_record_is_refused(tmp_path, text, message):
    lines = EXAMPLE_TRACE.read_text(encoding="utf-8").splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], text, *lines[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(UserError, match="trace line 2") as error:
        read_trace(bad)
    assert message in str(error.value)


def test_the_size_limit_is_the_documented_20_mb(tmp_path):
    big = tmp_path / "big.jsonl"
    big.write_bytes(b" " * (trace_schema.MAX_TRACE_BYTES + 1))
    with pytest.raises(UserError, match=r"trace file is 20\.0 MB \(20,971,521 bytes\); the limit is 20 MB "
                                        r"\(20,971,520 bytes\)"):
        read_trace(big)


def test_the_blow_up_traces_are_refused_quickly(tmp_path):
    """A 3 KB trace with a node 1,000,000 levels deep, and an 8 MB one with a 2000 x 4096 slot grid."""
    for path, message in zip(write_blow_up_traces(tmp_path), ("field nodes.3.depth", "field kv.slot_grid")):
        name = path.stem
        start = time.perf_counter()
        with pytest.raises(UserError, match=message):
            read_trace(path)
        assert time.perf_counter() - start < RENDER_BUDGET_S, name
    assert (tmp_path / "deep.jsonl").stat().st_size < 4_000 and (tmp_path / "wide.jsonl").stat().st_size > 8e6


def test_replay_escapes_every_text_from_the_file(tmp_path):
    image = '<img src="http://example.invalid/x.png">'
    changes = [(0, _set("prompt", image + "![x](http://example.invalid/y.png)")), (0, _set("preset", image)),
               (0, _set("drafter", image[:60])), (-1, _set("stop_reason", image[:60])),
               (1, _set("next.text", image)), (1, _set("nodes.0.proposer", "<b>x</b>"))]
    lines = read_lines(EXAMPLE_TRACE)
    for line, change in changes:
        change(lines[line])
    trace = read_trace(write_lines(tmp_path / "html.jsonl", lines))
    shown = render_replay(trace).markdown
    assert "<img" not in shown and "<b>" not in shown and "&lt;img" in shown
    assert "\\!\\[x\\]\\(http://example\\.invalid/y\\.png\\)" in shown


def test_a_real_trace_renders_within_budget(traces):
    for name, path in traces.items():
        rendered = render_replay(read_trace(path))
        assert rendered.seconds < RENDER_BUDGET_S and rendered.size < RESPONSE_BUDGET_BYTES, name
