"""llama.cpp's virtual environment under ``~/.cache`` (``python -m core llamacpp setup``).

It holds ``llama-cpp-python``, built from PyPI's sdist once into a wheel that is kept
(``wheels_dir()``): the build takes tens of minutes on 2 cores, so a setup run again, or one that
failed after the build, reuses the wheel. The build is portable (``CMAKE_ARGS``: AVX2, FMA and F16C,
no AVX-512, AMX or AVX-VNNI): the default native build died with ``Illegal instruction`` on an AMX Xeon
at its first forward, and this one runs on AMX Xeons and AVX2 EPYCs alike. The venv is then built with
``core.common.venv.build_venv`` (beside the venv in use, swapped in once the import check works):
the wheel's own dependencies from PyPI, the wheel from the wheels folder alone (``--no-index``).

A stamp file records what was installed, so ``ready()`` is true only for a finished setup; a stamp
that is not what setup writes counts as none. ``SDLAB_LLAMACPP_VENV`` moves the venv.
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, ConfigDict

from core.common.files import lab_cache
from core.common.venv import STAMP, VenvError, build_venv, read_stamp, run_output, run_step

VERSION = "0.3.36"
PACKAGE = f"llama-cpp-python=={VERSION}"
WHEEL_GLOB = f"llama_cpp_python-{VERSION}-*.whl"
CMAKE_ARGS = ("-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF "
              "-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_AVX_VNNI=OFF")
DEPENDENCIES = ("numpy>=1.20.0", "typing-extensions>=4.5.0", "diskcache>=5.6.1", "jinja2>=2.11.3")  # the wheel's own
VENV_VARIABLE = "SDLAB_LLAMACPP_VENV"  # overrides the default location
IMPORT_CHECK = ("import llama_cpp, numpy; from llama_cpp.llama_speculative import LlamaPromptLookupDecoding; "
                "print(llama_cpp.__version__, numpy.__version__)")
WHEEL_TIME = "tens of minutes on 2 cores"
SETUP_TIME = f"{WHEEL_TIME} the first time, to build the wheel; under a minute once it is built"


class Stamp(BaseModel):
    """What a finished setup installed (the stamp file in the venv)."""

    model_config = ConfigDict(frozen=True)

    package: str  # the pip requirement, ``PACKAGE``
    llama_cpp: str  # versions, as the import check printed them
    numpy: str
    wheel: str  # the wheel's file name


def venv_dir() -> Path:
    return Path(os.environ.get(VENV_VARIABLE) or lab_cache("llamacpp", "venv"))


def wheels_dir() -> Path:
    """Where the built wheel is kept (beside the default venv, whatever ``SDLAB_LLAMACPP_VENV`` says)."""
    return lab_cache("llamacpp", "wheels")


def python() -> Path:
    return venv_dir() / "bin" / "python"


def stamp_file() -> Path:
    return venv_dir() / STAMP


def stamp() -> Stamp | None:
    """What setup installed, or None when no finished setup is there (no stamp, or one that is not a
    JSON object with the stamp's fields)."""
    return read_stamp(venv_dir(), Stamp.model_validate_json)


def ready() -> bool:
    found = stamp()
    return found is not None and found.package == PACKAGE


def missing_reason() -> str:
    """One line telling a user why llama.cpp is not usable here, and the command that fixes it."""
    found = stamp()
    if found is None:
        return (f"no llama.cpp environment at {venv_dir()}: run `python -m core llamacpp setup` "
                f"({SETUP_TIME})")
    return (f"the llama.cpp environment at {venv_dir()} holds {found.package}, the lab needs {PACKAGE}: "
            f"run `python -m core llamacpp setup`")


def built_wheel() -> Path | None:
    """The kept wheel, or None when it has not been built yet."""
    return next(iter(sorted(wheels_dir().glob(WHEEL_GLOB))), None)


def wheel_command(out: Path, base_python: str = sys.executable) -> list[str]:
    """Build the wheel from PyPI's sdist into ``out`` (pip's build log shown: cmake's progress), never
    from pip's cache of an earlier (maybe native) build; run with ``CMAKE_ARGS`` set."""
    return [base_python, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "--no-binary", "llama-cpp-python",
            "-v", "--wheel-dir", str(out), PACKAGE]


def ensure_wheel(log: Callable[[str], None] = print) -> Path:
    """The kept wheel, built first when missing; a build that fails or is interrupted leaves nothing in
    ``wheels_dir()`` (a ``VenvError`` naming the step), so the next setup starts it again."""
    found = built_wheel()
    if found is not None:
        log(f"reusing the built wheel {found}")
        return found
    wheels = wheels_dir()
    wheels.mkdir(parents=True, exist_ok=True)
    building = wheels / f".build-{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    log(f"building {PACKAGE} into a wheel, once ({WHEEL_TIME}); it is kept in {wheels}")
    start = time.perf_counter()
    try:
        run_step(wheel_command(building), log, {"CMAKE_ARGS": CMAKE_ARGS})
        made = sorted(building.glob(WHEEL_GLOB))
        if not made:
            raise VenvError(f"pip wheel made no {WHEEL_GLOB}")
        kept = wheels / made[0].name
        os.replace(made[0], kept)
    except VenvError as e:
        raise VenvError(f"{e}; nothing was installed") from None
    finally:
        shutil.rmtree(building, ignore_errors=True)
    log(f"wheel built in {time.perf_counter() - start:.0f} s: {kept}")
    return kept


def setup_commands(venv: Path, base_python: str = sys.executable) -> list[list[str]]:
    """The commands setup runs in the new venv's folder, in order (shown as they run); the import check
    (``installed``) follows them. The wheel comes from ``wheels_dir()`` alone."""
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    return [
        [base_python, "-m", "venv", str(venv)],
        [*pip, "install", "--progress-bar", "on", *DEPENDENCIES],
        [*pip, "install", "--no-index", "--find-links", str(wheels_dir()), PACKAGE],
    ]


def installed(venv: Path) -> dict:
    """The import check, run in the new venv: its stamp (a ``VenvError`` when llama_cpp does not import)."""
    printed = run_output([str(venv / "bin" / "python"), "-c", IMPORT_CHECK]).strip().splitlines()
    versions = printed[-1].split() if printed else []
    if len(versions) != 2:
        raise VenvError(f"the import check printed {' '.join(versions)!r}, not the versions of llama_cpp and numpy")
    wheel = built_wheel()
    return Stamp(package=PACKAGE, llama_cpp=versions[0], numpy=versions[1],
                 wheel=wheel.name if wheel else "").model_dump()


def setup(log: Callable[[str], None] = print) -> Stamp:
    """Build the wheel when missing, then the venv beside the one in use, swapped in once it works
    (module docstring); returns the stamp. A step that fails is a ``VenvError``, the venv in use kept."""
    start = time.perf_counter()
    ensure_wheel(log)
    found = Stamp(**build_venv(venv_dir(), setup_commands, installed, log))
    log(f"llama-cpp-python {found.llama_cpp} (numpy {found.numpy}) ready in {venv_dir()} "
        f"(setup took {time.perf_counter() - start:.0f} s)")
    return found
