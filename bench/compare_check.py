"""What the app's Compare and Worth it? show for a few prompts: run through the page's own request
builder and timing loop (warm-up, interleaved rounds, medians; ``core.studies.comparison``), then Worth
it?'s prediction for each set-up (``app.session.comparison_points``: tau / (k*c + v(n)) from the
run's own records and the cached verify-cost curve) beside the measured speedup.

    python bench/compare_check.py [--preset gemma-270m] [--drafters hybrid,eagle3,ngram]
                                  [--shapes "auto, 4"] [--max-new-tokens 48] [--repeats 3]
                                  [--prompt TEXT ...] [--threads 2]

Prints one Markdown table: per prompt and set-up the median speedup over ``none`` and its range
over the rounds, tau, the page's flags, the prediction and its error. Run on idle cores.
"""
from __future__ import annotations

import argparse

import torch

from app.controls import CompareControls, compare_requests
from app.session import comparison_points
from core.models.loading import PRESETS
from core.studies.comparison import run_comparison

README_PROMPTS = ("It is a truth universally acknowledged", "我爱", "床前明月光，")  # Compare's, the CLI's, the Gemma check's


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="gemma-270m")
    parser.add_argument("--drafters", default="hybrid,eagle3,ngram")
    parser.add_argument("--shapes", default="auto, 4")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prompt", action="append", help="a prompt (repeatable; default: the README's three)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"preset `{args.preset}`, {args.max_new_tokens} tokens, {args.repeats} rounds, {args.threads} threads\n")
    print("| prompt | set-up | speedup (median, range) | τ | flags | Worth it? predicts | error |\n"
          "|---|---|---|---|---|---|---|")
    for prompt in args.prompt or README_PROMPTS:
        controls = CompareControls(prompt, args.preset, args.drafters.split(","), args.shapes, 0, 0,
                                   args.max_new_tokens)
        requests = compare_requests("en", list(PRESETS), controls)
        for progress in run_comparison(requests, args.repeats):
            comparison = progress.comparison
        predicted = {point.label: point.predicted for point in comparison_points(comparison)}
        for setup in comparison.setups[1:]:
            speedup, guess = comparison.speedup(setup), predicted.get(setup.label)
            error = "–" if guess is None else f"{guess / speedup.median - 1:+.0%}"
            print(f"| {prompt} | {setup.label} | {speedup.median:.2f}× ({speedup.low:.2f}–{speedup.high:.2f}) | "
                  f"{setup.tau:.2f} | {', '.join(comparison.flags(setup)) or '–'} | "
                  f"{'–' if guess is None else f'{guess:.2f}×'} | {error} |", flush=True)


if __name__ == "__main__":
    main()
