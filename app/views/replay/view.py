"""Replay: step through a saved trace (from ``--trace`` or a Download button) with no model loaded."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from core import UserError, read_trace
from core.records.steps import Trace

from ...controls import number
from ...guard import guarded
from ...i18n import t
from ...render import markdown_text, summary_markdown
from ...session import Session, ensure
from ..page import Page, View
from ..panels import StepPanels, step_panels
from ..upload import refusal
from .state import ReplayState

TRACES = Path(__file__).resolve().parents[3] / "assets" / "traces"
EXAMPLE_TRACES = {"tiny": TRACES / "example-tiny.jsonl",  # one shipped run per built-in preset (docs/app.md)
                  "gemma-270m": TRACES / "example-gemma-270m.jsonl"}
FALLBACK_PRESET = "tiny"


def example_trace(preset: str) -> tuple[Path, str | None]:
    """The example trace of the preset the app runs, and None; for a preset without one (a model
    folder or hub id), tiny's and the key of the sentence that says so."""
    if preset in EXAMPLE_TRACES:
        return EXAMPLE_TRACES[preset], None
    return EXAMPLE_TRACES[FALLBACK_PRESET], "replay.no_example"


def header_markdown(trace: Trace, lang: str) -> str:
    header = trace.header
    settings = header["settings"]
    fields = dict(prompt=header["prompt"], preset=header["preset"], drafter=header["drafter"],
                  k=settings["k"] or "–", tree=settings["tree"] or "–", temperature=settings["temperature"],
                  seed=settings["seed"])
    return t("replay.header", lang, steps=len(trace.steps),
             **{name: markdown_text(value) for name, value in fields.items()})


@dataclass
class ReplayView(View):
    panels: StepPanels
    status: gr.Markdown
    header: gr.Markdown
    summary: gr.Markdown
    slider: gr.Slider

    @property
    def outputs(self) -> list:
        return [self.header, self.summary, self.slider, *self.panels.outputs]

    def render(self, session: Session, lang: str) -> dict:
        mine = session.of(ReplayState)
        trace = mine.trace
        if trace is None or not trace.steps:
            return {**self.panels.blank(lang, "hint.load_trace"), self.header: "", self.summary: "",
                    self.slider: gr.update(minimum=1, maximum=2, value=1)}
        index = mine.index
        out = self.panels.render(trace.header.get("prompt", ""), trace.steps, lang, upto=index,
                                 budget=trace.header["settings"]["max_new_tokens"])
        out[self.header] = header_markdown(trace, lang)
        out[self.summary] = summary_markdown(trace.summary, lang, trace.steps)
        # a slider needs minimum < maximum, also for a one-step trace
        out[self.slider] = gr.update(minimum=1, maximum=max(2, len(trace.steps)), value=index + 1)
        return out


