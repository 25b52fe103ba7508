"""``python -m core vllm compare`` at its edges, without vLLM (the fake vLLM of tests/fake_vllm.py): a
vLLM that dies ends the command in one ``error:`` line with its exit status and signal, never a traceback."""
from __future__ import annotations

import signal

import pytest
from app_server import TINY_MISSING, TINY_READY
from fake_vllm import RUNNER, fake_venv

from core.cli import main

pytestmark = [pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING)]


@pytest.mark.parametrize("ending, status", [(signal.SIGKILL, "status -9 (SIGKILL)"),
                                            (signal.SIGTERM, "status -15 (SIGTERM)")])
def test_a_runner_killed_mid_compare_is_one_error_line_with_its_signal(tmp_path, monkeypatch, capsys, ending,
                                                                       status):
    """The fake runner loads, then is killed by ``ending`` at the first request: exit 1, one line."""
    fake_venv(tmp_path / "venv", RUNNER, monkeypatch)
    monkeypatch.setenv("FAKE_VLLM_SIGNAL", str(int(ending)))
    assert main(["vllm", "compare", "--method", "none", "--limit", "1", "--threads", "1"]) == 1
    err = capsys.readouterr().err  # the lab's own model loading may show its progress first
    assert [line for line in err.splitlines() if "error" in line.lower()] == [
        f"error: the vLLM runner exited with {status}"]
    assert err.splitlines()[-1].startswith("error: ") and "Traceback" not in err
