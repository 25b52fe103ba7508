"""Batched speculative decoding: every request is token for token the target alone, at every batch
size, with prompts of different lengths; blocks go back to the shared pool when a request ends,
fails or is cancelled; the batched forward equals the single-request one."""
import math

import pytest
from prompts import LOSSLESS_PROMPTS
import torch

from core import DecodeRequest, build_decoder, target_greedy
from core.api import build_batch
from core.drafters.draft_model import DraftModelDrafter
from core.engine.batch import BatchDecoder, run_batch
from core.common.errors import UserError
from core.runtime.forward import chain_parents, forward_segment, run_batch_body
from core.runtime.head import LMHead
from core.runtime.kv_cache import PagedForward, PagedKVCache
from core.runtime.tree import with_root


MAX_NEW = 24
BATCH_SIZES = (1, 2, 4, 8, 16)
# 16 prompts of 2 to ~60 tokens, Chinese and English, shortest and longest alternating: every batch is ragged
_BY_LENGTH = sorted(LOSSLESS_PROMPTS, key=len)
PROMPTS = [p for pair in zip(_BY_LENGTH[:8], _BY_LENGTH[::-1][:8]) for p in pair]


@pytest.fixture(scope="module")
def expected(tiny):
    target, _ = tiny
    return {p: target_greedy(target, target.tokenizer(p).input_ids, MAX_NEW) for p in PROMPTS}


def check_lossless(batch: BatchDecoder, prompts: list[str], expected: dict) -> None:
    result = run_batch(batch)
    assert result.stop_reason == "done"
    for prompt, run in zip(prompts, result.results):
        assert run.tokens == expected[prompt], f"{run.drafter} diverged in a batch of {len(prompts)} on {prompt!r}"
        assert run.draft_kv is None or run.draft_kv["blocks_in_use_after"] == 0
    assert result.blocks_in_use_after == 0
    assert batch.pool.pool.blocks_in_use == 0


def test_prompts_are_ragged(tiny):
    lengths = {len(tiny[0].tokenizer(p).input_ids) for p in PROMPTS}
    assert len(PROMPTS) == 16 and min(lengths) <= 3 and max(lengths) > 40 and len(lengths) > 8


@pytest.mark.parametrize("drafter,shape", [("none", {}), ("draft", {"k": 4}), ("ngram", {"k": 4})])
@pytest.mark.parametrize("batch_size", BATCH_SIZES)
def test_greedy_batch_is_the_target_alone(drafter, shape, batch_size, expected):
    prompts = PROMPTS[:batch_size]
    check_lossless(build_batch(prompts, "tiny", drafter, max_new_tokens=MAX_NEW, **shape), prompts, expected)


def test_a_greedy_batch_through_the_bf16_head_is_the_target_alone(expected, monkeypatch):
    """The batched verify takes each row's exact argmax from one bf16 product over every request's
    rows (``SDLAB_BF16_HEAD=1`` forces the route on tiny's small head)."""
    monkeypatch.setenv("SDLAB_BF16_HEAD", "1")
    rows, greedy = [], LMHead.greedy
    monkeypatch.setattr(LMHead, "greedy", lambda self, hidden: rows.append(len(hidden)) or greedy(self, hidden))
    prompts = PROMPTS[:4]
    check_lossless(build_batch(prompts, "tiny", "draft", max_new_tokens=MAX_NEW, tree="2x3"), prompts, expected)
    assert rows and rows[0] == 4 * (1 + 2 + 4 + 8)  # the first verify: 4 requests x (root + full 2x3 tree), one product


@pytest.mark.parametrize("drafter,shape", [("draft", {"tree": "2x3"}), ("medusa", {"k": 4}),
                                           ("eagle", {"tree": "4x5", "eagle_nodes": 24})])
def test_trees_and_hidden_state_drafters_in_a_batch(drafter, shape, expected):
    prompts = PROMPTS[::4]  # 4 requests of different lengths
    batch = build_batch(prompts, "tiny", drafter, max_new_tokens=MAX_NEW, block_size=4, **shape)
    check_lossless(batch, prompts, expected)
    assert sum(r.kv["blocks_freed"] for r in batch.result.results) > 0  # rejected tree slots were released


