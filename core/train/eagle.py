"""Train the EAGLE feature drafter for a target.

    python -m core train eagle  --preset tiny [--seed 0]      # EAGLE(-2): last-layer feature
    python -m core train eagle3 --preset tiny [--seed 0]      # EAGLE-3: fused features + training-time test

Both learn the target's own next-token law (its top-k probabilities) for token t+2 from the
pair (target feature at t, token t+1). ``eagle`` also regresses its output onto the target's
next feature (EAGLE's feature loss), since at inference that output is fed back as a feature.

**Training-time test** (``--ttt-steps J``, EAGLE-3's default here is 4): after the ordinary
teacher-forced pass, the drafter is unrolled J-1 more times on its own outputs, exactly as it
drafts at inference. Unroll step j, for every anchor t at once, feeds (the drafter's own
output of step j-1 at t, token t+j) at position t+j-1; it attends to the step-1 entries up
to t -- the positions whose true target features are known -- and to its own chain at t::

    keys:        step 1 (true features)      step 2 ...   step j
    anchor t:    s <= t (causal)             s == t       s == t      (one diagonal per step)

Its output is trained on the target's law for token t+j+1. The drafter thus learns from the
states it really meets when drafting deep, instead of only from perfect target features.
``--ttt-steps 1`` trains the same drafter without it (the ablation in docs/drafters.md).

**P-EAGLE** (``python -m core train peagle``) is trained by the same unroll with one change: unroll
step j >= 2 feeds the placeholder pair of depth j (``FeatureDrafterNet.placeholders``: anchor t's
feature shifted by a learned offset, a learned token embedding) in place of (own output, token t+j),
under the same mask -- exactly the one forward it drafts with
(``core.drafters.peagle``). ``--init`` starts it from an EAGLE-3 drafter of the same shape (the
placeholders are new); ``--data`` trains on stored drafter data (``core.train.drafter_data``) instead
of a small set built from the corpus; progress is checkpointed under the user's cache every 100
steps, so the same command resumes an interrupted run.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import asdict, replace
from pathlib import Path

import torch
from torch.nn import functional as F
from transformers.cache_utils import DynamicCache

from core.drafters.base import DraftShape
from core.drafters.eagle import Eagle3Drafter, EagleDrafter
from core.drafters.peagle import PEagleDrafter
from core.drafters.eagle_net import LAYOUTS, PLACEHOLDERS, FeatureDrafterConfig, FeatureDrafterNet
from core.drafters.vocab import draft_rows
from core.drafters.weights import load_folder, save_folder
from core.common.errors import UserError
from core.common.files import lab_cache
from core.models.fingerprint import target_fingerprint
from core.models.loading import read_json
from core.train import heldout
from core.train.drafter_data import load_stored_data
from core.train.features import (DataSettings, DrafterData, add_common_arguments, draftable_cross_entropy, prepare,
                                 training_record)
from core.train.loop import TrainConfig, count_parameters, seeded, short_warmup, train

DRAFTERS = {cls.name: cls for cls in (EagleDrafter, Eagle3Drafter, PEagleDrafter)}  # each carries its training ``recipe``
EVAL_DEPTH = 6  # unroll depth of the held-out chain accuracy


def default_layers(kind: str, num_layers: int) -> tuple[int, ...]:
    """eagle: the last layer (after the final norm); eagle3: low, middle and that last layer."""
    return DRAFTERS[kind].recipe.layers(num_layers)


def draft_vocabulary(data: DrafterData, choice: str, vocab_size: int) -> torch.Tensor | None:
    """Target ids the drafter's LM head keeps, sorted; None keeps the whole vocabulary.

    ``choice``: "all"; a number N (the N tokens the target chooses most often in ``data``); or
    "auto", the fewest such tokens, in multiples of 256, that cover 99.9% of its greedy choices.
    """
    if choice == "all":
        return None
    counts = torch.bincount(data.greedy.flatten(), minlength=vocab_size)
    if choice == "auto":
        covered = counts.sort(descending=True).values.cumsum(0) / counts.sum()
        size = min(vocab_size, -(-(int((covered < 0.999).sum()) + 1) // 256) * 256)
    else:
        size = int(choice)
    if not 1 <= size <= vocab_size:
        raise UserError(f"--draft-vocab must be all, auto or a number between 1 and {vocab_size} (got {choice})")
    return None if size == vocab_size else torch.sort(torch.topk(counts, size).indices).values


def rope_theta(config) -> float:
    """The target's RoPE base; for targets with one per layer type (Gemma 3), the local layers'."""
    rope = config.rope_parameters
    if "rope_theta" not in rope:
        rope = rope.get("sliding_attention") or next(iter(rope.values()))
    return float(rope["rope_theta"])


def new_net(target_model, kind: str, layers: tuple[int, ...], intermediate_size: int | None = None,
            draft_vocab: torch.Tensor | None = None, layout: str = "lab",
            placeholders: str = "depth") -> FeatureDrafterNet:
    """A fresh drafter for ``target_model``: one decoder layer shaped like the target's. A P-EAGLE with
    ``placeholders`` "shared" reads the embedding of the target's padding token (or token 0) at every
    placeholder, as vLLM's ``ptd_token_id``."""
    config = target_model.config.get_text_config()
    pad = getattr(config, "pad_token_id", None)
    net_config = FeatureDrafterConfig(
        target_layers=tuple(layers), hidden_size=config.hidden_size,
        intermediate_size=intermediate_size or config.intermediate_size,
        num_attention_heads=config.num_attention_heads, num_key_value_heads=config.num_key_value_heads,
        max_position_embeddings=config.max_position_embeddings,
        rope_theta=rope_theta(config), rms_norm_eps=config.rms_norm_eps,
        output_norm=DRAFTERS[kind].recipe.output_norm, draft_vocab_size=None if draft_vocab is None else len(draft_vocab),
        layout=layout, parallel_tokens=DRAFTERS[kind].recipe.parallel_tokens, placeholders=placeholders,
        ptd_token_id=pad if isinstance(pad, int) and pad >= 0 else 0,
    )
    embed = target_model.get_input_embeddings().weight
    head = target_model.get_output_embeddings().weight
    return FeatureDrafterNet(net_config, embed, head, draft_vocab)


