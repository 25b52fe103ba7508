"""Drive the app in headless Chromium (Playwright): shared by the browser test and the screenshot script."""
from __future__ import annotations

import contextlib
import shutil
import subprocess

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
VIEWPORT = {"width": 1440, "height": 1000}
PLOT_JS = """id => {
  const div = document.querySelector('#' + id + ' .js-plotly-plot');
  if (!div || !div.data) return null;
  const plain = v => (v === undefined || v === null) ? null : Array.from(v);
  return {title: (div.layout.title && div.layout.title.text) || '',
          data: div.data.map(t => ({name: t.name || '', x: plain(t.x), y: plain(t.y), text: plain(t.text),
                                    base: plain(t.base), color: t.marker ? t.marker.color : null}))};
}"""


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "the Python package playwright is not installed (tests/install.sh)"
    if not shutil.which(CHROMIUM):
        return f"{CHROMIUM} is missing: apt-get install chromium (tests/install.sh)"
    if not shutil.which("fc-list") or "CJK" not in subprocess.run(["fc-list", ":lang=zh"], capture_output=True,
                                                                  text=True).stdout:
        return "no CJK font: apt-get install fonts-noto-cjk (tests/install.sh), or Chinese renders as boxes"
    return None


@contextlib.contextmanager
def browser_page():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=VIEWPORT, accept_downloads=True)
            page.set_default_timeout(60_000)
            yield page
        finally:
            browser.close()


def open_app(page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("#step-btn")


def plot(page, elem_id: str) -> dict | None:
    """The plotly data of the figure inside ``#elem_id`` as drawn in the page."""
    return page.evaluate(PLOT_JS, elem_id)


def wait_for_plot(page, elem_id: str, condition_js: str, timeout_ms: int = 60_000) -> dict:
    """Wait until ``condition_js`` (an expression over ``p``, the result of PLOT_JS) holds."""
    page.wait_for_function(f"id => {{ const p = ({PLOT_JS})(id); return p && ({condition_js}); }}", arg=elem_id,
                           timeout=timeout_ms)
    return plot(page, elem_id)


def open_tab(page, tab: str) -> None:
    page.click(f"#tab-{tab}-button")
    page.wait_for_timeout(300)


def set_language(page, label: str) -> None:
    page.click(f"#lang-toggle label:has-text('{label}')")


def step(page, times: int, timeout_ms: int = 60_000) -> None:
    """Press Step ``times`` times, each time waiting for the live plots to show the new step."""
    for _ in range(times):
        data = (plot(page, "step-live") or {}).get("data") or [{}]  # empty after a reset
        before = data[0].get("x") or []
        page.click("#step-btn")
        wait_for_plot(page, "step-live", f"p.data[0] && p.data[0].x && p.data[0].x.length == {len(before) + 1}",
                      timeout_ms)
    page.wait_for_timeout(400)


def step_auto(page, times: int) -> list[str]:
    """Reset Step by step, let the goodput controller choose (the auto box), press Step ``times``
    times; returns the why-line of each step as the page shows it."""
    open_tab(page, "step")
    page.click("#reset-btn")
    page.wait_for_timeout(400)
    page.locator("#step-auto input").set_checked(True)
    lines = []
    for i in range(times):
        step(page, 1, 300_000 if i == 0 else 60_000)  # the first auto run on a machine measures v(n) first
        why = page.locator("#step-sentence .sdl-why")
        lines.append(why.inner_text().strip() if why.count() and why.is_visible() else "")
    return lines


def table_rows(page, elem_id: str) -> list[list[str]]:
    """The body rows of a Gradio Dataframe, as the cells' text."""
    return page.evaluate("""id => Array.from(document.querySelectorAll('#' + id + ' [role=row]'))
        .map(row => Array.from(row.querySelectorAll('[role=gridcell]')).map(cell => cell.innerText.trim()))
        .filter(cells => cells.length)""", elem_id)


def run_compare(page, drafters: list[str] | None, shapes: str, max_new_tokens: int, repeats: int | None = None,
                timeout_ms: int = 300_000) -> list[list[str]]:
    """Compare ``drafters`` (None: every drafter the page offers) and the baseline in ``shapes``, timed
    ``repeats`` rounds (None: the page's default); wait until all have run."""
    open_tab(page, "compare")
    for label in page.locator("#cmp-drafters label").all():
        label.locator("input").set_checked(drafters is None or label.inner_text().strip() in drafters)
    page.fill("#cmp-shapes textarea, #cmp-shapes input", shapes)
    page.fill("#cmp-max-new input", str(max_new_tokens))
    if repeats is not None:
        page.fill("#cmp-repeats input", str(repeats))
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    before = page.inner_text("#cmp-status")  # a run before this one may have said done already
    page.click("#cmp-run")
    with contextlib.suppress(PlaywrightTimeout):  # this run's progress replaces it (unless it is done at once)
        page.wait_for_function("b => document.querySelector('#cmp-status').innerText !== b", arg=before,
                               timeout=10_000)
    page.wait_for_function("""() => { const s = document.querySelector('#cmp-status').innerText;
                                      return s.includes('完成') || s.includes('Done:'); }""", timeout=timeout_ms)
    page.wait_for_timeout(500)
    return table_rows(page, "cmp-table")


PREDICT_STEP_JS = """() => { const div = document.querySelector('#predict-tree .js-plotly-plot');
  const title = div && div.layout && div.layout.title ? div.layout.title.text || '' : '';
  const found = title.match(/第 (\\d+) 步|Step (\\d+)/); return found ? +(found[1] || found[2]) : 0; }"""
PREDICT_FINISHED = ("已经结束", "is finished")


def predict_next(page, presses: int = 40, timeout_ms: int = 60_000) -> int:
    """Press the classroom's "Next step: guess first" until a step that drafted something is being guessed
    (a finished run: pressed again, for a new one); the step's number (1-based) in its run."""
    for _ in range(presses):
        before = page.evaluate(PREDICT_STEP_JS)
        told = any(word in page.inner_text("#predict-score") for word in PREDICT_FINISHED)
        page.click("#predict-next")
        page.wait_for_function(f"""([before, told]) => ({PREDICT_STEP_JS})() !== before || (!told &&
            /{'|'.join(PREDICT_FINISHED)}/.test(document.querySelector('#predict-score').innerText))""",
                               arg=[before, told], timeout=timeout_ms)
        page.wait_for_timeout(300)
        shown = page.evaluate(PREDICT_STEP_JS)
        drafted = page.locator("#predict-choices input, #predict-reject input, #predict-count input").count()
        if shown not in (0, before) and drafted:  # the asked question has choices: the step drafted something
            return shown
    raise AssertionError(f"no drafted step to guess after {presses} presses")


def choose(page, elem_id: str, value: str) -> None:
    """Pick ``value`` in a dropdown: that option exactly (Gemma's list also has draft-xs and draft-l)."""
    page.locator(f"#{elem_id} input").click()
    page.get_by_role("option", name=value, exact=True).click()
    page.wait_for_function("([id, v]) => document.querySelector('#' + id + ' input').value === v", arg=[elem_id, value])


def set_number(page, elem_id: str, value) -> None:
    page.fill(f"#{elem_id} input[type=number]", str(value))
    page.keyboard.press("Tab")


def downloaded_trace(page, tmp_path):
    """Step by step's run, stopped, downloaded and read back (``core.read_trace``)."""
    from core import read_trace

    page.click("#stop-btn")
    page.wait_for_timeout(800)
    with page.expect_download() as download:
        page.click("#step-download")
    path = tmp_path / "trace.jsonl"
    download.value.save_as(path)
    return read_trace(path)
