"""Weights of the learned drafters (Medusa heads, EAGLE layers): where they live, how they are
saved and loaded, and the check that they were trained for the target in use.

A learned drafter folder holds ``config.json`` and ``model.safetensors``. It stores only what
was trained: the target's embedding and LM head are read from the target at load time, so a
folder is a few MB. By default it sits next to the target it was trained for, e.g.
``assets/tiny/target`` -> ``assets/tiny/medusa``.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from pydantic import Field
from safetensors.torch import load_file, save_file

from core.drafters import checkpoint
from core.drafters.base import DrafterOptions
from core.errors import UserError
from core.models.fingerprint import target_fingerprint
from core.models.loading import drafter_home


class LearnedOptions(DrafterOptions):
    """Options of every drafter with trained weights of its own."""

    drafter_weights: str | None = Field(
        None, min_length=1, max_length=1000,
        description="medusa/eagle/eagle3 weights folder (default: the one next to the target)")


def default_folder(target_path: str, kind: str) -> Path:
    """``<target folder>/../<kind>``, or ``<preset's drafter folder>/<kind>`` for a preset's target
    (``assets/gemma-270m/<kind>``): where ``python -m core train <kind>`` writes by default."""
    return drafter_home(target_path) / kind


def save_folder(folder: Path, config: dict, module: torch.nn.Module) -> None:
    """Write ``config.json`` and the module's own weights (``model.safetensors``) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to("cpu").contiguous() for k, v in module.state_dict().items()}
    save_file(state, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(config, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def load_folder(folder: str | Path, kind: str, target_model) -> tuple[dict, dict[str, torch.Tensor]]:
    """Read a drafter folder of ``kind`` and check it was trained for ``target_model``.

    Returns (config, state_dict on CPU). Raises UserError, naming the training command, when the
    folder is missing, holds another kind of drafter, or was trained for another target.
    """
    folder = Path(folder)
    if kind == "eagle3" and checkpoint.is_checkpoint(folder):  # exported for vLLM (python -m core export)
        return _checked_vllm(folder, target_model)
    config_file, weights_file = folder / "config.json", folder / "model.safetensors"
    if not (config_file.is_file() and weights_file.is_file()):
        raise UserError(
            f"no trained {kind} weights in {folder}: train them with "
            f"`python -m core train {kind} --target <target folder>` or pass --drafter-weights"
        )
    config = json.loads(config_file.read_text(encoding="utf-8"))
    if config.get("kind") != kind:
        raise UserError(f"{folder} holds {config.get('kind')!r} weights, not {kind!r}")
    expected = target_fingerprint(target_model)
    if config.get("target") != expected:
        raise UserError(
            f"the {kind} weights in {folder} were trained for another target "
            f"({config.get('target')} != {expected}); retrain them for this target"
        )
    return config, load_file(str(weights_file))


def _checked_vllm(folder: Path, target_model) -> tuple[dict, dict[str, torch.Tensor]]:
    """An EAGLE-3 checkpoint in vLLM's layout, read back (``core.drafters.checkpoint``); its LM head must be
    the target's, and a lab export also names the target it was trained for."""
    config, state = checkpoint.read_checkpoint(folder, target_model.get_output_embeddings().weight.detach())
    expected = target_fingerprint(target_model)
    if config["target"] not in (None, expected):
        raise UserError(f"the eagle3 checkpoint in {folder} was exported for another target "
                        f"({config['target']} != {expected})")
    return {**config, "target": expected}, state
