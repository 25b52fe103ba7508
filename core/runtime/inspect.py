"""An inspected step's extra record (``core.records.detail``): the laws behind the acceptance rule's
decisions, recomputed from the verify's ``TargetView`` with the rule's own ``residual_probs``.

Nothing here draws a random number: the laws are deterministic functions of the target's logits
and the drafted tree, so the residual recorded is the one the correction was sampled from.
"""
from __future__ import annotations

from typing import Callable

from core.records.detail import InspectRecord, Refusal, RejectionRecord, position_record, rejection_record
from core.runtime.acceptance import Acceptance, TargetView, residual_probs
from core.runtime.tree import DraftTree


def refused_parent(acceptance: Acceptance) -> int | None:
    """The node whose drafted children were all refused (-1: the root); None when nothing was."""
    if acceptance.next_kind != "correction":
        return None
    return acceptance.accepted[-1] if acceptance.accepted else -1


def rejection(tree: DraftTree, target: TargetView, acceptance: Acceptance,
              piece: Callable[[int], str]) -> RejectionRecord | None:
    """p, q and the residual at the refused node, as ``speculative_accept`` (or ``greedy_accept``) saw them."""
    parent = refused_parent(acceptance)
    if parent is None:
        return None
    tried = tree.children(parent)
    tokens = [tree.tokens[c] for c in tried]
    target_probs = target.probs(parent + 1)
    first_draft = tree.draft_dists[tried[0]]
    if target.temperature == 0:  # greedy: a drafted token is kept only if it is the argmax
        return rejection_record(Refusal(
            parent=parent, tried=tried, tried_tokens=tokens, accept_probs=[0.0] * len(tried), temperature=0.0,
            next_token=acceptance.next_token, target_probs=target_probs,
            draft_probs=None if first_draft is None else first_draft.float(), residual_probs=None), piece)
    current, accept_probs = target_probs, []
    for child, token in zip(tried, tokens):
        draft = tree.draft_dists[child]
        accept_probs.append(min(1.0, float(current[token] / draft[token])))
        current = residual_probs(current, draft)
    return rejection_record(Refusal(
        parent=parent, tried=tried, tried_tokens=tokens, accept_probs=accept_probs, temperature=target.temperature,
        next_token=acceptance.next_token, target_probs=target_probs, draft_probs=first_draft.float(),
        residual_probs=current.float()), piece)


def inspect_step(tree: DraftTree, target: TargetView, acceptance: Acceptance,
                 piece: Callable[[int], str]) -> InspectRecord:
    """The target's top alternatives and entropy at the root and at every node with children, and
    the refused node's laws."""
    parents = sorted({-1, *tree.parents})
    positions = [position_record(parent, target.probs(parent + 1), piece) for parent in parents]
    return InspectRecord(positions, rejection(tree, target, acceptance, piece))
