"""The lesson's panels in headless Chromium against ``python app.py --preset tiny``: the lossless panel
draws the StepRecord's own laws (its residual sums to 1), the timeline's bars are the recorded
times, the break-even curve carries the run's point, tooltips hold log-probs, alternatives and
entropy, and no two tree labels overlap on the page. Screenshots go to test-artifacts/."""
from __future__ import annotations

import itertools
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from app_driver import browser_page, missing_browser, open_app, open_tab, plot, step, wait_for_plot
from app_server import TINY_MISSING, TINY_READY, running_app

from core import read_trace

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"

pytestmark = [pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING),
              pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser()))]


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The app with a cache of its own, in which tiny's verify-cost curve is measured first (as
    ``python -m core cost`` does), so the timeline and the break-even curve have v(n)."""
    ARTIFACTS.mkdir(exist_ok=True)
    env = {"XDG_CACHE_HOME": str(tmp_path_factory.mktemp("cache"))}
    subprocess.run([sys.executable, "-m", "core", "cost", "--preset", "tiny"], cwd=ROOT, env={**os.environ, **env},
                   check=True, capture_output=True, timeout=600)
    with running_app("tiny", timeout_s=300, log_path=ARTIFACTS / "lesson-browser.log", env=env) as url, \
            browser_page() as browser_page_:
        open_app(browser_page_, url)
        yield browser_page_


def choose(page, elem_id: str, value: str) -> None:
    box = page.locator(f"#{elem_id} input")
    box.click()
    box.fill(value)
    page.keyboard.press("Enter")
    page.wait_for_timeout(300)


def set_number(page, elem_id: str, value) -> None:
    page.fill(f"#{elem_id} input[type=number]", str(value))
    page.keyboard.press("Tab")


def downloaded_trace(page, tmp_path):
    page.click("#stop-btn")
    page.wait_for_timeout(800)
    with page.expect_download() as download:
        page.click("#step-download")
    path = tmp_path / "trace.jsonl"
    download.value.save_as(path)
    return read_trace(path)


def test_lossless_panel_timeline_and_break_even_draw_the_records(page, tmp_path):
    page.click("#reset-btn")
    choose(page, "step-drafter", "draft")
    set_number(page, "step-k", 4)
    set_number(page, "step-temperature", 0.8)
    for _ in range(12):
        step(page, 1)
        lossless = plot(page, "step-lossless")
        if lossless and any(trace.get("name") == "剩余分布" for trace in lossless["data"]):
            break
    residual = next(trace for trace in lossless["data"] if trace.get("name") == "剩余分布")
    assert math.fsum(residual["y"]) == pytest.approx(1.0, abs=1e-5)
    assert "min(1, p(x)/q(x))" in page.inner_text("#step-lossless-text")
    page.wait_for_timeout(300)
    page.locator("#step-lossless").screenshot(path=ARTIFACTS / "lossless-panel.png")
    timeline = plot(page, "step-timeline")
    breakeven = wait_for_plot(page, "step-breakeven", "p.data.length >= 2")
    trace = downloaded_trace(page, tmp_path)
    last = trace.steps[-1]
    rejection = last.inspect.rejection
    assert residual["y"] == pytest.approx([*rejection.residual_probs, rejection.residual_other])
    n = len(trace.steps)
    assert timeline["data"][0]["x"][:n] == pytest.approx([s.draft_s for s in trace.steps])
    assert timeline["data"][1]["x"][:n] == pytest.approx([s.verify_s for s in trace.steps])
    assert len(timeline["data"][1]["x"]) == n + sum(len(s.emitted) for s in trace.steps)  # and the plain lane
    assert len(breakeven["data"][1]["x"]) == 1  # the run's point on the curve
    set_number(page, "step-temperature", 0)
    page.click("#reset-btn")


def test_at_temperature_0_the_panel_says_exact_match(page):
    page.click("#reset-btn")
    choose(page, "step-drafter", "draft")
    set_number(page, "step-k", 4)
    for _ in range(12):
        step(page, 1)
        text = page.inner_text("#step-lossless-text")
        if "贪心" in text:
            break
    assert "最大值（argmax）" in text
    page.click("#reset-btn")


def label_boxes(page, elem_id: str) -> list[dict]:
    return page.evaluate("""id => Array.from(document.querySelectorAll('#' + id + ' .scatterlayer .textpoint text'))
        .map(t => t.getBoundingClientRect()).filter(r => r.width > 0)
        .map(r => ({left: r.left, top: r.top, right: r.right, bottom: r.bottom}))""", elem_id)


def overlapping(boxes: list[dict]) -> list[tuple[dict, dict]]:
    return [(a, b) for a, b in itertools.combinations(boxes, 2)
            if a["left"] < b["right"] - 0.5 and b["left"] < a["right"] - 0.5
            and a["top"] < b["bottom"] - 0.5 and b["top"] < a["bottom"] - 0.5]


def hover_text(page, elem_id: str, wanted: str) -> str:
    """Move the mouse over the tree's nodes until a tooltip holding ``wanted`` shows; its text."""
    count = page.locator(f"#{elem_id} .scatterlayer .points path").count()
    for i in range(count):
        x, y = page.evaluate("""([id, i]) => {
            const p = document.querySelectorAll('#' + id + ' .scatterlayer .points path')[i];
            p.scrollIntoView({block: 'center'});
            const r = p.getBoundingClientRect();
            return [r.left + r.width / 2, r.top + r.height / 2]; }""", [elem_id, i])
        page.mouse.move(x, y)
        page.wait_for_timeout(150)
        text = page.evaluate("id => (document.querySelector('#' + id + ' .hoverlayer') || {}).textContent || ''",
                             elem_id)
        if wanted in text:
            return text
    return ""


