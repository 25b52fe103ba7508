"""The drafter-anatomy screenshots of docs/app.md (``python tests/screenshots.py --only anatomy --preset
gemma-270m``): Step by step's "inside the drafter" panel, each scene with its caption, after real steps --
anatomy-medusa.png (Medusa's heads and the 2x3 tree cut from them), anatomy-eagle2.png (EAGLE-2's scored
candidates), anatomy-eagle3-fusion.png (the layers EAGLE-3 fuses, its draft vocabulary, its rolling forward),
anatomy-ttt.png (the training-time test and its measured acceptance by depth) and anatomy-hybrid.png (a hybrid
tree whose branches came from both proposers)."""
from __future__ import annotations

from pathlib import Path

PROMPT = "床前明月光，疑是地上霜。举头望明月，低头思故乡。床前明月光，"  # a line that repeats: n-gram lookup finds it
HYBRID_MAX_STEPS = 12
BOTH_JS = """() => { const d = document.querySelector('#step-anatomy-0 .js-plotly-plot');
  return !!d && d.data.filter(t => t.customdata && t.hovertemplate && t.mode === 'markers+text').length >= 2; }"""


def _start(page, drafter: str, k: int, width: int, nodes: int | None = None) -> None:
    page.click("#reset-btn")  # then wait until the page shows no run: ``step`` counts the live plot's points
    page.wait_for_function("() => document.querySelector('#step-status').innerText.trim() === ''")
    page.fill("#step-prompt textarea", PROMPT)
    page.locator("#step-drafter input").click()
    page.get_by_role("option", name=drafter, exact=True).click()
    for elem_id, value in (("step-k", k), ("step-width", width), ("step-eagle-n", nodes)):
        if value is not None:
            page.fill(f"#{elem_id} input[type=number]", str(value))
            page.keyboard.press("Tab")


def take_anatomy(page, out: Path, shot_between, step) -> None:
    """``shot_between`` and ``step``: tests/screenshots.py's and tests/app_driver.py's."""
    def scene(i: int, name: str) -> None:
        shot_between(page, f"step-anatomy-{i}", f"step-anatomy-caption-{i}", out / f"anatomy-{name}.png")

    _start(page, "medusa", 3, 2)
    step(page, 2, 600_000)
    scene(0, "medusa")
    _start(page, "eagle3", 4, 3, nodes=10)
    step(page, 2, 600_000)
    scene(0, "eagle2")
    scene(1, "eagle3-fusion")
    scene(2, "ttt")
    _start(page, "hybrid", 4, 1)
    for _ in range(HYBRID_MAX_STEPS):  # until a step's tree holds both proposers' branches
        step(page, 1, 600_000)
        if page.evaluate(BOTH_JS):
            break
    scene(0, "hybrid")
