"""Read a serving engine's Prometheus endpoint (vLLM, SGLang, or this lab's own ``/metrics``) and turn
two scrapes into the window between them: tau, per-position acceptance, drafted and accepted
tokens/s, running and waiting requests, and whether speculation pays in that window.

Parsing is prometheus-client's own (``text_string_to_metric_families``). Counters are summed
over every label set (all engines, all served models); the per-position counter is grouped by
its ``position`` label (0-based, as vLLM writes it). The numbers are ``core.records.metrics``'
definitions, applied to the counters' deltas. SGLang exports no draft counters, only its own
running mean of the acceptance length (the gauge ``sglang:spec_accept_length``, averaged here over
its ranks): for it tau is that gauge, and per-position acceptance and token rates stay empty.

Fetching is guarded against request forgery and against hostile endpoints: the target's host name
is resolved once, and unless remote targets are allowed every address must be a loopback one; the
connection goes to the checked address itself (no second lookup, for https too: TLS checks the
certificate against the name), redirects are not followed, and the whole fetch (connect, headers,
body) has one deadline and a size cap. A reply that is not the Prometheus text format is refused
naming a line number, never quoting the text: a visitor must not read other services' replies.
"""
from __future__ import annotations

import ipaddress
import math
import re
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

from core.common.errors import UserError
from core.records.metrics import Tallies

MAX_BYTES = 8 * 1024 * 1024  # a reply's body
MAX_HEADER_BYTES = 64 * 1024
MAX_URL = 2000
TIMEOUT_S = 5.0  # the whole fetch: connect, TLS, headers and body
MAX_SERIES = 100_000  # sample lines of one reply
MAX_POSITION = 64  # the largest per-position label read (vLLM: 0 .. num_speculative_tokens - 1)
COUNTERS = {  # sample name -> Scrape field
    "vllm:spec_decode_num_drafts_total": "drafts",
    "vllm:spec_decode_num_draft_tokens_total": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens_total": "accepted_tokens",
    "sdlab_draft_seconds_total": "draft_s",
    "sdlab_drafting_verify_seconds_total": "verify_s",
}
GAUGES = {"vllm:num_requests_running": "running", "vllm:num_requests_waiting": "waiting",
          "sglang:num_running_reqs": "running", "sglang:num_queue_reqs": "waiting"}
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
SGLANG_ACCEPT_LENGTH = "sglang:spec_accept_length"


@dataclass(frozen=True)
class Scrape:
    """One reading of an endpoint at ``t`` seconds (any monotonic clock)."""

    t: float
    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted_tokens: float = 0.0
    accepted_per_position: tuple[float, ...] = ()  # index = the position label
    running: float = 0.0
    waiting: float = 0.0
    draft_s: float | None = None  # the lab's own timings (absent on vLLM)
    verify_s: float | None = None
    accept_length: float | None = None  # SGLang's gauge (mean over ranks); None elsewhere
    spec_decode: bool = False  # the endpoint reports speculation at all (vLLM's counters or SGLang's gauge)


SAMPLE_LINE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{.*\})?\s+\S+(\s+\S+)?")
READ = {*COUNTERS, *GAUGES, PER_POSITION, SGLANG_ACCEPT_LENGTH}


class NotMetrics(UserError):
    """A reply that is not the Prometheus text format (a web page, Gradio's /config JSON, ...):
    says which line, never what it held."""

    def __init__(self, line: int):
        super().__init__(f"line {line} is not the Prometheus text format")
        self.line = line


