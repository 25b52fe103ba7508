"""Train Medusa heads for a target: ``python -m core train medusa --preset tiny [--seed 0] ...``

Head i, read at the target's last hidden state of position t, learns the target's own law for
token t+2+i (self-distillation on the target's top-k next-token probabilities, loss weight
0.8^i as in Medusa). Only the heads train; the target, and its LM head when shared, stay frozen.
Since a head sees one position at a time, batches are random positions of the training data.

Afterwards each head's top-r accuracy against the target's greedy token is measured on held-out
greedy text, and the sparse tree that maximises the expected accepted length under those
accuracies (Medusa's way of choosing ``medusa_choices``) is stored as the "tuned" tree.
Written: ``OUT/config.json`` + ``OUT/model.safetensors`` (default OUT: next to the target, ``medusa``).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

import torch

from core.drafters.base import DraftShape
from core.drafters.medusa import MedusaConfig, MedusaDrafter, MedusaHeads
from core.drafters.vocab import draft_rows
from core.drafters.weights import save_folder
from core.models.fingerprint import target_fingerprint
from core.train import heldout
from core.train.eagle import draft_vocabulary
from core.train.features import (DataSettings, DrafterData, add_common_arguments, draftable_cross_entropy, prepare,
                                 training_record)
from core.train.loop import TrainConfig, seeded, short_warmup, train

RANKS = 8  # ranks per head measured for the tuned tree


def new_heads(target_model, num_heads: int, own_lm_head: bool = False,
              draft_vocab: torch.Tensor | None = None) -> MedusaHeads:
    """Fresh heads for ``target_model`` (each starts as the target's own LM head, cut to ``draft_vocab``)."""
    head = target_model.get_output_embeddings().weight
    size = None if draft_vocab is None else len(draft_vocab)
    return MedusaHeads(MedusaConfig(num_heads, head.shape[1], own_lm_head, size), head, draft_vocab)


def train_config(steps: int, batch: int, lr: float) -> TrainConfig:
    """Medusa's optimisation: AdamW with torch's default betas, no gradient clipping, no weight decay."""
    return TrainConfig(steps=steps, batch_size=batch, lr=lr, warmup_steps=short_warmup(steps), weight_decay=0.0,
                       bf16_autocast=False, betas=(0.9, 0.999), clip_norm=None)


def heads_loss(heads: MedusaHeads, data: DrafterData, rows: torch.Tensor, cols: torch.Tensor,
               index: torch.Tensor | None) -> torch.Tensor:
    """Sum over heads i of 0.8^i x the soft cross-entropy of head i, read at (rows, cols), against the
    target's top-k law for the token i+2 places later; with a draft vocabulary (``index``, see
    :func:`draft_rows`), tokens outside it get no weight and positions whose greedy token is outside are skipped."""
    logits = heads(data.hidden[rows, cols, -1].float())  # [B, K, draft vocab]
    return sum(
        0.8**i * draftable_cross_entropy(logits[:, i], data.top_ids[rows, cols + 1 + i],
                                         data.top_probs[rows, cols + 1 + i], index)
        for i in range(heads.config.num_heads)
    )


def train_heads(heads: MedusaHeads, data: DrafterData, config: TrainConfig, generator: torch.Generator) -> float:
    """Train in place on random positions of ``data``; returns seconds. Progress goes to stderr."""
    n, length = data.tokens.shape
    index = draft_rows(heads.draft_vocab, heads.vocab_size)

    def loss_of(step: int) -> torch.Tensor:
        rows = torch.randint(n, (config.batch_size,), generator=generator)
        cols = torch.randint(length - heads.config.num_heads, (config.batch_size,), generator=generator)
        return heads_loss(heads, data, rows, cols, index)

    return train(heads, loss_of, config, "medusa")


@torch.inference_mode()
def head_accuracy(heads: MedusaHeads, data: DrafterData, prompt_len: int) -> torch.Tensor:
    """[K, RANKS]: how often head i's rank-r token is the target's greedy token, on greedy text.

    Positions start after the corpus prompt, where every later token is the target's own greedy choice.
    """
    k = heads.config.num_heads
    cols = torch.arange(prompt_len, data.tokens.shape[1] - k)
    ranked = torch.topk(heads(data.hidden[:, cols, -1].float()), RANKS, dim=-1).indices  # [N, C, K, R]
    if heads.draft_vocab is not None:
        ranked = heads.draft_vocab[ranked]  # draft vocabulary rows -> target ids
    truth = torch.stack([data.greedy[:, cols + 1 + i] for i in range(k)], dim=-1)  # [N, C, K]
    return (ranked == truth[..., None]).float().mean(dim=(0, 1))


def sparse_tree(accuracy: torch.Tensor, nodes: int) -> list[list[int]]:
    """The ``nodes`` paths with the highest product of per-depth accuracies, grown from the root.

    accuracy: [K, R]. Path (r1, ..., rd) is worth prod_i accuracy[i, r_i] (heads taken as
    independent); every path's parent is chosen first, so the result is a valid tree.
    """
    chosen: list[tuple[int, ...]] = []
    worth = {(): 1.0}
    frontier = {(r,): float(accuracy[0, r]) for r in range(accuracy.shape[1])}
    while frontier and len(chosen) < nodes:
        path = max(frontier, key=lambda p: (frontier[p], [-r for r in p]))
        worth[path] = frontier.pop(path)
        chosen.append(path)
        if len(path) < accuracy.shape[0]:
            for r in range(accuracy.shape[1]):
                frontier[path + (r,)] = worth[path] * float(accuracy[len(path), r])
    return [list(p) for p in sorted(chosen, key=lambda p: (len(p), p))]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``python -m core train medusa``."""
    add_common_arguments(parser, steps=600, batch=256, lr=3e-3)
    parser.add_argument("--heads", type=int, default=4, help="number of heads = deepest draft (default 4)")
    parser.add_argument("--own-lm-head", action="store_true",
                        help="give each head its own LM head (default: share the target's)")
    parser.add_argument("--tree-nodes", type=int, default=24, help="nodes of the tuned sparse tree (default 24)")
    parser.add_argument("--draft-vocab", default="all",
                        help="LM head rows the heads keep: all (default), N (the N tokens the target chooses most "
                             "in the training data), or auto (enough to cover 99.9%% of its greedy choices)")


def run(args: argparse.Namespace) -> int:
    """Train, tune the tree, save, and report held-out numbers; returns an exit code."""
    setup = prepare(args, "medusa")
    target = setup.target
    generator = seeded(args.seed)
    draft_vocab = draft_vocabulary(setup.train, args.draft_vocab, target.vocab_size)
    heads = new_heads(target.model, args.heads, args.own_lm_head, draft_vocab)
    seconds = train_heads(heads, setup.train, train_config(args.steps, args.batch, args.lr), generator)
    accuracy = head_accuracy(heads, setup.heldout, DataSettings.prompt_len)
    tree = sparse_tree(accuracy, args.tree_nodes)
    print(f"[medusa] held-out top-1 accuracy per head {[round(float(a), 3) for a in accuracy[:, 0]]}", file=sys.stderr)
    saved = {
        "kind": "medusa",
        "heads": asdict(heads.config),
        "tree": tree,
        "target": target_fingerprint(target.model),
        "training": training_record(args, seconds),
        "heldout_accuracy": [[round(float(a), 4) for a in row] for row in accuracy],
    }
    save_folder(setup.out, saved, heads)
    heldout.record_in_folder(target, "medusa", saved, setup.out, heads, [
        (f"medusa k={args.heads}", lambda: MedusaDrafter(DraftShape(1, args.heads), target, str(setup.out))),
        ("medusa tuned tree", lambda: MedusaDrafter(DraftShape(1, args.heads), target, str(setup.out), "tuned")),
    ])
    return 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="python -m core.train.medusa", description=__doc__)
    add_arguments(_parser)
    sys.exit(run(_parser.parse_args()))
