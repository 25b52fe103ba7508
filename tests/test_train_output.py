"""Where training writes: under the lab cache by default; a shipped folder under assets/ only with --overwrite.

Each case stops the trainer at its first heavy step (loading the target or the corpus), so nothing is
trained here and nothing under assets/ is touched, whatever the code under test does.
"""
from __future__ import annotations

import pytest
import torch

import core.models.loading
import core.train.draft_sizes
import core.train.tiny
from core.cli import main
from core.common.errors import UserError
from core.models.loading import ASSETS
from core.train import gemma_draft, gemma_drafters
from core.train.output import output_folder


class Stopped(Exception):
    """Raised in place of a trainer's first heavy step."""


def stop(*args, **kwargs):
    raise Stopped


@pytest.fixture(autouse=True)
def stopped_before_training(monkeypatch, tmp_path):
    """The cache in ``tmp_path`` (``lab_cache`` reads ``XDG_CACHE_HOME``), and every trainer stopped before its work."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(torch, "set_num_threads", lambda threads: None)  # the suite's one thread stays
    monkeypatch.setattr(core.train.tiny, "build_corpus", stop)
    monkeypatch.setattr(core.train.draft_sizes, "resolve_preset", stop)
    monkeypatch.setattr(core.models.loading, "resolve_preset", stop)  # medusa, eagle, eagle3, the Gemma scripts


def snapshot(folder) -> dict:
    return {str(p): p.stat().st_mtime_ns for p in folder.rglob("*")}


# (command line, the shipped folder it names, the default folder under the cache's trained/)
TRAINERS = [
    (["train", "tiny"], ASSETS / "tiny", ("tiny",)),
    (["train", "draft-sizes", "--preset", "tiny"], ASSETS / "tiny", ("tiny", "draft-sizes")),
    (["train", "medusa", "--preset", "tiny"], ASSETS / "tiny" / "medusa", ("tiny", "medusa")),
    (["train", "eagle", "--preset", "tiny"], ASSETS / "tiny" / "eagle", ("tiny", "eagle")),
    (["train", "eagle3", "--preset", "tiny"], ASSETS / "tiny" / "eagle3", ("tiny", "eagle3")),
]


@pytest.mark.parametrize("argv,shipped,_", TRAINERS, ids=[t[0][1] for t in TRAINERS])
def test_a_shipped_folder_as_out_is_refused_in_one_line_without_overwrite(argv, shipped, _, capsys):
    assert shipped.is_dir()
    before = snapshot(ASSETS)
    assert main([*argv, "--out", str(shipped)]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {shipped} is a shipped folder under assets/: pass --overwrite to replace it, "
                   f"or choose another --out\n")
    assert snapshot(ASSETS) == before


@pytest.mark.parametrize("argv,shipped,_", TRAINERS, ids=[t[0][1] for t in TRAINERS])
def test_overwrite_lets_out_name_a_shipped_folder(argv, shipped, _, capsys):
    with pytest.raises(Stopped):
        main([*argv, "--out", str(shipped), "--overwrite"])
    assert f"writing into {shipped}\n" in capsys.readouterr().err


@pytest.mark.parametrize("argv,_,default", TRAINERS, ids=[t[0][1] for t in TRAINERS])
def test_the_default_output_is_under_the_lab_cache(argv, _, default, tmp_path, capsys):
    with pytest.raises(Stopped):
        main(argv)
    expected = tmp_path.joinpath("speculative-decoding-lab", "trained", *default)
    assert f"writing into {expected}\n" in capsys.readouterr().err


def test_a_new_folder_under_assets_named_by_out_is_allowed(capsys):
    new = ASSETS / "tiny" / "eagle3-not-shipped"
    assert not new.exists()
    with pytest.raises(Stopped):
        main(["train", "eagle3", "--preset", "tiny", "--out", str(new)])
    assert f"writing into {new}\n" in capsys.readouterr().err
    assert not new.exists()


@pytest.mark.parametrize("script,shipped,default", [
    (gemma_drafters, ASSETS / "gemma-270m", ("gemma-270m",)),
    (gemma_draft, ASSETS / "gemma-270m" / "draft", ("gemma-270m", "draft")),
], ids=["gemma_drafters", "gemma_draft"])
def test_the_gemma_trainers_default_to_the_cache_and_refuse_the_shipped_folders(script, shipped, default, tmp_path,
                                                                                capsys):
    assert shipped.is_dir()
    assert script.main(["--out", str(shipped)]) == 2
    assert capsys.readouterr().err == (f"error: {shipped} is a shipped folder under assets/: pass --overwrite to "
                                       f"replace it, or choose another --out\n")
    with pytest.raises(Stopped):
        script.main([])
    assert f"writing into {tmp_path.joinpath('speculative-decoding-lab', 'trained', *default)}\n" in \
        capsys.readouterr().err


def test_a_relative_out_into_assets_is_seen_as_shipped(monkeypatch):
    monkeypatch.chdir(ASSETS.parent)
    with pytest.raises(UserError, match="shipped folder under assets/"):
        output_folder("assets/tiny", ("tiny",), overwrite=False, what="tiny")
