"""The Classroom's parallel-drafting scene reads the shipped EAGLE-3 / P-EAGLE run: its bars, curves and caption
are that bench.json's numbers, and a run without the rows it needs says so instead of drawing."""
from __future__ import annotations

import copy

import pytest

from app.i18n import t
from app.views.classroom.parallel import (AUTO_ROWS, DEPTHS, book_result, parallel_caption, parallel_figure,
                                          parallel_result)

RESULT = parallel_result()
pytestmark = pytest.mark.skipif(RESULT is None, reason="no shipped EAGLE-3 / P-EAGLE run")


def test_the_bars_and_curves_are_the_runs_numbers():
    fig = parallel_figure(RESULT, "en")
    rows = RESULT["drafters"]
    bars = {trace.name: list(trace.y) for trace in fig.data if trace.type == "bar"}
    curves = {trace.legendgroup: list(trace.y) for trace in fig.data if trace.type == "scatter"}
    for name in ("eagle3", "peagle"):
        assert bars[name] == [rows[f"{name}:{k}"]["draft_ms"] for k in DEPTHS]
        assert curves[name] == rows[f"{name}:{DEPTHS[-1]}"]["per_position_acceptance"]
    assert bars["peagle"][1] < bars["eagle3"][1]  # one forward a step drafts faster than five


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_caption_says_the_runs_times_and_its_best_drafter(lang):
    rows = RESULT["drafters"]
    caption = parallel_caption(RESULT, lang)
    assert f"{rows['eagle3:5']['draft_ms']:.1f}" in caption and f"{rows['peagle:5']['draft_ms']:.1f}" in caption
    assert RESULT["hardware"] in caption
    best = max((name for name in AUTO_ROWS if name in rows), key=lambda name: rows[name]["speedup"])
    assert caption.rstrip("。.").endswith(best)
    for name in AUTO_ROWS:
        assert f"{name} {rows[name]['speedup']:.2f}×" in caption


def test_a_run_without_the_k5_chains_is_not_drawn_as_if_it_had_them():
    partial = copy.deepcopy(RESULT)
    del partial["drafters"]["peagle:5"]
    assert parallel_caption(partial, "en") == t("par.none", "en")
    assert parallel_caption(None, "zh") == t("par.none", "zh")
    assert parallel_figure(None, "en").data == ()


@pytest.mark.skipif(book_result() is None, reason="no shipped book-style run")
def test_the_book_style_runs_speedups_follow_in_the_caption():
    book = book_result()
    caption = parallel_caption(RESULT, "en", book)
    assert caption.startswith(parallel_caption(RESULT, "en"))
    tail = caption[len(parallel_caption(RESULT, "en")):]
    assert "book-style" in tail
    for name in AUTO_ROWS:
        assert f"{name} {book['drafters'][name]['speedup']:.2f}×" in tail
