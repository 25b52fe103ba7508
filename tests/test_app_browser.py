"""The app in headless Chromium against ``python app.py --preset tiny``: step by step, compare,
classroom with the language switch, replay of the shipped trace. Screenshots go to test-artifacts/."""
from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from app_driver import (VIEWPORT, browser_page, missing_browser, open_app, open_tab, plot, run_compare, set_language,
                        step, step_auto, wait_for_plot)
from app_server import TINY_MISSING, TINY_READY, running_app

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
EXAMPLE_TRACE = ROOT / "assets" / "traces" / "example-tiny.jsonl"

pytestmark = [pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING),
              pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser()))]


@pytest.fixture(scope="module")
def page():
    ARTIFACTS.mkdir(exist_ok=True)
    with running_app("tiny", timeout_s=300, log_path=ARTIFACTS / "app-browser.log") as url, browser_page() as browser_page_:
        open_app(browser_page_, url)
        yield browser_page_


def shot(page, name: str) -> None:
    page.wait_for_timeout(300)
    page.screenshot(path=ARTIFACTS / f"{name}.png", full_page=True)


def cells(grid: dict) -> dict:
    return {state: sum(row.count(state) for row in grid.values()) for state in "LWF."}


def test_step_by_step_draws_three_real_steps(page, tmp_path):
    from core import read_trace

    fold = page.evaluate("""() => { const b = document.querySelector('#step-btn').getBoundingClientRect();
                                    return [b.bottom + window.scrollY, window.innerHeight]; }""")
    assert fold[0] <= fold[1] == 1000, fold  # Step is above the fold at 1440×1000
    step(page, 3)
    tree = plot(page, "step-tree")
    kv = plot(page, "step-kv")
    live = plot(page, "step-live")
    assert "第 3 步" in tree["title"] and "第 3 步" in kv["title"]
    assert live["data"][0]["x"] == [1, 2, 3]
    assert page.locator("#step-text .sdl-tok").count() >= 3
    assert page.locator("#step-text .sdl-tok[title^='第 3 步']").count() >= 1
    assert page.evaluate("document.fonts.check('16px \"Noto Sans CJK SC\"')")
    shot(page, "step-by-step")

    page.click("#stop-btn")
    page.wait_for_function("document.querySelector('#step-status').innerText.includes('运行后占用 0 块')")
    with page.expect_download() as download:
        page.click("#step-download")
    path = tmp_path / "trace.jsonl"
    download.value.save_as(path)
    trace = read_trace(path)
    assert len(trace.steps) == 3 and trace.summary["kv"]["blocks_in_use_after"] == 0

    last = trace.steps[-1]  # what the page drew is what the engine recorded
    drawn = sorted(text for t in tree["data"] if t["text"] for text in t["text"])
    assert len(drawn) == len(last.nodes) + 2
    assert {t["name"]: len(t["x"]) for t in kv["data"]} == dict(zip([t["name"] for t in kv["data"]],
                                                                     cells(last.kv.slot_grid).values()))
    per_step = [s.accepted_length / len(s.nodes) if s.nodes else None for s in trace.steps]
    assert live["data"][0]["y"] == pytest.approx(per_step)
    assert live["data"][3]["y"] == pytest.approx([s.new_tokens_total / s.target_forwards_total for s in trace.steps])


def test_step_by_step_says_why_it_drafted_that_much(page):
    lines = step_auto(page, 3)
    assert all(lines), lines  # every step under the goodput controller says why
    assert lines[0].startswith("试探")  # the run's first step probes with one level
    assert all(any(word in line for word in ("试探", "起草", "检查")) for line in lines)
    assert not any(word in line for line in lines for word in ("实际", "Realised", "×"))  # plain words first
    numbers = page.locator("#step-sentence details.sdl-why-numbers")  # the numbers behind a closed detail
    assert numbers.count() == 1 and not numbers.evaluate("d => d.open")
    numbers.locator("summary").click()
    page.wait_for_function("document.querySelector('#step-sentence details').open")
    assert "毫秒" in numbers.inner_text() and "倍" in numbers.inner_text()
    page.locator("#step-auto input").set_checked(False)
    page.click("#reset-btn")


