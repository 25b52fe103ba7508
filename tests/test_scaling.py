"""The scaling sweep's cache names: a run is found again only under the settings it ran with."""
import argparse
import re
from pathlib import Path

import torch
from safetensors.torch import save_file

from core.train.scaling import markdown_table, run_key


def args(**changes):
    base = dict(data="gemma-270m-abc", steps=3000, seed=0, batch=8, lr=2e-3, draft_vocab="4096", init=None,
                depth_decay=1.0)
    return argparse.Namespace(**{**base, **changes})


def test_the_default_recipe_keeps_the_name_earlier_runs_were_cached_under():
    assert run_key("eagle3", 1.0, args()) == "v1-gemma-270m-abc-eagle3-f1-s3000-seed0"


def test_another_vocabulary_rate_or_starting_point_is_another_run(tmp_path):
    (tmp_path / "eagle3").mkdir()
    save_file({"w": torch.zeros(2)}, tmp_path / "eagle3" / "model.safetensors")
    key = run_key("eagle3", 1.0, args(lr=1e-3, draft_vocab="8192", init=tmp_path))
    assert key.startswith("v1-gemma-270m-abc-eagle3-f1-s3000-seed0-lr0.001-vocab8192-from")
    save_file({"w": torch.ones(2)}, tmp_path / "eagle3" / "model.safetensors")
    assert run_key("eagle3", 1.0, args(lr=1e-3, draft_vocab="8192", init=tmp_path)) != key  # other weights
    assert run_key("eagle3", 1.0, args(batch=4)) == "v1-gemma-270m-abc-eagle3-f1-s3000-seed0-b4"
    assert run_key("peagle", 1.0, args(depth_decay=0.5)) == "v1-gemma-270m-abc-peagle-f1-s3000-seed0-decay0.5"


def test_more_data_folders_are_another_run():
    assert run_key("eagle3", 1.0, args(data="gemma-270m-abc+gemma-270m-def")) == \
        "v1-gemma-270m-abc+gemma-270m-def-eagle3-f1-s3000-seed0"


def test_model_cards_name_no_home_folder():
    from core.train.gemma_drafters import home_relative

    assert home_relative(Path("assets/gemma-270m/eagle3")) == "assets/gemma-270m/eagle3"  # as given
    assert home_relative(Path.home() / ".cache" / "run" / "eagle3") == "~/.cache/run/eagle3"
    assert home_relative(f"{Path.home()}-other/x") == f"{Path.home()}-other/x"  # not under it
    data = ",".join(str(Path.home() / ".cache" / part) for part in ("a", "b"))
    assert home_relative(data) == "~/.cache/a,~/.cache/b"  # --data's list, path by path


def test_no_shipped_file_names_a_home_folder():
    assets = Path(__file__).resolve().parent.parent / "assets"
    home = re.compile(r"/root/|/home/[^/\s]+/|/Users/[^/\s]+/")
    named = [str(path.relative_to(assets)) for path in assets.rglob("*")
             if path.suffix in (".json", ".md", ".txt") and home.search(path.read_text(encoding="utf-8"))]
    assert not named


def test_the_table_reports_the_chat_set_where_it_was_measured():
    run = dict(drafter="eagle3", fraction=1.0, positions=1024, train_seconds=10.0, tau=2.5,
               per_position=[0.6, 0.4, 0.3, 0.2, 0.1, 0.05])
    rows = markdown_table([run, {**run, "drafter": "eagle", "chat": {"tau": 2.1, "per_position": [0.55] + [0.1] * 5}}])
    lines = rows.splitlines()
    assert lines[0].endswith("| chat τ | chat depth 1 |") and len(lines) == 4
    assert lines[2].endswith("| 2.10 | 0.550 |")  # eagle sorts first
    assert lines[3].endswith("| 0.050 | – | – |")  # measured before the chat set
