"""Model forwards over segments of new tokens, through paged KV caches: one request, or a batch.

``run_segment`` / ``run_batch_body`` run the decoder body only and return hidden states: the caller
applies the LM head (``core.runtime.head``) to the rows it needs, if any. ``forward_segment`` adds the
head over every row, for callers that want all the logits.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from core.runtime.head import LMHead
from core.runtime.kv_cache import PagedForward, RequestKV
from core.runtime.tree import attention_mask, position_ids


@dataclass(frozen=True)
class SegmentOutput:
    """The body's output for one request's new tokens."""

    last_hidden: torch.Tensor  # [n, hidden_size], after the final norm: the LM head's input
    hidden: list[torch.Tensor]  # per requested hidden layer, [n, hidden_size]


def chain_parents(n: int) -> list[int]:
    """Parents of a plain sequence of n tokens written as a segment."""
    return list(range(-1, n - 1))


@torch.inference_mode()
def run_segment(
    model, kv: RequestKV, input_ids: list[int], segment_parents: list[int], hidden_layers: tuple[int, ...] = ()
) -> SegmentOutput:
    """Run ``input_ids`` -- the last ``len(input_ids)`` entries of this step's segment -- through the
    body of ``model``, writing their K/V into ``kv``.

    The segment is what this step has written after the committed prefix: ``segment_parents``
    covers the entries already pending in ``kv`` followed by the new ones. Each new token sees
    the committed prefix and its own ancestors; its position is prefix length + depth - 1.
    ``hidden_layers`` are indices into transformers' ``hidden_states`` (0 = embeddings, -1 = the
    last layer after the final norm).
    """
    mask, positions = _segment_inputs(model, kv, len(input_ids), segment_parents)
    cache = kv.begin_forward(kv.allocate(len(input_ids)))
    out = _run(model, torch.tensor([input_ids], dtype=torch.long, device=model.device), mask, positions, cache,
               hidden_layers)
    return SegmentOutput(out.last_hidden_state[0], [out.hidden_states[i][0] for i in hidden_layers])


def forward_segment(
    model, kv: RequestKV, input_ids: list[int], segment_parents: list[int], hidden_layers: tuple[int, ...] = ()
):
    """``run_segment`` plus the LM head over every new token.

    Returns logits ``[len(input_ids), vocab]`` (float32); with ``hidden_layers`` returns
    ``(logits, [hidden [len(input_ids), hidden_size] per requested layer])``.
    """
    out = run_segment(model, kv, input_ids, segment_parents, hidden_layers)
    logits = LMHead.of(model)(out.last_hidden)
    return (logits, out.hidden) if hidden_layers else logits


@torch.inference_mode()
def run_batch_body(
    model, forward: PagedForward, kvs: list[RequestKV], input_ids: list[list[int]],
    segment_parents: list[list[int]], hidden_layers: tuple[int, ...] = (),
) -> list[SegmentOutput]:
    """``run_segment`` for several requests of one pool in ONE forward of the body.

    Request b's new tokens are query rows ``0 .. len(input_ids[b]) - 1`` of batch row b; shorter
    rows are padded (pad tokens are never written to the cache, and see one key only), and
    each row's 4D mask hides the other rows' padding keys. Returns one SegmentOutput per request,
    without the padding rows.
    """
    n_query = max(len(ids) for ids in input_ids)
    parts = [_segment_inputs(model, kv, len(ids), parents) for kv, ids, parents in zip(kvs, input_ids, segment_parents)]
    cache = forward.begin(kvs, [kv.allocate(len(ids)) for kv, ids in zip(kvs, input_ids)])
    kv_length = forward.gather_index.shape[1]
    blocked = torch.finfo(model.dtype).min
    mask = torch.full((len(kvs), 1, n_query, kv_length), blocked, dtype=model.dtype, device=model.device)
    mask[:, :, :, 0] = 0  # padding query rows see one key, so no row is fully masked
    positions = torch.zeros(len(kvs), n_query, dtype=torch.long, device=model.device)
    ids = torch.zeros(len(kvs), n_query, dtype=torch.long, device=model.device)
    for b, ((row_mask, row_positions), row_ids) in enumerate(zip(parts, input_ids)):
        n, width = row_mask.shape[-2:]
        mask[b, :, :n, :width] = row_mask[0]
        positions[b, :n] = row_positions[0]
        ids[b, :n] = torch.tensor(row_ids, dtype=torch.long)
    out = _run(model, ids, mask, positions, cache, hidden_layers)
    return [
        SegmentOutput(out.last_hidden_state[b, : len(row)], [out.hidden_states[i][b, : len(row)] for i in hidden_layers])
        for b, row in enumerate(input_ids)
    ]


def _segment_inputs(model, kv: RequestKV, n_query: int, segment_parents: list[int]):
    """The 4D mask ``[1, 1, n_query, n_cached_after]`` and positions ``[1, n_query]`` of one request's new tokens."""
    if len(kv.pending) + n_query != len(segment_parents):
        raise ValueError("segment_parents must cover the pending entries plus the new tokens")
    n_prefix = len(kv.committed)
    mask = attention_mask(n_prefix, segment_parents, n_query, dtype=model.dtype, device=model.device)
    return mask, position_ids(n_prefix, segment_parents, n_query, device=model.device)


def _run(model, input_ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache, hidden_layers):
    """The decoder body (no LM head): ``last_hidden_state`` and, if asked, ``hidden_states``."""
    return model.get_decoder()(input_ids=input_ids, attention_mask=mask, position_ids=positions, cache=cache,
                               use_cache=True, output_hidden_states=bool(hidden_layers))
