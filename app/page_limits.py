"""What the page allows: the values a visitor may give (tighter than a request's in
``core.common.limits``: a shared server), and what one server allows, so that no visitor can pin
it: decoding runs at once (all visitors together, and one long run per browser session), the work
one request may ask for, and how many requests may wait in Gradio's queue. A request beyond a limit is answered at once with a message
that says which limit, never left waiting behind runs of minutes."""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass

from core import UserError
from core.common.limits import MAX_TRACE_BYTES, MIB
from core.api.request import DecodeRequest

from .i18n import t

# ---- one visitor's values (the page's controls check them: app.controls) ------------------------
PAGE_MAX_PROMPT_CHARS = 2000
PAGE_MAX_NEW_TOKENS = 512
PAGE_MAX_TEMPERATURE = 2.0
PAGE_MAX_SEED = 2**31 - 1  # what a browser's number field holds exactly
PAGE_MAX_MODEL_REF = 300
PAGE_MAX_COMPARE_RUNS = 16


@dataclass(frozen=True)
class ServerLimits:
    max_runs: int = 4  # decoding requests (Step, Play, Compare, the classroom, a batch sweep) at once
    queue_size: int = 32  # requests waiting in Gradio's queue; more are refused ("queue is full")
    run_budget: int = 32_768  # per request: new tokens x (draft tree nodes + 1), summed over its runs
    max_sessions: int = 200  # browser (or API) sessions alive at once; a new one beyond is refused
    session_ttl_s: int = 1800  # a session idle this long is closed: its runs stopped, its memory returned

    def __post_init__(self):
        if min(self.max_runs, self.queue_size, self.run_budget, self.max_sessions, self.session_ttl_s) < 1:
            raise ValueError("server limits must be at least 1")


def upload_too_large(lang: str) -> UserError:
    """What a visitor is told about a file over MAX_TRACE_BYTES (the page refuses it in the browser)."""
    return UserError(t("err.upload_too_large", lang, limit=MAX_TRACE_BYTES / MIB))


def request_cost(request: DecodeRequest) -> int:
    """New tokens x (tree nodes + 1): the rows the target verifies if every step drafts a full tree."""
    return request.max_new_tokens * (request.max_nodes + 1)


class RunGate:
    """Admission for decoding requests: a slot among ``max_runs``, at most one long run (Play, a
    comparison, the classroom's run, a sweep) per session, and the per-request budget."""

    def __init__(self, limits: ServerLimits):
        self.limits = limits
        self._slots = threading.BoundedSemaphore(limits.max_runs)
        self._lock = threading.Lock()
        self._long: set[int] = set()  # id() of sessions with a long run in progress

    @property
    def handlers(self) -> int:
        """Gradio's concurrency limit for the decoding events: more than the slots, so that a request
        beyond them starts at once and is told the server is busy instead of waiting in the queue."""
        return 2 * self.limits.max_runs

    def check_budget(self, requests: list[DecodeRequest], lang: str) -> None:
        cost = sum(request_cost(r) for r in requests)
        if cost > self.limits.run_budget:
            raise UserError(t("err.budget", lang, cost=cost, budget=self.limits.run_budget))

    @contextlib.contextmanager
    def slot(self, session, lang: str, *, long: bool = False):
        """Hold a decoding slot for the ``with`` block; refuse at once when none is free."""
        if long:
            with self._lock:
                if id(session) in self._long:
                    raise UserError(t("err.session_busy", lang))
                self._long.add(id(session))
        try:
            if not self._slots.acquire(blocking=False):
                raise UserError(t("err.server_busy", lang, n=self.limits.max_runs))
            try:
                yield
            finally:
                self._slots.release()
        finally:
            if long:
                with self._lock:
                    self._long.discard(id(session))
