"""Command line: ``python -m core generate|bench|train|export|serve-metrics ...`` (see README.md)."""
from __future__ import annotations

import argparse
import json
import sys
import typing

import torch

from .errors import UserError


def add_generate_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``generate``, read off ``DecodeRequest`` and every drafter's ``Options``."""
    from .drafters import option_fields, option_owners
    from .request import DecodeRequest, drafter_names

    fields = DecodeRequest.model_fields
    p.add_argument("--prompt", required=True)
    for name in ("preset", "target", "draft"):
        add_field_argument(p, name, fields[name])
    p.add_argument("--drafter", default=fields["drafter"].default,
                   help=f"{', '.join(drafter_names())} (default: {fields['drafter'].default})")
    p.add_argument("--k", default=4, help="draft chain length / tree depth (default: 4)")
    p.add_argument("--tree", help="draft a tree WIDTHxDEPTH instead of a chain, e.g. 2x3 (eagle/eagle3: "
                                  "WIDTH is EAGLE-2's top-k)")
    for name, info in option_fields().items():
        add_field_argument(p, name, info, default=None, owners=option_owners(name))
    for name in ("max_new_tokens", "temperature", "seed", "block_size", "device", "trust_remote_code"):
        add_field_argument(p, name, fields[name])
    p.add_argument("--trace", help="write the step records as JSON lines to this file (docs/trace.md)")
    p.add_argument("--check", action="store_true", help="also run the target alone and report baseline_match")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def add_field_argument(p: argparse.ArgumentParser, name: str, info, default=..., owners=()) -> None:
    """One ``--flag`` from a pydantic field: its type, choices, default and description."""
    from .request import flag

    annotation = info.annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    kind = args[0]
    default = info.default if default is ... else default
    help_text = (info.description or "") + (f" [{'/'.join(owners)}]" if owners else "")
    if kind is bool:
        p.add_argument(f"--{flag(name)}", action="store_true", help=help_text)
        return
    kwargs = {"choices": list(typing.get_args(kind))} if typing.get_origin(kind) is typing.Literal else \
        {"type": kind if kind in (int, float) else str}
    shown = "" if default is None else f" (default: {default})"
    p.add_argument(f"--{flag(name)}", default=default, help=help_text + shown, **kwargs)


def run_generate(args: argparse.Namespace) -> int:
    from .api import generate
    from .drafters import option_fields

    flat = {name: getattr(args, name) for name in (
        "max_new_tokens", "temperature", "seed", "block_size", "device", "trust_remote_code", "target", "draft",
        *option_fields())}
    result = generate(args.prompt, args.preset, args.drafter, args.k, args.tree, check=args.check, trace=args.trace,
                      **flat)
    data = result.to_dict()
    if args.json:
        print(json.dumps(data, ensure_ascii=False))
    else:
        print(args.prompt + result.text)
        print(
            f"\n[{args.drafter}] {data['new_tokens']} tokens in {data['target_forwards']} target forwards "
            f"(tau {data['mean_accepted_tokens']:.2f}), acceptance {data['acceptance_rate']:.1%}, "
            f"{data['tokens_per_s']:.1f} tokens/s, KV peak {data['kv']['peak_blocks_in_use']} blocks",
            file=sys.stderr,
        )
        if args.check:
            print(f"identical to the target alone: {data['baseline_match']}", file=sys.stderr)
    if result.trace_error:
        print(f"error: {result.trace_error}", file=sys.stderr)
        return 1
    return 0


