"""Predict mode's step questions checked on real steps of the tiny pair (the classroom's own request: its
prompt, k = 4, 16 tokens, greedy; ``draft`` drafts a chain, ``hybrid`` a tree): "which node does the target
refuse first" is answered where the engine stopped (its inspected rejection: the node whose children it
refused, and those children), "how many tokens" by the tokens the step wrote; each question keeps its own
score, and a step that drafted nothing, or a question left unanswered, is not scored."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
from app_server import TINY_MISSING, TINY_READY

from app.i18n import t
from app.palette import visible
from app.session import Session
from app.views.classroom import ClassroomState
from app.views.classroom.content import LIVE_PROMPT
from app.views.classroom.exercises import NONE, check_count, check_reject, count_choices, stop_of
from app.views.classroom.prediction import Predict
from app.views.classroom.prediction_view import PredictView, verdict_lines
from app.views.classroom.view import LIVE_K, LIVE_MAX_NEW_TOKENS
from core import DecodeRequest, build_decoder

pytestmark = pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING)


@pytest.fixture(scope="module")
def runs() -> dict:
    """Every step of the classroom's request on tiny, inspected as the page's runs are, per drafter."""
    out = {}
    for drafter in ("draft", "hybrid"):
        request = DecodeRequest.of(LIVE_PROMPT, "tiny", drafter, LIVE_K, max_new_tokens=LIVE_MAX_NEW_TOKENS)
        decoder, prompt_ids = build_decoder(request, inspect=True)
        out[drafter] = list(decoder.steps(prompt_ids))
    return out


def drafted(runs) -> list:
    return [r for records in runs.values() for r in records if r.nodes]


def test_the_first_refusal_is_where_the_engine_stopped(runs):
    """On every drafted step the answer is the engine's own: the node whose children the rule refused
    (its inspected rejection) and those children in the order it tried them, or none when the step ended
    in a bonus token; the first refused node is right, a node never reached and "none" are wrong."""
    cases = set()
    for record in drafted(runs):
        stop, rejection = stop_of(record), record.inspect.rejection
        kept_path = [n.id for n in record.nodes if n.status == "accepted"]
        assert list(stop.kept) == kept_path and len(stop.kept) == record.accepted_length
        if rejection is None:
            assert record.next.kind == "bonus" and stop.refused == () and stop.first == NONE
            assert check_reject(record, NONE).right and not check_reject(record, 0).right
            cases.add("kept all" + (" beside a refused sibling" if any(n.status == "rejected" for n in record.nodes)
                                    else ""))
            continue
        assert record.next.kind == "correction"
        assert (stop.kept[-1] if stop.kept else -1) == rejection.parent
        assert stop.refused == tuple(rejection.tried) and stop.first == rejection.tried[0]
        for refused in stop.refused:  # at temperature 0 the target refuses every child there at once
            verdict = check_reject(record, refused)
            assert verdict.scored and verdict.right and verdict.answer == rejection.tried[0]
        assert not check_reject(record, NONE).right
        for n in record.nodes:
            if n.status in ("not_reached", "accepted"):
                assert not check_reject(record, n.id).right, (record.step, n)
        cases.add("refused at the root" if rejection.parent == -1 else "refused after kept tokens")
        if len(stop.refused) > 1:
            cases.add("every branch refused")
    assert cases == {"kept all", "kept all beside a refused sibling", "refused at the root",
                     "refused after kept tokens", "every branch refused"}


def test_the_count_is_the_tokens_the_step_wrote(runs):
    """Kept drafted tokens plus the target's own: right only on that number, among choices that hold it."""
    for record in drafted(runs):
        written = len(record.emitted)
        if not record.finished:
            assert written == record.accepted_length + 1
        assert written in count_choices(record) and count_choices(record)[0] == 1
        assert check_count(record, written).right and check_count(record, written).scored
        assert not any(check_count(record, n).right for n in count_choices(record) if n != written)


def test_a_step_that_drafted_nothing_or_an_unanswered_question_is_not_scored(runs):
    empty = next(r for r in runs["draft"] if not r.nodes)  # the budget's last token: nothing drafted
    for check in (check_reject(empty, NONE), check_count(empty, 1)):
        assert not check.scored and check.unscored == "nothing"
    record = drafted(runs)[0]
    for check in (check_reject(record, None), check_count(record, None)):
        assert not check.scored and check.unscored == "blank"
    state = Predict(kind="count").next_step(empty.step).answer(empty, 1)
    assert state.phase == "revealed" and state.count.total == 0
    assert verdict_lines(empty, state.check, "en", LIVE_MAX_NEW_TOKENS) == [t("predict.unscored_nothing", "en")]


