"""How often the target keeps a drafted node, by who proposed it, its depth and its draft confidence:
the question behind a tried controller that calibrated each kind of proposer apart (docs/drafters.md, ``hybrid``).

    python bench/proposer_acceptance.py [--preset gemma-270m] [--drafter hybrid] [--shape 5]
                                        [--prompts chat] [--limit 12] [--max-new-tokens 64] [--threads 2]
                                        [--set drafter_weights=assets/gemma-270m/eagle3]

A fixed shape (``--shape 5``: a 5-token chain, ``4x5``: a tree) so that every proposed node is
verified and counted; ``auto`` counts only what the controller chose. Greedy. Reached nodes only
(the root's children, and a node whose parent was kept). Prints one Markdown table: per kind
(``ngram``, ``eagle3``, ``eagle3+ngram`` where both proposed the node), per depth
1-4 (4: four and deeper), kept / reached, for nodes without a confidence (q = 1) and for the others
by q's tenth. Acceptance does not depend on the machine's speed: the cores may be shared.
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict

import torch

from core.api import generate
from core.models.prompts import load_prompts
from core.studies.bench import language


DEPTHS = 4  # depth 4 and deeper counted together
TENTHS = 10


def node_kind(proposer: str) -> str:
    """Who proposed a node, without the part's detail: ``eagle3-d2`` -> ``eagle3``, ``ngram+eagle3`` -> ``eagle3+ngram``."""
    return "+".join(sorted({part.split("-")[0] for part in proposer.split("+")}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="gemma-270m")
    parser.add_argument("--drafter", default="hybrid")
    parser.add_argument("--shape", default="5", help="k (a chain) or a tree such as 4x5")
    parser.add_argument("--prompts", default="chat", help="a held-out set's name or a prompts file")
    parser.add_argument("--limit", type=int, default=12, help="prompts to decode: the set's first Chinese and first English ones, half each")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a drafter option")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    prompts = load_prompts(args.prompts)
    zh, en = [p for p in prompts if language(p) == "zh"], [p for p in prompts if language(p) != "zh"]
    chosen = zh[: args.limit // 2] + en[: args.limit - args.limit // 2]
    shape = {"tree": args.shape} if "x" in args.shape else {"k": args.shape if args.shape == "auto" else int(args.shape)}
    if any("=" not in item for item in args.set):
        parser.error("--set takes NAME=VALUE")
    options = dict(item.split("=", 1) for item in args.set)
    kept: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for i, prompt in enumerate(chosen, start=1):
        result = generate(prompt, args.preset, args.drafter, max_new_tokens=args.max_new_tokens, **shape, **options)
        for step in result.steps:
            for node in step.nodes:
                if node.status == "not_reached":
                    continue
                confidence = "q = 1" if node.draft_prob >= 1.0 else f"q {min(TENTHS - 1, int(node.draft_prob * TENTHS)) / TENTHS:.1f}"
                cell = kept[node_kind(node.proposer), min(node.depth, DEPTHS), confidence]
                cell[0] += node.status == "accepted"
                cell[1] += 1
        print(f"{i}/{len(chosen)} prompts", file=sys.stderr, flush=True)
    print(f"{args.drafter} {args.shape} {' '.join(args.set)} on {args.preset}, {len(chosen)} prompts of "
          f"{args.prompts}, {args.max_new_tokens} tokens: nodes kept / reached\n")
    print("| kind | depth | confidence | kept / reached | share |\n|---|---|---|---|---|")
    for (kind, depth, confidence), (hits, trials) in sorted(kept.items()):
        print(f"| {kind} | {depth}{'+' if depth == DEPTHS else ''} | {confidence} | {hits} / {trials} | "
              f"{hits / trials:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
