"""Read a serving engine's Prometheus endpoint (vLLM, SGLang, or this lab's own ``/metrics``) and turn
two scrapes into the window between them: tau, per-position acceptance, drafted and accepted
tokens/s, running and waiting requests, and whether speculation pays in that window.

Parsing is prometheus-client's own (``text_string_to_metric_families``). Counters are summed
over every label set (all engines, all served models); the per-position counter is grouped by
its ``position`` label (0-based, as vLLM writes it). The numbers are ``core.records.metrics``'
definitions, applied to the counters' deltas. SGLang exports no draft counters, only its own
running mean of the acceptance length (the gauge ``sglang:spec_accept_length``, averaged here over
its ranks): for it tau is that gauge, and per-position acceptance and token rates stay empty.

Fetching is guarded against request forgery: the target's host name is resolved first, and
unless remote targets are allowed every address must be a loopback one; the request then goes
to the checked address itself (no second lookup), and redirects are not followed.
"""
from __future__ import annotations

import ipaddress
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from prometheus_client.parser import text_string_to_metric_families

from core.errors import UserError
from core.records.metrics import Tallies

MAX_BYTES = 8 * 1024 * 1024
TIMEOUT_S = 5.0
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


def parse(text: str, t: float) -> Scrape:
    """The Prometheus text format -> a Scrape (a malformed text is a UserError)."""
    values: dict[str, float] = {}
    positions: dict[int, float] = {}
    lengths: list[float] = []
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                field = COUNTERS.get(sample.name) or GAUGES.get(sample.name)
                if field:
                    values[field] = values.get(field, 0.0) + sample.value
                elif sample.name == PER_POSITION and sample.labels.get("position", "").isdigit():
                    position = int(sample.labels["position"])
                    positions[position] = positions.get(position, 0.0) + sample.value
                elif sample.name == SGLANG_ACCEPT_LENGTH:
                    lengths.append(sample.value)
    except ValueError as e:
        raise UserError(f"not the Prometheus text format: {e}") from None
    per_position = tuple(positions.get(i, 0.0) for i in range(max(positions, default=-1) + 1))
    accept_length = sum(lengths) / len(lengths) if lengths else None
    return Scrape(t=t, accepted_per_position=per_position, accept_length=accept_length,
                  spec_decode="drafts" in values or accept_length is not None, **values)


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


def window(before: Scrape, after: Scrape) -> Window:
    n = len(after.accepted_per_position)
    old = before.accepted_per_position + (0.0,) * (n - len(before.accepted_per_position))
    totals = Tallies(
        drafts=round(_delta(before.drafts, after.drafts)),
        draft_tokens=round(_delta(before.draft_tokens, after.draft_tokens)),
        accepted_tokens=round(_delta(before.accepted_tokens, after.accepted_tokens)),
        accepted_per_position=[round(_delta(a, b)) for a, b in zip(old, after.accepted_per_position)],
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


class RemoteTarget(UserError):
    """A monitor target that resolves to an address off this machine, while only loopback is allowed."""

    def __init__(self, host: str, addresses: list[str]):
        self.host, self.addresses = host, addresses
        super().__init__(f"{host} resolves to {', '.join(addresses)}, not a loopback address: only endpoints on "
                         "this machine can be monitored unless remote targets are allowed (--allow-remote-monitor)")


def checked_target(url: str, allow_remote: bool) -> tuple[str, str]:
    """Validate ``url`` (http or https, a host) and resolve its host; unless ``allow_remote``,
    every address it resolves to must be loopback. Returns (URL to fetch, Host header)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"{url!r} is not an http(s) URL")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise UserError(f"{url!r} has an invalid port") from None
    addresses = _addresses(parts.hostname, port)
    remote = [a for a in addresses if not is_loopback_address(a)]
    if remote and not allow_remote:
        raise RemoteTarget(parts.hostname, remote)
    if allow_remote or parts.scheme == "https":
        return url.strip(), parts.netloc
    address = addresses[0]
    literal = f"[{address}]" if ":" in address else address
    return urlunsplit(parts._replace(netloc=f"{literal}:{port}")), parts.netloc


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # a redirect could point anywhere: it is an error here


def fetch(url: str, allow_remote: bool = False) -> str:
    """The text at ``url`` (at most MAX_BYTES), after ``checked_target``; failures are UserErrors."""
    address_url, host = checked_target(url, allow_remote)
    opener = urllib.request.build_opener(_NoRedirect, urllib.request.ProxyHandler({}))
    request = urllib.request.Request(address_url, headers={"Host": host, "Accept": "text/plain"})
    try:
        with opener.open(request, timeout=TIMEOUT_S) as response:
            body = response.read(MAX_BYTES + 1)
    except urllib.error.HTTPError as e:
        raise UserError(f"{url} answered HTTP {e.code}") from None
    except (urllib.error.URLError, OSError) as e:
        raise UserError(f"cannot read {url}: {getattr(e, 'reason', e)}") from None
    if len(body) > MAX_BYTES:
        raise UserError(f"{url} sent more than {MAX_BYTES // 2**20} MB")
    return body.decode("utf-8", errors="replace")
