"""Property-based tests (hypothesis) for two boundaries: the trace reader and the app's endpoints.

- Trace reader: real traces of tiny runs, mutated (a value anywhere set to any JSON value, a key
  removed, lines dropped, repeated or swapped, the text cut or a character changed) and random
  bytes, read by ``core.read_trace``: a valid Trace or a UserError, never another exception; a
  trace that reads renders in the Replay view within the time and size budget.
- Endpoints: the handlers of /step, /compare, /worth_it, /replay_goto and /language, called as
  Gradio calls them with arbitrary values: a page or a message (never "internal error"), and a
  run started by a valid value is stopped with all its KV blocks returned.

A few hundred examples per property by default (hypothesis profile ``ci``); ``SDLAB_SLOW=1``
runs thousands (``slow``, tests/conftest.py).
"""
from __future__ import annotations

import json

import pytest
from trace_cases import RENDER_BUDGET_S, RESPONSE_BUDGET_BYTES, read_lines, render_replay, write_real_traces

from core import UserError, read_trace

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning")]  # gr.Warning outside a request: the message
FIXTURES_OK = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])

SPECIAL = st.sampled_from([0, -1, 1, 16, 17, 128, 4096, 10**6, 2**63, -(2**63), 1e308, float("nan"), float("inf"),
                           "", "L" * 16, "L" * 4096, '<img src="http://example.invalid/x.png">', "accepted",
                           "correction", "0", [], {}, None, True])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=40) | SPECIAL,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=24,
)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    return {name: read_lines(path) for name, path in write_real_traces(tmp_path_factory.mktemp("real")).items()}


def _descend(data, value, node):
    """Walk from ``node`` into a drawn child until the draw says stop; return (container, key)."""
    while True:
        keys = list(node.keys()) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            return None, None
        key = data.draw(st.sampled_from(keys))
        child = node[key]
        if not isinstance(child, (dict, list)) or not child or data.draw(st.booleans()):
            return node, key
        node = child


def _mutate(data, lines: list) -> str:
    """One random change to a trace's records; returns the file's text."""
    kind = data.draw(st.sampled_from(["set", "set", "set", "delete", "lines", "text"]))
    if kind in ("set", "delete"):
        line = data.draw(st.integers(0, len(lines) - 1))
        container, key = _descend(data, None, lines[line])
        if container is not None and kind == "set":
            container[key] = data.draw(JSON)
        elif container is not None and isinstance(container, dict):
            del container[key]
    elif kind == "lines":
        i, j = data.draw(st.integers(0, len(lines) - 1)), data.draw(st.integers(0, len(lines) - 1))
        change = data.draw(st.sampled_from(["drop", "repeat", "swap"]))
        if change == "drop":
            del lines[i]
        elif change == "repeat":
            lines.insert(i, json.loads(json.dumps(lines[j])))
        else:
            lines[i], lines[j] = lines[j], lines[i]
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines)
    if kind == "text" and text:
        at = data.draw(st.integers(0, len(text) - 1))
        text = text[:at] + data.draw(st.sampled_from(["", "}", "{", "[", '"', "9" * 5000, "\x00", "\ud800"])) + (
            text[at + 1:] if data.draw(st.booleans()) else "")
    return text


def _read_and_render(path):
    try:
        trace = read_trace(path)
    except UserError as e:
        assert str(e).startswith(("trace", "a trace")), str(e)
        hypothesis.event("refused")
        return
    hypothesis.event("read")
    if trace.steps:
        rendered = render_replay(trace)
        assert rendered.seconds < RENDER_BUDGET_S and rendered.size < RESPONSE_BUDGET_BYTES


@FIXTURES_OK
@given(data=st.data())
def test_a_mutated_trace_reads_or_is_refused_with_a_message(traces, tmp_path, data):
    name = data.draw(st.sampled_from(sorted(traces)))
    text = _mutate(data, json.loads(json.dumps(traces[name])))
    path = tmp_path / "mutated.jsonl"
    path.write_bytes(text.encode("utf-8", errors="surrogatepass"))
    _read_and_render(path)


@FIXTURES_OK
@given(raw=st.binary(max_size=2000) | st.text(max_size=2000).map(lambda s: s.encode("utf-8", "surrogatepass")))
def test_random_bytes_are_refused_with_a_message(tmp_path, raw):
    path = tmp_path / "random.jsonl"
    path.write_bytes(raw)
    with pytest.raises(UserError):
        read_trace(path)


# ---- the endpoints ---------------------------------------------------------------------------------
ANY = JSON | st.sampled_from(["tiny", "draft", "ngram", "eagle3", "none", "4", "2x3", "nan", "-1", "1e9"])
STEP = ["我爱", "tiny", "draft", 3, 1, 0.0, 0, 4, 8, "", ""]  # prompt ... max_new_tokens, eagle N, target, draft
COMPARE = ["It is", "tiny", ["ngram"], "2", 0.0, 0, 4, "", ""]  # prompt, preset, drafters, shapes, ...


def near(valid: list):
    """A valid argument list with up to three values replaced by anything (so some runs decode)."""
    changes = st.lists(st.tuples(st.integers(0, len(valid) - 1), ANY), max_size=3)
    return changes.map(lambda pairs: [dict(pairs).get(i, v) for i, v in enumerate(valid)])


@pytest.fixture(scope="module")
def handlers():
    """The endpoints' functions as Gradio calls them (after the app is built), by api name."""
    from app.ui import build_app

    demo = build_app("tiny")
    return {fn.api_name: fn for fn in demo.fns.values() if fn.api_name}


def _call(handlers, api_name: str, values: list) -> list[dict]:
    """Every update the handler yields; assert none is an internal error; stop any run it began."""
    from app.session import Session
    from app.views.classroom import ClassroomState
    from app.views.stepper import StepperState

    updates = list(handlers[api_name].fn(*values))
    shown = " ".join(str(v) for u in updates for v in u.values() if isinstance(v, str))
    assert "internal error" not in shown and "内部错误" not in shown, shown[:500]
    hypothesis.event("refused" if "sdl-error" in shown else "answered")
    sessions = [v for u in updates for v in u.values() if isinstance(v, Session)]
    for session in sessions[-1:]:
        session.close()
        for run in (session.of(StepperState).run, session.of(ClassroomState).run):
            assert run is None or run.result.kv["blocks_in_use_after"] == 0
    return updates


@FIXTURES_OK
@given(values=near(STEP) | st.lists(ANY, min_size=11, max_size=11), lang=st.sampled_from(["en", "zh"]) | ANY)
def test_step_answers_any_value_with_a_page_or_a_message(handlers, values, lang):
    _call(handlers, "step", [lang, None, *values])


@FIXTURES_OK
@given(values=near(COMPARE))
def test_compare_answers_any_value_with_a_page_or_a_message(handlers, values):
    _call(handlers, "compare", ["en", None, *values])


@settings(FIXTURES_OK, max_examples=min(100, settings().max_examples))  # three handlers an example: half ci's
@given(values=st.lists(ANY, min_size=3, max_size=3), lang=st.sampled_from(["en", "zh"]) | ANY)
def test_worth_it_language_and_replay_answer_any_value(handlers, values, lang):
    _call(handlers, "worth_it", [lang, None, *values])
    _call(handlers, "language", [lang, None, *values])
    _call(handlers, "replay_goto", [lang, None, values[0]])
