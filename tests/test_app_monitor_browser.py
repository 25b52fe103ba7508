"""The Production monitor in headless Chromium, pointed at the app's own /metrics while a Compare
runs: its tau and per-position acceptance equal the engine's for the same runs."""
from __future__ import annotations

import pytest
from app_driver import browser_page, missing_browser, open_app, open_tab, plot, run_compare
from app_server import TINY_MISSING, TINY_READY, running_app

pytestmark = [pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING),
              pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser()))]

PROMPT = "It is a truth universally acknowledged"  # the Compare view's default prompt
ACCEPTED = "#2e9e44"  # app.palette: the per-position bars' colour


def test_monitor_shows_the_engines_tau_and_per_position_acceptance():
    from core import generate
    from core.records.metrics import tally

    with running_app("tiny") as url, browser_page() as page:
        open_app(page, url)
        open_tab(page, "monitor")
        assert page.input_value("#mon-url input, #mon-url textarea") == url + "metrics"
        page.fill("#mon-interval input", "1")
        page.click("#mon-start")
        page.wait_for_function("() => document.querySelector('#mon-status').innerText.includes('/metrics')")

        run_compare(page, ["eagle3"], "3", max_new_tokens=24, repeats=1)  # the baseline, then eagle3 k=3, timed once

        engine = tally(generate(PROMPT, preset="tiny", drafter="eagle3", k=3, max_new_tokens=24).steps)
        open_tab(page, "monitor")
        page.wait_for_function(f"""() => document.querySelector('#mon-summary').innerText
                                          .includes('τ {engine.mean_acceptance_length:.3f}')""", timeout=30_000)
        summary = page.inner_text("#mon-summary")
        per_position = " ".join(f"{p:.3f}" for p in engine.per_position_acceptance)
        assert per_position in summary and f"{engine.drafts} " in summary
        bars = next(trace for trace in plot(page, "mon-plot")["data"] if trace["color"] == ACCEPTED)
        assert bars["x"] == [1, 2, 3]
        assert bars["y"] == pytest.approx(engine.per_position_acceptance)
        assert "✅" not in page.inner_text("#mon-verdict")
        mark = page.evaluate("""() => { const m = document.createElement('span');  // the verdict's mark, drawn by CSS
            m.className = 'sdl-mark sdl-mark-yes'; document.querySelector('#mon-verdict').appendChild(m);
            const r = m.getBoundingClientRect(), tick = getComputedStyle(m, '::after');
            const out = [r.width, getComputedStyle(m).backgroundColor, tick.borderRightWidth]; m.remove(); return out; }""")
        assert mark[0] > 8 and mark[1] == "rgb(46, 158, 68)" and float(mark[2].rstrip("px")) > 0

        # an address that is no /metrics (the app's own /config, JSON): one line in the page's language,
        # and the last endpoint's plot and verdict are gone
        page.fill("#mon-url input, #mon-url textarea", url + "config")
        page.click("#mon-start")
        # the status may show Gradio's "queue: 1/1" overlay above the error for a frame: wait for the
        # line alone (a status that stays on several lines still fails below)
        page.wait_for_function("""() => { const t = document.querySelector('#mon-status').innerText.trim();
                                          return t.includes('不是 Prometheus 指标') && !t.includes('queue:'); }""",
                               timeout=10_000)
        status = page.inner_text("#mon-status").strip()
        assert "\n" not in status and "{" not in status and url + "config" in status
        # Gradio's own "queue: 1/1" overlay may sit on the outputs a frame longer than the status: wait it out
        page.wait_for_function("""() => ['#mon-verdict', '#mon-summary']
                                          .every(s => document.querySelector(s).innerText.trim() === '')""",
                               timeout=10_000)
        page.wait_for_function("""() => { const d = document.querySelector('#mon-plot .js-plotly-plot');
                                          return d && !d.data.some(t => t.type === 'bar'); }""")
