"""A program in a process of its own that speaks JSON lines: an engine's runner script under its own
venv's Python (vLLM's, llama.cpp's), never imported by the lab.

    runner = JsonLinesRunner([python, "runner.py"], env=child_env({}), error=VllmError,
                             name="the vLLM runner", engine="vLLM", start_timeout_s=900, request_timeout_s=600)
    answer = runner.launch({"op": "load", ...})      # spawn, wait for {"ready": true}, then the load
    runner.request({"op": "generate", ...})
    runner.close()                                    # {"op": "quit"}, then reaped

One request per stdin line, one answer per request on stdout, marked with ``MARK`` because the engine
may print its own logs on stdout too; its other lines are kept (the last 40) for error messages, and
its stderr goes to ``log_path`` (or nowhere). An answer ``{"error": ...}`` is raised as ``error`` with
the engine's name; the runner stays up. Whatever fails while starting -- a load that raises, no answer
in time, Ctrl-C -- the runner is killed and reaped before the error leaves ``launch``; a runner that
ends is an ``error`` whose first line names its exit status and signal. A runner dies with the lab's
process (``die_with_parent``), even one still loading, which reads no stdin to see the end.
"""
from __future__ import annotations

import collections
import contextlib
import ctypes
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

from core.common.errors import ExternalError, exit_status, one_line
from core.common.runner_loop import MARK  # the runner side of the protocol

LAB_VARIABLES = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")  # would leak the lab's packages into another venv


def child_env(extra: dict[str, str]) -> dict[str, str]:
    """The lab's environment less what would leak its packages into another venv, with ``extra``."""
    variables = {k: v for k, v in os.environ.items() if k not in LAB_VARIABLES}
    variables.update(extra)
    return variables


def die_with_parent() -> None:
    """In the runner, before it starts (Linux): a SIGTERM when the lab's process dies, so a killed bench
    or test leaves no runner behind, even one still loading."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class JsonLinesRunner:
    """One runner process (module docstring): ``launch`` or ``spawn``, ``request``, ``close`` or ``kill``."""

    TAIL_LINES = 40

    def __init__(self, command: list[str], *, env: dict[str, str], error: type[ExternalError], name: str,
                 engine: str, start_timeout_s: float, request_timeout_s: float,
                 log_path: str | Path | None = None):
        self.command, self.env = command, env
        self.error, self.name, self.engine = error, name, engine  # "the vLLM runner", "vLLM"
        self.start_timeout_s, self.request_timeout_s = start_timeout_s, request_timeout_s
        self.log_path = Path(log_path) if log_path else None
        self.process: subprocess.Popen | None = None
        self._tail: collections.deque[str] = collections.deque(maxlen=self.TAIL_LINES)  # its own stdout lines
        self._lines: queue.Queue[str | None] = queue.Queue()  # the runner's stdout (a new queue per ``spawn``)

    # ---- life cycle --------------------------------------------------------------------------
    def launch(self, load: dict) -> dict:
        """Spawn the runner and send ``load``, waiting up to ``start_timeout_s``; its answer. On any
        failure (Ctrl-C included) the runner is killed and reaped before the error leaves."""
        try:
            self.spawn()
            return self.request(load, self.start_timeout_s)
        except BaseException:
            self.kill()
            raise

    def spawn(self) -> "JsonLinesRunner":
        """The runner process, once it says it is ready for requests (nothing loaded yet)."""
        log = open(self.log_path, "a", encoding="utf-8") if self.log_path else subprocess.DEVNULL
        self.process = subprocess.Popen(
            self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=self.env, text=True,
            encoding="utf-8", bufsize=1, preexec_fn=die_with_parent)
        if log is not subprocess.DEVNULL:
            log.close()  # the child holds its own descriptor
        self._lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self._read(self.start_timeout_s)  # {"ready": true}
        return self

    def close(self) -> None:
        """Ask the runner to quit and reap it (killed when it does not end in time)."""
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

    # ---- requests ----------------------------------------------------------------------------
    def request(self, obj: dict, timeout_s: float | None = None) -> dict:
        """Send one request and read its answer (``request_timeout_s`` unless given); an error answer,
        a runner that has ended or one that stays silent is ``error``."""
        if self.process is None:
            raise self.error(f"{self.name} is not running")
        if self.process.poll() is not None:
            raise self._exited()
        try:
            self.process.stdin.write(json.dumps(obj) + "\n")
            self.process.stdin.flush()
        except OSError:
            raise self._exited() from None
        answer = self._read(self.request_timeout_s if timeout_s is None else timeout_s)
        if "error" in answer:
            raise self.error(f"{self.engine}: {one_line(answer['error'])}{self._last_lines()}\n"
                             f"{answer.get('traceback', '')}")
        return answer

    def _read(self, timeout_s: float) -> dict:
        """The next marked line; the engine's own lines on the way are kept for error messages."""
        while True:
            try:
                line = self._lines.get(timeout=timeout_s)
            except queue.Empty:
                self.process.kill()
                self.process.wait()
                raise self.error(f"no answer from {self.name} in {timeout_s:.0f} s (killed)"
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

    def _exited(self) -> ExternalError:
        """The error for a runner that has ended (reaped here): its exit status, and the signal that ended it."""
        try:
            status = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # its stdout or stdin closed, but still running
            self.process.kill()
            status = self.process.wait()
        return self.error(f"{self.name} exited with {exit_status(status)}" + self._last_lines())

    def _last_lines(self) -> str:
        """`` (its log: PATH)`` and, on the lines after, the engine's last lines on stdout: the first line
        of an error stays its cause."""
        where = f" (its log: {self.log_path})" if self.log_path else ""
        return where + ("\nits last lines:\n" + "\n".join(self._tail) if self._tail else "")
