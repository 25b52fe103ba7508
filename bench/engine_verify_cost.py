"""The engine's verify of n tokens ÷ a verify of 1, on a preset: a before/after probe of the verify path.

    python bench/engine_verify_cost.py [PRESET] [THREADS] [REPEATS]     (default: gemma-270m 2 12)

Runs the lab's one verify probe (``core.cost.probe.measure_verify_cost``: n tokens as a chain
after 64 cached tokens through the paged cache, the body, the LM head and the argmax a greedy
verify reads; every size once per pass, interleaved after a warm-up pass, medians) on the
preset's target with its LM head, and prints milliseconds and the ratio to n = 1 per size.
Commits before the probe existed measured ``SpeculativeDecoder.verify`` against a one-token
``forward_segment`` instead (docs/benchmarks.md cites both).
"""
import sys

import torch

from core.cost.probe import VERIFY_CONTEXT, latency_context, measure_verify_cost
from core.models.loading import load_model, resolve_preset
from core.models.prompts import load_prompts

SIZES = (1, 2, 5, 9, 17, 25)


def main() -> None:
    preset = sys.argv[1] if len(sys.argv) > 1 else "gemma-270m"
    torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 2)
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 12
    target = load_model(resolve_preset(preset).target)
    context = latency_context(target, load_prompts(), VERIFY_CONTEXT)
    rows = measure_verify_cost({"target": target}, context, SIZES, repeats, heads=(True,))["rows"]
    for row in rows:
        print(f"verify({row['n']:2d}) {row['ms']:8.1f} ms   ÷ verify(1) {row['verify_ratio']:.2f}")


if __name__ == "__main__":
    main()
