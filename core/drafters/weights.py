"""Weights of the learned drafters (Medusa heads, EAGLE layers): where they live, how they are
saved and loaded, and the check that they were trained for the target in use.

A learned drafter folder holds ``config.json`` and ``model.safetensors``. It stores only what
was trained: the target's embedding and LM head are read from the target at load time, so a
folder is a few MB. By default it sits next to the target it was trained for, e.g.
``assets/tiny/target`` -> ``assets/tiny/medusa``.

A folder's module is prepared for inference once per target and shared by every request that
drafts with it (``prepared``), as a server loads its drafter once: a drafter keeps what belongs to
one request (its KV, its context columns) outside the module, which nothing changes after.
"""
from __future__ import annotations

import json
import os
import threading
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Annotated, Callable, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from safetensors.torch import save_file

from core.drafters import checkpoint
from core.drafters.base import DrafterOptions
from core.drafters.checkpoint import read_safetensors
from core.common.errors import UserError, listed
from core.common.files import write_atomic, write_text_atomic
from core.common.limits import MAX_CONTEXT, MAX_DEPTH, MAX_HEADS, MAX_HIDDEN, MAX_LAYERS, MAX_TOKEN_ID
from core.models.fingerprint import target_fingerprint
from core.models.loading import check_memory, check_symlinks, drafter_home, fields_error, read_json


class LearnedOptions(DrafterOptions):
    """Options of every drafter with trained weights of its own."""

    drafter_weights: str | None = Field(
        None, min_length=1, max_length=1000,
        description="medusa/eagle/eagle3/peagle weights folder (default: the one next to the target)")
    draft_precision: Literal["auto", "float32"] = Field(
        "auto", description="auto: draft through fp16 products on CPU where fbgemm runs (faster; only what is "
                            "proposed can change, never the output); float32: the weights as trained, as a float32 "
                            "peer such as vLLM-CPU computes them")

    draft_vocab_only: bool = Field(
        False, description="propose from the reduced draft vocabulary alone, as vLLM drafts (default: also the "
                           "request's own tokens it leaves out, scored by the same borrowed head rows)")

    @property
    def half_products(self) -> bool:
        return self.draft_precision == "auto"


def default_folder(target_path: str, kind: str) -> Path:
    """``<target folder>/../<kind>``, or ``<preset's drafter folder>/<kind>`` for a preset's target
    (``assets/gemma-270m/<kind>``): where ``python -m core train <kind>`` writes by default."""
    return drafter_home(target_path) / kind


def save_folder(folder: Path, config: dict, module: torch.nn.Module) -> None:
    """Write ``config.json`` and the module's own weights (``model.safetensors``) into ``folder``,
    each to a temporary file renamed into place."""
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to("cpu").contiguous() for k, v in module.state_dict().items()}
    write_atomic(folder / "model.safetensors", lambda tmp: save_file(state, str(tmp)))
    write_text_atomic(folder / "config.json", json.dumps(config, ensure_ascii=False, indent=2) + "\n")


# strict fields: JSON's true is not a size of 1, nor 1 a yes (pydantic would coerce them; transformers'
# configs would refuse them later with a traceback)
Size = Annotated[int, Field(strict=True, ge=1, le=MAX_HIDDEN)]


class NetFields(BaseModel):
    """An EAGLE / EAGLE-3 drafter's ``net`` (``core.drafters.eagle_net.FeatureDrafterConfig``), in range."""

    model_config = ConfigDict(extra="forbid")

    target_layers: Annotated[list[Annotated[int, Field(strict=True, ge=0, le=MAX_LAYERS)]],
                             Field(min_length=1, max_length=8)]
    hidden_size: Size
    intermediate_size: Annotated[int, Field(strict=True, ge=1, le=8 * MAX_HIDDEN)]
    num_attention_heads: Annotated[int, Field(strict=True, ge=1, le=MAX_HEADS)]
    num_key_value_heads: Annotated[int, Field(strict=True, ge=1, le=MAX_HEADS)]
    max_position_embeddings: Annotated[int, Field(strict=True, ge=1, le=MAX_CONTEXT)]
    rope_theta: Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)] = 10000.0
    rms_norm_eps: Annotated[float, Field(strict=True, gt=0, lt=1)] = 1e-6
    output_norm: Annotated[bool, Field(strict=True)] = False
    draft_vocab_size: Annotated[int, Field(strict=True, ge=1, le=MAX_TOKEN_ID)] | None = None
    layout: Literal["lab", "reference"] = "lab"
    parallel_tokens: Annotated[int, Field(strict=True, ge=0, lt=MAX_DEPTH)] = 0
    placeholders: Literal["depth", "shared"] = "depth"
    ptd_token_id: Annotated[int, Field(strict=True, ge=0, lt=MAX_TOKEN_ID)] = 0

    @model_validator(mode="after")
    def _heads_divide(self) -> "NetFields":
        if self.hidden_size % self.num_attention_heads or self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must divide hidden_size, and num_key_value_heads the heads")
        return self

    def parameters(self) -> int:
        hidden, kv = self.hidden_size, self.hidden_size // self.num_attention_heads * self.num_key_value_heads
        shared = self.placeholders == "shared" and self.parallel_tokens  # one mask_hidden; else two vectors per depth
        placeholders = len(self.target_layers) * hidden if shared else 2 * self.parallel_tokens * hidden
        return (3 * hidden * (len(self.target_layers) + 1) * hidden + 4 * hidden * kv
                + 3 * hidden * self.intermediate_size + placeholders)


