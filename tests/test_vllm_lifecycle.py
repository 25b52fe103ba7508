"""What the lab leaves behind when vLLM fails, without vLLM: fake venvs (tests/fake_vllm.py) whose
``bin/python`` is the real runner under the lab's Python (its load fails), a runner that loads and
never answers, one killed from outside."""
from __future__ import annotations

import contextlib
import os
import signal

import pytest
from fake_vllm import LAB_PYTHON, RUNNER, SILENT_LOAD, fake_venv, gone, started

import core.vllm.client
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


def test_a_load_that_fails_leaves_no_runner_behind(tmp_path, monkeypatch):
    """``start`` raises (no vLLM in the lab's Python): the runner is killed and reaped, not left waiting
    for requests nobody will send (606 MB with a real vLLM)."""
    venv = fake_venv(tmp_path / "venv", LAB_PYTHON, monkeypatch)
    runner = VllmRunner("assets/tiny/target")
    with reaped_at_the_end(venv):
        with pytest.raises(VllmError, match="No module named 'vllm'"):
            runner.start()
        assert runner.process is None
        assert gone(started(venv))


def test_a_with_block_whose_load_fails_leaves_no_runner_behind(tmp_path, monkeypatch):
    venv = fake_venv(tmp_path / "venv", LAB_PYTHON, monkeypatch)
    with reaped_at_the_end(venv):
        with pytest.raises(VllmError, match="No module named 'vllm'"):
            with VllmRunner("assets/tiny/target"):
                pass
        assert gone(started(venv))


def test_a_load_that_never_answers_is_killed_and_reaped(tmp_path, monkeypatch):
    venv = fake_venv(tmp_path / "venv", SILENT_LOAD, monkeypatch)
    monkeypatch.setattr(core.vllm.client, "LOAD_TIMEOUT_S", 0.3)
    runner = VllmRunner("assets/tiny/target")
    with reaped_at_the_end(venv):
        with pytest.raises(VllmError, match="no answer from the vLLM runner"):
            runner.start()
        assert runner.process is None
        assert gone(started(venv))  # killed, and no zombie left


def test_a_runner_killed_between_requests_is_an_error_with_its_signal(tmp_path, monkeypatch):
    venv = fake_venv(tmp_path / "venv", RUNNER, monkeypatch)
    with reaped_at_the_end(venv), VllmRunner("assets/tiny/target") as runner:
        os.kill(started(venv), signal.SIGKILL)
        runner.process.wait()
        with pytest.raises(VllmError, match=r"^the vLLM runner exited with status -9 \(SIGKILL\)"):
            runner.metrics()
