"""Compare drafters: the baseline and several drafters on one prompt and one target, warmed up, then
timed in interleaved rounds (``core.studies.comparison``); the table and plots grow as each run finishes,
with medians, their range and a note where the timing cannot be trusted."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr
import pandas as pd

from core.limits import PAGE_MAX_TEMPERATURE
from core.records import metrics
from core.request import DecodeRequest
from core.serving.prometheus import lab_metrics
from core.studies.comparison import MAX_REPEATS, NOISY_SPREAD, Comparison, Progress, Spread, TimedSetup, run_comparison

from .. import memory
from ..controls import COMPARE_CHOICES, COMPARE_DEFAULT, CompareControls, ModelPolicy, compare_requests, number
from ..figures import compare_figure, empty
from ..figures.timeline import Lane, timeline_figure
from ..guard import guarded
from ..i18n import t
from ..labels import Labels
from ..render import markdown_text
from ..session import Session, comparison_points, ensure, model_name
from .own_models import own_model_fields
from .page import Page

DEFAULT_PROMPT = "It is a truth universally acknowledged"
DEFAULT_SHAPES = "auto, 4"  # the goodput controller's choice beside a fixed chain
DEFAULT_REPEATS = 3
COLUMNS = ("col.drafter", "col.new_tokens", "col.forwards", "col.tau", "col.acceptance", "col.draft_cost",
           "col.ms_forward", "col.v", "col.wall", "col.speedup", "col.identical", "col.note")


def _spread(spread: Spread | None, spec: str, unit: str = "") -> str:
    """"median (min–max)", the range left out for a single value."""
    if spread is None:
        return "—"
    text = f"{spread.median:{spec}}{unit}"
    return text if spread.low == spread.high else f"{text} ({spread.low:{spec}}–{spread.high:{spec}})"


def row(comparison: Comparison, setup: TimedSetup, lang: str) -> list:
    """One set-up's line: counts from its first timed run, costs over all its runs (``core.records.metrics``)."""
    result, totals = setup.results[0], metrics.tally(setup.records)
    cost = metrics.step_cost(setup.records, comparison.forward_s)
    baseline = comparison.baseline.results[0]
    identical = "—" if setup is comparison.baseline or result.settings["temperature"] > 0 else (
        "✓" if result.tokens == baseline.tokens else "✗")
    return [setup.label, result.new_tokens, result.target_forwards, round(totals.tau, 2),
            "—" if not totals.draft_tokens else f"{totals.acceptance_rate:.1%}",
            "—" if totals.draft_cost is None else f"{totals.draft_cost:.2f}",
            f"{totals.verify_s_per_forward * 1000:.0f}", "—" if cost is None else f"{cost.verify:.2f}",
            _spread(comparison.wall(setup), ".2f"), _spread(comparison.speedup(setup), ".2f", "×"), identical,
            ", ".join(t("note." + flag, lang) for flag in comparison.flags(setup))]


def table(comparison: Comparison | None, lang: str) -> pd.DataFrame:
    """The set-ups that have timed runs so far; speedups against the baseline of the same round."""
    setups = [] if comparison is None else [s for s in comparison.setups if s.results]
    if setups and not comparison.baseline.results:
        setups = []
    return pd.DataFrame([row(comparison, s, lang) for s in setups], columns=[t(c, lang) for c in COLUMNS])


def flag_lines(comparison: Comparison, lang: str) -> list[str]:
    """A visible note for every set-up whose timing cannot be trusted as it stands."""
    lines = []
    for setup in comparison.setups:
        flags = comparison.flags(setup)
        speedup = comparison.speedup(setup)
        if "above_tau" in flags:
            lines.append(t("cmp.flag.above_tau", lang, label=setup.label, speedup=speedup.median, tau=setup.tau))
        if "v_below_one" in flags:
            v = comparison.verify_cost(setup)
            lines.append(t("cmp.flag.v_below_one", lang, label=setup.label, v=v))
        if "noisy" in flags:
            spread = max(s.relative for s in (comparison.wall(setup), speedup) if s is not None)
            lines.append(t("cmp.flag.noisy", lang, label=setup.label, spread=spread, limit=NOISY_SPREAD))
    return lines


@dataclass
class CompareView:
    state: gr.State  # the browser session's Session
    status: gr.Markdown
    table: gr.Dataframe
    plot: gr.Plot
    timeline: gr.Plot  # where the time goes: one lane per set-up's first repeat, the baseline a real plain run

    @property
    def outputs(self) -> list:
        return [self.table, self.plot, self.timeline]

    def render(self, session: Session, lang: str) -> dict:
        comparison = session.comparison
        runs = [] if comparison is None else [(s.label, s.results[0].steps) for s in comparison.setups if s.results]
        if not runs:
            blank = empty(t("hint.press_compare", lang))
            return {self.table: table(None, lang), self.plot: blank, self.timeline: blank}
        lanes = [Lane.of(label, steps) for label, steps in runs]
        return {self.table: table(comparison, lang), self.plot: compare_figure(runs, lang),
                self.timeline: timeline_figure(lanes, lang, t("time.compare_title", lang))}


