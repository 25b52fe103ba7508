"""Per-browser-session state (held in ``gr.State``): what the views share (``app.shared.Shared``) and
each view's own state object, kept beside its view (``app/views/<view>/state.py``). Nothing here
is shared between sessions; models are the only shared thing, cached by the engine."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from .shared import Shared


class ViewState:
    """The base of a view's own state: what it holds of the session, and what closing it stops."""

    def close(self) -> None:
        """Stop what the view has going (a run returns its KV blocks); nothing by default."""


S = TypeVar("S", bound=ViewState)


@dataclass
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
        for state in self.views.values():
            state.close()
        self.shared.traces.remove()


def ensure(session: Session | None) -> Session:
    return session if session is not None else Session()


def close_session(session: Session | None) -> None:
    """``gr.State``'s delete callback: runs when a browser session ends or expires."""
    if session is not None:
        session.close()
