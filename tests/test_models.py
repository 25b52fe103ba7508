"""Model loading rules: sliding windows cap the context, tokenizers must agree."""
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import Gemma3TextConfig, LlamaConfig, PreTrainedTokenizerFast, Qwen2Config

from core.errors import UserError
from core.models import LoadedModel, check_same_tokenizer, pick_device, resolve_preset, sliding_window


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