def broken_words(page, elem_id: str) -> list[str]:
    """The words (runs without a space; a Chinese run is one word) of ``#elem_id``'s table header and
    first column (the names; a long value may wrap) that the browser broke across two lines."""
    return page.evaluate("""id => {
        const out = [], cells = document.querySelectorAll('#' + id + ' th, #' + id + ' td:first-child');
        for (const cell of cells) {
            const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                for (const match of node.textContent.matchAll(/\\S+/g)) {
                    const range = document.createRange();
                    range.setStart(node, match.index);
                    range.setEnd(node, match.index + match[0].length);
                    const tops = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0)
                                              .map(r => Math.round(r.top)));
                    if (tops.size > 1) out.push(match[0]);
                }
            }
        }
        return out; }""", elem_id)


def test_compare_three_drafters(page):
    open_tab(page, "compare")  # quick by default: 24 tokens, one timed round
    assert page.locator("#cmp-mode label", has_text="快速").locator("input").is_checked()
    assert page.input_value("#cmp-max-new input") == "24" and page.input_value("#cmp-repeats input") == "1"
    page.locator("#cmp-mode label", has_text="完整").click()
    page.wait_for_function("document.querySelector('#cmp-repeats input').value == '3'")
    assert page.input_value("#cmp-max-new input") == "48"
    rows = run_compare(page, ["draft", "ngram"], "4, 2x2", max_new_tokens=24, repeats=1)
    fits = page.evaluate("""() => {
        const table = document.querySelector('#cmp-table'), rows = table.querySelectorAll('[role=row]');
        const headers = Array.from(table.querySelectorAll('[role=columnheader]'));
        const last = rows[rows.length - 1].getBoundingClientRect(), box = table.getBoundingClientRect();
        return {right: Math.max(...headers.map(h => h.getBoundingClientRect().right)), width: window.innerWidth,
                overflow: Array.from(table.querySelectorAll('*')).some(e => e.scrollWidth > e.clientWidth + 2
                    && getComputedStyle(e).overflowX !== 'visible' && e.clientWidth > 200),
                last: last.bottom, bottom: box.bottom, headers: headers.length}; }""")
    assert fits["headers"] == 12 and fits["right"] <= fits["width"], fits  # speedup and note columns on the page
    assert not fits["overflow"] and fits["last"] <= fits["bottom"], fits  # no sideways scroll; the last row shows
    warnings = page.locator("#cmp-status details.sdl-warnings")
    assert warnings.count() == 0 or not warnings.evaluate("d => d.open")  # notes folded into one line
    assert [row[0] for row in rows] == ["none", "draft · k=4", "draft · tree 2x2", "ngram · k=4", "ngram · tree 2x2"]
    assert rows[0][9] == "1.00×"
    assert all(row[10] == "✓" for row in rows[1:])  # greedy: token for token the baseline
    assert all(float(row[8].split()[0]) > 0 for row in rows)  # wall time (median)
    assert rows[0][5] == "—" and float(rows[1][5]) > 0  # draft time / verify time
    overlaid = plot(page, "cmp-plot")
    assert len(overlaid["data"]) == 10
    shot(page, "compare")


