"""``python -m core vllm compare`` at its edges, without vLLM: every flag is checked before anything is
exported or loaded (the fake vLLM of tests/fake_vllm.py is never started), and a vLLM that dies ends
the command in one ``error:`` line with its exit status and signal, never a traceback."""
from __future__ import annotations

import signal

import pytest
from app_server import TINY_MISSING, TINY_READY
from fake_vllm import RUNNER, fake_venv, started

from core.cli import main
from core.common.errors import UserError
from core.models.prompts import load_prompts

pytestmark = [pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING)]
HELDOUT = len(load_prompts())


@pytest.mark.parametrize("flags, refusal", [
    (["--limit", "-1"], "--limit must be between 1 and"),  # was: the last prompt dropped
    (["--limit", "0"], "--limit must be between 1 and"),  # was: nothing compared, and a pass
    (["--limit", str(HELDOUT + 1)], "--limit must be between 1 and"),
    (["--max-new-tokens", "0"], "--max-new-tokens:"),  # was: refused only once vLLM had loaded
    (["--max-new-tokens", "100000"], "--max-new-tokens:"),
    (["--k", "0"], "--k:"),
    (["--threads", "0"], "--threads:"),
    (["--method", "medusa"], "--method:"),
    (["--preset", "no-such-preset"], "--preset: unknown preset"),
])
def test_compare_checks_every_flag_before_loading_anything(tmp_path, monkeypatch, capsys, flags, refusal):
    venv = fake_venv(tmp_path / "venv", RUNNER, monkeypatch)
    assert main(["vllm", "compare", "--method", "none", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and refusal in err and len(err.splitlines()) == 1
    assert started(venv) is None
    assert not (tmp_path / "exports").exists()


def test_compare_takes_the_first_limit_prompts_or_all():
    from core.vllm.settings import CompareSettings

    assert CompareSettings.of("heldout", 2).prompts == load_prompts()[:2]
    assert CompareSettings.of("heldout", HELDOUT).prompts == CompareSettings.of("heldout").prompts == load_prompts()
    with pytest.raises(UserError, match="--limit"):
        CompareSettings.of("heldout", 0)


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
