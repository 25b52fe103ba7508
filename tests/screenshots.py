"""Take the README screenshots from the real app (``--preset``, tiny by default): one PNG per view.

    python tests/screenshots.py [--out docs/screenshots]

Starts ``python app.py --preset tiny`` on a free port, drives it in headless Chromium, and writes
step-by-step.png, compare.png, classroom.png, worth-it.png, batch-size.png (the preset's shipped
sweep), replay.png (and step-by-step-en.png, step-by-step-eagle3.png, monitor.png: the Production
monitor on the app's own /metrics over all of it), serving.png. ``--only serving`` takes serving.png alone,
``--only batch`` batch-size-<preset>.png (``--preset`` picks the model it runs on).
``--only quantization --preset gemma-270m`` takes worth-it-precisions-<preset>.png (Worth it? with the
float32 and int8 targets' v(n), after a short Compare at each precision) and classroom-quantization.png;
``--only parallel --preset gemma-270m`` timeline-peagle-<preset>.png (Compare's lanes of eagle3 and peagle,
k = 5: five drafting forwards a step against one) and classroom-parallel.png.
``--only exercises --preset gemma-270m`` takes the Classroom's predict-mode questions, each answered and revealed:
exercise-reject.png (which drafted token the target refuses first), exercise-count.png (how many tokens the step
writes) and exercise-batch.png (whether the drafter still pays at the shipped sweep's largest batch).
``--only animation --preset gemma-270m`` animated-step.png: Step by step's animated step at a phone's width, its
frames side by side (tests/screenshot_animation.py).
``--only anatomy --preset gemma-270m`` anatomy-medusa.png, anatomy-eagle2.png, anatomy-eagle3-fusion.png,
anatomy-ttt.png and anatomy-hybrid.png: Step by step's drafter-anatomy scenes (tests/screenshot_anatomy.py).
``--only phone --preset gemma-270m`` phone-step.png and phone-classroom.png (390 px wide) and
tree-encoding-<preset>.png (tests/screenshot_phone.py).
``--only vllm-serve`` takes monitor-vllm-serve.png: the monitor on a real ``vllm serve`` of the tiny target
and its exported EAGLE-3 (``python -m core vllm setup`` first; tests/vllm_serving.py); with ``--preset gemma-270m``
monitor-vllm-serve-gemma-270m.png, Gemma 3 and its exported EAGLE-3 served through the lab's vLLM plugin.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from app_driver import (browser_page, missing_browser, open_app, open_tab, predict_next, run_compare, set_language,
                        step, wait_for_plot)
from app_server import ROOT, TINY_MISSING, TINY_READY, running_app
from screenshot_phone import take_phone
from screenshot_anatomy import take_anatomy
from screenshot_animation import take_animation
from vllm_serving import eagle3_server, export_drafter, watch_requests

from app.i18n import t
from core.models.prompts import load_prompts

TRACES = ROOT / "assets" / "traces"
STEP_PROMPT = "It is a truth universally acknowledged"
AUTO_PROMPT = "床前明月光，"  # one where drafting pays, so the controller drafts and says how deep
SERVING_QUEUE = "6 | 我爱\n14 | It is a truth universally acknowledged\n4 | 床前明月光，\n10 | The quick brown fox\n8 | 春眠不觉晓，"
SERVING_MIN_STEPS, SERVING_MAX_STEPS = 8, 24
FREED_JS = """() => { const div = document.querySelector('#serve-kv .js-plotly-plot');
  return !!div && div.data.some(t => t.name === '本步写入后释放' && t.x && t.x.length > 0); }"""


def take_serving(page, out: Path) -> None:
    """In a serving engine: five requests, at most two at once, stepped until requests have left and
    joined and the current step returned a rejected path's slots (red in the KV grids)."""
    open_tab(page, "serving")
    page.fill("#serve-requests textarea", SERVING_QUEUE)
    page.fill("#serve-k input", "3")
    for n in range(1, SERVING_MAX_STEPS + 1):
        page.click("#serve-step")
        page.wait_for_function(f"document.querySelector('#serve-status').innerText.startsWith('第 {n} 步')",
                               timeout=300_000)
        page.wait_for_timeout(500)
        if n >= SERVING_MIN_STEPS and page.evaluate(FREED_JS):
            break
    page.wait_for_timeout(1000)
    page.screenshot(path=out / "serving.png", full_page=True)
    print(out / "serving.png")


