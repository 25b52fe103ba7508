"""What building a request's drafter costs: the first request of a weights folder, and every one after.

    python bench/drafter_build.py [--preset gemma-270m] [--drafters eagle3,eagle,medusa,hybrid,draft] [--threads 2]

``core.api.build_decoder`` builds one drafter per request; a learned drafter's module is prepared
once per target and folder (``core.drafters.weights.prepared``) and shared after. Prints one
Markdown table, in milliseconds: the first build (reading, checking and preparing the weights; the
target is loaded beforehand and not counted) and the median of the next builds of the same drafter.
"""
from __future__ import annotations

import argparse
import statistics
from time import perf_counter

import torch

from core.api import build_decoder
from core.drafters import weights
from core.api.request import DecodeRequest


def build_ms(request: DecodeRequest) -> float:
    start = perf_counter()
    build_decoder(request)
    return (perf_counter() - start) * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="gemma-270m")
    parser.add_argument("--drafters", default="eagle3,eagle,medusa,hybrid,draft")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5, help="builds after the first")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    build_ms(DecodeRequest.of("Hello", args.preset, "none", max_new_tokens=8))  # loads the target
    print(f"{args.preset}, {args.threads} threads\n\n| drafter | first build, ms | next builds (median), ms |\n|---|---|---|")
    for drafter in args.drafters.split(","):
        request = DecodeRequest.of("Hello", args.preset, drafter, max_new_tokens=8)
        weights._prepared.clear()
        first = build_ms(request)
        after = statistics.median(build_ms(request) for _ in range(args.repeats))
        print(f"| {drafter} | {first:.1f} | {after:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
