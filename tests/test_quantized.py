"""The int8 target (core.runtime.quantized, core.runtime.rowwise): a row computes the same bits whatever
else its forward holds, and speculative decoding on it is lossless against its own plain decoding --
greedy token for token for every drafter and shape, and its law at temperature > 0 (chi-square)."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from prompts import LOSSLESS_PROMPTS
from sampling_law import binned, exact_joint, sample_pairs
from scipy.stats import chisquare

from core import DecodeRequest, build_decoder
from core.common.errors import UserError
from core.models.loading import PRESETS, load_model
from core.runtime.forward import chain_parents, run_segment
from core.runtime.head import LMHead
from core.runtime.kv_cache import PagedKVCache
from core.runtime.quantized import int8_product, prepack

MAX_NEW = 40
PROMPTS = LOSSLESS_PROMPTS[:8]


@pytest.fixture(scope="module")
def baseline_target():
    """``baselines`` decodes the int8 tiny target (model.generate on it: its own plain decoding)."""
    return load_model(PRESETS["tiny"].target, "cpu", precision="int8")


@pytest.fixture(scope="module")
def baseline_prompts():
    return PROMPTS


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 9), others=st.integers(1, 9), seed=st.integers(0, 2**16))
def test_a_rows_product_is_the_same_bits_whatever_rows_join(rows, others, seed):
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(48, 40, generator=generator)
    packed = prepack(weight)
    x = torch.randn(rows, 40, generator=generator) * torch.logspace(-3, 3, 40)  # channels of very different size
    joined = torch.cat([x, 50 * torch.randn(others, 40, generator=generator)])
    assert torch.equal(int8_product(x, packed), int8_product(joined, packed)[:rows])
    for i in range(rows):
        assert torch.equal(int8_product(x[i:i + 1], packed)[0], int8_product(x, packed)[i])
    # and it is the int8 product it claims: within the weights' rounding of the float32 one
    exact = x @ weight.T
    assert torch.allclose(int8_product(x, packed), exact, rtol=0, atol=float(exact.abs().max()) * 0.05)


def _last_rows(target, context: list[int], tokens: list[int]) -> torch.Tensor:
    """The body's output (the LM head's input) for ``tokens`` verified after ``context``."""
    cache = PagedKVCache.for_model(target.model, 16, 16)
    kv = cache.new_request()
    run_segment(target.model, kv, context, chain_parents(len(context)))
    kv.commit(list(range(len(context))))
    return run_segment(target.model, kv, tokens, chain_parents(len(tokens))).last_hidden


def test_a_rows_logits_do_not_change_when_other_rows_join_the_forward(baseline_target):
    """The body gives a row the same bits whatever else its forward holds; the head (float32, as for
    every target) then gives it logits within float32's rounding and the same greedy token."""
    ids = baseline_target.tokenizer("我爱中国，因为中国有悠久的历史。It is a truth").input_ids
    context, verify = ids[:-6], ids[-6:]
    head = LMHead.of(baseline_target.model)
    alone = _last_rows(baseline_target, context, verify[:1])
    for n in (2, 4, 6):
        joined = _last_rows(baseline_target, context, verify[:n])
        assert torch.equal(joined[0], alone[0])
        assert head(joined)[0].argmax() == head(alone)[0].argmax()
        assert torch.allclose(head(joined)[0], head(alone)[0], rtol=1e-5, atol=1e-5)


def test_the_int8_target_is_a_target_of_its_own(tiny, baseline_target):
    """Not the float32 target under another name: its logits differ, by about the weights' rounding."""
    ids = tiny[0].tokenizer("It is a truth universally acknowledged").input_ids
    head = LMHead.of(tiny[0].model)
    float32 = head(_last_rows(tiny[0], ids[:-1], ids[-1:]))
    int8 = head(_last_rows(baseline_target, ids[:-1], ids[-1:]))
    assert not torch.equal(float32, int8)
    assert (float32 - int8).abs().max() < 0.1 * float32.abs().max()


SHAPES = [
    ("draft", {"k": 4}),
    ("draft", {"tree": "2x3"}),
    ("ngram", {"k": 4}),
    ("medusa", {"tree": "2x3"}),
    ("eagle", {"tree": "2x3"}),
    ("eagle3", {"k": 5}),
    ("hybrid", {"tree": "4x5", "eagle_nodes": 24}),
    ("hybrid", {"tree": "auto"}),
]


@pytest.mark.parametrize("drafter,shape", SHAPES, ids=[f"{d}-{'-'.join(map(str, s.values()))}" for d, s in SHAPES])
def test_greedy_on_the_int8_target_is_its_plain_decoding(drafter, shape, baselines):
    for prompt in PROMPTS:
        request = DecodeRequest.of(prompt, "tiny", drafter, max_new_tokens=MAX_NEW, target_precision="int8", **shape)
        decoder, ids = build_decoder(request)
        for _ in decoder.steps(ids):
            pass
        result = decoder.result
        assert result.tokens == baselines[prompt][1], f"{drafter} {shape} diverged on {prompt!r}"
        assert result.kv["blocks_in_use_after"] == 0
        assert decoder.run_info["settings"]["target_precision"] == "int8"


def test_sampling_on_the_int8_target_follows_its_law(baseline_target):
    prompt, temperature, n = "one two three one two three one two", 0.7, 600
    joint = exact_joint(baseline_target, baseline_target.tokenizer(prompt).input_ids, temperature)
    counts, proposed = sample_pairs(prompt, "tiny", "hybrid", temperature, n, tree="2x3", eagle_nodes=6,
                                    target_precision="int8")
    observed, expected = binned(joint, counts, n)
    assert len(observed) >= 3 and proposed > 0
    assert chisquare(observed, expected).pvalue > 1e-3


def test_a_bad_precision_is_refused_by_name():
    with pytest.raises(UserError, match="target_precision"):
        DecodeRequest.of("hi", "tiny", "none", target_precision="int4")
    with pytest.raises(UserError, match="unknown target precision"):
        load_model(PRESETS["tiny"].target, "cpu", precision="fp8")