def test_classroom_and_language_switch(page):
    open_tab(page, "step")  # a Step-by-step run in the middle, for the language switch below
    page.click("#reset-btn")
    page.wait_for_function("!document.querySelector('#step-status').innerText.trim()")
    step(page, 2)
    open_tab(page, "classroom")
    assert "目标模型单独生成" in page.inner_text("#lesson-caption")
    page.click("#lesson-next")
    wait_for_plot(page, "lesson-figure", "p.data.some(t => t.text && t.text.includes('EOS'))")
    page.click("#lesson-next")
    figure = wait_for_plot(page, "lesson-figure", "p.data.some(t => t.text && t.text.includes('华'))")
    assert any(t["text"] == ["国"] for t in figure["data"])  # the correction, in its own trace
    page.click("#lesson-step")
    wait_for_plot(page, "lesson-tree", "p.title.includes('1')")
    assert "示意图" in page.inner_text("#lesson-caption")
    ledger = page.inner_text("#lesson-ledger")
    assert "次目标前向" in ledger and "和示意图不同" in ledger  # tiny writes poems, not 爱中国: the page says so
    assert "一条最多 4 个 token 的链" in page.inner_text("#lesson-shape")  # tiny's drafter, in words
    assert "起草了 4 个 token" in ledger
    page.fill("#lesson-prompt textarea", "我")  # a setting changed mid-run: the run goes on, the page asks for Reset
    page.click("#lesson-step")
    page.wait_for_function("document.querySelector('#lesson-status').innerText.includes('重置')")
    wait_for_plot(page, "lesson-tree", "p.title.includes('2')")
    shot(page, "classroom-zh")

    page.click("#lesson-present input[type=checkbox]")  # presentation mode: large type, keys move the scenes
    page.wait_for_function("document.body.classList.contains('sdl-present')")
    assert not page.locator("#app-header").is_visible() and not page.locator("#lesson-notes").is_visible()
    page.locator("#lesson-frame").click()  # focus off the checkbox, as a teacher's click on the slide would
    page.keyboard.press("ArrowLeft")
    page.wait_for_function("document.querySelector('#lesson-frame').innerText.includes('第 2 / 5 幕')")
    page.keyboard.press("ArrowRight")
    page.wait_for_function("document.querySelector('#lesson-frame').innerText.includes('第 3 / 5 幕')")
    shot(page, "classroom-presentation")
    page.keyboard.press("ArrowRight")  # scene 4, "3 vs 1": the bars' numbers inside the figure, under its title
    wait_for_plot(page, "lesson-figure", "p.data.length == 1 && p.data[0].y && p.data[0].y[0] == 3")
    boxes = page.evaluate("""() => { const box = e => e.getBoundingClientRect();
        return {svg: box(document.querySelector('#lesson-figure .main-svg')),
                title: box(document.querySelector('#lesson-figure .gtitle')),
                numbers: Array.from(document.querySelectorAll('#lesson-figure .bartext')).map(box)}; }""")
    assert len(boxes["numbers"]) == 2
    assert all(n["top"] >= boxes["title"]["bottom"] and n["bottom"] <= boxes["svg"]["bottom"] for n in boxes["numbers"])
    page.keyboard.press("ArrowRight")  # scene 5: the same step inside vLLM
    page.wait_for_function("document.querySelector('#lesson-frame').innerText.includes('第 5 / 5 幕')")
    assert "python -m core vllm compare" in page.inner_text("#lesson-caption")
    shot(page, "classroom-vllm-scene")
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")  # back to scene 3, whose caption the language switch below reads
    page.wait_for_function("document.querySelector('#lesson-frame').innerText.includes('第 3 / 5 幕')")
    page.keyboard.press("Escape")
    page.wait_for_function("!document.body.classList.contains('sdl-present')")

    set_language(page, "English")
    page.wait_for_function("document.querySelector('#tab-classroom-button').innerText.includes('Classroom')")
    page.wait_for_function("document.querySelector('#lesson-caption').innerText.includes('One forward checks')")
    assert "Acceptance rate" in page.inner_text("#lesson-notes")
    assert "Step 2" in page.inner_text("#lesson-sentence")
    shot(page, "classroom-en")
    open_tab(page, "step")  # the run switched in the middle: its sentence, plots' titles and status
    assert "Step 2:" in page.inner_text("#step-sentence") and "ready" in page.inner_text("#step-status")
    assert "Draft tree of step 2" in plot(page, "step-tree")["title"]
    assert plot(page, "step-kv")["title"].startswith("Step 2:")
    assert {t["name"] for t in plot(page, "step-live")["data"]} >= {"this step", "running"}
    page.click("#stop-btn")
    page.wait_for_function("document.querySelector('#step-summary').innerText.includes('Acceptance rate')")
    assert not broken_words(page, "step-summary")  # not "Accepta / nce rate"
    set_language(page, "中文")
    page.wait_for_function("document.querySelector('#tab-classroom-button').innerText.includes('课堂')")
    page.wait_for_function("document.querySelector('#step-summary').innerText.includes('接受率')")  # and back
    assert "第 2 步" in page.inner_text("#step-sentence") and "已结束" in page.inner_text("#step-status")
    assert "第 2 步的草稿树" in plot(page, "step-tree")["title"]
    assert {t["name"] for t in plot(page, "step-live")["data"]} >= {"本步", "累计"}
    assert not broken_words(page, "step-summary")
    page.click("#reset-btn")


