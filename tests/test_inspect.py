"""An inspected step (``DecodeSettings.inspect``, ``core.records.detail``): the laws the acceptance rule
compared at the refused node -- p, q, min(1, p/q) and the residual the correction was drawn from --
recorded exactly, bounded, written to the trace and read back; traces written before it still replay."""
from __future__ import annotations

import math

import pytest
import torch
from trace_cases import EXAMPLE_TRACE, GEMMA_TRACE

from core import DecodeRequest, build_decoder, read_trace
from core.common.limits import MAX_ALTERNATIVES, MAX_REJECTION_TOKENS
from core.records.detail import candidate_tokens, entropy
from core.records.steps import write_trace
from core.runtime.acceptance import Acceptance, TargetView, residual_probs, speculative_accept
from core.runtime.inspect import inspect_step, rejection
from core.runtime.tree import DraftTree



def piece(token: int) -> str:
    return f"t{token}"


def test_the_recorded_residual_is_the_rules_own():
    target = torch.tensor([[0.1, 0.5, 0.3, 0.1, 0.0]])
    q_first = torch.tensor([0.0, 0.0, 0.2, 0.8, 0.0])  # proposes 3 (p 0.1, q 0.8): kept with 1/8
    q_second = torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0])  # then 2, against the residual
    tree = DraftTree()
    tree.add(3, -1, 0.8, q_first)
    tree.add(2, -1, 1.0, q_second)
    view = TargetView.of(target.log(), 1.0)
    record = rejection(tree, view, Acceptance((), 1, "correction"), piece)
    first = residual_probs(target[0], q_first)  # norm(max(0, p - q)) = [0.1, 0.5, 0.1, 0, 0] / 0.7
    assert record.parent == -1 and record.tried == [0, 1]
    assert record.accept_probs == pytest.approx([0.1 / 0.8, min(1.0, float(first[2]) / 1.0)], abs=1e-6)
    expected = residual_probs(first, q_second)
    by_token = dict(zip(record.tokens, record.residual_probs))
    assert [by_token.get(x, 0.0) for x in range(5)] == pytest.approx(expected.tolist(), abs=1e-6)
    assert math.fsum(record.residual_probs) + record.residual_other == pytest.approx(1.0, abs=1e-5)
    assert dict(zip(record.tokens, record.draft_probs))[3] == pytest.approx(0.8)
    assert record.texts == [piece(x) for x in record.tokens]


def test_a_fully_kept_step_has_no_rejection_and_greedy_records_no_residual():
    tree = DraftTree()
    tree.add(1, -1, 0.9, None)
    tree.add(0, 0, 0.9, None)
    logits = torch.tensor([[0.0, 3.0, 1.0], [2.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    view = TargetView.of(logits, 0.0)
    kept = inspect_step(tree, view, Acceptance((0, 1), 2, "bonus"), piece)
    assert kept.rejection is None and [p.parent for p in kept.positions] == [-1, 0]
    assert kept.positions[0].tokens[0] == 1 and kept.positions[0].entropy == pytest.approx(
        entropy(torch.softmax(logits[0], -1)), abs=1e-6)
    tree = DraftTree()
    tree.add(2, -1, 0.9, None)
    view = TargetView.of(logits[:2], 0.0)
    refused = inspect_step(tree, view, Acceptance((), 1, "correction"), piece).rejection
    assert refused.temperature == 0 and refused.residual_probs is None and refused.accept_probs == [0.0]
    assert refused.tokens[0] == 1  # the argmax comes first


def test_candidates_are_bounded_and_keep_the_tried_tokens_first():
    laws = [torch.softmax(torch.randn(1000, generator=torch.Generator().manual_seed(i)), -1) for i in range(3)]
    chosen = candidate_tokens(laws, [7, 9, 7])
    assert chosen[:2] == [7, 9] and len(chosen) == MAX_REJECTION_TOKENS == len(set(chosen))


@pytest.fixture(scope="module")
def inspected(tmp_path_factory):
    request = DecodeRequest.of("我爱", drafter="draft", k=4, temperature=0.8, seed=1, max_new_tokens=16)
    decoder, prompt_ids = build_decoder(request, inspect=True)
    records = list(decoder.steps(prompt_ids))
    path = tmp_path_factory.mktemp("inspect") / "inspected.jsonl"
    write_trace(path, decoder.result)
    return records, path


def test_a_sampled_run_records_every_refusal_within_bounds(inspected):
    records, _ = inspected
    refused = [r for r in records if r.next.kind == "correction"]
    assert refused and all(r.inspect.rejection is not None for r in refused)
    assert all(r.inspect.rejection is None for r in records if r.next.kind != "correction")
    for r in refused:
        rej = r.inspect.rejection
        nodes = {n.id: n for n in r.nodes}
        assert all(nodes[c].status == "rejected" and nodes[c].parent == rej.parent for c in rej.tried)
        assert rej.next_token == r.next.token and rej.next_token in rej.tokens
        assert len(rej.tokens) <= MAX_REJECTION_TOKENS
        assert math.fsum(rej.residual_probs) + rej.residual_other == pytest.approx(1.0, abs=1e-4)
        first = nodes[rej.tried[0]]
        at = dict(zip(rej.tokens, zip(rej.target_probs, rej.draft_probs)))[first.token]
        assert at == pytest.approx((first.target_prob, first.draft_prob), abs=1e-5)  # the tree's own p and q
        rounding = 1e-6 / at[1]  # p and q are recorded to 6 places
        assert rej.accept_probs[0] == pytest.approx(min(1.0, at[0] / at[1]), rel=1e-3, abs=rounding)
    assert all(len(p.tokens) <= MAX_ALTERNATIVES for r in records for p in r.inspect.positions)


def test_an_inspected_trace_reads_back_as_written(inspected):
    records, path = inspected
    trace = read_trace(path)
    assert trace.header["settings"]["inspect"] is True
    assert [s.inspect for s in trace.steps] == [r.inspect for r in records]


def test_traces_written_before_inspection_still_replay():
    for path in (EXAMPLE_TRACE, GEMMA_TRACE):
        trace = read_trace(path)
        assert trace.steps and all(s.inspect is None for s in trace.steps)


def test_an_uninspected_run_records_nothing_more():
    decoder, prompt_ids = build_decoder(DecodeRequest.of("我爱", drafter="draft", k=2, max_new_tokens=3))
    assert all(r.inspect is None for r in decoder.steps(prompt_ids))


def test_speculative_accept_draws_from_the_recorded_residual():
    """The correction is a draw from the recorded law: a token with no residual mass is never drawn."""
    target = torch.tensor([[0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    q = torch.tensor([0.0, 0.9, 0.1])
    tree = DraftTree()
    tree.add(1, -1, 0.9, q)
    view = TargetView.of(target.log(), 1.0)
    corrections = 0
    for seed in range(40):
        got = speculative_accept(tree, view, torch.Generator().manual_seed(seed))
        if got.next_kind == "correction":
            corrections += 1
            law = dict(zip(*[getattr(rejection(tree, view, got, piece), f) for f in ("tokens", "residual_probs")]))
            assert law == {0: 1.0, 1: 0.0, 2: 0.0} and got.next_token == 0  # norm(max(0, p - q)) = token 0
    assert corrections  # min(1, 0.5 / 0.9): refused 4 times in 9
