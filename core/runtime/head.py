"""The LM head, applied apart from the decoder body and only to the rows that need logits.

A causal LM's forward is body (embeddings, layers, final norm) then head (hidden -> vocabulary
logits, then the config's final scaling, e.g. Gemma's soft-capping). The engine runs the body
over every new token (the KV must be written) but needs logits only for verify rows: none for a
prefill.

The head of a small model with a large vocabulary is most of a verify: Gemma 3 270M's 262,144 x
640 float32 head is 671 MB to read. For one row that read is the whole cost; for several rows a
float32 product on a CPU costs 2-3 times as much (measured on 2 idle cores of a Xeon with AMX: 24 ms
at 1 row, 64 ms at 2-25 rows with ``torch.mm(W, h.T)``). Greedy decoding needs only each row's
argmax, so :meth:`LMHead.greedy` takes it **exactly** from a cheaper product (a *route*): every
cheap logit is within a proven bound of the float32 one (:class:`CheapHead`), so only the tokens
whose cheap logit could still be the largest -- one to a few per row on Gemma, at most a few
hundred -- are recomputed in float32, and the largest of those is the float32 argmax (up to
float32's own rounding: where two logits differ by less than it, the recomputation and one full
``torch.mm`` may order them differently; a property test in tests/test_head.py pins that margin).
Two routes:

* ``bf16``: a bfloat16 product through oneDNN, for CPUs with bf16 matrix units (AMX / AVX-512
  BF16): 14.5 ms for 1 to 5 rows of Gemma's head and 17 ms for 25 on the Xeon above.
* ``fp16``: fbgemm's half-precision GEMM (torch's ``quantized.linear_dynamic_fp16``), for any x86
  CPU with AVX2 and F16C: the weight is stored in half (half the bytes), widened to float32 in
  registers, and multiplied and summed in float32, so its only error is the weight's own rounding
  -- a bound some 25 times tighter than bf16's. On an AMD EPYC with AVX2 only (no bf16 units), 2
  busy cores: 84 ms against 181 ms at 1 row, 112 ms against 351 at 5 and 717 against 1,419 at 25.

An int8 product (fbgemm's dynamic quantized linear, per-row weight scales, one activation scale
per call) is faster still there (80 / 111 / 385 ms at 1 / 5 / 25 rows of a random head of that
shape, against 91 / 166 / 612 for fp16 in the same run), but its proven bound is
useless on Gemma: the final norm's output has outlier channels (|h_i| up to 172, |h|_1 ~ 1,900),
so the bound on |z - z_int8| is 5.8 logits at one row and 27-36 at 5 or 25 rows (one activation
scale for all of them) -- every one of the 262,144 tokens would have to be rescored.

Which route a head takes is picked once per weight, where it pays: among the routes this CPU runs
(bf16 only with bf16 units; fp16 only where fbgemm runs), the one whose product is fastest at
``ROUTE_ROWS`` rows, timed interleaved against the float32 product; the float32 head if that is
fastest. Switches (for measuring and tests): ``SDLAB_BF16_HEAD`` / ``SDLAB_FP16_HEAD`` = ``0``
leaves a route out (``SDLAB_BF16_HEAD=0`` stands for a CPU without bf16 units), ``1`` forces it
for any float32 CPU head, small ones included (bf16 is slow without bf16 units).
"""
from __future__ import annotations

import functools
import math
import os
import threading
import weakref
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from core.cost.timing import time_interleaved