def test_batched_forward_equals_one_request_at_a_time(random_llama):
    """Two requests, different prefixes and trees, one padded forward == two single forwards."""
    prefixes, roots = [[5, 9, 11, 3, 7, 2, 8], [40]], [12, 41]
    trees = [([50, 51, 52], [-1, -1, 0]), ([60], [-1])]

    def prefilled(cache):
        kvs = [cache.new_request() for _ in prefixes]
        for kv, prefix in zip(kvs, prefixes):
            forward_segment(random_llama, kv, prefix, chain_parents(len(prefix)))
            kv.commit(list(range(len(prefix))))
        return kvs

    single = prefilled(PagedKVCache.for_model(random_llama, num_blocks=16, block_size=4))
    alone = [forward_segment(random_llama, kv, [root] + tokens, with_root(parents))
             for kv, root, (tokens, parents) in zip(single, roots, trees)]
    cache = PagedKVCache.for_model(random_llama, num_blocks=16, block_size=4)
    kvs = prefilled(cache)
    together = run_batch_body(random_llama, PagedForward(cache), kvs, [[r] + t for r, (t, _) in zip(roots, trees)],
                              [with_root(p) for _, p in trees])
    for out, reference in zip(together, alone):
        logits = LMHead.of(random_llama)(out.last_hidden)
        assert out.hidden == [] and logits.shape == reference.shape
        torch.testing.assert_close(logits, reference, atol=1e-5, rtol=1e-5)
    assert [len(kv.pending) for kv in kvs] == [4, 2]  # padding rows were not written


def test_requests_finish_independently_and_free_their_blocks(tiny):
    """A request with a small budget leaves the batch and returns its blocks while the others run."""
    budgets = [4, 30, 30]
    built = [build_decoder(DecodeRequest.of(p, "tiny", "draft", k=3, max_new_tokens=n)) for p, n in zip(PROMPTS[4:7], budgets)]
    batch = BatchDecoder([d for d, _ in built], [ids for _, ids in built])
    short = batch.decoders[0]
    for records in batch.steps():
        if short.finished and len(records) > 1:
            assert short.kv.block_table == [] and short.result.kv["blocks_in_use_after"] < batch.pool.pool.peak_in_use
            assert 0 not in records or records[0].finished
    assert [len(r.tokens) for r in batch.result.results][0] == 4
    assert batch.result.target_forwards > batch.result.results[0].target_forwards
    assert batch.result.blocks_in_use_after == 0


def test_a_cancelled_batch_returns_every_block():
    batch = build_batch(PROMPTS[:6], "tiny", "draft", k=4, max_new_tokens=40)
    steps = batch.steps()
    next(steps)
    next(steps)
    assert batch.pool.pool.blocks_in_use > 0
    assert all(d.drafter.kv_summary()["blocks_in_use_after"] > 0 for d in batch.decoders)
    steps.close()
    assert batch.result.stop_reason == "cancelled"
    assert batch.pool.pool.blocks_in_use == 0
    assert all(r.stop_reason == "cancelled" and r.draft_kv["blocks_in_use_after"] == 0 for r in batch.result.results)


def test_a_batch_that_fails_midway_returns_every_block(monkeypatch):
    calls = {"n": 0}
    original = DraftModelDrafter.propose

    def failing(self, ctx):
        calls["n"] += 1
        if calls["n"] == 7:
            raise RuntimeError("simulated failure")
        return original(self, ctx)

    monkeypatch.setattr(DraftModelDrafter, "propose", failing)
    batch = build_batch(PROMPTS[:4], "tiny", "draft", k=4, max_new_tokens=32)
    with pytest.raises(RuntimeError, match="simulated failure"):
        run_batch(batch)
    assert batch.result.stop_reason == "error" and batch.pool.pool.blocks_in_use == 0
    assert all(r.stop_reason == "error" and r.draft_kv["blocks_in_use_after"] == 0 for r in batch.result.results)


def test_sampling_in_a_batch_draws_what_each_request_draws_alone():
    """Each request keeps its own generator: a batch samples exactly its requests' solo outputs,
    whose law the engine's sampling tests check."""
    prompts = PROMPTS[2:6]
    batch = build_batch(prompts, "tiny", "draft", k=3, temperature=0.8, seed=5, max_new_tokens=20)
    together = run_batch(batch).results
    for i, prompt in enumerate(prompts):
        decoder, ids = build_decoder(DecodeRequest.of(prompt, "tiny", "draft", k=3, temperature=0.8, seed=5 + i, max_new_tokens=20))
        for _ in decoder.steps(ids):
            pass
        assert together[i].tokens == decoder.result.tokens


