"""An int8 decoder body whose every row is computed on its own: the ``int8`` target precision.

Each Linear of the body keeps an int8 copy of its weight (symmetric, one float32 scale per output
row, ``max|w_j| / 127``) in place of its float32 one, and computes through fbgemm's int8 GEMM: a
quarter of the bytes to read, which is what a decode step on a CPU waits for.

fbgemm's *dynamic* quantization (``quantized.linear_dynamic``) would scale the activations once per
call, from the whole input: a row's result would then depend on the other rows of the forward, a
verify of n tokens would not compute what n single steps compute, and speculation would no longer
be lossless. So the activations are quantized here, **per row**, and handed to fbgemm already as
integers, in two levels:

* row i is divided by its own step ``r_i = max|x_i| / 63``; ``a_i`` is that rounded, and
  ``b_i = round((x_i / r_i - a_i) * 126)`` what the rounding left, both integers in [-63, 63], so
  ``x_i ~ r_i (a_i + b_i / 126)`` to about 1/16,000 of the row's largest value;
* fbgemm's static-input product (``linear_with_input_q_dq_qweight_dq_output_fp32``) is told
  scale 1 and zero point 64, so its own quantization maps those integers to [1, 127] exactly
  (7 bits: AVX2's pairwise u8 x s8 sums cannot saturate in int16); it sums them against the int8
  weight in int32 -- exactly, in any order -- and scales each sum by the weight row's scale;
* both levels go through one product of 2 x rows (at a few rows an int8 product costs what
  reading its weight costs), and row i's result is ``r_i (A_i + B_i / 126)``.

Every step is elementwise or exact, so a row's output is the same bits whatever rows share the
forward; the int8 target also attends row by row (``core.runtime.rowwise``), so the body's output
for a row (the LM head's input) is the same bits whatever else the forward holds (pinned in
tests/test_quantized.py). The error left is the weights' own rounding (0.6-2% of a Linear's
output on Gemma 3 270M, as for weight-only int8).

Only the body: the LM head stays float32 and keeps its certified exact argmax over whatever this
body produces (``core.runtime.head``). The result is a target of its own, not the float32 one (its
greedy text is compared with float32's in docs/quantized.md), and every drafter is lossless
against it as against any target.
"""
from __future__ import annotations

import threading
import types
import warnings

import torch

from core.runtime.rowwise import use_rowwise_attention

PRECISIONS = ("float32", "int8")
LEVEL = 63  # each level's integers lie in [-63, 63]; with the zero point fbgemm holds them in [1, 127]
ZERO_POINT = 64
FINE = 2 * LEVEL  # the second level: what the first left (within half a step), times this


class QuantizationUnavailable(RuntimeError):
    """This torch build or CPU has no fbgemm int8 GEMM, or the model is not a float32 CPU one."""


