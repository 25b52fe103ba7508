"""Start ``python app.py`` on a free port for the API and browser tests (and the screenshot script)."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TINY_READY = (ROOT / "assets" / "tiny" / "target" / "config.json").exists() and (
    ROOT / "assets" / "tiny" / "draft" / "config.json").exists()
TINY_MISSING = "the tiny preset's weights (assets/tiny/target, assets/tiny/draft) are not there"
APP_SCRIPT = ROOT / "app.py"


def client(url: str):
    """A gradio_client Client of the app at ``url`` (gradio_client is a test requirement; the modules that
    call this skip without it)."""
    import gradio_client

    return gradio_client.Client(url, verbose=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_app(preset: str = "tiny", timeout_s: float = 90.0, log_path: Path | None = None, args: tuple = (),
                env: dict | None = None, with_process: bool = False):
    """Yield the URL of a freshly started app (``args``: more ``app.py`` flags, ``env``: more
    environment; ``with_process``: yield (url, the server's Popen)); stop it (by its pid) afterwards."""
    port = free_port()
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONUNBUFFERED": "1", **(env or {})}
    log = open(log_path, "w") if log_path else subprocess.DEVNULL
    proc = subprocess.Popen([sys.executable, str(APP_SCRIPT), "--preset", preset, "--port", str(port), *args],
                            cwd=ROOT,
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"app.py exited with code {proc.returncode}")
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"app.py did not answer on {url} within {timeout_s:.0f} s")
            time.sleep(0.5)
        yield (url, proc) if with_process else url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if log_path:
            log.close()
