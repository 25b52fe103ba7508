"""Drafter training data at scale: the target's features and labels, built in resumable shards.

    python -m core.train.drafter_data --preset gemma-270m --budget-tokens 1000000 [--threads 1]
    python -m core.train.drafter_data --preset tiny --budget-tokens 20000      # seconds, for a try

Every training sequence is ``seq_len`` tokens that the target reads once (teacher forcing):

- **text** (most sequences): a window of fixed, openly licensed text -- Chinese and English
  prose, a system guide with shell sessions, Python source (``--sources``; each source's
  licence goes into the manifest) -- behind the target's BOS;
- **distill** (``--distill-share``, default 15%): the target's own greedy continuation of a
  prompt, either a chat-style question, instruction, list, dialogue or code request
  (core.train.chat_prompts) or the opening of a corpus document; a continuation that falls into a
  repetition loop is broken out of it after a few repeating tokens (:class:`LoopGuard`). Greedy
  decoding costs far more per token than teacher forcing on a CPU, hence the minority share; on a
  GPU it can be raised.

At every position the target's own labels are kept: its top-``top_k`` next tokens and their
probabilities (index 0 is its greedy choice), never the text's next token. Of the hidden states
only the layers the drafters read are kept (``--layers``, ``hidden_states`` indices; default
the low, middle and last layer this project's EAGLE-3 fuses -- the last is after the final
norm, what EAGLE and Medusa read -- plus the paper's high layer L-3), in bfloat16. The LM head
is applied a few hundred rows at a time (no ``[B*T, vocab]`` logits tensor is ever held), in
bfloat16 with the best candidates rescored in float32 (see :class:`Head`).

Shards of ``shard_sequences`` sequences are written to
``$XDG_CACHE_HOME/speculative-decoding-lab/drafter-data/<preset>-<key>/shard-NNNNN.safetensors``
(``--out`` to choose), each to a temporary name first and then renamed, with ``manifest.json``
beside them (settings, target fingerprint, sources and licences, progress, timings). The key
hashes the settings and the target's fingerprint. What shard i holds is planned from
``(seed, i)`` alone, so a killed run resumes by running the same command, a larger
``--budget-tokens`` only appends shards, and the first shards of the data are a seeded random
sample of all of it (what a data-scaling curve trains on).

Read it back for the trainers with :func:`load` (one ``DrafterData``, bf16 hidden states in RAM)
or :func:`iter_shards` (one shard at a time).
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import math
import re
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from transformers.cache_utils import DynamicCache

from core.common.errors import UserError
from core.common.files import lab_cache, write_atomic
from core.models.fingerprint import target_fingerprint
from core.runtime.head import cheap_head
from core.train.chat_prompts import chat_prompt, prompt_count
from core.train.corpus import SOURCES, Source, build_corpus
from core.train.features import DrafterData
from core.train.more_text import MORE_SOURCES
from core.train.streams import token_streams

PIPELINE_VERSION = 2  # 2: the wider chat prompt space, longer chat prompts, loop breaking
ALL_SOURCES: dict[str, Source] = {source.name: source for source in SOURCES + MORE_SOURCES}
# Sampling weight of each source's windows (renormalised over the chosen sources): half Chinese,
# half English and code. The poems are small, so they get little weight (they would repeat).
SOURCE_WEIGHTS = {"tang300": 0.06, "song100": 0.03, "sayings-zh": 0.21, "debref-zh": 0.20,
                  "austen": 0.22, "kjv": 0.10, "debref-en": 0.10, "pystdlib": 0.08}
TEXT, DISTILL = 0, 1  # sequence kinds in a shard's ``kind`` tensor
CHAT_SOURCE = -1  # ``source`` of a sequence continued from a chat-style prompt


@dataclass(frozen=True)
class PipelineSettings:
    """What the data holds; these, with the target's fingerprint, name its folder (the key)."""
    preset: str = "gemma-270m"
    seq_len: int = 128  # tokens per sequence (= training positions per sequence)
    shard_sequences: int = 128  # sequences per shard file
    distill_share: float = 0.15  # share of sequences that are the target's greedy continuations
    chat_share: float = 0.75  # share of those continuing a chat-style prompt (the rest: a document opening)
    prompt_tokens: int = 24  # longest document opening continued, BOS included
    chat_prompt_tokens: int = 56  # longest chat-style prompt continued (two-turn dialogues reach ~50), BOS included
    loop_ngram: int = 4  # a continued token "repeats" when the n-gram it ends occurred earlier in its sequence
    loop_keep: int = 12  # after this many repeating tokens in a row a continuation breaks out of its loop (0: never)
    layers: tuple[int, ...] | None = None  # hidden_states indices kept; None: default_layers
    top_k: int = 8
    rescore: int = 64  # LM-head candidates rescored in float32 after a bf16 pass (0: all float32; see Head)
    sources: tuple[str, ...] = tuple(SOURCE_WEIGHTS)
    seed: int = 0

    def check(self) -> None:
        """Raise UserError naming the first bad setting."""
        unknown = [name for name in self.sources if name not in ALL_SOURCES]
        if unknown or not self.sources:
            raise UserError(f"--sources: unknown {unknown or 'empty list'}; known: {', '.join(ALL_SOURCES)}")
        if self.seq_len < 8 or self.shard_sequences < 1 or self.top_k < 1:
            raise UserError("--seq-len must be >= 8, --shard-sequences and --top-k >= 1")
        if 0 < self.rescore < self.top_k:
            raise UserError("--rescore must be 0 or at least --top-k")
        if not (0 <= self.distill_share <= 1 and 0 <= self.chat_share <= 1):
            raise UserError("--distill-share and the chat share must be between 0 and 1")
        if not (8 <= self.prompt_tokens < self.seq_len and 8 <= self.chat_prompt_tokens < self.seq_len):
            raise UserError("--prompt-tokens and --chat-prompt-tokens must be between 8 and seq_len - 1")
        if self.loop_ngram < 1 or self.loop_keep < 0:
            raise UserError("--loop-ngram must be >= 1 and --loop-keep >= 0")

    @property
    def shard_positions(self) -> int:
        return self.shard_sequences * self.seq_len


