"""Step by step's layout and handlers: the controls, the step panels, and Step, Play, Pause, Stop, Reset."""
from __future__ import annotations

import time
from dataclasses import dataclass

import gradio as gr

from core import UserError
from core.models.loading import resolve_preset

from ...controls import DRAFTER_NAMES, PRECISIONS, ModelPolicy, StepControls, run_request, takes_option
from ...guard import guarded
from ...i18n import t
from ...labels import Labels
from ...page_limits import PAGE_MAX_TEMPERATURE, RunGate
from ...render import summary_markdown
from ...runs import Run
from ...session import Session, ensure
from ..own_models import own_model_fields
from ..page import Page, View
from ..panels import StepPanels, step_panels
from .state import StepperState

PLAY_DELAY_S = 0.4
DEFAULT_PROMPT = "我爱"


@dataclass
class StepperView(View):
    panels: StepPanels
    status: gr.Markdown
    summary: gr.Markdown
    download: gr.DownloadButton

    @property
    def outputs(self) -> list:
        return [self.status, self.summary, self.download, *self.panels.outputs]

    def render(self, session: Session, lang: str) -> dict:
        """Everything the view shows for the session's current run."""
        mine = session.of(StepperState)
        run = mine.run
        if run is None:
            return {**self.panels.blank(lang), self.status: "", self.summary: "",
                    self.download: gr.update(value=None, interactive=False)}
        curve = session.shared.curve_for(run.target.path, run.target.precision) or run.curve()
        out = self.panels.render(run.prompt, run.records, lang, curve=curve, expand=mine.expand_tree,
                                 budget=run.request.max_new_tokens, preset=run.request.preset)
        out[self.status] = self._status_line(run, mine.playing, lang)
        out[self.summary] = summary_markdown(run.result.to_dict(), lang, run.records) if run.done else ""
        return out

    def _status_line(self, run: Run, playing: bool, lang: str) -> str:
        request = run.request
        last = run.records[-1] if run.records else None
        tokens = last.new_tokens_total if last else 0
        forwards = last.target_forwards_total if last else 0
        state = "run.done" if run.done else ("run.playing" if playing else "run.ready")
        line = t("run.status", lang, label=request.label(), temperature=request.temperature, seed=request.seed,
                 tokens=tokens, max=request.max_new_tokens, forwards=forwards, state=t(state, lang))
        if run.done and run.result is not None and run.result.stop_reason == "cancelled":
            line += "<br>" + t("run.stopped", lang, after=run.result.kv["blocks_in_use_after"],
                               peak=run.result.kv["peak_blocks_in_use"])
        return line


def button(labels: Labels, key: str, elem_id: str, variant: str = "secondary") -> gr.Button:
    return labels.make(gr.Button, text=key, variant=variant, elem_id=elem_id, min_width=80)


@dataclass
class StepperControls:
    """The run's settings (one widget per ``StepControls`` field) and the buttons."""

    settings: StepControls
    drafter: gr.Dropdown
    eagle_row: gr.Row
    buttons: dict[str, gr.Button]  # step, play, pause, stop, reset
    download: gr.DownloadButton


