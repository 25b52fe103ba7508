"""The lab's decoder on vLLM's schedule, so that both engines' spec-decode counters can be compared
count for count.

The lab's own schedule drafts from the first step: the prompt's last token is the first root, so
the first draft is verified together with it, and near the budget the draft is cut to the tokens
still wanted. vLLM (v1) instead:

1. prefills the whole prompt and takes the first new token from it, with no draft;
2. from then on drafts a full ``k`` tokens every step, whatever the budget, and its counters
   (``num_drafts``, ``num_draft_tokens``, ``num_accepted_tokens``, per position) count every drafted
   and accepted token, also those past ``max_tokens`` or after an end-of-sequence token that the
   output then drops.

``vllm_steps`` drives a ``SpeculativeDecoder``'s own verbs (``begin``, ``prefill``, ``verify``,
``complete_step``, ``end``) in that order; only the proposals differ. The lab's tallies then count what
vLLM counts: a step with no draft is no draft, and ``complete_step`` counts every accepted token before
cutting the output to the budget.
"""
from __future__ import annotations

from time import perf_counter
from typing import Iterator

from core.api import build_decoder
from core.drafters.base import ProposeContext
from core.engine.decoder import Ending, Proposal, SpeculativeDecoder
from core.records.steps import RunResult, StepRecord
from core.api.request import DecodeRequest
from core.runtime.tree import DraftTree


def first_token(decoder: SpeculativeDecoder) -> Proposal:
    """vLLM's prefill step: the prompt's last token verified alone, its next token taken from the target."""
    return Proposal(root=decoder.state.tokens[-1], tree=DraftTree(), draft_s=0.0,
                    blocks_before=len(decoder.kv.block_table))


def full_draft(decoder: SpeculativeDecoder) -> Proposal:
    """A draft of the drafter's whole shape, not cut to the tokens the budget still wants."""
    run = decoder.state
    start = perf_counter()
    ctx = ProposeContext(run.tokens, max_depth=decoder.drafter.max_nodes, temperature=decoder.settings.temperature,
                         generator=decoder.generator)
    tree = decoder.drafter.propose(ctx)
    return Proposal(root=run.tokens[-1], tree=tree, draft_s=perf_counter() - start,
                    blocks_before=len(decoder.kv.block_table))


def vllm_steps(decoder: SpeculativeDecoder, prompt_ids: list[int]) -> Iterator[StepRecord | None]:
    """``decoder.steps(prompt_ids)`` on vLLM's schedule; afterwards ``decoder.result`` holds the RunResult."""
    decoder.begin(prompt_ids)
    with Ending(decoder.end):
        decoder.prefill(prompt_ids)
        proposal = first_token(decoder)
        while True:
            start = perf_counter()
            target, hidden = decoder.verify(proposal.root, proposal.tree)
            record = decoder.complete_step(proposal, target, hidden, verify_s=perf_counter() - start)
            decoder.state.suspend()
            yield record
            decoder.state.resume()
            if decoder.finished:
                break
            proposal = full_draft(decoder)


def decode(request: DecodeRequest, schedule: str = "lab") -> RunResult:
    """Decode one request on the lab's schedule or on vLLM's."""
    decoder, prompt_ids = build_decoder(request)
    steps = vllm_steps(decoder, prompt_ids) if schedule == "vllm" else decoder.steps(prompt_ids)
    for _ in steps:
        pass
    return decoder.result
