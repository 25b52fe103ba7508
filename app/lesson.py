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
from core.records.steps import NodeRecord, StepRecord, TokenRecord

from .figures.lesson import forwards_bar, forwards_figure
from .figures.tree import TreeDrawing, draw_tree
from .i18n import t

LESSON_DIR = Path(__file__).resolve().parent.parent / "assets" / "lesson"
SEQUENCE = ["我", "爱", "中", "国", "EOS"]
ARTICLE_GUESS = ["爱", "中", "国", "EOS"]
WRONG_THIRD = "华"  # a stand-in for the third guess the article supposes is wrong (it names none)
# The live part's default: the article's sentence quoted, then its first character. Gemma 3 270M
# continues it with 爱中国, and the quote gives the n-gram and learned drafters something to get
# right, so its first steps accept several tokens at once. (The tiny pair, trained on poems, writes
# something else: the page then says why the run differs from the illustration.)
LIVE_PROMPT = "“我爱中国”这句话的意思是：我"
ILLUSTRATED = "".join(SEQUENCE[1:4])  # what the illustration says comes after 我
FRAMES = 4


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
        guess = ARTICLE_GUESS[:2] + [WRONG_THIRD] + ARTICLE_GUESS[3:]
        nodes = _chain(guess, ["accepted", "accepted", "rejected", "not_reached"])
        correction = TokenRecord(token=-1, text=SEQUENCE[3], kind="correction")
        return draw_tree(TreeDrawing(root, nodes, correction), lang, t("lesson.f2_title", lang), show_probs=False)
    return forwards_bar([t("lesson.bar_alone", lang), t("lesson.bar_spec", lang)], [3, 1], lang,
                        t("lesson.f3_title", lang))


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
    written = "".join(token.text for r in records for token in r.emitted).strip()
    if written and not (ILLUSTRATED.startswith(written) or written.startswith(ILLUSTRATED)):
        lines.append(t("class.differs", lang, text=written[:24], expected=ILLUSTRATED))
    return "\n\n".join(lines)


@lru_cache(maxsize=None)
def lesson_text(lang: str) -> str:
    """The written lesson (acceptance, draft cost, Medusa, EAGLE, EAGLE-3, batch size, four questions)."""
    return (LESSON_DIR / f"{lang}.md").read_text(encoding="utf-8")
