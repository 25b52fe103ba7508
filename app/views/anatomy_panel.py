"""The step panel "inside the drafter" (Step by step and the classroom's live run): a sentence on the
drafter and up to ``SCENES`` pictures of its insides at the step, each with its caption
(``app.figures.anatomy``); the slots a drafter has no picture for are hidden."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from core.records.steps import StepRecord

from ..figures.anatomy import anatomy_scenes
from ..labels import Labels

SCENES = 3  # EAGLE-3 has the most: its expansion, its fused layers, its training-time test


@dataclass
class AnatomyPanel:
    note: gr.Markdown
    plots: list[gr.Plot]
    captions: list[gr.Markdown]

    @property
    def outputs(self) -> list:
        return [self.note, *self.plots, *self.captions]

    def render(self, record: StepRecord, lang: str, preset: str | None = None) -> dict:
        sentence, scenes = anatomy_scenes(record, lang, preset)
        out = {self.note: sentence}
        for i, (plot, caption) in enumerate(zip(self.plots, self.captions)):
            shown = i < len(scenes)
            out[plot] = gr.update(value=scenes[i].figure if shown else None, visible=shown)
            out[caption] = gr.update(value=scenes[i].caption if shown else "", visible=shown)
        return out

    def blank(self) -> dict:
        return {self.note: "", **{c: gr.update(value=None, visible=False) for c in self.plots},
                **{c: gr.update(value="", visible=False) for c in self.captions}}


def anatomy_panels(labels: Labels, prefix: str) -> AnatomyPanel:
    """The panel, open, with its pictures hidden until a step shows them; element ids ``{prefix}-anatomy-*``."""
    with labels.make(gr.Accordion, label="panel.anatomy", open=True, elem_id=f"{prefix}-anatomy-box"):
        note = gr.Markdown(elem_id=f"{prefix}-anatomy-note")
        plots, captions = [], []
        for i in range(SCENES):
            plots.append(gr.Plot(elem_id=f"{prefix}-anatomy-{i}", show_label=False, visible=False))
            captions.append(gr.Markdown(elem_id=f"{prefix}-anatomy-caption-{i}", visible=False))
    return AnatomyPanel(note, plots, captions)
