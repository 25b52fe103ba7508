"""EAGLE-3 drafters in the checkpoint layout vLLM's EAGLE-3 loader reads for a Llama target
(``vllm/model_executor/models/llama_eagle3.py``), and back.

``python -m core export --drafter eagle3 --preset tiny --format vllm OUT/`` (``core.cli.export``)
writes ``OUT/config.json``, ``OUT/model.safetensors`` and a model card ``OUT/README.md``.
Only a drafter trained in EAGLE-3's reference layout (``--layout reference``, see
``core.drafters.eagle3_layer``) maps one to one; the lab's own layout has a projection vLLM's
layer does not have, and is refused with the command that trains an exportable one.

Weights (lab name -> checkpoint name; docs/export.md says where vLLM reads each)::

    fuse.weight                    -> fc.weight                     [H, 3 * H_target]
    layer.<x>                      -> midlayer.<x>                  (input_layernorm, hidden_norm,
                                                                     self_attn.{q,k,v,o}_proj, post_attention_layernorm,
                                                                     mlp.{gate,up,down}_proj)
    norm.weight                    -> norm.weight
    target LM head rows draft_vocab -> lm_head.weight               [draft_vocab_size, H]
    draft_vocab                    -> d2t (target id - draft id), t2d (bool over the target vocabulary)
    mask_hidden (peagle, shared)   -> mask_hidden                   [3 * H_target]; config.json ptd_token_id

A P-EAGLE (``peagle``) exports when its placeholders are vLLM's (``placeholders`` "shared": one learned
``mask_hidden`` before the fusion and the embedding of ``ptd_token_id``); vLLM runs it with
``"parallel_drafting": true`` in its speculative config (``speculative_config``).

The token embedding is not written: vLLM then shares the target's, which is what the lab's
drafter reads too. ``read_checkpoint`` turns such a folder back into the lab's weights, so
``--drafter-weights OUT`` runs the exported drafter in the lab.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from core.common.errors import UserError, one_line
from core.common.files import write_atomic, write_text_atomic
from core.common.limits import (MAX_CONTEXT, MAX_DEPTH, MAX_HEADS, MAX_HIDDEN, MAX_LAYERS, MAX_SAFETENSORS_HEADER,
                                MAX_TOKEN_ID)
from core.models.loading import fields_error, read_json

ARCHITECTURE = "LlamaForCausalLMEagle3"
ARCHITECTURES = (ARCHITECTURE, "Eagle3LlamaForCausalLM")
LAB_FIELD = "speculative_decoding_lab"  # our own record in config.json; vLLM ignores it
RENAMES = (("fuse.", "fc."), ("layer.", "midlayer."), ("norm.", "norm."), ("mask_hidden", "mask_hidden"))
KINDS = ("eagle3", "peagle")  # what exports: EAGLE-3, and P-EAGLE with vLLM's placeholders


def speculative_config(folder: str | Path, k: int) -> dict:
    """vLLM's ``--speculative-config`` for the checkpoint in ``folder``: EAGLE-3, drafting in parallel
    when the checkpoint carries a ``mask_hidden`` (a P-EAGLE)."""
    spec = {"method": "eagle3", "model": str(folder), "num_speculative_tokens": k}
    config = read_json(Path(folder) / "config.json", "drafter config")
    if "ptd_token_id" in config:
        spec["parallel_drafting"] = True
    return spec


def is_checkpoint(folder: str | Path) -> bool:
    """Whether ``folder`` holds a vLLM EAGLE-3 checkpoint (by its config's architectures)."""
    config_file = Path(folder) / "config.json"
    if not config_file.is_file():
        return False
    try:
        config = read_json(config_file, "drafter config")
    except UserError:
        return False
    return any(a in ARCHITECTURES for a in config.get("architectures") or [])  # read_json: a dict


def _rename(name: str, pairs) -> str:
    for old, new in pairs:
        if name.startswith(old):
            return new + name[len(old):]
    raise UserError(f"no checkpoint name for the weight {name!r}")


def checkpoint_config(lab: dict, target_config, vocab_size: int) -> dict:
    """config.json for vLLM from the lab's drafter config and the target's (transformers) config."""
    net = lab["net"]
    layers = list(net["target_layers"])
    if net.get("parallel_tokens") and (net.get("placeholders") != "shared" or net.get("layout") != "reference"):
        raise UserError("this P-EAGLE is in the lab's own layout (a placeholder per depth, the lab's layer), which "
                        "vLLM's parallel drafting cannot run; train one in vLLM's: python -m core train peagle --layout "
                        "reference --placeholders shared --layers 1,2,3 --init <an eagle3-reference folder> "
                        "--out <folder> (docs/export.md)")
    if net.get("layout") != "reference" or not net.get("output_norm"):
        raise UserError("this drafter uses the lab's own EAGLE-3 layout, which vLLM's layer cannot run; train one "
                        "in EAGLE-3's reference layout: python -m core train eagle3 --layout reference "
                        "--layers 1,2,3 --out <folder> (docs/export.md)")
    if len(layers) != 3 or not all(1 <= i < target_config.num_hidden_layers for i in layers):
        raise UserError(f"vLLM fuses exactly 3 target layers, captured before layers 1..{target_config.num_hidden_layers - 1}"
                        f" (eagle_aux_hidden_state_layer_ids); this drafter reads hidden_states {layers}")
    hidden = net["hidden_size"]
    parallel = {"ptd_token_id": net["ptd_token_id"]} if net.get("parallel_tokens") else {}
    return {
        "architectures": [ARCHITECTURE],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": net["intermediate_size"],
        "num_hidden_layers": 1,
        "num_attention_heads": net["num_attention_heads"],
        "num_key_value_heads": net["num_key_value_heads"],
        "head_dim": hidden // net["num_attention_heads"],
        "hidden_act": "silu",
        "max_position_embeddings": net["max_position_embeddings"],
        "rms_norm_eps": net["rms_norm_eps"],
        "rope_theta": net["rope_theta"],
        "rope_parameters": {"rope_type": "default", "rope_theta": net["rope_theta"]},
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "vocab_size": vocab_size,
        "draft_vocab_size": net["draft_vocab_size"] or vocab_size,
        "target_hidden_size": target_config.hidden_size,
        "eagle_aux_hidden_state_layer_ids": layers,
        "norm_before_residual": False,
        "eagle_config": {"use_aux_hidden_state": True, "eagle_aux_hidden_state_layer_ids": layers},
        "bos_token_id": target_config.bos_token_id,
        "eos_token_id": target_config.eos_token_id,
        "torch_dtype": "float32",
        **parallel,
        LAB_FIELD: {"kind": lab["kind"], "target": lab["target"], "net": net},
    }


def checkpoint_weights(state: dict[str, torch.Tensor], head_weight: torch.Tensor) -> dict[str, torch.Tensor]:
    """The lab's drafter weights (``state``) and the target's LM head [vocab, H] -> checkpoint tensors."""
    vocab_size = head_weight.shape[0]
    draft_vocab = state.get("draft_vocab", torch.arange(vocab_size))  # [draft_vocab_size] target ids
    out = {_rename(k, RENAMES): v for k, v in state.items() if k != "draft_vocab"}
    out["lm_head.weight"] = head_weight[draft_vocab]
    out["d2t"] = draft_vocab - torch.arange(len(draft_vocab))  # target id = draft id + d2t[draft id]
    t2d = torch.zeros(vocab_size, dtype=torch.bool)
    t2d[draft_vocab] = True
    out["t2d"] = t2d
    # float32 as config.json says (shipped weights may be stored in bfloat16)
    return {k: (v.float() if v.is_floating_point() else v).detach().to("cpu").contiguous() for k, v in out.items()}


FILES = ("config.json", "model.safetensors", "README.md")  # what write_checkpoint writes, nothing else


def written_here(folder: Path) -> bool:
    """Whether ``folder`` holds only what ``write_checkpoint`` writes, from an earlier export (its config
    carries the lab's record): the one kind of folder holding weights an export may replace."""
    names = {p.name for p in folder.iterdir() if not p.name.startswith(".")}
    if not names <= set(FILES) or not (folder / "config.json").is_file() or (folder / "config.json").is_symlink():
        return False
    try:
        config = read_json(folder / "config.json", "export config")  # capped, and a JSON object
    except UserError:
        return False
    return LAB_FIELD in config and config.get("architectures") == [ARCHITECTURE]


def write_checkpoint(out: Path, config: dict, tensors: dict[str, torch.Tensor], card: str) -> None:
    """Each file to a temporary name, then renamed: a failed write (a full disk) leaves the old file whole."""
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "model.safetensors", lambda tmp: save_file(tensors, str(tmp), metadata={"format": "pt"}))
    write_text_atomic(out / "config.json", json.dumps(config, ensure_ascii=False, indent=2) + "\n")
    write_text_atomic(out / "README.md", card)


