"""The screenshot of the animated step (``python tests/screenshots.py --only animation --preset gemma-270m``):
Step by step at a phone's width (390 px) with ``draft`` k=4, stepped until a step kept part of its draft and was
corrected; each frame of its animation (the slider's steps: draft, verify, accept, the target's token, KV
freed) shot in turn and laid side by side in docs/screenshots/animated-step.png."""
from __future__ import annotations

import io
from pathlib import Path

from app.palette import COLORS

PROMPT = "把“I love China”翻译成中文：我"  # the Classroom's opening: Gemma goes on with 爱中国
MAX_STEPS = 12
PHONE = {"width": 390, "height": 1000}
GAP_PX = 12
SHOWN_JS = """() => { const d = document.querySelector('#step-anim .js-plotly-plot');
  if (!d || !d.layout.sliders) return null;
  const frames = d.layout.sliders[0].steps.map(s => s.args[0][0]);
  return {names: frames.map(f => f.name), step: d.layout.meta.step, active: d.layout.sliders[0].active,
          kept: frames.length > 2 ? frames[2].data[3].marker.color.filter(c => c === '%s').length : 0}; }"""


def take_animation(page, out: Path) -> None:
    from PIL import Image

    page.set_viewport_size(PHONE)
    page.click("#reset-btn")
    page.fill("#step-prompt textarea", PROMPT)
    page.locator("#step-drafter input").click()
    page.get_by_role("option", name="draft", exact=True).click()
    page.fill("#step-k input", "4")
    page.fill("#step-width input", "1")
    shown_js = SHOWN_JS % COLORS["accepted"]
    for n in range(1, MAX_STEPS + 1):
        page.click("#step-btn")
        page.wait_for_function(f"() => {{ const s = ({shown_js})(); return s && s.step === {n}; }}", timeout=300_000)
        shown = page.evaluate(shown_js)
        if shown["kept"] > 0 and shown["names"][-2] == "correction":
            break
    figure = page.locator("#step-anim")
    figure.scroll_into_view_if_needed()
    shots = []
    for i in range(len(shown["names"])):
        label = page.locator("#step-anim .slider-label").nth(i)
        label.scroll_into_view_if_needed()
        box = label.bounding_box()  # the slider's rail takes the click, above its label
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] - 12)
        page.wait_for_function(f"() => ({shown_js})().active === {i}")
        page.mouse.move(0, 0)  # no hover label in the picture
        page.wait_for_timeout(500)
        shots.append(Image.open(io.BytesIO(figure.screenshot())))
    strip = Image.new("RGB", (sum(s.width for s in shots) + GAP_PX * (len(shots) - 1), max(s.height for s in shots)),
                      "white")
    x = 0
    for shot in shots:
        strip.paste(shot, (x, 0))
        x += shot.width + GAP_PX
    strip.save(out / "animated-step.png")
    print(out / "animated-step.png", f"step {shown['step']}:", " → ".join(shown["names"]))
