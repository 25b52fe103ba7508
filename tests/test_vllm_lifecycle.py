"""What the lab leaves behind when vLLM fails, and whom ``vllm serve`` trusts, without vLLM: fake venvs
(tests/fake_vllm.py) whose ``bin/python`` is the real runner under the lab's Python (its load fails),
a runner that loads and never answers, a server that never listens, one that answers ``/health``
itself; and a local HTTP server that is not vLLM, holding the port."""
from __future__ import annotations

import contextlib
import http.server
import os
import signal
import threading

import pytest
from fake_vllm import HEALTH_SERVER, LAB_PYTHON, RUNNER, SILENT_LOAD, SLEEPER, fake_venv, gone, started

import core.vllm.client
import core.vllm.serve
from core.common.errors import UserError
from core.vllm.client import VllmError, VllmRunner
from core.vllm.serve import serve, stop


@contextlib.contextmanager
def reaped_at_the_end(folder):
    """Kill the fake vLLM if a test leaves it running, so a failing test leaks no process."""
    try:
        yield
    finally:
        pid = started(folder)
        if pid and not gone(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


def test_a_load_that_fails_leaves_no_runner_behind(tmp_path, monkeypatch):
    """``start`` raises (no vLLM in the lab's Python): the runner is killed and reaped, not left waiting
    for requests nobody will send (606 MB with a real vLLM)."""
    venv = fake_venv(tmp_path / "venv", LAB_PYTHON, monkeypatch)
    runner = VllmRunner("assets/tiny/target")
    with reaped_at_the_end(venv):
        with pytest.raises(VllmError, match="No module named 'vllm'"):
            runner.start()
        assert runner.process is None
        assert gone(started(venv))


def test_a_with_block_whose_load_fails_leaves_no_runner_behind(tmp_path, monkeypatch):
    venv = fake_venv(tmp_path / "venv", LAB_PYTHON, monkeypatch)
    with reaped_at_the_end(venv):
        with pytest.raises(VllmError, match="No module named 'vllm'"):
            with VllmRunner("assets/tiny/target"):
                pass
        assert gone(started(venv))


def test_a_load_that_never_answers_is_killed_and_reaped(tmp_path, monkeypatch):
    venv = fake_venv(tmp_path / "venv", SILENT_LOAD, monkeypatch)
    monkeypatch.setattr(core.vllm.client, "LOAD_TIMEOUT_S", 0.3)
    runner = VllmRunner("assets/tiny/target")
    with reaped_at_the_end(venv):
        with pytest.raises(VllmError, match="no answer from the vLLM runner"):
            runner.start()
        assert runner.process is None
        assert gone(started(venv))  # killed, and no zombie left


def test_a_runner_killed_between_requests_is_an_error_with_its_signal(tmp_path, monkeypatch):
    venv = fake_venv(tmp_path / "venv", RUNNER, monkeypatch)
    with reaped_at_the_end(venv), VllmRunner("assets/tiny/target") as runner:
        os.kill(started(venv), signal.SIGKILL)
        runner.process.wait()
        with pytest.raises(VllmError, match=r"^the vLLM runner exited with status -9 \(SIGKILL\)"):
            runner.metrics()


@pytest.fixture
def foreign_server():
    """Something that is not vLLM answering 200 to everything on a loopback port: the port."""
    class Anything(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"not vLLM")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Anything)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_serve_refuses_a_port_another_program_listens_on(tmp_path, monkeypatch, foreign_server):
    venv = fake_venv(tmp_path / "venv", SLEEPER, monkeypatch)
    with reaped_at_the_end(venv):
        with pytest.raises(UserError, match=f"port {foreign_server} on 127.0.0.1 is in use"):
            with serve("assets/tiny/target", port=foreign_server, log_file=tmp_path / "serve.log"):
                pass
        assert started(venv) is None  # refused before vLLM was started


def test_serve_does_not_announce_another_program_that_took_the_port(tmp_path, monkeypatch, foreign_server):
    """The port was free when checked and taken before vLLM bound it: ``/health`` answers 200, but not
    from the server serve started (which never listens here)."""
    venv = fake_venv(tmp_path / "venv", SLEEPER, monkeypatch)
    monkeypatch.setattr(core.vllm.serve, "port_free", lambda port, host="127.0.0.1": True, raising=False)
    stopped = []
    monkeypatch.setattr(core.vllm.serve, "stop", lambda process: (stopped.append(process), stop(process)))
    with reaped_at_the_end(venv):
        with pytest.raises(VllmError, match="another program answers on"):
            with serve("assets/tiny/target", port=foreign_server, log_file=tmp_path / "serve.log"):
                pass
        assert [p.returncode is not None for p in stopped] == [True]  # the server it started is stopped


def test_serve_trusts_its_own_server(tmp_path, monkeypatch):
    """A fake ``vllm serve`` that answers ``/health`` itself on the port it was given is the server."""
    venv = fake_venv(tmp_path / "venv", HEALTH_SERVER, monkeypatch)
    with reaped_at_the_end(venv):
        with serve("assets/tiny/target", log_file=tmp_path / "serve.log") as server:
            assert server.get("/health") == "ok"
            assert server.process.pid == started(venv)
        assert gone(started(venv))