def read_safetensors(file: Path) -> dict[str, torch.Tensor]:
    """The tensors of a drafter's ``model.safetensors``, after its header is checked: at most
    ``MAX_SAFETENSORS_HEADER`` bytes, well-formed, and its tensors no larger than the file. Any
    failure is a UserError (never a SafetensorError or a huge allocation)."""
    try:
        size = file.stat().st_size
        with open(file, "rb") as f:
            header = int.from_bytes(f.read(8), "little")
    except OSError as e:
        raise UserError(f"cannot read {file}: {e.strerror or e}") from None
    if size < 8 or header > min(MAX_SAFETENSORS_HEADER, size - 8):
        raise UserError(f"{file} is not a safetensors file (its header is too large or cut short)")
    try:
        with safe_open(str(file), "pt") as f:
            shapes = {name: f.get_slice(name).get_shape() for name in f.keys()}
        tensors = load_file(str(file))
    except (SafetensorError, RuntimeError, ValueError, TypeError) as e:
        raise UserError(f"{file} is not a valid safetensors file: {one_line(str(e), 200)}") from None
    if any(list(tensors[name].shape) != list(shape) for name, shape in shapes.items()):
        raise UserError(f"{file} is not a valid safetensors file")
    return tensors


class CheckpointFields(BaseModel):
    """The fields of a vLLM EAGLE-3 config.json the lab reads back (ranges: core.drafters.weights)."""

    model_config = ConfigDict(extra="ignore")

    hidden_size: Annotated[int, Field(ge=1, le=MAX_HIDDEN)]
    intermediate_size: Annotated[int, Field(ge=1, le=8 * MAX_HIDDEN)]
    num_attention_heads: Annotated[int, Field(ge=1, le=MAX_HEADS)]
    num_key_value_heads: Annotated[int, Field(ge=1, le=MAX_HEADS)]
    max_position_embeddings: Annotated[int, Field(ge=1, le=MAX_CONTEXT)]
    rms_norm_eps: Annotated[float, Field(gt=0, lt=1)]
    rope_theta: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    rope_parameters: dict | None = None
    vocab_size: Annotated[int, Field(ge=2, le=MAX_TOKEN_ID)]
    draft_vocab_size: Annotated[int, Field(ge=1, le=MAX_TOKEN_ID)] | None = None
    eagle_aux_hidden_state_layer_ids: Annotated[list[Annotated[int, Field(ge=0, le=MAX_LAYERS)]],
                                                Field(min_length=1, max_length=8)]
    ptd_token_id: Annotated[int, Field(ge=0, le=MAX_TOKEN_ID)] | None = None


