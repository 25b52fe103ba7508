"""Take the README screenshots from the real app on the tiny preset: one PNG per view.

    python tests/screenshots.py [--out docs/screenshots]

Starts ``python app.py --preset tiny`` on a free port, drives it in headless Chromium, and writes
step-by-step.png, compare.png, classroom.png, worth-it.png, replay.png (and step-by-step-en.png,
step-by-step-eagle3.png, monitor.png: the Production monitor on the app's own /metrics over all of it).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app_driver import browser_page, missing_browser, open_app, open_tab, run_compare, set_language, step, \
    wait_for_plot
from app_server import ROOT, TINY_MISSING, TINY_READY, running_app

EXAMPLE_TRACE = ROOT / "assets" / "traces" / "example-tiny.jsonl"
STEP_PROMPT = "It is a truth universally acknowledged"


def take(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with running_app("tiny") as url, browser_page() as page:
        open_app(page, url)
        start_monitor(page)

        def shot(name: str) -> None:
            page.wait_for_timeout(600)
            page.screenshot(path=out / f"{name}.png", full_page=True)
            print(out / f"{name}.png")

        page.fill("#step-prompt textarea", STEP_PROMPT)
        step(page, 6)
        shot("step-by-step")

        run_compare(page, None, "4, 2x3", max_new_tokens=48)
        shot("compare")

        open_tab(page, "classroom")
        page.click("#lesson-next")
        wait_for_plot(page, "lesson-figure", "p.data.some(t => t.text && t.text.includes('EOS'))")
        page.click("#lesson-next")
        wait_for_plot(page, "lesson-figure", "p.data.some(t => t.text && t.text.includes('华'))")
        for n in range(1, 4):
            page.click("#lesson-step")
            wait_for_plot(page, "lesson-tree", f"p.title.includes('第 {n} 步')")
        shot("classroom")

        open_tab(page, "worth")
        wait_for_plot(page, "worth-plot", "p.data.some(t => t.name == '本会话实测')")
        shot("worth-it")

        open_tab(page, "replay")
        page.set_input_files("#replay-upload input[type=file]", str(EXAMPLE_TRACE))
        page.wait_for_selector("#replay-header strong")
        for n in range(2, 6):  # a button ignores clicks while its last one is pending: wait for each
            page.click("#replay-next")
            wait_for_plot(page, "replay-tree", f"p.title.includes('第 {n} 步')")
        shot("replay")

        set_language(page, "English")
        open_tab(page, "step")
        page.wait_for_function("document.querySelector('#step-sentence').innerText.includes('Step 6')")
        shot("step-by-step-en")

        page.click("#reset-btn")  # EAGLE-3's dynamic tree: the kept nodes and, faded, what was pruned
        page.click("#step-drafter input")
        page.get_by_role("option", name="eagle3", exact=True).click()
        page.fill("#step-width input", "3")
        page.fill("#step-eagle-n input", "10")
        page.fill("#step-prompt textarea", "床前明月光，")
        step(page, 2)
        shot("step-by-step-eagle3")

        open_tab(page, "monitor")
        wait_for_plot(page, "mon-plot", "p.data.length > 4")
        shot("monitor")


def start_monitor(page) -> None:
    """Watch the app's own /metrics, one window a second, while the other views run."""
    open_tab(page, "monitor")
    page.fill("#mon-interval input", "1")
    page.click("#mon-start")
    page.wait_for_function("() => document.querySelector('#mon-status').innerText.includes('/metrics')")
    open_tab(page, "step")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    reason = None if TINY_READY else TINY_MISSING
    reason = reason or missing_browser()
    if reason:
        print(f"cannot take screenshots: {reason}", file=sys.stderr)
        return 1
    take(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
