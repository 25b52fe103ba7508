"""Training data for the learned drafters: text the target reads or writes, with its hidden
states and its next-token law at every position.

A drafter at inference sees the target's own output, so most sequences are the target's
continuations (greedy and sampled) of prompts cut from the corpus's training split; the rest
are plain corpus windows. The target runs once over every sequence; its hidden states after
each decoder layer (``hidden_states[1:]``; the last one after the final norm) and its ``TOP_K``
most likely next tokens are kept. Building takes a minute or two on 2 CPU cores, so the result
is cached on disk, keyed by the target's fingerprint and the settings, and shared by every
drafter trained for that target.
"""
from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from core.models.fingerprint import target_fingerprint
from core.train.corpus import Corpus, default_cache_dir
from core.train.output import add_output_arguments, output_folder
from core.train.streams import random_batches, source_weights, token_streams

TOP_K = 8  # next-token law kept per position: the target's top tokens and their probabilities


@dataclass(frozen=True)
class DataSettings:
    sequences: int = 1536
    seq_len: int = 96
    prompt_len: int = 16  # corpus tokens before the target's continuation
    corpus_share: float = 0.25  # plain corpus windows
    sampled_share: float = 0.375  # sampled continuations; the rest are greedy continuations
    sample_temperature: float = 1.0
    seed: int = 0
    zh_share: float | None = None  # share of Chinese windows and prompts (None: the corpus default)


@dataclass
class DrafterData:
    tokens: torch.Tensor  # [N, T] int64
    hidden: torch.Tensor  # [N, T, L, H] bfloat16 (float16 overflows on Gemma's residual stream):
    # hidden_states[1..L] (index L-1 is after the final norm)
    top_ids: torch.Tensor  # [N, T, TOP_K] int64: the target's likeliest tokens after position t
    top_probs: torch.Tensor  # [N, T, TOP_K] float32: their probabilities

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def layers(self, indices: tuple[int, ...], rows) -> list[torch.Tensor]:
        """Float32 hidden states at transformers' ``hidden_states`` ``indices`` (1..L) for ``rows``."""
        return [self.hidden[rows, :, i - 1].float() for i in indices]

    def take(self, rows, length: int | None = None) -> "DrafterData":
        """The sequences ``rows`` (an index or a slice), cut to their first ``length`` positions."""
        cut = slice(None, length)
        return DrafterData(self.tokens[rows, cut], self.hidden[rows, cut], self.top_ids[rows, cut],
                           self.top_probs[rows, cut])

    @property
    def greedy(self) -> torch.Tensor:
        """[N, T] the target's greedy token after each position."""
        return self.top_ids[..., 0]


def cache_file(model, settings: DataSettings, part: str, cache_dir: Path | None) -> Path:
    fields = {k: v for k, v in asdict(settings).items() if v is not None}  # unset options keep older keys
    key = json.dumps({"target": target_fingerprint(model), "part": part, **fields}, sort_keys=True)
    root = (cache_dir or default_cache_dir().parent) / "drafter-data"  # next to the corpus cache
    return root / f"{part}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.pt"


def load_or_build(target, corpus: Corpus, settings: DataSettings, part: str = "train",
                  cache_dir: Path | None = None) -> DrafterData:
    """The data for ``part`` ("train" or "heldout" split of ``corpus``), from the cache when there."""
    path = cache_file(target.model, settings, part, cache_dir)
    if path.exists():
        print(f"[data] {part}: cached {path}", file=sys.stderr)
        return DrafterData(**torch.load(path))
    start = time.perf_counter()
    documents = corpus.train if part == "train" else corpus.heldout
    tokens = make_sequences(target, documents, settings)
    data = annotate(target.model, tokens)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(asdict(data), path)
    print(f"[data] {part}: {tokens.numel():,} tokens in {time.perf_counter() - start:.0f} s -> {path}", file=sys.stderr)
    return data


@torch.inference_mode()
def make_sequences(target, documents: dict[str, list[str]], settings: DataSettings) -> torch.Tensor:
    """[sequences, seq_len] token ids: corpus windows, then greedy and sampled target continuations."""
    s = settings
    generator = torch.Generator().manual_seed(s.seed)
    streams = token_streams(documents, target.tokenizer)
    windows = next(random_batches(streams, source_weights(streams, s.zh_share), s.sequences, s.seq_len - 1, generator))
    n_corpus = round(s.sequences * s.corpus_share)
    n_sampled = round(s.sequences * s.sampled_share)
    parts = [windows[:n_corpus]]
    torch.manual_seed(s.seed)  # generate() samples from torch's global generator
    for first, last, sample in ((n_corpus, s.sequences - n_sampled, False), (s.sequences - n_sampled, s.sequences, True)):
        for start in range(first, last, 64):
            prompts = windows[start : min(start + 64, last), : s.prompt_len]
            parts.append(continue_text(target, prompts, s.seq_len, sample, s.sample_temperature))
            print(f"[data] {'sampled' if sample else 'greedy'} continuations {start + len(prompts) - first}/"
                  f"{last - first}", file=sys.stderr, flush=True)
    return torch.cat(parts)


def continue_text(target, prompts: torch.Tensor, length: int, sample: bool, temperature: float) -> torch.Tensor:
    """prompts [B, P] -> [B, length]: the target continues each prompt (end-of-text suppressed)."""
    new = length - prompts.shape[1]
    options = {"do_sample": True, "temperature": temperature, "top_k": None, "top_p": None} if sample else {
        "do_sample": False, "temperature": None, "top_k": None, "top_p": None}
    out = target.model.generate(
        prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=new, min_new_tokens=new,
        pad_token_id=target.tokenizer.pad_token_id, **options,
    )
    return out[:, :length]


