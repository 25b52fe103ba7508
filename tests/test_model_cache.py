"""The model cache keeps the models used most recently, and dropping one never breaks a decode
that is using it; a hub id with no hub to reach fails at once."""
from __future__ import annotations

import time

import pytest

from core import DecodeRequest, UserError, build_decoder, generate
from core.models import loading as models

TINY = models.ASSETS / "tiny"


def test_the_cache_drops_the_least_recently_used_model(monkeypatch):
    monkeypatch.setattr(models, "_loaded", models.OrderedDict())
    monkeypatch.setattr(models, "MAX_LOADED_MODELS", 2)
    target = models.load_model(str(TINY / "target"), "cpu")
    draft = models.load_model(str(TINY / "draft"), "cpu")
    assert models.load_model(str(TINY / "target"), "cpu") is target  # a hit makes it the most recent
    models.load_model(str(TINY / "draft-xs"), "cpu")  # evicts the draft, the least recently used
    assert list(models._loaded) == [(str(TINY / "target"), "cpu", "float32"),
                                    (str(TINY / "draft-xs"), "cpu", "float32")]
    assert models.load_model(str(TINY / "draft"), "cpu") is not draft


def test_evicting_a_model_does_not_break_a_running_decode(monkeypatch):
    expected = generate("我爱", drafter="draft", max_new_tokens=12).tokens
    monkeypatch.setattr(models, "_loaded", models.OrderedDict())
    monkeypatch.setattr(models, "MAX_LOADED_MODELS", 1)
    decoder, prompt_ids = build_decoder(DecodeRequest.of("我爱", drafter="draft", max_new_tokens=12))
    steps = decoder.steps(prompt_ids)
    next(steps)
    models.load_model(str(TINY / "draft-xs"), "cpu")  # the target and draft in use leave the cache
    assert (str(TINY / "target"), "cpu", "float32") not in models._loaded
    for _ in steps:
        pass
    assert decoder.result.tokens == expected and decoder.result.kv["blocks_in_use_after"] == 0


def test_a_hub_id_with_no_hub_to_reach_fails_at_once(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    start = time.monotonic()
    with pytest.raises(UserError, match="not in the local hub cache and the hub .* cannot be reached"):
        models.load_model("someone/not-cached-model", "cpu")
    assert time.monotonic() - start < 5.0
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert models.hub_offline()
