"""The page at a phone's width (390 px) in headless Chromium against ``python app.py --preset tiny``
(app/phone.css, app/page.js): every figure is drawn no wider than the screen or its box shows the
scroll cue, in the page's language; the Classroom's first scene shows all its columns and its legend;
Step by step's timeline shows its bars beside its lane names; no table header is broken a character
per line, tables keep their first column in view, and Compare's speedup column is on screen or behind
the cue. Screenshots go to test-artifacts/."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from app_driver import browser_page, missing_browser, open_app, step, wait_for_plot
from app_server import TINY_MISSING, TINY_READY, running_app

from app.i18n import t

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
PHONE = {"width": 390, "height": 844}
TABS = ".tab-wrapper [role=tablist] button, .tab-wrapper .overflow-dropdown button"

pytestmark = [pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING),
              pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser()))]

# every visible figure: its drawn width, its block's box, and the cue's words when the block shows one
FIGURES_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).filter(p => p.offsetParent).map(p => {
    const block = p.closest('.block'), svg = p.querySelector('svg.main-svg'), cue = getComputedStyle(block, '::after');
    return {id: block.id, drawn: svg.getBoundingClientRect().width, right: block.getBoundingClientRect().right,
            cue: block.classList.contains('sdl-scrolls') && cue.display !== 'none' ? cue.content : ''}; })"""


@pytest.fixture(scope="module")
def page():
    ARTIFACTS.mkdir(exist_ok=True)
    with running_app("tiny", timeout_s=300, log_path=ARTIFACTS / "phone-browser.log") as url, \
            browser_page() as browser_page_:
        browser_page_.set_viewport_size(PHONE)
        open_app(browser_page_, url)
        yield browser_page_


def words(header: str) -> int:
    """The pieces a header may be broken between: words apart by spaces, and a bracketed part (CJK kept whole)."""
    return len([piece for piece in re.split(r"\s+|(?=[（(])", header) if piece])


def open_phone_tab(page, name: str) -> None:
    page.locator(TABS, has_text=name).first.click()
    page.wait_for_timeout(600)


def figures_fit_or_cue(page, lang: str = "zh") -> list[dict]:
    """Every visible figure fits the screen, or its box shows the cue in ``lang``; the figures."""
    page.wait_for_timeout(500)  # page.js checks the page 150 ms after a change
    figures = page.evaluate(FIGURES_JS)
    assert figures
    for figure in figures:
        assert figure["drawn"] <= PHONE["width"] or figure["cue"] == f'"{t("page.scroll_cue", lang)}"', figure
    return figures


def test_step_by_step_figures_fit_or_say_they_scroll_and_the_timeline_shows_bars(page):
    open_phone_tab(page, "逐步演示")
    page.click("#reset-btn")
    step(page, 3)
    figures = figures_fit_or_cue(page)
    assert {"step-tree", "step-timeline", "step-live"} <= {f["id"] for f in figures}
    # the timeline's bars start inside the part of its box the screen shows, with room to read them
    bars = page.evaluate("""() => { const block = document.querySelector('#step-timeline');
        const box = block.getBoundingClientRect(), right = Math.min(box.right, window.innerWidth);
        const rects = Array.from(block.querySelectorAll('.barlayer .point path')).map(p => p.getBoundingClientRect())
            .filter(r => r.width > 0);
        return {left: Math.min(...rects.map(r => r.left)), right, box_left: box.left, count: rects.length}; }""")
    assert bars["count"] > 3 and bars["right"] - bars["left"] >= 0.4 * (bars["right"] - bars["box_left"]), bars
    page.locator("#step-timeline").screenshot(path=ARTIFACTS / "phone-timeline.png")
    page.locator("#lang-toggle label:has-text('English')").click()
    page.wait_for_timeout(1500)
    figures_fit_or_cue(page, "en")
    page.locator("#lang-toggle label:has-text('中文')").click()
    page.wait_for_timeout(1000)


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_classroom_first_scene_shows_every_column_and_its_legend(page, lang):
    if lang == "en":
        page.locator("#lang-toggle label:has-text('English')").click()
        page.wait_for_timeout(1500)
    open_phone_tab(page, "课堂" if lang == "zh" else "Classroom")
    figures = {f["id"]: f for f in figures_fit_or_cue(page, lang)}
    assert figures["lesson-figure"]["cue"] == ""  # it fits: no cue (the cue itself never widens its box)
    scene = page.evaluate("""() => { const root = document.querySelector('#lesson-figure');
        const r = e => e.getBoundingClientRect();
        return {texts: Array.from(root.querySelectorAll('.textpoint text')).map(e => [e.textContent, r(e).left, r(e).right]),
                legend: Array.from(root.querySelectorAll('.legend .traces')).map(e => [e.textContent, r(e).left, r(e).right]),
                width: r(root.querySelector('svg.main-svg')).width, right: r(root).right,
                title_right: r(root.querySelector('.gtitle')).right}; }""")
    assert scene["width"] <= PHONE["width"]
    assert {text for text, *_ in scene["texts"]} >= {"我", "爱", "中", "国", "EOS"}
    assert len(scene["legend"]) == 2
    for text, left, right in scene["texts"] + scene["legend"]:
        assert 0 <= left and right <= PHONE["width"], (text, left, right)
    assert scene["title_right"] <= scene["right"], scene
    page.locator("#lesson-figure").screenshot(path=ARTIFACTS / f"phone-classroom-scene1-{lang}.png")
    if lang == "en":
        page.locator("#lang-toggle label:has-text('中文')").click()
        page.wait_for_timeout(1500)


