"""Train the small ``draft`` model of ``gemma-270m``: a 2-layer Llama over 4,096 of Gemma's tokens.

    python -m core.train.gemma_draft [--threads 1] [--steps 400] [--distill-steps 600] [--data cache]

No smaller model with Gemma's tokenizer is to be had offline, and a small LM that kept Gemma's
262,144-row embedding would be mostly embedding (and as slow to draft with as its LM head). So
the draft works over a **reduced vocabulary**: the 4,096 tokens Gemma reads and writes most in
the training data (each mapped to its Gemma id in ``vocab_map.json``), plus one "other" id for
every token outside it. The engine maps ids in and scatters logits back out
(``core.drafters.vocab``); a token outside the reduced vocabulary is never proposed.

Training, in two phases:

1. language modelling on the public-domain corpus (core.train.corpus: Tang/Song poems, Austen,
   the KJV), tokenised with Gemma's tokenizer (labels outside the reduced vocabulary ignored);
2. distillation on Gemma's own continuations (the data of core.train.gemma_drafters): soft
   cross-entropy against Gemma's top-8 next-token law, mixed with phase 1's loss. With ``--data
   cache`` (or ``--data FOLDER``) on the drafter data of ``python -m core.train.drafter_data``
   instead: a million and more positions with Gemma's top-8 labels (only its tokens and labels
   are read; the vocabulary is then counted on it too).

Written to ``assets/gemma-270m/draft`` (weights in bfloat16, ``vocab_map.json``, a record of
the options and held-out top-1 agreement with Gemma's greedy choice in ``training.json``).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict

import torch
from torch.nn import functional as F
from transformers import LlamaConfig, LlamaForCausalLM

from core.drafters.vocab import draft_rows
from core.common.errors import UserError
from core.common.files import save_pretrained
from core.models.loading import VOCAB_MAP_FILE, vocab_digest
from core.train.features import DrafterData, draftable_cross_entropy, load_or_build
from core.train.gemma_drafters import HELDOUT_DATA, TRAIN_DATA
from core.train.loop import TrainConfig, count_parameters, seeded, short_warmup, train
from core.train.output import add_output_arguments, output_folder
from core.train.streams import random_batches, source_weights, token_streams

VOCAB = 4096
OTHER = VOCAB  # the draft id every token outside the reduced vocabulary is read as


def choose_vocabulary(streams: dict[str, torch.Tensor], greedy: torch.Tensor, vocab_size: int, special: list[int]) -> torch.Tensor:
    """Sorted target ids: the specials, then the most frequent tokens (Gemma's own choices weigh 10x)."""
    counts = torch.zeros(vocab_size, dtype=torch.float64)
    for ids in streams.values():
        counts += torch.bincount(ids, minlength=vocab_size).double()
    counts += 10 * torch.bincount(greedy.flatten(), minlength=vocab_size).double()
    counts[special] = float("inf")
    return torch.sort(torch.topk(counts, VOCAB).indices).values


def new_model(args, bos: int, eos: int) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=VOCAB + 1, hidden_size=args.hidden, intermediate_size=args.hidden * 3, num_hidden_layers=args.layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024, tie_word_embeddings=True,
        bos_token_id=bos, eos_token_id=eos, pad_token_id=None,
    )
    return LlamaForCausalLM(config)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m core.train.gemma_draft", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_output_arguments(parser, "the draft LM (the shipped one: assets/gemma-270m/draft)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=400, help="phase 1 (corpus) steps")
    parser.add_argument("--distill-steps", type=int, default=600, help="phase 2 (Gemma's continuations) steps")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--data", help="drafter data folder from core.train.drafter_data, or \"cache\" for this "
                        "target's under the user's cache (default: the small built-in set)")
    return parser.parse_args(argv)


def corpus_loss(model, batch: torch.Tensor, other: int) -> torch.Tensor:
    """Phase 1: next-token loss on ``batch`` [B, T+1] of draft ids; labels outside the vocabulary (``other``) ignored."""
    labels = batch[:, 1:].masked_fill(batch[:, 1:] == other, -100)
    logits = model(input_ids=batch[:, :-1]).logits
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100)


def distill_loss(model, data: DrafterData, rows: torch.Tensor, to_draft: torch.Tensor,
                 draft_index: torch.Tensor) -> torch.Tensor:
    """Phase 2: soft cross-entropy against Gemma's top-k law on its continuations ``rows`` of ``data``."""
    logits = model(input_ids=to_draft[data.tokens[rows]]).logits.flatten(0, 1)
    ids, probs = data.top_ids[rows].flatten(0, 1), data.top_probs[rows].flatten(0, 1)
    return draftable_cross_entropy(logits, ids, probs, draft_index)


