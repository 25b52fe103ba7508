"""The panels that show one step of a run -- used by Step by step, Replay and the classroom."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from core.records.steps import StepRecord

from ..figures import empty, kv_grid_figure, live_figure, pool_figure, tree_figure
from ..i18n import t
from ..labels import Labels
from ..render import legend_html, step_sentence, text_html


@dataclass
class StepPanels:
    sentence: gr.Markdown
    tree: gr.Plot
    text: gr.HTML
    kv: gr.Plot | None
    pool: gr.Plot | None
    live: gr.Plot | None

    @property
    def outputs(self) -> list:
        return [c for c in (self.sentence, self.tree, self.text, self.kv, self.pool, self.live) if c is not None]

    def render(self, prompt: str, records: list[StepRecord], lang: str, upto: int | None = None) -> dict:
        """Every panel for step ``upto`` (default: the last), from the records up to it."""
        if not records:
            return self.blank(lang)
        upto = len(records) - 1 if upto is None else upto
        shown, current = records[: upto + 1], records[upto]
        out = {
            self.sentence: step_sentence(current, lang),
            self.tree: tree_figure(current, lang),
            self.text: text_html(prompt, shown, lang),
        }
        if self.kv is not None:
            out[self.kv] = kv_grid_figure(current, lang)
        if self.pool is not None:
            out[self.pool] = pool_figure(shown, lang)
        if self.live is not None:
            out[self.live] = live_figure(shown, lang)
        return out

    def blank(self, lang: str, hint: str = "hint.press_step") -> dict:
        out = {self.sentence: "", self.text: legend_html(lang)}
        for plot in (self.tree, self.kv, self.pool, self.live):
            if plot is not None:
                out[plot] = empty(t(hint, lang))
        return out


def step_panels(labels: Labels, prefix: str, *, kv: bool = True, live: bool = True) -> StepPanels:
    """Lay the panels out in the current Blocks context; element ids start with ``prefix``."""
    sentence = gr.Markdown(elem_id=f"{prefix}-sentence", elem_classes=["sdl-sentence"])
    tree = labels.make(gr.Plot, elem_id=f"{prefix}-tree", label="panel.tree")
    text = gr.HTML(legend_html(labels.lang), elem_id=f"{prefix}-text")
    kv_plot = pool_plot = live_plot = None
    if kv:
        with gr.Row():
            kv_plot = labels.make(gr.Plot, elem_id=f"{prefix}-kv", scale=3, label="panel.kv")
            pool_plot = labels.make(gr.Plot, elem_id=f"{prefix}-pool", scale=2, label="panel.pool")
    if live:
        live_plot = labels.make(gr.Plot, elem_id=f"{prefix}-live", label="panel.live")
    return StepPanels(sentence, tree, text, kv_plot, pool_plot, live_plot)
