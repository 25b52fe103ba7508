"""Command line: ``python -m core generate|bench|train|export|serve-metrics ...`` (see README.md)."""
from __future__ import annotations

import argparse
import json
import sys

from .errors import UserError


def add_generate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default="tiny", help="tiny, a local model folder, or a hub id (default: tiny)")
    p.add_argument("--target", help="target model folder or hub id (overrides the preset's)")
    p.add_argument("--draft", help="draft model folder or hub id for --drafter draft (overrides the preset's)")
    p.add_argument("--drafter", default="draft",
                   help="none, draft, draft-xs, draft-l, ngram, medusa, eagle or eagle3 (default: draft; "
                        "draft-xs / draft-l = draft with --draft-size xs / l)")
    p.add_argument("--k", type=int, default=4, help="draft chain length / tree depth (default: 4)")
    p.add_argument("--tree", help="draft a tree WIDTHxDEPTH instead of a chain, e.g. 2x3 (eagle/eagle3: "
                                  "WIDTH is EAGLE-2's top-k)")
    p.add_argument("--ngram-n", type=int, default=3, help="longest n-gram the ngram drafter matches (default: 3)")
    p.add_argument("--draft-size", choices=["xs", "s", "l"],
                   help="which of the preset's draft models (default: s, the preset's draft)")
    p.add_argument("--drafter-weights", help="medusa/eagle/eagle3 weights folder (default: next to the target)")
    p.add_argument("--medusa-choices", help='medusa tree: "tuned" (chosen at training) or paths of ranks, '
                                            'e.g. "[[0], [1], [0, 0]]" (default: the --k/--tree shape)')
    p.add_argument("--eagle-nodes", type=int, help="eagle/eagle3: nodes kept for the verify after EAGLE-2's "
                                                   "expansion (default: the full WIDTHxDEPTH tree's size)")
    p.add_argument("--prompt", required=True)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--block-size", type=int, default=16, help="KV cache block size in tokens (default: 16)")
    p.add_argument("--device", default="auto", help="auto (CUDA if available), cpu or cuda")
    p.add_argument("--trust-remote-code", action="store_true", help="allow model code from the model folder/hub")
    p.add_argument("--trace", help="write the step records as JSON lines to this file (docs/trace.md)")
    p.add_argument("--check", action="store_true", help="also run the target alone and report baseline_match")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def run_generate(args: argparse.Namespace) -> int:
    from .api import generate

    result = generate(
        args.prompt, preset=args.preset, drafter=args.drafter, k=args.k, tree=args.tree,
        temperature=args.temperature, seed=args.seed, max_new_tokens=args.max_new_tokens,
        check=args.check, trace=args.trace, device=args.device, block_size=args.block_size,
        ngram_n=args.ngram_n, target=args.target, draft=args.draft, trust_remote_code=args.trust_remote_code,
        draft_size=args.draft_size, drafter_weights=args.drafter_weights, medusa_choices=args.medusa_choices,
        eagle_nodes=args.eagle_nodes,
    )
    data = result.to_dict()
    if args.json:
        print(json.dumps(data, ensure_ascii=False))
        return 0
    print(args.prompt + result.text)
    print(
        f"\n[{args.drafter}] {data['new_tokens']} tokens in {data['target_forwards']} target forwards "
        f"(tau {data['mean_accepted_tokens']:.2f}), acceptance {data['acceptance_rate']:.1%}, "
        f"{data['tokens_per_s']:.1f} tokens/s, KV peak {data['kv']['peak_blocks_in_use']} blocks",
        file=sys.stderr,
    )
    if args.check:
        print(f"identical to the target alone: {data['baseline_match']}", file=sys.stderr)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core", description="Speculative Decoding Lab engine")
    sub = parser.add_subparsers(dest="command", required=True)
    add_generate_arguments(sub.add_parser("generate", help="decode one prompt speculatively"))
    add_bench_arguments(sub.add_parser("bench", help="measure drafters side by side (and transformers' generate)"))
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
        if args.command in commands:
            return commands[args.command](args)
        return trainers[args.what](args)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