@contextlib.contextmanager
def another_page(page):
    """A second page on the same server: a new session, whose tabs are drawn for the first time."""
    fresh = page.context.browser.new_page(viewport=page.viewport_size)
    try:
        open_app(fresh, page.url)
        yield fresh
    finally:
        fresh.close()


@pytest.mark.parametrize("language,words,other", [("中文", "拖放", "Drop File Here"),
                                                  ("English", "Drop File Here", "拖放")])
def test_gradio_words_follow_the_page_language(page, language, words, other):
    """Gradio's own words (the upload box) follow the page's language, not the (English) browser's:
    Chinese on the Chinese page; English after a switch, even one made while Gradio still loads its
    Chinese words."""
    with another_page(page) as fresh:
        set_language(fresh, language)
        locale = {"中文": "zh-CN", "English": "en"}[language]  # page.js GRADIO_LOCALES
        # Gradio words a component when it is first drawn: the tab opened once the switch holds
        fresh.wait_for_function("l => document.body.dataset.sdlLocale === l", arg=locale)
        open_tab(fresh, "replay")
        fresh.wait_for_function("w => document.querySelector('#replay-upload').innerText.includes(w)", arg=words)
        assert other not in fresh.inner_text("#replay-upload")
        shot(fresh, f"replay-upload-{language}")


def test_a_file_over_the_upload_limit_is_refused_with_a_message(page, tmp_path):
    """Gradio alone refuses it with a bare "Error" in the box; the page says the file is too large and
    the limit, in its language, and the box stays ready for another file."""
    from core.common.limits import MAX_TRACE_BYTES as MAX_UPLOAD

    big = tmp_path / "big.jsonl"
    with open(big, "wb") as f:
        f.truncate(25 * 2**20)  # 25 MB (sparse)
    assert big.stat().st_size > MAX_UPLOAD
    with another_page(page) as fresh:
        open_tab(fresh, "replay")
        fresh.set_input_files("#replay-upload input[type=file]", str(big))
        fresh.wait_for_function("document.querySelector('#replay-status').innerText.includes('文件太大')")
        assert f"上传上限是 {MAX_UPLOAD / 2**20:g} MB" in fresh.inner_text("#replay-status")
        upload = fresh.inner_text("#replay-upload")
        assert "Error" not in upload and "拖放" in upload
        shot(fresh, "replay-too-large")


def test_replay_steps_through_the_shipped_trace(page, tmp_path):
    open_tab(page, "replay")
    page.set_input_files("#replay-upload input[type=file]", str(EXAMPLE_TRACE))
    prompt = json.loads(EXAMPLE_TRACE.read_text(encoding="utf-8").splitlines()[0])["prompt"]
    page.wait_for_function("p => document.querySelector('#replay-header').innerText.includes(p)", arg=prompt)
    for n in (2, 3):  # a button ignores clicks while its last one is pending: wait for each
        page.click("#replay-next")
        tree = wait_for_plot(page, "replay-tree", f"p.title.includes('第 {n} 步')")
    assert tree["data"]
    assert plot(page, "replay-live")["data"][0]["x"] == [1, 2, 3]
    shot(page, "replay")

    bad = tmp_path / "not-a-trace.jsonl"
    bad.write_text("hello\n", encoding="utf-8")
    page.set_input_files("#replay-upload input[type=file]", str(bad))  # a second file, no Clear pressed first
    page.wait_for_function("document.querySelector('#replay-status').innerText.includes('not JSON')")


def test_replay_goes_to_a_typed_step(page):
    """A step number typed into the slider's box moves there at once (no release until the box loses
    focus). Step 19 of the shipped trace returns a block, whose long row label fits in the KV grid,
    and has written two newlines, drawn as ↵."""
    open_tab(page, "replay")
    page.click("#replay-example")
    wait_for_plot(page, "replay-tree", "p.title.includes('第 1 步')")
    page.fill("#replay-slider input[type=number]", "19")
    wait_for_plot(page, "replay-tree", "p.title.includes('第 19 步')")
    assert page.input_value("#replay-slider input[type=number]") == "19"
    assert page.inner_text("#replay-text").count("↵") == 2
    labels = page.evaluate("""() => {
        const figure = document.querySelector('#replay-kv .main-svg').getBoundingClientRect();
        return Array.from(document.querySelectorAll('#replay-kv .ytick text'))
            .map(label => [label.textContent, label.getBoundingClientRect().left - figure.left]); }""")
    assert "块 2 (本步归还)" in [text for text, _ in labels]
    assert all(left >= 0 for _, left in labels), labels  # not cut at the figure's left edge
    shot(page, "replay-typed-step")


