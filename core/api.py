"""``core.generate`` and the validated set-up shared by the CLI and the app."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import torch

from .drafters import DRAFTERS, NEEDS_DRAFT_MODEL, DraftShape, drafter_class
from .engine import DecodeSettings, SpeculativeDecoder
from .errors import UserError
from .models import LoadedModel, check_same_tokenizer, load_model, resolve_preset
from .records import RunResult, write_trace

MAX_NEW_TOKENS = 4096
MAX_TEMPERATURE = 10.0
DRAFT_SIZES = {"xs": "draft-xs", "s": "draft", "l": "draft-l"}  # size -> folder next to the preset's draft
SIZED_DRAFTS = {"draft-xs": "xs", "draft-l": "l"}  # "--drafter draft-xs" = "--drafter draft --draft-size xs"
DRAFTER_NAMES = ["none", "draft-xs", "draft", "draft-l", *[d for d in DRAFTERS if d not in ("none", "draft")]]
EAGLE_DRAFTERS = ("eagle", "eagle3")  # EAGLE-2's dynamic tree: they take eagle_nodes
LEARNED = {"medusa", *EAGLE_DRAFTERS}  # drafters with trained weights of their own


def split_drafter(name: str, draft_size: str | None = None) -> tuple[str, str | None]:
    """A drafter name as (registry name, draft size): "draft-xs" -> ("draft", "xs")."""
    size = SIZED_DRAFTS.get(name)
    if size is None:
        return name, draft_size
    if draft_size not in (None, size):
        raise UserError(f"--drafter {name} already picks draft size {size!r}; drop --draft-size {draft_size}")
    return "draft", size


def validate_settings(settings: DecodeSettings) -> None:
    if not 1 <= settings.max_new_tokens <= MAX_NEW_TOKENS:
        raise UserError(f"max_new_tokens must be between 1 and {MAX_NEW_TOKENS} (got {settings.max_new_tokens})")
    if not 0 <= settings.temperature <= MAX_TEMPERATURE:
        raise UserError(f"temperature must be between 0 and {MAX_TEMPERATURE:g} (got {settings.temperature})")
    if settings.seed < 0:
        raise UserError(f"seed must be >= 0 (got {settings.seed})")
    if not 1 <= settings.block_size <= 256:
        raise UserError(f"block_size must be between 1 and 256 (got {settings.block_size})")


def encode_prompt(target: LoadedModel, prompt: str, max_new_tokens: int) -> list[int]:
    if not isinstance(prompt, str) or not prompt.strip():
        raise UserError("the prompt is empty")
    prompt_ids = target.tokenizer(prompt).input_ids
    if len(prompt_ids) + max_new_tokens > target.context_length:
        raise UserError(
            f"the prompt is {len(prompt_ids)} tokens and {max_new_tokens} new tokens were asked for; "
            f"the model's usable context is {target.context_length} tokens"
        )
    return prompt_ids


def build_decoder(
    prompt: str,
    preset: str = "tiny",
    drafter: str = "draft",
    k: int = 4,
    tree: str | tuple[int, int] | None = None,
    temperature: float = 0.0,
    seed: int = 0,
    max_new_tokens: int = 64,
    *,
    device: str | None = None,
    block_size: int = 16,
    ngram_n: int = 3,
    target: str | None = None,
    draft: str | None = None,
    draft_size: str | None = None,
    drafter_weights: str | None = None,
    medusa_choices: str | None = None,
    eagle_nodes: int | None = None,
    trust_remote_code: bool = False,
    record: bool = True,
) -> tuple[SpeculativeDecoder, list[int]]:
    """Validate everything, load (cached) models, and return a decoder ready to run the prompt.

    Drafter options: ``draft_size`` (xs, s, l: which of the preset's draft models), ``drafter_weights``
    (a medusa/eagle/eagle3 folder; default: next to the target), ``medusa_choices`` ("tuned" or
    paths of ranks, e.g. "[[0], [0, 0], [1]]"), ``eagle_nodes`` (EAGLE-2: nodes kept for the verify;
    its top-k is the tree width, its depth the tree depth).
    """
    drafter, draft_size = split_drafter(drafter, draft_size)
    drafter_cls = drafter_class(drafter)
    shape = DraftShape.parse(k, tree, full_tree=drafter_cls.drafts_full_tree)
    _check_drafter_options(drafter, draft_size, draft, drafter_weights, medusa_choices, eagle_nodes)
    settings = DecodeSettings(
        max_new_tokens=int(max_new_tokens), temperature=float(temperature), seed=int(seed),
        block_size=int(block_size), record=record,
    )
    validate_settings(settings)
    if not isinstance(prompt, str) or not prompt.strip():
        raise UserError("the prompt is empty")

    chosen = resolve_preset(preset)
    target_model = load_model(target or chosen.target, device, trust_remote_code)
    draft_model = None
    if drafter in NEEDS_DRAFT_MODEL:
        draft_path = draft or chosen.draft
        if draft_path is None:
            raise UserError(f"drafter {drafter!r} needs a draft model: pass --draft PATH for preset {preset!r}")
        if draft_size:
            draft_path = _sized_draft(chosen.draft, draft_size, preset)
        draft_model = load_model(draft_path, device, trust_remote_code)
        check_same_tokenizer(target_model, draft_model)
    prompt_ids = encode_prompt(target_model, prompt, settings.max_new_tokens)

    instance = drafter_cls(
        shape=shape, target=target_model, draft=draft_model, vocab_size=target_model.vocab_size,
        block_size=settings.block_size, max_ngram=ngram_n, weights=drafter_weights,
        medusa_choices=medusa_choices, eagle_nodes=eagle_nodes,
    )
    run_info = {
        "prompt": prompt,
        "preset": preset,
        "drafter": drafter,
        "settings": {
            **asdict(settings),
            "k": shape.depth,
            "tree": None if shape.width == 1 else f"{shape.width}x{shape.depth}",
            "ngram_n": ngram_n if drafter == "ngram" else None,
            "draft_size": draft_size,
            "drafter_weights": drafter_weights,
            "medusa_choices": medusa_choices,
            "eagle_nodes": eagle_nodes,
            "device": str(target_model.device),
            "dtype": str(target_model.model.dtype).removeprefix("torch."),
        },
    }
    return SpeculativeDecoder(target_model, instance, settings, run_info), prompt_ids


def _check_drafter_options(drafter, draft_size, draft, weights, medusa_choices, eagle_nodes) -> None:
    """Each drafter option belongs to one kind of drafter; anything else is a clear error."""
    if draft_size is not None:
        if drafter != "draft":
            raise UserError("--draft-size applies to --drafter draft")
        if draft_size not in DRAFT_SIZES:
            raise UserError(f"unknown draft size {draft_size!r}: use one of {', '.join(DRAFT_SIZES)}")
        if draft:
            raise UserError("pass either --draft PATH or --draft-size, not both")
    if weights is not None and drafter not in LEARNED:
        raise UserError(f"--drafter-weights applies to the learned drafters ({', '.join(sorted(LEARNED))})")
    if medusa_choices is not None and drafter != "medusa":
        raise UserError("--medusa-choices applies to --drafter medusa")
    if eagle_nodes is not None and drafter not in EAGLE_DRAFTERS:
        raise UserError("--eagle-nodes applies to --drafter eagle or eagle3")


def _sized_draft(default_draft: str | None, size: str, preset: str) -> str:
    folder = Path(default_draft).parent / DRAFT_SIZES[size] if default_draft else None
    if folder is None or not (folder / "config.json").is_file():
        raise UserError(f"preset {preset!r} has no draft of size {size!r}")
    return str(folder)


def greedy_generate_kwargs(target: LoadedModel, input_ids: torch.Tensor, max_new_tokens: int) -> dict:
    """Arguments for transformers' ``generate`` that make it plain greedy decoding."""
    return dict(
        attention_mask=torch.ones_like(input_ids),
        do_sample=False,
        max_new_tokens=max_new_tokens,
        pad_token_id=target.tokenizer.pad_token_id or next(iter(target.eos_ids), 0),
        top_k=None,
        top_p=None,
        temperature=None,
    )


@torch.inference_mode()
def target_greedy(target: LoadedModel, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
    """The reference: the target alone, ``model.generate(do_sample=False)``; returns the new token ids."""
    input_ids = torch.tensor([prompt_ids], device=target.device)
    out = target.model.generate(input_ids, **greedy_generate_kwargs(target, input_ids, max_new_tokens))
    return out[0, len(prompt_ids) :].tolist()


def generate(prompt: str, preset: str = "tiny", drafter: str = "draft", k: int = 4, tree=None,
             temperature: float = 0.0, seed: int = 0, max_new_tokens: int = 64, *,
             check: bool = False, trace: str | Path | None = None, **options) -> RunResult:
    """Decode ``prompt`` speculatively; ``result.to_dict()`` is the CLI's ``--json`` object.

    ``check=True`` (greedy only) also runs the target alone and sets ``baseline_match``.
    ``trace`` writes the StepRecords as JSON lines (docs/trace.md). Other keyword options:
    device, block_size, ngram_n, target, draft, trust_remote_code.
    """
    if check and float(temperature) > 0:
        raise UserError("--check compares with the target's greedy output: use --temperature 0")
    decoder, prompt_ids = build_decoder(prompt, preset, drafter, k, tree, temperature, seed, max_new_tokens, **options)
    for _ in decoder.steps(prompt_ids):
        pass
    result = decoder.result
    if check:
        result.baseline_match = result.tokens == target_greedy(decoder.target, prompt_ids, max_new_tokens)
    if trace:
        write_trace(trace, result)
    return result
