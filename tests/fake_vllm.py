"""Fake vLLM environments for the tests that need no vLLM: a folder whose ``bin/python`` is a small
script, with a finished setup's stamp, pointed at by ``SDLAB_VLLM_VENV``.

Every script first writes its pid to ``<folder>/started``, so a test can tell whether vLLM was started
at all, and which process to look for afterwards. ``RUNNER`` speaks the runner's JSON lines
(``core/vllm/runner.py``) and answers ``load`` at once; the other scripts are below.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from core.vllm import env

PROLOGUE = """\
import json, os, signal, sys, time
from pathlib import Path
HERE = Path(__file__).parent.parent
(HERE / "started").write_text(str(os.getpid()))
"""

RUNNER = """\
MARK = "@@sdlab@@ "
def answer(obj):
    sys.stdout.write(MARK + json.dumps(obj) + "\\n")
    sys.stdout.flush()
answer({"ready": True})
for line in sys.stdin:
    op = json.loads(line)["op"]
    if op == "load":
        answer({"load_s": 0.0})
    elif op == "generate":
        os.kill(os.getpid(), int(os.environ.get("FAKE_VLLM_SIGNAL", signal.SIGKILL)))
    elif op == "quit":
        answer({"bye": True})
        break
"""

SILENT_LOAD = """\
print("@@sdlab@@ " + json.dumps({"ready": True}), flush=True)
time.sleep(600)  # loading, reading no request
"""

SLEEPER = """\
time.sleep(600)  # a server that never listens
"""

HEALTH_SERVER = """\
from http.server import BaseHTTPRequestHandler, HTTPServer
class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
HTTPServer(("127.0.0.1", int(sys.argv[sys.argv.index("--port") + 1])), Health).serve_forever()
"""

LAB_PYTHON = """\
os.execv(sys.executable, [sys.executable, *sys.argv[1:]])  # the real runner, under the lab's Python (no vLLM)
"""


def fake_python(folder: Path, source: str, variable: str, monkeypatch) -> None:
    """``folder`` as a venv (a ``pyvenv.cfg``) whose ``bin/python`` is the lab's Python running ``source``,
    pointed at by the environment variable ``variable``."""
    (folder / "bin").mkdir(parents=True)
    python = folder / "bin" / "python"
    python.write_text(f"#!{sys.executable}\n{source}")
    python.chmod(0o755)
    (folder / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\n")
    monkeypatch.setenv(variable, str(folder))


def fake_venv(folder: Path, script: str, monkeypatch) -> Path:
    """``folder`` as the vLLM venv (``fake_python`` with the stamp of a finished setup), its ``bin/python``
    the lab's Python running ``PROLOGUE`` then ``script``."""
    fake_python(folder, PROLOGUE + script, env.VENV_VARIABLE, monkeypatch)
    env.stamp_file().write_text(json.dumps({"package": env.package(), "vllm": "0.32.0", "transformers": "4.57.0",
                                                 "plugin": env.PLUGIN_VERSION}))
    return folder


def started(folder: Path) -> int | None:
    """The pid of the fake vLLM started in ``folder``, or None when it never started."""
    marker = folder / "started"
    return int(marker.read_text()) if marker.is_file() else None


def gone(pid: int) -> bool:
    """No process ``pid`` is left, not even a zombie waiting to be reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False
