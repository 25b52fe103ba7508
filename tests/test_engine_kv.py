"""KV accounting through whole runs: peaks, rejections, failures and cancels leak no block."""
import math

import pytest

from core import DecodeRequest, build_decoder
from core.drafters.draft_model import DraftModelDrafter

PROMPT = "It is a truth universally acknowledged"


def run(decoder, ids):
    for _ in decoder.steps(ids):
        pass
    return decoder.result


def test_peak_blocks_are_the_sequence_plus_the_tree():
    for block_size in (4, 16):
        decoder, ids = build_decoder(DecodeRequest.of(PROMPT, "tiny", "draft", tree="2x3", max_new_tokens=48, block_size=block_size))
        result = run(decoder, ids)
        tokens = len(ids) + result.new_tokens
        tree_nodes = 2 + 4 + 8
        lower = math.ceil((tokens - 1) / block_size)
        upper = math.ceil((tokens + tree_nodes) / block_size)
        assert lower <= result.kv["peak_blocks_in_use"] <= upper
        assert result.kv["blocks_in_use_after"] == 0


def test_rejections_free_slots_and_steps_record_them():
    decoder, ids = build_decoder(DecodeRequest.of(PROMPT, "tiny", "draft", tree="2x3", max_new_tokens=32, block_size=4))
    result = run(decoder, ids)
    assert result.kv["slots_freed"] > 0
    assert result.kv["slots_freed"] == sum(s.kv.slots_freed for s in result.steps)
    assert result.kv["blocks_freed"] == sum(len(s.kv.freed_blocks) for s in result.steps)
    step = next(s for s in result.steps if s.kv.slots_freed)
    grid = "".join(step.kv.slot_grid.values())
    assert grid.count("F") == step.kv.slots_freed
    assert grid.count("W") == step.accepted_length + 1  # the root and the accepted nodes are kept


def test_a_run_that_fails_midway_returns_every_block(monkeypatch):
    calls = {"n": 0}
    original = DraftModelDrafter.propose

    def failing(self, ctx):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("simulated failure")
        return original(self, ctx)

    monkeypatch.setattr(DraftModelDrafter, "propose", failing)
    decoder, ids = build_decoder(DecodeRequest.of(PROMPT, "tiny", "draft", k=4, max_new_tokens=32))
    with pytest.raises(RuntimeError, match="simulated failure"):
        run(decoder, ids)
    assert decoder.result.stop_reason == "error"
    assert decoder.result.kv["blocks_in_use_after"] == 0
    assert decoder.result.draft_kv["blocks_in_use_after"] == 0
    assert decoder.kv.cache.pool.blocks_in_use == 0


def test_a_cancelled_run_returns_every_block():
    decoder, ids = build_decoder(DecodeRequest.of(PROMPT, "tiny", "draft", k=4, max_new_tokens=64))
    steps = decoder.steps(ids)
    next(steps)
    next(steps)
    assert decoder.kv.cache.pool.blocks_in_use > 0
    steps.close()
    assert decoder.result.stop_reason == "cancelled"
    assert decoder.result.kv["blocks_in_use_after"] == 0
    assert decoder.result.draft_kv["blocks_in_use_after"] == 0


def test_a_one_token_budget_with_a_draft_model_drafts_nothing_and_holds_no_draft_cache():
    """Found by the property test: a draft model that never drafted (its cache is made at the first
    draft) is committed to without one."""
    from core import DecodeRequest, build_decoder

    decoder, ids = build_decoder(DecodeRequest.of("0", "tiny", "draft", max_new_tokens=1))
    records = list(decoder.steps(ids))
    assert len(records) == 1 and not records[0].nodes and decoder.result.draft_kv is None
