"""At temperature > 0 the speculative output follows the target's own distribution.

For the first two generated tokens, the target's exact joint law p(x1) p(x2 | x1) is computed
from its logits; N speculative runs with different seeds are binned the same way and compared
with a chi-square test.
"""
import pytest
import torch
from sampling_law import binned, exact_joint, sample_pairs
from scipy.stats import chisquare


# English prompts: the tiny target's Chinese is too spread out for N runs to fill the bins.


@pytest.fixture(autouse=True)
def fixed_cost_curve(monkeypatch):
    """``--k auto`` reads this machine's measured verify cost; a fixed, gently rising curve keeps its
    pruning (and so what this test exercises) the same on every machine and load."""
    from core.cost.curve import CostCurve

    curve = CostCurve(tokens=[1, 2, 3, 4], ratio=[1.0, 1.05, 1.1, 1.15], forward_s=0.01, device="cpu", threads=1,
                      model="fixed")
    monkeypatch.setattr("core.api.decoding.cost_curve", lambda target: curve)


TEMPERATURE = 0.8
N = 600


@pytest.mark.parametrize(
    "prompt,drafter,shape",
    [
        pytest.param("And God said", "draft", {"k": 2}, marks=pytest.mark.slow),  # eagle3 k=5 checks chains
                                                                                 # (tests/test_learned_drafters.py)
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
    joint = exact_joint(target, ids, TEMPERATURE)
    counts, proposed = sample_pairs(prompt, "tiny", drafter, TEMPERATURE, N, **shape)
    observed, expected = binned(joint, counts, N)
    assert len(observed) >= 3, "the test needs a spread-out distribution"
    assert chisquare(observed, expected).pvalue > 1e-3
    assert proposed > 0  # the speculative path ran: drafts were verified


def test_the_check_rejects_the_draft_models_own_law(tiny):
    """Negative control: samples from the draft's law (what accepting every draft token would give)
    fail the same check against the target."""
    target, draft = tiny
    ids = target.tokenizer("And God said").input_ids
    target_joint = exact_joint(target, ids, TEMPERATURE)
    draft_joint = exact_joint(draft, ids, TEMPERATURE)
    keys = list(draft_joint)
    probs = torch.tensor([draft_joint[k] for k in keys])
    draws = torch.multinomial(probs / probs.sum(), N, replacement=True, generator=torch.Generator().manual_seed(0))
    counts = {}
    for i in draws.tolist():
        counts[keys[i]] = counts.get(keys[i], 0) + 1
    observed, expected = binned(target_joint, counts, N)
    assert chisquare(observed, expected).pvalue < 1e-3
