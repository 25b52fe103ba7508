"""Runs inside llama.cpp's virtual environment (``core.llamacpp.env``), never imported by the lab.

    <venv>/bin/python core/llamacpp/runner.py        # then JSON lines on stdin, one request each

It speaks JSON lines: one request per stdin line, one answer per request on stdout, marked with
``MARK`` (``core.common.runner_loop``). Requests (``op``):

* ``load``: ``{"gguf", "n_threads", "n_ctx", "method": "none" | "lookup", "num_pred_tokens",
  "max_ngram_size", "stop_ids"}`` -> ``{"load_s", "eog_ids"}``: one ``llama_cpp.Llama`` on the GGUF,
  with ``LlamaPromptLookupDecoding`` as its ``draft_model`` for ``lookup``; ``eog_ids`` are the
  ``stop_ids`` llama.cpp itself counts as an end of generation;
* ``generate``: ``{"prompt": [token ids], "max_tokens"}`` -> ``{"tokens", "wall_s"}``: greedy
  (``temp=0``, ``top_k=1``, no penalty) through ``Llama.generate`` from an empty cache, up to
  ``max_tokens`` new tokens or a token of ``stop_ids`` (kept, as the lab keeps its end token);
  ``wall_s`` is timed around that loop alone, the prompt's processing included;
* ``tokenize``: ``{"text"}`` -> ``{"tokens"}``, llama.cpp's own tokenization (its BOS first, special
  tokens parsed); ``quit``.

An error in a request is answered ``{"error": "..."}`` and the runner goes on. Only the standard
library and llama_cpp are used here: this file runs under the venv's Python, not the lab's.
"""
from __future__ import annotations

import sys
from pathlib import Path
from time import perf_counter

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # runner_loop, by its folder
from runner_loop import serve  # noqa: E402  (standard library only)

GREEDY = dict(temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0)



class Runner:
    def __init__(self):
        self.llm = None
        self.stop_ids: set[int] = set()

    def load(self, request: dict) -> dict:
        import llama_cpp
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        start = perf_counter()
        method = request.get("method", "none")
        if method not in ("none", "lookup"):
            raise ValueError(f"unknown method {method!r} (none or lookup)")
        draft = (LlamaPromptLookupDecoding(max_ngram_size=request.get("max_ngram_size", 2),
                                           num_pred_tokens=request["num_pred_tokens"]) if method == "lookup" else None)
        self.llm = llama_cpp.Llama(
            model_path=request["gguf"], n_ctx=request["n_ctx"], n_threads=request["n_threads"],
            n_threads_batch=request["n_threads"], n_gpu_layers=0, seed=0, verbose=False, draft_model=draft,
            logits_all=draft is not None)  # with a draft: a scores row per context position, not n_batch rows
        self.stop_ids = set(request.get("stop_ids", []))
        vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        eog = sorted(t for t in self.stop_ids if llama_cpp.llama_vocab_is_eog(vocab, t))
        return {"load_s": perf_counter() - start, "eog_ids": eog}

    def generate(self, request: dict) -> dict:
        prompt, max_tokens = request["prompt"], request["max_tokens"]
        if len(prompt) + max_tokens > self.llm.n_ctx():
            raise ValueError(f"{len(prompt)} prompt tokens and {max_tokens} new ones exceed n_ctx {self.llm.n_ctx()}")
        self.llm.reset()  # an empty cache: every request processes its whole prompt, as the lab's runs do
        tokens: list[int] = []
        start = perf_counter()
        for token in self.llm.generate(prompt, reset=True, **GREEDY):
            tokens.append(int(token))
            if token in self.stop_ids or len(tokens) >= max_tokens:
                break
        return {"tokens": tokens, "wall_s": perf_counter() - start}

    def handle(self, request: dict) -> dict:
        op = request.get("op")
        if op == "load":
            return self.load(request)
        if op == "generate":
            return self.generate(request)
        if op == "tokenize":
            return {"tokens": self.llm.tokenize(request["text"].encode("utf-8"), add_bos=True, special=True)}
        raise ValueError(f"unknown op {op!r}")


def main() -> int:
    return serve(Runner().handle)


if __name__ == "__main__":
    sys.exit(main())
