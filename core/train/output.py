"""Where training writes: under the lab cache by default, into the shipped ``assets/`` only when asked.

Every trainer (``python -m core train tiny|draft-sizes|medusa|eagle|eagle3``, ``python -m core.train.gemma_draft``
and ``gemma_drafters``) writes by default into ``lab_cache("trained", ...)``. An output folder that already
exists under ``assets/`` (the tiny family and the drafters the lab ships, which the docs and tests measured) is
refused unless ``--overwrite`` says to replace it, whether it came from ``--out`` or from a default.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.common.errors import UserError
from core.common.files import lab_cache
from core.models.loading import ASSETS


def add_output_arguments(parser: argparse.ArgumentParser, holds: str) -> None:
    """``--out`` (default: under the lab cache; ``holds`` says what goes in it) and ``--overwrite``."""
    parser.add_argument("--out", type=Path, default=None,
                        help=f"output folder holding {holds} (default: under {lab_cache('trained')})")
    parser.add_argument("--overwrite", action="store_true",
                        help="allow --out to be a shipped folder under assets/ and replace what it holds")


def is_shipped(folder: str | Path) -> bool:
    """``folder`` exists inside the lab's ``assets/`` (or is it)."""
    folder = Path(folder).resolve()
    return folder.exists() and folder.is_relative_to(ASSETS.resolve())


def output_folder(out: str | Path | None, default: tuple[str, ...], overwrite: bool, what: str) -> Path:
    """``out``, or ``lab_cache("trained", *default)`` when None; a shipped folder is refused without ``overwrite``.
    Says on stderr where ``what`` will be written."""
    folder = Path(out) if out is not None else lab_cache("trained", *default)
    if is_shipped(folder) and not overwrite:
        raise UserError(f"{folder} is a shipped folder under assets/: pass --overwrite to replace it, "
                        f"or choose another --out")
    print(f"[{what}] writing into {folder}", file=sys.stderr)
    return folder
