"""The classroom's predict mode through the handlers the page calls (the app built, no server): a
language switch redraws part 2 without the step the class is guessing, and, asked which token is refused
first or how many tokens the step writes, shows the question in the new language and nothing of its
answer; an answer that is not a choice is refused; the batch question follows the language, a drafted
token the target never reached is not scored, and each speedup says where it was measured."""
from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from app_server import TINY_MISSING, TINY_READY

from app.i18n import t
from app.palette import visible
from app.session import Session
from app.views.classroom import ClassroomState
from app.views.classroom.content import LIVE_PROMPT, lesson_text
from app.views.classroom.prediction import Predict, batch_question
from app.views.classroom.prediction_view import PredictView, question_texts
from core import DecodeRequest, build_decoder
from core.records.steps import NodeRecord

SWEEP = Path(__file__).resolve().parent.parent / "docs/benchmarks/tiny-cpu-vllm/bench.json"
VERDICTS = ("accepted", "rejected", "not_reached", "correction", "bonus")

pytestmark = pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING)


@pytest.fixture(scope="module")
def app():
    """The app's handlers as Gradio calls them, by api name (a private one's is its function's name)."""
    from app.ui import build_app

    demo = build_app("tiny")
    return {fn.api_name: fn for fn in demo.fns.values() if fn.api_name}


@pytest.fixture(scope="module")
def step_record():
    """One real step of the tiny pair, to hang hand-made drafted tokens on."""
    decoder, prompt_ids = build_decoder(DecodeRequest.of("我爱", drafter="draft", k=4, max_new_tokens=4))
    steps = decoder.steps(prompt_ids)
    record = next(steps)
    steps.close()  # the engine gives its KV blocks back
    return record


def call(handler, *args) -> dict:
    """The handler's last update (every handler here is guarded: a generator of dicts)."""
    *_, last = handler.fn(*args)
    return last


def language(app, lang: str, session: Session | None) -> dict:
    """Switch the page to ``lang``; the other views' language inputs keep their first values."""
    handler = app["language"]
    return call(handler, lang, session, *(c.value for c in handler.inputs[2:]))


def shown(update: dict, elem_id: str):
    """What ``update`` puts in the component ``elem_id`` (its value, or the whole update of a labelled one)."""
    found = [value for component, value in update.items() if getattr(component, "elem_id", None) == elem_id]
    assert found, f"#{elem_id} is not redrawn"
    value = found[0]
    return value.get("value", value) if isinstance(value, dict) and value.get("__type__") == "update" else value


def session_of(update: dict) -> Session:
    return next(value for value in update.values() if isinstance(value, Session))


def trace_names(figure) -> set[str]:
    return {trace.name for trace in figure.data}


def test_a_language_switch_keeps_the_guessed_steps_verdict_hidden(app):
    session = session_of(call(app["predict_next"], "zh", None, LIVE_PROMPT, "tiny", "draft"))
    try:
        switched = language(app, "en", session)
        verdicts = {t(f"kind.{kind}", "en") for kind in VERDICTS}
        assert not trace_names(shown(switched, "lesson-tree")) & verdicts  # part 2 shows nothing of the step
        assert shown(switched, "lesson-sentence") == ""
        guessed = trace_names(shown(switched, "predict-tree"))
        assert t("kind.proposed", "en") in guessed and not guessed & verdicts
    finally:
        session.close()


def test_the_batch_question_its_choices_and_answer_follow_the_language(app):
    english = language(app, "en", None)  # a fresh session, switched to English
    session = session_of(english)
    assert shown(english, "predict-batch-q").startswith("**One more guess:**")
    assert shown(english, "predict-batch-guess")["choices"] == [("yes", "yes"), ("no", "no")]
    assert shown(english, "predict-batch-a") == ""  # not before the class has guessed
    answered = call(app["on_guess"], "en", session, "no")
    assert "Measured by this project" in shown(answered, "predict-batch-a")
    chinese = language(app, "zh", session)
    assert shown(chinese, "predict-batch-q").startswith("**再猜一个**")
    assert shown(chinese, "predict-batch-guess")["choices"] == [("能", "yes"), ("不能", "no")]
    assert "本项目在" in shown(chinese, "predict-batch-a")
    session.close()


def test_a_token_the_target_never_reached_is_not_scored(step_record):
    """A chain of 4: kept, kept, refused, and a 4th the target never reached. Guessing "keep the first
    two" is right on the three judged tokens; the 4th is neither right nor wrong, and the page says so."""
    statuses = ["accepted", "accepted", "rejected", "not_reached"]
    chain = [NodeRecord(i, i, text, i - 1, i + 1, 0.5, math.nan if status == "not_reached" else 0.4, status, "draft")
             for i, (text, status) in enumerate(zip("春眠不觉", statuses))]
    record = replace(step_record, step=0, nodes=chain, accepted_length=2, inspect=None)
    state = Predict().next_step(0).reveal(record, [0, 1])
    assert (state.last.right, state.last.total) == (3, 3)
    assert Predict().next_step(0).reveal(record, [0, 1, 3]).last == state.last  # a guess on it changes nothing

    view = PredictView(*(object() for _ in range(7)))
    mine = Session()
    mine.of(ClassroomState).predict_run = SimpleNamespace(records=[record])
    mine.of(ClassroomState).predict = state
    score = view.render(mine, "en")[view.score]
    assert "This step: 3 of 3 right" in score
    assert t("predict.unjudged", "en", n=1) in score and "1 token drafted" in score


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_batch_answer_and_the_lesson_say_where_each_speedup_was_measured(lang):
    sweep = json.loads(SWEEP.read_text(encoding="utf-8"))
    _, answer = question_texts(sweep, lang)
    measured = {"zh": "本项目在 CPU 上实测", "en": "Measured by this project on a CPU"}[lang]
    assert measured in answer and f"{batch_question(sweep).speedup:.2f}" in answer
    assert t("predict.article", lang) in answer and "1.38" in answer and "GPU" in t("predict.article", lang)
    _, on_gpu = question_texts({**sweep, "device": "cuda"}, lang)
    assert measured.replace("CPU", "GPU") in on_gpu
    quoted = next(line for line in lesson_text(lang).splitlines() if "1.38" in line)
    assert "GPU" in quoted and "CPU" in quoted


