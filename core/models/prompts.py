"""Prompt files: one prompt per line, ``\\n`` for a newline, ``#`` starts a comment line.

Two held-out sets ship in ``assets/prompts``, each half Chinese, half English, and every table is
reported on both: ``heldout`` (openings of held-out documents of the training text: book-style)
and ``chat`` (questions, instructions, lists, code and dialogue written as people type them,
disjoint from the drafters' chat-style training prompts). Wherever a prompts file is asked for,
either name stands for its file.
"""
from __future__ import annotations

from pathlib import Path

from core.common.errors import UserError
from core.common.files import read_capped
from core.common.limits import MAX_PROMPTS_FILE_BYTES

PROMPTS_DIR = Path(__file__).resolve().parents[2] / "assets" / "prompts"
HELDOUT_PROMPTS = PROMPTS_DIR / "heldout.txt"
CHAT_PROMPTS = PROMPTS_DIR / "chat.txt"
PROMPT_SETS = {"heldout": HELDOUT_PROMPTS, "chat": CHAT_PROMPTS}


def prompts_path(path_or_set: str | Path) -> Path:
    """The file of a held-out set named in ``PROMPT_SETS``, or ``path_or_set`` itself."""
    return PROMPT_SETS.get(str(path_or_set), Path(path_or_set))


def load_prompts(path: str | Path = HELDOUT_PROMPTS) -> list[str]:
    """The prompts of a file, or of a held-out set by name (``heldout``, ``chat``); at most
    ``MAX_PROMPTS_FILE_BYTES`` (``/dev/zero`` is refused, not read forever)."""
    path = prompts_path(path)
    try:
        lines = read_capped(path, MAX_PROMPTS_FILE_BYTES, "prompts file").decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise UserError(f"prompts file {str(path)!r} is not UTF-8 text: {e.reason} at byte {e.start}") from None
    prompts = [line.replace("\\n", "\n") for line in lines if line.strip() and not line.startswith("#")]
    if not prompts:
        raise UserError(f"prompts file {str(path)!r} holds no prompt")
    return prompts
