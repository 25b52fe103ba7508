"""Why ``--k auto`` did what it did on one prompt: decode it several times in one process (each run
starts from what the runs before taught the controller, as a server's requests do) and print, per
run, its wall time, the depth asked at each step (``p``: a probe), the drafted tokens each step
kept, and what the controller believes at the end (the plain step's seconds, its overrun factor,
the fitted draft cost and the acceptance by level).

    python bench/auto_trace.py --preset tiny --drafter eagle3:auto --prompt-index 4 [--runs 12]
    python bench/auto_trace.py --preset tiny --drafter eagle3:auto --prompt-index 4 --depth 3

``--depth`` caps the controller's chain (``--k auto`` drafts up to 8). Prompts are the 16
held-out prompts of ``core.studies.bench``. Run on idle cores: the controller reads the clock.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from time import perf_counter

import torch

import core.drafters.base as shapes
from core.api import build_decoder
from core.models.prompts import HELDOUT_PROMPTS, load_prompts
from core.studies.bench import BenchConfig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--drafter", default="eagle3:auto",
                        help="a bench spec with auto, e.g. draft:auto (a fixed one, e.g. eagle3:3, to compare)")
    parser.add_argument("--prompt-index", type=int, default=0, help="which held-out prompt (0-15)")
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--depth", type=int, help="the deepest chain --k auto may ask for (default 8)")
    parser.add_argument("--max-new-tokens", type=int, default=40)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.depth:
        shapes.AUTO_CHAIN = replace(shapes.AUTO_CHAIN, depth=args.depth)
    config = BenchConfig(preset=args.preset, max_new_tokens=args.max_new_tokens, threads=args.threads)
    prompt = load_prompts(HELDOUT_PROMPTS)[args.prompt_index]
    print(f"{args.drafter} on {prompt!r}")
    for _ in range(args.runs):
        decoder, ids = build_decoder(config.request(prompt, args.drafter))
        start = perf_counter()
        records = [r for r in decoder.steps(ids) if r is not None]
        wall = perf_counter() - start
        c = decoder.drafter
        asked = "".join("." if r.decision is None else f"{r.decision.depth}{'p' if r.decision.probe else ''}"
                        for r in records)
        kept = "".join(str(r.accepted_length) for r in records)
        if not hasattr(c, "draft_cost"):  # a fixed shape, for comparison: no controller to report on
            print(f"{wall * 1e3:6.1f} ms  kept {kept}")
            continue
        fixed, per_token, level = (round(x * 1e3, 3) for x in c.draft_cost.coefficients)
        print(f"{wall * 1e3:6.1f} ms  asked {asked:<32} kept {kept:<24} plain {c._plain_s() * 1e3:.2f} ms, "
              f"overrun {c.overrun:.2f}, draft ms {fixed} + {per_token}/token + {level}/level, "
              f"by level {[round(x, 2) for x in c.calibration.on_path(5)]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
