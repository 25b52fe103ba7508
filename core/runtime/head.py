"""The LM head, applied apart from the decoder body and only to the rows that need logits.

A causal LM's forward is body (embeddings, layers, final norm) then head (hidden -> vocabulary
logits, then the config's final scaling, e.g. Gemma's soft-capping). The engine runs the body
over every new token (the KV must be written) but needs logits only for verify rows: none for a
prefill.

The head of a small model with a large vocabulary is most of a verify: Gemma 3 270M's 262,144 x
640 float32 head is 671 MB to read. For one row that read is the whole cost; for several rows a
float32 product on a CPU costs 2-3 times as much (measured on 2 idle cores of a Xeon with AMX: 24 ms
at 1 row, 64 ms at 2-25 rows with ``torch.mm(W, h.T)``). Greedy decoding needs only each row's
argmax, and on a CPU with bfloat16 matrix units (AMX / AVX-512 BF16) a bf16 product through
oneDNN costs 14.5 ms for 1 to 5 rows and 17 ms for 25. :meth:`LMHead.greedy` takes the argmax
**exactly** from it: every bf16 logit is within a proven bound of the float32 one (below), so
only the tokens whose bf16 logit could still be the largest -- a median of 4 per row on Gemma, at
most a few hundred -- are recomputed in float32, and the largest of those is the float32 argmax.
"""
from __future__ import annotations

import functools
import math
import os
import weakref
from dataclasses import dataclass

import torch
import torch.nn.functional as F

BF16_ROUNDOFF = 2.0**-8  # unit roundoff of bfloat16 (8 significant bits)
FLOAT32_ROUNDOFF = 2.0**-24
MIN_BF16_VOCAB = 32_768  # smaller heads are cheap in float32: no second copy for them
BLOCK = 256  # logits a block when looking for the ones near a row's largest
MAX_RESCORED = 4_096  # more candidates a row than this on average: the float32 head instead
_BF16_COPIES: dict[int, tuple[weakref.ref, "_Bf16Head"]] = {}  # id(weight) -> (weight, its bf16 head)


def bf16_argmax_enabled(weight: torch.Tensor) -> bool:
    """Whether :meth:`LMHead.greedy` takes the bf16 route for this head: a float32 CPU head of at
    least ``MIN_BF16_VOCAB`` rows on a CPU with bf16 matrix units. ``SDLAB_BF16_HEAD=0`` turns it
    off, ``=1`` on for any float32 CPU head (slow without bf16 units: for tests)."""
    switch = os.environ.get("SDLAB_BF16_HEAD", "auto")
    if switch == "0" or weight.dtype != torch.float32 or weight.device.type != "cpu":
        return False
    if switch == "1":
        return True
    return weight.shape[0] >= MIN_BF16_VOCAB and _cpu_has_bf16_units()


@functools.cache
def _cpu_has_bf16_units() -> bool:
    """Asked once per process, not once per verify."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


@dataclass(frozen=True)
class _Bf16Head:
    """The head in bfloat16, reordered once for oneDNN's kernels where this torch has them (on 2
    cores with AMX: 14.5 ms for 1-5 rows of Gemma's head, 17 ms for 25, against 20-24 ms through
    ``F.linear``), and its rows' largest float32 norm. Either way a bf16 product with float32 sums."""

    weight: torch.Tensor  # bfloat16 [vocab, hidden], or oneDNN's packed layout of it
    packed: bool
    largest_norm: float

    @classmethod
    def of(cls, weight: torch.Tensor) -> _Bf16Head:
        bf16 = weight.to(torch.bfloat16)
        norm = float(weight.float().norm(dim=1).max())
        try:
            packed = cls(torch.ops.mkldnn._reorder_linear_weight(bf16, None), True, norm)
            packed(torch.zeros(1, bf16.shape[1], dtype=torch.bfloat16))  # can this CPU run it?
            return packed
        except (RuntimeError, AttributeError):  # no oneDNN bf16 linear in this build or on this CPU
            return cls(bf16, False, norm)

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        """``h`` bfloat16 ``[n, hidden]`` -> ``[n, vocab]`` bfloat16."""
        if self.packed:
            return torch.ops.mkldnn._linear_pointwise(h, self.weight, None, "none", [], "")
        return F.linear(h, self.weight)


def _bf16_copy(weight: torch.Tensor) -> _Bf16Head:
    """The bf16 head of ``weight``, made once per weight tensor (and dropped with it)."""
    key = id(weight)
    entry = _BF16_COPIES.get(key)
    if entry is None or entry[0]() is not weight:
        with torch.inference_mode():
            entry = (weakref.ref(weight, lambda _: _BF16_COPIES.pop(key, None)), _Bf16Head.of(weight))
        _BF16_COPIES[key] = entry
    return entry[1]


def _slack(h: torch.Tensor, largest_norm: float) -> torch.Tensor:
    """S per row: the bf16 error bound of :meth:`LMHead.greedy` before the result's own rounding."""
    per_unit = 2 * BF16_ROUNDOFF + BF16_ROUNDOFF**2 + 2 * h.shape[1] * FLOAT32_ROUNDOFF
    return per_unit * largest_norm * h.norm(dim=1)


