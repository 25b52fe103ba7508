"""At temperature > 0 the speculative output follows the target's own distribution.

For the first two generated tokens, the target's exact joint law p(x1) p(x2 | x1) is computed
from its logits; N speculative runs with different seeds are binned the same way and compared
with a chi-square test.
"""
import pytest
import torch
from scipy.stats import chisquare

from core import DecodeRequest, build_decoder

# English prompts: the tiny target's Chinese is too spread out for N runs to fill the bins.


@pytest.fixture(autouse=True)
def fixed_cost_curve(monkeypatch):
    """``--k auto`` reads this machine's measured verify cost; a fixed, gently rising curve keeps its
    pruning (and so what this test exercises) the same on every machine and load."""
    from core.cost.curve import CostCurve

    curve = CostCurve(tokens=[1, 2, 3, 4], ratio=[1.0, 1.05, 1.1, 1.15], forward_s=0.01, device="cpu", threads=1,
                      model="fixed")
    monkeypatch.setattr("core.api.cost_curve", lambda target: curve)

TEMPERATURE = 0.8
N = 600


@torch.inference_mode()
def exact_joint(loaded, prompt_ids, temperature=TEMPERATURE, mass=0.995, max_first=256):
    """{(x1, x2): probability} for the first two tokens (x2 None after an end-of-sequence x1).

    First tokens are taken in order of probability until ``mass`` is covered (at most
    ``max_first``); the rest of the law falls into the pooled bin of the chi-square test.
    """
    model = loaded.model
    p1 = torch.softmax(model(torch.tensor([prompt_ids])).logits[0, -1] / temperature, dim=-1)
    order = torch.argsort(p1, descending=True)
    n_first = min(int((p1[order].cumsum(0) < mass).sum()) + 1, max_first)
    first = order[:n_first].tolist()
    # one batched forward: the prompt followed by each candidate first token
    batch = torch.tensor([prompt_ids + [x1] for x1 in first])
    p2 = torch.softmax(model(batch).logits[:, -1] / temperature, dim=-1)  # [n_first, vocab]
    joint = {}
    for row, x1 in enumerate(first):
        if x1 in loaded.eos_ids:
            joint[(x1, None)] = p1[x1].item()
            continue
        pair = p1[x1] * p2[row]
        for x2 in torch.nonzero(pair > 1e-6).flatten().tolist():
            joint[(x1, x2)] = pair[x2].item()
    return joint


def binned(joint, counts, n):
    """Bins with expected count >= 5 each, the rest pooled; returns observed, expected."""
    big = [k for k, p in joint.items() if p * n >= 5]
    observed = [counts.get(k, 0) for k in big]
    expected = [joint[k] * n for k in big]
    observed.append(n - sum(observed))
    expected.append(n - sum(expected))
    return observed, expected


def sample_pairs(prompt, drafter, **shape):
    """{(x1, x2): count} over N seeds, and the draft tokens verified over all of them."""
    counts, proposed = {}, 0
    for seed in range(N):
        decoder, ids = build_decoder(DecodeRequest.of(
            prompt, "tiny", drafter, temperature=TEMPERATURE, seed=seed, max_new_tokens=3, **shape
        ))
        for _ in decoder.steps(ids):
            pass
        tokens = decoder.result.tokens
        key = (tokens[0], tokens[1] if len(tokens) > 1 else None)
        counts[key] = counts.get(key, 0) + 1
        proposed += decoder.result.draft_tokens_proposed
    return counts, proposed


@pytest.mark.parametrize(
    "prompt,drafter,shape",
    [
        ("And God said", "draft", {"k": 2}),
        pytest.param("It is a truth", "draft", {"tree": "2x2"}, marks=pytest.mark.slow),  # hybrid checks trees
        pytest.param("one two three one two three one two", "ngram", {"k": 2},  # the rule draft k=2 checks
                     marks=pytest.mark.slow),
        pytest.param("It is a truth", "draft", {"k": "auto"},  # the goodput controller prunes the chain
                     marks=pytest.mark.slow),
        ("one two three one two three one two", "hybrid", {"tree": "2x3", "eagle_nodes": 6}),
    ],
)
def test_speculative_sampling_follows_the_target(tiny, prompt, drafter, shape):
    target, _ = tiny
    ids = target.tokenizer(prompt).input_ids
    joint = exact_joint(target, ids)
    counts, proposed = sample_pairs(prompt, drafter, **shape)
    observed, expected = binned(joint, counts, N)
    assert len(observed) >= 3, "the test needs a spread-out distribution"
    assert chisquare(observed, expected).pvalue > 1e-3
    assert proposed > 0  # the speculative path ran: drafts were verified


def test_the_check_rejects_the_draft_models_own_law(tiny):
    """Negative control: samples from the draft's law (what accepting every draft token would give)
    fail the same check against the target."""
    target, draft = tiny
    ids = target.tokenizer("And God said").input_ids
    target_joint = exact_joint(target, ids)
    draft_joint = exact_joint(draft, ids)
    keys = list(draft_joint)
    probs = torch.tensor([draft_joint[k] for k in keys])
    draws = torch.multinomial(probs / probs.sum(), N, replacement=True, generator=torch.Generator().manual_seed(0))
    counts = {}
    for i in draws.tolist():
        counts[keys[i]] = counts.get(keys[i], 0) + 1
    observed, expected = binned(target_joint, counts, N)
    assert chisquare(observed, expected).pvalue < 1e-3
