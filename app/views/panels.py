"""The panels that show one step of a run -- used by Step by step, Replay and the classroom."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from core.cost.curve import CostCurve
from core.records.metrics import plain_reference
from core.records.steps import StepRecord

from ..figures import empty, kv_grid_figure, live_figure, pool_figure, tree_figure
from ..figures.animation import animation_figure
from ..figures.breakeven import break_even, breakeven_figure
from ..figures.lossless import lossless_figure, lossless_text
from ..figures.timeline import Lane, timeline_figure
from ..i18n import t
from ..labels import Labels
from ..render import legend_html, reference_note, step_sentence, text_html
from .anatomy_panel import AnatomyPanel, anatomy_panels


@dataclass
class StepPanels:
    sentence: gr.Markdown
    tree: gr.Plot
    text: gr.HTML
    kv: gr.Plot | None
    pool: gr.Plot | None
    live: gr.Plot | None
    expand: gr.Checkbox | None = None  # show the whole tree (large trees fold unreached branches)
    lossless: gr.Plot | None = None  # why it is lossless (inspected runs)
    lossless_text: gr.Markdown | None = None
    timeline: gr.Plot | None = None  # where the time goes, with the plain lane from the cost curve
    timeline_note: gr.Markdown | None = None
    breakeven: gr.Plot | None = None  # the break-even curve with the run's running point
    anatomy: AnatomyPanel | None = None  # inside the drafter at this step
    animation: gr.Plot | None = None  # the current step replayed: draft, verify, accept, the target's token, KV freed

    @property
    def outputs(self) -> list:
        return [c for c in (self.sentence, self.tree, self.text, self.kv, self.pool, self.live, self.lossless,
                            self.lossless_text, self.timeline, self.timeline_note, self.breakeven, self.animation)
                if c is not None] + \
            (self.anatomy.outputs if self.anatomy is not None else [])

    def render(self, prompt: str, records: list[StepRecord], lang: str, upto: int | None = None,
               curve: CostCurve | None = None, expand: bool = False, budget: int | None = None,
               preset: str | None = None) -> dict:
        """Every panel for step ``upto`` (default: the last), from the records up to it; ``curve``,
        the target's measured verify cost, gives the timeline its plain lane and the break-even curve;
        ``budget``, the run's max_new_tokens, lets the step's sentence say when the budget cut it short;
        ``preset``, the run's, tells the drafter's anatomy which measurement of the training-time test is its own."""
        if not records:
            return self.blank(lang)
        upto = len(records) - 1 if upto is None else upto
        shown, current = records[: upto + 1], records[upto]
        out = {
            self.sentence: step_sentence(current, lang, budget),
            self.tree: tree_figure(current, lang, collapse=False if expand else None),
            self.text: text_html(prompt, shown, lang),
        }
        if self.animation is not None:
            out[self.animation] = animation_figure(current, lang)
        if self.lossless is not None:
            out[self.lossless] = lossless_figure(current, lang)
            out[self.lossless_text] = lossless_text(current, lang)
        if self.timeline is not None:
            lanes = [Lane.of(t("time.run", lang), shown)]
            reference = plain_reference(shown, curve.forward_s if curve is not None else None)
            if reference is not None:
                tokens = sum(len(r.emitted) for r in shown)
                lanes.append(Lane.plain(t("time.plain", lang, ms=reference.seconds * 1e3), tokens, reference.seconds))
            out[self.timeline] = timeline_figure(lanes, lang)
            out[self.timeline_note] = reference_note(reference, lang)
        if self.breakeven is not None:
            out[self.breakeven] = (breakeven_figure(break_even(shown, curve), lang) if curve is not None
                                   else empty(t("even.no_curve", lang)))
        if self.anatomy is not None:
            out |= self.anatomy.render(current, lang, preset)
        if self.kv is not None:
            out[self.kv] = kv_grid_figure(current, lang)
        if self.pool is not None:
            out[self.pool] = pool_figure(shown, lang)
        if self.live is not None:
            out[self.live] = live_figure(shown, lang)
        return out

    def blank(self, lang: str, hint: str = "hint.press_step") -> dict:
        out = {self.sentence: "", self.text: legend_html(lang)}
        for plot in (self.tree, self.kv, self.pool, self.live, self.lossless, self.timeline, self.breakeven,
                     self.animation):
            if plot is not None:
                out[plot] = empty(t(hint, lang))
        for note in (self.lossless_text, self.timeline_note):
            if note is not None:
                out[note] = ""
        if self.anatomy is not None:
            out |= self.anatomy.blank()
        return out


def step_panels(labels: Labels, prefix: str, *, kv: bool = True, live: bool = True, lossless: bool = False,
                timing: bool = False, anatomy: bool = False, animation: bool = True) -> StepPanels:
    """Lay the panels out in the current Blocks context; element ids start with ``prefix``.
    ``lossless`` adds the "why it is lossless" panel; ``timing`` the timeline and the break-even curve;
    ``anatomy`` the drafter's insides at the step; ``animation`` the current step replayed frame by frame
    (played in the browser)."""
    sentence = gr.Markdown(elem_id=f"{prefix}-sentence", elem_classes=["sdl-sentence"])
    tree = labels.make(gr.Plot, elem_id=f"{prefix}-tree", label="panel.tree")
    expand = labels.make(gr.Checkbox, value=False, label="ctl.expand", info="ctl.expand_info",
                         elem_id=f"{prefix}-expand")
    animation_plot = None
    if animation:
        with labels.make(gr.Accordion, label="panel.animation", open=True, elem_id=f"{prefix}-anim-box"):
            animation_plot = gr.Plot(elem_id=f"{prefix}-anim", show_label=False, elem_classes=["sdl-narrow"])
    lossless_plot = lossless_note = None
    if lossless:
        with labels.make(gr.Accordion, label="panel.lossless", open=True, elem_id=f"{prefix}-lossless-box"):
            lossless_note = gr.Markdown(elem_id=f"{prefix}-lossless-text")
            lossless_plot = gr.Plot(elem_id=f"{prefix}-lossless", show_label=False)
    anatomy_panel = anatomy_panels(labels, prefix) if anatomy else None
    text = gr.HTML(legend_html(labels.lang), elem_id=f"{prefix}-text")
    kv_plot = pool_plot = live_plot = None
    if kv:
        with gr.Row():
            kv_plot = labels.make(gr.Plot, elem_id=f"{prefix}-kv", scale=3, label="panel.kv")
            pool_plot = labels.make(gr.Plot, elem_id=f"{prefix}-pool", scale=2, label="panel.pool")
    if live:
        live_plot = labels.make(gr.Plot, elem_id=f"{prefix}-live", label="panel.live")
    timeline = timeline_note = breakeven = None
    if timing:
        timeline = labels.make(gr.Plot, elem_id=f"{prefix}-timeline", label="panel.timeline")
        timeline_note = gr.Markdown(elem_id=f"{prefix}-timeline-note")
        breakeven = labels.make(gr.Plot, elem_id=f"{prefix}-breakeven", label="panel.breakeven")
        labels.make(gr.Markdown, text="even.note", elem_id=f"{prefix}-breakeven-note")
    return StepPanels(sentence, tree, text, kv_plot, pool_plot, live_plot, expand, lossless_plot, lossless_note,
                      timeline, timeline_note, breakeven, anatomy_panel, animation=animation_plot)
