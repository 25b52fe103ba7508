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
first line names the cause, with the runner's exit status and signal where it ended.
"""
from __future__ import annotations

import collections
import contextlib
import ctypes
import json
import os
import signal
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from core.common.errors import ExternalError, UserError, exit_status, one_line
from core.vllm import env

RUNNER = Path(__file__).with_name("runner.py")
MARK = "@@sdlab@@ "  # runner.MARK (the runner is not importable from the lab's environment)
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
    variables = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    variables.update({
        "VLLM_CPU_OMP_THREADS_BIND": f"0-{threads - 1}",
        "VLLM_CPU_KVCACHE_SPACE": f"{kv_cache_gib:g}",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "OMP_NUM_THREADS": str(threads),
        "TOKENIZERS_PARALLELISM": "false",
    })
    return variables


def check_threads(threads: int) -> None:
    if not 1 <= threads <= (os.cpu_count() or 1):
        raise UserError(f"vLLM threads must be between 1 and the machine's {os.cpu_count()} cores (got {threads})")


def die_with_parent() -> None:
    """In the runner, before it starts (Linux): a SIGTERM when the lab's process dies, so a killed bench
    or test leaves no vLLM behind, even one still loading (which reads no stdin to see the end)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class VllmRunner:
    """One ``vllm.LLM`` (one model and speculative config) in a runner subprocess."""

    KV_CACHE_GIB = 1.0  # vLLM's KV pool (VLLM_CPU_KVCACHE_SPACE): ample for the lab's prompts

    def __init__(self, model: str, speculative_config: dict | None = None, *, threads: int = 2,
                 max_model_len: int | None = None, max_num_seqs: int | None = None,
                 log_file: str | Path | None = None):
        if not env.ready():
            raise UserError(env.missing_reason())
        check_threads(threads)
        self.model, self.speculative_config = str(model), speculative_config
        self.threads = threads
        self.max_model_len, self.max_num_seqs = max_model_len, max_num_seqs
        self.log_path = Path(log_file) if log_file else None
        self.process: subprocess.Popen | None = None
        self.load_s: float | None = None
        self._tail: collections.deque[str] = collections.deque(maxlen=40)  # vLLM's own lines, for error messages
        self._lines: queue.Queue[str | None] = queue.Queue()  # the runner's stdout (a new queue per ``start``)

    # ---- life cycle --------------------------------------------------------------------------
    def start(self) -> "VllmRunner":
        """Start the runner and load the model; on any failure the runner is killed and reaped first."""
        try:
            self.spawn()
            loaded = self.request({"op": "load", "model": self.model, "speculative_config": self.speculative_config,
                                   "dtype": "float32", "max_model_len": self.max_model_len,
                                   "max_num_seqs": self.max_num_seqs}, LOAD_TIMEOUT_S)
        except BaseException:
            self.kill()
            raise
        self.load_s = loaded["load_s"]
        return self

    def spawn(self) -> "VllmRunner":
        """The runner process, once it says it is ready for requests, with no model loaded (``start``)."""
        log = open(self.log_path, "a", encoding="utf-8") if self.log_path else subprocess.DEVNULL
        self.process = subprocess.Popen(
            [str(env.python()), str(RUNNER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
            env=runner_env(self.threads, self.KV_CACHE_GIB), text=True, encoding="utf-8", bufsize=1,
            preexec_fn=die_with_parent)
        if log is not subprocess.DEVNULL:
            log.close()  # the child holds its own descriptor
        self._lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self._read(LOAD_TIMEOUT_S)  # {"ready": true}
        return self

    def close(self) -> None:
        if self.process is None:
            return
        try:
            if self.process.poll() is None:
                self.process.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.process.stdin.flush()
                self.process.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        finally:
            self.process = None

    def kill(self) -> None:
        """Kill the runner and reap it, without asking it to quit (it may be loading, reading no request)."""
        if self.process is None:
            return
        with contextlib.suppress(OSError):
            self.process.kill()
        self.process.wait()
        self.process = None

    def __enter__(self) -> "VllmRunner":
        return self.start() if self.process is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- requests ----------------------------------------------------------------------------
    def request(self, obj: dict, timeout_s: float = REQUEST_TIMEOUT_S) -> dict:
        if self.process is None:
            raise VllmError("the vLLM runner is not running")
        if self.process.poll() is not None:
            raise self._exited()
        try:
            self.process.stdin.write(json.dumps(obj) + "\n")
            self.process.stdin.flush()
        except OSError:
            raise self._exited() from None
        answer = self._read(timeout_s)
        if "error" in answer:
            raise VllmError(f"vLLM: {one_line(answer['error'])}{self._last_lines()}\n{answer.get('traceback', '')}")
        return answer

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

    def _read(self, timeout_s: float) -> dict:
        """The next marked line; vLLM's own lines on the way are kept for error messages."""
        while True:
            try:
                line = self._lines.get(timeout=timeout_s)
            except queue.Empty:
                self.process.kill()
                self.process.wait()
                raise VllmError(f"no answer from the vLLM runner in {timeout_s:.0f} s (killed)"
                                + self._last_lines()) from None
            if line is None:
                raise self._exited()
            if line.startswith(MARK):
                return json.loads(line[len(MARK):])
            self._tail.append(line.rstrip())

    def _pump(self) -> None:
        """A thread: the runner's stdout, line by line, into ``_lines`` (None at its end)."""
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _exited(self) -> VllmError:
        """The error for a runner that has ended (reaped here): its exit status, and the signal that ended it."""
        try:
            status = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # its stdout or stdin closed, but still running
            self.process.kill()
            status = self.process.wait()
        return VllmError(f"the vLLM runner exited with {exit_status(status)}" + self._last_lines())

    def _last_lines(self) -> str:
        """`` (its log: PATH)`` and, on the lines after, vLLM's last lines on stdout: the first line of an
        error stays its cause."""
        where = f" (its log: {self.log_path})" if self.log_path else ""
        return where + ("\nits last lines:\n" + "\n".join(self._tail) if self._tail else "")