NEW_IN_PEAGLE = {"mask_features", "mask_embeddings", "mask_hidden"}  # what a P-EAGLE adds to the EAGLE-3 it starts from


def start_from(net: torch.nn.Module, folder: Path, target) -> None:
    """Begin training from the weights in ``folder`` (a drafter of the same kind and shape, or the
    EAGLE-3 a P-EAGLE starts from: its placeholders are then new); the folder's draft vocabulary is
    not taken: the LM head is the target's, so ``net`` may keep another one."""
    config = read_json(folder / "config.json", "drafter config") if (folder / "config.json").is_file() else {}
    _, state = load_folder(folder, str(config.get("kind", folder.name)), target.model)
    state = {name: tensor.float() for name, tensor in state.items() if name != "draft_vocab"}
    try:
        missing, unexpected = net.load_state_dict(state, strict=False)
    except RuntimeError as error:  # a weight of another size
        raise UserError(f"{folder} is not a drafter of this shape: {error}") from None
    if unexpected or set(missing) - {"draft_vocab"} - (NEW_IN_PEAGLE if net.config.parallel_tokens else set()):
        raise UserError(f"{folder} is not a drafter of this shape (missing {missing}, unexpected {unexpected})")
    print(f"[{folder.name}] starting from {folder}", file=sys.stderr, flush=True)


# ---- the unrolled forward ------------------------------------------------------------------
def unroll_mask(n: int, step: int, dtype=torch.float32) -> torch.Tensor:
    """[1, 1, n, step * n] additive mask of unroll ``step`` (1-based): causal over the step-1
    block, then the diagonal of every later step's block (each anchor sees its own chain)."""
    allowed = torch.zeros(n, step * n, dtype=torch.bool)
    allowed[:, :n] = torch.ones(n, n, dtype=torch.bool).tril()
    for block in range(1, step):
        allowed[:, block * n : (block + 1) * n] = torch.eye(n, dtype=torch.bool)
    mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[None, None]


