"""The drafter-data pipeline (core.train.drafter_data) on the tiny target: shards in the user's
cache, resumable with the same result as one run, labels the target's own."""
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from core.common.errors import UserError
from core.models.loading import load_model, resolve_preset
from core.train import drafter_data, eagle, medusa
from core.train.drafter_data import load_stored_data
from core.train.tiny import TrainConfig

REPO = Path(__file__).resolve().parent.parent
# pystdlib ships with Python itself, so this runs without the Debian corpus packages
# a short loop guard (1-grams: any repeated token; a break after 2 repeats in a row), so that the tiny
# target's short continuations do break loops
SETTINGS = drafter_data.PipelineSettings(preset="tiny", seq_len=24, shard_sequences=4, distill_share=0.5, prompt_tokens=12,
                                         chat_prompt_tokens=12, loop_ngram=1, loop_keep=2, sources=("pystdlib",), seed=3)
SHARD = SETTINGS.shard_positions


def repo_files() -> set[str]:
    out = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    return {line for line in out.splitlines() if "__pycache__" not in line and ".pytest_cache" not in line}


def shard_tensors(folder: Path) -> dict[str, torch.Tensor]:
    tensors = {}
    for path in sorted(folder.glob("shard-*.safetensors")):
        with safe_open(str(path), "pt") as f:
            tensors.update({f"{path.name}/{k}": f.get_tensor(k) for k in f.keys()})
    return tensors


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_resumed_build_equals_one_run_and_labels_are_the_targets(cache, tmp_path):
    before = repo_files()
    run = lambda budget, out=None: drafter_data.build(  # noqa: E731
        SETTINGS, drafter_data.RunOptions(budget, "cpu", threads=1, batch_size=3, out=out), log=lambda m: None)
    folder = run(2 * SHARD)
    assert folder.parent == cache / "speculative-decoding-lab" / "drafter-data"
    assert sorted(p.name for p in folder.glob("shard-*")) == ["shard-00000.safetensors", "shard-00001.safetensors"]
    # a kill mid-write leaves a temporary file, never a shard; a lost shard is made again
    (folder / ".shard-00002.safetensors.tmp").write_bytes(b"half a shard")
    resumed = run(4 * SHARD - 5)  # rounds up to 4 shards
    assert resumed == folder and not list(folder.glob(".*.tmp"))
    (folder / "shard-00001.safetensors").unlink()
    run(4 * SHARD)
    fresh = run(4 * SHARD, tmp_path / "fresh")
    resumed_tensors, fresh_tensors = shard_tensors(folder), shard_tensors(fresh)
    assert resumed_tensors.keys() == fresh_tensors.keys() and len(resumed_tensors) == 4 * 8
    for name, tensor in fresh_tensors.items():
        assert torch.equal(resumed_tensors[name], tensor), name
    manifest = drafter_data.read_manifest(folder)
    assert manifest["positions"] == 4 * SHARD and manifest["sources"][0]["licence"].startswith("PSF")

    data = drafter_data.load(folder)
    assert data.tokens.shape == (16, 24) and data.hidden.dtype == torch.bfloat16
    kinds = fresh_tensors["shard-00000.safetensors/kind"].tolist() + fresh_tensors["shard-00001.safetensors/kind"].tolist()
    assert drafter_data.TEXT in kinds and drafter_data.DISTILL in kinds
    assert (data.tokens[:, 0] == 1).all()  # every sequence starts with the target's BOS

    target = load_model(resolve_preset("tiny").target, "cpu")
    with torch.inference_mode():
        out = target.model(input_ids=data.tokens, output_hidden_states=True)
    probs = torch.softmax(out.logits.float(), dim=-1)
    assert torch.equal(data.greedy, out.logits.argmax(-1))
    assert torch.equal(data.top_ids, torch.topk(out.logits, 8, dim=-1).indices)
    # the normaliser may come from a cheap product (not for tiny's 8,000-row head, float32 here; the next test
    # forces one): probabilities close, their ratios (what the trainers use) exact
    exact = probs.gather(-1, data.top_ids)
    assert torch.allclose(data.top_probs, exact, rtol=0.1)
    assert torch.allclose(data.top_probs / data.top_probs.sum(-1, keepdim=True), exact / exact.sum(-1, keepdim=True),
                          rtol=1e-4)
    exact_ids, exact_logprobs = drafter_data.Head(target.model, rescore=0).top(out.hidden_states[-1][0], 8)
    assert torch.equal(exact_ids, data.top_ids[0]) and torch.allclose(exact_logprobs.exp(), probs[0].gather(-1, exact_ids),
                                                                      atol=1e-6)
    for stored, index in zip(data.layers(data.layer_ids, slice(None)), data.layer_ids):
        assert torch.allclose(stored, out.hidden_states[index], rtol=1e-2, atol=1e-2)
    # a distilled sequence is the target's greedy text after its prompt, but where it broke out of a loop:
    # there the token is another of the target's top 8, one that does not repeat a token before it
    guard = drafter_data.LoopGuard(SETTINGS.loop_ngram, SETTINGS.loop_keep)
    breaks = 0
    for name in ("shard-00000.safetensors", "shard-00001.safetensors"):
        shard = drafter_data.read_shard(folder / name, data.layer_ids)
        kind, prompt_len, broken = (fresh_tensors[f"{name}/{key}"] for key in ("kind", "prompt_len", "broken"))
        assert not broken[kind == drafter_data.TEXT].any()
        for row in (kind == drafter_data.DISTILL).nonzero().flatten().tolist():
            p = int(prompt_len[row])
            tokens, greedy, cut = shard.tokens[row], shard.greedy[row], broken[row]
            assert not cut[:p].any()
            assert torch.equal(tokens[p:][~cut[p:]], greedy[p - 1 : -1][~cut[p:]])
            for i in cut.nonzero().flatten().tolist():
                assert tokens[i] != greedy[i - 1] and tokens[i] in shard.top_ids[row, i - 1]
                assert guard.repeats(tokens[:i].tolist()) and not guard.repeats(tokens[: i + 1].tolist())
                breaks += 1
    assert breaks > 0
    assert repo_files() == before  # nothing written into the repository


