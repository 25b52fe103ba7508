"""The animated step in headless Chromium against ``python app.py --preset tiny``: after one Step, the
frames the page holds (inside the Plotly figure's slider and Play button: Gradio drops a figure's
``frames``) are the recorded step's events in order, checked against the run's downloaded trace; Play
runs them in the browser without asking the server for anything; on a 390 px screen the figure fits
without scrolling sideways; the Classroom's live part shows the same animation."""
from __future__ import annotations

import html
import re

import pytest
from app_driver import browser_page, downloaded_trace, missing_browser, open_app, open_tab, step, wait_for_plot
from app_server import TINY_MISSING, TINY_READY, running_app

from app.palette import COLORS, KV_COLORS, visible

pytestmark = [pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING),
              pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser()))]

NODES, NEXT, KV = 3, 4, 5  # trace indices in every frame (app/figures/animation.py)
FRAMES_JS = """id => {
  const div = document.querySelector('#' + id + ' .js-plotly-plot');
  if (!div || !div.layout || !div.layout.sliders) return null;
  return {active: div.layout.sliders[0].active, caption: div.layout.annotations[0].text,
          frames: div.layout.sliders[0].steps.map(s => s.args[0][0]),
          play: div.layout.updatemenus[0].buttons[0].args[0].map(f => f.name)};
}"""


@pytest.fixture(scope="module")
def page():
    with running_app("tiny", timeout_s=120) as url, browser_page() as page_:
        open_app(page_, url)
        yield page_


def _frames(page, elem_id: str) -> dict:
    page.wait_for_function(f"id => ({FRAMES_JS})(id) !== null", arg=elem_id)
    return page.evaluate(FRAMES_JS, elem_id)


def click_slider(page, elem_id: str, index: int) -> None:
    """Click the slider's rail above its ``index``-th label, as a hand does (the rail takes the click)."""
    label = page.locator(f"#{elem_id} .slider-label").nth(index)
    label.scroll_into_view_if_needed()
    box = label.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] - 12)


def reset(page) -> None:
    """Reset Step by step and wait until the page shows no run (the animation blank again)."""
    page.click("#reset-btn")
    page.wait_for_function(f"id => ({FRAMES_JS})(id) === null", arg="step-anim")


def test_the_page_plays_the_recorded_steps_events_in_order(page, tmp_path):
    reset(page)
    page.fill("#step-width input", "2")  # a tree: siblings refused beside the accepted path
    step(page, 1)
    shown = _frames(page, "step-anim")
    (record,) = downloaded_trace(page, tmp_path).steps

    frames = shown["frames"]
    resampled = record.next.kind == "correction" and record.inspect.rejection.temperature > 0
    names = ["draft", "verify", *(["accept"] if record.nodes else []),
             "resample" if resampled else record.next.kind, "kv"]
    assert [f["name"] for f in frames] == names == shown["play"]
    by_name = {f["name"]: f["data"] for f in frames}
    assert by_name["draft"][NODES]["customdata"] == [n.id for n in record.nodes]
    assert [h.split(" · ")[0] for h in by_name["draft"][NODES]["hovertext"]] == [
        f"“{html.escape(visible(n.text))}”" for n in record.nodes]
    assert set(by_name["draft"][NODES]["marker"]["color"]) == {COLORS["proposed"]}
    written = by_name["verify"][KV]["customdata"]
    assert written.count("written") == record.kv.slots_written == len(record.nodes) + 1
    assert by_name["accept"][NODES]["marker"]["color"] == [COLORS[n.status] for n in record.nodes]
    target = frames[-2]["data"][NEXT]
    assert target["marker"]["color"] == COLORS[record.next.kind] and target["x"] == [record.accepted_length + 1]
    assert target["hovertext"][0].endswith(f"“{html.escape(visible(record.next.text))}”")
    kv = by_name["kv"][KV]
    grid = record.kv.slot_grid
    freed = {str(b) for b in record.kv.freed_blocks}
    assert kv["customdata"] == [c for b in sorted(grid, key=int) if b in freed or set(grid[b]) & {"W", "F"}
                                for c in grid[b]]
    assert kv["marker"]["color"].count(KV_COLORS["F"]) == record.kv.slots_freed
    caption = html.unescape(frames[-1]["layout"]["annotations"][0]["text"].replace("<br>", "")).replace(" ", "")
    assert f"{record.kv.blocks_before}→{record.kv.blocks_after}" in caption

    # Play: every frame in turn, in the browser only; the slider follows and ends on the last frame
    requests = []

    def sent(request):
        requests.append(request.url)

    page.on("request", sent)
    assert shown["active"] == 0
    page.locator("#step-anim .updatemenu-button").first.click()
    page.wait_for_function(f"([id, caption]) => {{ const s = ({FRAMES_JS})(id);"
                           f" return s.active === {len(frames) - 1} && s.caption === caption; }}",
                           arg=["step-anim", frames[-1]["layout"]["annotations"][0]["text"]], timeout=30_000)
    page.wait_for_timeout(500)
    page.remove_listener("request", sent)
    assert requests == []
    # a step of the slider shows that frame alone
    click_slider(page, "step-anim", 1)
    page.wait_for_function(f"([id, caption]) => {{ const s = ({FRAMES_JS})(id);"  # the slider moves first, then the frame
                           f" return s.active === 1 && s.caption === caption; }}",
                           arg=["step-anim", frames[1]["layout"]["annotations"][0]["text"]], timeout=10_000)
    page.fill("#step-width input", "1")
    reset(page)


def test_on_a_phone_the_animation_fits_the_screen(page):
    reset(page)
    step(page, 1)
    page.set_viewport_size({"width": 390, "height": 900})
    try:
        page.wait_for_timeout(1000)
        page.locator("#step-anim").scroll_into_view_if_needed()
        sizes = page.evaluate("""() => { const box = document.querySelector('#step-anim');
            const svg = box.querySelector('.main-svg').getBoundingClientRect();
            const caption = box.querySelector('.annotation').getBoundingClientRect();
            return {right: svg.right, caption: caption.right, scroll: box.scrollWidth - box.clientWidth,
                    slider: box.querySelector('.slider-container').getBoundingClientRect().right}; }""")
        assert sizes["right"] <= 390 and sizes["caption"] <= sizes["right"] and sizes["slider"] <= sizes["right"]
        assert sizes["scroll"] <= 0
    finally:
        page.set_viewport_size({"width": 1440, "height": 1000})
        reset(page)


def test_the_classroom_animates_its_live_step(page):
    open_tab(page, "classroom")
    page.click("#lesson-reset")
    page.click("#lesson-step")
    wait_for_plot(page, "lesson-tree", "p.title.includes('第 1 步')")
    page.wait_for_function("() => { const d = document.querySelector('#lesson-anim .js-plotly-plot');"
                           " return d && d.layout.meta && d.layout.meta.step === 1; }")
    frames = _frames(page, "lesson-anim")["frames"]
    assert [f["name"] for f in frames][:2] == ["draft", "verify"] and frames[-1]["name"] == "kv"
    sentence = page.inner_text("#lesson-sentence")  # "草稿猜了 4 个，目标模型接受了 2 个……" (app/render.py)
    drafted = int(re.search(r"草稿猜了 (\d+) 个", sentence).group(1))
    said = re.search(r"接受了 (\d+) 个|全部接受（(\d+) 个）", sentence)
    kept = int(said.group(1) or said.group(2))
    assert len(frames[0]["data"][NODES]["customdata"]) == drafted
    assert frames[2]["data"][NODES]["marker"]["color"].count(COLORS["accepted"]) == kept
    open_tab(page, "step")
