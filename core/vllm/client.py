"""The lab's side of the vLLM runner (``core/vllm/runner.py``): start it in the vLLM venv, send
requests, read its answers.

    with VllmRunner("assets/tiny/target", {"method": "eagle3", "model": OUT, "num_speculative_tokens": 3}) as vllm:
        generation = vllm.generate([prompt_ids], max_tokens=40)
        generation.outputs[0].tokens, generation.spec.accepted_per_position

vLLM runs with ``threads`` OpenMP threads bound to cores ``0..threads-1`` (its default reserves a core
for itself: one thread on a 2-core machine) and in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``:
loads in about a quarter of the time of its engine-core process, and a request's wall time is the
engine's own). Its logs go to ``log_file``; only lines marked by the runner are answers.

Whatever fails -- a load that raises, no answer in time, a runner that dies -- the runner is killed and
reaped before the ``VllmError`` leaves ``start`` (a ``with`` block reaps it on leaving); the error's
first line names the cause, with the runner's exit status and signal where it ended. The process
machinery (spawn, marked answers, kill and reap) is ``core.common.runner.JsonLinesRunner``, shared
with llama.cpp's runner.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from core.common.errors import ExternalError, UserError
from core.common.runner import JsonLinesRunner, child_env
from core.vllm import env

RUNNER = Path(__file__).with_name("runner.py")
LOAD_TIMEOUT_S = 900.0  # gemma-270m's first load took 258 s on 2 cores
REQUEST_TIMEOUT_S = 600.0
SPEC_NAMES = {  # vLLM's counter names (vllm/v1/spec_decode/metrics.py), as LLM.get_metrics() gives them
    "drafts": "vllm:spec_decode_num_drafts",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens",
    "accepted_tokens": "vllm:spec_decode_num_accepted_tokens",
    "accepted_per_position": "vllm:spec_decode_num_accepted_tokens_per_pos",
}


class VllmError(ExternalError):
    """The runner or the server died, timed out or answered an error."""


class SpecCounters(BaseModel):
    """vLLM's spec-decode counters over some requests (a difference of two readings)."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    accepted_per_position: list[int] = Field(default_factory=list)

    @classmethod
    def of(cls, metrics: dict[str, Any]) -> "SpecCounters":
        found = {field: metrics.get(name) for field, name in SPEC_NAMES.items()}
        return cls(**{k: (round(v) if isinstance(v, float) else [round(x) for x in v] if isinstance(v, list) else v)
                      for k, v in found.items() if v is not None})


class Output(BaseModel):
    tokens: list[int]
    text: str
    finish_reason: str | None = None


class Generation(BaseModel):
    outputs: list[Output]
    wall_s: float
    metrics: dict[str, Any]

    @property
    def spec(self) -> SpecCounters:
        return SpecCounters.of(self.metrics)


def runner_env(threads: int, kv_cache_gib: float) -> dict[str, str]:
    """The runner's environment: the lab's, less what would leak the lab's packages into the venv."""
    return child_env({
        "VLLM_CPU_OMP_THREADS_BIND": f"0-{threads - 1}",
        "VLLM_CPU_KVCACHE_SPACE": f"{kv_cache_gib:g}",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "OMP_NUM_THREADS": str(threads),
        "TOKENIZERS_PARALLELISM": "false",
    })


def check_threads(threads: int) -> None:
    if not 1 <= threads <= (os.cpu_count() or 1):
        raise UserError(f"vLLM threads must be between 1 and the machine's {os.cpu_count()} cores (got {threads})")


class VllmRunner(JsonLinesRunner):
    """One ``vllm.LLM`` (one model and speculative config) in a runner subprocess
    (``core.common.runner.JsonLinesRunner``: spawn, marked answers, kill and reap on failure)."""

    KV_CACHE_GIB = 1.0  # vLLM's KV pool (VLLM_CPU_KVCACHE_SPACE): ample for the lab's prompts

    def __init__(self, model: str, speculative_config: dict | None = None, *, threads: int = 2,
                 max_model_len: int | None = None, max_num_seqs: int | None = None,
                 log_file: str | Path | None = None):
        if not env.ready():
            raise UserError(env.missing_reason())
        check_threads(threads)
        super().__init__([str(env.python()), str(RUNNER)], env=runner_env(threads, self.KV_CACHE_GIB),
                         error=VllmError, name="the vLLM runner", engine="vLLM", start_timeout_s=LOAD_TIMEOUT_S,
                         request_timeout_s=REQUEST_TIMEOUT_S, log_path=log_file)
        self.model, self.speculative_config = str(model), speculative_config
        self.threads = threads
        self.max_model_len, self.max_num_seqs = max_model_len, max_num_seqs
        self.load_s: float | None = None

    def start(self) -> "VllmRunner":
        """Start the runner and load the model; on any failure the runner is killed and reaped first."""
        loaded = self.launch({"op": "load", "model": self.model, "speculative_config": self.speculative_config,
                              "dtype": "float32", "max_model_len": self.max_model_len,
                              "max_num_seqs": self.max_num_seqs})
        self.load_s = loaded["load_s"]
        return self

    def __enter__(self) -> "VllmRunner":
        return self.start() if self.process is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    def generate(self, prompts: list[list[int]], max_tokens: int, ignore_eos: bool = False) -> Generation:
        """Greedy decoding of token-id prompts (one ``LLM.generate`` call: continuous batching when
        several); the wall time is measured around that call inside the runner."""
        return Generation(**self.request({"op": "generate", "prompts": prompts, "max_tokens": max_tokens,
                                          "ignore_eos": ignore_eos}))

    def metrics(self) -> dict[str, Any]:
        return self.request({"op": "metrics"})["metrics"]

    def exposition(self) -> str:
        """vLLM's Prometheus registry in the text format: what ``vllm serve``'s ``/metrics`` shows."""
        return self.request({"op": "exposition"})["text"]
