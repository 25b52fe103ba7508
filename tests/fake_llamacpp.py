"""Fake llama.cpp environments for the tests that need no llama.cpp: a folder whose ``bin/python`` is a
small script, with a finished setup's stamp, pointed at by ``SDLAB_LLAMACPP_VENV``.

Every script first appends its pid to ``<folder>/started`` (one line per runner started), so a test can
tell how many runners were started and look for each afterwards. ``RUNNER`` speaks the runner's JSON
lines (``core/llamacpp/runner.py``): it loads ``none`` at once and answers an error for any other
method. ``fake_vllm.LAB_PYTHON`` runs the real runner under the lab's Python, where ``import llama_cpp``
fails.
"""
from __future__ import annotations

import json
from pathlib import Path

from fake_vllm import fake_python

from core.llamacpp import env

PROLOGUE = """\
import json, os, sys
from pathlib import Path
HERE = Path(__file__).parent.parent
with open(HERE / "started", "a") as f:
    f.write(f"{os.getpid()}\\n")
"""

RUNNER = """\
MARK = "@@sdlab@@ "
def answer(obj):
    sys.stdout.write(MARK + json.dumps(obj) + "\\n")
    sys.stdout.flush()
answer({"ready": True})
for line in sys.stdin:
    request = json.loads(line)
    if request["op"] == "load":
        if request["method"] == "none":
            answer({"load_s": 0.0, "eog_ids": request["stop_ids"]})
        else:
            answer({"error": f"ValueError: cannot load {request['method']}"})
    elif request["op"] == "generate":
        answer({"tokens": request["prompt"][-3:], "wall_s": 0.01})
    elif request["op"] == "quit":
        answer({"bye": True})
        break
"""


def fake_venv(folder: Path, script: str, monkeypatch) -> Path:
    """``folder`` as llama.cpp's venv (a ``pyvenv.cfg``, the stamp of a finished setup), its ``bin/python``
    the lab's Python running ``PROLOGUE`` then ``script``."""
    fake_python(folder, PROLOGUE + script, env.VENV_VARIABLE, monkeypatch)
    env.stamp_file().write_text(json.dumps({"package": env.PACKAGE, "llama_cpp": env.VERSION, "numpy": "2.0.0",
                                            "wheel": "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"}))
    return folder


def started(folder: Path) -> list[int]:
    """The pids of the fake runners started in ``folder``, in order (none when none was started)."""
    marker = folder / "started"
    return [int(line) for line in marker.read_text().split()] if marker.is_file() else []