def prepack(weight: torch.Tensor):
    """fbgemm's packed int8 weight (symmetric, one scale a row) for a float32 ``weight`` [out, in]."""
    scales = (weight.abs().amax(dim=1) / 127).clamp_min(torch.finfo(torch.float32).tiny)
    with warnings.catch_warnings():  # torch 2.13 marks quantized tensors deprecated; the ops below run
        warnings.simplefilter("ignore", UserWarning)
        try:
            quantized = torch.quantize_per_channel(weight.detach(), scales.double(),
                                                   torch.zeros(len(scales), dtype=torch.long), 0, torch.qint8)
            packed = torch.ops.quantized.linear_prepack(quantized, None)
            int8_product(torch.zeros(1, weight.shape[1]), packed)  # can this CPU run it?
            return packed
        except (RuntimeError, AttributeError, NotImplementedError) as e:
            raise QuantizationUnavailable(f"no int8 GEMM in this torch build or on this CPU ({e})") from None


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row of ``x`` [rows, in] in two levels: ``(levels [2 x rows, in], step [rows, 1])``, the
    coarse levels' rows then the fine ones' (fbgemm's input, above)."""
    step = x.abs().amax(dim=1, keepdim=True).div_(LEVEL).clamp_min_(torch.finfo(torch.float32).tiny)
    scaled = x / step
    coarse = scaled.round()
    fine = scaled.sub_(coarse).mul_(FINE).round_()
    return torch.cat([coarse, fine]), step


def int8_product(x: torch.Tensor, packed) -> torch.Tensor:
    """``x @ w.T`` for fbgemm-packed int8 ``w``, each row of ``x`` [rows, in] quantized on its own."""
    levels, step = quantize_rows(x)
    out = torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32(levels, 1.0, ZERO_POINT, packed)
    rows = step.shape[0]
    return out[rows:].div_(FINE).add_(out[:rows]).mul_(step)


class Int8Group:
    """Linears that read one input (a layer's q/k/v, its gate/up) as one int8 product: their weights'
    rows stacked into one packed weight, so the input is quantized once and the weight read in one
    GEMM. Each output element is the same integer sum and the same scaling as in a product of its
    own Linear, so grouping changes the speed, never a bit of the result."""

    def __init__(self, linears: list[torch.nn.Linear]):
        self.packed = prepack(torch.cat([m.weight.detach() for m in linears]))
        edges = [0]
        for m in linears:
            edges.append(edges[-1] + m.out_features)
        self.columns = [slice(a, b) for a, b in zip(edges, edges[1:])]

    def output(self, x: torch.Tensor, member: int) -> torch.Tensor:
        """Member ``member``'s product of ``x`` [..., in]: computed for the whole group at the group's
        first read of ``x``, then sliced (the members read ``x`` one after the other)."""
        if _last.group is not self or _last.tensor is not x:
            _last.group, _last.tensor = self, x
            _last.out = int8_product(x.reshape(-1, x.shape[-1]).float(), self.packed)
        return _last.out[:, self.columns[member]]


class _LastInput(threading.local):
    """The last group product this thread computed, and its input. (Inference tensors keep no version
    counter: a model that changed an input in place between two members reading it would get the
    first read's product -- the same for every row and every run, so still one target, decoded
    losslessly, only a different one.)"""

    group: Int8Group | None = None
    tensor: torch.Tensor | None = None
    out: torch.Tensor | None = None


_last = _LastInput()


def _int8_forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    if torch.is_grad_enabled():
        raise RuntimeError("an int8 target has no gradient (its weights are quantized)")
    out = self.int8_group.output(x, self.int8_member)
    out = out + self.bias if self.bias is not None else out.contiguous()
    return out.reshape(*x.shape[:-1], out.shape[-1])


def _groups(model, linears: list[torch.nn.Linear]) -> list[list[torch.nn.Linear]]:
    """``linears`` grouped by the input tensor each read in one probe forward (a few tokens), in the
    order they read it; a Linear the probe did not reach is a group of its own."""
    read: dict[int, list[torch.nn.Linear]] = {}
    keep: list[torch.Tensor] = []  # the inputs stay alive, so no id is reused during the probe

    def hook(module, inputs):
        keep.append(inputs[0])
        group = read.setdefault(id(inputs[0]), [])
        if module not in group:
            group.append(module)

    handles = [m.register_forward_pre_hook(hook) for m in linears]
    try:
        with torch.inference_mode():
            vocab = model.get_input_embeddings().num_embeddings
            model.get_decoder()(input_ids=torch.arange(1, 5, device=model.device)[None] % vocab)
    finally:
        for handle in handles:
            handle.remove()
    grouped = [g for g in read.values() if len({m.in_features for m in g}) == 1]
    seen = {id(m) for g in grouped for m in g}
    return grouped + [[m] for m in linears if id(m) not in seen]


def quantize_body(model) -> int:
    """Make every Linear of a float32 CPU ``model``'s decoder body an int8 one, in place (its float32
    weights are let go), attending row by row (``core.runtime.rowwise``); returns how many Linears.
    Raises ``QuantizationUnavailable`` where fbgemm does not run or the model is not a float32 CPU one."""
    linears = [m for m in model.get_decoder().modules() if isinstance(m, torch.nn.Linear)]
    if not linears or any(m.weight.device.type != "cpu" or m.weight.dtype != torch.float32 for m in linears):
        raise QuantizationUnavailable("the int8 target needs a float32 model on the CPU")
    for members in _groups(model, linears):
        group = Int8Group(members)
        for index, module in enumerate(members):
            module.int8_group, module.int8_member = group, index
            module.forward = types.MethodType(_int8_forward, module)
            module.weight.data = torch.empty(0, module.in_features)  # never read again: its 4 bytes a weight go
    use_rowwise_attention(model)
    return len(linears)
