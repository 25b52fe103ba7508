"""The phone screenshots (``python tests/screenshots.py --only phone --preset gemma-270m``): Step by step and the
Classroom at 390 px (phone-step.png, phone-classroom.png: every figure fits or shows the scroll cue, the
Classroom's first scene whole), and, at the desktop's width, a sampled ``draft`` step's tree whose boxes are
sized by the target's entropy and faded by min(1, p/q) (tree-encoding-<preset>.png)."""
from __future__ import annotations

from pathlib import Path

from app_driver import VIEWPORT, step
from test_lesson_browser import choose, set_number

PHONE = {"width": 390, "height": 844}
TABS = ".tab-wrapper [role=tablist] button, .tab-wrapper .overflow-dropdown button"


def take_phone(page, out: Path, preset: str) -> None:
    page.click("#reset-btn")
    choose(page, "step-drafter", "draft")
    set_number(page, "step-k", 4)
    set_number(page, "step-temperature", 0.8)
    step(page, 3, 300_000)
    page.locator("#step-tree").screenshot(path=out / f"tree-encoding-{preset}.png")
    print(out / f"tree-encoding-{preset}.png")
    page.set_viewport_size(PHONE)
    page.wait_for_timeout(1500)  # the plots redraw at the new width, page.js marks the wide ones
    page.screenshot(path=out / "phone-step.png", full_page=True)
    print(out / "phone-step.png")
    page.locator(TABS, has_text="课堂").first.click()
    page.wait_for_timeout(1500)
    page.screenshot(path=out / "phone-classroom.png", full_page=True)
    print(out / "phone-classroom.png")
    page.set_viewport_size(VIEWPORT)
