"""``core.generate`` and the validated set-up shared by the CLI and the app."""
from __future__ import annotations

from pathlib import Path

import torch

from core.cost.curve import CostCurve, cost_curve
from core.drafters import DEFAULT_DRAFTER, DrafterInputs
from core.drafters.controller import GoodputController
from core.engine.batch import BatchDecoder
from core.engine.decoder import SpeculativeDecoder
from core.common.errors import UserError, counted
from core.common.files import check_output_file
from core.common.limits import MAX_SEED
from core.models.loading import LoadedModel, load_model, resolve_preset
from core.records.steps import RunResult, write_trace
from core.api.request import DecodeRequest


def encode_prompt(target: LoadedModel, prompt: str, max_new_tokens: int) -> list[int]:
    prompt_ids = target.tokenizer(prompt).input_ids
    if len(prompt_ids) + max_new_tokens > target.context_length:
        raise UserError(
            f"the prompt is {counted(len(prompt_ids), 'token')} and {counted(max_new_tokens, 'new token')} "
            f"{'was' if max_new_tokens == 1 else 'were'} asked for; "
            f"the model's usable context is {target.context_length} tokens"
        )
    return prompt_ids


def build_decoder(request: DecodeRequest, *, record: bool = True,
                  inspect: bool = False, cost: CostCurve | None = None) -> tuple[SpeculativeDecoder, list[int]]:
    """Load the request's models (cached) and return a decoder ready to run its prompt, with the
    prompt's token ids. ``record=False`` skips building StepRecords (to measure their cost);
    ``inspect=True`` adds the laws behind each acceptance to them (``core.records.detail``).

    An ``auto`` shape needs the target's verify-cost curve: ``cost`` when given (measured for this
    target, ``core.cost.curve.cost_curve``), else the cached one; where none is cached it is
    measured first (seconds to a minute), announced by a progress line on stderr."""
    preset = resolve_preset(request.preset)

    def load(path: str) -> LoadedModel:
        return load_model(path, request.device, request.trust_remote_code)

    target = load_model(request.target or preset.target, request.device, request.trust_remote_code,
                        request.target_precision)
    prompt_ids = encode_prompt(target, request.prompt, request.max_new_tokens)
    drafter_cls = request.drafter_class
    drafter = drafter_cls.build(request.options, DrafterInputs(
        target=target, shape=request.shape if drafter_cls.capabilities.drafts else None, block_size=request.block_size,
        preset=preset, draft_ref=request.draft, load_model=load))
    if request.shape.auto and drafter_cls.capabilities.drafts:
        drafter = GoodputController(drafter, cost if cost is not None else cost_curve(target))
    settings = request.decode_settings(record, inspect)
    run_info = {
        "prompt": request.prompt,
        "preset": request.preset,
        "drafter": drafter_cls.name,
        "settings": {
            **request.settings(settings),
            "device": str(target.device),
            "dtype": str(target.model.dtype).removeprefix("torch."),
        },
    }
    return SpeculativeDecoder(target, drafter, settings, run_info), prompt_ids


def build_batch(prompts: list[str], preset: str = "tiny", drafter: str = DEFAULT_DRAFTER, max_batch: int | None = None,
                **options) -> BatchDecoder:
    """A batch of ``prompts`` decoded with one drafter kind (one drafter object per request).

    ``max_batch``: at most this many decode at once, the rest queue (continuous batching); by
    default all of them at once. ``options`` are ``DecodeRequest.of``'s (k, tree, temperature,
    seed, max_new_tokens, device, ...); with ``seed`` request i is seeded ``seed + i``.
    """
    if isinstance(prompts, str) or not isinstance(prompts, (list, tuple)):
        raise UserError("a batch takes a list of prompts (got a single string)" if isinstance(prompts, str)
                        else f"a batch takes a list of prompts (got {type(prompts).__name__})")
    if not prompts:
        raise UserError("a batch needs at least one prompt")
    requests = [DecodeRequest.of(p, preset, drafter, **options) for p in prompts]
    built = [build_decoder(r.model_copy(update={"seed": (r.seed + i) % (MAX_SEED + 1)}))
             for i, r in enumerate(requests)]
    return BatchDecoder([d for d, _ in built], [ids for _, ids in built], max_batch)


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


def generate(prompt: str, preset: str = "tiny", drafter: str = DEFAULT_DRAFTER, *, check: bool = False,
             trace: str | Path | None = None, **options) -> RunResult:
    """Decode ``prompt`` speculatively; ``result.to_dict()`` is the CLI's ``--json`` object.

    ``options`` are ``DecodeRequest.of``'s: the shape (k, tree, auto), temperature, seed, max_new_tokens,
    block_size, device, target, draft, trust_remote_code, and the drafter's own options (ngram_n, draft_size,
    drafter_weights, medusa_choices, eagle_nodes, ...). ``check=True`` (greedy only) also runs the
    target alone and sets ``baseline_match``. ``trace`` writes the StepRecords as JSON lines
    (docs/trace.md); its path is checked before decoding, and if writing still fails the result is
    returned with ``trace_error`` set.
    """
    request = DecodeRequest.of(prompt, preset, drafter, **options)
    if check and request.temperature > 0:
        raise UserError("--check compares with the target's greedy output: use --temperature 0")
    if trace:
        check_output_file(trace, "--trace")  # fail before the run, not after it
    decoder, prompt_ids = build_decoder(request)
    for _ in decoder.steps(prompt_ids):
        pass
    result = decoder.result
    if check:
        result.baseline_match = result.tokens == target_greedy(decoder.target, prompt_ids, request.max_new_tokens)
    if trace:
        try:
            write_trace(trace, result)
        except OSError as e:
            result.trace_error = f"could not write the trace to {str(trace)!r}: {e.strerror or e}"
    return result
