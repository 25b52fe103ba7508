"""Predict mode's step questions in headless Chromium against ``python app.py --preset tiny``: asked which
drafted token the target refuses first, or how many tokens the step writes, the class answers once right
and once wrong, and the page's verdict names the engine's answer (the same greedy request run here, in
this process, gives the steps); each question's score counts its own answers; a language switch while
the answer is hidden shows the question in the new language and nothing of the verdict."""
from __future__ import annotations

import re

import pytest
from app_driver import browser_page, missing_browser, open_app, open_tab, plot, predict_next, set_language
from app_server import ROOT, TINY_MISSING, TINY_READY, running_app

from app.i18n import t
from app.palette import visible
from app.views.classroom.content import LIVE_PROMPT
from app.views.classroom.exercises import NONE, stop_of
from app.views.classroom.view import live_request
from core import build_decoder

ARTIFACTS = ROOT / "test-artifacts"
VERDICT_NAMES = {"接受的草稿", "被拒绝", "未检查", "accepted draft", "rejected", "not reached"}

pytestmark = [pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING),
              pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser()))]


@pytest.fixture(scope="module")
def steps():
    """The page's predict run, step by step: its request (the classroom's prompt, tiny, draft) decoded here."""
    decoder, prompt_ids = build_decoder(live_request("zh", ["tiny"], LIVE_PROMPT, "tiny", "draft"), inspect=True)
    return list(decoder.steps(prompt_ids))


@pytest.fixture(scope="module")
def page():
    ARTIFACTS.mkdir(exist_ok=True)
    with running_app("tiny", timeout_s=300, log_path=ARTIFACTS / "exercise-browser.log") as url, \
            browser_page() as browser_page_:
        open_app(browser_page_, url)
        open_tab(browser_page_, "classroom")
        yield browser_page_


def ask(page, kind: str, lang: str = "zh") -> None:
    page.locator("#predict-kind label", has_text=t(f"predict.kind_{kind}", lang)).click()
    page.wait_for_function("kind => document.querySelector(`#predict-kind input[value='${kind}']`).checked", arg=kind)
    page.wait_for_timeout(300)


def score(page) -> str:
    return page.inner_text("#predict-score")


def advance(page, steps) -> int:
    """The next drafted step the page asks about: its index in ``steps`` (which drafted it too)."""
    index = predict_next(page) - 1
    assert steps[index].nodes
    return index


def choose(page, kind: str, position: int) -> None:
    """Tick the ``position``-th choice of the question ``kind`` (reject: node ids, then none; count: 1, 2, …)."""
    page.locator(f"#predict-{kind} label").nth(position).click()
    page.wait_for_function("([id, n]) => document.querySelectorAll('#' + id + ' input')[n].checked",
                           arg=[f"predict-{kind}", position])


def reveal(page) -> str:
    page.click("#predict-reveal")
    page.wait_for_function("() => /猜对了|没猜对|不计分|Right\\.|Not this time|Not scored/.test("
                           "document.querySelector('#predict-score').innerText)")
    return score(page)


def plain(text: str) -> str:
    """What a Markdown text reads as on the page."""
    return text.replace("**", "")


def test_which_token_is_refused_first_right_then_wrong(page, steps):
    ask(page, "reject")
    answered = []
    for right in (True, False):
        index = advance(page, steps)
        record, stop = steps[index], stop_of(steps[index])
        assert page.locator("#predict-reject input").count() == len(record.nodes) + 1  # each node, then none
        assert not {t["name"] for t in plot(page, "predict-tree")["data"]} & VERDICT_NAMES  # the verdict is hidden
        answer = stop.first if right else (NONE if stop.refused else 0)  # a kept whole chain: node 0 was kept
        choose(page, "reject", len(record.nodes) if answer == NONE else answer)
        text = reveal(page)
        assert text.startswith("猜对了" if right else "没猜对")
        nxt = visible(record.next.text)
        if not stop.refused:
            assert "它走的路径上一个也没拒绝" in text and f"奖励 token {nxt}" in text
        else:
            first = f"{stop.first + 1}: {visible(record.nodes[stop.first].text)}"
            key = "predict.stopped" if stop.kept else "predict.stopped_at_root"
            kept = " ".join(visible(record.nodes[i].text) for i in stop.kept)
            assert plain(t(key, "zh", kept=kept, first=first, next=nxt)) in text
        answered.append(right)
        assert f"这一类题累计猜对 {sum(answered)}/{len(answered)}" in text
    assert "第一个拒绝 1/2" in text
    page.locator("#lesson-predict").screenshot(path=ARTIFACTS / "exercise-reject.png")


def test_how_many_tokens_right_then_wrong(page, steps):
    ask(page, "count")
    for right, so_far in ((True, "1/1"), (False, "1/2")):
        index = advance(page, steps)
        record = steps[index]
        depth = max(node.depth for node in record.nodes)
        assert page.locator("#predict-count input").count() == depth + 1  # 1 to depth + 1
        written = len(record.emitted)
        guess = written if right else (written % (depth + 1)) + 1  # another of the choices
        choose(page, "count", guess - 1)
        text = reveal(page)
        assert text.startswith("猜对了" if right else f"没猜对：你选的是 {guess}。")
        assert f"这一步写出 {written} 个 token" in text
        assert f"这一类题累计猜对 {so_far}" in text
    assert "写出几个 1/2" in text and "第一个拒绝 1/2" in text  # the other question's score stays as it was


def test_a_language_switch_while_the_answer_is_hidden_does_not_show_it(page, steps):
    ask(page, "reject")
    index = advance(page, steps)
    record = steps[index]
    set_language(page, "English")
    page.wait_for_function("() => document.querySelector('#predict-score').innerText.startsWith('Choose')")
    page.wait_for_timeout(500)
    assert score(page) == t("predict.reject_ask", "en")
    drawn = plot(page, "predict-tree")
    assert drawn["title"].startswith(f"Step {index + 1}: the draft guessed these. Which does the target refuse first?")
    assert not {t["name"] for t in drawn["data"]} & VERDICT_NAMES
    assert page.locator("#predict-reject input:checked").count() == 0
    assert page.locator("#predict-reject label").last.inner_text().strip() == t("predict.none", "en")
    shown = page.inner_text("#lesson-predict")
    assert not re.search(r"Right\.|Not this time|disagreed|refused nothing|猜对|没猜对", shown)
    stop = stop_of(record)
    choose(page, "reject", len(record.nodes) if stop.first == NONE else stop.first)
    assert reveal(page).startswith("Right.")  # revealed, in the page's language now
    set_language(page, "中文")
    page.wait_for_function("() => document.querySelector('#predict-score').innerText.startsWith('猜对了')")
