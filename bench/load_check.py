"""The timing claims of ``--k auto`` runs with the CPU shared: each step's decision read from its
record, idle and with busy processes beside the run, side by side in one invocation.

    python bench/load_check.py --preset tiny --busy 2 --prompts chat --limit 6 --max-new-tokens 48

Per condition (idle, then ``--busy`` processes spinning on the cores), over every step of every
run: how many expected gains exceed the step's expected tokens (impossible: a step's gain over a
plain step is at most its tokens), how many realised gains exceed 1.25x the tokens the step emitted,
the worst realised gain over emitted tokens, and how many steps the lab labelled disturbed.
"""
from __future__ import annotations

import argparse
import json
import os
import time

from busy import busy_processes

from core import generate
from core.models.prompts import load_prompts


def check(preset: str, drafters: list[str], prompts: list[str], max_new_tokens: int) -> dict:
    steps = above_expected = above_realised = disturbed = 0
    worst, seconds = 0.0, 0.0
    for drafter in drafters:
        for prompt in prompts:
            started = time.perf_counter()
            result = generate(prompt, preset, drafter, k="auto", max_new_tokens=max_new_tokens)
            seconds += time.perf_counter() - started
            for record in result.steps:
                d = record.decision
                steps += 1
                disturbed += bool(record.disturbed)
                above_expected += d.expected_gain > d.expected_tokens + 1e-9
                if d.realised_gain is not None:
                    ratio = d.realised_gain / len(record.emitted)
                    above_realised += ratio > 1.25
                    worst = max(worst, ratio)
    return {"steps": steps, "expected_above_tokens": above_expected, "realised_above_1.25x": above_realised,
            "worst_realised_over_emitted": round(worst, 2), "disturbed": disturbed, "seconds": round(seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--drafters", default="eagle3,hybrid")
    parser.add_argument("--prompts", default="chat")
    parser.add_argument("--limit", type=int, default=6)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--busy", type=int, default=2, help="processes spinning beside the loaded condition")
    args = parser.parse_args()
    prompts = load_prompts(args.prompts)[: args.limit]
    drafters = args.drafters.split(",")
    generate(prompts[0], args.preset, drafters[0], k="auto", max_new_tokens=8)  # load and measure the curve first
    rows = {"idle": check(args.preset, drafters, prompts, args.max_new_tokens)}
    with busy_processes(args.busy):
        rows[f"{args.busy} busy"] = check(args.preset, drafters, prompts, args.max_new_tokens)
    print(json.dumps({"preset": args.preset, "cores": os.cpu_count(), "load_before": os.getloadavg()[0], **rows},
                     indent=1))


if __name__ == "__main__":
    main()
