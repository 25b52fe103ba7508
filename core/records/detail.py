"""What an inspected step records beyond its tree (``DecodeSettings.inspect``): the target's top
alternatives and entropy at every verified position, and, for the node where the draft was refused,
the laws the acceptance rule compared -- bounded in size, for the "why it is lossless" picture.

The rule being pictured (Leviathan et al., Chen et al.): a drafted token x drawn from the draft's law
q is kept with probability min(1, p(x) / q(x)); when it is refused the target's token is drawn from
the residual norm(max(0, p - q)). Each law is stored over a few candidate tokens plus the mass of
every other token (``*_other``), so the residual's listed values and its ``residual_other`` sum to 1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from core.common.limits import MAX_ALTERNATIVES, MAX_REJECTION_TOKENS

DIGITS = 6  # probabilities are rounded to this many decimals in records


@dataclass(frozen=True)
class PositionRecord:
    """The target's law at one verified position: after node ``parent`` (-1: after the root)."""

    parent: int
    tokens: list[int]  # the target's top tokens there, most likely first
    texts: list[str]
    probs: list[float]  # their target probabilities (at the run's temperature; at 0, the law at 1)
    entropy: float  # of the whole law, in nats


@dataclass(frozen=True)
class RejectionRecord:
    """The node where the draft was refused and the laws that decided it.

    ``tried`` are the refused children of ``parent`` in the order the rule tried them (one for a
    chain); ``accept_probs[i]`` is min(1, p/q) of ``tried[i]`` with p the target's law as it stood
    when that child was tried (the residual of the siblings before it). ``draft_probs`` is the law
    the first tried child was drawn from; ``residual_probs`` the law the correction was drawn from
    (None at temperature 0: greedy keeps a token only if it is the target's argmax).
    """

    parent: int
    tried: list[int]
    accept_probs: list[float]
    temperature: float
    next_token: int  # the correction
    tokens: list[int]  # candidate tokens: the tried ones, the correction, the laws' top tokens
    texts: list[str]
    target_probs: list[float]
    target_other: float  # target probability of every token not listed
    draft_probs: list[float] | None = None
    draft_other: float | None = None
    residual_probs: list[float] | None = None
    residual_other: float | None = None


@dataclass(frozen=True)
class InspectRecord:
    positions: list[PositionRecord]  # one per tree node that has children, and the root
    rejection: RejectionRecord | None = None  # None when the step's draft was fully kept


def _round(value: float) -> float:
    return round(float(value), DIGITS)


def entropy(probs: torch.Tensor) -> float:
    """Shannon entropy in nats of a law ``[vocab]`` (0 * log 0 = 0)."""
    probs = probs.double()
    logs = torch.where(probs > 0, probs.log(), torch.zeros_like(probs))
    return max(0.0, float(-(probs * logs).sum()))


def position_record(parent: int, probs: torch.Tensor, piece: Callable[[int], str],
                    top_k: int = MAX_ALTERNATIVES) -> PositionRecord:
    """The top ``top_k`` tokens of the target's law ``probs`` ``[vocab]`` and its entropy."""
    values, tokens = probs.topk(min(top_k, probs.numel()))
    ids = [int(x) for x in tokens.tolist()]
    return PositionRecord(parent, ids, [piece(x) for x in ids], [_round(v) for v in values.tolist()],
                          _round(entropy(probs)))


def candidate_tokens(laws: list[torch.Tensor], first: list[int], limit: int = MAX_REJECTION_TOKENS) -> list[int]:
    """``first`` (the tried tokens, the correction), then the laws' top tokens taken in turn, at most
    ``limit`` in all, each once."""
    chosen: list[int] = []
    for token in first:
        if token not in chosen and len(chosen) < limit:
            chosen.append(int(token))
    ranked = [law.topk(min(limit, law.numel())).indices.tolist() for law in laws]
    for rank in range(limit):
        for order in ranked:
            if len(chosen) >= limit:
                return chosen
            if rank < len(order) and order[rank] not in chosen:
                chosen.append(int(order[rank]))
    return chosen


def _listed(law: torch.Tensor | None, tokens: list[int]) -> tuple[list[float] | None, float | None]:
    """A law's probabilities at ``tokens`` and the mass of the rest (so the two sum to 1)."""
    if law is None:
        return None, None
    values = [_round(v) for v in law[tokens].tolist()]
    return values, _round(max(0.0, 1.0 - math.fsum(values)))


@dataclass(frozen=True)
class Refusal:
    """What the acceptance rule did at a refused node: the children it tried (node ids and their
    tokens, in order), each one's chance to be kept, the token it emitted instead, and the laws
    ``[vocab]`` it compared."""

    parent: int
    tried: list[int]
    tried_tokens: list[int]
    accept_probs: list[float]
    temperature: float
    next_token: int
    target_probs: torch.Tensor
    draft_probs: torch.Tensor | None
    residual_probs: torch.Tensor | None


def rejection_record(refusal: Refusal, piece: Callable[[int], str],
                     limit: int = MAX_REJECTION_TOKENS) -> RejectionRecord:
    """The record of a refused node from the laws the acceptance rule compared."""
    r = refusal
    target_probs, draft_probs, residual_probs = r.target_probs, r.draft_probs, r.residual_probs
    laws = [law for law in (target_probs, draft_probs, residual_probs) if law is not None]
    tokens = candidate_tokens(laws, [*r.tried_tokens, r.next_token], limit)
    tokens.sort(key=lambda x: -float(target_probs[x]) - (float(draft_probs[x]) if draft_probs is not None else 0.0))
    target, target_other = _listed(target_probs, tokens)
    draft, draft_other = _listed(draft_probs, tokens)
    residual, residual_other = _listed(residual_probs, tokens)
    return RejectionRecord(
        parent=r.parent, tried=list(r.tried), accept_probs=[_round(a) for a in r.accept_probs],
        temperature=r.temperature, next_token=int(r.next_token), tokens=tokens, texts=[piece(x) for x in tokens], target_probs=target,
        target_other=target_other, draft_probs=draft, draft_other=draft_other, residual_probs=residual,
        residual_other=residual_other)
