"""The command line: ``python -m core generate|bench|cost|train|export|serve-metrics|vllm|llamacpp|results ...`` (README.md).
Each command's flags and its run live in its own module; this one wires them and turns a user's
mistake into one ``error:`` line and exit status 2; a file or
format error, a failure of a program the lab runs (vLLM, llama.cpp, pip: ``ExternalError``), or Ctrl-C, into one
``error:`` line and exit status 1 (130 for Ctrl-C)."""
from __future__ import annotations

import argparse
import sys

from safetensors import SafetensorError

from core.cli import export
from core.cli.generate import add_generate_arguments, run_generate
from core.cli.measure import add_bench_arguments, add_cost_arguments, run_bench, run_cost
from core.common.errors import ExternalError, UserError, one_line
from core.llamacpp import cli as llamacpp_cli
from core.serving import serve_metrics
from core.studies import results
from core.train import draft_sizes, eagle, medusa, tiny
from core.vllm import cli as vllm_cli


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core", description="Speculative Decoding Lab engine")
    sub = parser.add_subparsers(dest="command", required=True)
    add_generate_arguments(sub.add_parser("generate", help="decode one prompt speculatively"))
    add_bench_arguments(sub.add_parser("bench", help="measure drafters side by side (and transformers' generate)"))
    add_cost_arguments(sub.add_parser("cost", help="the verify-cost curve v(n) the auto controller reads "
                                                   "(measured once per model and machine, cached)"))
    train = sub.add_parser("train", help="train the tiny model family or a learned drafter for a target")
    train_sub = train.add_subparsers(dest="what", required=True)
    tiny.add_arguments(train_sub.add_parser("tiny", help="train the embedded tiny target and draft"))
    draft_sizes.add_arguments(train_sub.add_parser("draft-sizes", help="train more sizes of the tiny draft"))
    medusa.add_arguments(train_sub.add_parser("medusa", help="train Medusa heads for a target"))
    eagle.add_arguments(train_sub.add_parser("eagle", help="train an EAGLE feature drafter for a target"), "eagle")
    eagle.add_arguments(train_sub.add_parser("eagle3", help="train an EAGLE-3 drafter (fused layers, training-time "
                                                            "test) for a target"), "eagle3")
    eagle.add_arguments(train_sub.add_parser("peagle", help="train a P-EAGLE drafter (EAGLE-3 drafting every token "
                                                            "of a step in one forward) for a target"), "peagle")
    export.add_arguments(sub.add_parser("export", help="write a learned drafter for a serving engine (vLLM)"))
    serve_metrics.add_arguments(sub.add_parser("serve-metrics", help="decode prompts in a loop and serve their "
                                                                     "/metrics in vLLM's names"))
    vllm_cli.add_arguments(sub.add_parser("vllm", help="vLLM as oracle and peer: setup (its own venv), status, "
                                                       "compare (text and counters against the lab), "
                                                       "serve (vllm serve on loopback)"))
    llamacpp_cli.add_arguments(sub.add_parser("llamacpp", help="llama.cpp as the CPU peer: setup (its own venv, "
                                                               "its wheel built once), status"))
    results.add_arguments(sub.add_parser("results", help="render docs/results.md from the shipped "
                                                         "docs/benchmarks/*/bench.json files (to stdout)"))
    commands = {"export": export.run, "serve-metrics": serve_metrics.run, "vllm": vllm_cli.run,
                "llamacpp": llamacpp_cli.run, "results": results.run}
    trainers = {"tiny": tiny.run, "draft-sizes": draft_sizes.run, "medusa": medusa.run,
                "eagle": eagle.run, "eagle3": eagle.run, "peagle": eagle.run}
    args = parser.parse_args(argv)
    return guarded(lambda: run(args, commands, trainers))


def run(args, commands, trainers) -> int:
    try:
        if args.command == "generate":
            return run_generate(args)
        if args.command == "bench":
            return run_bench(args)
        if args.command == "cost":
            return run_cost(args)
        if args.command in commands:
            return commands[args.command](args)
        return trainers[args.what](args)
    except UserError as e:
        print(f"error: {one_line(str(e))}", file=sys.stderr)
        return 2


def guarded(command) -> int:
    """The one error boundary of ``python -m core``: a file, format or data error, a program the lab runs
    that failed (vLLM, pip) and Ctrl-C end in one ``error:`` line and a non-zero exit, never a traceback
    (an engine bug still shows one)."""
    try:
        return command()
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except ExternalError as e:  # its first line is the cause, with the exit status and signal where it ended
        print(f"error: {one_line(str(e))}", file=sys.stderr)
        return 1
    except OSError as e:
        where = f" {e.filename!r}" if e.filename else ""
        print(f"error: {one_line(e.strerror or str(e) or type(e).__name__)}{where}", file=sys.stderr)
        return 1
    except (ValueError, KeyError, IndexError, SafetensorError, MemoryError) as e:
        detail = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
        print(f"error: {type(e).__name__}: {one_line(str(detail))}", file=sys.stderr)
        return 1
