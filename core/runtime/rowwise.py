"""Attention in which every query row is computed on its own: the same bits whatever rows share
the forward.

A fused attention kernel computes a row's scores and its weighted sum of values with blockings
that depend on how many rows and keys the call holds, so one token verified among n others and
the same token decoded alone differ in their last bits. For a float32 target that is rounding
(``core.runtime.kernels``); for the int8 target (``core.runtime.quantized``) a last-bit change
can move an activation across a rounding boundary of its quantization and grow to a visible
difference (0.1 in Gemma 3 270M's final hidden state). So the int8 target attends here, row by
row: each query row gathers exactly the keys it may see (the committed prefix and its own
ancestors, in cache order -- the keys the same token would see decoded alone) and computes its
scores, softmax and values through products whose shapes depend on that row alone. With the
int8 body's Linear layers, which are row-independent too, a row's logits are the same bits
whatever else the forward holds (tests/test_quantized.py), and speculative decoding on the int8
target equals its plain decoding exactly.

A forward of more than ``MAX_ROWWISE_ROWS`` rows -- a long prompt's prefill, run alike by every
decoding of that prompt -- takes transformers' SDPA, as no verify ever holds that many.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAME = "sdlab_rowwise"
MAX_ROWWISE_ROWS = 256  # more rows than any verify (core.common.limits.MAX_TREE_NODES): a prefill


def _visible(mask: torch.Tensor | None, batch: int, rows: int, keys: int) -> torch.Tensor:
    """``[batch, rows, keys]``: which keys each query row sees, from an additive mask (0 = seen), a
    boolean one (True = seen) or none (causal: the rows are the last ``rows`` keys)."""
    if mask is None:
        return torch.ones(rows, keys, dtype=torch.bool).tril_(keys - rows).expand(batch, rows, keys)
    mask = mask[:, 0, :, :keys]
    seen = mask if mask.dtype == torch.bool else mask == 0
    return seen.expand(batch, rows, keys)


def rowwise_attention(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
                      softcap: float | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' attention interface: ``query [b, heads, rows, d]``, ``key``/``value`` ``[b,
    kv_heads, keys, d]`` -> ``([b, rows, heads, d], None)``, each row on its own (eval only)."""
    batch, heads, rows, dim = query.shape
    if rows > MAX_ROWWISE_ROWS:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    kv_heads = key.shape[1]
    visible = _visible(attention_mask, batch, rows, key.shape[2])
    out = query.new_empty(batch, rows, heads, value.shape[-1])
    for b in range(batch):
        for i, seen in enumerate(_seen_keys(visible[b])):
            # a slice of the keys where the row sees a prefix of them (a chain, a plain step), else a
            # gathered copy (a tree's branch): the same values in the same layout, so the same products
            keys, values = (key[b:b + 1, :, :seen], value[b:b + 1, :, :seen]) if isinstance(seen, int) else \
                (key[b:b + 1, :, seen], value[b:b + 1, :, seen])
            q = query[b:b + 1, :, i:i + 1]
            if softcap is None:
                row = F.scaled_dot_product_attention(q, keys, values, scale=scaling, enable_gqa=kv_heads != heads)
            else:
                row = _softcapped(q, keys, values, scaling, softcap)
            out[b, i] = row[0, :, 0]
    return out, None


def _softcapped(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, scaling: float | None,
                softcap: float) -> torch.Tensor:
    """One row's attention with its scores soft-capped (Gemma 2): ``[1, heads, 1, d]``."""
    kv_heads, heads, dim = keys.shape[1], q.shape[1], q.shape[-1]
    keys, values = keys.repeat_interleave(heads // kv_heads, dim=1), values.repeat_interleave(heads // kv_heads, dim=1)
    scores = q @ keys.transpose(-1, -2) * (dim**-0.5 if scaling is None else scaling)
    scores = torch.tanh(scores / softcap) * softcap
    return torch.softmax(scores, dim=-1) @ values


def _seen_keys(visible: torch.Tensor) -> list[int | torch.Tensor]:
    """Per row of ``visible`` [rows, keys]: how many keys it sees where they are the first ones, else
    their indices."""
    counts = visible.sum(dim=1).tolist()
    if all(count == visible.shape[1] for count in counts):
        return counts  # every row sees every key: a plain step
    where = visible.nonzero()[:, 1]
    out: list[int | torch.Tensor] = []
    start = 0
    for count in counts:
        indices = where[start:start + count]
        start += count
        out.append(count if count == 0 or int(indices[-1]) == count - 1 else indices)
    return out


def use_rowwise_attention(model) -> None:
    """Make ``model`` (a transformers model) attend through ``rowwise_attention``."""
    AttentionInterface.register(NAME, rowwise_attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    model.set_attn_implementation(NAME)