def test_bad_batches_are_user_errors():
    with pytest.raises(UserError, match="between 1 and 16 on cpu"):
        build_batch(["我爱"] * 17, "tiny", "none")
    with pytest.raises(UserError, match="at least one prompt"):
        build_batch([], "tiny", "none")
    built = [build_decoder(DecodeRequest.of("我爱", "tiny", "none", block_size=b)) for b in (4, 16)]
    with pytest.raises(UserError, match="block size"):
        BatchDecoder([d for d, _ in built], [ids for _, ids in built])


@pytest.mark.parametrize("drafter,max_batch", [("draft", 2), ("eagle", 3), ("none", 1)])
def test_continuous_batching_joins_and_leaves_and_stays_lossless(drafter, max_batch, expected):
    """Six requests with different budgets through a batch of at most ``max_batch``: each waiting
    request joins when one leaves, never more than ``max_batch`` run, every output is the target
    alone, and every block comes back."""
    prompts = PROMPTS[1:7]
    budgets = [6, MAX_NEW, 10, MAX_NEW, 4, 12]
    built = [build_decoder(DecodeRequest.of(p, "tiny", drafter, k=3, max_new_tokens=n, block_size=4))
             for p, n in zip(prompts, budgets)]
    batch = BatchDecoder([d for d, _ in built], [ids for _, ids in built], max_batch=max_batch)
    served = list(batch.serve())
    assert served[0].joined == list(range(max_batch))
    assert all(len(s.records) <= max_batch for s in served)
    assert sorted(i for s in served for i in s.joined) == list(range(6))  # everyone joined once
    assert sorted(i for s in served for i in s.left) == list(range(6))  # and left once
    for before, after in zip(served, served[1:]):
        assert after.joined == before.waiting[: len(before.left)]  # the queue's head takes each freed place
        assert set(after.records) == (set(before.records) - set(before.left)) | set(after.joined)
    for s in served:
        assert all(s.records[i].finished for i in s.left)
        assert s.pool_in_use <= s.pool_blocks
    for run, prompt, budget in zip(batch.result.results, prompts, budgets):
        assert run.tokens == expected[prompt][:budget]
        assert run.draft_kv is None or run.draft_kv["blocks_in_use_after"] == 0
    assert batch.result.blocks_in_use_after == 0 and served[-1].pool_in_use == 0
    alone = sum(math.ceil(d.capacity_tokens(len(ids)) / 4) + 1 for d, ids in built)
    assert served[0].pool_blocks < alone  # the pool holds max_batch requests, not the whole queue


def test_batch_steps_carry_masks_and_both_caches(expected):
    """A BatchStep's numbers are the engine's: the drafter's per-step KV adds up to its run
    totals, the prefix is the committed sequence, and the padded rows are the longest tree."""
    prompts = PROMPTS[2:5]
    batch = build_batch(prompts, "tiny", "draft", max_batch=2, tree="2x2", max_new_tokens=12, block_size=4)
    served = list(batch.serve())
    by_request = {i: [s for s in served if i in s.records] for i in range(3)}
    for i, run in enumerate(batch.result.results):
        steps = by_request[i]
        kv = [s.draft_kv[i] for s in steps]
        assert sum(k.slots_written for k in kv) == run.draft_kv["slots_written"]
        assert sum(k.slots_freed for k in kv) == run.draft_kv["slots_freed"]
        assert sum(len(k.freed_blocks) for k in kv) == run.draft_kv["blocks_freed"] > 0
        assert all(k.blocks_after == len(k.block_table) and sum(map(len, k.slot_grid.values())) % 4 == 0 for k in kv)
        assert [s.records[i].draft_kv_blocks for s in steps] == [k.blocks_after for k in kv]
        committed = len(run.prompt_tokens) - 1
        for s in steps:
            assert s.prefix_tokens[i] == committed
            committed += len(s.records[i].emitted)
    for s in served:
        assert s.query_rows == max(1 + len(r.nodes) for r in s.records.values())
        assert all(s.returned_blocks[i] > 0 for i in s.left)


def test_the_goodput_controller_shows_its_drafters_cache_in_a_batch():
    batch = build_batch(PROMPTS[:2], "tiny", "draft", k="auto", max_new_tokens=8, block_size=4)
    served = list(batch.serve())
    assert all(set(s.draft_kv) == set(s.records) for s in served)
    assert sum(s.draft_kv[0].slots_written for s in served if 0 in s.records) == \
        batch.result.results[0].draft_kv["slots_written"]
