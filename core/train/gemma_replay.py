"""EAGLE drafters of ``gemma-270m`` replayed on Gemma's text: what they fit, what carries over,
and what a decode sees.

    python -m core.train.gemma_replay [--engine] [--extra DIR ...] [--threads 2]

For ``eagle`` and ``eagle3`` next to Gemma (assets/gemma-270m), and any ``--extra`` folder of
either kind, greedy chains of depth 6 are replayed (``core.train.eagle.chain_hits``) on:

* ``train``: 64 of the Gemma greedy continuations the drafters were trained on;
* ``held-out``: the held-out check data of ``core.train.gemma_drafters``, from every position;
* ``decode anchors``: the same held-out text, counted only at the positions a greedy decode
  drafts from (``decode_anchors``): the start, then right after each step's last token;
* with ``--engine``, ``engine``: the engine itself decoding the held-out prompts greedily (the
  same text, since decoding is lossless) with a chain of 6 -- per-position acceptance of its steps.

Each line is the share accepted up to depth 1..6. Needs the cached drafter data (the first
``python -m core.train.gemma_drafters`` run builds it).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from core.train.eagle import DRAFTERS, EVAL_DEPTH, chain_hits, decode_anchors
from core.train.features import DrafterData, load_or_build
from core.train.gemma_drafters import HELDOUT_DATA, TRAIN_DATA


def greedy_sample(data: DrafterData, rows: int = 64) -> DrafterData:
    """``rows`` of the training data's greedy continuations, cut to the held-out length."""
    first = round(TRAIN_DATA.sequences * TRAIN_DATA.corpus_share)  # corpus windows come first, then greedy text
    return data.take(slice(first, first + rows), HELDOUT_DATA.seq_len)


def engine_acceptance(target, drafter_class, folder: Path, data: DrafterData) -> list[float]:
    """Per-position acceptance of the engine decoding ``data``'s prompts greedily (chain of 6)."""
    from core.drafters.base import DraftShape
    from core.train import heldout

    prompts = [row[: HELDOUT_DATA.prompt_len].tolist() for row in data.tokens]
    new_tokens = HELDOUT_DATA.seq_len - HELDOUT_DATA.prompt_len
    numbers = heldout.evaluate(target, lambda: drafter_class(DraftShape(1, EVAL_DEPTH), target=target,
                                                             weights=str(folder)), prompts, folder.name, new_tokens)
    return numbers.per_position


def main(argv: list[str] | None = None) -> int:
    from core.drafters.base import DraftShape
    from core.models.loading import drafter_home, load_model, resolve_preset
    from core.train.corpus import build_corpus

    parser = argparse.ArgumentParser(prog="python -m core.train.gemma_replay", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--extra", nargs="*", default=[], help="more eagle/eagle3 folders to replay")
    parser.add_argument("--engine", action="store_true", help="also decode the held-out prompts with the engine")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    target = load_model(resolve_preset("gemma-270m").target, "cpu")
    corpus = build_corpus()
    texts = {"train": greedy_sample(load_or_build(target, corpus, TRAIN_DATA, "train")),
             "held-out": load_or_build(target, corpus, HELDOUT_DATA, "heldout")}
    home = drafter_home(target.path)
    for folder in [home / "eagle", home / "eagle3", *map(Path, args.extra)]:
        kind = json.loads((folder / "config.json").read_text(encoding="utf-8"))["kind"]
        net = DRAFTERS[kind](DraftShape(1, EVAL_DEPTH), target=target, weights=str(folder)).net.float()
        for name, data in texts.items():
            hits = chain_hits(net, data, HELDOUT_DATA.prompt_len)
            lines = {name: hits.float().mean(dim=(0, 1))}
            if name == "held-out":
                lines["decode anchors"] = decode_anchors(hits)
                if args.engine:
                    lines["engine"] = engine_acceptance(target, DRAFTERS[kind], folder, data)
            for label, shares in lines.items():
                print(f"{folder.name:>8} ({kind}) {label:>14}: " + " ".join(f"{float(x):.3f}" for x in shares),
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
