"""Train the small ``draft`` model of ``gemma-270m``: a 2-layer Llama over 4,096 of Gemma's tokens.

    python -m core.train.gemma_draft [--threads 1] [--steps 400] [--distill-steps 600]

No smaller model with Gemma's tokenizer is to be had offline, and a small LM that kept Gemma's
262,144-row embedding would be mostly embedding (and as slow to draft with as its LM head). So
the draft works over a **reduced vocabulary**: the 4,096 tokens Gemma reads and writes most in
the training data (each mapped to its Gemma id in ``vocab_map.json``), plus one "other" id for
every token outside it. The engine maps ids in and scatters logits back out
(``core.drafters.draft_model``); a token outside the reduced vocabulary is never proposed.

Training, in two phases:

1. language modelling on the public-domain corpus (core.train.corpus: Tang/Song poems, Austen,
   the KJV), tokenised with Gemma's tokenizer (labels outside the reduced vocabulary ignored);
2. distillation on Gemma's own continuations (the data of core.train.gemma_drafters): soft
   cross-entropy against Gemma's top-8 next-token law, mixed with phase 1's loss.

Written to ``assets/gemma-270m/draft`` (weights in bfloat16, ``vocab_map.json``, a record of
the options and held-out top-1 agreement with Gemma's greedy choice in ``training.json``).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch
from torch.nn import functional as F
from transformers import LlamaConfig, LlamaForCausalLM

from ..models import VOCAB_MAP_FILE, vocab_digest
from .features import load_or_build, soft_cross_entropy
from .gemma_drafters import HELDOUT_DATA, TRAIN_DATA
from .tiny import TrainConfig, lr_factor, random_batches, source_weights, token_streams

VOCAB = 4096


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


def main(argv: list[str] | None = None) -> int:
    from ..models import PRESETS, load_model, resolve_preset
    from .corpus import build_corpus

    parser = argparse.ArgumentParser(prog="python -m core.train.gemma_draft", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(PRESETS["gemma-270m"].drafters) / "draft")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=400, help="phase 1 (corpus) steps")
    parser.add_argument("--distill-steps", type=int, default=600, help="phase 2 (Gemma's continuations) steps")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    start = time.perf_counter()

    target = load_model(resolve_preset("gemma-270m").target, "cpu")
    tokenizer = target.tokenizer
    corpus = build_corpus()
    streams = token_streams(corpus.train, tokenizer)
    data = load_or_build(target, corpus, TRAIN_DATA, "train")
    heldout = load_or_build(target, corpus, HELDOUT_DATA, "heldout")

    target_ids = choose_vocabulary(streams, data.greedy, target.vocab_size,
                                   [tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id])
    other = VOCAB
    to_draft = torch.full((target.vocab_size,), other, dtype=torch.long)
    to_draft[target_ids] = torch.arange(VOCAB)
    covered = float((to_draft[heldout.greedy] != other).float().mean())
    print(f"[draft] reduced vocabulary covers {covered:.1%} of Gemma's held-out greedy tokens", file=sys.stderr)
    mapped = {name: to_draft[ids] for name, ids in streams.items()}
    model = new_model(args, int(to_draft[tokenizer.bos_token_id]), int(to_draft[tokenizer.eos_token_id]))
    print(f"[draft] {sum(p.numel() for p in model.parameters()):,} parameters", file=sys.stderr, flush=True)

    total = args.steps + args.distill_steps
    config = TrainConfig(steps=total, batch_size=args.batch, lr=args.lr, warmup_steps=min(50, total // 10),
                         weight_decay=0.1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, betas=(0.9, 0.95), weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(step, config))
    generator = torch.Generator().manual_seed(args.seed)
    batches = random_batches(mapped, source_weights(streams, TRAIN_DATA.zh_share), args.batch, args.seq_len, generator)
    model.train()
    train_start = time.perf_counter()
    for step in range(total):
        batch = next(batches)
        labels = batch[:, 1:].masked_fill(batch[:, 1:] == other, -100)
        logits = model(input_ids=batch[:, :-1]).logits
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100)
        if step >= args.steps:  # phase 2: Gemma's own law on its continuations
            rows = torch.randint(len(data), (args.batch,), generator=generator)
            logits = model(input_ids=to_draft[data.tokens[rows]]).logits.flatten(0, 1)
            ids, probs = data.top_ids[rows].flatten(0, 1), data.top_probs[rows].flatten(0, 1)
            probs = probs * (to_draft[ids] != other)
            keep = probs[:, 0] > 0  # the greedy token must be draftable
            loss = 0.5 * loss + soft_cross_entropy(logits[keep], to_draft[ids][keep], probs[keep])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % 25 == 0 or step == total - 1:
            elapsed = time.perf_counter() - train_start
            print(f"[draft] step {step + 1}/{total} loss {loss.item():.3f} elapsed {elapsed:.0f} s "
                  f"ETA {elapsed / (step + 1) * (total - step - 1):.0f} s", file=sys.stderr, flush=True)
    seconds = time.perf_counter() - train_start
    model.eval()

    with torch.inference_mode():  # top-1 agreement with Gemma's greedy token on held-out continuations
        logits = model(input_ids=to_draft[heldout.tokens]).logits[:, HELDOUT_DATA.prompt_len - 1:]
        guess = target_ids[logits[..., :VOCAB].argmax(-1)]
        agreement = float((guess == heldout.greedy[:, HELDOUT_DATA.prompt_len - 1:]).float().mean())
    print(f"[draft] held-out top-1 agreement with Gemma's greedy token {agreement:.3f}", file=sys.stderr)

    args.out.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(args.out)
    (args.out / VOCAB_MAP_FILE).write_text(json.dumps({
        "target_ids": target_ids.tolist(), "other_id": other,
        "tokens_sha256": vocab_digest(tokenizer, target_ids.tolist()),
    }) + "\n", encoding="utf-8")
    (args.out / "training.json").write_text(json.dumps({
        "command": "python -m core.train.gemma_draft " + " ".join(sys.argv[1:]),
        "options": {k: v for k, v in vars(args).items() if k != "out"},
        "seconds": round(seconds, 1), "total_seconds": round(time.perf_counter() - start, 1),
        "threads": torch.get_num_threads(), "parameters": sum(p.numel() for p in model.parameters()),
        "data": {"corpus": "core.train.corpus training split", "gemma_train": asdict(TRAIN_DATA),
                 "gemma_heldout": asdict(HELDOUT_DATA)},
        "heldout_greedy_coverage": round(covered, 4), "heldout_top1_agreement": round(agreement, 4),
    }, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
