"""Compare drafters: the baseline and several drafters on one prompt and one target, run one
after another in this session; the table and plots grow as each run finishes."""
from __future__ import annotations

import time
from dataclasses import dataclass

import gradio as gr
import pandas as pd

from core import UserError, metrics
from ..controls import COMPARE_CHOICES, COMPARE_DEFAULT, MAX_TEMPERATURE, ModelPolicy, RunRequest, compare_requests
from .. import memory
from ..figures import compare_figure, empty
from ..guard import guarded
from ..i18n import t
from ..labels import Labels
from ..limits import RunGate
from ..render import markdown_text
from ..session import CompareRow, Session, ensure, measured_point
from .own_models import own_model_fields

PROGRESS_EVERY_S = 0.5
DEFAULT_PROMPT = "It is a truth universally acknowledged"
COLUMNS = ("col.drafter", "col.new_tokens", "col.forwards", "col.tau", "col.acceptance", "col.draft_cost",
           "col.wall", "col.speedup", "col.identical")


def draft_cost(result) -> str:
    """Drafting time per verify time over the run's drafting steps (``core.metrics``)."""
    cost = metrics.draft_cost(result.steps)
    return "—" if cost is None else f"{cost:.2f}"


def table(rows: list[CompareRow], lang: str) -> pd.DataFrame:
    """The comparison table; speedup is the baseline's wall time over the run's, same comparison."""
    def identical(row: CompareRow) -> str:
        return "—" if row.identical is None else ("✓" if row.identical else "✗")

    data = [
        [row.label, row.result.new_tokens, row.result.target_forwards, round(row.result.mean_accepted_tokens, 2),
         "—" if row.result.drafter == "none" else f"{row.result.acceptance_rate:.1%}",
         draft_cost(row.result), round(row.result.wall_s, 2), f"{row.speedup:.2f}×", identical(row)]
        for row in rows
    ]
    return pd.DataFrame(data, columns=[t(c, lang) for c in COLUMNS])


@dataclass
class CompareView:
    status: gr.Markdown
    table: gr.Dataframe
    plot: gr.Plot

    @property
    def outputs(self) -> list:
        return [self.table, self.plot]

    def render(self, session: Session, lang: str) -> dict:
        rows = session.compare_rows
        if not rows:
            return {self.table: table([], lang), self.plot: empty(t("hint.press_compare", lang))}
        return {self.table: table(rows, lang),
                self.plot: compare_figure([(r.label, r.result.steps) for r in rows], lang)}


def _run_one(session: Session, request: RunRequest):
    """Decode one request to the end, or until Stop, yielding each StepRecord; returns the RunResult.
    Its KV is returned either way, also when this generator is closed (the client went away)."""
    decoder, prompt_ids = request.build()
    steps = decoder.steps(prompt_ids)
    try:
        for record in steps:
            if session.compare_stop:
                break
            yield record
    finally:
        steps.close()  # cancels a run that has not finished (the engine returns its blocks)
        memory.give_back()
    return decoder.result


def _progress(session: Session, request: RunRequest, status: gr.Markdown, line: str,
              every_s: float = PROGRESS_EVERY_S):
    """Run one request, yielding the status line with its tokens so far every ``every_s`` seconds
    (each message is also where Gradio notices a client that went away and closes the handler)."""
    last = time.monotonic()
    runner = _run_one(session, request)
    while True:
        try:
            record = next(runner)
        except StopIteration as done:
            return done.value
        if time.monotonic() - last >= every_s:
            last = time.monotonic()
            yield {status: f"{line} · {record.new_tokens_total}/{request.max_new_tokens}"}