BF16_ROUNDOFF = 2.0**-8  # unit roundoff of bfloat16 (8 significant bits)
FLOAT32_ROUNDOFF = 2.0**-24
FP16_LARGEST = 65504.0  # larger weights would round to inf in half
MIN_CHEAP_VOCAB = 32_768  # smaller heads are cheap in float32: no second copy for them
BLOCK = 256  # logits a block when looking for the ones near a row's largest
MAX_RESCORED = 4_096  # more candidates a row than this on average: the float32 head instead
ROUTE_ROWS = (1, 16)  # rows each route is timed at when one is picked (a plain step, a verify)
ROUTE_REPEATS = 3  # interleaved timings of each, after a warm-up; the median counts
ROUTES = ("bf16", "fp16")
_CHEAP_HEADS: dict[tuple, tuple[weakref.ref, "CheapHead | None"]] = {}  # (id(weight), switches) -> its route
_LOCK = threading.Lock()


@dataclass(frozen=True)
class CheapHead:
    """A faster, lower-precision product of the head and the proven bound on its error: each of its
    logits ``z'_j`` is within ``slack_per_norm * |h| + r |z'_j|`` of the float32 logit ``z_j``
    (either float32 product, this one's exact counterpart or the reference's)."""

    route: str  # "bf16" | "fp16"
    product: Callable[[torch.Tensor], torch.Tensor]  # h float32 [n, hidden] -> [n, vocab] (bfloat16 or float32)
    slack_per_norm: float
    r: float  # relative rounding of the product's result (a bf16 result); 0 for a float32 one


def _bf16_head(weight: torch.Tensor) -> CheapHead:
    """The head in bfloat16, reordered once for oneDNN's kernels where this torch has them (on 2
    cores with AMX: 14.5 ms for 1-5 rows of Gemma's head, 17 ms for 25, against 20-24 ms through
    ``F.linear``). Either way a bf16 product with float32 sums.

    With u the bf16 roundoff, rounding w and h to bf16 moves each product w_i h_i by at most
    (2u + u^2)|w_i h_i|; the float32 sums (this one and the float32 reference) add at most
    K 2^-24 sum|w_i h_i| each; rounding the result to bf16 adds at most r |z'_j| with r = u/(1-u).
    With sum|w_i h_i| <= |w| |h| (Cauchy-Schwarz): ``S = (2u + u^2 + 2 K 2^-24) max_j|w_j| |h|``."""
    bf16 = weight.to(torch.bfloat16)
    u, hidden = BF16_ROUNDOFF, weight.shape[1]
    slack = (2 * u + u**2 + 2 * hidden * FLOAT32_ROUNDOFF) * float(weight.norm(dim=1).max())
    try:
        packed = torch.ops.mkldnn._reorder_linear_weight(bf16, None)
        torch.ops.mkldnn._linear_pointwise(torch.zeros(1, hidden, dtype=torch.bfloat16), packed, None, "none", [], "")
        product = lambda h: torch.ops.mkldnn._linear_pointwise(h.to(torch.bfloat16), packed, None, "none", [], "")
    except (RuntimeError, AttributeError):  # no oneDNN bf16 linear in this build or on this CPU
        product = lambda h: F.linear(h.to(torch.bfloat16), bf16)
    return CheapHead("bf16", product, slack, u / (1 - u))


def _fp16_head(weight: torch.Tensor) -> CheapHead | None:
    """fbgemm's fp16 GEMM over the head (None where this build or CPU has no fbgemm).

    It stores each weight w_i rounded to half, widens it exactly to float32, and multiplies and sums
    in float32 (checked here: the product with a unit vector reads back a column of the weight
    rounded to half, to the bit). So with ŵ the half weight row, ``|ŵ h - w h| <= |ŵ - w| |h|`` (Cauchy-
    Schwarz; ``max_j |ŵ_j - w_j|`` is measured here, exactly, once); each float32 sum of K products
    adds at most ``g = K u / (1 - K u)`` of ``sum|w_i h_i| <= |w| |h|`` (u = 2^-24; this one and the
    float32 reference each): ``S = (max_j|ŵ_j - w_j| + g (2 max_j|w_j| + max_j|ŵ_j - w_j|)) |h|``.
    The result is float32: no rounding of its own (r = 0)."""
    hidden = weight.shape[1]
    if float(weight.abs().max()) >= FP16_LARGEST:
        return None
    try:
        packed = torch.ops.quantized.linear_prepack_fp16(weight, None)
        columns = torch.ops.quantized.linear_dynamic_fp16(torch.eye(2, hidden), packed)  # [2, vocab]
    except (RuntimeError, AttributeError, NotImplementedError):  # no fbgemm here
        return None
    if not torch.equal(columns, weight[:, :2].T.half().float()):
        return None  # not the rounding the bound assumes
    rounding, largest = 0.0, 0.0
    for chunk in weight.split(16_384):  # without a second full-size float32 copy
        rounding = max(rounding, float((chunk - chunk.half().float()).norm(dim=1).max()))
        largest = max(largest, float(chunk.norm(dim=1).max()))
    ku = hidden * FLOAT32_ROUNDOFF
    slack = rounding + ku / (1 - ku) * (2 * largest + rounding)
    return CheapHead("fp16", lambda h: torch.ops.quantized.linear_dynamic_fp16(h, packed), slack, 0.0)