def take_batch(page, out: Path, name: str) -> None:
    """The Batch size view on the preset's shipped sweep (tiny's has vLLM-CPU's series beside the lab's)."""
    open_tab(page, "batch")
    page.click("#batch-example")
    wait_for_plot(page, "batch-plot", "p.data.some(t => t.name == 'ngram')")
    page.wait_for_timeout(600)
    page.screenshot(path=out / f"{name}.png", full_page=True)
    print(out / f"{name}.png")


def take_vllm_serve(out: Path, preset: str = "tiny") -> None:
    """All 16 held-out prompts (the test sends 8): more windows in the picture. Prints the page's summary
    beside what vLLM's /metrics counted."""
    shot = out / ("monitor-vllm-serve.png" if preset == "tiny" else f"monitor-vllm-serve-{preset}.png")
    with tempfile.TemporaryDirectory() as folder, browser_page() as page:
        with eagle3_server(export_drafter(Path(folder) / "eagle3", preset), preset=preset) as server:
            watched = watch_requests(page, server, screenshot=shot, prompts=load_prompts())
    print(shot)
    print(f"the page: {watched.summary}\n/metrics: {watched.metrics.summary()}")


def shot_between(page, first: str, last: str, path: Path) -> None:
    """A full-page screenshot cut to the elements ``#first`` down to ``#last`` (a scene: its title, plot and caption)."""
    page.locator(f"#{first}").scroll_into_view_if_needed()
    page.wait_for_timeout(800)
    top, bottom = page.locator(f"#{first}").bounding_box(), page.locator(f"#{last}").bounding_box()
    scroll = page.evaluate("window.scrollY")
    left, right = min(top["x"], bottom["x"]), max(top["x"] + top["width"], bottom["x"] + bottom["width"])
    page.screenshot(path=path, full_page=True, clip={"x": left, "y": top["y"] + scroll, "width": right - left,
                                                    "height": bottom["y"] + bottom["height"] - top["y"]})
    print(path)


def take_quantization(page, out: Path, preset: str) -> None:
    """A short Compare at each target precision (each measures its v(n) for the session), then Worth it?
    drawing both curves with int8 chosen, and the Classroom's quantization-against-speculation scene."""
    for precision in ("float32", "int8"):
        open_tab(page, "compare")
        page.locator("#cmp-precision label", has_text=precision).click()
        run_compare(page, ["ngram"], "4", max_new_tokens=16, repeats=1, timeout_ms=900_000)
    open_tab(page, "worth")
    page.locator("#worth-precision label", has_text="int8").click()
    wait_for_plot(page, "worth-plot", "p.data.filter(t => t.name && t.name.includes('v(n)') || "
                                      "t.name && t.name.includes('本机测得')).length >= 2")
    page.wait_for_timeout(800)
    page.screenshot(path=out / f"worth-it-precisions-{preset}.png", full_page=True)
    print(out / f"worth-it-precisions-{preset}.png")
    open_tab(page, "classroom")
    shot_between(page, "lesson-quant", "lesson-quant-caption", out / "classroom-quantization.png")


def take_parallel(page, out: Path, preset: str) -> None:
    """Compare's timeline of EAGLE-3 and P-EAGLE chains of 5 (each drafting bar cut per drafter forward:
    five pieces against one) and the Classroom's parallel-drafting scene."""
    run_compare(page, ["eagle3", "peagle"], "5", max_new_tokens=12, repeats=2, timeout_ms=900_000)  # wide bars
    timeline = page.locator("#cmp-timeline")
    timeline.scroll_into_view_if_needed()
    page.wait_for_timeout(800)
    timeline.screenshot(path=out / f"timeline-peagle-{preset}.png")
    print(out / f"timeline-peagle-{preset}.png")
    open_tab(page, "classroom")
    shot_between(page, "lesson-parallel", "lesson-parallel-caption", out / "classroom-parallel.png")