def unroll(net: FeatureDrafterNet, features: torch.Tensor, tokens: torch.Tensor, steps: int) -> list[torch.Tensor]:
    """Outputs of unroll steps 1..``steps`` for every anchor t = 0..T-2.

    features [B, T, H] (fused target features), tokens [B, T] -> ``steps`` tensors [B, T-1, H];
    entry t of step j is the drafter's guess of the feature at position t+j, made from the true
    features up to t and its own outputs after (P-EAGLE: its placeholders after). Tokens past the
    end are padded (their outputs are not trained on).
    """
    batch, length = tokens.shape
    n = length - 1
    anchors = torch.arange(n)
    cache = DynamicCache()
    outputs = []
    out = features[:, :n]
    parallel = net.config.parallel_tokens > 0
    if parallel:  # every anchor's placeholders: [B, n, steps - 1, H] and [steps - 1, H]
        mask_features, mask_embeddings = net.placeholders(features[:, :n], steps - 1)
    for step in range(1, steps + 1):
        positions = (anchors + step - 1)[None].expand(batch, n)
        mask = unroll_mask(n, step, features.dtype)
        if parallel and step > 1:  # the placeholder pair of this depth at every anchor
            out = net(mask_features[:, :, step - 2], None, positions, mask, cache,
                      embedded=mask_embeddings[step - 2].expand(batch, n, -1))
        else:
            step_tokens = F.pad(tokens[:, step:], (0, step - 1))  # token t+step for anchor t
            out = net(out, step_tokens, positions, mask, cache)
        outputs.append(out)
    return outputs


PARALLEL_SHARE = 0.5  # P-EAGLE: the share of anchors whose placeholder depths are scored each step


def unrolled_loss(net: FeatureDrafterNet, data: DrafterData, rows: torch.Tensor, steps: int,
                  feature_weight: float, vocab_index: torch.Tensor | None,
                  generator: torch.Generator | None = None, depth_decay: float = 1.0) -> torch.Tensor:
    """Mean over unroll steps of the token loss (+ the feature loss for ``eagle``) on ``rows``,
    step j weighted ``depth_decay ** (j - 1)`` (1: every depth alike; below 1 the shallow depths, which
    every accepted deeper token needs first, count more -- Medusa's and HASS's decay).

    A P-EAGLE scores its placeholder depths (steps >= 2) on a random ``PARALLEL_SHARE`` of the anchors,
    drawn anew per depth (``generator``): the LM head over every anchor at every depth is most of a
    step's cost, and a depth's law needs no more samples than the real pairs' (P-EAGLE's COD sampling
    thins the deeper depths the same way)."""
    features = net.fuse_target(data.layers(net.config.target_layers, rows))  # [B, T, H]
    if feature_weight > 0:
        true_features = data.layers((data.hidden.shape[2],), rows)[0]  # [B, T, H] last layer, after the norm
    length = data.tokens.shape[1]
    losses = []
    for step, out in enumerate(unroll(net, features, data.tokens[rows], steps), start=1):
        valid = length - step  # anchors whose label (position t+step) exists
        anchors = torch.arange(valid)
        if net.config.parallel_tokens and step > 1:
            anchors = torch.randperm(valid, generator=generator)[: max(1, round(valid * PARALLEL_SHARE))].sort().values
        logits = net.draft_logits(out[:, anchors]).flatten(0, 1)  # [B * anchors, draft vocab]
        ids = data.top_ids[rows][:, anchors + step].flatten(0, 1)
        probs = data.top_probs[rows][:, anchors + step].flatten(0, 1)
        loss = draftable_cross_entropy(logits, ids, probs, vocab_index)
        if feature_weight > 0:
            loss = loss + feature_weight * F.smooth_l1_loss(out[:, :valid], true_features[:, step:])
        losses.append(loss)
    weights = depth_decay ** torch.arange(len(losses), dtype=torch.float32)
    return (torch.stack(losses) * weights).sum() / weights.sum()


def train_config(steps: int, batch: int, lr: float) -> TrainConfig:
    """EAGLE's optimisation: AdamW (betas 0.9, 0.95), gradient clipping at 1, no weight decay, fp32."""
    return TrainConfig(steps=steps, batch_size=batch, lr=lr, warmup_steps=short_warmup(steps), weight_decay=0.0,
                       bf16_autocast=False)