def read_checkpoint(folder: str | Path, head_weight: torch.Tensor) -> tuple[dict, dict[str, torch.Tensor]]:
    """A vLLM EAGLE-3 checkpoint -> (the lab's drafter config, its state dict).

    The lab's drafter borrows the target's LM head: the checkpoint's ``lm_head`` must be the
    target's rows at the draft vocabulary (a checkpoint that trained its own head is refused).
    """
    folder = Path(folder)
    config = read_json(folder / "config.json", "drafter config")
    try:
        fields = CheckpointFields.model_validate(config)
    except ValidationError as e:
        raise fields_error(f"{folder}/config.json", e) from None
    if fields.rope_theta is None and not isinstance((fields.rope_parameters or {}).get("rope_theta"), (int, float)):
        raise UserError(f"{folder}/config.json: rope_theta is missing")
    tensors = read_safetensors(folder / "model.safetensors")
    lm_head, d2t = tensors.get("lm_head.weight"), tensors.get("d2t")
    vocab = head_weight.shape[0]
    if lm_head is None or lm_head.dim() != 2 or lm_head.shape[1] != head_weight.shape[1] or len(lm_head) > vocab:
        raise UserError(f"{folder}: lm_head.weight is missing or not [draft vocab, {head_weight.shape[1]}] "
                        "(the target's hidden size)")
    if d2t is not None and (d2t.shape != (len(lm_head),) or d2t.is_floating_point() or d2t.dtype == torch.bool):
        raise UserError(f"{folder}: d2t must be {len(lm_head)} integers (one per draft token)")
    draft_vocab = torch.arange(len(lm_head)) + (d2t.long() if d2t is not None else 0)
    if len(draft_vocab) and (int(draft_vocab.min()) < 0 or int(draft_vocab.max()) >= vocab):
        raise UserError(f"{folder}: d2t maps draft tokens outside the target's vocabulary of {vocab}")
    if not torch.equal(tensors["lm_head.weight"], head_weight[draft_vocab].to(tensors["lm_head.weight"].dtype)):
        raise UserError(f"{folder}: its lm_head is not the target's (a drafter with a head of its own); the lab's "
                        "drafter borrows the target's LM head")
    if any(k.startswith("embed_tokens") for k in tensors):
        raise UserError(f"{folder} ships its own embed_tokens; the lab's drafter borrows the target's embedding")
    back = [(new, old) for old, new in RENAMES]
    state = {_rename(k, back): v for k, v in tensors.items() if k not in ("lm_head.weight", "d2t", "t2d")}
    mask = state.get("mask_hidden")
    layers = list(config["eagle_aux_hidden_state_layer_ids"])
    if (mask is None) != (fields.ptd_token_id is None):
        raise UserError(f"{folder}: a parallel drafter needs both mask_hidden (weights) and ptd_token_id (config.json)")
    if mask is not None and (mask.numel() != len(layers) * fields.hidden_size or fields.ptd_token_id >= vocab):
        raise UserError(f"{folder}: mask_hidden must hold {len(layers) * fields.hidden_size} numbers and ptd_token_id "
                        f"be a token below {vocab}")
    if mask is not None:
        state["mask_hidden"] = mask.reshape(-1)
    full = len(lm_head) == vocab and (d2t is None or not d2t.any())
    if not full:
        state["draft_vocab"] = draft_vocab
    lab = config.get(LAB_FIELD) or {}
    net = {
        "target_layers": list(config["eagle_aux_hidden_state_layer_ids"]), "hidden_size": config["hidden_size"],
        "intermediate_size": config["intermediate_size"], "num_attention_heads": config["num_attention_heads"],
        "num_key_value_heads": config["num_key_value_heads"],
        "max_position_embeddings": config["max_position_embeddings"],
        "rope_theta": float(fields.rope_theta or fields.rope_parameters["rope_theta"]),
        "rms_norm_eps": config["rms_norm_eps"], "output_norm": True,
        "draft_vocab_size": None if full else len(draft_vocab), "layout": "reference",
    }
    if mask is not None:  # vLLM drafts as many tokens in parallel as it is asked for
        net.update(parallel_tokens=MAX_DEPTH - 1, placeholders="shared", ptd_token_id=fields.ptd_token_id)
    kind = "eagle3" if mask is None else "peagle"
    return {"kind": kind, "net": net, "target": lab.get("target"), "vllm_checkpoint": str(folder)}, state