def test_next_step_after_a_finished_prediction_run_asks_before_it_drops_it(app):
    """"Next step: guess first" after the run finished started a new run at once, dropping the old one's
    steps: the first press says so, only the second starts anew."""
    session = session_of(call(app["predict_next"], "en", None, LIVE_PROMPT, "tiny", "draft"))
    try:
        mine = session.of(ClassroomState)
        finished = mine.predict_run
        while finished.step() is not None:  # run it to its end
            pass
        told = call(app["predict_next"], "en", session, LIVE_PROMPT, "tiny", "draft")
        assert mine.predict_run is finished and shown(told, "predict-score") == t("predict.finished", "en")
        call(app["predict_next"], "en", session, LIVE_PROMPT, "tiny", "draft")
        assert mine.predict_run is not finished and len(mine.predict_run.records) == 1
    finally:
        session.close()


def update_of(update: dict, elem_id: str) -> dict:
    """The whole update ``update`` sends the component ``elem_id`` (its choices, value, visibility)."""
    return next(value for component, value in update.items() if getattr(component, "elem_id", None) == elem_id)


# what only a revealed step's panel says (predict.right, .wrong, .kept_all, .stopped, .count_is, .kind_score, .kept)
VERDICT_WORDS = {"zh": ["猜对了", "没猜对", "一个也没拒绝", "第一个不同意的是", "这一步写出 **", "这一类题累计",
                        "目标保留了"],
                 "en": ["Right.", "Not this time", "refused nothing", "first token it disagreed", "This step wrote",
                        "This question so far", "The target kept"]}


@pytest.mark.parametrize("kind", ["reject", "count"])
def test_a_language_switch_while_the_answer_is_hidden_shows_none_of_it(app, kind):
    """Asked "which is refused first" or "how many tokens", the class sees the drafted tokens and the
    question's choices, empty, in the new language after a switch; no verdict, no answer, no verified tree.
    Revealed, the verdict comes in the language of the page."""
    first = call(app["predict_next"], "zh", None, LIVE_PROMPT, "tiny", "draft", kind)
    session = session_of(first)
    try:
        record = session.of(ClassroomState).predict_run.records[-1]
        assert record.nodes  # tiny drafts on its first step
        for lang, update in (("zh", first), ("en", switched := language(app, "en", session))):
            field, other = update_of(update, f"predict-{kind}"), update_of(update, "predict-choices")
            assert field["visible"] and field["interactive"] and field["value"] is None and not other["visible"]
            options = [label for label, _ in field["choices"]]
            if kind == "reject":
                assert options == [f"{n.id + 1}: {visible(n.text)}" for n in record.nodes] + [t("predict.none", lang)]
            else:
                assert options == [str(n) for n in range(1, len(record.nodes) + 2)]
            assert shown(update, "predict-score") == t(f"predict.{kind}_ask", lang)
            tree = shown(update, "predict-tree")
            assert t(f"predict.{kind}_title", lang, step=1) in tree.layout.title.text
            assert not trace_names(tree) & {t(f"kind.{v}", lang) for v in VERDICTS}
            words = " ".join(str(v) for v in update.values() if isinstance(v, (str, dict)))
            assert not [w for w in VERDICT_WORDS[lang] if w in words], lang
        assert update_of(switched, "predict-kind")["choices"][1] == (t("predict.kind_reject", "en"), "reject")
        answer = "none" if kind == "reject" else str(len(record.emitted))
        told = call(app["predict_reveal"], "en", session, [], kind, answer if kind == "reject" else None,
                    answer if kind == "count" else None)
        assert shown(told, "predict-score").startswith(("**Right.**", "**Not this time:** you chose"))
        assert t(f"kind.{record.nodes[0].status}", "en") in trace_names(shown(told, "predict-tree"))
    finally:
        session.close()


def test_an_answer_that_is_not_a_choice_is_refused_in_the_pages_language(app):
    session = session_of(call(app["predict_next"], "en", None, LIVE_PROMPT, "tiny", "draft", "reject"))
    try:
        told = call(app["predict_reveal"], "en", session, [], "reject", "99", None)
        assert "\"99\" is not one of this question's choices (none, 0, 1" in shown(told, "predict-score")
        assert session.of(ClassroomState).predict.phase == "guess"  # still asked
        told = call(app["predict_next"], "zh", session, LIVE_PROMPT, "tiny", "draft", "which")
        assert "which" in shown(told, "predict-score") and session.of(ClassroomState).predict.phase == "guess"
    finally:
        session.close()