def test_trainers_read_the_shards(cache):
    folder = drafter_data.build(SETTINGS, drafter_data.RunOptions(3 * SHARD, "cpu", batch_size=4), log=lambda m: None)
    data = drafter_data.load(folder, max_positions=2 * SHARD)
    assert len(data) == 2 * SETTINGS.shard_sequences
    assert [len(s) for s in drafter_data.iter_shards(folder)] == [4, 4, 4]
    target = load_model(resolve_preset("tiny").target, "cpu")
    torch.manual_seed(0)
    net = eagle.new_net(target.model, "eagle3", eagle.default_layers("eagle3", 4), 64)
    config = TrainConfig(steps=2, batch_size=2, lr=1e-3, warmup_steps=1, weight_decay=0.0)
    eagle.train_net(net, data, config, 2, 0.0, torch.Generator().manual_seed(0), "eagle3")
    net = eagle.new_net(target.model, "eagle", eagle.default_layers("eagle", 4), 64)
    eagle.train_net(net, data, config, 1, 1.0, torch.Generator().manual_seed(0), "eagle")  # with the feature loss
    assert torch.equal(data.layers((len(data.layer_ids),), slice(0, 2))[0], data.layers((4,), slice(0, 2))[0])
    heads = medusa.new_heads(target.model, 2)
    medusa.train_heads(heads, data, replace_batch(config, 8), torch.Generator().manual_seed(0))
    with pytest.raises(Exception, match="holds layers"):
        data.layers((0,), slice(None))  # the embeddings are not stored


