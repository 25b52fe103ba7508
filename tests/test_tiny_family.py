"""The embedded tiny family: shipped folders, tokenizer contract, sizes, reproducible training."""

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from core.train import corpus
from core.train.loop import TrainConfig, count_parameters
from core.train.streams import random_batches, source_weights, token_streams
from core.train.tiny import build_model, train_lm, train_tokenizer

ASSETS = Path(__file__).resolve().parents[1] / "assets" / "tiny"
ROLES = ("target", "draft")
MIXED_TEXT = "我爱中国。\n\nIt is a truth universally acknowledged, 1811.  Two  spaces 龘 😀"


@pytest.fixture(scope="module")
def tokenizers():
    return {role: AutoTokenizer.from_pretrained(ASSETS / role) for role in ROLES}


@pytest.fixture(scope="module")
def models():
    return {role: AutoModelForCausalLM.from_pretrained(ASSETS / role).eval() for role in ROLES}


def test_both_members_load_and_generate(models, tokenizers):
    tokenizer = tokenizers["target"]
    ids = tokenizer("我爱", return_tensors="pt")["input_ids"]
    for model in models.values():
        output = model.generate(ids, max_new_tokens=4, do_sample=False)
        assert output.shape[1] > ids.shape[1]


@pytest.mark.parametrize("prompt, is_expected_script", [
    ("我爱", lambda ch: "\u4e00" <= ch <= "\u9fff" or ch in "，。？！；：\n"),
    ("It is a truth universally acknowledged", lambda ch: ch.isascii()),
])
def test_target_continues_in_the_prompt_language(models, tokenizers, prompt, is_expected_script):
    tokenizer = tokenizers["target"]
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    output = models["target"].generate(ids, max_new_tokens=24, do_sample=False)[0, ids.shape[1]:]
    text = tokenizer.decode(output, skip_special_tokens=True)
    assert len(text) > 10
    assert sum(map(is_expected_script, text)) >= 0.9 * len(text)


def test_tokenizer_is_shared():
    files = {role: (ASSETS / role / "tokenizer.json").read_bytes() for role in ROLES}
    assert files["target"] == files["draft"]


@pytest.mark.parametrize("char", list("我爱中国"))
def test_each_char_of_the_lesson_is_one_token(tokenizers, char):
    tokenizer = tokenizers["target"]
    ids = tokenizer(char, add_special_tokens=False)["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids) == [char]


def test_bos_is_prepended_and_text_round_trips(tokenizers):
    tokenizer = tokenizers["target"]
    ids = tokenizer(MIXED_TEXT)["input_ids"]
    assert ids[0] == tokenizer.bos_token_id
    assert tokenizer.eos_token_id not in ids
    assert tokenizer.unk_token_id not in ids  # unseen characters fall back to byte tokens
    assert tokenizer.decode(ids, skip_special_tokens=True) == MIXED_TEXT
    assert tokenizer.convert_ids_to_tokens(ids[1:5]) == ["我", "爱", "中", "国"]


def test_configs_match_tokenizer(models, tokenizers):
    tokenizer = tokenizers["target"]
    for model in models.values():
        assert model.config.vocab_size == len(tokenizer)
        assert model.config.max_position_embeddings == 512
        assert model.config.eos_token_id == tokenizer.eos_token_id
        assert model.generation_config.eos_token_id == tokenizer.eos_token_id
        assert model.config.bos_token_id == tokenizer.bos_token_id


def test_parameter_counts_and_size(models):
    target, draft = count_parameters(models["target"]), count_parameters(models["draft"])
    assert 5_000_000 <= target <= 10_000_000
    assert draft * 5 <= target
    weights = sum((ASSETS / role / "model.safetensors").stat().st_size for role in ROLES)
    assert weights < 80 * 2**20


def test_fortune_parser_strips_colours_blank_lines_and_headers(tmp_path):
    path = tmp_path / "poems"
    path.write_text(
        "\x1b[32m《静夜思》\x1b[m\n\x1b[33m作者：李白\x1b[m\n床前明月光\n\n  疑是地上霜\n%\n\n%\n"
        "题目:《无题》\n我爱中国\n%\n",
        encoding="utf-8",
    )
    assert corpus.read_fortunes(path) == [
        "《静夜思》\n作者：李白\n床前明月光\n疑是地上霜", "题目:《无题》\n我爱中国"
    ]
    assert corpus.read_poems(path) == ["床前明月光\n疑是地上霜", "我爱中国"]


def test_every_twentieth_document_is_held_out():
    train, heldout = corpus.split_heldout([str(i) for i in range(45)])
    assert heldout == ["19", "39"]
    assert len(train) == 43 and "19" not in train


def test_missing_packages_are_named(tmp_path):
    absent = corpus.Source(
        name="absent", language="en", apt_packages=("some-text-package",), licence="none",
        required_paths=(tmp_path / "nothing-here",), read=list,
    )
    with pytest.raises(corpus.MissingPackagesError, match="apt-get install some-text-package"):
        corpus.build_corpus(tmp_path, sources=(absent,))


def test_corpus_is_cached_and_split(tmp_path):
    calls = []
    source = corpus.Source(
        name="numbers", language="en", apt_packages=(), licence="none", required_paths=(),
        read=lambda: calls.append(1) or [f"doc {i}" for i in range(40)],
    )
    first = corpus.build_corpus(tmp_path, sources=(source,))
    second = corpus.build_corpus(tmp_path, sources=(source,))
    assert first == second and len(calls) == 1
    assert first.heldout["numbers"] == ["doc 19", "doc 39"]


def _train_tiny(texts: dict[str, list[str]], seed: int) -> dict[str, torch.Tensor]:
    tokenizer = train_tokenizer([doc for docs in texts.values() for doc in docs], vocab_size=400)
    torch.manual_seed(seed)
    model = build_model(dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                             num_attention_heads=2, num_key_value_heads=2), tokenizer)
    streams = token_streams(texts, tokenizer)
    config = TrainConfig(steps=3, seq_len=16, batch_size=2, warmup_steps=1)
    batches = random_batches(streams, source_weights(streams), config.batch_size, config.seq_len,
                             torch.Generator().manual_seed(seed))
    train_lm(model, batches, config, name="test")
    return model.state_dict()


def test_training_is_reproducible_from_seed():
    texts = {
        "tang300": ["床前明月光，疑是地上霜。\n举头望明月，低头思故乡。", "我爱中国，中国爱我。"] * 3,
        "austen": ["It is a truth universally acknowledged, that a single man in possession "
                   "of a good fortune, must be in want of a wife."] * 3,
    }
    first, second = _train_tiny(texts, seed=0), _train_tiny(texts, seed=0)
    assert all(torch.equal(first[name], second[name]) for name in first)
    other = _train_tiny(texts, seed=1)
    assert not all(torch.equal(first[name], other[name]) for name in first)


def test_source_weights_split_each_language_share_by_size():
    streams = {"tang300": torch.zeros(100), "austen": torch.zeros(300), "kjv": torch.zeros(100)}
    default = source_weights(streams)
    assert default["tang300"] == pytest.approx(0.1) and default["austen"] == pytest.approx(0.9 * 3 / 4)
    half = source_weights(streams, zh_share=0.5)  # the Gemma drafters' data: half Chinese
    assert half == pytest.approx({"tang300": 0.5, "austen": 0.375, "kjv": 0.125})
