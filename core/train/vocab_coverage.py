"""How much of the target's greedy text a draft vocabulary of N tokens can propose at all.

A feature drafter with a reduced vocabulary (``--draft-vocab N``: the N tokens the target chooses
most often on the drafter data) never proposes a token outside it, so the share of the target's
greedy tokens inside it caps the drafter's acceptance at every depth. This prints that share for
several N on the training data and on the held-out prompts' greedy continuations (the same 64
tokens ``core.train.heldout`` decodes):

    python -m core.train.vocab_coverage [--data cache] [--sizes 4096,8192,16384] [--threads 2]
"""
from __future__ import annotations

import argparse
import sys

import torch

from core.api import target_greedy
from core.train.gemma_drafters import load_stored_data
from core.train.heldout import MAX_NEW_TOKENS, heldout_prompts


def coverage(counts: torch.Tensor, tokens: torch.Tensor, sizes: list[int]) -> list[tuple[int, float, float]]:
    """(N, share of ``counts`` in the top N ids, share of ``tokens`` among them) for each N of ``sizes``."""
    order = counts.argsort(descending=True)
    return [(n, float(counts[order[:n]].sum() / counts.sum()), float(torch.isin(tokens, order[:n]).float().mean()))
            for n in sizes]


def heldout_greedy(target) -> torch.Tensor:
    """The target's greedy continuations of the held-out prompts, concatenated."""
    return torch.tensor([token for ids in heldout_prompts(target) for token in target_greedy(target, ids, MAX_NEW_TOKENS)])


def main(argv: list[str] | None = None) -> int:
    from core.models.loading import load_model, resolve_preset

    parser = argparse.ArgumentParser(prog="python -m core.train.vocab_coverage", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="cache", help="drafter data folder, or \"cache\" (default)")
    parser.add_argument("--sizes", default="2048,4096,6144,8192,12288,16384")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    target = load_model(resolve_preset("gemma-270m").target, "cpu")
    _, data = load_stored_data(args.data, target)
    counts = torch.bincount(data.greedy.flatten(), minlength=target.vocab_size)
    print("| draft vocabulary | share of the data's greedy tokens | share of the held-out greedy tokens |")
    print("|---|---|---|")
    for n, train, held in coverage(counts, heldout_greedy(target), [int(s) for s in args.sizes.split(",")]):
        print(f"| {n:,} | {train:.3f} | {held:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
