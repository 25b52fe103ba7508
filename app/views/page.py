"""What every view of the page is built with, and what a built view gives back: ``app.ui`` builds
each view of its list with ``build(page: Page) -> View``."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from ..controls import ModelPolicy, MonitorPolicy
from ..labels import Labels
from ..page_limits import RunGate


@dataclass(frozen=True)
class Page:
    labels: Labels  # every labelled component, relabelled when the language changes
    state: gr.State  # the browser session's ``app.session.Session``
    lang: gr.Radio  # the language toggle: every handler's first input
    presets: list[str]  # the targets offered
    default_preset: str
    policy: ModelPolicy  # whether visitors may name their own models
    monitor_policy: MonitorPolicy  # the production monitor's default URL, and whether it may poll other machines
    gate: RunGate  # decoding slots and the work one request may ask for
    tab: gr.Tab | None = None  # the tab the view is built in


class View:
    """A built view: the components it draws (``outputs``) and how it draws them for a session."""

    @property
    def outputs(self) -> list:
        raise NotImplementedError

    @property
    def language_inputs(self) -> list:
        """Components whose values a language switch passes to ``relabel`` (none by default)."""
        return []

    def render(self, session, lang: str) -> dict:
        """Every output for the session's state of this view, in ``lang``."""
        raise NotImplementedError

    def relabel(self, session, lang: str, *values) -> dict:
        """Everything the view shows after the language toggle switched to ``lang``; ``values``: its
        ``language_inputs``' values."""
        return self.render(session, lang)
