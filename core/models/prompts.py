"""Prompt files: one prompt per line, ``\\n`` for a newline, ``#`` starts a comment line."""
from __future__ import annotations

from pathlib import Path

from core.errors import UserError

HELDOUT_PROMPTS = Path(__file__).resolve().parents[2] / "assets" / "prompts" / "heldout.txt"


def load_prompts(path: str | Path = HELDOUT_PROMPTS) -> list[str]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read prompts file {str(path)!r}: {e}") from None
    prompts = [line.replace("\\n", "\n") for line in lines if line.strip() and not line.startswith("#")]
    if not prompts:
        raise UserError(f"prompts file {str(path)!r} holds no prompt")
    return prompts
