"""How much of the target's greedy text a draft vocabulary of N tokens can propose at all.

A feature drafter with a reduced vocabulary (``--draft-vocab N``: the N tokens the target chooses
most often on the drafter data) never proposes a token outside it, so the share of the target's
greedy tokens inside it caps the drafter's acceptance at every depth. This prints that share for
several N on the training data and on each held-out set's greedy continuations (the same 64
tokens ``core.train.heldout`` decodes; book-style ``heldout`` and chat-style ``chat``, by language):

    python -m core.train.vocab_coverage [--data cache] [--sizes 4096,8192,16384] [--threads 2]
    python -m core.train.vocab_coverage --vocab-from assets/gemma-270m/eagle3   # a shipped drafter's list

With ``--vocab-from`` the share is also measured for that drafter's own draft vocabulary (the
list it ships), which needs no drafter data.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from safetensors import safe_open

from core.api import target_greedy
from core.models.prompts import PROMPT_SETS, load_prompts
from core.studies.bench import language
from core.train.drafter_data import load_stored_data
from core.train.heldout import HELDOUT_NEW_TOKENS


def coverage(counts: torch.Tensor, tokens: torch.Tensor, sizes: list[int]) -> list[tuple[int, float, float]]:
    """(N, share of ``counts`` in the top N ids, share of ``tokens`` among them) for each N of ``sizes``."""
    order = counts.argsort(descending=True)
    return [(n, float(counts[order[:n]].sum() / counts.sum()), float(torch.isin(tokens, order[:n]).float().mean()))
            for n in sizes]


def greedy_tokens(target, prompts: list[str]) -> torch.Tensor:
    """The target's greedy continuations of ``prompts`` (``HELDOUT_NEW_TOKENS`` each), concatenated."""
    return torch.tensor([token for prompt in prompts
                         for token in target_greedy(target, target.tokenizer(prompt).input_ids, HELDOUT_NEW_TOKENS)])


def heldout_greedy(target) -> dict[str, torch.Tensor]:
    """Greedy continuations of each held-out set and of its Chinese and English halves:
    {"heldout": ..., "heldout zh": ..., "heldout en": ..., "chat": ..., ...}."""
    out = {}
    for name in PROMPT_SETS:
        prompts = load_prompts(name)
        halves = {lang: greedy_tokens(target, [p for p in prompts if language(p) == lang]) for lang in ("zh", "en")}
        out.update({name: torch.cat([halves["zh"], halves["en"]]), **{f"{name} {k}": v for k, v in halves.items()}})
    return out


def drafter_vocabulary(folder: Path) -> torch.Tensor:
    """The draft vocabulary (target ids) a trained drafter ships in ``folder/model.safetensors``."""
    with safe_open(str(Path(folder) / "model.safetensors"), "pt") as f:
        return f.get_tensor("draft_vocab").long()


def main(argv: list[str] | None = None) -> int:
    from core.models.loading import load_model, resolve_preset

    parser = argparse.ArgumentParser(prog="python -m core.train.vocab_coverage", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="cache",
                        help="drafter data folder(s), \"cache\" (default), or \"none\" (only --vocab-from)")
    parser.add_argument("--sizes", default="2048,4096,6144,8192,12288,16384")
    parser.add_argument("--vocab-from", type=Path, help="also: the draft vocabulary of the drafter in this folder")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    target = load_model(resolve_preset("gemma-270m").target, "cpu")
    held = heldout_greedy(target)
    names = list(held)
    if args.vocab_from:
        vocab = drafter_vocabulary(args.vocab_from)
        print(f"{args.vocab_from} ({len(vocab):,} tokens): " + ", ".join(
            f"{name} {float(torch.isin(tokens, vocab).float().mean()):.3f}" for name, tokens in held.items()))
    if args.data == "none":
        return 0
    _, data = load_stored_data(args.data, target)
    counts = torch.bincount(data.greedy.flatten(), minlength=target.vocab_size)
    print("share of the target's greedy tokens in the N it chooses most often on the data:")
    print("| draft vocabulary | the data | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for n in [int(s) for s in args.sizes.split(",")]:
        shares = [coverage(counts, held[name], [n])[0] for name in names]
        print(f"| {n:,} | {shares[0][1]:.3f} | " + " | ".join(f"{share[2]:.3f}" for share in shares) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
