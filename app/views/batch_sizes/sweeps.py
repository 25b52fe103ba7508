"""The batch-size sweeps the view shows: the project's shipped ones, one per built-in preset, and a
small sweep measured here (one run per batch size, after a warm-up)."""
from __future__ import annotations

from pathlib import Path

import torch

from core.cost.probe import latency_context
from core.drafters import BASELINE
from core.models.loading import load_model, resolve_preset
from core.models.prompts import load_prompts
from core.studies.batch_size import crossover, measure_latency, measure_throughput

from ...controls import COMPARE_CHOICES, SWEEP_AUTO

BENCHMARKS = Path(__file__).resolve().parents[3] / "docs" / "benchmarks"
# the shipped sweep per preset (docs/benchmarks.md); tiny's with vLLM-CPU's continuous batching beside the lab's
EXAMPLE_RESULTS = {"tiny": BENCHMARKS / "tiny-cpu-vllm" / "bench.json",
                   "gemma-270m": BENCHMARKS / "gemma-cpu-batch" / "bench.json"}
SWEEP_DRAFTERS = (*COMPARE_CHOICES, *SWEEP_AUTO)  # auto: the goodput controller
MAX_LIVE_NEW_TOKENS = 64


def live_sweep(preset: str, drafters: list[str], sizes: tuple[int, ...], max_new_tokens: int,
               target_precision: str = "float32"):
    """Measure batch by batch (one run each, after a warm-up); yields (batch, the result so far)."""
    prompts = load_prompts()
    chosen = (BASELINE, *drafters)
    decoder_args = dict(preset=preset, k=4, max_new_tokens=max_new_tokens, target_precision=target_precision)
    target = load_model(resolve_preset(preset).target, precision=target_precision)
    context = latency_context(target, prompts)
    result = {"preset": preset, "device": str(target.device), "max_new_tokens": max_new_tokens,
              "target_precisions": [target_precision],
              "torch_threads": torch.get_num_threads(), "batch_sweep": [], "forward_latency": []}
    for i, b in enumerate(sizes):
        result["batch_sweep"] += measure_throughput((b,), chosen, prompts, decoder_args, 1, _quiet, warmup=i == 0)
        result["forward_latency"] += measure_latency(target, (b,), context, _quiet)
        result["batch_crossover"] = crossover(result["batch_sweep"])
        yield b, result


def _quiet(_: str) -> None:
    return None
