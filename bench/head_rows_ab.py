"""The LM head over the rows a verify's acceptance reads (``core.runtime.acceptance.LOOKAHEAD_ROWS`` at a
time) against every row of the verify at once, in one process: the verify-cost curve with each, then
every spec decoding every prompt with each, interleaved with ``none`` prompt by prompt, ``--repeats``
times. Each way's ``auto`` controller reads its own curve (the cost cache keys on the setting).

    python bench/head_rows_ab.py [--specs hybrid:auto,eagle3:auto] [--preset gemma-270m] [--repeats 3]
                                 [--max-new-tokens 64] [--threads 2] [--prompts chat|heldout|FILE]
                                 [--records on|off]

Prints the verify cost at n = 1..32 both ways, then per spec and way the median speedup over
``none`` (pooled, Chinese half, English half), the worst prompt and every prompt's. With
``--records on`` (the bench's and the app's setting) every step's records read the target's law at
every parent row, so the head runs over those rows too. Run on idle cores.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.cost.curve import cost_curve  # noqa: E402
from core.cost.probe import VERIFY_CONTEXT, VERIFY_SIZES, latency_context, measure_verify_cost  # noqa: E402
from core.models.loading import load_model, resolve_preset  # noqa: E402
from core.models.prompts import HELDOUT_PROMPTS, load_prompts  # noqa: E402
from core.runtime import acceptance  # noqa: E402
from core.studies.bench import BenchConfig, ab_markdown, engine_runner, summarize, time_prompts  # noqa: E402

AS_READ = acceptance.LOOKAHEAD_ROWS
WAYS = {f"rows as read ({AS_READ} at a time)": AS_READ, "every row at once": None}


def with_rows(run, rows: int | None):
    """``run`` with the head computing ``rows`` rows at a time (None: every row)."""
    def wrapped():
        acceptance.LOOKAHEAD_ROWS = rows
        try:
            return run()
        finally:
            acceptance.LOOKAHEAD_ROWS = AS_READ

    return wrapped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--specs", default="hybrid:auto,eagle3:auto", help="core.studies.bench specs")
    parser.add_argument("--preset", default="gemma-270m")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompts", default=str(HELDOUT_PROMPTS), help="a held-out set's name or a prompts file")
    parser.add_argument("--records", choices=("on", "off"), default="on")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    config = BenchConfig(preset=args.preset, max_new_tokens=args.max_new_tokens, threads=args.threads)
    prompts = load_prompts(args.prompts)
    target = load_model(resolve_preset(args.preset).target)
    context = latency_context(target, load_prompts(HELDOUT_PROMPTS), VERIFY_CONTEXT)
    curves = {}
    for way, rows in WAYS.items():
        with_rows(lambda: cost_curve(target), rows)()  # each way's controller curve, cached
        curves[way] = with_rows(lambda: measure_verify_cost({"target": target}, context, VERIFY_SIZES,
                                                            heads=(True,))["rows"], rows)()
    print(f"{args.preset}, {args.threads} threads: verify ms and verify(n) / forward(1), the head both ways\n")
    print("| n | " + " | ".join(f"{way} ms | ratio" for way in WAYS) + " |\n|---" + "|---|---" * len(WAYS) + "|")
    for i, n in enumerate(VERIFY_SIZES):
        print(f"| {n} | " + " | ".join(f"{curves[way][i]['ms']:.1f} | {curves[way][i]['verify_ratio']:.2f}"
                                        for way in WAYS) + " |")
    record = args.records == "on"
    runs = {"none": [engine_runner(config, p, "none", record) for p in prompts]}
    for spec in args.specs.split(","):
        for way, rows in WAYS.items():
            runs[f"{spec}, {way}"] = [with_rows(engine_runner(config, p, spec, record), rows) for p in prompts]
    timings = time_prompts(runs, args.repeats, lambda message: print(message, file=sys.stderr))
    print(f"\n{len(prompts)} prompts x {args.max_new_tokens} tokens, {args.repeats} interleaved repeats, records "
          f"{args.records}; speedup over none (median over prompts)\n")
    print("\n".join(ab_markdown(summarize(timings, "none", prompts))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
