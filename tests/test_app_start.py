"""The app starts and serves on a busy machine (issue 30): two busy-loop processes pinned on the
first two cores, and Gradio's start-up self-check made certain to time out (its request to
localhost goes through a proxy that never answers, as it would through a starved CPU). Before the
fix the start aborted with "When localhost is not accessible, a shareable link must be created"."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

import pytest
from app_server import TINY_MISSING, TINY_READY, running_app

pytestmark = pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING)
BUSY_LOOP = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass"


def test_the_app_starts_with_both_cores_busy_and_a_slow_self_check():
    cores = sorted(os.sched_getaffinity(0))[:2]
    busy = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(core)]) for core in cores]
    silent = socket.create_server(("127.0.0.1", 0))  # accepts and never answers
    held = []
    threading.Thread(target=lambda: held.extend(iter(lambda: silent.accept()[0], None)), daemon=True).start()
    proxy = f"http://127.0.0.1:{silent.getsockname()[1]}"
    try:
        env = {"HTTP_PROXY": proxy, "http_proxy": proxy, "NO_PROXY": "", "no_proxy": ""}
        with running_app("tiny", timeout_s=600, env=env, with_process=True) as (url, proc):
            assert proc.poll() is None
    finally:
        for p in busy:
            p.kill()
            p.wait()
        silent.close()
