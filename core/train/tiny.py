"""Train the embedded ``tiny`` family: one BPE tokenizer, a Llama target and a Llama draft.

    python -m core train tiny [--seed 0] [--steps N] [--out OUT] [--overwrite] [--which all]

``--which target`` trains the tokenizer and the target; ``--which draft`` trains the draft
against an already trained target in ``OUT/target`` (it reuses that tokenizer); ``all``
does both. Each model folder is a plain transformers folder (``from_pretrained`` works
offline). Held-out loss, perplexity, timings, greedy draft/target agreement and two
sample continuations are written to ``OUT/train_stats.json``. ``OUT`` defaults to a folder under the lab
cache; the shipped ``assets/tiny`` is replaced only with ``--out assets/tiny --overwrite`` (core.train.output).

Everything is reproducible from ``--seed``: weights are initialised after
``torch.manual_seed`` and batches are drawn from a ``torch.Generator`` seeded alike.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (AutoModelForCausalLM, AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM,
                          PreTrainedTokenizerFast)

from core.common.files import save_pretrained
from core.train.corpus import SOURCES, Corpus, build_corpus
from core.train.loop import TrainConfig, count_parameters, seeded, train
from core.train.output import add_output_arguments, output_folder
from core.train.streams import eval_windows, random_batches, source_weights, token_streams

VOCAB_SIZE = 8000
MAX_POSITIONS = 512
UNK, BOS, EOS, PAD = "<unk>", "<s>", "</s>", "<pad>"
SPECIAL_TOKENS = (UNK, BOS, EOS, PAD)  # ids 0..3
BYTE_TOKENS = tuple(f"<0x{i:02X}>" for i in range(256))  # ids 4..259, for byte fallback
# CJK ideographs (URO, Ext A, compatibility, Ext B..H): each is pre-tokenized on its own,
# so every such character in the corpus is exactly one token and none is merged.
CJK_CHAR = "[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]"

SHAPES = {
    "target": dict(hidden_size=256, intermediate_size=704, num_hidden_layers=4,
                   num_attention_heads=4, num_key_value_heads=4),
    "draft": dict(hidden_size=96, intermediate_size=256, num_hidden_layers=1,
                  num_attention_heads=2, num_key_value_heads=2),
}
DEFAULT_STEPS = {"target": 1200, "draft": 700}  # about 15 minutes together on 2 idle CPU cores
EVAL_TOKENS_PER_SOURCE = 16384
SAMPLE_PROMPTS = ("我爱", "It is a truth universally acknowledged")


# --- tokenizer -------------------------------------------------------------------------


def train_tokenizer(texts: list[str], vocab_size: int = VOCAB_SIZE) -> PreTrainedTokenizerFast:
    """Train a Llama-style byte-fallback BPE tokenizer on ``texts``.

    Spaces become ``▁`` and start a new piece (no space is prepended, so decoding gives
    the input back exactly); every CJK ideograph and every run of newlines is its own
    piece; digits are split one by one. Characters never seen in training encode as
    ``<0xNN>`` byte tokens. The tokenizer adds ``<s>`` in front of every encoded text.
    """
    pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(CJK_CHAR), behavior="isolated"),
        pre_tokenizers.Split(Regex(r"\n+"), behavior="isolated"),
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True),
    ])
    bpe = Tokenizer(models.BPE(unk_token=UNK))
    bpe.pre_tokenizer = pre_tokenizer
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(BYTE_TOKENS), special_tokens=list(SPECIAL_TOKENS),
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer)

    learned = json.loads(bpe.to_str())["model"]
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS + BYTE_TOKENS)}
    for token, _ in sorted(learned["vocab"].items(), key=lambda item: item[1]):
        vocab.setdefault(token, len(vocab))
    merges = [tuple(merge) for merge in learned["merges"]]
    tokenizer = Tokenizer(models.BPE(vocab, merges, unk_token=UNK, byte_fallback=True, fuse_unk=True))
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS}:0 $A:0", pair=f"{BOS}:0 $A:0 {BOS}:1 $B:1",
        special_tokens=[(BOS, vocab[BOS])],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token=BOS, eos_token=EOS, unk_token=UNK, pad_token=PAD,
        clean_up_tokenization_spaces=False, model_max_length=MAX_POSITIONS,
    )


# --- models ----------------------------------------------------------------------------


def build_model(shape: dict, tokenizer: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    """A freshly initialised fp32 Llama with ``shape`` (hidden size, layers, ...), tied embeddings."""
    config = LlamaConfig(
        vocab_size=len(tokenizer), max_position_embeddings=MAX_POSITIONS,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True, **shape,
    )
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
    )
    return model


# --- training and evaluation ------------------------------------------------------------


def lm_loss(model, batch: torch.Tensor, teacher=None, distill_weight: float = 0.0) -> torch.Tensor:
    """Next-token cross-entropy on ``batch [B, T+1]``, mixed with KL to ``teacher`` if given."""
    inputs, labels = batch[:, :-1], batch[:, 1:]
    logits = model(input_ids=inputs).logits  # [B, T, V]
    loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten())
    if teacher is None or distill_weight == 0.0:
        return loss
    with torch.no_grad():
        target_logprobs = F.log_softmax(teacher(input_ids=inputs).logits, dim=-1)
    kl = F.kl_div(F.log_softmax(logits, dim=-1), target_logprobs, log_target=True, reduction="none")
    return (1 - distill_weight) * loss + distill_weight * kl.sum(-1).mean()


def train_lm(model, batches: Iterator[torch.Tensor], config: TrainConfig, name: str = "model",
             teacher=None) -> float:
    """Train ``model`` in place on ``batches`` (next-token loss, mixed with KL to ``teacher`` by
    ``config.distill_weight``) for ``config.steps`` steps; returns wall time in seconds."""
    return train(model, lambda step: lm_loss(model, next(batches), teacher, config.distill_weight), config, name)


@torch.no_grad()
def heldout_loss(model, streams: dict[str, torch.Tensor], seq_len: int) -> dict[str, float]:
    """Mean next-token loss per language on held-out text (up to ``EVAL_TOKENS_PER_SOURCE`` per source)."""
    language = {source.name: source.language for source in SOURCES}
    totals: dict[str, list[float]] = {}
    for name, ids in streams.items():
        for window in eval_windows(ids, seq_len, EVAL_TOKENS_PER_SOURCE):
            logits = model(input_ids=window[None, :-1]).logits[0]
            loss_sum = F.cross_entropy(logits, window[1:], reduction="sum").item()
            total = totals.setdefault(language[name], [0.0, 0])
            total[0] += loss_sum
            total[1] += len(window) - 1
    return {lang: loss_sum / count for lang, (loss_sum, count) in totals.items()}


def heldout_prompts(documents: dict[str, list[str]], tokenizer, per_source: int = 5,
                    prompt_tokens: int = 16) -> list[torch.Tensor]:
    """The first ``prompt_tokens`` tokens (after ``<s>``) of the first held-out documents."""
    prompts = []
    for docs in documents.values():
        for doc in docs[:per_source]:
            ids = tokenizer.backend_tokenizer.encode(doc).ids[:prompt_tokens + 1]
            prompts.append(torch.tensor(ids, dtype=torch.long))
    return prompts


@torch.no_grad()
def greedy_agreement(target, draft, prompts: list[torch.Tensor], new_tokens: int = 48) -> float:
    """How often the draft's argmax equals the target's greedy token, on the target's own path.

    For each prompt the target generates up to ``new_tokens`` tokens greedily; the draft then
    reads prompt + continuation in one forward, and its argmax at each generated position is
    compared with the token the target chose there.
    """
    matches = total = 0
    for prompt in prompts:
        sequence = target.generate(prompt[None], max_new_tokens=new_tokens, do_sample=False)[0]
        generated = sequence[len(prompt):]
        draft_logits = draft(input_ids=sequence[None, :-1]).logits[0, len(prompt) - 1:]
        matches += int((draft_logits.argmax(-1) == generated).sum())
        total += len(generated)
    return matches / total


@torch.no_grad()
def sample_continuation(model, tokenizer, prompt: str, new_tokens: int = 48) -> str:
    """Greedy continuation of ``prompt`` (prompt included), decoded without special tokens."""
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    output = model.generate(ids, max_new_tokens=new_tokens, do_sample=False)[0]
    return tokenizer.decode(output, skip_special_tokens=True)


# --- command line ----------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``python -m core train tiny``."""
    parser.add_argument("--seed", type=int, default=0, help="seed for init and data order (default 0)")
    parser.add_argument("--steps", type=int, default=None,
                        help=f"optimiser steps per model (default {DEFAULT_STEPS})")
    add_output_arguments(parser, "target/ and draft/")
    parser.add_argument("--which", choices=("target", "draft", "all"), default="all",
                        help="train the tokenizer + target, the draft only, or all (default)")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="where the corpus text is cached (default ~/.cache/speculative-decoding-lab/tiny-corpus)")


