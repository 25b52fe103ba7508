"""What more data buys each feature drafter: EAGLE and EAGLE-3 for ``gemma-270m`` trained on shares
of the stored drafter data with the same optimiser steps, each decoded through the engine on the
held-out prompts (greedy, a 6-token chain: acceptance at depths 1-6 and tau), book-style and
chat-style (``assets/prompts/chat.txt``).

    python -m core.train.scaling --data cache [--fractions 0.05,0.2,1] [--steps 1000] [--threads 2] \\
        [--ship assets/gemma-270m] [--out docs/benchmarks/gemma-cpu/scaling.json]

Every run's result is kept under the user's cache (``.../scaling/``) as soon as it is measured, and
a run in training saves a checkpoint there every 100 steps, so an interrupted sweep resumes where it
stopped (the same command again). ``--ship`` writes the weights of the runs on all of
the data (fraction 1) into the shipped drafter folder; the other runs' weights stay in the cache.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import torch

from core.drafters.base import DraftShape
from core.common.files import lab_cache
from core.train import eagle, heldout
from core.train.drafter_data import load_stored_data
from core.train.gemma_drafters import DRAFT_VOCAB, EAGLE_LR, HELDOUT_DATA, init_folder, subset, train_eagle

DEPTH = 6  # the chain the held-out decode drafts: acceptance at depths 1..DEPTH
# the weights as trained, over their draft vocabulary alone: the engine's context columns (on by default)
# would hide part of what a wider vocabulary buys, and the model cards' numbers were read this way
AS_TRAINED = {"draft_vocab_only": True}
SCALING_VERSION = 1


def run_key(kind: str, fraction: float, args) -> str:
    """The cache name of one run: what it trained on and how (a learning rate or vocabulary other
    than the default, and the weights it started from, by their digest, only when given)."""
    key = f"v{SCALING_VERSION}-{args.data}-{kind}-f{fraction:g}-s{args.steps}-seed{args.seed}"
    if args.batch != 8:
        key += f"-b{args.batch}"
    if args.lr != EAGLE_LR:
        key += f"-lr{args.lr:g}"
    if args.draft_vocab != str(DRAFT_VOCAB):
        key += f"-vocab{args.draft_vocab}"
    if args.depth_decay != 1:
        key += f"-decay{args.depth_decay:g}"
    if args.init is not None:
        weights = (init_folder(args.init, kind) / "model.safetensors").read_bytes()
        key += f"-from{hashlib.sha256(weights).hexdigest()[:8]}"
    return key


def chat_numbers(kind: str, target, folder: Path) -> dict:
    """The drafter in ``folder / kind`` on the chat-style held-out prompts: tau and acceptance per depth."""
    drafter = eagle.DRAFTERS[kind]
    numbers = heldout.evaluate(target, lambda: drafter(DraftShape(1, DEPTH), target, str(folder / kind), **AS_TRAINED),
                               heldout.heldout_prompts(target, "chat"), f"{kind} k={DEPTH} chat")
    return {"tau": round(numbers.tau, 3), "per_position": [round(p, 3) for p in numbers.per_position]}


def measure(kind: str, fraction: float, target, data, heldout_data, args) -> dict:
    """Train ``kind`` on ``fraction`` of ``data``; decode both held-out sets with it (book-style
    ``heldout`` at the top level of the result, chat-style under ``chat``)."""
    cache = lab_cache("scaling")
    key = run_key(kind, fraction, args)
    result_path = cache / f"{key}.json"
    out = args.ship if fraction == 1 and args.ship else cache / key
    if result_path.exists():
        print(f"[scaling] {kind} on {fraction:.0%}: measured before ({result_path})", file=sys.stderr)
        result = json.loads(result_path.read_text(encoding="utf-8"))
        if "chat" not in result and (out / kind / "model.safetensors").exists():  # measured before the chat set
            result["chat"] = chat_numbers(kind, target, out)
            result_path.write_text(json.dumps(result, indent=1), encoding="utf-8")
        return result
    share = data if fraction == 1 else subset(data, fraction, args.seed)
    trainer_args = argparse.Namespace(seed=args.seed, ttt_steps=args.ttt_steps, eagle3_steps=args.steps,
                                      eagle_steps=args.steps, batch=args.batch, lr=args.lr, data=args.data,
                                      data_fraction=fraction, draft_vocab=args.draft_vocab, init=args.init,
                                      depth_decay=args.depth_decay)
    seconds = train_eagle(kind, target, share, heldout_data, out, trainer_args, checkpoint=cache / f"{key}.ckpt")
    drafter = eagle.DRAFTERS[kind]
    numbers = heldout.evaluate(target, lambda: drafter(DraftShape(1, DEPTH), target, str(out / kind), **AS_TRAINED),
                               heldout.heldout_prompts(target), f"{kind} k={DEPTH}")
    result = {"drafter": kind, "fraction": fraction, "positions": share.tokens.numel(), "steps": args.steps,
              "train_seconds": round(seconds, 1), "threads": torch.get_num_threads(), **numbers.rounded(),
              "chat": chat_numbers(kind, target, out)}
    cache.mkdir(parents=True, exist_ok=True)
    result_path.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"[scaling] {kind} on {fraction:.0%} ({result['positions']:,} positions): tau {numbers.tau:.2f}, "
          f"per depth {[round(p, 2) for p in numbers.per_position]}", file=sys.stderr, flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    from core.models.loading import load_model, resolve_preset
    from core.train.corpus import build_corpus
    from core.train.features import load_or_build

    parser = argparse.ArgumentParser(prog="python -m core.train.scaling", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="cache", help="drafter data folder, \"cache\" (default), or several, comma-separated")
    parser.add_argument("--fractions", default="1,0.2,0.05", help="shares of the data, in the order to run them")
    parser.add_argument("--drafters", default=",".join(reversed(eagle.DRAFTERS)), help="eagle3,eagle (default)")
    parser.add_argument("--steps", type=int, default=1000, help="optimiser steps of every run (default 1000)")
    parser.add_argument("--batch", type=int, default=8, help="sequences per step (default 8)")
    parser.add_argument("--lr", type=float, default=EAGLE_LR)
    parser.add_argument("--draft-vocab", default=str(DRAFT_VOCAB),
                        help=f"the draft vocabulary: the N tokens Gemma chooses most often (default {DRAFT_VOCAB})")
    parser.add_argument("--init", type=Path,
                        help="start each drafter from the weights in this folder (e.g. assets/gemma-270m)")
    parser.add_argument("--ttt-steps", type=int, default=3, help="eagle3's training-time test unroll steps")
    parser.add_argument("--depth-decay", type=float, default=1.0,
                        help="weight unroll step j by DECAY**(j-1) (default 1: every depth alike)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ship", type=Path, help="write the fraction-1 runs' weights here (e.g. assets/gemma-270m)")
    parser.add_argument("--out", type=Path, help="write every result here as JSON")
    args = parser.parse_args(argv)
    fractions = [float(f) for f in args.fractions.split(",")]
    if not all(0 < f <= 1 for f in fractions):
        parser.error("--fractions must lie in (0, 1]")
    if args.init and args.ship and args.init.resolve() == args.ship.resolve():
        parser.error("--ship must be another folder than --init: run again, the command would start from "
                     "the weights it shipped (leave --ship out: the weights stay in the cache folder)")

    torch.set_num_threads(args.threads)
    target = load_model(resolve_preset("gemma-270m").target, "cpu")
    args.data, data = load_stored_data(args.data, target)
    heldout_data = load_or_build(target, build_corpus(), HELDOUT_DATA, "heldout")
    results = [measure(kind, fraction, target, data, heldout_data, args)
               for fraction in fractions for kind in args.drafters.split(",")]
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"command": "python -m core.train.scaling " + " ".join(sys.argv[1:]),
                                        "depth": DEPTH, "runs": results}, indent=1) + "\n", encoding="utf-8")
    print(markdown_table(results))
    return 0


def markdown_table(runs: list[dict]) -> str:
    """The runs as the table of docs/gemma.md: one row per drafter and share of the data, on the
    book-style held-out set, then tau and depth-1 acceptance on the chat-style one ("–": not measured)."""
    lines = ["| drafter | data | positions | train s | τ | " + " | ".join(f"depth {d}" for d in range(1, DEPTH + 1))
             + " | chat τ | chat depth 1 |", "|---" * (7 + DEPTH) + "|"]
    for r in sorted(runs, key=lambda r: (r["drafter"], r["fraction"])):
        depths = " | ".join(f"{p:.3f}" for p in r["per_position"])
        chat = f"{r['chat']['tau']:.2f} | {r['chat']['per_position'][0]:.3f}" if "chat" in r else "– | –"
        lines.append(f"| {r['drafter']} | {r['fraction']:.0%} | {r['positions']:,} | {r['train_seconds']:.0f} | "
                     f"{r['tau']:.2f} | {depths} | {chat} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
