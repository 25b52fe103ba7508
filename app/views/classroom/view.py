"""Classroom: 我爱中国. Part 1 replays the article's illustrated example (hand-made frames);
part 2 runs the same prompt on a real model, step by step; part 3 is the written lesson."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from core.models.loading import resolve_preset
from core.api.request import DecodeRequest

from ...controls import DRAFTER_NAMES, choice, prompt_text
from ...guard import guarded
from ...i18n import t
from ...page_limits import RunGate
from ...runs import Run
from ...session import Session, ensure
from ..batch_sizes.sweeps import EXAMPLE_RESULTS
from ..page import Page, View
from ..panels import StepPanels, step_panels
from . import prediction_view
from .content import FRAMES, LIVE_PROMPT, drafting_sentence, frame_caption, frame_figure, lesson_text, live_note
from .prediction import Predict
from .parallel import book_result, parallel_caption, parallel_figure, parallel_result
from .quantization import quant_caption, quant_figure, quant_result
from .state import ClassroomState

LIVE_K = 4  # the article's draft guesses four tokens (a chain of 4; hybrid merges two such chains into a tree)
LIVE_MAX_NEW_TOKENS = 16


@dataclass
class ClassroomView(View):
    frame_label: gr.Markdown
    caption: gr.Markdown
    figure: gr.Plot
    panels: StepPanels
    ledger: gr.Markdown
    lesson: gr.Markdown
    predict: prediction_view.PredictView | None = None
    quant: tuple[gr.Plot, gr.Markdown] | None = None  # the quantization scene: its figure and caption
    parallel: tuple[gr.Plot, gr.Markdown] | None = None  # autoregressive against parallel drafting

    @property
    def outputs(self) -> list:
        return [self.frame_label, self.caption, self.figure, self.ledger, self.lesson, *self.panels.outputs,
                *(self.predict.outputs if self.predict else []), *(self.quant or ()),
                *(self.parallel or ())]

    def render_frame(self, session: Session, lang: str) -> dict:
        frame = session.of(ClassroomState).frame
        return {self.frame_label: t("lesson.frame_of", lang, i=frame + 1, n=FRAMES),
                self.caption: frame_caption(frame, lang), self.figure: frame_figure(frame, lang)}

    def render_live(self, session: Session, lang: str) -> dict:
        run = session.of(ClassroomState).run
        if run is None:
            return {**self.panels.blank(lang), self.ledger: ""}
        out = self.panels.render(run.prompt, run.records, lang, budget=run.request.max_new_tokens,
                                 preset=run.request.preset)
        out[self.ledger] = live_note(run.records, lang)
        return out

    def render(self, session: Session, lang: str) -> dict:
        scene = {}
        if self.quant:
            plot, caption = self.quant
            scene = {plot: quant_figure(quant_result(), lang), caption: quant_caption(quant_result(), lang)}
        if self.parallel:
            plot, caption = self.parallel
            scene |= {plot: parallel_figure(parallel_result(), lang),
                      caption: parallel_caption(parallel_result(), lang, book_result())}
        return {**self.render_frame(session, lang), **self.render_live(session, lang), self.lesson: lesson_text(lang),
                **(self.predict.render(session, lang) if self.predict else {}), **scene}


@dataclass
class ClassroomButtons:
    prev: gr.Button
    next: gr.Button
    step: gr.Button
    run: gr.Button
    reset: gr.Button


# Presentation mode: the page's class ``sdl-present`` (page.css enlarges the classroom and hides the
# rest); app/page.js turns arrow keys into Back / Next and Esc into leaving it.
PRESENT_JS = "(on) => { document.body.classList.toggle('sdl-present', on); return on; }"


def build(page: Page) -> ClassroomView:
    labels, presets, default_preset = page.labels, page.presets, page.default_preset
    present = labels.make(gr.Checkbox, value=False, label="class.present", elem_id="lesson-present")
    present.change(None, present, present, js=PRESENT_JS)
    labels.make(gr.Markdown, text="class.intro", elem_id="lesson-intro")
    labels.make(gr.Markdown, text="class.part1")
    with gr.Row():
        prev_btn = labels.make(gr.Button, text="btn.prev", elem_id="lesson-prev", scale=1)
        frame_label = gr.Markdown(t("lesson.frame_of", labels.lang, i=1, n=FRAMES), elem_id="lesson-frame")
        next_btn = labels.make(gr.Button, text="btn.next", variant="primary", elem_id="lesson-next", scale=1)
    caption = gr.Markdown(frame_caption(0, labels.lang), elem_id="lesson-caption")
    figure = gr.Plot(frame_figure(0, labels.lang), show_label=False, elem_id="lesson-figure")

    with gr.Column(elem_id="lesson-live"):  # hidden in presentation mode: one scene per screen
        labels.make(gr.Markdown, text="class.part2", elem_id="lesson-part2")
        with gr.Row():
            prompt = labels.make(gr.Textbox, value=LIVE_PROMPT, label="class.prompt", elem_id="lesson-prompt", scale=3)
            preset = labels.make(gr.Dropdown, presets, value=default_preset, label="ctl.preset", scale=2)
            drafter = labels.make(gr.Dropdown, DRAFTER_NAMES, value=resolve_preset(default_preset).default_drafter,
                                  label="ctl.drafter", elem_id="lesson-drafter", scale=1)
        with gr.Row():
            step_btn = labels.make(gr.Button, text="btn.step", variant="primary", elem_id="lesson-step", scale=1)
            run_btn = labels.make(gr.Button, text="btn.run_to_end", elem_id="lesson-run", scale=1)
            reset_btn = labels.make(gr.Button, text="btn.reset", elem_id="lesson-reset", scale=1)
        shape = gr.Markdown(drafting_sentence(drafter.value, LIVE_K, labels.lang), elem_id="lesson-shape")
        status = gr.Markdown(elem_id="lesson-status", elem_classes=["sdl-status"])
        ledger = gr.Markdown(elem_id="lesson-ledger")
        panels = step_panels(labels, "lesson", kv=False, live=False, lossless=True, anatomy=True)

    def request_of(lang_value: str, *values) -> DecodeRequest:
        return live_request(lang_value, presets, *values)

    predict = prediction_view.build(page, [prompt, preset, drafter], request_of, EXAMPLE_RESULTS.get(default_preset))
    labels.make(gr.Markdown, text="class.quant", elem_id="lesson-quant")
    quant = (gr.Plot(quant_figure(quant_result(), labels.lang), show_label=False, elem_id="lesson-quant-plot"),
             gr.Markdown(quant_caption(quant_result(), labels.lang), elem_id="lesson-quant-caption"))
    labels.make(gr.Markdown, text="class.parallel", elem_id="lesson-parallel")
    parallel = (gr.Plot(parallel_figure(parallel_result(), labels.lang), show_label=False, elem_id="lesson-parallel-plot"),
                gr.Markdown(parallel_caption(parallel_result(), labels.lang, book_result()),
                            elem_id="lesson-parallel-caption"))
    labels.make(gr.Markdown, text="class.part3", elem_id="lesson-part3")
    lesson = gr.Markdown(lesson_text(labels.lang), elem_id="lesson-notes")
    view = ClassroomView(frame_label, caption, figure, panels, ledger, lesson, predict, quant, parallel)
    for event in (drafter.change, page.lang.change):  # the shape line follows the drafter and the language
        event(shape_line, [page.lang, drafter], shape, api_visibility="private", queue=False)
    wire(view, ClassroomButtons(prev_btn, next_btn, step_btn, run_btn, reset_btn), status, [prompt, preset, drafter],
         page)
    return view


def shape_line(lang_value: str, drafter: str) -> str:
    """Part 2's line on what the chosen drafter drafts each step (empty for a value the page does not offer)."""
    if lang_value not in ("zh", "en") or drafter not in DRAFTER_NAMES:
        return ""
    return drafting_sentence(drafter, LIVE_K, lang_value)