@pytest.mark.parametrize("nodes", [24, 60])
def test_tree_labels_do_not_overlap_and_hover_says_more(page, nodes):
    page.click("#reset-btn")
    choose(page, "step-drafter", "eagle3")
    set_number(page, "step-k", 6)
    set_number(page, "step-width", 8)
    set_number(page, "step-eagle-n", nodes)
    page.locator("#step-expand input").set_checked(True)
    step(page, 1)
    drawn = wait_for_plot(page, "step-tree", "p.data.length > 2")
    boxes = label_boxes(page, "step-tree")
    assert len(boxes) >= min(nodes, 24) and not overlapping(boxes)
    hover = hover_text(page, "step-tree", "log q")
    assert "熵" in hover
    assert "log p" in hover and "前 5 个候选" in hover
    page.locator("#step-tree").screenshot(path=ARTIFACTS / f"tree-{nodes}-hover.png")
    page.locator("#step-tree").screenshot(path=ARTIFACTS / f"tree-{nodes}.png")
    page.locator("#step-expand input").set_checked(False)
    page.wait_for_timeout(500)
    assert not overlapping(label_boxes(page, "step-tree"))
    page.click("#reset-btn")


def test_predict_mode_in_presentation_mode_scores_the_guess(page):
    open_tab(page, "classroom")
    page.locator("#lesson-present input").set_checked(True)
    page.wait_for_timeout(300)
    assert page.locator("#lesson-predict").is_visible() and not page.locator("#lesson-live").is_visible()
    for _ in range(6):  # a step that drafted something
        page.click("#predict-next")
        page.wait_for_function("() => document.querySelector('#predict-score').innerText.includes('揭晓')")
        if page.locator("#predict-choices input").count():
            break
    drafted = page.locator("#predict-choices input").count()
    names = {t["name"] for t in plot(page, "predict-tree")["data"]}
    assert drafted and "草稿候选（未验证）" in names and not names & {"接受的草稿", "被拒绝"}  # the verdict is hidden
    page.locator("#predict-choices input").first.check()
    page.locator("#lesson-predict").screenshot(path=ARTIFACTS / "predict-guess.png")
    page.click("#predict-reveal")
    page.wait_for_function("() => document.querySelector('#predict-score').innerText.includes('累计')")
    revealed = plot(page, "predict-tree")
    kept = sum(len(t["x"]) for t in revealed["data"] if t["name"] == "接受的草稿")
    right = 1 + drafted - kept if kept else drafted - 1  # a chain: the first token is kept whenever any is
    assert f"这一步猜对 {right}/{drafted} 个" in page.inner_text("#predict-score")
    page.locator("#predict-batch-guess label").first.click()
    page.wait_for_function("() => document.querySelector('#predict-batch-a').innerText.includes('实测')")
    page.screenshot(path=ARTIFACTS / "predict-presentation.png", full_page=True)
    page.locator("#lesson-present input").set_checked(False)