def test_several_folders_load_as_one(cache):
    """Data made with other settings (here all distilled, another seed) trains together with the
    first folder's; folders that keep other layers are refused, naming the folder."""
    first = drafter_data.build(SETTINGS, drafter_data.RunOptions(SHARD, "cpu", batch_size=4), log=lambda m: None)
    distilled = replace(SETTINGS, distill_share=1.0, seed=4)
    second = drafter_data.build(distilled, drafter_data.RunOptions(2 * SHARD, "cpu", batch_size=4), log=lambda m: None)
    both = drafter_data.load([first, second])
    one, two = drafter_data.load(first), drafter_data.load(second)
    assert len(both) == len(one) + len(two) == 3 * SETTINGS.shard_sequences
    for name in ("tokens", "hidden", "top_ids", "top_probs"):
        assert torch.equal(getattr(both, name), torch.cat([getattr(one, name), getattr(two, name)])), name
    # the trainers' --data: a folder name alone is one under the cache; the key names both
    key, data = load_stored_data(f"{first.name}, {second}", load_model(resolve_preset("tiny").target, "cpu"))
    assert key == f"{first.name}+{second.name}" and torch.equal(data.tokens, both.tokens)
    (second / "shard-00001.safetensors").unlink()  # a build stopped half way: a training run on it is another run
    key, data = load_stored_data(f"{first.name},{second.name}", load_model(resolve_preset("tiny").target, "cpu"))
    assert key == f"{first.name}+{second.name}@1" and len(data) == 2 * SETTINGS.shard_sequences
    other = drafter_data.build(replace(SETTINGS, layers=(1, 4)), drafter_data.RunOptions(SHARD, "cpu"), log=lambda m: None)
    with pytest.raises(UserError, match=f"{other}.*same layers"):
        drafter_data.load([first, other])


def replace_batch(config: TrainConfig, batch: int) -> TrainConfig:
    return replace(config, batch_size=batch)


def test_loop_guard_breaks_a_loop_with_the_best_token_that_does_not_repeat():
    guard = drafter_data.LoopGuard(ngram=2, keep=3)
    assert not guard.repeats([5, 6, 7])
    assert guard.repeats([5, 6, 7, 5, 6])  # the 2-gram (5, 6) occurred before
    assert guard.repeats([4, 4, 4])  # overlapping occurrences count
    assert not guard.repeats([5, 6, 7, 6, 5])
    row = [1, 5, 6, 7, 5, 6, 7, 5]  # a loop of period 3
    assert guard.escape(row, [6, 9, 7]) == 9  # 6 would repeat (5, 6); 9 is the best that does not
    assert guard.escape(row, [9, 6]) == 9  # the greedy token when it does not repeat
    assert guard.escape(row, [6, 6]) == 6  # every candidate repeats: the second best
    assert guard.loop_share(row, 1) == 3 / 7  # (5, 6), (6, 7), (7, 5) again at positions 5, 6, 7


@pytest.mark.parametrize("route", ["fp16", "bf16"])
def test_a_cheap_head_keeps_the_float32_top_k(route, monkeypatch):
    """The data's head with a cheap product forced (as it is taken on Gemma's 262k-row head): the
    float32 head's top-k ids, from the rescored candidates, and a normaliser close to float32's."""
    monkeypatch.setenv(f"SDLAB_{route.upper()}_HEAD", "1")
    target = load_model(resolve_preset("tiny").target, "cpu")
    ids = target.tokenizer("It is a truth universally acknowledged that a single man", return_tensors="pt").input_ids
    with torch.inference_mode():
        final = target.model(input_ids=ids, output_hidden_states=True).hidden_states[-1][0]
    cheap = drafter_data.Head(target.model, rescore=64)
    if cheap.route != route:
        pytest.skip(f"no {route} product on this machine ({cheap.route})")
    exact_ids, exact_logprobs = drafter_data.Head(target.model, rescore=0).top(final, 8)
    cheap_ids, cheap_logprobs = cheap.top(final, 8)
    assert torch.equal(cheap_ids, exact_ids)
    assert torch.allclose(cheap_logprobs, exact_logprobs, atol=0.05)


def test_print_folder_names_the_folder_a_build_fills_and_builds_nothing(cache, capsys):
    argv = ["--preset", "tiny", "--budget-tokens", str(SHARD), "--device", "cpu", "--seq-len", "24",
            "--shard-sequences", "4", "--distill-share", "0.5", "--prompt-tokens", "12", "--chat-prompt-tokens", "12",
            "--loop-ngram", "1", "--loop-keep", "2", "--sources", "pystdlib", "--seed", "3"]
    assert drafter_data.main([*argv, "--print-folder"]) == 0
    printed = Path(capsys.readouterr().out.strip())
    assert printed.parent == cache / "speculative-decoding-lab" / "drafter-data" and not printed.exists()
    settings, run, _ = drafter_data.parse_args(argv)
    assert settings == SETTINGS
    assert drafter_data.build(settings, run, log=lambda m: None) == printed