def test_worth_it_marks_the_measured_runs(page):
    open_tab(page, "worth")
    figure = wait_for_plot(page, "worth-plot", "p.data.some(t => t.name == '本会话实测')")
    measured = [t for t in figure["data"] if t["name"] == "本会话实测"]
    assert len(measured[-1]["x"]) == 4  # the four speculative runs of the comparison, timed against the baseline
    assert len(measured[0]["x"]) >= 4  # τ: the played run of this module too
    text = page.inner_text("#worth-readout")  # which number is the model's and which the run's
    assert text.startswith("模型") and "实测（本会话最近的运行 ngram · tree 2x2）" in text and "模型预测每次前向 τ" in text
    shot(page, "worth-it")


PHONE = {"width": 390, "height": 844}
SHOWN_TABS = ".tab-wrapper [role=tablist] button, .tab-wrapper .overflow-dropdown button"  # not Gradio's measuring copy
TITLE_BOXES_JS = """id => { const box = e => { const r = e.getBoundingClientRect();
        return {left: r.left, top: r.top, right: r.right, bottom: r.bottom, text: e.textContent}; };
    const root = document.querySelector('#' + id);
    return {titles: Array.from(root.querySelectorAll('.gtitle, .annotation-text')).map(box).filter(b => b.text.trim()),
            legend: Array.from(root.querySelectorAll('.legend')).map(box)}; }"""


def overlapping(boxes: list[dict]) -> list[tuple[dict, dict]]:
    return [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]
            if a["left"] < b["right"] - 0.5 and b["left"] < a["right"] - 0.5
            and a["top"] < b["bottom"] - 0.5 and b["top"] < a["bottom"] - 0.5]


def test_the_page_is_usable_on_a_phone(page):
    """At 390 px: the title on one line (not broken inside a word), every tab on the page and inside
    it, and in the live plots, the tree, and Worth it? no plot title overlapping another or a legend."""
    page.set_viewport_size(PHONE)
    try:
        page.wait_for_timeout(800)
        title_lines = page.evaluate("""() => { const range = document.createRange();
            range.selectNodeContents(document.querySelector('#app-header h2'));
            return new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top))).size; }""")
        assert title_lines == 1
        tabs = page.evaluate("""s => Array.from(document.querySelectorAll(s))
            .map(b => [b.innerText.trim(), b.getBoundingClientRect().left, b.getBoundingClientRect().right,
                       b.getBoundingClientRect().width]).filter(t => t[0])""", SHOWN_TABS)
        assert {name for name, *_ in tabs} >= {"逐步演示", "比较草稿方法", "课堂：我爱中国", "值不值得？", "回放", "批大小",
                                               "生产监控", "在服务引擎里"}
        assert all(width > 0 and left >= 0 and right <= PHONE["width"] for _, left, right, width in tabs), tabs
        page.locator(SHOWN_TABS, has_text="逐步演示").first.click()  # reachable from the phone's tab rows
        page.wait_for_timeout(300)
        page.click("#reset-btn")
        step(page, 2)
        for elem_id in ("step-live", "step-tree"):
            boxes = page.evaluate(TITLE_BOXES_JS, elem_id)
            assert len(boxes["titles"]) >= 1 and not overlapping(boxes["titles"]), (elem_id, boxes)
            assert not overlapping(boxes["titles"] + boxes["legend"]), (elem_id, boxes)
        page.locator(SHOWN_TABS, has_text="值不值得？").first.click()
        wait_for_plot(page, "worth-plot", "p.data.length > 1")
        boxes = page.evaluate(TITLE_BOXES_JS, "worth-plot")
        assert len(boxes["titles"]) >= 2 and not overlapping(boxes["titles"]), boxes
        slider = page.locator("#worth-alpha").bounding_box()  # the sliders one under another, not squeezed
        assert slider["width"] >= PHONE["width"] * 0.7, slider
        shot(page, "phone-worth-it")
    finally:
        page.set_viewport_size(VIEWPORT)
        open_tab(page, "step")
        page.click("#reset-btn")