def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default="tiny")
    p.add_argument("--target", help="target model folder or hub id (overrides the preset's)")
    p.add_argument("--draft", help="draft model folder or hub id (overrides the preset's)")
    p.add_argument("--drafters", default="none,draft,ngram", help="comma-separated; must include none")
    p.add_argument("--prompts", help="prompts file, one per line (default: the held-out set in assets/prompts)")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--tree", help="WIDTHxDEPTH tree instead of a chain")
    p.add_argument("--compare-hf", action="store_true", help="also time transformers' generate/assisted/prompt lookup")
    p.add_argument("--overhead", action="store_true", help="also time the first drafter with step records off")
    p.add_argument("--batch-sweep", help="batch sizes, e.g. 1,2,4,8,16 (at most 16 on CPU, 64 on CUDA): throughput "
                                         "of each drafter against batch size, and the target's forward latency")
    p.add_argument("--threads", type=int, help="torch CPU threads for the measurement (default: torch's default)")
    p.add_argument("--device", default="auto")
    p.add_argument("--out", help="write bench.json, bench.md and bench.html into this folder")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run_bench(args: argparse.Namespace) -> int:
    from .bench import BenchConfig, markdown_table, run_bench as bench, write_outputs
    from .prompts import HELDOUT_PROMPTS

    config = BenchConfig(
        preset=args.preset, drafters=tuple(d.strip() for d in args.drafters.split(",") if d.strip()),
        prompts_file=args.prompts or str(HELDOUT_PROMPTS), max_new_tokens=args.max_new_tokens,
        repeats=args.repeats, k=args.k, tree=args.tree, compare_hf=args.compare_hf, overhead=args.overhead,
        device=args.device, target=args.target, draft=args.draft, batch_sweep=args.batch_sweep or (),
        threads=args.threads,
    )
    result = bench(config)
    if args.out:
        write_outputs(result, args.out)
    print(json.dumps(result, ensure_ascii=False) if args.json else markdown_table(result))
    return 0


def add_cost_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default="tiny")
    p.add_argument("--target", help="target model folder or hub id (overrides the preset's)")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, help="torch CPU threads (the curve is cached per thread count)")
    p.add_argument("--remeasure", action="store_true", help="measure again even when a cached curve exists")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run_cost(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from .cost import cost_curve
    from .models import load_model, resolve_preset

    if args.threads is not None:
        if not 1 <= args.threads <= 256:
            raise UserError(f"--threads must be between 1 and 256 (got {args.threads})")
        torch.set_num_threads(args.threads)
    target = load_model(args.target or resolve_preset(args.preset).target, args.device)
    curve = cost_curve(target, remeasure=args.remeasure)
    if args.json:
        print(json.dumps(asdict(curve)))
    else:
        print(f"verify cost v(n) = forward(n) / forward(1) on {curve.device}, {curve.threads} thread(s); "
              f"forward(1) = {curve.forward_s * 1000:.1f} ms")
        print("n: " + " ".join(f"{n:>5}" for n in curve.tokens))
        print("v: " + " ".join(f"{r:>5.2f}" for r in curve.ratio))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core", description="Speculative Decoding Lab engine")
    sub = parser.add_subparsers(dest="command", required=True)
    add_generate_arguments(sub.add_parser("generate", help="decode one prompt speculatively"))
    add_bench_arguments(sub.add_parser("bench", help="measure drafters side by side (and transformers' generate)"))
    add_cost_arguments(sub.add_parser("cost", help="the verify-cost curve v(n) the auto controller reads "
                                                   "(measured once per model and machine, cached)"))
    train = sub.add_parser("train", help="train the tiny model family or a learned drafter for a target")
    train_sub = train.add_subparsers(dest="what", required=True)
    from .train import draft_sizes, eagle, medusa, tiny

    tiny.add_arguments(train_sub.add_parser("tiny", help="train the embedded tiny target and draft"))
    draft_sizes.add_arguments(train_sub.add_parser("draft-sizes", help="train more sizes of the tiny draft"))
    medusa.add_arguments(train_sub.add_parser("medusa", help="train Medusa heads for a target"))
    eagle.add_arguments(train_sub.add_parser("eagle", help="train an EAGLE feature drafter for a target"), "eagle")
    eagle.add_arguments(train_sub.add_parser("eagle3", help="train an EAGLE-3 drafter (fused layers, training-time "
                                                            "test) for a target"), "eagle3")
    from . import serve_metrics, vllm_export

    vllm_export.add_arguments(sub.add_parser("export", help="write a learned drafter for a serving engine (vLLM)"))
    serve_metrics.add_arguments(sub.add_parser("serve-metrics", help="decode prompts in a loop and serve their "
                                                                     "/metrics in vLLM's names"))
    commands = {"export": vllm_export.run, "serve-metrics": serve_metrics.run}
    trainers = {"tiny": tiny.run, "draft-sizes": draft_sizes.run, "medusa": medusa.run,
                "eagle": eagle.run, "eagle3": eagle.run}
    args = parser.parse_args(argv)
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
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
