"""What every view of the page is built with (``app.ui.build_app`` makes one ``Page``)."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from ..controls import ModelPolicy
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
    gate: RunGate  # decoding slots and the work one request may ask for
