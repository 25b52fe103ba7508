"""Runs inside the vLLM virtual environment (``core.vllm.env``), never imported by the lab.

    <venv>/bin/python core/vllm/runner.py        # then JSON lines on stdin, one request each

It speaks JSON lines: one request per stdin line, one answer per request on stdout, marked with
``MARK`` because vLLM prints its own logs on stdout too. Requests (``op``):

* ``load``: ``{"model", "speculative_config", "dtype", "max_model_len", "seed"}`` -> ``{"load_s"}``;
* ``generate``: ``{"prompts": [[token ids], ...], "max_tokens"}``, greedy -> ``{"outputs": [{"tokens",
  "text", "finish_reason"}], "wall_s", "metrics"}`` where ``metrics`` is how much each of vLLM's own
  counters (``LLM.get_metrics()``) grew during this call;
* ``metrics``: the counters as they are; ``exposition``: ``{"text"}``, the Prometheus text of vLLM's
  registry, what its server's ``/metrics`` shows; ``quit``.

An error in a request is answered ``{"error": "..."}`` and the runner goes on. Only the standard
library and vLLM are used here: this file runs under the venv's Python, not the lab's.
"""
from __future__ import annotations

import sys
from pathlib import Path
from time import perf_counter

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # runner_loop, by its folder
from runner_loop import serve  # noqa: E402  (standard library only)




def counters(llm) -> dict:
    """vLLM's counters and vectors by name (labels summed away): {name: number or [numbers]}."""
    out: dict = {}
    for metric in llm.get_metrics():
        if hasattr(metric, "values"):  # a Vector, e.g. vllm:spec_decode_num_accepted_tokens_per_pos
            old = out.get(metric.name) or [0] * len(metric.values)
            out[metric.name] = [a + b for a, b in zip(old, metric.values)]
        elif type(metric).__name__ == "Counter":
            out[metric.name] = out.get(metric.name, 0) + metric.value
    return out


def grown(before: dict, after: dict) -> dict:
    delta = {}
    for name, value in after.items():
        old = before.get(name)
        if isinstance(value, list):
            old = old or [0] * len(value)
            delta[name] = [a - b for a, b in zip(value, old)]
        else:
            delta[name] = value - (old or 0)
    return delta


class Runner:
    def __init__(self):
        self.llm = None

    def load(self, request: dict) -> dict:
        from vllm import LLM

        start = perf_counter()
        options = dict(model=request["model"], dtype=request.get("dtype", "float32"), enforce_eager=True,
                       disable_log_stats=False, seed=request.get("seed", 0))
        if request.get("max_model_len"):
            options["max_model_len"] = request["max_model_len"]
        if request.get("speculative_config"):
            options["speculative_config"] = request["speculative_config"]
        if request.get("max_num_seqs"):
            options["max_num_seqs"] = request["max_num_seqs"]
        self.llm = LLM(**options)
        return {"load_s": perf_counter() - start}

    def generate(self, request: dict) -> dict:
        from vllm import SamplingParams

        params = SamplingParams(temperature=0.0, max_tokens=request["max_tokens"], ignore_eos=request.get("ignore_eos", False))
        prompts = [{"prompt_token_ids": ids} for ids in request["prompts"]]
        before = counters(self.llm)
        start = perf_counter()
        results = self.llm.generate(prompts, params, use_tqdm=False)
        wall = perf_counter() - start
        outputs = [{"tokens": list(r.outputs[0].token_ids), "text": r.outputs[0].text,
                    "finish_reason": r.outputs[0].finish_reason} for r in results]
        return {"outputs": outputs, "wall_s": wall, "metrics": grown(before, counters(self.llm))}

    def handle(self, request: dict) -> dict | None:
        op = request.get("op")
        if op == "load":
            return self.load(request)
        if op == "generate":
            return self.generate(request)
        if op == "metrics":
            return {"metrics": counters(self.llm)}
        if op == "exposition":
            from prometheus_client import REGISTRY, generate_latest

            return {"text": generate_latest(REGISTRY).decode()}
        raise ValueError(f"unknown op {op!r}")


def main() -> int:
    return serve(Runner().handle)


if __name__ == "__main__":  # vLLM may spawn processes that re-import this file
    sys.exit(main())
