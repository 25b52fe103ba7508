"""Step by step: one run, advanced a step at a time (or played), every panel redrawn per step."""
from __future__ import annotations

import time
from dataclasses import dataclass

import gradio as gr

from core.api import DRAFTER_NAMES

from ..controls import EAGLE_DRAFTERS, MAX_TEMPERATURE, ModelPolicy, run_request
from ..guard import guarded
from ..i18n import t
from ..labels import Labels
from ..limits import RunGate
from ..render import summary_markdown
from ..session import Run, Session, ensure, measured_point
from .own_models import own_model_fields
from .panels import StepPanels, step_panels

PLAY_DELAY_S = 0.4
DEFAULT_PROMPT = "我爱"


@dataclass
class StepperView:
    panels: StepPanels
    status: gr.Markdown
    summary: gr.Markdown
    download: gr.DownloadButton

    @property
    def outputs(self) -> list:
        return [self.status, self.summary, self.download, *self.panels.outputs]

    def render(self, session: Session, lang: str) -> dict:
        """Everything the view shows for the session's current run."""
        run = session.run
        if run is None:
            return {**self.panels.blank(lang), self.status: "", self.summary: "",
                    self.download: gr.update(value=None, interactive=False)}
        out = self.panels.render(run.prompt, run.records, lang)
        out[self.status] = self._status_line(run, session, lang)
        out[self.summary] = summary_markdown(run.result.to_dict(), lang) if run.done else ""
        return out

    def _status_line(self, run: Run, session: Session, lang: str) -> str:
        request = run.request
        last = run.records[-1] if run.records else None
        tokens = last.new_tokens_total if last else 0
        forwards = last.target_forwards_total if last else 0
        state = "run.done" if run.done else ("run.playing" if session.playing else "run.ready")
        line = t("run.status", lang, label=request.label(), temperature=request.temperature, seed=request.seed,
                 tokens=tokens, max=request.max_new_tokens, forwards=forwards, state=t(state, lang))
        if run.done and run.result is not None and run.result.stop_reason == "cancelled":
            line += "<br>" + t("run.stopped", lang, after=run.result.kv["blocks_in_use_after"],
                               peak=run.result.kv["peak_blocks_in_use"])
        return line


def button(labels: Labels, key: str, elem_id: str, variant: str = "secondary") -> gr.Button:
    return labels(gr.Button(labels.text(key), variant=variant, elem_id=elem_id, min_width=80), value=key)


