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

* ``int8``: fbgemm's dynamic int8 GEMM (torch's ``quantized.linear_dynamic``), for any x86 CPU with
  AVX2: int8 weights with a scale per row, the hidden row quantized per call to 7 bits (so AVX2's
  pairwise u8 x s8 products cannot saturate), int32 sums. Its error needs two things to be useful
  on Gemma, whose final norm has outlier channels (|h_i| up to 186 where most are below 10, so one
  activation scale per call would make the bound 6-36 logits and every token a candidate): those
  channels are taken out of the int8 product and added in float32 from a small copy of their
  columns (which channels: the largest of the model's own final hidden states on a fixed probe,
  :func:`outlier_channels`; any choice stays exact, a poor one is only slower), and the bound is
  kept **per token** (each row's own quantisation error and weight norm), not its vocabulary-wide
  worst case. On Gemma's held-out text that leaves 8 tokens a row to rescore at one row (median),
  60 at 5 rows and some 260 at 25 (one activation step serves all the rows of a call; 750 on a
  flatter book-style verify, rescored as one product over the rows' 6,600 distinct tokens). On an AMD
  EPYC with AVX2 only, idle, 2 threads, the product (int8 and the outlier columns) takes 10 / 12 /
  41 ms at 1 / 5 / 25 rows of Gemma's head and the whole greedy argmax 11 / 12 / 51 ms, against
  16 / 14 / 60 ms for fp16's product and 47 / 62 / 134 for float32's.

Which route a head takes is picked once per weight, where it pays: among the routes this CPU runs
(bf16 only with bf16 units; fp16 and int8 only where fbgemm runs), the one whose product is fastest at
``ROUTE_ROWS`` rows, timed interleaved against the float32 product; the float32 head if that is
fastest. Switches (for measuring and tests): ``SDLAB_BF16_HEAD`` / ``SDLAB_FP16_HEAD`` /
``SDLAB_INT8_HEAD`` = ``0`` leaves a route out (``SDLAB_BF16_HEAD=0`` stands for a CPU without bf16 units), ``1`` forces it
for any float32 CPU head, small ones included (bf16 is slow without bf16 units).
"""
from __future__ import annotations

import functools
import math
import os
import threading
import warnings
import weakref
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from core.common.timing import time_interleaved
from core.runtime.kernels import fp16_product

BF16_ROUNDOFF = 2.0**-8  # unit roundoff of bfloat16 (8 significant bits)
FLOAT32_ROUNDOFF = 2.0**-24
INT8_LEVELS = 127  # the activation's levels (fbgemm's reduce_range: 7 bits, so no int16 pair saturates on AVX2)
OUTLIER_CHANNELS = 32  # hidden channels the int8 route takes out of its product and adds in float32
MIN_CHEAP_VOCAB = 32_768  # smaller heads are cheap in float32: no second copy for them
BLOCK = 256  # logits a block when looking for the ones near a row's largest
MAX_RESCORED = 4_096  # more candidates a row than this on average: the float32 head instead
ROUTE_ROWS = (1, 16)  # rows each route is timed at when one is picked (a plain step, a verify)
ROUTE_REPEATS = 3  # interleaved timings of each, after a warm-up; the median counts
ROUTES = ("bf16", "fp16", "int8")
_CHEAP_HEADS: dict[tuple, tuple[weakref.ref, "CheapHead | None"]] = {}  # (id(weight), switches, probed) -> its route
_LOCK = threading.Lock()


@dataclass(frozen=True)
class CheapHead:
    """A faster, lower-precision product of the head and the proven bound on its error: each of its
    logits ``z'_j`` (row h) is within ``sum_m a_m(h) b_mj + r |z'_j|`` of the float32 logit ``z_j``
    (either float32 product, this one's exact counterpart or the reference's), with ``a =
    row_slack(h)`` ``[n, m]`` and ``b = token_slack`` ``[m, vocab]`` (bf16 and fp16: m = 1, b = 1, one
    bound for every token of a row)."""

    route: str  # "bf16" | "fp16" | "int8"
    product: Callable[[torch.Tensor], torch.Tensor]  # h float32 [n, hidden] -> [n, vocab] (bfloat16 or float32)
    row_slack: Callable[[torch.Tensor], torch.Tensor]  # h [n, hidden] -> a [n, m] float32
    token_slack: torch.Tensor  # b [m, vocab] float32, >= 0
    r: float  # relative rounding of the product's result (a bf16 result); 0 for a float32 one

    @functools.cached_property
    def block_slack(self) -> torch.Tensor:
        """``[m, vocab // BLOCK + vocab % BLOCK]``: b's largest in each whole block, then the tail's own."""
        vocab = self.token_slack.shape[1]
        whole = vocab - vocab % BLOCK
        blocks = self.token_slack[:, :whole].reshape(len(self.token_slack), -1, BLOCK).amax(dim=2)
        return torch.cat([blocks, self.token_slack[:, whole:]], dim=1)

    def bound(self, h: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
        """``[n, vocab]``: the bound on each logit's distance from the float32 one (for tests)."""
        return self.row_slack(h) @ self.token_slack + self.r * raw.float().abs()


def _uniform(route: str, product, slack_per_norm: float, r: float, vocab: int) -> CheapHead:
    """A route whose bound is ``slack_per_norm * |h|`` (plus r|z'_j|) for every token of a row."""
    return CheapHead(route, product, lambda h: slack_per_norm * h.float().norm(dim=1, keepdim=True),
                     torch.ones(1, vocab), r)


def _bf16_head(weight: torch.Tensor, outliers: tuple[int, ...] = ()) -> CheapHead:
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
    return _uniform("bf16", product, slack, u / (1 - u), weight.shape[0])


def _fp16_head(weight: torch.Tensor, outliers: tuple[int, ...] = ()) -> CheapHead | None:
    """fbgemm's fp16 GEMM over the head (None where this build or CPU has no fbgemm).

    It stores each weight w_i rounded to half, widens it exactly to float32, and multiplies and sums
    in float32 (checked here: the product with a unit vector reads back a column of the weight
    rounded to half, to the bit). So with ŵ the half weight row, ``|ŵ h - w h| <= |ŵ - w| |h|`` (Cauchy-
    Schwarz; ``max_j |ŵ_j - w_j|`` is measured here, exactly, once); each float32 sum of K products
    adds at most ``g = K u / (1 - K u)`` of ``sum|w_i h_i| <= |w| |h|`` (u = 2^-24; this one and the
    float32 reference each): ``S = (max_j|ŵ_j - w_j| + g (2 max_j|w_j| + max_j|ŵ_j - w_j|)) |h|``.
    The result is float32: no rounding of its own (r = 0)."""
    hidden = weight.shape[1]
    product = fp16_product(weight)
    if product is None:  # no fbgemm here, or a weight half cannot hold
        return None
    if not torch.equal(product(torch.eye(2, hidden)), weight[:, :2].T.half().float()):
        return None  # not the rounding the bound assumes
    rounding, largest = 0.0, 0.0
    for chunk in weight.split(16_384):  # without a second full-size float32 copy
        rounding = max(rounding, float((chunk - chunk.half().float()).norm(dim=1).max()))
        largest = max(largest, float(chunk.norm(dim=1).max()))
    ku = hidden * FLOAT32_ROUNDOFF
    slack = rounding + ku / (1 - ku) * (2 * largest + rounding)
    return _uniform("fp16", product, slack, 0.0, weight.shape[0])


def _int8_head(weight: torch.Tensor, outliers: tuple[int, ...] = ()) -> CheapHead | None:
    """fbgemm's dynamic int8 GEMM over the head's other channels, plus the ``outliers`` channels in
    float32 (None where this build or CPU has no fbgemm, or its kernel is not the arithmetic below).

    The rest R of the channels: each row w_j (outlier columns zeroed) is stored as int8 q_j with a
    float32 scale t_j = max|w_j| / 127, so ŵ_j = t_j q_j exactly; per call fbgemm quantizes h_R
    (outliers zeroed) with one step s = (max(h_R, 0) - min(h_R, 0)) / 127 and a zero point to
    ĥ, each element within s/2 of h_R's; it sums q·(ĥ/s) in int32, exactly, then scales by s t_j in
    float32. So ``|ŵ_j ĥ - w_j h_R| <= |w_j - ŵ_j| |h_R| + |ŵ_j|_1 s/2`` (Cauchy-Schwarz; Hölder),
    each measured here per row j, and the float32 roundings (fbgemm's scaling, the outlier columns'
    product and the sum, the float32 reference's own sum) stay below ``(K + c + 8) u (|w_j| +
    |w_j - ŵ_j|) (|h| + s sqrt(K) / 2)`` with u = 2^-24. The three terms are kept per token
    (``token_slack`` m = 3): Gemma's rows differ by over ten times in their rounding error. Checked on
    this machine's kernel once (``_kernel_keeps_the_bound``)."""
    vocab, hidden = weight.shape
    columns = torch.tensor(sorted(set(outliers)), dtype=torch.long)
    rest = torch.ones(hidden, dtype=torch.bool)
    rest[columns] = False
    scales, ints = torch.empty(vocab), torch.empty(vocab, hidden, dtype=torch.int8)
    error, l1, norm = torch.empty(vocab), torch.empty(vocab), torch.empty(vocab)
    for start in range(0, vocab, 16_384):  # without a second full-size float32 copy
        rows = slice(start, start + 16_384)
        chunk = weight[rows] * rest
        scale = (chunk.abs().amax(dim=1) / 127).clamp_min(torch.finfo(torch.float32).tiny)
        q = (chunk / scale[:, None]).round_().clamp_(-127, 127)
        scales[rows], ints[rows], norm[rows] = scale, q.to(torch.int8), weight[rows].norm(dim=1)
        # |w - q t| and |q t|_1 in float32: off by at most K roundoffs of themselves and a few of |w|, added back
        error[rows] = (chunk - q * scale[:, None]).norm(dim=1) * (1 + 2**-12) + 2**-20 * norm[rows]
        l1[rows] = (q.abs_().sum(dim=1) * scale) * (1 + 2**-20)
    packed = _fbgemm_packed(ints, scales)
    del ints
    if packed is None:
        return None
    outlier_weight = weight[:, columns].contiguous()  # [vocab, c]: the outlier channels' columns, float32
    ulp = (hidden + len(columns) + 8) * FLOAT32_ROUNDOFF * (1 + 2**-10)

    def split(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = h.float()
        h_rest = h.clone()
        h_rest[:, columns] = 0
        return h, h_rest

    def product(h: torch.Tensor) -> torch.Tensor:
        h, h_rest = split(h)
        raw = torch.ops.quantized.linear_dynamic(h_rest, packed, True)  # reduce_range: 7-bit activations
        return raw.addmm_(h[:, columns], outlier_weight.T) if len(columns) else raw

    def row_slack(h: torch.Tensor) -> torch.Tensor:
        h, h_rest = split(h)
        spread = float(h_rest.max().clamp_min(0) - h_rest.min().clamp_max(0))
        step = spread / INT8_LEVELS * (1 + 2**-10)
        # a step too small for float32 (|h| < 1e-36) is replaced by 0.1: every element rounds to 0
        half = step / 2 if step > 1e-36 else spread
        whole = h.double().norm(dim=1) + half * hidden**0.5
        return torch.stack([h_rest.double().norm(dim=1) * (1 + 2**-20), torch.full_like(whole, half), ulp * whole],
                           dim=1).float()

    cheap = CheapHead("int8", product, row_slack, torch.stack([error, l1, norm + error]), 0.0)
    return cheap if _kernel_keeps_the_bound(cheap, weight, columns) else None


def _fbgemm_packed(ints: torch.Tensor, scales: torch.Tensor):
    """fbgemm's packed weight for int8 rows ``ints`` [vocab, hidden] with float32 scales [vocab] (zero
    points 0), or None where this build or CPU has no fbgemm."""
    with warnings.catch_warnings():  # torch 2.13 marks quantized tensors deprecated; the ops below run
        warnings.simplefilter("ignore", UserWarning)
        try:
            quantized = torch._make_per_channel_quantized_tensor(ints, scales.double(),
                                                                 torch.zeros(len(ints), dtype=torch.long), 0)
            return torch.ops.quantized.linear_prepack(quantized, None)
        except (RuntimeError, AttributeError, NotImplementedError):  # no fbgemm here
            return None


def _kernel_keeps_the_bound(cheap: CheapHead, weight: torch.Tensor, outliers: torch.Tensor) -> bool:
    """Whether this machine's kernel stays within the route's bound on rows that stress it (outlier
    channels in and out of the split, a tiny and a huge row), read on every 16th token and the 256
    rows with the largest rounding error: the bound assumes the arithmetic above; a kernel that
    differs (no zero-point correction, another rounding) is not taken."""
    generator = torch.Generator().manual_seed(0)
    h = torch.randn(6, weight.shape[1], generator=generator)
    h[:3, outliers] *= 150
    h[3, :: max(1, weight.shape[1] // 8)] *= 150
    h[4] *= 1e-3
    h[5] *= 1e3
    tokens = torch.cat([torch.arange(0, weight.shape[0], 16), cheap.token_slack[0].topk(min(256, weight.shape[0])).indices])
    raw = cheap.product(h)[:, tokens].double()
    exact = torch.mm(h.double(), weight[tokens].double().T)
    bound = cheap.row_slack(h).double() @ cheap.token_slack[:, tokens].double()
    return bool(((raw - exact).abs() <= bound).all())


_BUILDERS = {"bf16": _bf16_head, "fp16": _fp16_head, "int8": _int8_head}


@functools.cache
def _cpu_has_bf16_units() -> bool:
    """Asked once per process, not once per verify."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def _switches() -> tuple[str, ...]:
    return tuple(os.environ.get(f"SDLAB_{route.upper()}_HEAD", "auto") for route in ROUTES)


@torch.inference_mode()
def outlier_channels(model, count: int = OUTLIER_CHANNELS) -> tuple[int, ...]:
    """The ``count`` channels of the model's final hidden states (after the final norm) largest on
    average over a fixed probe: BOS, then 63 token ids spread evenly over the vocabulary (the first
    position left out: it is the largest everywhere). Such channels are the model's own and barely
    depend on the text (on Gemma 3 270M 25 of the 32 are those of 350 positions of held-out text)."""
    config = model.config.get_text_config()
    vocab = model.get_output_embeddings().weight.shape[0]
    bos = config.bos_token_id if isinstance(config.bos_token_id, int) else 0
    ids = torch.tensor([[bos] + [i * (vocab // 64) for i in range(1, 64)]], device=model.device)
    try:
        hidden = model.get_decoder()(input_ids=ids, use_cache=False).last_hidden_state[0, 1:].float()
    except (AttributeError, TypeError, ValueError, RuntimeError):  # a model without a plain text decoder
        return ()  # int8 stays exact without the split, only slower
    return tuple(sorted(hidden.abs().mean(dim=0).topk(min(count, hidden.shape[1])).indices.tolist()))


def cheap_head(weight: torch.Tensor, outliers: Callable[[], tuple[int, ...]] | None = None) -> CheapHead | None:
    """The route :meth:`LMHead.greedy` takes for this head (None: the float32 head), picked once
    per weight tensor and switch setting (and dropped with the tensor). ``outliers`` (called once, at
    the pick) names the hidden channels the int8 route keeps in float32; without it int8 is not
    offered unless forced."""
    if weight.dtype != torch.float32 or weight.device.type != "cpu":
        return None
    switches = _switches()
    key = (id(weight), switches, outliers is not None)
    entry = _CHEAP_HEADS.get(key)
    if entry is None or entry[0]() is not weight:
        with _LOCK, torch.inference_mode():
            entry = _CHEAP_HEADS.get(key)
            if entry is None or entry[0]() is not weight:
                entry = (weakref.ref(weight, lambda _: _CHEAP_HEADS.pop(key, None)), _pick(weight, switches, outliers))
                _CHEAP_HEADS[key] = entry
    return entry[1]


def head_route(weight: torch.Tensor, outliers: Callable[[], tuple[int, ...]] | None = None) -> str:
    """"bf16", "fp16", "int8" or "float32": how a greedy verify computes this head's argmax here."""
    cheap = cheap_head(weight, outliers)
    return "float32" if cheap is None else cheap.route


def _pick(weight: torch.Tensor, switches: tuple[str, ...], outliers) -> CheapHead | None:
    """A forced route (``=1``); else, for a large enough head, the fastest of the routes this CPU
    runs and the float32 product (``_fastest``)."""
    channels = lambda: outliers() if outliers is not None else ()
    for route, switch in zip(ROUTES, switches):
        if switch == "1":
            return _BUILDERS[route](weight, channels())
    if weight.shape[0] < MIN_CHEAP_VOCAB:
        return None
    runs = {"bf16": _cpu_has_bf16_units(), "fp16": True, "int8": outliers is not None}  # fbgemm: its builders say
    chosen = [route for route, switch in zip(ROUTES, switches) if switch != "0" and runs[route]]
    picked = channels() if "int8" in chosen else ()
    candidates = [_BUILDERS[route](weight, picked) for route in chosen]
    return _fastest(weight, [c for c in candidates if c is not None])


def _fastest(weight: torch.Tensor, candidates: list[CheapHead]) -> CheapHead | None:
    """The candidate whose product takes the least time over ``ROUTE_ROWS`` rows (medians of
    ``ROUTE_REPEATS`` interleaved timings after a warm-up, by the lab's one timer
    ``core.common.timing.time_interleaved``), or None where the float32 product is at least as fast.
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


def _near_the_top(raw: torch.Tensor, cheap: CheapHead, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, ids) of every token j that could still be its row's float32 argmax.

    With S_j = sum_m a_m b_mj the bound on |z'_j - z_j| beside r|z'_j|, and b the cheap argmax: the
    float32 argmax j has ``z'_b - z'_j <= S_j + S_b + r(2|z'_b| + z'_b - z'_j)``, so ``z'_j >= z'_b -
    (S_b + 2r|z'_b| + S_j) / (1 - r)``. Reads each ``BLOCK`` of a row once for its largest value, then only the blocks that could
    reach the threshold with their largest slack."""
    n, vocab = raw.shape
    r = cheap.r
    whole = vocab - vocab % BLOCK
    a = cheap.row_slack(h)  # [n, m]

    def own_slack(rows: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """S_j / (1 - r) of each (row, token) pair."""
        return (a[rows] * cheap.token_slack[:, ids].T).sum(dim=1) / (1 - r)

    blocks = torch.cat([raw[:, :whole].view(n, -1, BLOCK).amax(dim=2).float(), raw[:, whole:].float()], dim=1)
    slack = (a @ cheap.block_slack) / (1 - r)  # [n, blocks]: the largest S_j / (1 - r) of each block
    top, where = blocks.max(dim=1)
    in_block = where < whole // BLOCK  # else the largest is in the tail
    first = torch.where(in_block, where * BLOCK, whole + where - whole // BLOCK)
    span = torch.where(in_block[:, None], first[:, None] + torch.arange(BLOCK), first[:, None])  # [n, BLOCK]
    best = span.gather(1, raw.gather(1, span).argmax(dim=1, keepdim=True))[:, 0]  # the cheap argmax b
    slack_best = own_slack(torch.arange(n), best)
    threshold = top - slack_best - 2 * r * top.abs() / (1 - r)
    block_rows, block_ids = (blocks + slack >= threshold[:, None]).nonzero(as_tuple=True)
    inner = block_ids < whole // BLOCK
    block_rows, block_ids = block_rows[inner], block_ids[inner]
    tokens = block_ids[:, None] * BLOCK + torch.arange(BLOCK)  # [k, BLOCK]
    values = raw[block_rows[:, None], tokens].float()
    # each token with its block's largest slack first, then the few left with their own
    near = values + slack[block_rows, block_ids][:, None] >= threshold[block_rows, None]
    which, offset = near.nonzero(as_tuple=True)
    rows, ids = block_rows[which], tokens[which, offset]
    inside = values[which, offset] + own_slack(rows, ids) >= threshold[rows]
    rows, ids = rows[inside], ids[inside]
    tail = raw[:, whole:].float() + (a @ cheap.token_slack[:, whole:]) / (1 - r)
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
    outliers: Callable[[], tuple[int, ...]] | None = None  # the int8 route's float32 channels (asked once)

    @classmethod
    def of(cls, model) -> LMHead:
        head = model.get_output_embeddings()
        if not isinstance(head, torch.nn.Linear):
            raise TypeError(f"{type(model).__name__}: the LM head is not a Linear layer")
        config = model.config.get_text_config()
        scale = float(getattr(config, "logit_scale", None) or 1.0) / float(getattr(config, "logits_scaling", None) or 1.0)
        return cls(head.weight, head.bias, getattr(config, "final_logit_softcapping", None), scale,
                   functools.partial(outlier_channels, model))

    @property
    def cheap(self) -> CheapHead | None:
        return cheap_head(self.weight, self.outliers)

    @property
    def vocab_size(self) -> int:
        return self.weight.shape[0]

    @property
    def certified_argmax(self) -> bool:
        """Whether :meth:`greedy` is the faster way to the argmax here: a cheaper route was picked for
        this head (a positive scale keeps the order; heads with a bias -- none of the common ones --
        take the float32 product)."""
        return self.bias is None and self.scale > 0 and self.cheap is not None

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
        bound of the float32 ones (bf16: about 1%; fp16: about 0.05%; int8 a few logits at worst),
        for a record's target_prob.

        With S_j + r|z'_j| the bound of :class:`CheapHead` on each cheap logit's distance from the
        float32 one, only the tokens that could still be the largest (:func:`_near_the_top`: one to a
        few a row on Gemma through bf16 or fp16, tens to hundreds through int8) are recomputed in float32
        (one product over the rows' union of them), and the largest of those is the float32
        argmax. Soft-capping and a positive scale keep the order of the logits, so the argmax is
        taken on the raw product; only logits so large that tanh rounds them to the same float32
        value (past ~9 soft-caps) could tie after capping and not before.
        """
        cheap = self.cheap
        h = hidden.float().contiguous()
        raw = cheap.product(h)  # [n, vocab]
        rows, ids = _near_the_top(raw, cheap, h)
        if len(ids) > MAX_RESCORED * len(h):  # flat rows (never seen on Gemma): float32 throughout
            logits = torch.mm(self.weight, h.T).T
            return logits, tuple(logits.argmax(dim=-1).tolist())
        # one product over the rows' union of candidates (rows of one verify share most of them):
        # on book-style text at 25 rows some 750 a row, 6,600 distinct, a tenth of gathering a row each
        union, where = torch.unique(ids, return_inverse=True)
        exact = torch.mm(self.weight[union], h.T)[where, rows]
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
