"""Prompt files: one prompt per line, ``\\n`` for a newline, ``#`` starts a comment line."""
from __future__ import annotations

from pathlib import Path

from core.errors import UserError
from core.files import read_capped
from core.limits import MAX_PROMPTS_FILE_BYTES

HELDOUT_PROMPTS = Path(__file__).resolve().parents[2] / "assets" / "prompts" / "heldout.txt"


def load_prompts(path: str | Path = HELDOUT_PROMPTS) -> list[str]:
    """The prompts of ``path`` (at most ``MAX_PROMPTS_FILE_BYTES``: ``/dev/zero`` is refused, not read forever)."""
    try:
        lines = read_capped(path, MAX_PROMPTS_FILE_BYTES, "prompts file").decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise UserError(f"prompts file {str(path)!r} is not UTF-8 text: {e.reason} at byte {e.start}") from None
    prompts = [line.replace("\\n", "\n") for line in lines if line.strip() and not line.startswith("#")]
    if not prompts:
        raise UserError(f"prompts file {str(path)!r} holds no prompt")
    return prompts