def train_member(name: str, shape: dict, tokenizer, streams: dict, heldout_streams: dict, config: TrainConfig,
                 seed: int, teacher=None) -> tuple:
    """Build a fresh member of the family shaped ``shape``, train it from ``seed`` on ``streams`` (distilling
    from ``teacher`` if given) and measure its held-out loss; returns (model, its stats dict)."""
    generator = seeded(seed)
    model = build_model(shape, tokenizer)
    batches = random_batches(streams, source_weights(streams), config.batch_size, config.seq_len, generator)
    print(f"[{name}] {count_parameters(model):,} parameters, {config}", file=sys.stderr)
    seconds = train_lm(model, batches, config, name=name, teacher=teacher)
    losses = heldout_loss(model, heldout_streams, config.seq_len)
    perplexity = {lang: round(math.exp(v), 2) for lang, v in losses.items()}
    print(f"[{name}] held-out loss {losses} perplexity {perplexity}", file=sys.stderr)
    return model, {
        "parameters": count_parameters(model), "shape": shape, "train": asdict(config),
        "seed": seed, "train_seconds": round(seconds, 1),
        "heldout_loss": {lang: round(v, 4) for lang, v in losses.items()}, "heldout_perplexity": perplexity,
    }


def _train_one(role: str, tokenizer, corpus: Corpus, args, teacher=None) -> tuple:
    """Build, train and save one model of the family; returns (model, its stats dict)."""
    config = TrainConfig(steps=args.steps or DEFAULT_STEPS[role],
                         distill_weight=0.5 if teacher is not None else 0.0)
    model, stats = train_member(role, SHAPES[role], tokenizer, token_streams(corpus.train, tokenizer),
                                token_streams(corpus.heldout, tokenizer), config, args.seed, teacher)
    save_pretrained(model, args.out / role)
    tokenizer.save_pretrained(args.out / role)
    return model, stats