def build_controls(labels: Labels, presets: list[str], default_preset: str, policy: ModelPolicy) -> CompareControls:
    """The comparison's settings: one widget per ``CompareControls`` field."""
    with gr.Row():
        prompt = labels.make(gr.Textbox, DEFAULT_PROMPT, label="ctl.prompt", lines=2, scale=3, elem_id="cmp-prompt")
        preset = labels.make(gr.Dropdown, presets, value=default_preset, label="ctl.preset", scale=1)
    with gr.Row():
        drafters = labels.make(gr.CheckboxGroup, COMPARE_CHOICES, value=COMPARE_DEFAULT, label="ctl.drafters",
                               info="ctl.drafters_info", elem_id="cmp-drafters", scale=2)
        shapes = labels.make(gr.Textbox, DEFAULT_SHAPES, label="ctl.shapes", info="ctl.shapes_info", elem_id="cmp-shapes",
                             scale=2)
    with gr.Row():
        temperature = labels.make(gr.Slider, 0, PAGE_MAX_TEMPERATURE, value=0, step=0.05, label="ctl.temperature")
        seed = labels.make(gr.Number, 0, label="ctl.seed")
        max_new = labels.make(gr.Number, 48, label="ctl.max_new_tokens", elem_id="cmp-max-new")
        repeats = labels.make(gr.Number, DEFAULT_REPEATS, label="ctl.repeats", info="ctl.repeats_info", precision=0,
                              elem_id="cmp-repeats")
    own_target, own_draft = own_model_fields(labels, "cmp", policy)
    return CompareControls(prompt=prompt, preset=preset, drafters=drafters, shapes=shapes, temperature=temperature,
                           seed=seed, max_new_tokens=max_new, target=own_target, draft=own_draft, repeats=repeats)


def build(page: Page) -> CompareView:
    labels, state, lang, presets, gate = page.labels, page.state, page.lang, page.presets, page.gate
    policy, default_preset = page.policy, page.default_preset
    settings = build_controls(labels, presets, default_preset, policy)
    with gr.Row():
        run_btn = labels.make(gr.Button, text="btn.compare", variant="primary", elem_id="cmp-run")
        stop_btn = labels.make(gr.Button, text="btn.stop", variant="stop", elem_id="cmp-stop")
    status = gr.Markdown(elem_id="cmp-status", elem_classes=["sdl-status"])
    result_table = labels.make(gr.Dataframe, table(None, labels.lang), label="panel.compare_table", interactive=False,
                               elem_id="cmp-table")
    plot = labels.make(gr.Plot, label="panel.compare_plot", elem_id="cmp-plot")
    timeline = labels.make(gr.Plot, label="panel.timeline", elem_id="cmp-timeline")
    view = CompareView(state, status, result_table, plot, timeline)

    @guarded(status)
    def on_compare(lang_value, session, *values):
        session = ensure(session)
        controls = CompareControls(*values)
        requests = compare_requests(lang_value, presets, controls, policy=policy)
        rounds = number(controls.repeats, "ctl.repeats", lang_value, 1, MAX_REPEATS, integer=True)
        gate.check_budget(requests * rounds, lang_value)
        with gate.slot(session, lang_value, long=True):
            with lab_metrics().queue(model_name(requests[0]), len(requests) * rounds) as queue:  # /metrics: waiting
                yield from compare(view, session, requests, rounds, lang_value, queue)

    @guarded(status)
    def on_stop(lang_value, session):
        session = ensure(session)
        session.compare_stop = True
        return {state: session}

    outputs = [state, status, *view.outputs]
    run_btn.click(on_compare, [lang, state, *settings.components()], outputs, api_name="compare",
                  concurrency_id="decode", concurrency_limit=gate.handlers, preprocess=False)
    stop_btn.click(on_stop, [lang, state], outputs, api_name="compare_stop", concurrency_limit=None)
    return view


def compare(view: CompareView, session: Session, requests: list[DecodeRequest], repeats: int, lang: str, queue):
    """Warm up, then time the requests in interleaved rounds (``core.studies.comparison``), yielding the page as it
    grows; the timed runs are counted in the server's /metrics (``queue``: how many are still waiting)."""
    session.compare_stop = False
    session.comparison = None
    for progress in run_comparison(requests, repeats, should_stop=lambda: session.compare_stop, metered=_metered):
        session.comparison = comparison = progress.comparison
        if progress.phase == "timed" and progress.setup is not None and not progress.tick:
            queue.take()
        skipped = [t("cmp.skipped", lang, label=label, reason=markdown_text(why)) for label, why in comparison.skipped]
        if progress.setup is None and progress.phase == "timed":
            memory.give_back()
            yield view.render(session, lang)
            continue
        line = _progress_line(progress, len(requests), lang)
        yield {view.state: session, view.status: "<br>".join([line, *skipped])}
    comparison = session.comparison
    if comparison.stopped is not None:
        yield {view.status: t("cmp.stopped", lang, after=comparison.stopped.kv["blocks_in_use_after"]),
               **view.render(session, lang)}
        return
    session.cost_curve, session.cost_target = comparison.curve, comparison.baseline.results[0].target
    session.cost_points()  # Step-by-step runs made before any Compare get their c and v now
    session.points += comparison_points(comparison)
    done = t("cmp.done", lang, n=len(comparison.setups), repeats=repeats)
    lines = [done, *flag_lines(comparison, lang), *skipped]
    yield {view.state: session, view.status: "<br>".join(lines), **view.render(session, lang)}


def _metered(request: DecodeRequest):
    """Count a timed run's steps in the server's /metrics."""
    return lab_metrics().request(model_name(request))


def _progress_line(progress: Progress, total: int, lang: str) -> str:
    comparison = progress.comparison
    if progress.phase == "cost":
        return t("cmp.cost", lang)
    if progress.phase == "warmup":
        done = len(comparison.setups) + len(comparison.skipped)
        return t("cmp.warmup", lang, i=done + 1, n=total, label=progress.setup.label)
    i = comparison.setups.index(progress.setup)
    return t("cmp.running", lang, round=progress.round, rounds=comparison.repeats, i=i + 1, n=len(comparison.setups),
             label=progress.setup.label)