def build(labels: Labels, state: gr.State, lang: gr.Radio, presets: list[str], default_preset: str,
          policy: ModelPolicy, gate: RunGate) -> CompareView:
    with gr.Row():
        prompt = labels(gr.Textbox(DEFAULT_PROMPT, label=labels.text("ctl.prompt"), lines=2, scale=3,
                                   elem_id="cmp-prompt"), label="ctl.prompt")
        preset = labels(gr.Dropdown(presets, value=default_preset, label=labels.text("ctl.preset"), scale=1),
                        label="ctl.preset")
    with gr.Row():
        drafters = labels(gr.CheckboxGroup(COMPARE_CHOICES, value=COMPARE_DEFAULT, label=labels.text("ctl.drafters"),
                                           info=labels.text("ctl.drafters_info"), elem_id="cmp-drafters", scale=2),
                          label="ctl.drafters", info="ctl.drafters_info")
        shapes = labels(gr.Textbox("4, 2x3", label=labels.text("ctl.shapes"), info=labels.text("ctl.shapes_info"),
                                   elem_id="cmp-shapes", scale=2), label="ctl.shapes", info="ctl.shapes_info")
    with gr.Row():
        temperature = labels(gr.Slider(0, MAX_TEMPERATURE, value=0, step=0.05, label=labels.text("ctl.temperature")),
                             label="ctl.temperature")
        seed = labels(gr.Number(0, label=labels.text("ctl.seed")), label="ctl.seed")
        max_new = labels(gr.Number(48, label=labels.text("ctl.max_new_tokens"), elem_id="cmp-max-new"),
                         label="ctl.max_new_tokens")
    own_target, own_draft = own_model_fields(labels, "cmp", policy)
    with gr.Row():
        run_btn = labels(gr.Button(labels.text("btn.compare"), variant="primary", elem_id="cmp-run"),
                         value="btn.compare")
        stop_btn = labels(gr.Button(labels.text("btn.stop"), variant="stop", elem_id="cmp-stop"), value="btn.stop")
    status = gr.Markdown(elem_id="cmp-status", elem_classes=["sdl-status"])
    result_table = labels(gr.Dataframe(table([], labels.lang), label=labels.text("panel.compare_table"),
                                       interactive=False, elem_id="cmp-table"), label="panel.compare_table")
    plot = labels(gr.Plot(label=labels.text("panel.compare_plot"), elem_id="cmp-plot"), label="panel.compare_plot")
    view = CompareView(status, result_table, plot)

    @guarded(status)
    def on_compare(lang_value, session, *values):
        session = ensure(session)
        requests = compare_requests(lang_value, presets, *values, policy=policy)
        gate.check_budget(requests, lang_value)
        with gate.slot(session, lang_value, long=True):
            yield from compare(lang_value, session, requests)

    def compare(lang_value, session: Session, requests: list[RunRequest]):
        """Every request in turn; the table and plots grow as each finishes."""
        session.compare_stop = False
        session.compare_rows = []
        skipped: list[str] = []  # drafters this preset cannot run (e.g. no trained heads), with the reason
        for i, request in enumerate(requests):
            line = t("cmp.running", lang_value, i=i + 1, n=len(requests), label=request.label())
            yield {state: session, status: "<br>".join([line, *skipped])}
            try:
                result = yield from _progress(session, request, status, line)
            except UserError as e:
                if request.drafter == "none":
                    raise
                skipped.append(t("cmp.skipped", lang_value, label=request.label(), reason=markdown_text(e)))
                continue
            if result.stop_reason == "cancelled":
                yield {status: t("cmp.stopped", lang_value, after=result.kv["blocks_in_use_after"])}
                return
            baseline = session.compare_rows[0].result if session.compare_rows else result
            speedup = baseline.wall_s / result.wall_s if result.wall_s > 0 else 0.0
            identical = result.tokens == baseline.tokens if request.temperature == 0 else None
            row = CompareRow(request.label(), result, speedup, identical if i > 0 else None)
            session.compare_rows.append(row)
            if request.drafter != "none":
                session.points.append(measured_point(row.label, result, speedup))
            yield view.render(session, lang_value)
        done = t("cmp.done", lang_value, n=len(session.compare_rows))
        yield {status: "<br>".join([done, *skipped]), **view.render(session, lang_value)}

    @guarded(status)
    def on_stop(lang_value, session):
        session = ensure(session)
        session.compare_stop = True
        return {state: session}

    outputs = [state, status, result_table, plot]
    run_btn.click(on_compare, [lang, state, prompt, preset, drafters, shapes, temperature, seed, max_new, own_target,
                               own_draft], outputs,
                  api_name="compare", concurrency_id="decode", concurrency_limit=gate.handlers,
                   preprocess=False)
    stop_btn.click(on_stop, [lang, state], outputs, api_name="compare_stop", concurrency_limit=None)
    return view
