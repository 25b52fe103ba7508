"""The lab's side of llama.cpp's runner (``core/llamacpp/runner.py``): start it in llama.cpp's venv,
load a GGUF, send greedy requests as token ids.

    with LlamaCppRunner(gguf, method="lookup", threads=2, num_pred_tokens=4, stop_ids=[1, 106]) as llama:
        generation = llama.generate(prompt_ids, max_tokens=64)
        generation.tokens, generation.wall_s

The process machinery (spawn, marked answers, kill and reap on a failed start, the exit status in the
error) is ``core.common.runner.JsonLinesRunner``; a failure is a ``LlamaCppError`` (an ``ExternalError``:
one ``error:`` line in the CLI). llama.cpp runs ``threads`` threads of its own, in the runner's process.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from pydantic import BaseModel

from core.common.errors import ExternalError, UserError
from core.common.runner import JsonLinesRunner, child_env
from core.llamacpp import env

RUNNER = Path(__file__).with_name("runner.py")
LOAD_TIMEOUT_S = 300.0  # a 253 MB GGUF loads in seconds; a busy machine gets room
REQUEST_TIMEOUT_S = 600.0
METHODS = ("none", "lookup")  # plain decoding; prompt lookup (LlamaPromptLookupDecoding as draft_model)
N_CTX = 2048  # tokens of context per runner: the lab's prompts and budgets, with room for a draft


class LlamaCppError(ExternalError):
    """The llama.cpp runner died, timed out or answered an error."""


class Generation(BaseModel):
    """One greedy request: the new tokens (an end token kept) and the decode loop's wall time in the runner."""

    tokens: list[int]
    wall_s: float


class LlamaCppRunner(JsonLinesRunner):
    """One ``llama_cpp.Llama`` on a GGUF, plain or with prompt lookup, in a runner subprocess."""

    def __init__(self, gguf: str | Path, method: str = "none", *, threads: int = 2, num_pred_tokens: int = 4,
                 max_ngram_size: int = 2, stop_ids: Iterable[int] = (), n_ctx: int = N_CTX,
                 log_file: str | Path | None = None):
        if not env.ready():
            raise UserError(env.missing_reason())
        if method not in METHODS:
            raise UserError(f"llama.cpp method must be one of {', '.join(METHODS)} (got {method!r})")
        if not 1 <= threads <= (os.cpu_count() or 1):
            raise UserError(f"llama.cpp threads must be between 1 and the machine's {os.cpu_count()} cores "
                            f"(got {threads})")
        super().__init__([str(env.python()), str(RUNNER)], env=child_env({"OMP_NUM_THREADS": str(threads)}),
                         error=LlamaCppError, name="the llama.cpp runner", engine="llama.cpp",
                         start_timeout_s=LOAD_TIMEOUT_S, request_timeout_s=REQUEST_TIMEOUT_S, log_path=log_file)
        self.load_request = {"op": "load", "gguf": str(gguf), "method": method, "n_threads": threads,
                             "n_ctx": n_ctx, "num_pred_tokens": num_pred_tokens, "max_ngram_size": max_ngram_size,
                             "stop_ids": sorted(stop_ids)}
        self.load_s: float | None = None
        self.eog_ids: list[int] = []  # the stop ids llama.cpp itself counts as an end of generation

    def start(self) -> "LlamaCppRunner":
        """Start the runner and load the GGUF; on any failure the runner is killed and reaped first."""
        loaded = self.launch(self.load_request)
        self.load_s, self.eog_ids = loaded["load_s"], loaded["eog_ids"]
        return self

    def __enter__(self) -> "LlamaCppRunner":
        return self.start() if self.process is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    def generate(self, prompt: list[int], max_tokens: int) -> Generation:
        """Greedy decoding of one token-id prompt from an empty cache; the wall time is the runner's."""
        return Generation(**self.request({"op": "generate", "prompt": prompt, "max_tokens": max_tokens}))

    def tokenize(self, text: str) -> list[int]:
        """llama.cpp's own token ids for ``text`` (its BOS first), to set beside the lab's tokenizer's."""
        return self.request({"op": "tokenize", "text": text})["tokens"]
