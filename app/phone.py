"""The page on a phone (app/phone.css): what its style sheet needs from Python, the scroll cue's words in the
page's language. A figure or table wider than the screen scrolls sideways inside its box; page.js marks such a
box (``sdl-scrolls``) and the cue under it says so. A figure that reads at a narrower width says so itself:
``layout.meta["min_width"]`` (pixels) replaces the phone's default plot width (``narrow``)."""
from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go

from .i18n import LANGS, t

PHONE_CSS_PATH = Path(__file__).with_name("phone.css")


def cue_css() -> str:
    """The cue's words, one rule per language, switched with the page's language toggle."""
    return "\n".join(f'body:has(#lang-toggle input[value="{lang}"]:checked) {{ --sdl-cue: {css_string(t("page.scroll_cue", lang))}; }}'
                     for lang in LANGS)


def css_string(text: str) -> str:
    """``text`` as a CSS string (quoted, its quotes and backslashes escaped)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def narrow(fig: go.Figure, min_width: int) -> go.Figure:
    """Let ``fig`` be drawn as narrow as ``min_width`` pixels on a phone (its labels still fit there)."""
    meta = fig.layout.meta if isinstance(fig.layout.meta, dict) else {}
    fig.update_layout(meta={**meta, "min_width": min_width})
    return fig
