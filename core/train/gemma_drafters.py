"""Train the learned drafters shipped for ``gemma-270m`` (assets/gemma-270m), on a small CPU budget.

    python -m core.train.gemma_drafters [--threads 1] [--only eagle3,eagle,medusa] [--data cache]

``--data cache`` trains on the drafter data that ``python -m core.train.drafter_data --preset
gemma-270m`` made under the user's cache (or ``--data FOLDER``): a million and more positions with
the target's own top-8 labels, instead of the small built-in set described below.

The same trainers as ``python -m core train eagle3|eagle|medusa`` (core.train.eagle,
core.train.medusa), with settings sized for Gemma 3 270M on 2 CPU cores:

* data: the target's greedy and sampled continuations of prompts cut from the public-domain
  corpus (core.train.corpus), plus plain corpus windows -- fewer and shorter sequences than for
  tiny, since every Gemma forward pays for a 262k-row LM head;
* a reduced draft vocabulary (``DRAFT_VOCAB`` target ids: the tokens Gemma chooses most often
  in that data), so drafting does not pay for the full head either;
* a drafter MLP narrower than Gemma's (``INTERMEDIATE``), weights stored in bfloat16 to fit
  the repository's asset budget.

No engine run here (that is ``python -m core.train.heldout --preset gemma-270m``): the held-out
checks are the cheap replayed ones (EAGLE chain accuracy, Medusa head accuracy), stored in each
drafter's ``config.json`` with the options and the training time.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import asdict
from functools import partial
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from core.drafters.eagle import Eagle3Drafter
from core.drafters.medusa import MedusaDrafter
from core.drafters.peagle import PEagleDrafter
from core.drafters.weights import save_folder
from core.common.errors import UserError
from core.common.files import write_atomic
from core.models.fingerprint import target_fingerprint
from core.train import eagle, medusa
from core.train.drafter_data import load_stored_data
from core.train.eagle import start_from
from core.train.features import DataSettings, DrafterData, load_or_build
from core.train.loop import count_parameters, seeded
from core.train.output import add_output_arguments, output_folder

# Half the windows and prompts Chinese (the corpus default is 10%): the 我爱中国 lesson and half the
# held-out prompts are Chinese, and Gemma's Chinese needs its own share of a small budget.
TRAIN_DATA = DataSettings(sequences=768, seq_len=64, prompt_len=16, corpus_share=0.25, sampled_share=0.25,
                          zh_share=0.5)
HELDOUT_DATA = DataSettings(sequences=32, seq_len=48, prompt_len=16, corpus_share=0.0, sampled_share=0.0,
                            zh_share=0.5)
DRAFT_VOCAB = 4096
EAGLE_LR = 2e-3  # EAGLE's peak learning rate
INTERMEDIATE = 1024


def to_bfloat16(folder: Path) -> None:
    """Rewrite ``folder/model.safetensors`` with floating-point tensors in bfloat16 (halves the size;
    the drafters cast to the target's dtype when they load)."""
    path = folder / "model.safetensors"
    state = load_file(str(path))
    state = {k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in state.items()}
    write_atomic(path, lambda tmp: save_file(state, str(tmp)))


def subset(data: DrafterData, fraction: float, seed: int) -> DrafterData:
    """A seeded random ``fraction`` of the sequences of ``data``."""
    keep = torch.randperm(len(data), generator=torch.Generator().manual_seed(seed))[: max(1, round(len(data) * fraction))]
    print(f"[data] training on {len(keep)} of {len(data)} sequences", file=sys.stderr, flush=True)
    return data.take(keep)


def record(args, name: str, options: dict, seconds: float, data: DrafterData) -> dict:
    train = asdict(TRAIN_DATA) if args.data is None else {"folder_key": args.data, "positions": data.tokens.numel()}
    return {
        "command": f"python -m core.train.{Path(sys.argv[0]).stem} "  # or core.train.scaling
                   + " ".join(map(home_relative, sys.argv[1:])),
        "drafter": name, "options": options, "seconds": round(seconds, 1), "threads": torch.get_num_threads(),
        "data": {"train": train, "heldout": asdict(HELDOUT_DATA), "train_fraction": args.data_fraction},
        "stored_dtype": "bfloat16",
    }


def home_relative(path: Path | str) -> str:
    """``path`` as recorded in a model card: under the home folder as ``~/...`` (e.g. a run of
    ``core.train.scaling`` in the user's cache), so no card names the machine it was trained on;
    anything else as given. A comma-separated list (``--data a,b``) is read path by path."""
    home = str(Path.home())

    def one(text: str) -> str:
        return "~" + text[len(home):] if text == home or text.startswith(home + os.sep) else text
    return ",".join(map(one, str(path).split(",")))


def init_folder(init: Path, kind: str) -> Path:
    """Where ``--init FOLDER`` starts ``kind`` from: ``FOLDER/kind``, or for a P-EAGLE without one there the
    EAGLE-3 in ``FOLDER/eagle3`` (the same network less the placeholders)."""
    if kind == PEagleDrafter.name and not (init / kind / "model.safetensors").exists():
        return init / Eagle3Drafter.name
    return init / kind


def train_eagle(kind: str, target, data, heldout, out: Path, args, checkpoint: Path | None = None) -> float:
    """Train ``kind`` on ``data`` and save it in ``out / kind``; ``checkpoint``: a file to resume
    from and save progress to (``core.train.loop.train``). Returns the training's seconds, every
    sitting of a resumed run counted."""
    num_layers = target.model.config.get_text_config().num_hidden_layers
    recipe = eagle.DRAFTERS[kind].recipe
    layers = recipe.layers(num_layers)
    generator = seeded(args.seed)
    draft_vocab = eagle.draft_vocabulary(data, str(args.draft_vocab), target.vocab_size)
    net = eagle.new_net(target.model, kind, layers, INTERMEDIATE, draft_vocab)
    if args.init is not None:
        start_from(net, init_folder(args.init, kind), target)
    # EAGLE-1 trains without training-time test; P-EAGLE on every depth it drafts
    ttt = recipe.ttt_steps if recipe.parallel_tokens else min(args.ttt_steps, recipe.ttt_steps)
    feature_weight = recipe.feature_weight
    steps = args.eagle3_steps if recipe.fused_layers else args.eagle_steps
    print(f"[{kind}] {count_parameters(net):,} parameters, layers {layers}, draft vocabulary "
          f"{args.draft_vocab}, TTT steps {ttt}, {steps} steps", file=sys.stderr, flush=True)
    config = eagle.train_config(steps, args.batch, args.lr)
    seconds = eagle.train_net(net, data, config, ttt, feature_weight, generator, kind, checkpoint, args.depth_decay)
    chain = eagle.chain_accuracy(net, heldout, HELDOUT_DATA.prompt_len)
    print(f"[{kind}] held-out chain acceptance by depth {chain['accepted']}", file=sys.stderr, flush=True)
    options = {"layers": list(layers), "ttt_steps": ttt, "feature_weight": feature_weight, "steps": steps,
               "batch": args.batch, "lr": args.lr, "depth_decay": args.depth_decay, "draft_vocab": args.draft_vocab,
               "intermediate_size": INTERMEDIATE,
               "seed": args.seed, "init": None if args.init is None else home_relative(init_folder(args.init, kind))}
    saved = {"kind": kind, "net": asdict(net.config), "target": target_fingerprint(target.model),
             "training": record(args, kind, options, seconds, data), "heldout_chain": chain}
    save_folder(out / kind, saved, net)
    to_bfloat16(out / kind)
    return seconds


def train_medusa(target, data, heldout, out: Path, args) -> None:
    generator = seeded(args.seed)
    draft_vocab = eagle.draft_vocabulary(data, str(DRAFT_VOCAB), target.vocab_size)
    heads = medusa.new_heads(target.model, args.heads, False, draft_vocab)
    seconds = medusa.train_heads(heads, data, medusa.train_config(args.medusa_steps, 256, 3e-3), generator)
    accuracy = medusa.head_accuracy(heads, heldout, HELDOUT_DATA.prompt_len)
    tree = medusa.sparse_tree(accuracy, 24)
    print(f"[medusa] held-out top-1 accuracy per head {[round(float(a), 3) for a in accuracy[:, 0]]}",
          file=sys.stderr, flush=True)
    options = {"heads": args.heads, "steps": args.medusa_steps, "batch": 256, "lr": 3e-3, "draft_vocab": DRAFT_VOCAB,
               "seed": args.seed, "tree_nodes": 24}
    saved = {"kind": MedusaDrafter.name, "heads": asdict(heads.config), "tree": tree, "target": target_fingerprint(target.model),
             "training": record(args, MedusaDrafter.name, options, seconds, data),
             "heldout_accuracy": [[round(float(a), 4) for a in row] for row in accuracy]}
    save_folder(out / MedusaDrafter.name, saved, heads)
    to_bfloat16(out / MedusaDrafter.name)


def main(argv: list[str] | None = None) -> int:
    from core.models.loading import load_model, resolve_preset
    from core.train.corpus import build_corpus

    parser = argparse.ArgumentParser(prog="python -m core.train.gemma_drafters", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="eagle3,eagle,medusa",
                        help="drafters to train, comma-separated (empty: only build the cached data)")
    add_output_arguments(parser, "one folder per drafter (the shipped ones: assets/gemma-270m)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=8, help="EAGLE batch (sequences)")
    parser.add_argument("--lr", type=float, default=EAGLE_LR, help="EAGLE peak learning rate")
    parser.add_argument("--ttt-steps", type=int, default=3, help="eagle3 training-time test unroll steps")
    parser.add_argument("--depth-decay", type=float, default=1.0,
                        help="weight unroll step j by DECAY**(j-1) (default 1: every depth alike)")
    parser.add_argument("--draft-vocab", default=str(DRAFT_VOCAB),
                        help=f"EAGLE's draft vocabulary: N most chosen tokens, auto or all (default {DRAFT_VOCAB})")
    parser.add_argument("--init", type=Path, help="start EAGLE training from the drafters in this folder")
    parser.add_argument("--eagle3-steps", type=int, default=1200)
    parser.add_argument("--eagle-steps", type=int, default=1200)
    parser.add_argument("--medusa-steps", type=int, default=600)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--data", help="drafter data folder from core.train.drafter_data, or \"cache\" for this "
                                       "target's under the user's cache (default: the small built-in set)")
    parser.add_argument("--data-fraction", type=float, default=1.0,
                        help="train on this seeded random share of the training sequences (a data-scaling ablation)")
    args = parser.parse_args(argv)
    if not 0 < args.data_fraction <= 1:
        parser.error("--data-fraction must be in (0, 1]")
    try:
        args.out = output_folder(args.out, ("gemma-270m",), args.overwrite, "gemma")
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    target = load_model(resolve_preset("gemma-270m").target, "cpu")
    corpus = build_corpus()
    heldout = load_or_build(target, corpus, HELDOUT_DATA, "heldout")
    if args.data is None:
        data = load_or_build(target, corpus, TRAIN_DATA, "train")
    else:
        args.data, data = load_stored_data(args.data, target)
    if args.data_fraction < 1:
        data = subset(data, args.data_fraction, args.seed)
    trainers = {**{name: partial(train_eagle, name) for name in eagle.DRAFTERS}, MedusaDrafter.name: train_medusa}
    for name in filter(None, args.only.split(",")):
        if name not in trainers:
            parser.error(f"unknown drafter {name!r}")
        trainers[name](target, data, heldout, args.out, args)
    print(f"[gemma] done in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