def build(page: Page) -> ReplayView:
    """The example button loads the shipped example trace of the app's preset."""
    labels, state, lang, preset = page.labels, page.state, page.lang, page.default_preset
    labels.make(gr.Markdown, text="replay.intro")
    with gr.Row():
        upload = labels.make(gr.File, file_types=[".jsonl", ".json", ".txt"], elem_id="replay-upload", scale=3,
                             label="replay.upload")
        example = labels.make(gr.Button, elem_id="replay-example", scale=1, text="btn.example_trace")
    status = gr.Markdown(elem_id="replay-status", elem_classes=["sdl-status"])
    refusal(upload, lang, status)
    with gr.Row():
        header = gr.Markdown(elem_id="replay-header")
        summary = gr.Markdown(elem_id="replay-summary")
    with gr.Row():
        prev_btn = labels.make(gr.Button, elem_id="replay-prev", scale=1, text="btn.prev")
        slider = labels.make(gr.Slider, 1, 2, value=1, step=1, elem_id="replay-slider", scale=4, label="replay.step")
        next_btn = labels.make(gr.Button, variant="primary", elem_id="replay-next", scale=1, text="btn.next")
    view = ReplayView(step_panels(labels, "replay"), status, header, summary, slider)
    h = {name: guarded(status)(handler) for name, handler in handlers(view, state, upload, preset).items()}
    outputs = [state, status, header, summary, slider] + view.panels.outputs
    # the upload handler empties the box after reading a file, so the next file can be dropped on it at once
    upload.upload(h["upload"], [lang, state, upload], [*outputs, upload], api_name="replay_upload")
    upload.clear(h["upload"], [lang, state, upload], outputs, api_visibility="private")
    example.click(h["example"], [lang, state], outputs, api_name="replay_example")
    slider.release(h["goto"], [lang, state, slider], outputs, api_name="replay_goto", preprocess=False)
    # a step number typed into the slider's box has no release until the box loses focus: go there as it is
    # typed (or dragged to); the slider is left alone, or a reply would overwrite the digits still coming
    slider.input(h["scrub"], [lang, state, slider], [c for c in outputs if c is not slider], preprocess=False,
                 trigger_mode="always_last", api_visibility="private")
    prev_btn.click(h["prev"], [lang, state], outputs, api_name="replay_prev")
    next_btn.click(h["next"], [lang, state], outputs, api_name="replay_next")
    return view


def handlers(view: ReplayView, state: gr.State, upload: gr.File, preset: str = FALLBACK_PRESET) -> dict:
    """upload, example, goto, scrub (goto leaving the slider alone), prev, next."""
    status = view.status

    def load(session: Session, path, lang_value: str, note: str = "") -> dict:
        trace = read_trace(path)
        if not trace.steps:
            raise UserError(t("err.trace_empty", lang_value))
        mine = session.of(ReplayState)
        mine.trace, mine.index = trace, 0
        return {state: session, status: note, **view.render(session, lang_value)}

    def on_upload(lang_value, session, path):
        session = ensure(session)
        if not path:
            session.of(ReplayState).trace = None
            return {state: session, status: "", **view.render(session, lang_value)}
        loaded = load(session, path, lang_value, t("replay.loaded", lang_value, name=markdown_text(Path(path).name)))
        return {**loaded, upload: None}  # an empty box: the next file replaces this one without Clear

    def on_example(lang_value, session):
        path, missing = example_trace(preset)
        note = t(missing, lang_value, preset=markdown_text(preset)) if missing else t(
            "replay.example_of", lang_value, preset=markdown_text(preset))
        return load(ensure(session), path, lang_value, note)

    def move(session: Session, lang_value: str, index: int) -> dict:
        mine = session.of(ReplayState)
        if mine.trace is None:
            raise UserError(t("err.no_trace", lang_value))
        mine.index = max(0, min(index, len(mine.trace.steps) - 1))
        return {state: session, status: "", **view.render(session, lang_value)}

    def on_goto(lang_value, session, step_number):
        session = ensure(session)
        trace = session.of(ReplayState).trace
        limit = len(trace.steps) if trace else 1
        return move(session, lang_value, number(step_number, "replay.step", lang_value, 1, limit, integer=True) - 1)

    def on_scrub(lang_value, session, step_number):
        """As a number is typed (or the slider dragged): go to a step that exists, skip the rest quietly
        (an emptied box, a first digit past the end); the release when the box loses focus says why."""
        try:
            out = on_goto(lang_value, session, step_number)
        except UserError:
            return {state: session}  # nothing changes (an empty dict would be read as one output)
        del out[view.slider]
        return out

    def on_prev(lang_value, session):
        session = ensure(session)
        return move(session, lang_value, session.of(ReplayState).index - 1)

    def on_next(lang_value, session):
        session = ensure(session)
        return move(session, lang_value, session.of(ReplayState).index + 1)

    return {"upload": on_upload, "example": on_example, "goto": on_goto, "scrub": on_scrub, "prev": on_prev,
            "next": on_next}