_BUILDERS = {"bf16": _bf16_head, "fp16": _fp16_head}


@functools.cache
def _cpu_has_bf16_units() -> bool:
    """Asked once per process, not once per verify."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def _switches() -> tuple[str, ...]:
    return tuple(os.environ.get(f"SDLAB_{route.upper()}_HEAD", "auto") for route in ROUTES)


def cheap_head(weight: torch.Tensor) -> CheapHead | None:
    """The route :meth:`LMHead.greedy` takes for this head (None: the float32 head), picked once
    per weight tensor and switch setting (and dropped with the tensor)."""
    if weight.dtype != torch.float32 or weight.device.type != "cpu":
        return None
    switches = _switches()
    key = (id(weight), switches)
    entry = _CHEAP_HEADS.get(key)
    if entry is None or entry[0]() is not weight:
        with _LOCK, torch.inference_mode():
            entry = _CHEAP_HEADS.get(key)
            if entry is None or entry[0]() is not weight:
                entry = (weakref.ref(weight, lambda _: _CHEAP_HEADS.pop(key, None)), _pick(weight, switches))
                _CHEAP_HEADS[key] = entry
    return entry[1]


def head_route(weight: torch.Tensor) -> str:
    """"bf16", "fp16" or "float32": how a greedy verify computes this head's argmax here."""
    cheap = cheap_head(weight)
    return "float32" if cheap is None else cheap.route


def _pick(weight: torch.Tensor, switches: tuple[str, ...]) -> CheapHead | None:
    """A forced route (``=1``); else, for a large enough head, the fastest of the routes this CPU
    runs and the float32 product (``_fastest``)."""
    for route, switch in zip(ROUTES, switches):
        if switch == "1":
            return _BUILDERS[route](weight)
    if weight.shape[0] < MIN_CHEAP_VOCAB:
        return None
    runs = {"bf16": _cpu_has_bf16_units(), "fp16": True}  # fp16: where fbgemm runs (its builder says)
    candidates = [_BUILDERS[route](weight) for route, switch in zip(ROUTES, switches) if switch != "0" and runs[route]]
    return _fastest(weight, [c for c in candidates if c is not None])


