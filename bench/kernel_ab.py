"""The verify-cost curve with and without the body's packed Linear layers (``core.runtime.kernels``), in one
process: measured first with plain ``F.linear`` everywhere, then after packing, with the packed copy
taken from ``PACK_FROM_ROWS`` rows (the fixed rule before the row count was measured per CPU) and from
the row count measured on this CPU.

    python bench/kernel_ab.py [--preset gemma-270m] [--threads 2] [--repeats 7]

Prints ms and verify(n) / forward(1) for both, through the engine's verify path with the LM head
(``core.cost.probe``), after 64 tokens of held-out text. Run on idle cores.
"""
from __future__ import annotations

import argparse
import os

import torch


os.environ["SDLAB_PACKED_LINEAR"] = "0"  # load without; packed below
from core.cost.probe import VERIFY_CONTEXT, latency_context, measure_verify_cost
from core.models.loading import load_model, resolve_preset
from core.models.prompts import HELDOUT_PROMPTS, load_prompts
from core.runtime.kernels import PACK_FROM_ROWS, pack_linears

SIZES = (1, 2, 3, 4, 5, 6, 8, 12, 16, 25, 32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="gemma-270m")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    target = load_model(resolve_preset(args.preset).target, "cpu")
    context = latency_context(target, load_prompts(HELDOUT_PROMPTS), VERIFY_CONTEXT)
    plain = measure_verify_cost({"target": target}, context, SIZES, args.repeats, heads=(True,))["rows"]
    os.environ["SDLAB_PACKED_LINEAR"] = "auto"
    packed_layers = pack_linears(target.model)
    linears = [m for m in target.model.get_decoder().modules() if hasattr(m, "pack_from_rows")]
    measured = linears[0].pack_from_rows
    packed = measure_verify_cost({"target": target}, context, SIZES, args.repeats, heads=(True,))["rows"]
    for m in linears:
        m.pack_from_rows = PACK_FROM_ROWS
    fixed = measure_verify_cost({"target": target}, context, SIZES, args.repeats, heads=(True,))["rows"]
    print(f"{args.preset}, {args.threads} threads, {packed_layers} Linear layers packed, "
          f"packed from {measured} row(s) on this CPU\n")
    print(f"| n | F.linear ms | ratio | packed from {PACK_FROM_ROWS} rows ms | ratio | packed from {measured} ms | ratio |\n"
          "|---|---|---|---|---|---|---|")
    for a, b, c in zip(plain, fixed, packed):
        print(f"| {a['n']} | {a['ms']:.1f} | {a['verify_ratio']:.2f} | {b['ms']:.1f} | {b['verify_ratio']:.2f} "
              f"| {c['ms']:.1f} | {c['verify_ratio']:.2f} |")


if __name__ == "__main__":
    main()
