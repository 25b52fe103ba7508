"""The acceptance rules with forced distributions, and their statistics against the closed form."""
import torch
from scipy.stats import chisquare

from core.drafters.base import pick_children
from core.runtime.acceptance import TargetView, greedy_accept, node_status, residual_probs, speculative_accept
from core.runtime.tree import DraftTree


def one_hot(i, n=5):
    v = torch.zeros(n)
    v[i] = 1.0
    return v


def view(target_probs):
    """A TargetView whose law at temperature 1 is ``target_probs`` (rows summing to 1)."""
    return TargetView.of(target_probs.log(), 1.0)


def chain(tokens, dists):
    tree = DraftTree()
    parent = -1
    for token, dist in zip(tokens, dists):
        parent = tree.add(token, parent, float(dist[token]), dist)
    return tree


def test_forced_accept_accept_reject_gives_the_exact_tokens():
    draft_dists = [
        torch.tensor([0.0, 0.5, 0.5, 0.0, 0.0]),  # proposes 1 with q=0.5; target p=0.6 -> always accept
        one_hot(2),  # proposes 2; target p=1 -> accept
        one_hot(3),  # proposes 3; target p(3)=0 -> reject; residual is one-hot on 4
    ]
    tree = chain([1, 2, 3], draft_dists)
    target_probs = torch.stack([
        torch.tensor([0.0, 0.6, 0.4, 0.0, 0.0]),  # after root
        one_hot(2),  # after node 0
        one_hot(4),  # after node 1
        one_hot(0),  # after node 2 (never used)
    ])
    for seed in range(20):
        result = speculative_accept(tree, view(target_probs), torch.Generator().manual_seed(seed))
        assert result.accepted == (0, 1)
        assert result.next_token == 4
        assert result.next_kind == "correction"
    assert node_status(tree, (0, 1)) == ["accepted", "accepted", "rejected"]


def test_full_acceptance_draws_the_bonus_from_the_last_row():
    tree = chain([1, 2], [one_hot(1), one_hot(2)])
    target_probs = torch.stack([one_hot(1), one_hot(2), one_hot(3)])
    result = speculative_accept(tree, view(target_probs), torch.Generator().manual_seed(0))
    assert result == type(result)((0, 1), 3, "bonus")


def test_greedy_follows_the_argmax_through_a_tree():
    tree = DraftTree()
    a = tree.add(1, -1, 0.6)
    b = tree.add(2, -1, 0.4)
    c = tree.add(3, b, 0.9)
    tree.add(4, a, 0.9)
    logits = torch.tensor([
        [0.0, 1.0, 5.0, 0.0, 0.0],  # root -> 2 (node b, the second sibling)
        [0.0, 0.0, 0.0, 0.0, 9.0],  # after a (unused)
        [0.0, 0.0, 0.0, 7.0, 0.0],  # after b -> 3 (node c)
        [8.0, 0.0, 0.0, 0.0, 0.0],  # after c -> 0: bonus
        [0.0, 0.0, 0.0, 0.0, 0.0],
    ])
    result = greedy_accept(tree, TargetView.of(logits))
    assert result.accepted == (b, c) and result.next_token == 0 and result.next_kind == "bonus"
    assert node_status(tree, result.accepted) == ["rejected", "accepted", "accepted", "not_reached"]
    miss = greedy_accept(tree, TargetView.of(torch.tensor([[9.0, 0, 0, 0, 0]] * 5)))
    assert miss.accepted == () and miss.next_token == 0 and miss.next_kind == "correction"
    empty = greedy_accept(DraftTree(), TargetView.of(torch.tensor([[0.0, 3.0]])))
    assert empty.next_kind == "target" and empty.next_token == 1


def test_residual_is_the_normalised_positive_part():
    p = torch.tensor([0.5, 0.3, 0.2])
    q = torch.tensor([0.2, 0.6, 0.2])
    torch.testing.assert_close(residual_probs(p, q), torch.tensor([1.0, 0.0, 0.0]))
    torch.testing.assert_close(residual_probs(p, p), p)


TARGET = torch.tensor([0.35, 0.25, 0.2, 0.1, 0.06, 0.04])
DRAFT = torch.tensor([0.1, 0.4, 0.1, 0.3, 0.05, 0.05])
N = 20000


def sample_first_tokens(width, draft_logits, trials=N, seed=0):
    generator = torch.Generator().manual_seed(seed)
    counts = torch.zeros(len(TARGET))
    accepted = 0
    target_probs = torch.stack([TARGET] + [TARGET] * width)
    for _ in range(trials):
        tree = DraftTree()
        for token, prob, dist in pick_children(draft_logits, width, 1.0, generator):
            tree.add(token, -1, prob, dist)
        result = speculative_accept(tree, view(target_probs), generator)
        first = tree.tokens[result.accepted[0]] if result.accepted else result.next_token
        counts[first] += 1
        accepted += len(result.accepted)
    return counts, accepted / trials


def test_single_draft_matches_closed_form_and_target_law():
    counts, mean_accepted = sample_first_tokens(1, DRAFT.log())
    expected_acceptance = torch.minimum(TARGET, DRAFT).sum().item()  # E[accepted] = sum min(p, q)
    stderr = (expected_acceptance * (1 - expected_acceptance) / N) ** 0.5
    assert abs(mean_accepted - expected_acceptance) < 4 * stderr
    assert chisquare(counts.numpy(), (TARGET * N).numpy()).pvalue > 1e-3


def test_sibling_drafts_without_replacement_keep_the_target_law():
    counts, mean_accepted = sample_first_tokens(3, DRAFT.log())
    assert mean_accepted > torch.minimum(TARGET, DRAFT).sum().item()  # more siblings, more acceptance
    assert chisquare(counts.numpy(), (TARGET * N).numpy()).pvalue > 1e-3


def test_deterministic_siblings_keep_the_target_law():
    """n-gram style: distinct proposals with one-hot draft laws."""
    generator = torch.Generator().manual_seed(1)
    counts = torch.zeros(len(TARGET))
    target_probs = torch.stack([TARGET] * 3)
    for _ in range(N):
        tree = DraftTree()
        for token in (3, 1):
            dist = torch.zeros(len(TARGET))
            dist[token] = 1.0
            tree.add(token, -1, 1.0, dist)
        result = speculative_accept(tree, view(target_probs), generator)
        counts[tree.tokens[result.accepted[0]] if result.accepted else result.next_token] += 1
    assert chisquare(counts.numpy(), (TARGET * N).numpy()).pvalue > 1e-3


def test_a_biased_rule_would_be_caught():
    """The distribution check has teeth: accepting every draft token is visibly not the target's law."""
    generator = torch.Generator().manual_seed(2)
    counts = torch.zeros(len(TARGET))
    for _ in range(N):
        counts[torch.multinomial(DRAFT, 1, generator=generator)] += 1
    assert chisquare(counts.numpy(), (TARGET * N).numpy()).pvalue < 1e-6
