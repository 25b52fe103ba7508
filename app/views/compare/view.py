"""Compare drafters: the baseline and several drafters on one prompt and one target, warmed up, then
timed in interleaved rounds (``core.studies.comparison``); the table and plots grow as each run finishes,
with medians, their range and a note where the timing cannot be trusted."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import gradio as gr
import pandas as pd

from core.records import metrics
from core.api.request import DecodeRequest
from core.serving.prometheus import lab_metrics
from core.studies.comparison import (MAX_REPEATS, NOISY_SPREAD, Comparison, Progress, Spread, TimedSetup,
                                     estimate_left, run_comparison)

from ... import memory
from ...controls import (COMPARE_CHOICES, COMPARE_DEFAULT, PRECISIONS, CompareControls, ModelPolicy, compare_requests,
                         number)
from ...figures import empty
from ...figures.timeline import Lane, timeline_figure
from ...guard import guarded
from ...i18n import t
from ...labels import Labels
from ...page_limits import PAGE_MAX_TEMPERATURE
from ...render import markdown_text
from ...runs import model_name
from ...session import Session, ensure
from ...shared import comparison_points
from ..own_models import own_model_fields
from ..page import Page, View
from ..stepper import StepperState
from .figures import compare_figure
from .state import CompareState

DEFAULT_PROMPT = "It is a truth universally acknowledged"
DEFAULT_SHAPES = "auto, 4"  # the goodput controller's choice beside a fixed chain
MODES = {"quick": (24, 1), "full": (48, 3)}  # (new tokens, timed rounds) each mode fills in
DEFAULT_MODE = "quick"  # the whole default comparison in minutes, not half an hour on a busy machine
DEFAULT_MAX_NEW, DEFAULT_REPEATS = MODES[DEFAULT_MODE]
TABLE_HEIGHT = 1600  # px: every row of the largest comparison (PAGE_MAX_COMPARE_RUNS) shows without scrolling
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
    cost = totals.step_cost(comparison.forward_s)
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
            lines.append(t("cmp.flag.above_tau", lang, label=setup.label, high=speedup.high, speedup=speedup.median,
                           tau=setup.tau))
        if "v_below_one" in flags:
            v = comparison.verify_cost(setup)
            lines.append(t("cmp.flag.v_below_one", lang, label=setup.label, v=v))
        if "noisy" in flags:
            spread = max(s.relative for s in (comparison.wall(setup), speedup) if s is not None)
            lines.append(t("cmp.flag.noisy", lang, label=setup.label, spread=spread, limit=NOISY_SPREAD))
    return lines


def warnings_html(comparison: Comparison, lang: str, skipped: list[str]) -> str:
    """Every note on the comparison's timing (and every skipped set-up) folded into one line that
    counts them by kind; the sentences behind a closed detail."""
    lines = flag_lines(comparison, lang) + skipped
    if not lines:
        return ""
    kinds = Counter(flag for setup in comparison.setups for flag in comparison.flags(setup))
    parts = [f"{t('note.' + flag, lang)} × {n}" for flag, n in kinds.items()]
    if skipped:
        parts.append(f"{t('cmp.skipped_kind', lang)} × {len(skipped)}")
    summary = t("cmp.warnings", lang, n=len(lines), kinds=", ".join(parts))
    return (f'<details class="sdl-warnings" id="cmp-warnings"><summary>{summary}</summary>'
            + "<br>".join(lines) + "</details>")


def duration(seconds: float, lang: str) -> str:
    """A time in minutes and seconds: "2 min 10 s" / "2 分 10 秒"."""
    seconds = max(1, round(seconds))
    minutes, rest = divmod(seconds, 60)
    return t("cmp.minutes" if minutes else "cmp.seconds", lang, m=minutes, s=rest)


def known_forward_s(session: Session, request: DecodeRequest) -> float | None:
    """One one-token forward of ``request``'s target on this machine, if this session measured it
    (a Compare on the same target, or the verify-cost curve a Step-by-step run on it reads)."""
    def target(r: DecodeRequest) -> tuple:
        return r.preset, r.target, r.target_precision

    previous = session.of(CompareState).comparison
    if previous is not None and previous.setups and previous.baseline.results:
        if target(previous.baseline.request) == target(request):
            return previous.forward_s
    run = session.of(StepperState).run  # Step by step's run on the same target read its curve
    if run is not None and target(run.request) == target(request):
        curve = session.shared.curve_for(run.target.path, run.target.precision) or run.curve()
        return curve.forward_s if curve is not None else None
    return None


@dataclass
class CompareView(View):
    state: gr.State  # the browser session's Session
    status: gr.Markdown
    table: gr.Dataframe
    plot: gr.Plot
    timeline: gr.Plot  # where the time goes: one lane per set-up's median repeat, the baseline a real plain run

    @property
    def outputs(self) -> list:
        return [self.table, self.plot, self.timeline]

    def render(self, session: Session, lang: str) -> dict:
        comparison = session.of(CompareState).comparison
        shown = [] if comparison is None else [(s.label, s.median_run) for s in comparison.setups if s.results]
        if not shown:
            blank = empty(t("hint.press_compare", lang))
            return {self.table: table(None, lang), self.plot: blank, self.timeline: blank}
        runs = [(label, run.steps) for label, run in shown]
        lanes = [Lane.of(label, run.steps, run.wall_s) for label, run in shown]
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
    modes = [("cmp.mode_quick", "quick"), ("cmp.mode_full", "full")]
    mode = labels(gr.Radio([(labels.text(key), value) for key, value in modes], value=DEFAULT_MODE,
                           label=labels.text("cmp.mode"), info=labels.text("cmp.mode_info"), elem_id="cmp-mode"),
                  label="cmp.mode", info="cmp.mode_info", choices=modes)
    with gr.Row():
        temperature = labels.make(gr.Slider, 0, PAGE_MAX_TEMPERATURE, value=0, step=0.05, label="ctl.temperature")
        seed = labels.make(gr.Number, 0, label="ctl.seed")
        max_new = labels.make(gr.Number, DEFAULT_MAX_NEW, label="ctl.max_new_tokens", elem_id="cmp-max-new")
        repeats = labels.make(gr.Number, DEFAULT_REPEATS, label="ctl.repeats", info="ctl.repeats_info", precision=0,
                              elem_id="cmp-repeats")
    target_precision = labels.make(gr.Radio, list(PRECISIONS), value=PRECISIONS[0], label="ctl.precision",
                                   info="ctl.precision_info", elem_id="cmp-precision")
    mode.change(lambda value: MODES.get(value, MODES[DEFAULT_MODE]), mode, [max_new, repeats],
                api_visibility="private")  # a mode fills in the two fields; either can still be changed by hand
    own_target, own_draft = own_model_fields(labels, "cmp", policy)
    return CompareControls(prompt=prompt, preset=preset, drafters=drafters, shapes=shapes, temperature=temperature,
                           seed=seed, max_new_tokens=max_new, target=own_target, draft=own_draft, repeats=repeats,
                           target_precision=target_precision)


def build(page: Page) -> CompareView:
    labels, state, lang, presets, gate = page.labels, page.state, page.lang, page.presets, page.gate
    policy, default_preset = page.policy, page.default_preset
    settings = build_controls(labels, presets, default_preset, policy)
    with gr.Row():
        run_btn = labels.make(gr.Button, text="btn.compare", variant="primary", elem_id="cmp-run")
        stop_btn = labels.make(gr.Button, text="btn.stop", variant="stop", elem_id="cmp-stop")
    status = gr.Markdown(elem_id="cmp-status", elem_classes=["sdl-status"])
    result_table = labels.make(gr.Dataframe, table(None, labels.lang), label="panel.compare_table", interactive=False,
                               elem_id="cmp-table", wrap=True, max_height=TABLE_HEIGHT)
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
        session.of(CompareState).stop = True
        return {state: session}

    outputs = [state, status, *view.outputs]
    run_btn.click(on_compare, [lang, state, *settings.components()], outputs, api_name="compare",
                  concurrency_id="decode", concurrency_limit=gate.handlers, preprocess=False)
    stop_btn.click(on_stop, [lang, state], outputs, api_name="compare_stop", concurrency_limit=None)
    return view


def estimate_line(requests: list[DecodeRequest], repeats: int, forward_s: float | None, lang: str) -> str:
    """Before a comparison starts: how long it should take, or why there is no estimate yet."""
    runs = len(requests) * (repeats + 1)
    estimate = estimate_left(requests, repeats, forward_s=forward_s)
    if estimate is None:
        return t("cmp.no_estimate", lang, runs=runs)
    return t("cmp.estimate", lang, time=duration(estimate.left_s, lang), runs=runs, ms=forward_s * 1e3)


def compare(view: CompareView, session: Session, requests: list[DecodeRequest], repeats: int, lang: str, queue):
    """Warm up, then time the requests in interleaved rounds (``core.studies.comparison``), yielding the page as it
    grows; the timed runs are counted in the server's /metrics (``queue``: how many are still waiting). The
    status line says how long is left, from what the machine has measured so far."""
    mine, shared = session.of(CompareState), session.shared
    mine.stop = False
    estimate = estimate_line(requests, repeats, known_forward_s(session, requests[0]), lang)
    mine.comparison = None
    yield {view.state: session, view.status: estimate}
    for progress in run_comparison(requests, repeats, should_stop=lambda: mine.stop, metered=_metered):
        if shared.language(lang) != lang:  # the visitor switched language mid-run
            lang = shared.language(lang)
            estimate = estimate_line(requests, repeats, known_forward_s(session, requests[0]), lang)
        mine.comparison = comparison = progress.comparison
        if progress.phase == "timed" and progress.setup is not None and not progress.tick:
            queue.take()
        skipped = [t("cmp.skipped", lang, label=label, reason=markdown_text(why)) for label, why in comparison.skipped]
        if progress.setup is None and progress.phase == "timed":
            memory.give_back()
            yield view.render(session, lang)
            continue
        line = _progress_line(progress, len(requests), lang)
        left = estimate_left(requests, repeats, comparison, progress=progress)
        if left is not None:
            line += " " + t("cmp.left", lang, time=duration(left.left_s, lang))
            if left.busier:
                line += " " + t("cmp.busier", lang, slow=left.slowdown)
        yield {view.state: session, view.status: "<br>".join([line, estimate, *skipped])}
    comparison = mine.comparison
    if comparison.stopped is not None:
        yield {view.status: t("cmp.stopped", lang, after=comparison.stopped.kv["blocks_in_use_after"]),
               **view.render(session, lang)}
        return
    shared.set_curve(comparison.baseline.results[0].target, comparison.baseline.request.target_precision,
                     comparison.curve)
    shared.cost_points()  # Step-by-step runs made before any Compare get their c and v now
    shared.points += comparison_points(comparison)
    done = t("cmp.done", lang, n=len(comparison.setups), repeats=repeats)
    status = done + warnings_html(comparison, lang, skipped)
    yield {view.state: session, view.status: status, **view.render(session, lang)}


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
