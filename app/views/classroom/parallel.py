"""The classroom's scene on autoregressive against parallel drafting, drawn from a shipped bench result
(``python -m core bench --drafters ...,eagle3:K,peagle:K,...``, docs/drafters.md "P-EAGLE"): EAGLE-3
drafts a k-token chain in k drafter forwards, P-EAGLE in one, so its drafting time stays flat in k
(left); but each of its depths is guessed without the tokens before it, so its acceptance falls faster
with depth (right). The caption reads both off the run and says which way the trade went on that CPU."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...figures.style import finish
from ...i18n import t
from ...palette import drafter_color

BENCHMARKS = Path(__file__).resolve().parents[3] / "docs" / "benchmarks"
PARALLEL_RESULT = BENCHMARKS / "gemma-cpu-peagle-chat" / "bench.json"  # chat-style prompts: the figure's
BOOK_RESULT = BENCHMARKS / "gemma-cpu-peagle-heldout" / "bench.json"  # the same drafters on book-style prompts
DRAFTERS = ("eagle3", "peagle")
DEPTHS = (3, 5, 8)  # the fixed chains the run timed
AUTO_ROWS = ("eagle3:auto", "peagle:auto", "hybrid:auto", "hybrid-peagle:auto")


def _read(path: Path) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


@lru_cache(maxsize=1)
def parallel_result() -> dict | None:
    """The shipped EAGLE-3-against-P-EAGLE bench result on chat-style prompts, if there is one."""
    return _read(PARALLEL_RESULT)


@lru_cache(maxsize=1)
def book_result() -> dict | None:
    """The same comparison on book-style prompts, if it was run."""
    return _read(BOOK_RESULT)


def auto_speedups(result: dict) -> dict[str, float]:
    """Speedup over ``none`` of each controller-driven row the run has (EAGLE-3, P-EAGLE, each in hybrid)."""
    return {name: result["drafters"][name]["speedup"] for name in AUTO_ROWS if name in result["drafters"]}


def draft_ms(result: dict) -> dict[str, dict[int, float]]:
    """Per drafter: mean drafting milliseconds per drafting step of each fixed chain depth the run has."""
    rows = result["drafters"]
    return {name: {k: rows[f"{name}:{k}"]["draft_ms"] for k in DEPTHS
                   if rows.get(f"{name}:{k}", {}).get("draft_ms") is not None} for name in DRAFTERS}


def acceptance(result: dict, k: int = DEPTHS[-1]) -> dict[str, list[float]]:
    """Per drafter: acceptance by position of its k-chain (the share of drafting steps that kept depth d)."""
    rows = result["drafters"]
    return {name: rows[f"{name}:{k}"]["per_position_acceptance"] for name in DRAFTERS
            if rows.get(f"{name}:{k}", {}).get("per_position_acceptance")}


def parallel_figure(result: dict | None, lang: str) -> go.Figure:
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.14,
                        subplot_titles=(t("par.plot_draft", lang), t("par.plot_accept", lang)))
    if result is None:
        return finish(fig, t("par.none", lang), 380)
    for name, by_k in draft_ms(result).items():
        fig.add_trace(go.Bar(x=[f"k={k}" for k in by_k], y=list(by_k.values()), name=name,
                             marker_color=drafter_color(name), text=[f"{v:.1f}" for v in by_k.values()],
                             textposition="outside", legendgroup=name), 1, 1)
    for name, rates in acceptance(result).items():
        fig.add_trace(go.Scatter(x=list(range(1, len(rates) + 1)), y=rates, mode="lines+markers", name=name,
                                 line={"color": drafter_color(name), "width": 3 if name == "peagle" else 2},
                                 legendgroup=name, showlegend=False), 1, 2)
    tallest = max((v for by_k in draft_ms(result).values() for v in by_k.values()), default=1.0)
    fig.update_yaxes(title=t("par.axis_draft", lang), range=[0, tallest * 1.15], row=1, col=1)  # room for the labels
    fig.update_xaxes(title=t("par.axis_depth", lang), dtick=1, row=1, col=2)
    fig.update_yaxes(title=t("par.axis_accept", lang), range=[0, 1], row=1, col=2)
    fig.update_layout(barmode="group")
    return finish(fig, "", 400, below=True)


def _listed(speedups: dict[str, float]) -> tuple[str, str]:
    """("name 1.23×, ...", the fastest name)."""
    return (", ".join(f"{name} {value:.2f}×" for name, value in speedups.items()),
            max(speedups, key=speedups.get) if speedups else "–")


def parallel_caption(result: dict | None, lang: str, book: dict | None = None) -> str:
    """How much cheaper one parallel forward drafts at k = 5, what it costs at depth, and the speedups
    (chat-style prompts; with ``book``, the same controller rows on book-style prompts after them)."""
    if result is None:
        return t("par.none", lang)
    ms, rates = draft_ms(result), acceptance(result)
    if not all(5 in ms.get(name, {}) for name in DRAFTERS) or set(rates) != set(DRAFTERS):
        return t("par.none", lang)
    speedups, best = _listed(auto_speedups(result))
    deep = min(4, len(rates["eagle3"]), len(rates["peagle"])) - 1
    caption = t("par.caption", lang, hardware=result.get("hardware", "–"), e_ms=ms["eagle3"][5], p_ms=ms["peagle"][5],
                share=ms["peagle"][5] / ms["eagle3"][5], e1=rates["eagle3"][0], p1=rates["peagle"][0], depth=deep + 1,
                e_deep=rates["eagle3"][deep], p_deep=rates["peagle"][deep], speedups=speedups, best=best)
    book_rows = auto_speedups(book) if book is not None else {}
    if book_rows:
        book_speedups, book_best = _listed(book_rows)
        caption += " " + t("par.caption_book", lang, speedups=book_speedups, best=book_best)
    return caption
