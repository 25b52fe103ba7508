"""Compare drafters: the baseline and several drafters on one prompt and one target, run one
after another in this session; the table and plots grow as each run finishes."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr
import pandas as pd

from core import UserError, metrics
from core.api import build_decoder
from core.prometheus import lab_metrics
from core.request import DecodeRequest

from ..controls import COMPARE_CHOICES, COMPARE_DEFAULT, MAX_TEMPERATURE, ModelPolicy, compare_requests
from ..figures import compare_figure, empty
from ..guard import guarded
from ..i18n import t
from ..labels import Labels
from ..session import CompareRow, Session, ensure, measured_point, model_name
from .own_models import own_model_fields

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
         "—" if not row.result.draft_tokens_proposed else f"{row.result.acceptance_rate:.1%}",
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


def _run_one(session: Session, request: DecodeRequest):
    """Decode one request to the end, or until Stop; returns the RunResult (its KV is returned either way).
    Every step is counted in the server's /metrics."""
    decoder, prompt_ids = build_decoder(request)
    steps = decoder.steps(prompt_ids)
    with lab_metrics().request(model_name(request)) as meter:
        for record in steps:
            meter.observe(record)
            if session.compare_stop:
                steps.close()
                break
    return decoder.result


def build_controls(labels: Labels, presets: list[str], default_preset: str, policy: ModelPolicy) -> list:
    """The comparison's settings, in the order ``controls.compare_requests`` takes them."""
    with gr.Row():
        prompt = labels.make(gr.Textbox, DEFAULT_PROMPT, label="ctl.prompt", lines=2, scale=3, elem_id="cmp-prompt")
        preset = labels.make(gr.Dropdown, presets, value=default_preset, label="ctl.preset", scale=1)
    with gr.Row():
        drafters = labels.make(gr.CheckboxGroup, COMPARE_CHOICES, value=COMPARE_DEFAULT, label="ctl.drafters",
                               info="ctl.drafters_info", elem_id="cmp-drafters", scale=2)
        shapes = labels.make(gr.Textbox, "4, 2x3", label="ctl.shapes", info="ctl.shapes_info", elem_id="cmp-shapes",
                             scale=2)
    with gr.Row():
        temperature = labels.make(gr.Slider, 0, MAX_TEMPERATURE, value=0, step=0.05, label="ctl.temperature")
        seed = labels.make(gr.Number, 0, label="ctl.seed")
        max_new = labels.make(gr.Number, 48, label="ctl.max_new_tokens", elem_id="cmp-max-new")
    own_target, own_draft = own_model_fields(labels, "cmp", policy)
    return [prompt, preset, drafters, shapes, temperature, seed, max_new, own_target, own_draft]


def build(labels: Labels, state: gr.State, lang: gr.Radio, presets: list[str], default_preset: str,
          policy: ModelPolicy) -> CompareView:
    settings = build_controls(labels, presets, default_preset, policy)
    with gr.Row():
        run_btn = labels.make(gr.Button, text="btn.compare", variant="primary", elem_id="cmp-run")
        stop_btn = labels.make(gr.Button, text="btn.stop", variant="stop", elem_id="cmp-stop")
    status = gr.Markdown(elem_id="cmp-status", elem_classes=["sdl-status"])
    result_table = labels.make(gr.Dataframe, table([], labels.lang), label="panel.compare_table", interactive=False,
                               elem_id="cmp-table")
    plot = labels.make(gr.Plot, label="panel.compare_plot", elem_id="cmp-plot")
    view = CompareView(status, result_table, plot)

    @guarded(status)
    def on_compare(lang_value, session, *values):
        session = ensure(session)
        requests = compare_requests(lang_value, presets, *values, policy=policy)
        with lab_metrics().queue(model_name(requests[0]), len(requests)) as queue:  # /metrics: waiting runs
            yield from compare(view, state, session, requests, lang_value, queue)

    @guarded(status)
    def on_stop(lang_value, session):
        session = ensure(session)
        session.compare_stop = True
        return {state: session}

    outputs = [state, status, result_table, plot]
    run_btn.click(on_compare, [lang, state, *settings], outputs, api_name="compare", concurrency_limit=2)
    stop_btn.click(on_stop, [lang, state], outputs, api_name="compare_stop", concurrency_limit=None)
    return view


def compare(view: CompareView, state: gr.State, session: Session, requests: list[DecodeRequest], lang: str, queue):
    """Run the requests one after another (the baseline first), yielding the page after each;
    ``queue`` tells /metrics how many are still waiting."""
    session.compare_stop = False
    session.compare_rows = []
    skipped: list[str] = []  # drafters this preset cannot run (e.g. no trained heads), with the reason
    for i, request in enumerate(requests):
        line = t("cmp.running", lang, i=i + 1, n=len(requests), label=request.label())
        yield {state: session, view.status: "<br>".join([line, *skipped])}
        queue.take()
        try:
            result = _run_one(session, request)
        except UserError as e:
            if not request.drafter_class.drafts:
                raise
            skipped.append(t("cmp.skipped", lang, label=request.label(), reason=e))
            continue
        if result.stop_reason == "cancelled":
            yield {view.status: t("cmp.stopped", lang, after=result.kv["blocks_in_use_after"])}
            return
        baseline = session.compare_rows[0].result if session.compare_rows else result
        speedup = baseline.wall_s / result.wall_s if result.wall_s > 0 else 0.0
        identical = result.tokens == baseline.tokens if request.temperature == 0 else None
        row = CompareRow(request.label(), result, speedup, identical if i > 0 else None)
        session.compare_rows.append(row)
        if request.drafter_class.drafts:
            session.points.append(measured_point(row.label, result, speedup))
        yield view.render(session, lang)
    done = t("cmp.done", lang, n=len(session.compare_rows))
    yield {view.status: "<br>".join([done, *skipped]), **view.render(session, lang)}