def _near_the_top(raw: torch.Tensor, slack: torch.Tensor, r: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, ids) of every logit ``z >= z_max - (2S + 2r|z_max|) / (1 - r)`` of its row. Reads
    each ``BLOCK`` of a row once for its largest value, then only the blocks that reach the
    threshold."""
    n, vocab = raw.shape
    whole = vocab - vocab % BLOCK
    blocks = raw[:, :whole].view(n, -1, BLOCK).amax(dim=2).float()  # [n, vocab // BLOCK]
    tail = raw[:, whole:].float()
    top = torch.cat([blocks, tail], dim=1).amax(dim=1)
    threshold = top - (2 * slack + 2 * r * top.abs()) / (1 - r)
    block_rows, block_ids = (blocks >= threshold[:, None]).nonzero(as_tuple=True)
    inside = raw[:, :whole].view(n, -1, BLOCK)[block_rows, block_ids].float() >= threshold[block_rows, None]
    which, offset = inside.nonzero(as_tuple=True)
    rows, ids = block_rows[which], block_ids[which] * BLOCK + offset
    tail_rows, tail_ids = (tail >= threshold[:, None]).nonzero(as_tuple=True)
    if len(tail_ids):
        rows, ids = torch.cat([rows, tail_rows]), torch.cat([ids, tail_ids + whole])
    return rows, ids


@dataclass(frozen=True)
class LMHead:
    """``logits = scale * softcap(hidden @ weight.T + bias)``, the way the model's own forward computes them."""

    weight: torch.Tensor  # [vocab, hidden_size], the model's own (tied or not): never copied
    bias: torch.Tensor | None  # [vocab]
    softcap: float | None  # config.final_logit_softcapping (Gemma 2/3)
    scale: float  # config.logit_scale (Cohere) or 1 / config.logits_scaling (Granite); else 1

    @classmethod
    def of(cls, model) -> LMHead:
        head = model.get_output_embeddings()
        if not isinstance(head, torch.nn.Linear):
            raise TypeError(f"{type(model).__name__}: the LM head is not a Linear layer")
        config = model.config.get_text_config()
        scale = float(getattr(config, "logit_scale", None) or 1.0) / float(getattr(config, "logits_scaling", None) or 1.0)
        return cls(head.weight, head.bias, getattr(config, "final_logit_softcapping", None), scale)

    @property
    def vocab_size(self) -> int:
        return self.weight.shape[0]

    @property
    def bf16_argmax(self) -> bool:
        """Whether :meth:`greedy` is the faster way to the argmax here (a positive scale keeps the
        order; heads with a bias -- none of the common ones -- take the float32 product)."""
        return self.bias is None and self.scale > 0 and bf16_argmax_enabled(self.weight)

    def _finish(self, logits: torch.Tensor) -> torch.Tensor:
        if self.bias is not None:
            logits = logits + self.bias
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        if self.scale != 1.0:
            logits = logits * self.scale
        return logits.float()

    @torch.inference_mode()
    def greedy(self, hidden: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...]]:
        """hidden ``[n, hidden_size]`` -> (logits from a bf16 product ``[n, vocab]``, each row's exact
        float32 argmax). The logits are within about 1% of the float32 ones (for a record's
        target_prob); the argmax is the float32 head's, proven as follows.

        With u the bf16 roundoff, rounding w and h to bf16 moves each product w_i h_i by at most
        (2u + u^2)|w_i h_i|; the float32 sums (this one and the float32 reference) add at most
        K 2^-24 sum|w_i h_i| each; rounding the result to bf16 adds at most r |z_j| with r = u/(1-u)
        and z_j the bf16 logit. With sum|w_i h_i| <= |w| |h| (Cauchy-Schwarz), each bf16 logit is
        within ``S + r |z_j|`` of the float32 one, ``S = (2u + u^2 + 2 K 2^-24) max_j|w_j| |h|``.
        If token j is the float32 argmax and b the bf16 one, ``D = z_b - z_j`` satisfies
        ``D <= 2S + r(|z_j| + |z_b|) <= 2S + r(2|z_b| + D)``, so ``D <= (2S + 2r|z_b|) / (1 - r)``:
        only tokens that close to the row's largest bf16 logit (a median of 4 a row on Gemma) are
        recomputed in float32, and the largest of those is the float32 argmax. They are found a
        block at a time: a block of ``BLOCK`` logits is read only when its largest is close enough.
        Soft-capping and a positive scale keep the order of the logits, so the argmax is taken on
        the raw product; only logits so large that tanh rounds them to the same float32 value (past
        ~9 soft-caps) could tie after capping and not before.
        """
        bf16_head = _bf16_copy(self.weight)
        h = hidden.float()
        raw = bf16_head(h.to(torch.bfloat16))  # [n, vocab] bfloat16
        rows, ids = _near_the_top(raw, _slack(h, bf16_head.largest_norm), BF16_ROUNDOFF / (1 - BF16_ROUNDOFF))
        if len(ids) > MAX_RESCORED * len(h):  # flat rows (never seen on Gemma): float32 throughout
            return self._finish(raw), tuple(self(hidden).argmax(dim=-1).tolist())
        exact = (self.weight[ids] * h[rows]).sum(dim=1)
        best = torch.full((len(h),), -math.inf).scatter_reduce(0, rows, exact, "amax")
        first = torch.where(exact == best[rows], ids, self.vocab_size)  # ties go to the lowest id
        argmax = torch.full((len(h),), self.vocab_size).scatter_reduce(0, rows, first, "amin")
        finished = raw if self.softcap is None and self.scale == 1.0 else self._finish(raw)
        return finished, tuple(argmax.tolist())

    @torch.inference_mode()
    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden ``[n, hidden_size]`` (after the final norm) -> logits ``[n, vocab]`` float32.

        The result is a transposed view of a ``[vocab, n]`` product (row ``i`` has stride ``n``).
        """
        return self._finish(torch.mm(self.weight, hidden.to(self.weight.dtype).T).T)  # [n, vocab]