def wire(view: ClassroomView, buttons: ClassroomButtons, status: gr.Markdown, settings: list, page: Page) -> None:
    """``settings``: the live run's prompt, preset and drafter controls."""
    state, lang, presets, gate = page.state, page.lang, page.presets, page.gate
    h = {name: guarded(status)(handler) for name, handler in handlers(view, status, state, presets, gate).items()}
    frame_outputs = [state, status, view.frame_label, view.caption, view.figure]
    live_outputs = [state, status, view.ledger, *view.panels.outputs]
    # frame moves are instant: queue every click (gradio's default drops clicks while one is pending,
    # so a quick second "next" on a busy server would be lost)
    buttons.prev.click(h["prev"], [lang, state], frame_outputs, api_name="lesson_prev", trigger_mode="multiple")
    buttons.next.click(h["next"], [lang, state], frame_outputs, api_name="lesson_next", trigger_mode="multiple")
    buttons.step.click(h["step"], [lang, state, *settings], live_outputs, api_name="lesson_step",
                       concurrency_id="decode", concurrency_limit=gate.handlers)
    buttons.run.click(h["run"], [lang, state, *settings], live_outputs, api_name="lesson_run",
                      concurrency_id="decode", concurrency_limit=gate.handlers)
    buttons.reset.click(h["reset"], [lang, state], live_outputs, api_name="lesson_reset")