class HeadsFields(BaseModel):
    """Medusa's ``heads`` (``core.drafters.medusa.MedusaConfig``), in range."""

    model_config = ConfigDict(extra="forbid")

    num_heads: Annotated[int, Field(strict=True, ge=1, le=MAX_DEPTH)]
    hidden_size: Size
    own_lm_head: Annotated[bool, Field(strict=True)] = False
    draft_vocab_size: Annotated[int, Field(strict=True, ge=1, le=MAX_TOKEN_ID)] | None = None


class DrafterFields(BaseModel):
    """What the lab reads from a drafter folder's ``config.json``; other records (held-out numbers) pass."""

    model_config = ConfigDict(extra="allow")

    kind: Literal["medusa", "eagle", "eagle3", "peagle"]
    target: dict | None = None
    net: NetFields | None = None
    heads: HeadsFields | None = None


def load_folder(folder: str | Path, kind: str, target_model) -> tuple[dict, dict[str, torch.Tensor]]:
    """Read a drafter folder of ``kind`` and check it was trained for ``target_model``.

    Returns (config, state_dict on CPU). Raises UserError, naming the training command, when the
    folder is missing, holds another kind of drafter, or was trained for another target; and
    naming the field or tensor when its config is out of range, its layer ids or draft vocabulary do
    not fit the target, a symlink leaves the folder, or its safetensors file is malformed. Names and
    shapes of the tensors are checked against the module built from the config by ``load_checked``.
    """
    folder = Path(folder)
    if folder.is_dir():
        check_symlinks(folder)
    if kind in checkpoint.KINDS and checkpoint.is_checkpoint(folder):  # exported for vLLM (python -m core export)
        config, state = _checked_vllm(folder, kind, target_model)
    else:
        config, state = _checked_lab(folder, kind, target_model)
    _check_against_target(folder, kind, config, state, target_model)
    return config, state


def _checked_lab(folder: Path, kind: str, target_model) -> tuple[dict, dict[str, torch.Tensor]]:
    config_file, weights_file = folder / "config.json", folder / "model.safetensors"
    if not (config_file.is_file() and weights_file.is_file()):
        raise UserError(
            f"no trained {kind} weights in {folder}: train them with "
            f"`python -m core train {kind} --target <target folder>` or pass --drafter-weights"
        )
    config = read_json(config_file, "drafter config")
    if config.get("kind") != kind:
        raise UserError(f"{folder} holds {str(config.get('kind'))[:40]!r} weights, not {kind!r}")
    expected = target_fingerprint(target_model)
    if config.get("target") != expected:
        raise UserError(
            f"the {kind} weights in {folder} were trained for another target "
            f"({str(config.get('target'))[:200]} != {expected}); retrain them for this target"
        )
    return config, read_safetensors(weights_file)


