"""The app starts and serves on a busy machine (issue 30): two busy-loop processes pinned on the
first two cores while it starts. Gradio's start-up self-check (one 3 s request to localhost) timed
out under such a load and aborted the start with "When localhost is not accessible, a shareable link
must be created"; ``app.ui.launch`` no longer runs it."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from app_server import TINY_MISSING, TINY_READY, running_app

pytestmark = pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING)
BUSY_LOOP = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass"


def test_the_app_starts_with_both_cores_busy():
    cores = sorted(os.sched_getaffinity(0))[:2]
    busy = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(core)]) for core in cores]
    try:
        with running_app("tiny", timeout_s=600, with_process=True) as (url, proc):
            assert proc.poll() is None
    finally:
        for p in busy:
            p.kill()
            p.wait()


def test_the_launch_skips_gradios_localhost_self_check():
    """The check itself: ``launch`` passes ``_frontend=False``, the one switch of Gradio's self-check."""
    import inspect

    import gradio

    from app.ui import launch

    assert "_frontend" in inspect.signature(gradio.Blocks.launch).parameters
    assert "_frontend=False" in inspect.getsource(launch)
