"""Files the lab writes get the mode a plain ``open`` gives them (0666 less the umask), also the weights that
safetensors would create 0600: a converted or trained folder reads alike for its owner's group and others."""
from __future__ import annotations

import os
import stat

import pytest
import torch
from safetensors.torch import save_file

from core.common.files import save_pretrained, write_atomic, write_text_atomic


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture(params=[0o022, 0o077, 0o002], ids=lambda m: f"umask {m:03o}")
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def test_safetensors_written_atomically_get_the_mode_of_a_plain_open(tmp_path, umask):
    write_atomic(tmp_path / "model.safetensors", lambda tmp: save_file({"w": torch.zeros(2)}, str(tmp)))
    write_text_atomic(tmp_path / "config.json", "{}\n")
    with open(tmp_path / "plain.txt", "w") as f:
        f.write("x")
    assert mode(tmp_path / "model.safetensors") == mode(tmp_path / "config.json") == mode(tmp_path / "plain.txt") \
        == 0o666 & ~umask


def test_a_saved_model_folder_has_one_mode_for_every_file(tmp_path, random_llama, umask):
    save_pretrained(random_llama, tmp_path / "model")  # what the Gemma conversion and the trainers call
    modes = {path.name: mode(path) for path in (tmp_path / "model").iterdir()}
    assert "model.safetensors" in modes and "config.json" in modes
    assert set(modes.values()) == {0o666 & ~umask}