def build_controls(labels: Labels, presets: list[str], default_preset: str, default_drafter: str,
                   policy: ModelPolicy) -> StepperControls:
    prompt = labels.make(gr.Textbox, DEFAULT_PROMPT, label="ctl.prompt", lines=2, elem_id="step-prompt")
    with gr.Row():  # the buttons under the prompt: Step is above the fold on a laptop's screen
        buttons = {"step": button(labels, "btn.step", "step-btn", variant="primary"),
                   "play": button(labels, "btn.play", "play-btn"), "pause": button(labels, "btn.pause", "pause-btn")}
    with gr.Row():
        buttons.update(stop=button(labels, "btn.stop", "stop-btn", variant="stop"),
                       reset=button(labels, "btn.reset", "reset-btn"))
    preset = labels.make(gr.Dropdown, presets, value=default_preset, label="ctl.preset", elem_id="step-preset")
    drafter = labels.make(gr.Dropdown, DRAFTER_NAMES, value=default_drafter, label="ctl.drafter",
                          info="ctl.drafter_info", elem_id="step-drafter")
    with gr.Row():
        k = labels.make(gr.Number, 4, label="ctl.k", elem_id="step-k")
        width = labels.make(gr.Number, 1, label="ctl.width", elem_id="step-width")
    auto = labels.make(gr.Checkbox, value=False, label="ctl.auto", info="ctl.auto_info", elem_id="step-auto")
    target_precision = labels.make(gr.Radio, list(PRECISIONS), value=PRECISIONS[0], label="ctl.precision",
                                   info="ctl.precision_info", elem_id="step-precision")
    with gr.Row(visible=takes_option(default_drafter, "eagle_nodes")) as eagle_row:
        eagle_nodes = labels.make(gr.Number, 16, label="ctl.eagle_n", info="ctl.eagle_n_info", precision=0,
                                  elem_id="step-eagle-n")
    temperature = labels.make(gr.Slider, 0, PAGE_MAX_TEMPERATURE, value=0, step=0.05, label="ctl.temperature",
                              info="ctl.temperature_info", elem_id="step-temperature")
    with gr.Row():
        seed = labels.make(gr.Number, 0, label="ctl.seed")
        max_new = labels.make(gr.Number, 48, label="ctl.max_new_tokens", elem_id="step-max-new")
    own_target, own_draft = own_model_fields(labels, "step", policy)
    download = labels.make(gr.DownloadButton, label="btn.download", interactive=False, elem_id="step-download")
    settings = StepControls(prompt=prompt, preset=preset, drafter=drafter, k=k, width=width, temperature=temperature,
                            seed=seed, max_new_tokens=max_new, eagle_nodes=eagle_nodes, target=own_target,
                            draft=own_draft, auto=auto, target_precision=target_precision)
    return StepperControls(settings, drafter, eagle_row, buttons, download)


def build(page: Page) -> StepperView:
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            default_drafter = resolve_preset(page.default_preset).default_drafter
            ctl = build_controls(page.labels, page.presets, page.default_preset, default_drafter, page.policy)
            status = gr.Markdown(elem_id="step-status", elem_classes=["sdl-status"])
            summary = gr.Markdown(elem_id="step-summary")
        with gr.Column(scale=3):
            panels = step_panels(page.labels, "step", lossless=True, timing=True, anatomy=True)
    view = StepperView(panels, status, summary, ctl.download)
    wire(view, ctl, page)
    return view


def wire(view: StepperView, ctl: StepperControls, page: Page) -> None:
    """The buttons' handlers; Step and Play take a decoding slot (``app.page_limits``) and check their own values."""
    state, lang, gate = page.state, page.lang, page.gate
    presets, policy = page.presets, page.policy
    handlers = handlers_for(view, state, presets, policy, gate)
    outputs = [state, *view.outputs]
    for name in ("step", "play"):
        ctl.buttons[name].click(handlers[name], [lang, state, *ctl.settings.components()], outputs, api_name=name,
                                concurrency_id="decode", concurrency_limit=gate.handlers, preprocess=False)
    for name in ("pause", "stop", "reset"):
        ctl.buttons[name].click(handlers[name], [lang, state], outputs, api_name=name, concurrency_limit=None)
    ctl.drafter.change(lambda name: gr.update(visible=takes_option(name, "eagle_nodes")), ctl.drafter, ctl.eagle_row,
                       api_visibility="private")

    def expand(lang_value, session, whole: bool):
        session = ensure(session)
        session.of(StepperState).expand_tree = bool(whole)
        return {state: session, **view.render(session, lang_value)}

    view.panels.expand.change(expand, [lang, state, view.panels.expand], outputs, api_visibility="private")


