"""Faster exact kernels for a float32 decoder body on CPU: its Linear layers, by number of rows.

A verify runs the body over n query tokens at once. For one row, the weights are read once and
MKL's sgemm (``F.linear``) is the fastest path on these CPUs; from a few rows on, the same float32
product through a weight that oneDNN has reordered once for its own kernels is faster. Measured
on 2 idle cores of a Xeon (the 18 layers of Gemma 3 270M, weights not in cache; ms for all of
them): 1 row 15.5 (``F.linear``) vs 20.3 (packed), 3 rows 18.5 vs 21.8, 4 rows 25.2 vs 22.7,
5 rows 26.1 vs 23.2, 8 rows 31.1 vs 26.0, 25 rows 43.3 vs 35.9. So each large Linear of the
body keeps its weight and gains a packed copy, and takes the packed one from ``PACK_FROM_ROWS``
rows on (prefills included). Both are float32 products with float32 sums; they differ only in
the order of the sums (~1e-6 relative), as any two GEMM kernels -- or one kernel at two row
counts -- do.

The copy doubles the body's weight memory (Gemma 3 270M: +400 MB), so small models (under
``MIN_PACKED_PARAMS`` in the body's Linear layers, e.g. ``tiny``) are left alone.
``SDLAB_PACKED_LINEAR=0`` turns it off, ``=1`` on for any float32 CPU model (tests).
"""
from __future__ import annotations

import os
import types

import torch
import torch.nn.functional as F

PACK_FROM_ROWS = 4  # F.linear is faster below this many rows (measured above)
MIN_PACKED_PARAMS = 32_000_000


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
                _forward(module, torch.zeros(PACK_FROM_ROWS, module.in_features))  # can this CPU run it?
        except (RuntimeError, AttributeError):  # a torch build without oneDNN's linear
            break
        module.forward = types.MethodType(_forward, module)
        packed += 1
    return packed


def _forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    if torch.is_grad_enabled() or x.numel() < PACK_FROM_ROWS * x.shape[-1]:
        return F.linear(x, self.weight, self.bias)
    return torch.ops.mkldnn._linear_pointwise(x, self.packed_weight, self.bias, "none", [], "")
