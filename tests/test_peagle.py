"""P-EAGLE (core.drafters.peagle): one drafter forward a step, what it was trained to compute, and
lossless through the engine -- greedy token for token, chains and trees, alone and in hybrid, and
the target's law at temperature > 0 (chi-square). The tiny target's P-EAGLE is shipped
(assets/tiny/peagle, trained from its eagle3 by ``python -m core train peagle``)."""
import pytest
import torch
from sampling_law import binned, exact_joint, sample_pairs
from scipy.stats import chisquare

from core import DecodeRequest, build_decoder
from core.common.errors import UserError
from core.drafters.base import DraftShape
from core.drafters.eagle_net import FeatureDrafterConfig, FeatureDrafterNet, run_segment
from core.drafters.peagle import PEagleDrafter
from core.engine.decoder import DecodeSettings, SpeculativeDecoder
from core.runtime.kv_cache import PagedKVCache, SlotLayout
from core.train.eagle import unroll, unrolled_loss
from core.train.features import DrafterData

MAX_NEW = 32
SHAPES = {"k=5": dict(k=5), "k=8": dict(k=8), "tree 3x4 N=16": dict(tree="3x4", eagle_nodes=16)}


@pytest.fixture(scope="module")
def target(tiny):
    return tiny[0]


def decode(target, drafter, ids, max_new=MAX_NEW):
    decoder = SpeculativeDecoder(target, drafter, DecodeSettings(max_new_tokens=max_new),
                                 {"prompt": "", "preset": "tiny", "drafter": drafter.name, "settings": {}})
    steps = list(decoder.steps(ids))
    return decoder.result, steps


@pytest.mark.parametrize("shape", list(SHAPES))
def test_greedy_output_is_the_target_alone_with_one_drafter_forward_a_step(shape, baselines):
    accepted_deep = 0
    for prompt, (ids, expected) in baselines.items():
        decoder, ids = build_decoder(DecodeRequest.of(prompt, "tiny", "peagle", max_new_tokens=MAX_NEW,
                                                      **SHAPES[shape]))
        steps = list(decoder.steps(ids))
        result = decoder.result
        assert result.tokens == expected, f"peagle {shape} diverged on {prompt!r}"
        assert result.kv["blocks_in_use_after"] == 0 and result.draft_kv["blocks_in_use_after"] == 0
        assert result.draft_forwards == sum(1 for step in steps if step.nodes)  # one forward a drafting step
        accepted_deep += sum(1 for step in steps for node in step.nodes if node.depth > 1 and node.status == "accepted")
    assert accepted_deep > 0, "no token past depth 1 was ever accepted: the placeholders learned nothing"


@pytest.mark.parametrize("drafter", ["hybrid-peagle", "peagle"])
def test_hybrid_and_auto_with_peagle_stay_lossless(drafter, baselines):
    for prompt, (ids, expected) in list(baselines.items())[:10]:
        decoder, ids = build_decoder(DecodeRequest.of(prompt, "tiny", drafter, k="auto", max_new_tokens=MAX_NEW))
        for _ in decoder.steps(ids):
            pass
        assert decoder.result.tokens == expected, f"{drafter} diverged on {prompt!r}"
        assert decoder.result.kv["blocks_in_use_after"] == 0


def test_hybrid_peagle_names_its_feature_drafter():
    prompt = "one two three one two three one two three"
    decoder, ids = build_decoder(DecodeRequest.of(prompt, "tiny", "hybrid-peagle", k=5, max_new_tokens=16))
    proposers = {node.proposer for step in decoder.steps(ids) for node in step.nodes}
    assert "ngram" in proposers and any(name.startswith("peagle-d") for name in proposers)


@pytest.mark.parametrize("prompt,shape", [("In the beginning God created", dict(k=5)),
                                          pytest.param("我爱中国", dict(tree="2x3", eagle_nodes=6),
                                                       marks=pytest.mark.slow)])
def test_sampling_follows_the_target(prompt, shape, target):
    """The first two tokens' joint law at T = 0.7, binned, against the target's exact law."""
    temperature, n = 0.7, 500
    joint = exact_joint(target, target.tokenizer(prompt).input_ids, temperature=temperature)
    counts, proposed = sample_pairs(prompt, "tiny", "peagle", temperature, n, **shape)
    observed, expected = binned(joint, counts, n)
    assert len(observed) >= 3
    assert chisquare(observed, expected).pvalue > 1e-3
    assert proposed > 0