@torch.inference_mode()
def annotate(model, tokens: torch.Tensor, batch_size: int = 32) -> DrafterData:
    """Run the target over ``tokens`` [N, T]: hidden states after every layer and top-k next-token laws."""
    hidden, top_ids, top_probs = [], [], []
    for start in range(0, len(tokens), batch_size):
        out = model(input_ids=tokens[start : start + batch_size], output_hidden_states=True)
        hidden.append(torch.stack(out.hidden_states[1:], dim=2).to(torch.bfloat16))  # [B, T, L, H]
        top = torch.topk(torch.softmax(out.logits.float(), dim=-1), TOP_K, dim=-1)
        top_ids.append(top.indices)
        top_probs.append(top.values)
    return DrafterData(tokens, torch.cat(hidden), torch.cat(top_ids), torch.cat(top_probs))


def soft_cross_entropy(logits: torch.Tensor, top_ids: torch.Tensor, top_probs: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``logits`` [n, V] against the target's top-k law (ids/probs [n, k], renormalised)."""
    logprobs = torch.log_softmax(logits.float(), dim=-1).gather(-1, top_ids)
    weights = top_probs / top_probs.sum(-1, keepdim=True)
    return -(weights * logprobs).sum(-1).mean()


def draftable_cross_entropy(logits: torch.Tensor, top_ids: torch.Tensor, top_probs: torch.Tensor,
                            rows: torch.Tensor | None) -> torch.Tensor:
    """:func:`soft_cross_entropy` of a drafter's ``logits`` [n, draft vocab] against the target's top-k law
    (``top_ids`` in target ids). ``rows`` maps target ids to draft rows (``core.drafters.vocab.draft_rows``;
    None: the whole vocabulary): tokens outside the draft vocabulary get no weight, and positions whose
    greedy token is outside are skipped (the drafter can never propose it)."""
    if rows is not None:
        top_probs = top_probs * (rows[top_ids] >= 0)
        top_ids = rows[top_ids].clamp_min(0)
        keep = top_probs[:, 0] > 0
        logits, top_ids, top_probs = logits[keep], top_ids[keep], top_probs[keep]
    return soft_cross_entropy(logits, top_ids, top_probs)


# ---- what the drafter trainers share ---------------------------------------------------------
def add_common_arguments(parser, steps: int, batch: int, lr: float) -> None:
    """Options every ``python -m core train <drafter>`` takes."""
    parser.add_argument("--preset", default="tiny", help="preset whose target the drafter is for (default tiny)")
    parser.add_argument("--target", help="target model folder (overrides the preset's)")
    add_output_arguments(parser, "the drafter's weights")
    parser.add_argument("--seed", type=int, default=0, help="seed for init, data and batch order (default 0)")
    parser.add_argument("--steps", type=int, default=steps, help=f"optimiser steps (default {steps})")
    parser.add_argument("--batch", type=int, default=batch, help=f"batch size (default {batch})")
    parser.add_argument("--lr", type=float, default=lr, help=f"peak learning rate (default {lr:g})")
    parser.add_argument("--sequences", type=int, default=DataSettings.sequences,
                        help=f"training sequences of the target's text (default {DataSettings.sequences})")
    parser.add_argument("--seq-len", type=int, default=DataSettings.seq_len,
                        help=f"tokens per training sequence (default {DataSettings.seq_len})")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="where corpus text and drafter data are cached (default ~/.cache/speculative-decoding-lab)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (default 1: on a busy machine more threads spin-wait for each "
                             "other and run many times slower)")


@dataclass
class Setup:
    target: object  # models.LoadedModel
    train: DrafterData | None  # None: the trainer reads stored data (``prepare(build_train=False)``)
    heldout: DrafterData  # greedy continuations of held-out prompts
    out: Path


def prepare(args, kind: str, build_train: bool = True) -> Setup:
    """Load the target and the corpus, and build (or read) the held-out drafter data and, unless
    ``build_train`` is False (a trainer reading stored data instead), the train data."""
    from core.models.loading import load_model, resolve_preset
    from core.train.corpus import build_corpus

    torch.set_num_threads(args.threads)
    out = output_folder(args.out, (Path(args.target).name if args.target else args.preset, kind), args.overwrite, kind)
    target = load_model(args.target or resolve_preset(args.preset).target, "cpu")
    corpus_dir = args.cache_dir / "tiny-corpus" if args.cache_dir else None
    corpus = build_corpus(corpus_dir)
    train_settings = DataSettings(sequences=args.sequences, seq_len=args.seq_len, seed=args.seed)
    heldout_settings = DataSettings(sequences=128, seq_len=args.seq_len, corpus_share=0.0, sampled_share=0.0,
                                    seed=args.seed)
    train = load_or_build(target, corpus, train_settings, "train", args.cache_dir) if build_train else None
    return Setup(target=target, train=train,
                 heldout=load_or_build(target, corpus, heldout_settings, "heldout", args.cache_dir), out=out)


def training_record(args, seconds: float) -> dict:
    """The options a drafter was trained with and how long it took, for its config.json."""
    options = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k not in ("command", "what")}
    return {"options": options, "seconds": round(seconds, 1), "threads": torch.get_num_threads()}