def train_net(net: FeatureDrafterNet, data: DrafterData, config: TrainConfig, steps: int, feature_weight: float,
              generator: torch.Generator, name: str = "eagle", checkpoint: Path | None = None,
              depth_decay: float = 1.0) -> float:
    """Train in place for ``config.steps`` optimiser steps with ``steps`` unroll steps (weighted by
    ``depth_decay``, see :func:`unrolled_loss`); returns seconds.
    ``checkpoint``: resume from / save progress to this file (see :func:`core.train.loop.train`)."""
    vocab_index = draft_rows(net.draft_vocab, net.vocab_size)

    def loss_of(step: int) -> torch.Tensor:
        rows = torch.randint(len(data), (config.batch_size,), generator=generator)
        return unrolled_loss(net, data, rows, steps, feature_weight, vocab_index, generator, depth_decay)

    return train(net, loss_of, config, name, checkpoint, generator)


@torch.inference_mode()
def chain_hits(net: FeatureDrafterNet, data: DrafterData, prompt_len: int, depth: int = EVAL_DEPTH) -> torch.Tensor:
    """[N, anchors, depth] bool: greedy chain drafting replayed on greedy text ``data`` from every
    anchor after the prompt; entry j is True when the chain is right up to depth j+1 (what greedy
    verification of a depth-``depth`` chain would accept)."""
    rows = torch.arange(len(data))
    features = net.fuse_target(data.layers(net.config.target_layers, rows))
    outputs = unroll(net, features, data.tokens, depth)
    length = data.tokens.shape[1]
    anchors = torch.arange(prompt_len - 1, length - depth)
    correct = torch.stack([
        net.target_logits(out[:, anchors]).argmax(-1) == data.greedy[:, anchors + step]
        for step, out in enumerate(outputs, start=1)
    ], dim=-1)
    return correct.long().cumprod(-1).bool()


def chain_accuracy(net: FeatureDrafterNet, data: DrafterData, prompt_len: int, depth: int = EVAL_DEPTH) -> dict:
    """``accepted[j]``: share of anchors of :func:`chain_hits` accepted up to depth j+1;
    ``conditional[j]``: the same given depth j was -- flat when errors do not build up, falling when they do.
    """
    accepted = chain_hits(net, data, prompt_len, depth).float().mean(dim=(0, 1))
    conditional = accepted / torch.cat([torch.ones(1), accepted[:-1]])
    return {"accepted": [round(float(a), 4) for a in accepted], "conditional": [round(float(c), 4) for c in conditional]}


def decode_anchors(hits: torch.Tensor) -> torch.Tensor:
    """[depth]: the acceptance of :func:`chain_hits` counted only at the anchors a greedy decode
    drafts from -- the first, then each one after the accepted tokens and the target's own token
    (a decode never drafts from right after a hit, so it sees the harder positions more often)."""
    taken = []
    for row in hits:
        anchor = 0
        while anchor < len(row):
            taken.append(row[anchor])
            anchor += int(row[anchor].sum()) + 1
    return torch.stack(taken).float().mean(0)


# ---- command line ----------------------------------------------------------------------------
def run_digest(args: argparse.Namespace, target) -> str:
    """What names one training run's checkpoint: its options (but where it writes and how many threads),
    the target, and the weights it starts from."""
    options = {k: str(v) for k, v in sorted(vars(args).items()) if k not in ("out", "overwrite", "threads")}
    digest = hashlib.sha256(json.dumps([options, target_fingerprint(target.model)]).encode())
    if args.init is not None:
        digest.update((args.init / "model.safetensors").read_bytes())
    return digest.hexdigest()[:12]


