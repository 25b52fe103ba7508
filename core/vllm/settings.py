"""The settings of ``python -m core vllm compare`` and ``vllm serve``: one typed object each, checked
once, before anything is exported or loaded; their flags' defaults and help are read off the fields.

    settings = CompareSettings.of("assets/prompts/heldout.txt", limit=2, method="ngram", k=3)
    settings.prompts, settings.max_new_tokens

Bounds are the lab's own (``core.common.limits``): ``k`` as the lab drafts (1 to ``MAX_DEPTH``),
``max_new_tokens`` as one request (1 to ``MAX_NEW_TOKENS``), vLLM's threads within the machine's
cores, ``--limit`` within the prompts file. A bad value is a ``UserError`` naming its flag.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from core.api.request import Int, ModelRef, validation_message
from core.common.errors import UserError
from core.common.limits import MAX_DEPTH, MAX_NEW_TOKENS
from core.models.loading import PRESETS, resolve_preset
from core.models.prompts import load_prompts
from core.vllm.oracle import METHODS


def _known_preset(value: str) -> str:
    if value not in PRESETS:  # a preset is resolved (gemma-270m converted) only once every setting is checked
        resolve_preset(value)
    return value


def _within_cores(value: int) -> int:
    if not 1 <= value <= (os.cpu_count() or 1):
        raise ValueError(f"must be between 1 and the machine's {os.cpu_count()} cores")
    return value


class VllmSettings(BaseModel):
    """What ``compare`` and ``serve`` share: the models, the speculative method and vLLM's threads."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    preset: Annotated[ModelRef, AfterValidator(_known_preset)] = Field(
        "tiny", description="tiny, gemma-270m, a local model folder, or a hub id")
    method: Literal[METHODS] = Field("eagle3", description=f"{', '.join(METHODS)}")
    k: Int = Field(3, ge=1, le=MAX_DEPTH, description="draft tokens per step (num_speculative_tokens)")
    threads: Annotated[Int, AfterValidator(_within_cores)] = Field(
        2, description="vLLM's CPU threads (bound to cores 0..N-1)")

    @classmethod
    def checked(cls, **fields: Any):
        """``cls(**fields)`` with a validation failure turned into a UserError naming the flags."""
        try:
            return cls(**fields)
        except ValidationError as e:
            raise UserError(validation_message(e, as_flags=True)) from None


class CompareSettings(VllmSettings):
    """``vllm compare``: the prompts (the file's, the first ``--limit`` of them) and the budget per prompt."""

    prompts: list[str] = Field(min_length=1)
    max_new_tokens: Int = Field(40, ge=1, le=MAX_NEW_TOKENS, description="new tokens per prompt")

    @classmethod
    def of(cls, prompts_file: str | Path, limit: int | None = None, **fields: Any) -> "CompareSettings":
        """The first ``limit`` prompts of ``prompts_file`` (all of them when None) and the other fields."""
        prompts = load_prompts(prompts_file)
        if limit is not None and not 1 <= limit <= len(prompts):
            raise UserError(f"--limit must be between 1 and {len(prompts)}, the prompts in {str(prompts_file)!r} "
                            f"(got {limit})")
        return cls.checked(prompts=prompts[:limit], **fields)


class ServeSettings(VllmSettings):
    """``vllm serve``: where it listens."""

    port: Int | None = Field(None, ge=1, le=65535, description="default: a free port")
