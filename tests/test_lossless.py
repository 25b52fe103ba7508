"""Greedy speculative decoding is token-for-token the target's own model.generate(do_sample=False)."""
import pytest
from prompts import LOSSLESS_PROMPTS

from core import DecodeRequest, build_decoder

MAX_NEW = 40
SHAPES = [
    ("none", {}),
    ("draft", {"k": 4}),
    ("draft", {"k": 1}),  # slow tier: k=4 checks the draft's chains by default
    ("draft", {"tree": "2x3"}),
    ("draft", {"tree": "3x2"}),  # slow tier: 2x3 checks the draft's trees by default
    ("ngram", {"k": 4}),
    ("ngram", {"tree": "3x4"}),  # slow tier: hybrid's trees hold ngram branches
    ("hybrid", {"k": 5}),
    ("hybrid", {"tree": "4x5", "eagle_nodes": 24}),
    ("hybrid", {"tree": "auto"}),
    ("ngram", {"k": "auto"}),
    ("draft", {"k": "auto"}),
    ("eagle3", {"tree": "auto"}),
]


SLOW_SHAPES = [("draft", {"tree": "3x2"}), ("draft", {"k": 1}), ("ngram", {"tree": "3x4"})]


@pytest.mark.parametrize("drafter,shape", [
    pytest.param(d, s, id=f"{d}-{'-'.join(map(str, s.values()))}", marks=[pytest.mark.slow] if (d, s) in SLOW_SHAPES else [])
    for d, s in SHAPES])
def test_greedy_output_is_the_target_alone(drafter, shape, baselines):
    assert len(LOSSLESS_PROMPTS) >= 20
    for prompt in LOSSLESS_PROMPTS:
        decoder, ids = build_decoder(DecodeRequest.of(prompt, "tiny", drafter, max_new_tokens=MAX_NEW, **shape))
        assert ids == baselines[prompt][0]
        for _ in decoder.steps(ids):
            pass
        result = decoder.result
        assert result.tokens == baselines[prompt][1], f"{drafter} {shape} diverged on {prompt!r}"
        assert result.kv["blocks_in_use_after"] == 0
        if result.draft_kv is not None:
            assert result.draft_kv["blocks_in_use_after"] == 0


def test_small_blocks_and_trees_still_lossless(baselines):
    """Block size 2 makes trees spill into fresh blocks every step; output must not change."""
    for prompt in LOSSLESS_PROMPTS[:8]:
        decoder, ids = build_decoder(DecodeRequest.of(prompt, "tiny", "draft", tree="2x3", max_new_tokens=MAX_NEW,
                                                      block_size=2))
        for _ in decoder.steps(ids):
            pass
        assert decoder.result.tokens == baselines[prompt][1]
        assert decoder.result.kv["blocks_freed"] > 0

