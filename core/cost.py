"""What a verify costs on this machine: v(n) = time of one target forward over n query tokens ÷
time of a forward over one, after a prefix, through the engine's own verify path.

A drafter pays only when the tokens a step yields (tau) beat v(nodes + 1) plus its own drafting
time; the goodput controller (``core.controller``) and the lesson's cost model read this curve.
It is measured once per model, device and thread count and cached on disk
(``~/.cache/speculative-decoding-lab/cost/``); ``python -m core cost --remeasure`` measures again.
"""
from __future__ import annotations

import bisect
import hashlib
import json
import os
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from time import perf_counter

import torch

from .drafters.learned import target_fingerprint
from .models import LoadedModel

QUERY_TOKENS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 25, 32)
PREFIX_TOKENS = 64


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


def measure(target: LoadedModel, tokens=QUERY_TOKENS, repeats: int = 5, log=None) -> CostCurve:
    """Time the engine's verify for every count in ``tokens`` after a ``PREFIX_TOKENS`` prefix,
    interleaved (each round visits every count once), after one warm-up round; medians."""
    from .drafters.none import NoDrafter
    from .engine import DecodeSettings, SpeculativeDecoder
    from .tree import DraftTree

    generator = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, target.vocab_size, (PREFIX_TOKENS + 1,), generator=generator).tolist()
    settings = DecodeSettings(max_new_tokens=max(tokens) + 1, record=False)
    decoder = SpeculativeDecoder(target, NoDrafter(), settings, {})
    decoder.begin(prompt)
    times: dict[int, list[float]] = {n: [] for n in tokens}
    try:
        decoder.prefill(prompt)
        for round_ in range(repeats + 1):
            for n in tokens:
                tree = DraftTree()
                for i in range(n - 1):
                    tree.add(prompt[i], i - 1, 1.0)
                start = perf_counter()
                decoder.verify(prompt[-1], tree)
                elapsed = perf_counter() - start
                decoder.kv.commit([])  # drop the written slots: the prefix stays as it was
                if round_:
                    times[n].append(elapsed)
            if log:
                log(f"[cost] round {round_}/{repeats}")
    finally:
        decoder.kv.release_all()
    one = statistics.median(times[1])
    ratio, highest = [], 1.0
    for n in tokens:  # more query tokens never cost less: noise that says so is flattened
        highest = max(highest, statistics.median(times[n]) / one)
        ratio.append(round(highest, 4))
    return CostCurve(
        tokens=list(tokens), ratio=ratio,
        forward_s=one, device=str(target.device), threads=torch.get_num_threads(), model=target.path,
    )


def cache_path(target: LoadedModel) -> Path:
    key = json.dumps({"model": target_fingerprint(target.model), "device": str(target.device),
                      "threads": torch.get_num_threads(), "cpu": _cpu_name()}, sort_keys=True)
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "speculative-decoding-lab" / "cost"
    return root / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def cost_curve(target: LoadedModel, remeasure: bool = False, log=None) -> CostCurve:
    """The cached curve for this model, device and thread count; measured (seconds to a minute)
    when there is none or when ``remeasure``."""
    path = cache_path(target)
    if path.is_file() and not remeasure:
        try:
            return CostCurve(**json.loads(path.read_text()))
        except (ValueError, TypeError):
            pass  # a damaged cache file is measured again
    if log is None:
        def log(message: str) -> None:
            print(message, file=sys.stderr, flush=True)
    log(f"[cost] measuring verify cost v(n) for {target.path} on {target.device} (cached in {path.parent})")
    curve = measure(target, log=log)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(curve)))
    tmp.replace(path)
    return curve


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""