def take_exercises(page, out: Path) -> None:
    """Predict mode on the live run, in Chinese: the reject and count questions each asked of a drafted step,
    answered (the second choice: a guess, right or wrong) and revealed; then the batch question answered."""
    open_tab(page, "classroom")
    for kind in ("reject", "count"):
        page.locator("#predict-kind label", has_text=t(f"predict.kind_{kind}", "zh")).click()
        page.wait_for_timeout(500)
        predict_next(page, timeout_ms=300_000)
        page.locator(f"#predict-{kind} label").nth(1).click()
        page.click("#predict-reveal")
        page.wait_for_function("() => /猜对了|没猜对|不计分/.test(document.querySelector('#predict-score').innerText)")
        shot_between(page, "predict-next", "predict-tree", out / f"exercise-{kind}.png")
    page.locator("#predict-batch-guess label").first.click()
    page.wait_for_function("() => document.querySelector('#predict-batch-a').innerText.includes('实测')")
    shot_between(page, "predict-batch-q", "predict-batch-a", out / "exercise-batch.png")


def take(out: Path, only: str | None = None, preset: str = "tiny") -> None:
    out.mkdir(parents=True, exist_ok=True)
    if only == "vllm-serve":
        take_vllm_serve(out, preset)
        return
    with running_app(preset, timeout_s=300) as url, browser_page() as page:
        open_app(page, url)
        if only == "serving":
            take_serving(page, out)
            return
        if only == "batch":
            take_batch(page, out, f"batch-size-{preset}")
            return
        if only == "quantization":
            take_quantization(page, out, preset)
            return
        if only == "phone":
            take_phone(page, out, preset)
            return
        if only == "parallel":
            take_parallel(page, out, preset)
            return
        if only == "animation":  # Step by step's animated step, its frames side by side (screenshot_animation.py)
            take_animation(page, out)
            return
        if only == "exercises":
            take_exercises(page, out)
            return
        if only == "anatomy":  # Step by step's drafter-anatomy scenes (screenshot_anatomy.py)
            take_anatomy(page, out, shot_between, step)
            return
        start_monitor(page)

        def shot(name: str) -> None:
            page.wait_for_timeout(600)
            page.screenshot(path=out / f"{name}.png", full_page=True)
            print(out / f"{name}.png")

        page.fill("#step-prompt textarea", STEP_PROMPT)
        step(page, 6)
        shot("step-by-step")

        if preset == "tiny":
            run_compare(page, None, "4, 2x3", max_new_tokens=48)
        else:  # a large model: the drafters that pay, and the controller's shape, in minutes not hours
            run_compare(page, ["ngram", "eagle3", "hybrid"], "4, auto", max_new_tokens=32, timeout_ms=900_000)
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

        take_batch(page, out, "batch-size")

        open_tab(page, "replay")
        trace = TRACES / ("example-gemma-270m.jsonl" if preset == "gemma-270m" else "example-tiny.jsonl")
        page.set_input_files("#replay-upload input[type=file]", str(trace))
        page.wait_for_selector("#replay-header strong")
        for n in range(2, 6):  # a button ignores clicks while its last one is pending: wait for each
            page.click("#replay-next")
            wait_for_plot(page, "replay-tree", f"p.title.includes('第 {n} 步')")
        shot("replay")

        set_language(page, "English")  # and the goodput controller: under each step, why it drafted that much
        open_tab(page, "step")
        page.wait_for_function("document.querySelector('#step-sentence').innerText.includes('Step 6')")
        page.click("#reset-btn")
        page.fill("#step-prompt textarea", AUTO_PROMPT)
        page.locator("#step-auto input").set_checked(True)
        step(page, 4)
        shot("step-by-step-en")

        page.click("#reset-btn")  # EAGLE-3's dynamic tree: the kept nodes and, faded, what was pruned
        page.locator("#step-auto input").set_checked(False)
        page.click("#step-drafter input")
        page.get_by_role("option", name="eagle3", exact=True).click()
        page.fill("#step-width input", "3")
        page.fill("#step-eagle-n input", "10")
        page.fill("#step-prompt textarea", "床前明月光，")
        step(page, 2)
        shot("step-by-step-eagle3")

        set_language(page, "中文")
        take_serving(page, out)
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
    parser.add_argument("--only", choices=["serving", "batch", "vllm-serve", "quantization", "parallel", "phone",
                                           "exercises", "animation", "anatomy"],
                        help="take only this view's screenshot (batch: batch-size-<preset>.png)")
    parser.add_argument("--preset", default="tiny", help="the model the app runs on (default tiny)")
    args = parser.parse_args()
    reason = None if TINY_READY else TINY_MISSING
    reason = reason or missing_browser()
    if reason:
        print(f"cannot take screenshots: {reason}", file=sys.stderr)
        return 1
    take(args.out, args.only, args.preset)
    return 0


if __name__ == "__main__":
    sys.exit(main())