def handlers_for(view: StepperView, state: gr.State, presets: list[str], policy: ModelPolicy, gate: RunGate) -> dict:
    """``step``, ``play``, ``pause``, ``stop``, ``reset``: each guarded (a UserError shows in the status line)."""
    h = StepperHandlers(view, state, presets, policy, gate)
    return {name: guarded(view.status)(getattr(h, name)) for name in ("step", "play", "pause", "stop", "reset")}


class StepperHandlers:
    def __init__(self, view: StepperView, state: gr.State, presets: list[str], policy: ModelPolicy, gate: RunGate):
        self.view, self.state, self.presets, self.policy, self.gate = view, state, presets, policy, gate

    def advance(self, session: Session, lang_value: str) -> dict:
        """One step of the session's run; the step that ends it offers the trace for download."""
        mine, shared = session.of(StepperState), session.shared
        run = mine.run
        record = run.step()
        out = {self.state: session, **self.view.render(session, lang_value)}
        if record is not None and run.done:
            mine.playing = False
            out[self.view.download] = gr.update(value=shared.traces.save(run), interactive=True)
            target = (run.result.target, run.target.precision)
            shared.add_run(run.request.label(), run.result.steps, run.request.shape.depth, target,
                           shared.curve_for(*target) or run.curve())
        return out

    def start(self, session: Session, lang_value: str, values: tuple):
        request = run_request(lang_value, self.presets, StepControls(*values), policy=self.policy)
        self.gate.check_budget([request], lang_value)
        mine = session.of(StepperState)
        if mine.run is not None:
            mine.run.stop()
        yield {self.state: session, self.view.status: t("run.loading", lang_value)}
        mine.run = Run(request)

    def changed(self, session: Session, lang_value: str, values: tuple) -> str:
        """A line asking for Reset when the controls no longer describe the run going on."""
        try:
            request = run_request(lang_value, self.presets, StepControls(*values), policy=self.policy)
        except UserError:
            request = None
        return t("run.changed", lang_value) if request != session.of(StepperState).run.request else ""

    def step(self, lang_value, session, *values):
        session = ensure(session)
        mine = session.of(StepperState)
        with self.gate.slot(session, lang_value):
            note = ""
            if mine.run is None or mine.run.done:
                yield from self.start(session, lang_value, values)
            else:
                note = self.changed(session, lang_value, values)
            lang_value = session.shared.language(lang_value)  # switched while the step waited for its slot
            out = self.advance(session, lang_value)
            if note:
                out[self.view.status] = f"{out[self.view.status]}<br>{note}"
            yield out

    def play(self, lang_value, session, *values):
        session = ensure(session)
        mine, shared = session.of(StepperState), session.shared
        with self.gate.slot(session, lang_value, long=True):
            if mine.run is None or mine.run.done:
                yield from self.start(session, lang_value, values)
            mine.playing = True
            try:
                while mine.playing and not mine.run.done:
                    yield self.advance(session, shared.language(lang_value))  # a switch mid-run shows at once
                    time.sleep(PLAY_DELAY_S)
            except GeneratorExit:  # Gradio closes the handler when its client goes away: stop decoding
                mine.run.stop()
                raise
            finally:
                mine.playing = False
        yield {self.view.status: self.view.render(session, shared.language(lang_value))[self.view.status]}

    def pause(self, lang_value, session):
        session = ensure(session)
        session.of(StepperState).playing = False
        return {self.state: session}

    def stop(self, lang_value, session):
        session = ensure(session)
        mine = session.of(StepperState)
        mine.playing = False
        run, trace = mine.run, {}
        if run is not None and not run.done:
            run.stop()
            trace = {self.view.download: gr.update(value=session.shared.traces.save(run), interactive=True)}
        return {self.state: session, **self.view.render(session, lang_value), **trace}

    def reset(self, lang_value, session):
        session = ensure(session)
        mine = session.of(StepperState)
        mine.playing = False
        if mine.run is not None:
            mine.run.stop()
        mine.run = None
        return {self.state: session, **self.view.render(session, lang_value)}
