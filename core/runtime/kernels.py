"""Faster exact kernels for a float32 decoder body on CPU: its Linear layers, by number of rows; and
half-precision products for the drafters, whose rounding never reaches the output (at the end).

A verify runs the body over n query tokens at once. Each large Linear of the body keeps its weight
and gains a copy that oneDNN has reordered once for its own kernels; a product of a few rows
may be faster through either, and which depends on the CPU. Measured on 2 idle cores (the 18
layers of Gemma 3 270M, ms for all their Linear layers):

| rows | 1 | 2 | 3 | 4 | 5 | 8 |
|---|---|---|---|---|---|---|
| Xeon with AMX, ``F.linear`` (MKL sgemm) | 15.5 | | 18.5 | 25.2 | 26.1 | 31.1 |
| Xeon with AMX, packed | 20.3 | | 21.8 | 22.7 | 23.2 | 26.0 |
| AMD EPYC, AVX2 only, ``F.linear`` | 34.2 | 61.3 | 71.2 | 64.9 | 58.6 | 59.1 |
| AMD EPYC, AVX2 only, packed | 29.8 | 33.7 | 34.9 | 35.9 | 37.1 | 41.5 |

So the row count from which the packed copy is taken is measured when the model is packed
(``measured_pack_from_rows``: each way over every packed Linear at 1 to ``PACK_FROM_ROWS - 1``
rows, by the lab's one timer; about a second for Gemma 3 270M), and prefills always take it. Both are float32
products with float32 sums; they differ only in the order of the sums (~1e-6 relative), as any two
GEMM kernels -- or one kernel at two row counts -- do.

The copy doubles the body's weight memory (Gemma 3 270M: +400 MB), so small models (under
``MIN_PACKED_PARAMS`` in the body's Linear layers, e.g. ``tiny``) are left alone.
``SDLAB_PACKED_LINEAR=0`` turns it off, ``=1`` on for any float32 CPU model from ``PACK_FROM_ROWS``
rows, untimed (tests).
"""
from __future__ import annotations

import os
import types
from typing import Callable

import torch
import torch.nn.functional as F

from core.common.timing import time_interleaved

PACK_FROM_ROWS = 4  # from here on the packed copy was the faster on every CPU measured (above)
MIN_PACKED_PARAMS = 32_000_000
ROWS_REPEATS = 3  # interleaved timings of each way at each row count, after a warm-up; the median counts


def pack_linears(model: torch.nn.Module) -> int:
    """Give every Linear of ``model``'s decoder body a packed weight for multi-row inputs; returns
    how many were packed (0 when the switch, the device, the dtype or the size says no)."""
    switch = os.environ.get("SDLAB_PACKED_LINEAR", "auto")
    body = model.get_decoder()
    linears = [m for m in body.modules() if isinstance(m, torch.nn.Linear) and m.weight.dtype == torch.float32
               and m.weight.device.type == "cpu"]
    if switch == "0" or not linears or not torch.backends.mkldnn.is_available():
        return 0
    if switch != "1" and sum(m.weight.numel() for m in linears) < MIN_PACKED_PARAMS:
        return 0
    packed = 0
    for module in linears:
        try:
            with torch.no_grad():
                module.packed_weight = torch.ops.mkldnn._reorder_linear_weight(module.weight.detach(), None)
                _packed(module, torch.zeros(PACK_FROM_ROWS, module.in_features))  # can this CPU run it?
        except (RuntimeError, AttributeError):  # a torch build without oneDNN's linear
            break
        module.pack_from_rows = PACK_FROM_ROWS
        module.forward = types.MethodType(_forward, module)
        packed += 1
    if packed and switch != "1":
        rows = measured_pack_from_rows(linears[:packed])
        for module in linears[:packed]:
            module.pack_from_rows = rows
    return packed