def live_request(lang_value: str, presets: list[str], prompt: str, preset_value: str, drafter: str) -> DecodeRequest:
    """The classroom's live run (part 2, and the predict mode) from its controls."""
    preset_value = choice(preset_value, presets, "ctl.preset", lang_value)
    return DecodeRequest.of(prompt_text(prompt, lang_value), preset_value,
                            choice(drafter, DRAFTER_NAMES, "ctl.drafter", lang_value), LIVE_K,
                            max_new_tokens=LIVE_MAX_NEW_TOKENS)


def handlers(view: ClassroomView, status: gr.Markdown, state: gr.State, presets: list[str], gate: RunGate) -> dict:
    """prev / next frame, and step / run / reset of the live run."""

    def frame_mover(delta: int):
        def on_frame(lang_value, session):
            session = ensure(session)
            mine = session.of(ClassroomState)
            mine.frame = max(0, min(FRAMES - 1, mine.frame + delta))
            return {state: session, **view.render_frame(session, lang_value)}

        return on_frame

    def ensure_run(session: Session, lang_value: str, settings: tuple):
        """Start the live run if none is going; the status line, which asks for Reset when the
        controls no longer match the run going on. The first press after the run finished keeps it
        and gives None (the press only says so); the next press drops it for a new run."""
        request = live_request(lang_value, presets, *settings)
        mine = session.of(ClassroomState)
        if mine.tell_finished(mine.run):
            return None
        if mine.run is None or mine.run.done:
            yield {state: session, status: t("run.loading", lang_value)}
            mine.run = Run(request)
        return t("run.changed", lang_value) if request != mine.run.request else ""

    def on_step(lang_value, session, *settings):
        session = ensure(session)
        with gate.slot(session, lang_value):
            note = yield from ensure_run(session, lang_value, settings)
            if note is not None:
                session.of(ClassroomState).run.step()
        yield {state: session, status: t("class.finished", lang_value) if note is None else note,
               **view.render_live(session, lang_value)}

    def on_run(lang_value, session, *settings):
        session = ensure(session)
        with gate.slot(session, lang_value, long=True):
            note = yield from ensure_run(session, lang_value, settings)
            if note is None:
                yield {state: session, status: t("class.finished", lang_value)}
                return
            run = session.of(ClassroomState).run
            try:
                while run.step() is not None:
                    yield {state: session, status: note, **view.render_live(session, lang_value)}
            except GeneratorExit:  # the client went away
                run.stop()
                raise

    def on_reset(lang_value, session):
        session = ensure(session)
        mine = session.of(ClassroomState)
        if mine.run is not None:
            mine.run.stop()
        mine.run = None
        mine.predict = Predict()
        return {state: session, status: "", **view.render_live(session, lang_value)}

    return {"prev": frame_mover(-1), "next": frame_mover(1), "step": on_step, "run": on_run, "reset": on_reset}