def test_training_unroll_equals_the_one_parallel_forward():
    """Unroll step j at anchor t (placeholders after the true pairs) is what the drafting forward
    computes at placeholder j - 1 when the cache holds the pairs up to t."""
    torch.manual_seed(0)
    hidden = 32
    config = FeatureDrafterConfig((1, 2), hidden, 64, 4, 2, 128, output_norm=True, parallel_tokens=4)
    net = FeatureDrafterNet(config, torch.randn(50, hidden), torch.randn(50, hidden)).eval()
    tokens, features = torch.randint(0, 50, (1, 12)), torch.randn(1, 12, hidden)
    with torch.no_grad():
        net.mask_features.normal_()  # offsets, zero when a drafter is made
        outputs = unroll(net, features, tokens, 5)
        for t in (0, 3, 6):
            mask_features, mask_embeddings = net.placeholders(features[0, t], 4)
            kv = PagedKVCache(SlotLayout(1, 2, hidden // 4), num_blocks=8, block_size=4).new_request()
            real = torch.nn.functional.embedding(tokens[0, 1 : t + 2], net.embed_weight)
            out = run_segment(net, kv, torch.cat([features[0, : t + 1], mask_features]),
                              torch.cat([real, mask_embeddings]))
            for step in range(1, 6):
                torch.testing.assert_close(out[t + step - 1], outputs[step - 1][0, t], atol=1e-5, rtol=1e-5)


def test_depth_decay_weights_the_unroll_steps():
    """``--depth-decay``: step j of the loss weighs decay**(j-1); decay 0 leaves depth 1 alone (the loss of a
    one-step unroll), decay 1 is the plain mean, decay 0.5 the weighted mean of the steps' own losses."""
    torch.manual_seed(0)
    hidden, vocab, length = 32, 50, 10
    config = FeatureDrafterConfig((1, 2), hidden, 64, 4, 2, 128, output_norm=True, parallel_tokens=4)
    net = FeatureDrafterNet(config, torch.randn(vocab, hidden), torch.randn(vocab, hidden))
    with torch.no_grad():
        net.mask_features.normal_()
    top_probs = torch.softmax(torch.randn(2, length, 4), -1)
    data = DrafterData(torch.randint(0, vocab, (2, length)), torch.randn(2, length, 2, hidden).bfloat16(),
                       torch.randint(0, vocab, (2, length, 4)), top_probs)
    rows = torch.arange(2)

    def loss(steps, decay):
        with torch.no_grad():
            return float(unrolled_loss(net, data, rows, steps, 0.0, None, torch.Generator().manual_seed(0), decay))

    assert loss(5, 0.0) == pytest.approx(loss(1, 1.0))
    # each step's own loss, from the means of shorter unrolls (the same anchors are drawn for the steps they share)
    steps = [j * loss(j, 1.0) - (j - 1) * loss(j - 1, 1.0) if j > 1 else loss(1, 1.0) for j in range(1, 6)]
    weights = [0.5 ** j for j in range(5)]
    assert loss(5, 0.5) == pytest.approx(sum(w * s for w, s in zip(weights, steps)) / sum(weights), rel=1e-5)
    assert loss(5, 0.5) != pytest.approx(loss(5, 1.0))


def test_a_deeper_draft_than_the_placeholders_is_refused(target):
    with pytest.raises(UserError, match="at most 8 tokens"):
        PEagleDrafter(DraftShape(1, 9), target)
    with pytest.raises(ValueError, match="at most"):
        net = PEagleDrafter(DraftShape(1, 4), target).net
        net.placeholders(torch.zeros(net.config.hidden_size), 8)


def test_one_step_drafts_every_depth_from_one_forward(target):
    """The step records one drafter forward, and the tree's depth-d candidates are the same under each
    parent (each depth is guessed once, from the context only)."""
    ids = target.tokenizer("It is a truth universally acknowledged").input_ids
    drafter = PEagleDrafter(DraftShape(2, 4), target, eagle_nodes=30)
    result, steps = decode(target, drafter, ids, max_new=8)
    expansion = steps[1].expansion
    assert result.draft_forwards == len([step for step in steps if step.nodes])
    assert expansion is not None
    by_depth = {}
    for token, depth, parent in zip(expansion.tokens, expansion.depths, expansion.parents):
        by_depth.setdefault(depth, {}).setdefault(parent, []).append(token)
    for depth, groups in by_depth.items():
        assert len({tuple(tokens) for tokens in groups.values()}) == 1, f"depth {depth} differs between parents"
