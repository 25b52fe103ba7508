"""Per-browser-session state (held in ``gr.State``): what the views share (``app.shared.Shared``) and
each view's own state object, kept beside its view (``app/views/<view>/state.py``). Nothing here
is shared between sessions; models are the only shared thing, cached by the engine.

Sessions are bounded (``SESSIONS``): at most ``ServerLimits.max_sessions`` alive at once -- a new
visitor beyond is told so, in the page's language -- and one whose state no action has updated for
``ServerLimits.session_ttl_s`` (every handler that uses the session returns it) is closed by Gradio's
own time-to-live (``gr.State(time_to_live=...)``): its runs stop (their KV blocks return), its files
go, and ``forget_idle`` drops what Gradio itself still keeps of it."""
from __future__ import annotations

import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TypeVar

import gradio as gr
from gradio.context import LocalContext

from core import UserError

from .i18n import t
from .shared import Shared


class ViewState:
    """The base of a view's own state: what it holds of the session, and what closing it stops."""

    def close(self) -> None:
        """Stop what the view has going (a run returns its KV blocks); nothing by default."""


S = TypeVar("S", bound=ViewState)


@dataclass(eq=False)  # a session is itself, not its contents (and lives in a set: ``Sessions``)
class Session:
    shared: Shared = field(default_factory=Shared)
    views: dict[type, ViewState] = field(default_factory=dict)  # each view's own state, by its class

    def of(self, kind: type[S]) -> S:
        """The state of the view that keeps a ``kind``, made empty on its first use."""
        if kind not in self.views:
            self.views[kind] = kind()
        return self.views[kind]

    def close(self) -> None:
        """Stop every view's runs (returning their KV blocks) and delete this session's files."""
        for state in list(self.views.values()):  # a handler still running may add a view's state meanwhile
            state.close()
        self.views.clear()  # what is left of a closed session is small (a late handler may still hold it)
        self.shared.traces.remove()
        SESSIONS.discard(self)


class SessionsFull(UserError):
    """A new session refused: the server holds its most. Told in the page's language (``message``)."""

    def __init__(self, limit: int, ttl_s: int):
        super().__init__(t("err.sessions_full", "en", n=limit, minutes=max(1, round(ttl_s / 60))))
        self.limit, self.ttl_s = limit, ttl_s

    def message(self, lang: str) -> str:
        return t("err.sessions_full", lang, n=self.limit, minutes=max(1, round(self.ttl_s / 60)))


class Sessions:
    """The sessions alive in this process, held to a cap (``configure``). Weakly: a session Gradio
    drops without telling leaves the count by itself."""

    def __init__(self, limit: int = 200, ttl_s: int = 1800):
        self.limit, self.ttl_s = limit, ttl_s
        self._alive: weakref.WeakSet[Session] = weakref.WeakSet()
        self._lock = threading.Lock()
        self.expired: OrderedDict[str, bool] = OrderedDict()  # browser sessions closed for idling (the latest)

    def configure(self, limit: int, ttl_s: int) -> None:
        self.limit, self.ttl_s = limit, ttl_s

    def admit(self) -> Session:
        """A new session, or ``SessionsFull``; a visitor whose session was closed for idling is told so."""
        with self._lock:
            if len(self._alive) >= self.limit:
                raise SessionsFull(self.limit, self.ttl_s)
            session = Session()
            self._alive.add(session)
            request = LocalContext.request.get(None)  # the event's request, while Gradio runs a handler
            returning = request is not None and self.expired.pop(request.session_hash, False)
        if returning:
            gr.Info(t("err.session_expired", "zh") + " · " + t("err.session_expired", "en"))
        return session

    def closed_for_idling(self, session_hash: str) -> None:
        with self._lock:
            self.expired[session_hash] = True
            while len(self.expired) > MAX_EXPIRED_KEPT:
                self.expired.popitem(last=False)

    def discard(self, session: Session) -> None:
        with self._lock:
            self._alive.discard(session)

    def __len__(self) -> int:
        return len(self._alive)


MAX_EXPIRED_KEPT = 10_000  # session ids remembered to tell a returning visitor (a few hundred kB at most)
SESSIONS = Sessions()


def ensure(session: Session | None) -> Session:
    """The handler's session: the one Gradio passed, or a new one (``SESSIONS.admit``: refused past the cap)."""
    return session if session is not None else SESSIONS.admit()


def forget_idle(state_holder, ttl_s: float, now: float | None = None) -> int:
    """Drop what Gradio keeps of each browser session idle for more than ``ttl_s`` whose state its
    time-to-live has already deleted (a per-session copy of the page's config, ~1.5 MiB: Gradio
    keeps it for up to 10,000 sessions otherwise). Returns how many were dropped."""
    now = time.time() if now is None else now
    with state_holder.lock:
        idle = [sid for sid, used in list(state_holder.time_last_used.items())
                if now - used.timestamp() > ttl_s and sid in state_holder.session_data
                and not state_holder.session_data[sid].state_data]
        for sid in idle:
            state_holder.session_data.pop(sid, None)
            state_holder.time_last_used.pop(sid, None)
            SESSIONS.closed_for_idling(sid)
    return len(idle)


def close_session(session: Session | None) -> None:
    """``gr.State``'s delete callback: runs when a browser session ends or expires."""
    if session is not None:
        session.close()