def test_each_question_keeps_its_own_score(runs):
    records = runs["draft"]
    refused, kept_all = (next(r for r in records if r.nodes and r.next.kind == kind)
                         for kind in ("correction", "bonus"))
    state = Predict().ask("reject").next_step(refused.step).answer(refused, stop_of(refused).first)  # right
    state = state.next_step(kept_all.step).answer(kept_all, 0)  # wrong: the target kept the whole chain
    state = state.next_step(refused.step, "count").answer(refused, len(refused.emitted) + 1)  # wrong
    state = state.next_step(kept_all.step, "keep").reveal(kept_all, [n.id for n in kept_all.nodes])  # all right
    assert (state.reject.right, state.reject.total) == (1, 2)
    assert (state.count.right, state.count.total) == (0, 1)
    assert (state.score.right, state.score.total) == (len(kept_all.nodes),) * 2
    assert state.next_step(refused.step).answer(refused, 1) == state.next_step(refused.step)  # keep: no answer()
    with pytest.raises(ValueError):
        Predict().ask("guess")


def revealed(record, kind: str, guess, lang: str) -> str:
    """The score panel after ``guess`` to ``kind`` on ``record``, as the page draws it."""
    view, session = PredictView(*(object() for _ in range(7))), Session()
    mine = session.of(ClassroomState)
    mine.predict_run = SimpleNamespace(records=[replace(record, step=0)],
                                       request=SimpleNamespace(max_new_tokens=LIVE_MAX_NEW_TOKENS))
    mine.predict = Predict(kind=kind).next_step(0).answer(mine.predict_run.records[0], guess)
    return view.render(session, lang)[view.score]


def test_the_verdict_names_the_engines_answer_in_both_languages(runs):
    records = runs["hybrid"]
    branches = next(r for r in records if len(stop_of(r).refused) > 1)  # two chains refused at one node
    stop = stop_of(branches)
    first, other = (f"{i + 1}: {visible(branches.nodes[i].text)}" for i in stop.refused[:2])
    text = revealed(branches, "reject", stop.refused[1], "en")
    assert text.startswith("**Right.**") and f"disagreed with was **{first}**" in text
    assert f"other branches at that position too: {other}" in text and "This question so far: **1 of 1** right" in text
    assert "first refusal 1/1" in text and "tokens written –" in text
    zh = revealed(branches, "reject", NONE, "zh")
    assert zh.startswith("**没猜对**：你选的是 一个也不拒绝") and f"第一个不同意的是 **{first}**" in zh
    sibling = next(r for r in records if r.next.kind == "bonus" and any(n.status == "rejected" for n in r.nodes))
    beside = next(n for n in sibling.nodes if n.status == "rejected")
    text = revealed(sibling, "reject", beside.id, "en")
    assert text.startswith(f"**Not this time:** you chose {beside.id + 1}: {visible(beside.text)}")
    assert "refused nothing on its path" in text and "took the branch beside it" in text
    chain = next(r for r in runs["draft"] if r.nodes and r.accepted_length and r.next.kind == "correction")
    unreached = next(n for n in chain.nodes if n.status == "not_reached")
    assert "the target never checked it" in revealed(chain, "reject", unreached.id, "en")

    written = len(chain.emitted)
    text = revealed(chain, "count", written, "en")
    assert text.startswith("**Right.**") and f"This step wrote **{written}** tokens: the {chain.accepted_length} " \
                                              f"drafted tokens the target kept, plus its own {chain.next.text} " \
                                              "(correction)" in text
    assert revealed(chain, "count", written + 1, "zh").startswith(f"**没猜对**：你选的是 {written + 1}。")


def test_a_step_cut_by_the_budget_says_so(runs):
    """The run's last token of budget falls inside a step: it writes fewer than its kept tokens + 1."""
    full = next(r for r in runs["draft"] if r.next.kind == "bonus")
    cut = replace(full, emitted=full.emitted[:2], finished=True, new_tokens_total=LIVE_MAX_NEW_TOKENS)
    assert check_count(cut, 2).right and not check_count(cut, len(full.emitted)).right
    text = revealed(cut, "count", 2, "en")
    assert "This step wrote **2** tokens" in text and "the token budget was used up" in text
    assert f"short of the step's {full.accepted_length + 1}" in text
