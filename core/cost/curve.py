"""What a verify costs on this machine: v(n) = time of one target forward over n query tokens ÷
time of a forward over one, after a prefix, through the engine's own verify path.

A drafter pays only when the tokens a step yields (tau) beat v(nodes + 1) plus its own drafting
time; the goodput controller (``core.drafters.controller``) and the lesson's cost model read this curve.
It is measured once per model, device and thread count and cached on disk
(``~/.cache/speculative-decoding-lab/cost/``); ``python -m core cost --remeasure`` measures again.
"""
from __future__ import annotations

import bisect
import hashlib
import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core.cost.probe import VERIFY_CONTEXT, VERIFY_SIZES, latency_context, measure_verify_cost
from core.common.files import lab_cache, write_text_atomic
from core.models.fingerprint import target_fingerprint
from core.models.loading import LoadedModel
from core.models.prompts import load_prompts


@dataclass(frozen=True)
class CostCurve:
    """v(n) at measured query-token counts, and the one-token forward time it is relative to."""

    tokens: list[int]  # query tokens per forward, ascending, starting at 1
    ratio: list[float]  # median forward(n) / median forward(1)
    forward_s: float  # median seconds of a one-token forward
    device: str
    threads: int
    model: str

    def v(self, n: int) -> float:
        """The verify-cost factor for ``n`` query tokens (root + nodes); linear between measured
        points and beyond the last one."""
        if n <= 1:
            return 1.0
        i = bisect.bisect_left(self.tokens, n)
        if i < len(self.tokens) and self.tokens[i] == n:
            return self.ratio[i]
        i = min(max(i, 1), len(self.tokens) - 1)
        (n0, n1), (r0, r1) = self.tokens[i - 1 : i + 1], self.ratio[i - 1 : i + 1]
        return max(1.0, r0 + (r1 - r0) * (n - n0) / (n1 - n0))

    def seconds(self, n: int) -> float:
        return self.forward_s * self.v(n)


COST_VERSION = 2  # 2: measured on real text (the bf16 head route's cost depends on it)


def measure(target: LoadedModel, repeats: int = 5) -> CostCurve:
    """v(n) through the engine's verify path with the LM head (``core.cost.probe``), after a
    ``VERIFY_CONTEXT``-token prefix, interleaved, medians; a ratio below an earlier one (noise) is
    raised to it: more query tokens never cost less. The context is real text (the held-out
    prompts, as the bench's latency curve reads them): what a verify costs can depend on what it
    reads (the bf16 head rescores more tokens where the target is unsure, ``core.runtime.head``)."""
    context = latency_context(target, load_prompts(), VERIFY_CONTEXT)
    rows = measure_verify_cost({"target": target}, context, VERIFY_SIZES, repeats, heads=(True,))["rows"]
    ratio, highest = [], 1.0
    for row in rows:
        highest = max(highest, row["verify_ratio"])
        ratio.append(round(highest, 4))
    return CostCurve(tokens=[row["n"] for row in rows], ratio=ratio, forward_s=rows[0]["ms"] / 1e3,
                     device=str(target.device), threads=torch.get_num_threads(), model=target.path)


def cache_path(target: LoadedModel) -> Path:
    key = json.dumps({"version": COST_VERSION, "model": target_fingerprint(target.model), "device": str(target.device),
                      "precision": target.precision, "threads": torch.get_num_threads(), "cpu": _cpu_name()},
                     sort_keys=True)
    return lab_cache("cost") / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


class CurveFile(BaseModel):
    """A cached curve as it must read back: the probe's sizes, ratios finite, starting at 1 and never
    falling (more query tokens never cost less), a positive one-token forward. Anything else -- a
    NaN, a negated number, a hand-edited or truncated file -- is measured again, never used."""

    model_config = ConfigDict(extra="forbid", strict=True)
    tokens: list[int]
    ratio: list[float] = Field(min_length=2)
    forward_s: float = Field(gt=0.0, le=3600.0, allow_inf_nan=False)
    device: str = Field(max_length=64)
    threads: int = Field(ge=1, le=4096)
    model: str = Field(max_length=4096)

    @model_validator(mode="after")
    def _a_curve(self) -> "CurveFile":
        if self.tokens != list(VERIFY_SIZES):
            raise ValueError(f"tokens {self.tokens[:4]}... are not the probe's sizes {list(VERIFY_SIZES)}")
        if len(self.ratio) != len(self.tokens):
            raise ValueError(f"{len(self.ratio)} ratios for {len(self.tokens)} sizes")
        if not all(math.isfinite(r) for r in self.ratio) or self.ratio[0] != 1.0:
            raise ValueError("the ratios must be finite numbers starting at 1.0")
        if any(b < a for a, b in zip(self.ratio, self.ratio[1:])):
            raise ValueError("the ratios fall somewhere: more query tokens never cost less")
        return self


class DamagedCurve(ValueError):
    """A cost-curve cache file that cannot be used; the message names the file and what is wrong."""


def read_curve(path: Path) -> CostCurve:
    """The curve in a cache file, checked (``CurveFile``); ``DamagedCurve`` names the file and its fault."""
    try:
        return CostCurve(**CurveFile.model_validate_json(path.read_bytes()).model_dump())
    except ValidationError as error:
        problem = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'file'}: {e['msg']}" for e in error.errors()[:3])
        raise DamagedCurve(f"{path}: {problem}") from None
    except OSError as error:
        raise DamagedCurve(f"{path}: {error.strerror or error}") from None


def cached_curve(target: LoadedModel, log=None) -> CostCurve | None:
    """The curve measured earlier for this model, device and thread count, if any (never measures);
    None for a damaged file, whose fault goes to ``log`` when given."""
    path = cache_path(target)
    if not path.is_file():
        return None
    try:
        return read_curve(path)
    except DamagedCurve as error:
        if log is not None:
            log(f"[cost] the cached curve is damaged and will be measured again: {error}")
        return None


def cost_curve(target: LoadedModel, remeasure: bool = False, log=None) -> CostCurve:
    """The cached curve for this model, device and thread count; measured (seconds to a minute)
    when there is none, when it is damaged (the message names the file) or when ``remeasure``."""
    if log is None:
        def log(message: str) -> None:
            print(message, file=sys.stderr, flush=True)
    cached = None if remeasure else cached_curve(target, log)
    if cached is not None:
        return cached
    path = cache_path(target)
    log(f"[cost] measuring verify cost v(n) for {target.path} on {target.device} (cached in {path.parent})")
    curve = measure(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(asdict(curve)))
    return curve


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""