def add_arguments(parser: argparse.ArgumentParser, kind: str = "eagle") -> None:
    """Options of ``python -m core train eagle`` (``kind="eagle3"`` for ``train eagle3``)."""
    recipe = DRAFTERS[kind].recipe
    parser.set_defaults(kind=kind)
    add_common_arguments(parser, steps=300, batch=8, lr=2e-3)
    parser.add_argument("--ttt-steps", type=int, default=recipe.ttt_steps,
                        help="training-time test: unroll steps on the drafter's own outputs (1 = off; "
                             f"default {recipe.ttt_steps})")
    parser.add_argument("--layers", help="target hidden_states indices to read, comma-separated "
                                         "(default: eagle the last; eagle3 low,middle,last)")
    parser.add_argument("--feature-weight", type=float, default=recipe.feature_weight,
                        help=f"weight of the feature regression loss (default {recipe.feature_weight:g})")
    parser.add_argument("--depth-decay", type=float, default=1.0,
                        help="weight unroll step j by DECAY**(j-1) (default 1: every depth alike; e.g. 0.5 puts "
                             "depth 1 first)")
    parser.add_argument("--intermediate-size", type=int, help="MLP width of the drafter layer (default: the target's)")
    parser.add_argument("--draft-vocab", default="auto",
                        help="LM head rows the drafter keeps: all, N (the N tokens the target chooses most), or auto "
                             "(enough to cover 99.9%% of its greedy choices; default)")
    parser.add_argument("--init", type=Path,
                        help="start from the drafter in this folder (same shape; peagle: an eagle3 folder, e.g. "
                             "assets/gemma-270m/eagle3, whose network it extends with its placeholders)")
    parser.add_argument("--data", help="train on stored drafter data (python -m core.train.drafter_data): a folder, "
                                       "several comma-separated, or \"cache\" for this target's (default: a small set "
                                       "built from the corpus)")
    if recipe.fused_layers:
        parser.add_argument("--layout", choices=LAYOUTS, default="lab",
                            help="lab (default) or reference: EAGLE-3's reference layer, the one vLLM loads "
                                 "(python -m core export; use --layers below the last, e.g. 1,2,3)")
    if recipe.parallel_tokens:
        parser.add_argument("--placeholders", choices=PLACEHOLDERS, default="depth",
                            help="depth (default): a learned offset and token embedding per depth; shared: vLLM's "
                                 "parallel drafting, one learned mask_hidden and the padding token's embedding "
                                 "(with --layout reference, what python -m core export --drafter peagle writes)")


def run(args: argparse.Namespace) -> int:
    """Train, save, and report held-out numbers; returns an exit code."""
    kind = args.kind
    setup = prepare(args, kind, build_train=not args.data)
    target = setup.target
    if args.data:
        args.data, train = load_stored_data(args.data, target)
        setup = replace(setup, train=train)
    num_layers = target.model.config.get_text_config().num_hidden_layers
    layers = tuple(int(i) for i in args.layers.split(",")) if args.layers else default_layers(kind, num_layers)
    if not all(1 <= i <= num_layers for i in layers):
        raise UserError(f"--layers must be hidden_states indices between 1 and {num_layers} (got {args.layers})")
    generator = seeded(args.seed)
    draft_vocab = draft_vocabulary(setup.train, args.draft_vocab, target.vocab_size)
    net = new_net(target.model, kind, layers, args.intermediate_size, draft_vocab, getattr(args, "layout", "lab"),
                  getattr(args, "placeholders", "depth"))
    if args.init is not None:
        start_from(net, args.init, target)
    print(f"[{kind}] {count_parameters(net):,} parameters, layers {layers}, "
          f"draft vocabulary {net.config.draft_vocab_size or 'all'}, TTT steps {args.ttt_steps}", file=sys.stderr)
    checkpoint = lab_cache("train", f"{kind}-{run_digest(args, target)}.ckpt")  # the same command resumes
    seconds = train_net(net, setup.train, train_config(args.steps, args.batch, args.lr), args.ttt_steps,
                        args.feature_weight, generator, name=kind, checkpoint=checkpoint,
                        depth_decay=args.depth_decay)
    chain = chain_accuracy(net, setup.heldout, DataSettings.prompt_len)
    print(f"[{kind}] held-out chain acceptance by depth {chain['accepted']}, "
          f"conditional {chain['conditional']}", file=sys.stderr)
    saved = {"kind": kind, "net": asdict(net.config), "target": target_fingerprint(target.model),
             "training": training_record(args, seconds), "heldout_chain": chain}
    save_folder(setup.out, saved, net)
    drafter = DRAFTERS[kind]
    heldout.record_in_folder(target, kind, saved, setup.out, net, [
        (f"{kind} k=5", lambda: drafter(DraftShape(1, 5), target, str(setup.out))),
        (f"{kind} tree 4x5 N=24", lambda: drafter(DraftShape(4, 5), target, str(setup.out), eagle_nodes=24)),
    ])
    return 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="python -m core.train.eagle", description=__doc__)
    _parser.add_argument("kind", choices=sorted(DRAFTERS))
    _known, _ = _parser.parse_known_args()
    add_arguments(_parser, _known.kind)
    sys.exit(run(_parser.parse_args()))
