"""What the lab leaves behind when vLLM fails, without vLLM: fake venvs (tests/fake_vllm.py) whose
``bin/python`` speaks the runner's lines and is killed from outside."""
from __future__ import annotations

import contextlib
import os
import signal

import pytest
from fake_vllm import RUNNER, fake_venv, gone, started

from core.vllm.client import VllmError, VllmRunner


@contextlib.contextmanager
def reaped_at_the_end(folder):
    """Kill the fake vLLM if a test leaves it running, so a failing test leaks no process."""
    try:
        yield
    finally:
        pid = started(folder)
        if pid and not gone(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


def test_a_runner_killed_between_requests_is_an_error_with_its_signal(tmp_path, monkeypatch):
    venv = fake_venv(tmp_path / "venv", RUNNER, monkeypatch)
    with reaped_at_the_end(venv), VllmRunner("assets/tiny/target") as runner:
        os.kill(started(venv), signal.SIGKILL)
        runner.process.wait()
        with pytest.raises(VllmError, match=r"^the vLLM runner exited with status -9 \(SIGKILL\)"):
            runner.metrics()
