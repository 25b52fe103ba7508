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

The token embedding is not written: vLLM then shares the target's, which is what the lab's
drafter reads too. ``read_checkpoint`` turns such a folder back into the lab's weights, so
``--drafter-weights OUT`` runs the exported drafter in the lab.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from core.errors import UserError
from core.files import write_atomic, write_text_atomic

ARCHITECTURE = "LlamaForCausalLMEagle3"
ARCHITECTURES = (ARCHITECTURE, "Eagle3LlamaForCausalLM")
LAB_FIELD = "speculative_decoding_lab"  # our own record in config.json; vLLM ignores it
RENAMES = (("fuse.", "fc."), ("layer.", "midlayer."), ("norm.", "norm."))


def is_checkpoint(folder: str | Path) -> bool:
    """Whether ``folder`` holds a vLLM EAGLE-3 checkpoint (by its config's architectures)."""
    config_file = Path(folder) / "config.json"
    if not config_file.is_file():
        return False
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return isinstance(config, dict) and any(a in ARCHITECTURES for a in config.get("architectures") or [])


def _rename(name: str, pairs) -> str:
    for old, new in pairs:
        if name.startswith(old):
            return new + name[len(old):]
    raise UserError(f"no checkpoint name for the weight {name!r}")


def checkpoint_config(lab: dict, target_config, vocab_size: int) -> dict:
    """config.json for vLLM from the lab's drafter config and the target's (transformers) config."""
    net = lab["net"]
    layers = list(net["target_layers"])
    if net.get("layout") != "reference" or not net.get("output_norm"):
        raise UserError("this drafter uses the lab's own EAGLE-3 layout, which vLLM's layer cannot run; train one "
                        "in EAGLE-3's reference layout: python -m core train eagle3 --layout reference "
                        "--layers 1,2,3 --out <folder> (docs/export.md)")
    if len(layers) != 3 or not all(1 <= i < target_config.num_hidden_layers for i in layers):
        raise UserError(f"vLLM fuses exactly 3 target layers, captured before layers 1..{target_config.num_hidden_layers - 1}"
                        f" (eagle_aux_hidden_state_layer_ids); this drafter reads hidden_states {layers}")
    hidden = net["hidden_size"]
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
    return {k: v.detach().to("cpu").contiguous() for k, v in out.items()}


FILES = ("config.json", "model.safetensors", "README.md")  # what write_checkpoint writes, nothing else


def written_here(folder: Path) -> bool:
    """Whether ``folder`` holds only what ``write_checkpoint`` writes, from an earlier export (its config
    carries the lab's record): the one kind of folder holding weights an export may replace."""
    names = {p.name for p in folder.iterdir() if not p.name.startswith(".")}
    if not names <= set(FILES) or not (folder / "config.json").is_file() or (folder / "config.json").is_symlink():
        return False
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and LAB_FIELD in config and config.get("architectures") == [ARCHITECTURE]


def write_checkpoint(out: Path, config: dict, tensors: dict[str, torch.Tensor], card: str) -> None:
    """Each file to a temporary name, then renamed: a failed write (a full disk) leaves the old file whole."""
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "model.safetensors", lambda tmp: save_file(tensors, str(tmp), metadata={"format": "pt"}))
    write_text_atomic(out / "config.json", json.dumps(config, ensure_ascii=False, indent=2) + "\n")
    write_text_atomic(out / "README.md", card)


def read_checkpoint(folder: str | Path, head_weight: torch.Tensor) -> tuple[dict, dict[str, torch.Tensor]]:
    """A vLLM EAGLE-3 checkpoint -> (the lab's drafter config, its state dict).

    The lab's drafter borrows the target's LM head: the checkpoint's ``lm_head`` must be the
    target's rows at the draft vocabulary (a checkpoint that trained its own head is refused).
    """
    folder = Path(folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    tensors = load_file(str(folder / "model.safetensors"))
    draft_vocab = torch.arange(len(tensors["lm_head.weight"])) + tensors.get("d2t", 0)
    if not torch.equal(tensors["lm_head.weight"], head_weight[draft_vocab].to(tensors["lm_head.weight"].dtype)):
        raise UserError(f"{folder}: its lm_head is not the target's (a drafter with a head of its own); the lab's "
                        "drafter borrows the target's LM head")
    if any(k.startswith("embed_tokens") for k in tensors):
        raise UserError(f"{folder} ships its own embed_tokens; the lab's drafter borrows the target's embedding")
    back = [(new, old) for old, new in RENAMES]
    state = {_rename(k, back): v for k, v in tensors.items() if k not in ("lm_head.weight", "d2t", "t2d")}
    full = config.get("draft_vocab_size", config["vocab_size"]) == config["vocab_size"]
    if not full:
        state["draft_vocab"] = draft_vocab
    lab = config.get(LAB_FIELD) or {}
    net = {
        "target_layers": list(config["eagle_aux_hidden_state_layer_ids"]), "hidden_size": config["hidden_size"],
        "intermediate_size": config["intermediate_size"], "num_attention_heads": config["num_attention_heads"],
        "num_key_value_heads": config["num_key_value_heads"],
        "max_position_embeddings": config["max_position_embeddings"], "rope_theta": float(config.get("rope_theta") or config["rope_parameters"]["rope_theta"]),
        "rms_norm_eps": config["rms_norm_eps"], "output_norm": True,
        "draft_vocab_size": None if full else len(draft_vocab), "layout": "reference",
    }
    return {"kind": "eagle3", "net": net, "target": lab.get("target"), "vllm_checkpoint": str(folder)}, state