def parse(text: str, t: float) -> Scrape:
    """The Prometheus text format -> a Scrape; anything else is a one-line UserError that names a line
    number and never quotes the text (it may come from any service on this machine).

    Bounded: at most ``MAX_SERIES`` samples, a ``position`` label of at most ``MAX_POSITION``, and the
    values read must be finite and non-negative (counters and queue lengths).
    """
    values: dict[str, float] = {}
    positions: dict[int, float] = {}
    lengths: list[float] = []
    series = 0
    for number, line in enumerate(text.split("\n"), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = SAMPLE_LINE.fullmatch(line)
        if not match:
            raise NotMetrics(number)
        series += 1
        if series > MAX_SERIES:
            raise UserError(f"more than {MAX_SERIES:,} series: not a serving engine's /metrics")
        if match.group(1) not in READ:
            continue
        sample = _sample(line, number)
        field = COUNTERS.get(sample.name) or GAUGES.get(sample.name)
        if field:
            values[field] = values.get(field, 0.0) + sample.value
        elif sample.name == PER_POSITION:
            position = sample.labels.get("position", "")
            if not (position.isascii() and position.isdigit() and int(position) <= MAX_POSITION):
                raise UserError(f"line {number}: the position label must be a number from 0 to {MAX_POSITION}")
            positions[int(position)] = positions.get(int(position), 0.0) + sample.value
        else:
            lengths.append(sample.value)
    per_position = tuple(positions.get(i, 0.0) for i in range(max(positions, default=-1) + 1))
    accept_length = sum(lengths) / len(lengths) if lengths else None
    return Scrape(t=t, accepted_per_position=per_position, accept_length=accept_length,
                  spec_decode="drafts" in values or accept_length is not None, **values)


def _sample(line: str, number: int):
    """One sample line, read by prometheus-client's parser; its value finite and non-negative."""
    try:
        [family] = text_string_to_metric_families(line)
        [sample] = family.samples
    except Exception:  # the parser's errors quote the line: say where, not what
        raise NotMetrics(number) from None
    if not (math.isfinite(sample.value) and sample.value >= 0):
        raise UserError(f"line {number}: {sample.name} must be a finite number >= 0")
    return sample


def _delta(before: float, after: float) -> float:
    """A counter's increase; a counter that went down was reset (server restart): count from 0."""
    return after - before if after >= before else after


@dataclass(frozen=True)
class Window:
    """What happened between two scrapes; ``start`` and ``end`` in seconds on the scrapes' clock."""

    start: float
    end: float
    totals: Tallies  # core.records.metrics over the counters' increase (no per-step data: steps stay 0)
    running: float  # at the end of the window
    waiting: float
    timed: bool  # draft_s / verify_s come from the lab's own counters
    accept_length: float | None = None  # SGLang's gauge at the end of the window

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def tau(self) -> float | None:
        """vLLM's 1 + accepted / drafts over the window; on SGLang, its own acceptance-length gauge."""
        return self.totals.mean_acceptance_length or self.accept_length

    @property
    def per_position(self) -> list[float]:
        return self.totals.per_position_acceptance

    @property
    def drafted_per_s(self) -> float:
        return self.totals.draft_tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def accepted_per_s(self) -> float:
        return self.totals.accepted_tokens / self.seconds if self.seconds > 0 else 0.0


def drafted_positions(drafts: int, draft_tokens: int, accepted_per_position: list[int]) -> int:
    """How many positions a window drafted at: the counter keeps every position label it ever saw
    (a k = 8 run an hour ago leaves positions 5-7 at zero increase forever), so a window reads only
    up to the deeper of its mean draft length (vLLM drafts k every step: exactly k) and its last
    position with an acceptance; nothing when it drafted nothing."""
    if not drafts:
        return 0
    accepted_up_to = max((i + 1 for i, n in enumerate(accepted_per_position) if n), default=0)
    return min(len(accepted_per_position), max(math.ceil(draft_tokens / drafts), accepted_up_to))


def window(before: Scrape, after: Scrape) -> Window:
    n = len(after.accepted_per_position)
    old = before.accepted_per_position + (0.0,) * (n - len(before.accepted_per_position))
    drafts, draft_tokens = round(_delta(before.drafts, after.drafts)), round(_delta(before.draft_tokens, after.draft_tokens))
    per_position = [round(_delta(a, b)) for a, b in zip(old, after.accepted_per_position)]
    totals = Tallies(
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted_tokens=round(_delta(before.accepted_tokens, after.accepted_tokens)),
        accepted_per_position=per_position[: drafted_positions(drafts, draft_tokens, per_position)],
    )
    timed = after.draft_s is not None and after.verify_s is not None
    if timed:
        totals.draft_s = _delta(before.draft_s or 0.0, after.draft_s)
        totals.verify_s = _delta(before.verify_s or 0.0, after.verify_s)
    return Window(start=before.t, end=after.t, totals=totals, running=after.running, waiting=after.waiting,
                  timed=timed, accept_length=after.accept_length)


@dataclass(frozen=True)
class Verdict:
    """Is speculation paying in a window? ``paying`` is None when nothing was drafted.

    The model: a plain step yields 1 token per target forward; a speculative step yields tau
    tokens for one verify plus drafting, ``cost`` times a verify. A verify costs ``v`` plain
    steps, so speculation pays while tau > v * (1 + cost). A scraped server's v is not known
    here (its counters hold no verify cost, and this machine's curve, ``core.cost.curve``, is not
    the server's): ``verdict`` ASSUMES v = 1 (memory-bound decoding, a GPU's usual case) unless
    given one.
    """

    paying: bool | None
    tau: float | None
    break_even: float
    cost: float
    measured: bool  # cost from the lab's own timings, not the estimate


def verdict(w: Window, cost_estimate: float, v: float = 1.0) -> Verdict:
    """``Verdict`` of a window; ``v``: what one verify costs in plain steps (assumed 1, see ``Verdict``)."""
    measured = w.timed and w.totals.draft_cost is not None
    cost = w.totals.draft_cost if measured else cost_estimate
    tau, break_even = w.tau, v * (1 + cost)
    return Verdict(paying=None if tau is None else tau > break_even, tau=tau, break_even=break_even, cost=cost,
                   measured=measured)


@dataclass
class Watch:
    """A monitoring session: the first and latest scrapes and the windows between polls."""

    url: str
    first: Scrape
    last: Scrape
    windows: list[Window] = field(default_factory=list)
    max_windows: int = 360

    def add(self, scrape: Scrape) -> Window:
        self.windows.append(window(self.last, scrape))
        del self.windows[: -self.max_windows]
        self.last = scrape
        return self.windows[-1]

    @property
    def overall(self) -> Window:
        """Everything since the first scrape."""
        return window(self.first, self.last)


# ---- fetching ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """A checked monitor URL: the address its host resolved to, which is the one connected to."""

    scheme: str
    hostname: str  # as written (TLS checks the certificate against it)
    address: str  # the resolved address that passed the check
    port: int
    netloc: str  # the Host header
    path: str  # with the query

    @property
    def address_url(self) -> str:
        literal = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.scheme}://{literal}:{self.port}{self.path}"