def train_draft(model, batches: Iterator[torch.Tensor], data: DrafterData, target_ids: torch.Tensor, vocab_size: int,
                args, generator: torch.Generator) -> float:
    """Phase 1 for ``args.steps`` steps, then phase 2 mixed with half of phase 1's loss; returns seconds."""
    to_draft = draft_rows(target_ids, vocab_size, outside=OTHER)
    draft_index = draft_rows(target_ids, vocab_size)
    total = args.steps + args.distill_steps
    config = TrainConfig(steps=total, seq_len=args.seq_len, batch_size=args.batch, lr=args.lr,
                         warmup_steps=short_warmup(total), weight_decay=0.1, bf16_autocast=False)

    def loss_of(step: int) -> torch.Tensor:
        loss = corpus_loss(model, next(batches), OTHER)
        if step < args.steps:
            return loss
        rows = torch.randint(len(data), (args.batch,), generator=generator)
        return 0.5 * loss + distill_loss(model, data, rows, to_draft, draft_index)

    return train(model, loss_of, config, "draft")


@torch.inference_mode()
def heldout_agreement(model, heldout: DrafterData, target_ids: torch.Tensor, to_draft: torch.Tensor) -> float:
    """Top-1 agreement with Gemma's greedy token on held-out continuations."""
    logits = model(input_ids=to_draft[heldout.tokens]).logits[:, HELDOUT_DATA.prompt_len - 1:]
    guess = target_ids[logits[..., :VOCAB].argmax(-1)]
    return float((guess == heldout.greedy[:, HELDOUT_DATA.prompt_len - 1:]).float().mean())


def save(model, args, tokenizer, target_ids: torch.Tensor, timing: dict, checks: dict) -> None:
    """Weights in bfloat16, ``vocab_map.json`` and ``training.json`` (options, ``timing``, data, held-out
    ``checks``) into ``args.out``."""
    args.out.mkdir(parents=True, exist_ok=True)
    save_pretrained(model.to(torch.bfloat16), args.out)
    (args.out / VOCAB_MAP_FILE).write_text(json.dumps({
        "target_ids": target_ids.tolist(), "other_id": OTHER,
        "tokens_sha256": vocab_digest(tokenizer, target_ids.tolist()),
    }) + "\n", encoding="utf-8")
    (args.out / "training.json").write_text(json.dumps({
        "command": "python -m core.train.gemma_draft " + " ".join(sys.argv[1:]),
        "options": {k: v for k, v in vars(args).items() if k not in ("out", "data")},
        **timing, "threads": torch.get_num_threads(), "parameters": count_parameters(model),
        "data": {"corpus": "core.train.corpus training split",
                 "gemma_train": asdict(TRAIN_DATA) if args.data is None else {"folder_key": args.data},
                 "gemma_heldout": asdict(HELDOUT_DATA)},
        **checks,
    }, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    from core.models.loading import load_model, resolve_preset
    from core.train.corpus import build_corpus

    args = parse_args(argv)
    try:
        args.out = output_folder(args.out, ("gemma-270m", "draft"), args.overwrite, "draft")
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    generator = seeded(args.seed)
    start = time.perf_counter()
    target = load_model(resolve_preset("gemma-270m").target, "cpu")
    tokenizer = target.tokenizer
    corpus = build_corpus()
    streams = token_streams(corpus.train, tokenizer)
    if args.data is None:
        data = load_or_build(target, corpus, TRAIN_DATA, "train")
    else:
        from core.train.drafter_data import load_stored_data
        args.data, data = load_stored_data(args.data, target)
    heldout = load_or_build(target, corpus, HELDOUT_DATA, "heldout")

    target_ids = choose_vocabulary(streams, data.greedy, target.vocab_size,
                                   [tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id])
    to_draft = draft_rows(target_ids, target.vocab_size, outside=OTHER)
    covered = float((to_draft[heldout.greedy] != OTHER).float().mean())
    print(f"[draft] reduced vocabulary covers {covered:.1%} of Gemma's held-out greedy tokens", file=sys.stderr)
    model = new_model(args, int(to_draft[tokenizer.bos_token_id]), int(to_draft[tokenizer.eos_token_id]))
    print(f"[draft] {count_parameters(model):,} parameters", file=sys.stderr, flush=True)
    mapped = {name: to_draft[ids] for name, ids in streams.items()}
    batches = random_batches(mapped, source_weights(streams, TRAIN_DATA.zh_share), args.batch, args.seq_len, generator)
    seconds = train_draft(model, batches, data, target_ids, target.vocab_size, args, generator)
    agreement = heldout_agreement(model, heldout, target_ids, to_draft)
    print(f"[draft] held-out top-1 agreement with Gemma's greedy token {agreement:.3f}", file=sys.stderr)
    save(model, args, tokenizer, target_ids,
         {"seconds": round(seconds, 1), "total_seconds": round(time.perf_counter() - start, 1)},
         {"heldout_greedy_coverage": round(covered, 4), "heldout_top1_agreement": round(agreement, 4)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