def build(labels: Labels, state: gr.State, lang: gr.Radio, presets: list[str], default_preset: str,
          default_drafter: str, policy: ModelPolicy, gate: RunGate) -> StepperView:
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            prompt = labels(gr.Textbox(DEFAULT_PROMPT, label=labels.text("ctl.prompt"), lines=2, elem_id="step-prompt"),
                            label="ctl.prompt")
            preset = labels(gr.Dropdown(presets, value=default_preset, label=labels.text("ctl.preset"),
                                        elem_id="step-preset"), label="ctl.preset")
            drafter = labels(gr.Dropdown(DRAFTER_NAMES, value=default_drafter, label=labels.text("ctl.drafter"),
                                         info=labels.text("ctl.drafter_info"), elem_id="step-drafter"),
                             label="ctl.drafter", info="ctl.drafter_info")
            with gr.Row():
                k = labels(gr.Number(4, label=labels.text("ctl.k"), elem_id="step-k"), label="ctl.k")
                width = labels(gr.Number(1, label=labels.text("ctl.width"), elem_id="step-width"), label="ctl.width")
            with gr.Row(visible=default_drafter in EAGLE_DRAFTERS) as eagle_row:
                eagle_nodes = labels(gr.Number(16, label=labels.text("ctl.eagle_n"), info=labels.text("ctl.eagle_n_info"),
                                               precision=0, elem_id="step-eagle-n"),
                                     label="ctl.eagle_n", info="ctl.eagle_n_info")
            temperature = labels(gr.Slider(0, MAX_TEMPERATURE, value=0, step=0.05, label=labels.text("ctl.temperature"),
                                           info=labels.text("ctl.temperature_info")),
                                 label="ctl.temperature", info="ctl.temperature_info")
            with gr.Row():
                seed = labels(gr.Number(0, label=labels.text("ctl.seed")), label="ctl.seed")
                max_new = labels(gr.Number(48, label=labels.text("ctl.max_new_tokens"), elem_id="step-max-new"),
                                 label="ctl.max_new_tokens")
            own_target, own_draft = own_model_fields(labels, "step", policy)
            with gr.Row():
                step_btn = button(labels, "btn.step", "step-btn", variant="primary")
                play_btn = button(labels, "btn.play", "play-btn")
                pause_btn = button(labels, "btn.pause", "pause-btn")
            with gr.Row():
                stop_btn = button(labels, "btn.stop", "stop-btn", variant="stop")
                reset_btn = button(labels, "btn.reset", "reset-btn")
            download = labels(gr.DownloadButton(labels.text("btn.download"), interactive=False,
                                                elem_id="step-download"), label="btn.download")
            status = gr.Markdown(elem_id="step-status", elem_classes=["sdl-status"])
            summary = gr.Markdown(elem_id="step-summary")
        with gr.Column(scale=3):
            panels = step_panels(labels, "step")

    view = StepperView(panels, status, summary, download)
    controls = [prompt, preset, drafter, k, width, temperature, seed, max_new, eagle_nodes, own_target, own_draft]
    outputs = [state, status, summary, download] + panels.outputs

    def advance(session: Session, lang_value: str) -> dict:
        """One step of the session's run; the step that ends it offers the trace for download."""
        run = session.run
        record = run.step()
        out = {state: session, **view.render(session, lang_value)}
        if record is not None and run.done:
            session.playing = False
            out[download] = gr.update(value=session.save_trace(run), interactive=True)
            session.points.append(measured_point(run.request.label(), run.result))
        return out

    def start(session: Session, lang_value: str, values: tuple):
        request = run_request(lang_value, presets, *values, policy=policy)
        gate.check_budget([request], lang_value)
        if session.run is not None:
            session.run.stop()
        yield {state: session, status: t("run.loading", lang_value)}
        session.run = Run(request)

    @guarded(status)
    def on_step(lang_value, session, *values):
        session = ensure(session)
        with gate.slot(session, lang_value):
            if session.run is None or session.run.done:
                yield from start(session, lang_value, values)
            yield advance(session, lang_value)

    @guarded(status)
    def on_play(lang_value, session, *values):
        session = ensure(session)
        with gate.slot(session, lang_value, long=True):
            if session.run is None or session.run.done:
                yield from start(session, lang_value, values)
            session.playing = True
            try:
                while session.playing and not session.run.done:
                    yield advance(session, lang_value)
                    time.sleep(PLAY_DELAY_S)
            except GeneratorExit:  # Gradio closes the handler when its client goes away: stop decoding
                session.run.stop()
                raise
            finally:
                session.playing = False
        yield {status: view.render(session, lang_value)[status]}

    @guarded(status)
    def on_pause(lang_value, session):
        session = ensure(session)
        session.playing = False
        return {state: session}

    @guarded(status)
    def on_stop(lang_value, session):
        session = ensure(session)
        session.playing = False
        run = session.run
        if run is None or run.done:
            return {state: session, **view.render(session, lang_value)}
        run.stop()
        trace = session.save_trace(run)
        return {state: session, **view.render(session, lang_value), download: gr.update(value=trace, interactive=True)}

    @guarded(status)
    def on_reset(lang_value, session):
        session = ensure(session)
        session.playing = False
        if session.run is not None:
            session.run.stop()
        session.run = None
        return {state: session, **view.render(session, lang_value)}

    step_btn.click(on_step, [lang, state] + controls, outputs, api_name="step",
                   concurrency_id="decode", concurrency_limit=gate.handlers,
                   preprocess=False)
    play_btn.click(on_play, [lang, state] + controls, outputs, api_name="play",
                   concurrency_id="decode", concurrency_limit=gate.handlers,
                   preprocess=False)
    pause_btn.click(on_pause, [lang, state], outputs, api_name="pause", concurrency_limit=None)
    stop_btn.click(on_stop, [lang, state], outputs, api_name="stop", concurrency_limit=None)
    reset_btn.click(on_reset, [lang, state], outputs, api_name="reset", concurrency_limit=None)
    drafter.change(lambda name: gr.update(visible=name in EAGLE_DRAFTERS), drafter, eagle_row,
                   api_visibility="private")
    return view
