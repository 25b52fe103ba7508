"""More sizes of the tiny family's independent draft, for the draft-size trade-off.

    python -m core train draft-sizes --preset tiny [--sizes draft-xs,draft-l] [--steps 300] [--seed 0] [--out OUT]

A draft too small guesses badly; one too large eats the saving. Each size here is trained
with the tiny trainer's own functions and recipe -- same tokenizer, corpus mix and
distillation from the target as the shipped ``draft`` -- only the shape and the number of
steps differ. Each is written as a transformers folder into ``OUT`` (``draft-xs``, ``draft-l``, ...),
with its parameters, held-out loss and training time in ``draft_sizes.json`` beside them. ``OUT``
defaults to a folder under the lab cache; the shipped ``assets/tiny`` takes them only with
``--out assets/tiny --overwrite`` (core.train.output).
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from core.common.files import save_pretrained
from core.models.loading import resolve_preset
from core.train.corpus import build_corpus
from core.train.loop import TrainConfig
from core.train.output import add_output_arguments, output_folder
from core.train.streams import token_streams
from core.train.tiny import greedy_agreement, heldout_prompts, train_member, update_json

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
SIZES = {
    "draft-xs": dict(hidden_size=48, intermediate_size=128, num_hidden_layers=1,
                     num_attention_heads=2, num_key_value_heads=2),
    "draft-l": dict(hidden_size=192, intermediate_size=512, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=4),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``python -m core train draft-sizes``."""
    parser.add_argument("--preset", default="tiny", help="preset whose target the drafts distil (default tiny)")
    parser.add_argument("--sizes", default=",".join(SIZES), help=f"which sizes (default {','.join(SIZES)})")
    parser.add_argument("--steps", type=int, default=300, help="optimiser steps per draft (default 300)")
    parser.add_argument("--seed", type=int, default=0, help="seed for init and data order (default 0)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="where the corpus text is cached")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    add_output_arguments(parser, "one folder per size")


def run(args: argparse.Namespace) -> int:
    """Train each requested size into ``<out>/<size>``; returns an exit code."""
    out = output_folder(args.out, (args.preset, "draft-sizes"), args.overwrite, "draft-sizes")
    torch.set_num_threads(args.threads)
    target_path = Path(resolve_preset(args.preset).target)
    tokenizer = AutoTokenizer.from_pretrained(target_path)
    target = AutoModelForCausalLM.from_pretrained(target_path).eval()
    corpus = build_corpus(args.cache_dir)
    streams = token_streams(corpus.train, tokenizer)
    heldout_streams = token_streams(corpus.heldout, tokenizer)
    prompts = heldout_prompts(corpus.heldout, tokenizer)
    for name in args.sizes.split(","):
        config = TrainConfig(steps=args.steps, distill_weight=0.5)
        model, stats = train_member(name, SIZES[name], tokenizer, streams, heldout_streams, config, args.seed, target)
        stats["greedy_top1_agreement"] = round(greedy_agreement(target, model, prompts), 4)
        save_pretrained(model, out / name)
        for file in TOKENIZER_FILES:  # byte for byte the target's tokenizer
            shutil.copyfile(target_path / file, out / name / file)
        print(f"[{name}] {stats}", file=sys.stderr)
        update_json(out / "draft_sizes.json", {name: stats})
    return 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="python -m core.train.draft_sizes", description=__doc__)
    add_arguments(_parser)
    sys.exit(run(_parser.parse_args()))
