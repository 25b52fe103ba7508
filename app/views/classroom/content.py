"""The classroom's content: the article's 我爱中国 example as hand-made frames (an illustration,
not a model run), and the lesson text in ``assets/lesson/<lang>.md``.

The example follows the seed article (Chinese, "推测解码为什么能加速大模型推理"): the target alone
needs 4 forwards for 我→爱→中→国→EOS; the draft guesses 爱 中 国 EOS; if the first two guesses
are right and the third is wrong, one verify forward confirms two tokens and corrects the third.
"""
from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import plotly.graph_objects as go

from core.drafters.draft_model import DraftModelDrafter
from core.drafters.hybrid import HybridDrafter
from core.drafters.ngram import NgramDrafter
from core.drafters.none import NoDrafter
from core.records.steps import NodeRecord, StepRecord, TokenRecord

from ...figures.tree import TreeDrawing, draw_tree
from ...i18n import t
from .figures import forwards_bar, forwards_figure, serving_figure, serving_stages

LESSON_DIR = Path(__file__).resolve().parents[3] / "assets" / "lesson"
SEQUENCE = ["我", "爱", "中", "国", "EOS"]
ARTICLE_GUESS = ["爱", "中", "国", "EOS"]
WRONG_THIRD = "华"  # a stand-in for the third guess the article supposes is wrong (it names none)
MISSED_GUESS = ARTICLE_GUESS[:2] + [WRONG_THIRD] + ARTICLE_GUESS[3:]  # what the draft guessed, as drawn
# The live part's default: a request to translate "I love China", ending in 我. Gemma 3 270M writes
# 爱中国 next, as the illustration supposes, and then goes on (it does not loop the way a quoted
# “我爱中国” made it: 爱中国，我爱中国，…, where every guess is right and nothing is learnt); the
# English in the prompt is what n-gram lookup (and hybrid's n-gram branch) copies when Gemma quotes
# it, so the run shows both a step where the draft pays and steps where it misses. (The tiny pair,
# trained on poems, writes something else: the page then says why the run differs.)
LIVE_PROMPT = "把“I love China”翻译成中文：我"
ILLUSTRATED = "".join(SEQUENCE[1:4])  # what the illustration says comes after 我
FRAMES = 5  # the article's four moments, then the same step inside a serving engine (vLLM)


def _chain(tokens: list[str], statuses: list[str]) -> list[NodeRecord]:
    return [
        NodeRecord(id=i, token=-1, text=text, parent=i - 1, depth=i + 1, draft_prob=math.nan,
                   target_prob=math.nan, status=status, proposer=DraftModelDrafter.name)
        for i, (text, status) in enumerate(zip(tokens, statuses))
    ]


def frame_figure(frame: int, lang: str) -> go.Figure:
    """The picture of illustration frame ``frame`` (0-based)."""
    root = TokenRecord(token=-1, text=SEQUENCE[0], kind="root")
    if frame == 0:
        return forwards_figure(SEQUENCE, lang)
    if frame == 1:
        nodes = _chain(ARTICLE_GUESS, ["proposed"] * 4)
        return draw_tree(TreeDrawing(root, nodes), lang, t("lesson.f1_title", lang), show_probs=False)
    if frame == 2:
        nodes = _chain(MISSED_GUESS, ["accepted", "accepted", "rejected", "not_reached"])
        correction = TokenRecord(token=-1, text=SEQUENCE[3], kind="correction")
        return draw_tree(TreeDrawing(root, nodes, correction), lang, t("lesson.f2_title", lang), show_probs=False)
    if frame == 3:
        return forwards_bar([t("lesson.bar_alone", lang), t("lesson.bar_spec", lang)], [3, 1], lang,
                            t("lesson.f3_title", lang))
    return serving_figure(serving_stages([SEQUENCE[0]], MISSED_GUESS, accepted=2, correction=SEQUENCE[3]), lang)


def frame_caption(frame: int, lang: str) -> str:
    banner = f'<div class="sdl-illustration">{t("lesson.banner", lang)}</div>'
    return banner + "\n\n" + t(f"lesson.f{frame}_caption", lang, wrong=WRONG_THIRD)


def live_note(records: list[StepRecord], lang: str) -> str:
    """What the live run shows against the illustration: its best step, or why nothing was accepted;
    and, when the real model does not write 爱中国 next, that the illustration's guesses were made up."""
    if not records:
        return ""
    lines = [t("class.ledger", lang, tokens=records[-1].new_tokens_total, forwards=records[-1].target_forwards_total,
               saved=records[-1].new_tokens_total - records[-1].target_forwards_total)]
    best = max(records, key=lambda r: r.accepted_length)
    if best.accepted_length > 0:
        lines.append(t("class.best_step", lang, step=best.step + 1, accepted=best.accepted_length,
                       made=best.accepted_length + 1))
    else:
        lines.append(t("class.none_accepted", lang))
    if drafted := drafted_range(records, lang):
        lines.append(drafted)
    written = "".join(token.text for r in records for token in r.emitted).strip()
    if written and not (ILLUSTRATED.startswith(written) or written.startswith(ILLUSTRATED)):
        lines.append(t("class.differs", lang, text=written[:24], expected=ILLUSTRATED))
    return "\n\n".join(lines)


def drafting_sentence(drafter: str, k: int, lang: str) -> str:
    """What ``drafter`` drafts per step at depth ``k`` in the live run, in words (Part 2's shape line).
    Only upper bounds, which no run contradicts: a step drafts fewer as the token budget runs out, or
    none. A chain of up to k for the model drafters, up to k copied tokens for n-gram lookup, and for
    hybrid a tree of at most 2k nodes (its n-gram chain and EAGLE-3's chain merged, shared prefixes
    kept once). What the run really drafted is ``drafted_range``'s."""
    if drafter == NoDrafter.name:
        return t("class.shape_none", lang)
    if drafter == NgramDrafter.name:
        return t("class.shape_ngram", lang, k=k)
    if drafter == HybridDrafter.name:
        return t("class.shape_hybrid", lang, most=2 * k)
    return t("class.shape_chain", lang, drafter=drafter, k=k)


def drafted_range(records: list[StepRecord], lang: str) -> str:
    """How many tokens the run really drafted per drafting step, and how many steps drafted nothing
    ("" before any drafted)."""
    sizes = [len(r.nodes) for r in records if r.nodes]
    if not sizes:
        return ""
    if min(sizes) == max(sizes):
        line = t("class.drafted_one", lang, low=sizes[0], steps=len(sizes))
    else:
        line = t("class.drafted", lang, low=min(sizes), high=max(sizes), steps=len(sizes))
    if none := len(records) - len(sizes):
        line += " " + t("class.drafted_none", lang, n=none)
    return line


@lru_cache(maxsize=None)
def lesson_text(lang: str) -> str:
    """The written lesson (acceptance, draft cost, Medusa, EAGLE, EAGLE-3, batch size, four questions)."""
    return (LESSON_DIR / f"{lang}.md").read_text(encoding="utf-8")
