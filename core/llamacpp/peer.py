"""llama.cpp as the CPU peer in ``python -m core bench --compare-llamacpp``: one warm ``llama_cpp.Llama``
per method on the ``gemma-270m`` preset's own GGUF, each request timed alone.

Every method gets its own runner (``draft_model`` is fixed when the ``Llama`` is built), all loaded
before timing starts and kept warm; a request is one greedy ``Llama.generate`` loop over one prompt
(batch 1) from an empty cache, timed inside the runner, on the lab's token ids (the same Gemma
vocabulary: ``tokenize`` gives llama.cpp's own ids to compare), the same budget and the same number of
threads as the lab's runs. The bench interleaves these calls with the lab's.

Methods: ``none`` (plain decoding) and ``lookup`` (prompt lookup: llama-cpp-python's
``LlamaPromptLookupDecoding`` as ``draft_model``, ``num_pred_tokens`` = the bench's k). A draft model
is left out with its reason (``SKIPPED``). The GGUF is Q4_K_M: llama.cpp computes on the quantized
weights, the lab on the same weights dequantized to float32, so their greedy texts may part.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from core.api import encode_prompt
from core.common.errors import UserError
from core.llamacpp import env
from core.llamacpp.client import METHODS, Generation, LlamaCppError, LlamaCppRunner
from core.models import gemma
from core.models.loading import load_model, resolve_preset

PRESET = "gemma-270m"  # the one preset that ships a GGUF
MAX_NGRAM_SIZE = 2  # LlamaPromptLookupDecoding's default
SKIPPED = {"draft": "no GGUF draft model for Gemma 3 270M here (the lab's Gemma draft is a safetensors model over a "
                    "reduced 4,096-token vocabulary), and llama-cpp-python 0.3.36 ships prompt lookup as its only "
                    "draft_model"}


def check_preset(preset: str) -> None:
    if preset != PRESET:
        raise UserError(f"--compare-llamacpp runs llama.cpp on the {PRESET} preset's own GGUF: use --preset {PRESET} "
                        f"(got {preset!r})")


class LlamaCppPeer:
    """Warm llama.cpp runners, one per method, for the bench's interleaved timing."""

    def __init__(self, preset: str, k: int, threads: int, max_new_tokens: int,
                 log: Callable[[str], None] = lambda m: print(m, file=sys.stderr), methods: tuple[str, ...] = METHODS):
        check_preset(preset)
        if not env.ready():
            raise UserError(env.missing_reason())
        self.preset, self.k, self.threads, self.max_new_tokens = preset, k, threads, max_new_tokens
        self.methods, self.log = methods, log
        self.runners: dict[str, LlamaCppRunner] = {}
        self.skipped: dict[str, str] = dict(SKIPPED)
        self.load_s: dict[str, float] = {}
        self.gguf: str | None = None

    def start(self) -> "LlamaCppPeer":
        """Every method's runner, loaded; on a failure (Ctrl-C included) those already loaded are closed."""
        try:
            self._load_all()
        except BaseException:
            self.close()
            raise
        return self

    def _load_all(self) -> None:
        target = load_model(resolve_preset(self.preset).target, "cpu")
        self.gguf = str(gemma.kept_gguf(self.log))
        for name in self.methods:
            self.log(f"llama.cpp: loading {name} ({self.gguf})")
            runner = LlamaCppRunner(self.gguf, name, threads=self.threads, num_pred_tokens=self.k,
                                    max_ngram_size=MAX_NGRAM_SIZE, stop_ids=target.eos_ids).start()
            self.runners[name] = runner
            self.load_s[name] = runner.load_s
            if set(runner.eog_ids) != set(target.eos_ids):
                raise LlamaCppError(f"llama.cpp ends generation at {runner.eog_ids} of the lab's end tokens "
                                    f"{sorted(target.eos_ids)}: the GGUF is not the preset's")

    def close(self) -> None:
        for runner in self.runners.values():
            runner.close()

    def __enter__(self) -> "LlamaCppPeer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def requests(self, prompts: list[str]) -> dict[str, list[Callable[[], Generation]]]:
        """method -> one call per prompt (a greedy request of ``max_new_tokens``, alone)."""
        target = load_model(resolve_preset(self.preset).target, "cpu")
        ids = [encode_prompt(target, p, self.max_new_tokens) for p in prompts]

        def call(runner: LlamaCppRunner, prompt_ids: list[int]) -> Callable[[], Generation]:
            return lambda: runner.generate(prompt_ids, self.max_new_tokens)

        return {name: [call(runner, i) for i in ids] for name, runner in self.runners.items()}

    def info(self) -> dict:
        found = env.stamp()
        return {"version": found.llama_cpp if found else None, "gguf": Path(self.gguf).name if self.gguf else None,
                "threads": self.threads, "lookup": {"num_pred_tokens": self.k, "max_ngram_size": MAX_NGRAM_SIZE},
                "timing": "warm Llama objects (loaded before timing, a warm-up request first), one request at a "
                          "time (batch 1) from an empty cache, wall time of the Llama.generate loop inside the "
                          "runner process (prompt processing included)",
                "load_s": {k: round(v, 1) for k, v in self.load_s.items()}, "skipped": self.skipped}