def measured_pack_from_rows(linears: list[torch.nn.Linear]) -> int:
    """The row count from which the packed copies are the faster on this CPU: every Linear of
    ``linears`` through ``F.linear`` and through its packed copy, at 1 to ``PACK_FROM_ROWS - 1``
    rows (medians of ``ROWS_REPEATS`` interleaved timings after a warm-up)."""
    inputs = {rows: {m.in_features: torch.randn(rows, m.in_features) for m in linears}
              for rows in range(1, PACK_FROM_ROWS)}

    def run(rows: int, packed: bool):
        def once() -> None:
            with torch.no_grad():
                for m in linears:
                    x = inputs[rows][m.in_features]
                    if packed:
                        _packed(m, x)
                    else:
                        F.linear(x, m.weight, m.bias)
        return once

    samples = time_interleaved({(rows, packed): run(rows, packed) for rows in inputs for packed in (False, True)},
                               ROWS_REPEATS)
    return first_packed_row({rows: (samples[rows, False].median, samples[rows, True].median) for rows in inputs})


def first_packed_row(times: dict[int, tuple[float, float]]) -> int:
    """The least row count from which the packed product is faster at every measured count,
    ``times[rows] = (F.linear's, packed)``; ``PACK_FROM_ROWS`` where it is not faster at the last."""
    first = PACK_FROM_ROWS
    for rows in sorted(times, reverse=True):
        plain, packed = times[rows]
        if packed >= plain:
            break
        first = rows
    return first


def _packed(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, self.packed_weight, self.bias, "none", [], "")


def _forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    if torch.is_grad_enabled() or x.numel() < self.pack_from_rows * x.shape[-1]:
        return F.linear(x, self.weight, self.bias)
    return _packed(self, x)


# ---- drafters: products that need not be exact ---------------------------------------------------
# A drafter only proposes; the target's verify decides, so a drafter's rounding can change which
# tokens it proposes (its acceptance), never the output. On a CPU its float32 products at one to
# a few rows are memory-bound: fbgemm's fp16 GEMM reads half the bytes and runs 3-10x faster there
# (EAGLE-3's 16,384 x 640 draft head on the AVX2-only EPYC, 2 threads: 3.8 ms against 0.8 ms at
# one row, 13.7 against 1.2 ms at five). ``SDLAB_HALF_DRAFTERS=0`` keeps them in float32.


def half_product(weight: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """A drafter's ``fp16_product``; None with ``SDLAB_HALF_DRAFTERS=0``."""
    if os.environ.get("SDLAB_HALF_DRAFTERS", "1") == "0":
        return None
    return fp16_product(weight)


def fp16_product(weight: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """``x -> x @ weight.T`` through fbgemm's fp16 GEMM (weight rounded to half once, float32
    sums), for a float32 CPU ``weight`` [out, in]; None where fbgemm does not run, for other
    devices and dtypes, and for weights that half cannot hold. The LM head's fp16 route
    (``core.runtime.head``) and the drafters take it from here."""
    weight = weight.detach()
    if (weight.device.type != "cpu" or weight.dtype != torch.float32
            or float(weight.abs().max()) >= torch.finfo(torch.float16).max):
        return None
    try:
        packed = torch.ops.quantized.linear_prepack_fp16(weight, None)
        torch.ops.quantized.linear_dynamic_fp16(torch.zeros(1, weight.shape[1]), packed)
    except (RuntimeError, AttributeError, NotImplementedError):  # no fbgemm in this build or on this CPU
        return None

    def product(x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1]).float().contiguous()
        return torch.ops.quantized.linear_dynamic_fp16(flat, packed).reshape(*x.shape[:-1], weight.shape[0])
    return product


def half_linears(module: torch.nn.Module) -> int:
    """Every float32 CPU Linear of a drafter ``module`` computes through ``half_product`` when no
    gradient is asked (training keeps the float32 weights it updates); returns how many."""
    done = 0
    for linear in [m for m in module.modules() if isinstance(m, torch.nn.Linear)]:
        product = half_product(linear.weight)
        if product is None:
            continue
        linear.half_product = product
        linear.forward = types.MethodType(_half_forward, linear)
        done += 1
    return done


def _half_forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    if torch.is_grad_enabled():
        return F.linear(x, self.weight, self.bias)
    out = self.half_product(x)
    return out if self.bias is None else out + self.bias
