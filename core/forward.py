"""One model forward over a segment of new tokens, through a request's paged KV cache."""
from __future__ import annotations

import torch

from .kv_cache import RequestKV
from .tree import attention_mask, position_ids


def chain_parents(n: int) -> list[int]:
    """Parents of a plain sequence of n tokens written as a segment."""
    return list(range(-1, n - 1))


@torch.inference_mode()
def forward_segment(
    model, kv: RequestKV, input_ids: list[int], segment_parents: list[int], hidden_layers: tuple[int, ...] = ()
):
    """Run ``input_ids`` -- the last ``len(input_ids)`` entries of this step's segment -- through ``model``.

    The segment is what this step has written after the committed prefix: ``segment_parents``
    covers the entries already pending in ``kv`` followed by the new ones. Each new token sees
    the committed prefix and its own ancestors; its position is prefix length + depth - 1.

    Returns logits ``[len(input_ids), vocab]`` (float32); with ``hidden_layers`` (indices into
    transformers' ``hidden_states``: 0 = embeddings, -1 = the last layer after the final norm)
    returns ``(logits, [hidden [len(input_ids), hidden_size] per requested layer])``.
    """
    n_query = len(input_ids)
    if len(kv.pending) + n_query != len(segment_parents):
        raise ValueError("segment_parents must cover the pending entries plus the new tokens")
    device = model.device
    n_prefix = len(kv.committed)
    mask = attention_mask(n_prefix, segment_parents, n_query, dtype=model.dtype, device=device)
    positions = position_ids(n_prefix, segment_parents, n_query, device=device)
    cache = kv.begin_forward(kv.allocate(n_query))
    out = model(
        input_ids=torch.tensor([input_ids], dtype=torch.long, device=device),
        attention_mask=mask,
        position_ids=positions,
        cache=cache,
        use_cache=True,
        output_hidden_states=bool(hidden_layers),
    )
    logits = out.logits[0].float()
    if not hidden_layers:
        return logits
    return logits, [out.hidden_states[i][0] for i in hidden_layers]
