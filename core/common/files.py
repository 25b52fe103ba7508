"""Files the lab writes and reads, made safe in one place.

Every file is written to a temporary file in the same folder and then renamed over its name
(``write_atomic``): a write that fails partway (a full disk, Ctrl-C) leaves the previous file as it
was, and a reader never sees half a file. Written files get the permissions a plain ``open`` gives
(0666 less the umask; ``plain_permissions``), also where a writer such as safetensors' ``save_file``
creates them 0600. Output paths are checked before long work starts
(``check_output_file``, ``check_output_folder``), and user-given inputs are read with a size cap
(``read_capped``), so ``/dev/zero`` or a huge file is refused instead of filling the memory. What the
lab keeps between runs (converted models, drafter data, cost curves, vLLM's venv) lives under one
folder, ``lab_cache``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from core.common.errors import UserError


def lab_cache(*parts: str) -> Path:
    """``$XDG_CACHE_HOME/speculative-decoding-lab/<parts>`` (``~/.cache/...`` when the variable is unset)."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root.joinpath("speculative-decoding-lab", *parts)


def umask() -> int:
    """The process's umask, read from ``/proc/self/status`` where Linux says it; elsewhere set and restored
    (``os.umask`` has no read-only form)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def plain_permissions(*paths: str | Path) -> None:
    """Give each file the mode a plain ``open(path, "w")`` would have created it with: 0666 less the umask."""
    mode = 0o666 & ~umask()
    for path in paths:
        os.chmod(path, mode)


def save_pretrained(model, folder: str | Path) -> None:
    """``model.save_pretrained(folder)`` (transformers), its safetensors files given ``plain_permissions``
    like their siblings (safetensors creates them 0600)."""
    model.save_pretrained(str(folder))
    plain_permissions(*Path(folder).glob("*.safetensors"))


def write_atomic(path: str | Path, write: Callable[[Path], object]) -> None:
    """``write(tmp_path)`` then rename over ``path``; on any failure the temporary file is removed
    and ``path`` keeps what it held before. ``path`` gets ``plain_permissions`` whatever mode ``write``
    created the file with."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        plain_permissions(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def check_output_file(path: str | Path, what: str) -> Path:
    """``path`` can be written as a file: its folder exists and is writable, and it is not a folder."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{what}: {str(path)!r} is a folder, not a file")
    folder = path.parent
    if not folder.is_dir():
        raise UserError(f"{what}: the folder {str(folder)!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UserError(f"{what}: {str(path)!r} is not writable")
    return path


def check_output_folder(path: str | Path, what: str) -> Path:
    """``path`` is a writable folder, or one that can be made: not a file, under a writable folder."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UserError(f"{what}: {str(path)!r} is a file, not a folder")
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"{what}: {str(existing)!r} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"{what}: {str(existing)!r} is not writable")
    return path


def read_capped(path: str | Path, max_bytes: int, what: str) -> bytes:
    """The bytes of ``path``, refused with a UserError past ``max_bytes`` (read no further) or when unreadable."""
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise UserError(f"cannot read {what} {str(path)!r}: {e.strerror or e}") from None
    if len(data) > max_bytes:
        raise UserError(f"{what} {str(path)!r} is larger than {max_bytes:,} bytes")
    return data
