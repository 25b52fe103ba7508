"""The Production monitor against hostile endpoints made here (issue 30, F5-F10): a slow-loris, an
endless body, huge labels, NaN, a body cut short, a secret-holding service, a redirect. Each fetch
ends within its deadline with a one-line message that quotes nothing the server sent."""
from __future__ import annotations

import socket
import threading
import time

import pytest

from core import UserError
from core.serving import monitor
from core.serving.monitor import checked_target, fetch, parse

DEADLINE_S = 1.0
SECRET = "SECRET_API_KEY=hunter2-abcdef"


class Hostile:
    """A loopback TCP server that answers every connection with ``reply(conn)``."""

    def __init__(self, reply):
        self.reply = reply
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        try:
            conn.recv(4096)
            self.reply(conn, self.stop)
        except OSError:
            pass
        finally:
            conn.close()

    @property
    def url(self):
        return f"http://localhost:{self.port}/metrics"

    def close(self):
        self.stop.set()
        self.sock.close()


def ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + extra + \
        f"Content-Length: {len(body)}\r\n\r\n".encode() + body


def slow_loris(conn, stop):
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    while not stop.is_set():
        conn.sendall(b"X")
        time.sleep(0.2)  # each byte well inside a per-read timeout


def endless(conn, stop):
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
    line = b"vllm:num_requests_running 1\n" * 4096
    while not stop.is_set():
        conn.sendall(line)


def cut_short(conn, stop):
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\nvllm:spec_decode_num_drafts_total 1\n")


def secret(conn, stop):
    conn.sendall(ok(f"{SECRET}\n".encode()))


def huge_position(conn, stop):
    conn.sendall(ok(b'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="1000000000"} 1\n'))


def nan_value(conn, stop):
    conn.sendall(ok(b"vllm:spec_decode_num_drafts_total NaN\n"))


def redirect(conn, stop):
    conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/\r\nContent-Length: 0\r\n\r\n")


def too_many_series(conn, stop):
    conn.sendall(ok(b"".join(b"x_%d 1\n" % i for i in range(monitor.MAX_SERIES + 1))))


def chunked(conn, stop):
    body = b"vllm:spec_decode_num_drafts_total 7\n"
    conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")


@pytest.mark.parametrize("reply, said", [
    (slow_loris, "did not answer in full within"),
    (endless, "did not answer in full within|sent more than"),
    (cut_short, "ended its reply early"),
    (secret, "line 1 is not the Prometheus text format"),
    (huge_position, "position label must be a number from 0 to 64"),
    (nan_value, "must be a finite number >= 0"),
    (redirect, "answered HTTP 302"),
    (too_many_series, "more than 100,000 series"),
])
def test_a_hostile_endpoint_gets_one_line_within_the_deadline(reply, said):
    import re

    server = Hostile(reply)
    try:
        start = time.monotonic()
        with pytest.raises(UserError) as caught:
            parse(fetch(server.url, deadline_s=DEADLINE_S), t=0)
        elapsed = time.monotonic() - start
    finally:
        server.close()
    message = str(caught.value)
    assert re.search(said, message), message
    assert "\n" not in message and "hunter2" not in message and "internal error" not in message
    assert "1000000000" not in message and "NaN" not in message
    assert elapsed < DEADLINE_S + 1.5  # the deadline covers connect, headers and the whole body


def test_a_chunked_reply_is_read():
    server = Hostile(chunked)
    try:
        assert parse(fetch(server.url, deadline_s=DEADLINE_S), t=0).drafts == 7
    finally:
        server.close()


def test_https_connects_to_the_checked_address(monkeypatch):
    """A name is resolved once: after the check, a second lookup (DNS rebinding) is never made."""
    lookups = []
    real = socket.getaddrinfo

    def counting(host, *args, **kw):
        lookups.append(host)
        return real("127.0.0.1", *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", counting)
    target = checked_target("https://rebind.example:9/metrics", allow_remote=False)
    assert (target.address, target.hostname, target.scheme) == ("127.0.0.1", "rebind.example", "https")
    with pytest.raises(UserError):  # nothing listens on port 9: refused at the checked address
        fetch("https://rebind.example:9/metrics", deadline_s=DEADLINE_S)
    assert lookups.count("rebind.example") == 2  # one per checked_target call, none by the connection


def test_nothing_fetched_is_echoed_by_the_parser():
    for text in (f"{SECRET}\n", "vllm:spec_decode_num_drafts_total{engine=0} hunter2\n"):
        with pytest.raises(UserError) as caught:
            parse(text, t=0)
        assert "hunter2" not in str(caught.value) and str(caught.value).startswith("line 1")
    with pytest.raises(UserError, match="must be a finite number"):
        parse("vllm:num_requests_running -3\n", t=0)


def gradio_config(conn, stop):
    conn.sendall(ok(b'{"version":"6.31.0","mode":"blocks","components":[{"id":1,"type":"state"}]}'))


@pytest.mark.parametrize("lang, said", [("zh", "回答的不是 Prometheus 指标（第 1 行起就不是）"),
                                        ("en", "did not answer with Prometheus metrics (line 1 is not")])
def test_a_json_page_such_as_gradios_config_gets_one_line_in_the_pages_language(lang, said):
    """The monitor pointed at the app's /config (JSON, not metrics): one line in the page's language
    naming the address, quoting nothing of the reply."""
    from app.controls import MonitorPolicy
    from app.views.production.view import read

    server = Hostile(gradio_config)
    try:
        with pytest.raises(UserError) as caught:
            read(server.url, MonitorPolicy(), lang)
    finally:
        server.close()
    message = str(caught.value)
    assert said in message and server.url in message
    assert "\n" not in message and "{" not in message and "version" not in message