def _fastest(weight: torch.Tensor, candidates: list[CheapHead]) -> CheapHead | None:
    """The candidate whose product takes the least time over ``ROUTE_ROWS`` rows (medians of
    ``ROUTE_REPEATS`` interleaved timings after a warm-up, by the lab's one timer
    ``core.cost.timing.time_interleaved``), or None where the float32 product is at least as fast.
    Not their rescoring: a few rows of the head, next to nothing."""
    if not candidates:
        return None
    products = [lambda h: torch.mm(weight, h.T)] + [c.product for c in candidates]
    inputs = [torch.randn(n, weight.shape[1]) for n in ROUTE_ROWS]

    def run(product: Callable[[torch.Tensor], torch.Tensor], h: torch.Tensor) -> Callable[[], None]:
        def once() -> None:
            product(h)  # its [rows, vocab] result is not kept
        return once

    runs = {(i, p): run(product, h) for i, h in enumerate(inputs) for p, product in enumerate(products)}
    samples = time_interleaved(runs, ROUTE_REPEATS)
    times = [sum(samples[i, p].median for i in range(len(inputs))) for p in range(len(products))]
    best = min(range(len(products)), key=lambda p: times[p])
    return None if best == 0 else candidates[best - 1]


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
    def certified_argmax(self) -> bool:
        """Whether :meth:`greedy` is the faster way to the argmax here: a cheaper route was picked for
        this head (a positive scale keeps the order; heads with a bias -- none of the common ones --
        take the float32 product)."""
        return self.bias is None and self.scale > 0 and cheap_head(self.weight) is not None

    def finish(self, logits: torch.Tensor) -> torch.Tensor:
        """The raw product ``hidden @ weight.T`` -> the model's logits (bias, soft-capping, scale), float32."""
        if self.bias is not None:
            logits = logits + self.bias
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        if self.scale != 1.0:
            logits = logits * self.scale
        return logits.float()

    @property
    def finishes(self) -> bool:
        """Whether :meth:`finish` changes anything but the dtype."""
        return self.bias is not None or self.softcap is not None or self.scale != 1.0

    @torch.inference_mode()
    def greedy(self, hidden: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...]]:
        """hidden ``[n, hidden_size]`` -> (the cheap route's raw product ``[n, vocab]``, not yet
        :meth:`finish`-ed, each row's exact float32 argmax). The raw logits are within the route's
        bound of the float32 ones (bf16: about 1%; fp16: about 0.05%), for a record's target_prob.

        With S + r|z'_j| the bound of :class:`CheapHead` on each cheap logit's distance from the
        float32 one: if token j is the float32 argmax and b the cheap one, ``D = z'_b - z'_j``
        satisfies ``D <= 2S + r(|z'_j| + |z'_b|) <= 2S + r(2|z'_b| + D)``, so ``D <= (2S + 2r|z'_b|) /
        (1 - r)``: only tokens that close to the row's largest cheap logit (one to a few a row on
        Gemma) are recomputed in float32, and the largest of those is the float32 argmax. They are
        found a block at a time: a block of ``BLOCK`` logits is read only when its largest is close
        enough. Soft-capping and a positive scale keep the order of the logits, so the argmax is
        taken on the raw product; only logits so large that tanh rounds them to the same float32
        value (past ~9 soft-caps) could tie after capping and not before.
        """
        cheap = cheap_head(self.weight)
        h = hidden.float().contiguous()
        raw = cheap.product(h)  # [n, vocab]
        rows, ids = _near_the_top(raw, cheap.slack_per_norm * h.norm(dim=1), cheap.r)
        if len(ids) > MAX_RESCORED * len(h):  # flat rows (never seen on Gemma): float32 throughout
            logits = torch.mm(self.weight, h.T).T
            return logits, tuple(logits.argmax(dim=-1).tolist())
        exact = (self.weight[ids] * h[rows]).sum(dim=1)
        best = torch.full((len(h),), -math.inf).scatter_reduce(0, rows, exact, "amax")
        first = torch.where(exact == best[rows], ids, self.vocab_size)  # ties go to the lowest id
        argmax = torch.full((len(h),), self.vocab_size).scatter_reduce(0, rows, first, "amin")
        return raw, tuple(argmax.tolist())

    @torch.inference_mode()
    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden ``[n, hidden_size]`` (after the final norm) -> logits ``[n, vocab]`` float32.

        The result is a transposed view of a ``[vocab, n]`` product (row ``i`` has stride ``n``).
        """
        return self.finish(torch.mm(self.weight, hidden.to(self.weight.dtype).T).T)  # [n, vocab]
