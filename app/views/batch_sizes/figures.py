"""The batch-size study in the app's language and look; the figure itself is ``core.studies.batch_size_figure``'s,
the same one the bench report draws."""
from __future__ import annotations

from dataclasses import fields

import plotly.graph_objects as go

from core.studies.batch_size_figure import SweepFigureText, sweep_figure

from ...figures.style import empty, finish
from ...i18n import t
from ...palette import drafter_color


def batch_figure(result: dict | None, lang: str) -> go.Figure:
    """``result``: a bench result with ``batch_sweep``, ``batch_crossover`` and ``forward_latency``."""
    if not result or not result.get("batch_sweep"):
        return empty(t("hint.load_sweep", lang), 440)
    text = SweepFigureText(**{field.name: t(f"batch.{field.name}", lang) for field in fields(SweepFigureText)})
    fig = finish(sweep_figure(result, text, drafter_color), "", 460, below=True)
    fig.update_layout(margin={"t": 40})
    return fig