def _check_against_target(folder: Path, kind: str, config: dict, state: dict, target_model) -> None:
    """The config's fields in range, and its layer ids, hidden size and draft vocabulary the target's."""
    try:
        fields = DrafterFields.model_validate(config)
    except ValidationError as e:
        raise fields_error(f"{folder}/config.json", e) from None
    text = target_model.config.get_text_config()
    vocab = target_model.get_output_embeddings().weight.shape[0]
    part = fields.heads if kind == "medusa" else fields.net
    if part is None:
        raise UserError(f"{folder}/config.json: {'heads' if kind == 'medusa' else 'net'} is missing")
    if part.hidden_size != text.hidden_size:
        raise UserError(f"{folder}: hidden_size {part.hidden_size} is not the target's {text.hidden_size}")
    if kind != "medusa" and not all(i <= text.num_hidden_layers for i in part.target_layers):
        raise UserError(f"{folder}: target_layers must be hidden-state ids from 0 to {text.num_hidden_layers} "
                        "(the target's layers)")
    if kind != "medusa" and part.ptd_token_id >= vocab:
        raise UserError(f"{folder}: ptd_token_id {part.ptd_token_id} is not a token of the target's vocabulary "
                        f"of {vocab}")
    if part.draft_vocab_size is not None and part.draft_vocab_size > vocab:
        raise UserError(f"{folder}: draft_vocab_size is larger than the target's vocabulary of {vocab}")
    draft_vocab = state.get("draft_vocab")
    if draft_vocab is not None:
        if draft_vocab.dim() != 1 or draft_vocab.is_floating_point() or draft_vocab.dtype == torch.bool or \
                len(draft_vocab) != (part.draft_vocab_size or -1):
            raise UserError(f"{folder}: draft_vocab must be draft_vocab_size ({part.draft_vocab_size}) target ids")
        if len(draft_vocab) and (int(draft_vocab.min()) < 0 or int(draft_vocab.max()) >= vocab or
                                 len(torch.unique(draft_vocab)) != len(draft_vocab)):
            raise UserError(f"{folder}: draft_vocab must hold distinct target ids below {vocab}")
    elif part.draft_vocab_size is not None:
        raise UserError(f"{folder}: draft_vocab_size is set but the draft_vocab tensor is missing")
    if kind == "medusa":
        rows = part.draft_vocab_size or vocab
        parameters = part.num_heads * (part.hidden_size + 1) * part.hidden_size * (1 + (rows if part.own_lm_head else 0))
    else:
        parameters = part.parameters()
    check_memory(parameters, 4, f"the {kind} drafter in {folder}")


def load_checked(module: torch.nn.Module, state: dict[str, torch.Tensor], folder) -> None:
    """``module.load_state_dict(state)`` after checking names and shapes: a mismatch is a UserError
    naming the tensors, not a RuntimeError."""
    expected = {name: tuple(t.shape) for name, t in module.state_dict().items()}
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong = sorted(name for name in set(expected) & set(state) if tuple(state[name].shape) != expected[name])
    for what, names in (("missing tensors", missing), ("unexpected tensors", unexpected),
                        ("tensors of the wrong shape", wrong)):
        if names:
            shapes = f" (expected {expected[names[0]]})" if what.endswith("shape") else ""
            raise UserError(f"{folder}: {what}: {listed(names)}{shapes}")
    module.load_state_dict(state)


def _checked_vllm(folder: Path, kind: str, target_model) -> tuple[dict, dict[str, torch.Tensor]]:
    """An EAGLE-3 (or parallel-drafting P-EAGLE) checkpoint in vLLM's layout, read back
    (``core.drafters.checkpoint``); its LM head must be the target's, and a lab export also names the
    target it was trained for."""
    config, state = checkpoint.read_checkpoint(folder, target_model.get_output_embeddings().weight.detach())
    if config["kind"] != kind:
        raise UserError(f"{folder} holds a vLLM {config['kind']} checkpoint, not {kind} "
                        f"({'it has' if config['kind'] == 'peagle' else 'no'} mask_hidden for parallel drafting)")
    expected = target_fingerprint(target_model)
    if config["target"] not in (None, expected):
        raise UserError(f"the {kind} checkpoint in {folder} was exported for another target "
                        f"({config['target']} != {expected})")
    return {**config, "target": expected}, state


# ---- one prepared module per target and folder ------------------------------------------------
PREPARED_PER_TARGET = 8  # folders kept per target (most recently used); a running drafter holds its own
_prepared: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # target model -> OrderedDict
_prepared_lock = threading.Lock()


def prepared(folder: str | Path, kind: str, target_model, half_products: bool,
             make: Callable[[dict, dict[str, torch.Tensor]], torch.nn.Module]) -> tuple[dict, torch.nn.Module]:
    """(config, module) of the ``kind`` weights in ``folder`` for ``target_model``: read and checked by
    ``load_folder``, and ``make(config, state)`` builds the module ready to infer (loaded, on the
    target's device, half products or not). Built once and then shared until its config.json or
    model.safetensors changes; kept while the target model lives. Building costs 130-190 ms on
    gemma-270m (fbgemm's fp16 packing most of it; bench/drafter_build.py), more than a step, so
    the page and the batch engine build it once."""
    folder = Path(folder)
    key = (kind, str(folder.resolve()), half_products, os.environ.get("SDLAB_HALF_DRAFTERS", "1"),
           *(_stamp(folder / name) for name in ("config.json", "model.safetensors")))  # what load_folder reads
    with _prepared_lock:
        nets = _prepared.setdefault(target_model, OrderedDict())
        if key in nets:
            nets.move_to_end(key)
            return nets[key]
    config, state = load_folder(folder, kind, target_model)
    entry = (config, make(config, state))
    with _prepared_lock:
        nets[key] = entry
        while len(nets) > PREPARED_PER_TARGET:
            nets.popitem(last=False)
    return entry


def _stamp(file: Path) -> tuple[int, int] | None:
    try:
        stat = file.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size