def update_json(path: Path, update: dict) -> None:
    """Merge ``update`` into the JSON object in ``path`` (created if missing)."""
    stats = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    stats.update(update)
    path.write_text(json.dumps(stats, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def run(args: argparse.Namespace) -> int:
    """Train the requested members of the tiny family into ``args.out``; returns an exit code."""
    args.out = output_folder(args.out, ("tiny",), args.overwrite, "tiny")
    torch.set_num_threads(2)
    start = time.perf_counter()
    corpus = build_corpus(args.cache_dir)
    stats: dict = {"corpus_chars": {"train": corpus.chars("train"), "heldout": corpus.chars("heldout")}}
    if args.which in ("target", "all"):
        texts = [doc for docs in corpus.train.values() for doc in docs]
        tokenizer = train_tokenizer(texts)
        target, stats["target"] = _train_one("target", tokenizer, corpus, args)
        stats["greedy_top1_agreement"] = None  # stale until the draft is trained against it
    else:
        tokenizer = AutoTokenizer.from_pretrained(args.out / "target")
        target = AutoModelForCausalLM.from_pretrained(args.out / "target").eval()
    if args.which in ("draft", "all"):
        draft, stats["draft"] = _train_one("draft", tokenizer, corpus, args, teacher=target)
        prompts = heldout_prompts(corpus.heldout, tokenizer)
        stats["greedy_top1_agreement"] = round(greedy_agreement(target, draft, prompts), 4)
        print(f"draft/target greedy top-1 agreement {stats['greedy_top1_agreement']:.3f}", file=sys.stderr)
    stats["target_samples"] = {p: sample_continuation(target, tokenizer, p) for p in SAMPLE_PROMPTS}
    stats["wall_seconds"] = round(time.perf_counter() - start, 1)
    update_json(args.out / "train_stats.json", stats)
    return 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="python -m core.train.tiny", description=__doc__)
    add_arguments(_parser)
    sys.exit(run(_parser.parse_args()))