def test_tables_keep_whole_headers_and_the_speedup_column_is_reachable(page):
    open_phone_tab(page, "比较草稿方法")
    for label in page.locator("#cmp-drafters label").all():
        label.locator("input").set_checked(label.inner_text().strip() == "draft")
    page.fill("#cmp-shapes textarea, #cmp-shapes input", "4")
    page.fill("#cmp-max-new input", "12")
    page.fill("#cmp-repeats input", "1")
    page.click("#cmp-run")
    page.wait_for_function("() => document.querySelector('#cmp-status').innerText.includes('完成')", timeout=300_000)
    wait_for_plot(page, "cmp-timeline", "p.data.length >= 2")
    figures_fit_or_cue(page)
    headers = page.evaluate("""() => Array.from(document.querySelectorAll('#cmp-table th')).map(th => {
        const text = th.innerText.trim(), size = parseFloat(getComputedStyle(th).fontSize);
        const range = document.createRange(); range.selectNodeContents(th.querySelector('.header') || th);
        const lines = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top))).size;
        return {text, lines, chars: text.replace(/\\s/g, '').length, size}; })""")
    speedup = "加速比"
    assert any(h["text"] == speedup for h in headers), headers
    for header in headers:  # broken only between words (a CJK word is kept whole): never a character a line
        assert 1 <= header["lines"] <= words(header["text"]), header
    table = page.evaluate(f"""() => {{ const block = document.querySelector('#cmp-table');
        const th = Array.from(block.querySelectorAll('th')).find(h => h.innerText.trim() === '{speedup}');
        const viewport = block.querySelector('.virtual-table-viewport');
        const cue = block.classList.contains('sdl-scrolls') ? getComputedStyle(block, '::after').content : '';
        const seen = th.getBoundingClientRect().right <= window.innerWidth;
        viewport.scrollLeft = viewport.scrollWidth;
        return {{seen, cue, wide: viewport.scrollWidth > viewport.clientWidth}}; }}""")
    assert table["seen"] or table["cue"] == f'"{t("page.scroll_cue", "zh")}"', table
    page.wait_for_timeout(300)
    edges = page.evaluate("""() => { const block = document.querySelector('#cmp-table');
        const r = e => e.getBoundingClientRect();
        const th = Array.from(block.querySelectorAll('th')).find(h => h.innerText.trim() === '加速比');
        const cell = block.querySelector('[role=row] [role=gridcell]');
        return {first: r(block.querySelector('th')).left, cell: r(cell).left, text: cell.innerText.trim(),
                block: r(block).left, speedup: r(th).right}; }""")
    assert edges["speedup"] <= PHONE["width"]  # scrolled to: the column is on screen
    assert edges["first"] >= edges["block"] - 1 and edges["cell"] >= edges["block"] - 1, edges  # the drafters stay
    assert edges["text"] == "none", edges
    page.locator("#cmp-table").screenshot(path=ARTIFACTS / "phone-compare-table.png")


def test_worth_it_figures_and_table_fit_or_say_they_scroll(page):
    open_phone_tab(page, "值不值得？")
    wait_for_plot(page, "worth-plot", "p.data.length > 1")
    figures = {f["id"]: f for f in figures_fit_or_cue(page)}
    assert figures["worth-plot"]["cue"]  # three panels, 1100 px: it scrolls, and says so
    lines = page.evaluate("""() => Array.from(document.querySelectorAll('#worth-table th')).map(th => {
        const range = document.createRange(); range.selectNodeContents(th.querySelector('.header') || th);
        return [th.innerText.trim(), new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top))).size]; })""")
    assert lines and all(1 <= n <= words(text) for text, n in lines), [x for x in lines if x[1] > words(x[0])]