def _addresses(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise UserError(f"cannot resolve {host!r}: {e}") from None
    return list(dict.fromkeys(info[4][0] for info in infos))


def is_loopback_address(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def is_loopback_host(host: str) -> bool:
    """Whether a server's ``--host`` listens to this machine only: ``localhost`` or a loopback address
    (127.x.x.x, ::1, or 127.x.x.x mapped into IPv6); any other name or address is not."""
    if host == "localhost":
        return True
    try:
        return is_loopback_address(host)
    except ValueError:  # a host name
        return False


class RemoteTarget(UserError):
    """A monitor target that resolves to an address off this machine, while only loopback is allowed."""

    def __init__(self, host: str, addresses: list[str]):
        self.host, self.addresses = host, addresses
        super().__init__(f"{host} resolves to {', '.join(addresses)}, not a loopback address: only endpoints on "
                         "this machine can be monitored unless remote targets are allowed (--allow-remote-monitor)")


def checked_target(url: str, allow_remote: bool) -> Target:
    """Validate ``url`` (http or https, a host) and resolve its host once; unless ``allow_remote``,
    every address it resolves to must be loopback. ``fetch`` connects to the address returned."""
    text = url.strip()
    if len(text) > MAX_URL or any(ord(c) < 33 for c in text):
        raise UserError("the URL is too long or holds spaces or control characters")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"{text!r} is not an http(s) URL")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise UserError(f"{text!r} has an invalid port") from None
    addresses = _addresses(parts.hostname, port)
    remote = [a for a in addresses if not is_loopback_address(a)]
    if remote and not allow_remote:
        raise RemoteTarget(parts.hostname, remote)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(parts.scheme, parts.hostname, addresses[0], port, parts.netloc.rpartition("@")[2], path)


def fetch(url: str, allow_remote: bool = False, deadline_s: float = TIMEOUT_S) -> str:
    """The text at ``url``, after ``checked_target``, within ``deadline_s`` in all (connect, TLS,
    headers and body) and at most ``MAX_BYTES``; no redirect is followed. Failures are one-line
    UserErrors that never quote what the server sent."""
    end = time.monotonic() + deadline_s
    target = checked_target(url, allow_remote)
    shown = f"{target.scheme}://{target.netloc}"
    try:
        raw = _exchange(target, end)
    except TimeoutError:
        raise UserError(f"{shown} did not answer in full within {deadline_s:g} s") from None
    except ssl.SSLError as e:
        raise UserError(f"cannot read {shown}: TLS failed ({e.reason or type(e).__name__})") from None
    except OSError as e:
        raise UserError(f"cannot read {shown}: {e.strerror or type(e).__name__}") from None
    return _body(raw, shown)


def _exchange(target: Target, end: float) -> bytes:
    """Send a GET to the checked address and read the whole reply (headers + body), or raise
    TimeoutError at ``end``: a watchdog shuts the socket then, however slowly the server trickles."""
    def left() -> float:
        remaining = end - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        return remaining

    sock = socket.create_connection((target.address, target.port), timeout=left())
    watchdog = threading.Timer(left(), lambda: _shut(sock))
    watchdog.daemon = True
    watchdog.start()
    try:
        if target.scheme == "https":
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=target.hostname)
        sock.settimeout(left())
        sock.sendall(f"GET {target.path} HTTP/1.1\r\nHost: {target.netloc}\r\nAccept: text/plain\r\n"
                     "Accept-Encoding: identity\r\nConnection: close\r\nUser-Agent: sdlab-monitor\r\n\r\n".encode())
        chunks, size = [], 0
        while True:
            sock.settimeout(left())
            chunk = sock.recv(65536)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_BYTES + MAX_HEADER_BYTES:
                raise UserError(f"{target.scheme}://{target.netloc} sent more than {MAX_BYTES // 2**20} MB")
            chunks.append(chunk)
        left()  # a reply cut by the watchdog is a timeout, not an end
        return b"".join(chunks)
    except OSError:
        if time.monotonic() >= end:
            raise TimeoutError from None
        raise
    finally:
        watchdog.cancel()
        sock.close()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _body(raw: bytes, shown: str) -> str:
    """The body of an HTTP/1.x reply (``Content-Length``, chunked, or up to the close) as UTF-8 text."""
    head, separator, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = re.fullmatch(rb"HTTP/1\.[01] (\d{3})(?: .*)?", lines[0]) if separator and len(head) <= MAX_HEADER_BYTES else None
    if not status:
        raise UserError(f"{shown} did not answer with HTTP")
    code = int(status.group(1))
    if code != 200:
        raise UserError(f"{shown} answered HTTP {code}" + (" (a redirect: not followed)" if 300 <= code < 400 else ""))
    headers = {}
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon:
            raise UserError(f"{shown} sent a malformed HTTP header")
        headers[name.strip().lower()] = value.strip().lower()
    if headers.get(b"transfer-encoding", b"identity") != b"identity":
        if headers[b"transfer-encoding"] != b"chunked":
            raise UserError(f"{shown} sent a transfer encoding the monitor does not read")
        body = _dechunk(body, shown)
    elif b"content-length" in headers:
        if not headers[b"content-length"].isdigit():
            raise UserError(f"{shown} sent a malformed Content-Length")
        length = int(headers[b"content-length"])
        if len(body) < length:
            raise UserError(f"{shown} ended its reply early ({len(body):,} of {length:,} bytes)")
        body = body[:length]
    if headers.get(b"content-encoding", b"identity") != b"identity":
        raise UserError(f"{shown} sent a compressed reply the monitor does not read")
    if len(body) > MAX_BYTES:
        raise UserError(f"{shown} sent more than {MAX_BYTES // 2**20} MB")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{shown} did not send UTF-8 text") from None


def _dechunk(data: bytes, shown: str) -> bytes:
    out, at = [], 0
    while True:
        size_end = data.find(b"\r\n", at)
        size_text = data[at:size_end].split(b";")[0].strip() if size_end >= 0 else b""
        if size_end < 0 or not re.fullmatch(rb"[0-9a-fA-F]{1,8}", size_text):
            raise UserError(f"{shown} ended its reply early or sent a malformed chunk")
        size = int(size_text, 16)
        if size == 0:
            return b"".join(out)
        start = size_end + 2
        if len(data) < start + size + 2:
            raise UserError(f"{shown} ended its reply early or sent a malformed chunk")
        out.append(data[start:start + size])
        at = start + size + 2
