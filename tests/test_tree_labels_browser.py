"""No two labels of a drafted tree overlap as Chromium draws them (``python app.py --preset tiny``): the
nodes' tokens, their q · p lines, the target's correction, resample or bonus box, the depth axis's
numbers and the notes under it, read from the rendered SVG's boxes. Real steps: ``draft`` k=4 at
temperature 0.8 (a resample under a refused node's q · p line), ``eagle3`` trees of 24, 60 and 128
nodes (the 128-node one folded as the page folds it, and unfolded). The layout rule itself is pinned
without a browser in tests/test_tree_layout.py."""
from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from app_driver import browser_page, missing_browser, open_app, step, wait_for_plot
from app_server import TINY_MISSING, TINY_READY, running_app
from test_lesson_browser import choose, set_number

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
NEXT_KINDS = ("修正", "重采样", "奖励 token", "目标模型生成")  # the target's own token, by its legend name

pytestmark = [pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING),
              pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser()))]

# every label as drawn: a node's text (with its trace and point, so its own box is not counted against it),
# each annotation (q · p lines, notes), the depth numbers and the axis title, and the target token's box
LABELS_JS = """([id, kinds]) => {
  const root = document.querySelector('#' + id + ' .js-plotly-plot');
  const box = (e, what, own) => { const r = e.getBoundingClientRect();
    return {what, own, text: e.textContent, left: r.left, top: r.top, right: r.right, bottom: r.bottom, w: r.width}; };
  const out = [];
  root.querySelectorAll('.scatterlayer .trace').forEach((g, i) => {
    g.querySelectorAll('.textpoint text').forEach((e, j) => out.push(box(e, 'node', i + ':' + j)));
    const trace = g.__data__ && g.__data__[0] && g.__data__[0].trace;
    if (trace && kinds.some(k => (trace.name || '').startsWith(k)))
      g.querySelectorAll('.points path').forEach((e, j) => out.push(box(e, 'target box', i + ':' + j)));
  });
  root.querySelectorAll('.annotation-text').forEach(e => out.push(box(e, 'annotation', '')));
  root.querySelectorAll('.xtick text, .g-xtitle text').forEach(e => out.push(box(e, 'axis', '')));
  return out.filter(b => b.w > 0);
}"""


def overlapping(boxes: list[dict]) -> list[tuple[dict, dict]]:
    return [(a, b) for a, b in itertools.combinations(boxes, 2)
            if not (a["own"] and a["own"] == b["own"])
            and a["left"] < b["right"] - 0.5 and b["left"] < a["right"] - 0.5
            and a["top"] < b["bottom"] - 0.5 and b["top"] < a["bottom"] - 0.5]


@pytest.fixture(scope="module")
def page():
    ARTIFACTS.mkdir(exist_ok=True)
    with running_app("tiny", timeout_s=300, log_path=ARTIFACTS / "tree-labels-browser.log") as url, \
            browser_page() as browser_page_:
        open_app(browser_page_, url)
        yield browser_page_


def drafted_nodes(page) -> int:
    """The step's drafted nodes as the figure draws them: its boxes but the root and the target's token,
    plus what each "+N" box folds."""
    data = wait_for_plot(page, "step-tree", "p.data.length > 2")["data"]
    texts = [text for trace in data if trace["text"] and trace["name"] for text in trace["text"]]
    folded = sum(int(text[1:]) for text in texts if text.startswith("+") and text[1:].isdigit())
    return len(texts) - 2 - sum(text.startswith("+") and text[1:].isdigit() for text in texts) + folded


def labels_apart(page, name: str) -> list[dict]:
    page.wait_for_timeout(500)
    boxes = page.evaluate(LABELS_JS, ["step-tree", list(NEXT_KINDS)])
    assert any(b["what"] == "target box" for b in boxes) and any(b["what"] == "axis" for b in boxes)
    clash = overlapping(boxes)
    assert not clash, [(a["what"], a["text"], b["what"], b["text"]) for a, b in clash[:5]]
    page.locator("#step-tree").screenshot(path=ARTIFACTS / f"tree-labels-{name}.png")
    return boxes


def test_a_resample_under_a_refused_node_clears_its_q_p_line(page):
    page.click("#reset-btn")
    choose(page, "step-drafter", "draft")
    set_number(page, "step-k", 4)
    set_number(page, "step-temperature", 0.8)
    seen = 0
    for i in range(4):
        step(page, 1)
        boxes = labels_apart(page, f"draft-k4-step{i + 1}")
        seen += sum(b["what"] == "annotation" and b["text"].startswith("q ") for b in boxes)
    assert seen >= 4  # q · p lines were drawn and checked
    set_number(page, "step-temperature", 0)


@pytest.mark.parametrize("nodes", [24, 60, 128])
def test_eagle3_trees_keep_every_label_apart(page, nodes):
    page.click("#reset-btn")
    choose(page, "step-drafter", "eagle3")
    set_number(page, "step-k", 6)
    set_number(page, "step-width", 8)
    set_number(page, "step-eagle-n", nodes)
    page.locator("#step-expand input").set_checked(False)
    step(page, 1)
    assert drafted_nodes(page) == nodes
    labels_apart(page, f"eagle3-{nodes}")
    if nodes == 128:  # folded by default; unfolded too
        page.locator("#step-expand input").set_checked(True)
        wait_for_plot(page, "step-tree", f"p.data.reduce((n, t) => n + (t.text ? t.text.length : 0), 0) >= {nodes}")
        labels_apart(page, f"eagle3-{nodes}-unfolded")
        page.locator("#step-expand input").set_checked(False)