def default_layers(num_layers: int) -> tuple[int, ...]:
    """The layers this project's EAGLE-3 fuses (1, L/2, L; EAGLE and Medusa read L, after the final
    norm) and the EAGLE-3 paper's "high" layer L-3, for an ablation: (1, 9, 15, 18) on Gemma 3 270M."""
    return tuple(sorted({1, num_layers // 2, max(1, num_layers - 3), num_layers}))


def resolve_layers(settings: PipelineSettings, num_layers: int) -> PipelineSettings:
    layers = tuple(sorted(set(settings.layers))) if settings.layers else default_layers(num_layers)
    if not all(1 <= i <= num_layers for i in layers) or layers[-1] != num_layers:
        raise UserError(f"--layers must be hidden_states indices in 1..{num_layers} and include the last, "
                        f"{num_layers} (EAGLE and Medusa read it); got {settings.layers}")
    return replace(settings, layers=layers)


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/speculative-decoding-lab/drafter-data`` (``~/.cache/...`` by default)."""
    return lab_cache("drafter-data")


def data_key(settings: PipelineSettings, fingerprint: dict) -> str:
    payload = json.dumps({"version": PIPELINE_VERSION, "target": fingerprint, **asdict(settings)}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def default_folder(settings: PipelineSettings, fingerprint: dict) -> Path:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(settings.preset).name) or "target"
    return cache_root() / f"{name}-{data_key(settings, fingerprint)}"


# ---- the plan: what each shard holds, from (seed, shard) alone --------------------------------
@dataclass(frozen=True)
class SequencePlan:
    kind: int  # TEXT or DISTILL
    source: int  # index into settings.sources, or CHAT_SOURCE
    start: int = 0  # TEXT: window start in the source's token stream; DISTILL from a document: its start
    prompt: str = ""  # DISTILL from a chat prompt
    prompt_len: int = 0  # DISTILL from a document: prompt tokens taken (BOS included)


def shard_generator(seed: int, shard: int) -> torch.Generator:
    digest = hashlib.sha256(f"drafter-data:{seed}:{shard}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") >> 1)


def plan_shard(settings: PipelineSettings, shard: int, streams: list[torch.Tensor],
               openings: list[torch.Tensor]) -> list[SequencePlan]:
    """The sequences of ``shard``: ``streams[i]`` is source i's token stream, ``openings[i]`` the
    positions where its documents start."""
    s = settings
    generator = shard_generator(s.seed, shard)
    weights = torch.tensor([SOURCE_WEIGHTS[name] for name in s.sources], dtype=torch.double)
    plans = []
    for _ in range(s.shard_sequences):
        distill = float(torch.rand((), generator=generator, dtype=torch.double)) < s.distill_share
        chat = float(torch.rand((), generator=generator, dtype=torch.double)) < s.chat_share
        source = int(torch.multinomial(weights, 1, generator=generator))
        if not distill:
            start = int(torch.randint(max(1, len(streams[source]) - s.seq_len + 1), (), generator=generator))
            plans.append(SequencePlan(TEXT, source, start))
        elif chat:
            plans.append(SequencePlan(DISTILL, CHAT_SOURCE, prompt=chat_prompt(generator)[1]))
        else:
            start = int(openings[source][int(torch.randint(len(openings[source]), (), generator=generator))])
            length = int(torch.randint(8, s.prompt_tokens + 1, (), generator=generator))
            plans.append(SequencePlan(DISTILL, source, start, prompt_len=min(length, s.prompt_tokens)))
    return plans


# ---- running the target ---------------------------------------------------------------------
class Head:
    """The target's LM head, applied a few hundred rows at a time.

    With ``rescore`` > 0 the logits of all V tokens are computed by a cheaper, lower-precision
    product only to pick ``rescore`` candidates, whose logits are then recomputed in float32 from
    the target's own weights: the top-k ids, and so the greedy token, are the float32 head's (unless
    a true top-k token ranked below ``rescore`` in the cheap product, which a margin of 64 makes
    vanishingly rare); the log-normaliser comes from the cheap logits (probabilities off by ~1%
    relative at most; the trainers renormalise the top-k law, which cancels it). The cheap product
    is the faster of the engine's bf16 and fp16 routes on this machine (``core.runtime.head.cheap_head``
    without outlier channels, so never its int8 route, whose error of a few logits at worst could
    push a top-k token below the rescored ones): bf16 where the CPU has bf16 units, fbgemm's fp16
    GEMM on AVX2 alone -- there bf16 is emulated and 4-5x slower than fp16 on Gemma's 262k-row head
    -- and bf16 on a GPU; the float32 head where neither pays. ``rescore`` = 0: everything in float32. ``route`` names the product taken.
    """

    def __init__(self, model, rescore: int):
        weight = model.get_output_embeddings().weight  # [V, H]
        self.weight = weight.float()  # the same tensor on CPU (fp32 there), a float32 copy on CUDA
        self.low, self.route = None, "float32"
        if rescore and weight.device.type == "cpu":
            cheap = cheap_head(self.weight)
            if cheap is not None:
                self.low, self.route = cheap.product, cheap.route
        elif rescore:
            low = weight.to(torch.bfloat16)
            self.low, self.route = (lambda h: h.to(torch.bfloat16) @ low.T), "bf16"
        self.rescore = min(rescore, weight.shape[0])
        config = model.config.get_text_config()
        self.softcap = getattr(config, "final_logit_softcapping", None)
        self.rows = 256 if weight.device.type == "cpu" else 1024

    def _cap(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.tanh(logits / self.softcap) * self.softcap if self.softcap else logits

    @torch.inference_mode()
    def top(self, final: torch.Tensor, k: int, banned: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """final [n, H] (after the final norm) -> (ids [n, k] int64, log-probabilities [n, k] float32),
        best first; ``banned`` ids are never returned (their probability still counts)."""
        ids, logprobs = [], []
        for start in range(0, final.shape[0], self.rows):
            rows = final[start : start + self.rows]
            if self.low is None:
                logits = self._cap(rows.float() @ self.weight.T)  # [r, V]
                lse = torch.logsumexp(logits, dim=-1, keepdim=True)
                candidates = None
            else:
                approx = self._cap(self.low(rows.float()).float())  # [r, V]
                lse = torch.logsumexp(approx, dim=-1, keepdim=True)
                candidates = torch.topk(approx, self.rescore, dim=-1).indices  # [r, C]
                del approx
                logits = self._cap(torch.einsum("rh,rch->rc", rows.float(), self.weight[candidates]))  # [r, C]
            if banned is not None:
                token_ids = torch.arange(logits.shape[-1], device=logits.device) if candidates is None else candidates
                logits = logits.masked_fill(torch.isin(token_ids, banned).expand_as(logits), float("-inf"))
            values, top = torch.topk(logits, k, dim=-1)
            ids.append(top if candidates is None else candidates.gather(-1, top))
            logprobs.append(values - lse)
        return torch.cat(ids), torch.cat(logprobs)


class Annotator:
    """Teacher-forced target pass: kept hidden states and the top-k next-token law at every position."""

    def __init__(self, target, head: Head, layers: tuple[int, ...], top_k: int):
        self.model = target.model
        self.head = head
        self.layers = layers
        self.top_k = top_k

    @torch.inference_mode()
    def __call__(self, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        """tokens [B, T] -> hidden [B, T, len(layers), H] bf16, top_ids [B, T, k] int32, top_probs [B, T, k] fp32."""
        out = self.model.base_model(input_ids=tokens.to(self.model.device), output_hidden_states=True)
        states = out.hidden_states  # embeddings, then after each layer; the last after the final norm
        hidden = torch.stack([states[i] for i in self.layers], dim=2).to("cpu", torch.bfloat16)
        ids, logprobs = self.head.top(states[-1].reshape(-1, states[-1].shape[-1]), self.top_k)
        shape = (*tokens.shape, self.top_k)
        return {"hidden": hidden, "top_ids": ids.to("cpu", torch.int32).view(shape),
                "top_probs": logprobs.exp().to("cpu", torch.float32).view(shape)}


@dataclass(frozen=True)
class LoopGuard:
    """Keeps a greedy continuation from spending its length in a repetition loop.

    Greedy decoding of a small target often falls into a loop (the same phrase again and again);
    left alone, loops would fill most continued positions. A continued token *repeats* when the
    ``ngram`` tokens it ends occurred earlier in its sequence (prompt included). After ``keep``
    repeating tokens in a row -- enough for a drafter to learn that a loop goes on -- the next
    token is not the greedy one but the best of the target's top-k that does not repeat (its
    second best when all of them do), and the count starts again. Labels are unaffected: they come
    from the teacher-forced pass, so a broken position is still labelled with the target's greedy
    choice; only which text the target reads changes. ``keep`` = 0: never break (pure greedy)."""
    ngram: int
    keep: int

    def repeats(self, row: Sequence[int]) -> bool:
        """Whether the last ``ngram`` tokens of ``row`` occurred earlier in it (overlaps count)."""
        n = self.ngram
        tail = list(row[-n:])
        return len(row) > n and any(list(row[i : i + n]) == tail for i in range(len(row) - n))

    def escape(self, row: Sequence[int], candidates: Sequence[int]) -> int:
        """The best of ``candidates`` (ranked best first) that does not repeat after ``row``."""
        for token in candidates:
            if not self.repeats([*row, token]):
                return token
        return candidates[1] if len(candidates) > 1 else candidates[0]

    def loop_share(self, row: Sequence[int], start: int) -> float:
        """Share of the tokens of ``row`` from ``start`` on that repeat (0 if there are none)."""
        flags = [self.repeats(row[: i + 1]) for i in range(start, len(row))]
        return sum(flags) / len(flags) if flags else 0.0


@torch.inference_mode()
def continue_greedy(target, head: Head, prompts: list[list[int]], length: int, guard: LoopGuard,
                    top_k: int = 8) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each prompt (token ids, BOS included) continued to ``length`` tokens with the target's greedy
    tokens, end-of-text suppressed (the text goes on) and loops broken by ``guard`` (choosing among
    the target's ``top_k``). Returns (tokens [length], broken [length] bool: True where the token is
    a loop break, not the greedy choice) per prompt. Prompts are batched with left padding; one
    cached forward per new token, the LM head on the last position only."""
    device = target.device
    pad = target.tokenizer.pad_token_id
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=device)  # [B, width]
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    positions = (mask.cumsum(1) - 1).clamp_min(0)
    banned = torch.tensor(sorted(target.eos_ids), device=device)
    cache = DynamicCache(config=target.model.config)
    rows = [list(p) for p in prompts]
    broken: list[list[bool]] = [[False] * len(p) for p in prompts]
    runs = [0] * len(prompts)  # repeating tokens in a row at the end of each row
    step_ids = ids
    for _ in range(length - min(len(p) for p in prompts)):
        out = target.model.base_model(input_ids=step_ids, attention_mask=mask, position_ids=positions,
                                      cache=cache, use_cache=True)
        candidates = head.top(out.last_hidden_state[:, -1], top_k if guard.keep else 1, banned)[0].tolist()  # [B, k]
        chosen = []
        for row, flags, best, b in zip(rows, broken, candidates, range(len(rows))):
            token = guard.escape(row, best) if guard.keep and runs[b] >= guard.keep else best[0]
            row.append(token)
            flags.append(token != best[0])
            runs[b] = 0 if token != best[0] else runs[b] + 1 if guard.repeats(row) else 0
            chosen.append(token)
        step_ids = torch.tensor(chosen, device=device)[:, None]  # [B, 1]
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        positions = positions[:, -1:] + 1
    return [(torch.tensor(row[:length]), torch.tensor(flags[:length])) for row, flags in zip(rows, broken)]


