"""Compare's estimate of its own time, checked on a real comparison: at every point the page would
show, the time so far plus the time left (``core.studies.comparison.estimate_left``), against the
final time -- optionally with ``--busy`` processes spinning on the cores from ``--busy-from`` seconds on.

    python bench/compare_estimate.py --preset tiny --busy 2 --busy-from 0

Prints the first estimate (before anything of this comparison is measured), the estimate at half-way
and the final time, and whether the page said the machine was busier than at the start.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import threading
import time

from busy import busy_processes

from core.api.request import DecodeRequest
from core.studies.comparison import estimate_left, run_comparison


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--drafters", default="none,ngram,eagle3,hybrid")
    parser.add_argument("--prompt", default="It is a truth universally acknowledged, that a single man")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--busy", type=int, default=2)
    parser.add_argument("--busy-from", type=float, default=0.0, help="seconds after the start the load begins")
    args = parser.parse_args()
    requests = [DecodeRequest.of(args.prompt, args.preset, name, max_new_tokens=args.max_new_tokens,
                                 **({} if name == "none" else {"k": "auto"})) for name in args.drafters.split(",")]
    load = contextlib.ExitStack()
    timer = threading.Timer(args.busy_from, lambda: load.enter_context(busy_processes(args.busy)))
    start = time.monotonic()
    timer.start()
    seen, first = [], None
    try:
        for progress in run_comparison(requests, args.repeats):
            if progress.phase == "cost":
                continue
            estimate = estimate_left(requests, args.repeats, progress.comparison, progress=progress)
            if estimate is not None:
                elapsed = time.monotonic() - start
                first = first or (elapsed, elapsed + estimate.left_s)
                seen.append((elapsed, elapsed + estimate.left_s, estimate.busier))
    finally:
        timer.cancel()
        load.close()
    final = time.monotonic() - start
    half = next(total for elapsed, total, _ in seen if elapsed >= final / 2)
    print(json.dumps({"preset": args.preset, "busy": args.busy, "busy_from_s": args.busy_from,
                      "first_estimate_s": round(first[1], 1), "estimate_at_half_way_s": round(half, 1),
                      "final_s": round(final, 1), "half_way_error": f"{half / final - 1:+.0%}",
                      "said_busier": any(b for *_, b in seen)}, indent=1))


if __name__ == "__main__":
    main()