def shard_tokens(target, settings: PipelineSettings, plans: list[SequencePlan], streams: list[torch.Tensor],
                 head: Head, batch_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Token ids [shard_sequences, seq_len] of the planned sequences, the prompt length of each
    continued one ([shard_sequences] int16; 0 for text) and where a continuation broke out of a
    loop ([shard_sequences, seq_len] bool, see :class:`LoopGuard`)."""
    bos = target.tokenizer.bos_token_id
    length = settings.seq_len
    guard = LoopGuard(settings.loop_ngram, settings.loop_keep)
    rows: list[torch.Tensor | None] = [None] * len(plans)
    broken = torch.zeros(len(plans), length, dtype=torch.bool)
    prompts: dict[int, list[int]] = {}
    for i, plan in enumerate(plans):
        if plan.kind == TEXT:
            window = streams[plan.source][plan.start : plan.start + length - 1]
            rows[i] = torch.cat([torch.tensor([bos]), window])
        elif plan.source == CHAT_SOURCE:
            prompts[i] = target.tokenizer(plan.prompt).input_ids[: settings.chat_prompt_tokens]
        else:
            opening = streams[plan.source][plan.start : plan.start + plan.prompt_len].tolist()
            prompts[i] = opening if opening[:1] == [bos] else [bos] + opening[: plan.prompt_len - 1]
    order = sorted(prompts, key=lambda i: len(prompts[i]))  # similar lengths together: less padding
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        continued = continue_greedy(target, head, [prompts[i] for i in batch], length, guard, settings.top_k)
        for i, (row, flags) in zip(batch, continued):
            rows[i], broken[i] = row, flags
    prompt_lens = torch.tensor([len(prompts.get(i, ())) for i in range(len(plans))], dtype=torch.int16)
    return torch.stack(rows), prompt_lens, broken


# ---- shards and the manifest -----------------------------------------------------------------
def shard_path(folder: Path, index: int) -> Path:
    return folder / f"shard-{index:05d}.safetensors"


def write_json(path: Path, data: dict) -> None:
    write_atomic(path, lambda tmp: tmp.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n",
                                                  encoding="utf-8"))


def done_shards(folder: Path) -> set[int]:
    return {int(p.stem.split("-")[1]) for p in folder.glob("shard-*.safetensors")}


def load_streams(folder: Path, target, settings: PipelineSettings) -> list[torch.Tensor]:
    """Token streams of the chosen sources' training documents, tokenized once and kept with the
    data, so a resumed run plans from the same text even if a package was upgraded meanwhile."""
    path = folder / "streams.safetensors"
    if path.exists():
        with safe_open(str(path), "pt") as f:
            return [f.get_tensor(name).long() for name in settings.sources]
    corpus = build_corpus(sources=tuple(ALL_SOURCES[name] for name in settings.sources))
    streams = token_streams(corpus.train, target.tokenizer)
    write_atomic(path, lambda tmp: save_file({n: streams[n].to(torch.int32) for n in settings.sources}, str(tmp)))
    return [streams[name] for name in settings.sources]


def source_records(settings: PipelineSettings, streams: list[torch.Tensor]) -> list[dict]:
    total = sum(SOURCE_WEIGHTS[name] for name in settings.sources)
    return [{"name": name, "language": ALL_SOURCES[name].language, "licence": ALL_SOURCES[name].licence,
             "debian_packages": list(ALL_SOURCES[name].apt_packages), "training_tokens": len(stream),
             "text_weight": round(SOURCE_WEIGHTS[name] / total, 4)}
            for name, stream in zip(settings.sources, streams)]


@dataclass
class RunOptions:
    """How fast the data is made, not what it holds."""
    budget_tokens: int
    device: str = "auto"
    threads: int = 1
    batch_size: int = 8  # sequences per teacher-forced forward
    gen_batch: int = 32  # prompts continued together (decoding gains most from batching)
    out: Path | None = None


@dataclass
class Progress:
    total: int
    done: int
    started: float = field(default_factory=time.perf_counter)
    made: int = 0  # positions made by this run

    def line(self) -> str:
        elapsed = time.perf_counter() - self.started
        rate = self.made / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else float("nan")
        eta_text = "--" if math.isnan(eta) else f"{int(eta // 3600)}h{int(eta % 3600 // 60):02d}m{int(eta % 60):02d}s"
        return (f"{self.done:,}/{self.total:,} positions ({100 * self.done / max(1, self.total):.1f}%), "
                f"{rate:.1f} positions/s, ETA {eta_text}")


def _target_and_folder(settings: PipelineSettings, run: RunOptions):
    """The loaded target, the settings with its layers, its fingerprint and the data's folder."""
    from core.models.loading import load_model, resolve_preset

    settings.check()
    torch.set_num_threads(run.threads)
    target = load_model(resolve_preset(settings.preset).target, run.device)
    settings = resolve_layers(settings, target.model.config.get_text_config().num_hidden_layers)
    fingerprint = target_fingerprint(target.model)
    return target, settings, fingerprint, run.out or default_folder(settings, fingerprint)


def folder_for(settings: PipelineSettings, run: RunOptions) -> Path:
    """Where ``build`` keeps this data, without building anything (it loads the target to name it)."""
    return _target_and_folder(settings, run)[3]


def build(settings: PipelineSettings, run: RunOptions, log=None) -> Path:
    """Make (or complete) the data for ``run.budget_tokens`` positions; returns its folder."""
    log = log or (lambda message: print(f"[data] {message}", file=sys.stderr, flush=True))
    target, settings, fingerprint, folder = _target_and_folder(settings, run)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(f"another build is writing {folder}") from None
        return _build_locked(target, settings, run, fingerprint, folder, log)


def _build_locked(target, settings: PipelineSettings, run: RunOptions, fingerprint: dict, folder: Path, log) -> Path:
    manifest_path = folder / "manifest.json"
    manifest = _read_manifest(manifest_path, settings, fingerprint)
    for stale in folder.glob(".*.tmp"):  # a write that a kill interrupted
        stale.unlink()
    streams = load_streams(folder, target, settings)
    manifest = _with_run(manifest or _new_manifest(target, settings, fingerprint, streams), target, run)
    openings = [(stream == target.tokenizer.bos_token_id).nonzero().flatten() for stream in streams]
    n_shards = math.ceil(run.budget_tokens / settings.shard_positions)
    done = done_shards(folder)
    todo = [i for i in range(n_shards) if i not in done]
    head = Head(target.model, settings.rescore)
    annotator = Annotator(target, head, settings.layers, settings.top_k)
    progress = Progress(total=n_shards * settings.shard_positions,
                        done=len(done & set(range(n_shards))) * settings.shard_positions)
    log(f"{folder}: {len(done)} shards there, {len(todo)} to make ({settings.shard_positions:,} positions each; "
        f"{run.budget_tokens:,} positions asked), layers {list(settings.layers)}, device {target.device}, "
        f"{torch.get_num_threads()} threads")
    for index in todo:
        seconds = _make_shard(target, settings, run, folder, index, n_shards, streams, openings, head, annotator,
                              progress, log)
        shards = len(done_shards(folder))
        manifest.update(shards=shards, positions=shards * settings.shard_positions,
                        seconds=round(manifest["seconds"] + seconds, 1),
                        updated=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        write_json(manifest_path, manifest)
    write_json(manifest_path, manifest)
    log(f"done: {folder} holds {manifest['positions']:,} positions")
    return folder


def _read_manifest(path: Path, settings: PipelineSettings, fingerprint: dict) -> dict | None:
    """The manifest a previous run left, checked to be of these settings and this target (None if none)."""
    manifest = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
    if manifest and (manifest["settings"] != json.loads(json.dumps(asdict(settings)))
                     or manifest["target"] != fingerprint):
        raise UserError(f"{path.parent} holds data of other settings or another target: choose another --out")
    return manifest


def _new_manifest(target, settings: PipelineSettings, fingerprint: dict, streams: list[torch.Tensor]) -> dict:
    return {
        "pipeline_version": PIPELINE_VERSION, "settings": asdict(settings), "target": fingerprint,
        "target_path": str(target.path), "key": data_key(settings, fingerprint),
        "sources": source_records(settings, streams), "chat_prompts": prompt_count(),
        "tensors": {"tokens": "[S, T] int32", "hidden": "[S, T, len(layers), H] bfloat16 (hidden_states at layers)",
                    "top_ids": "[S, T, top_k] int32 (index 0: the target's greedy next token)",
                    "top_probs": "[S, T, top_k] float32", "kind": f"[S] uint8 ({TEXT} text, {DISTILL} distill)",
                    "source": f"[S] int16 (index into sources; {CHAT_SOURCE}: chat prompt)",
                    "prompt_len": "[S] int16 (distill: tokens before the continuation; text: 0)",
                    "broken": "[S, T] bool (a continued token that breaks a repetition loop, not the greedy one)"},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": [], "shards": 0, "positions": 0,
        "seconds": 0.0,
    }


def _with_run(manifest: dict, target, run: RunOptions) -> dict:
    """The manifest with this run (its budget, device, threads and command) appended."""
    manifest["runs"].append({"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                             "budget_tokens": run.budget_tokens, "device": str(target.device),
                             "dtype": str(target.model.dtype), "threads": torch.get_num_threads(),
                             "batch_size": run.batch_size, "gen_batch": run.gen_batch,
                             "command": "python -m core.train.drafter_data " + " ".join(sys.argv[1:])})
    return manifest


def _make_shard(target, settings: PipelineSettings, run: RunOptions, folder: Path, index: int, n_shards: int,
                streams, openings, head, annotator, progress: Progress, log) -> float:
    """Decode the shard's continuations, annotate every sequence, write it atomically; its seconds."""
    start, cpu_start = time.perf_counter(), time.process_time()
    plans = plan_shard(settings, index, streams, openings)
    distilled = sum(p.kind == DISTILL for p in plans)
    tokens, prompt_lens, broken = shard_tokens(target, settings, plans, streams, head, run.gen_batch)
    decoded, cpu_decoded = time.perf_counter(), time.process_time()
    guard = LoopGuard(settings.loop_ngram, settings.loop_keep)
    continued = [i for i, p in enumerate(plans) if p.kind == DISTILL]
    loop_share = sum(guard.loop_share(tokens[i].tolist(), int(prompt_lens[i])) for i in continued) / max(1, len(continued))
    log(f"shard {index + 1}/{n_shards}: {distilled} continuations decoded in {decoded - start:.1f} s "
        f"({int(broken.sum())} loop breaks; {100 * loop_share:.0f}% of continued tokens repeat an earlier "
        f"{settings.loop_ngram}-gram); teacher-forced pass over {len(plans)} sequences next")
    parts = [annotator(tokens[i : i + run.batch_size]) for i in range(0, len(tokens), run.batch_size)]
    forward_seconds = time.perf_counter() - decoded
    tensors = {name: torch.cat([p[name] for p in parts]).contiguous() for name in parts[0]}
    tensors.update(
        tokens=tokens.to(torch.int32), kind=torch.tensor([p.kind for p in plans], dtype=torch.uint8),
        source=torch.tensor([p.source for p in plans], dtype=torch.int16), prompt_len=prompt_lens, broken=broken,
    )
    seconds = time.perf_counter() - start
    write_atomic(shard_path(folder, index), lambda tmp: save_file(
        tensors, str(tmp), metadata={"shard": str(index), "seconds": f"{seconds:.2f}", "device": str(target.device),
                                        "head": head.route}))
    progress.done += settings.shard_positions
    progress.made += settings.shard_positions
    log(f"shard {index + 1}/{n_shards}: {len(plans) - distilled} text + {distilled} distilled sequences in "
        f"{seconds:.1f} s (decoding {decoded - start:.1f} s, teacher-forced pass {forward_seconds:.1f} s; CPU time "
        f"{cpu_decoded - cpu_start:.0f} + {time.process_time() - cpu_decoded:.0f} s); {progress.line()}")
    return seconds


# ---- reading it back for the trainers ---------------------------------------------------------
@dataclass
class StoredDrafterData(DrafterData):
    """``DrafterData`` whose ``hidden`` holds only the stored layers ``layer_ids`` (the last is the
    target's last, so ``hidden[..., -1, :]`` is the feature EAGLE and Medusa read)."""
    layer_ids: tuple[int, ...] = ()

    def layers(self, indices: tuple[int, ...], rows) -> list[torch.Tensor]:
        """Float32 hidden states at ``hidden_states`` ``indices`` for ``rows``. EAGLE's feature loss
        asks for index ``hidden.shape[2]``, the last layer of a full ``DrafterData``: when that is not
        a stored index it reads the last stored layer, which is the target's last."""
        slots = [self.layer_ids.index(i) if i in self.layer_ids else -1 if i == self.hidden.shape[2] else None
                 for i in indices]
        if None in slots:
            raise UserError(f"the drafter data holds layers {list(self.layer_ids)}, not "
                            f"{[i for i, slot in zip(indices, slots) if slot is None]}: rebuild it with --layers")
        return [self.hidden[rows, :, slot].float() for slot in slots]

    def take(self, rows, length: int | None = None) -> "StoredDrafterData":
        cut = slice(None, length)
        return StoredDrafterData(self.tokens[rows, cut], self.hidden[rows, cut], self.top_ids[rows, cut],
                                 self.top_probs[rows, cut], self.layer_ids)


def read_manifest(folder: Path) -> dict:
    path = Path(folder) / "manifest.json"
    if not path.exists():
        raise UserError(f"no drafter data in {folder}: make it with `python -m core.train.drafter_data`")
    return json.loads(path.read_text(encoding="utf-8"))


def read_shard(path: Path, layer_ids: tuple[int, ...]) -> StoredDrafterData:
    with safe_open(str(path), "pt") as f:
        return StoredDrafterData(f.get_tensor("tokens").long(), f.get_tensor("hidden"), f.get_tensor("top_ids").long(),
                                 f.get_tensor("top_probs"), layer_ids)


def _shards_to_read(folder: Path, max_positions: int | None, target_model) -> tuple[tuple[int, ...], list[Path]]:
    manifest = read_manifest(folder)
    if target_model is not None and manifest["target"] != target_fingerprint(target_model):
        raise UserError(f"the drafter data in {folder} was made by another target")
    settings = manifest["settings"]
    per_shard = settings["shard_sequences"] * settings["seq_len"]
    indices = sorted(done_shards(folder))  # the shards there now (a build may be adding more)
    if max_positions is not None:
        indices = indices[: -(-max_positions // per_shard)]
    return tuple(settings["layers"]), [shard_path(folder, i) for i in indices]


def iter_shards(folder: Path, max_positions: int | None = None, target_model=None) -> Iterator[StoredDrafterData]:
    """The shards in plan order (each a ``StoredDrafterData`` of ``shard_sequences`` sequences),
    enough for ``max_positions`` (whole shards); only shards already written are read, so this
    works while a build is running. With ``target_model``, checks the data is that target's."""
    layer_ids, paths = _shards_to_read(Path(folder), max_positions, target_model)
    for path in paths:
        yield read_shard(path, layer_ids)


def _sequences_in(path: Path) -> int:
    with safe_open(str(path), "pt") as f:
        return f.get_slice("tokens").get_shape()[0]


def load(folders: Path | Sequence[Path], max_positions: int | None = None, target_model=None) -> StoredDrafterData:
    """The shards of :func:`iter_shards` as one ``DrafterData`` for core.train.eagle /
    core.train.medusa: bf16 hidden states, about ``2 * H * len(layers) + 140`` bytes a position
    in RAM (5.3 GB for 1M Gemma positions), filled shard by shard so the peak is that plus one shard.
    Several folders (made with other settings, e.g. another ``--distill-share``) are read one after
    the other into the same data; they must keep the same layers and sequence length."""
    folders = [Path(folders)] if isinstance(folders, (str, Path)) else [Path(f) for f in folders]
    layer_ids, paths = None, []
    for folder in folders:
        layers, found = _shards_to_read(folder, max_positions, target_model)
        if not found:
            raise UserError(f"the drafter data in {folder} has no shard yet")
        if layer_ids is not None and layers != layer_ids:
            raise UserError(f"the drafter data in {folder} keeps layers {list(layers)}, the first folder "
                            f"{list(layer_ids)}: data of one training run must keep the same layers")
        layer_ids, paths = layers, paths + found
    fields = ("tokens", "hidden", "top_ids", "top_probs")
    first = read_shard(paths[0], layer_ids)
    sizes = [_sequences_in(path) for path in paths]
    out = {name: torch.empty((sum(sizes), *getattr(first, name).shape[1:]), dtype=getattr(first, name).dtype)
           for name in fields}
    start = 0
    for number, (path, rows) in enumerate(zip(paths, sizes)):
        shard = first if number == 0 else read_shard(path, layer_ids)
        for name in fields:
            if getattr(shard, name).shape[1:] != out[name].shape[1:]:
                raise UserError(f"{path}: sequences of another length than the first folder's")
            out[name][start : start + rows] = getattr(shard, name)
        start += rows
    return StoredDrafterData(**out, layer_ids=layer_ids)


# ---- command line ------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> tuple[PipelineSettings, RunOptions, bool]:
    defaults = PipelineSettings()
    parser = argparse.ArgumentParser(prog="python -m core.train.drafter_data", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default=defaults.preset, help="target: gemma-270m, tiny, or a model folder")
    parser.add_argument("--budget-tokens", type=int, required=True,
                        help="training positions to have (rounded up to whole shards); a larger one later appends")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--batch-size", type=int, default=8, help="sequences per teacher-forced forward (default 8)")
    parser.add_argument("--gen-batch", type=int, default=32, help="prompts continued together (default 32)")
    parser.add_argument("--out", type=Path, help="data folder (default: under the user's cache, named by the key)")
    parser.add_argument("--seq-len", type=int, default=defaults.seq_len)
    parser.add_argument("--shard-sequences", type=int, default=defaults.shard_sequences)
    parser.add_argument("--distill-share", type=float, default=defaults.distill_share,
                        help=f"share of sequences that are the target's greedy continuations (default "
                             f"{defaults.distill_share}; decoding is slow on a CPU, raise it on a GPU)")
    parser.add_argument("--chat-share", type=float, default=defaults.chat_share,
                        help="share of continued prompts that are chat-style (the rest: document openings)")
    parser.add_argument("--prompt-tokens", type=int, default=defaults.prompt_tokens,
                        help="longest document opening continued, BOS included")
    parser.add_argument("--chat-prompt-tokens", type=int, default=defaults.chat_prompt_tokens,
                        help="longest chat-style prompt continued, BOS included")
    parser.add_argument("--loop-ngram", type=int, default=defaults.loop_ngram,
                        help="a continued token repeats when the n-gram it ends occurred earlier in its sequence")
    parser.add_argument("--loop-keep", type=int, default=defaults.loop_keep,
                        help="repeating tokens in a row after which a continuation breaks out of its loop (0: never)")
    parser.add_argument("--layers", help="hidden_states indices to keep, comma-separated (default: 1, L/2, L-3, L)")
    parser.add_argument("--top-k", type=int, default=defaults.top_k)
    parser.add_argument("--rescore", type=int, default=defaults.rescore,
                        help="LM-head candidates from a bf16 pass rescored in float32 (0: the whole head in float32)")
    parser.add_argument("--sources", default=",".join(defaults.sources),
                        help=f"text sources, comma-separated (default all: {', '.join(defaults.sources)})")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--print-folder", action="store_true",
                        help="print the data folder these settings use (made or not) and exit")
    args = parser.parse_args(argv)
    settings = PipelineSettings(
        preset=args.preset, seq_len=args.seq_len, shard_sequences=args.shard_sequences,
        distill_share=args.distill_share, chat_share=args.chat_share, prompt_tokens=args.prompt_tokens,
        chat_prompt_tokens=args.chat_prompt_tokens, loop_ngram=args.loop_ngram, loop_keep=args.loop_keep,
        layers=tuple(int(i) for i in args.layers.split(",")) if args.layers else None, top_k=args.top_k,
        rescore=args.rescore,
        sources=tuple(filter(None, args.sources.split(","))), seed=args.seed,
    )
    run = RunOptions(args.budget_tokens, args.device, args.threads, args.batch_size, args.gen_batch, args.out)
    return settings, run, args.print_folder


def main(argv: list[str] | None = None) -> int:
    settings, run, print_folder = parse_args(argv)
    try:
        if print_folder:
            print(folder_for(settings, run))
        else:
            build(settings, run)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def load_stored_data(choice: str, target) -> tuple[str, DrafterData]:
    """``--data``: a folder, "cache" -- this target's data under the user's cache (the fullest
    one) -- or several of them, comma-separated (a name alone is a folder under the cache); returns
    the data and its key, the folder names joined by "+"."""
    def resolve(entry: str) -> Path:
        if entry != "cache":
            folder = Path(entry).expanduser()
            return folder if folder.exists() or len(folder.parts) > 1 else cache_root() / entry
        fingerprint = target_fingerprint(target.model)
        mine = [folder for folder in sorted(cache_root().glob("*-*")) if (folder / "manifest.json").exists()
                and read_manifest(folder)["target"] == fingerprint]
        if not mine:
            raise UserError(f"no drafter data of this target under {cache_root()}: make it with "
                            "`python -m core.train.drafter_data --preset gemma-270m --budget-tokens 1000000`")
        return max(mine, key=lambda folder: len(done_shards(folder)))

    def name(folder: Path) -> str:
        """The folder's name, with its shard count while a build of it is unfinished: a run on part of
        the data is cached apart from the run on all of it."""
        manifest, shards = read_manifest(folder), len(done_shards(folder))
        asked = manifest["runs"][-1]["budget_tokens"] if manifest["runs"] else 0
        per_shard = manifest["settings"]["seq_len"] * manifest["settings"]["shard_sequences"]
        return folder.name if shards * per_shard >= asked else f"{folder.name}@{shards}"

    folders = [resolve(entry.strip()) for entry in choice.split(",") if entry.strip()]
    data = load(folders, target_model=target.model)
    print(f"[data] {', '.join(map(str, folders))}: {len(data):,} sequences, {data.tokens.numel():,} positions",
          file=sys.stderr)
    return "+".join(map(name, folders)), data


if __name__ == "__main__":
    sys.exit(main())
