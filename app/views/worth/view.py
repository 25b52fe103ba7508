"""Worth it? The expected-speedup model with sliders, the machine's verify-cost curve v(n), and this
session's measured runs as points, each Compare run's predicted speedup beside its measured one;
below, what more training data buys each feature drafter (the shipped scaling result)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import gradio as gr
import pandas as pd

from core.cost.curve import CostCurve
from core.cost.theory import tokens_per_verify, wallclock_speedup

from ...controls import PRECISIONS, number, precision
from ...guard import guarded
from ...i18n import t
from ...session import Session, ensure
from ...shared import MeasuredPoint
from ..page import Page, View
from ..stepper import StepperState
from .figures import worth_figure
from .scaling_figure import scaling_figure
from .state import WorthState

SCALING_RESULT = Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "gemma-cpu" / "scaling.json"
POINT_COLUMNS = ("col.run", "col.alpha", "col.k", "col.draft_cost", "col.c", "col.tau", "col.tau_model", "col.v",
                 "col.v_model", "col.speedup", "col.speedup_model", "col.off_by")


def _fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def points_table(points: list[MeasuredPoint], lang: str) -> pd.DataFrame:
    """Measured and modelled side by side; draft time / verify time is ``core.records.metrics.draft_cost``, as in Compare."""
    data = [
        [p.label, round(p.alpha, 3), p.k, _fmt(p.draft_cost, ".2f"), _fmt(p.c, ".3f"), round(p.tokens_per_verify, 2),
         round(tokens_per_verify(p.alpha, p.k), 2), _fmt(p.v, ".2f"), _fmt(p.v_model, ".2f"),
         _fmt(p.speedup, ".2f") + ("×" if p.speedup is not None else ""),
         _fmt(p.predicted, ".2f") + ("×" if p.predicted is not None else ""),
         _fmt(p.predicted / p.speedup if p.predicted and p.speedup else None, ".2f")]
        for p in points
    ]
    return pd.DataFrame(data, columns=[t(c, lang) for c in POINT_COLUMNS])


def readout(alpha: float, k: int, c: float, lang: str, curve: CostCurve | None = None,
            point: MeasuredPoint | None = None) -> str:
    """The model at the sliders, said to be the model's; below it, when there is one, the latest
    measured run: its measured speedup (the table's number) and its measured τ beside the model's."""
    v = curve.v(k + 1) if curve is not None else 1.0
    tau = tokens_per_verify(alpha, k)
    speedup = wallclock_speedup(alpha, k, c, v)
    verdict = t("worth.faster" if speedup > 1 else "worth.slower", lang)
    lines = [t("worth.readout", lang, alpha=alpha, k=k, c=c, n=k + 1, v=v, tau=tau, speedup=speedup, verdict=verdict)]
    if curve is None:
        lines.append(t("worth.no_curve", lang))
    if point is not None:
        lines.append(measured_line(point, lang))
    return "<br>".join(lines)


TAU_CLOSE = 0.05  # measured and modelled tau within 5%: no gap to explain


def measured_line(point: MeasuredPoint, lang: str) -> str:
    """The run's measured speedup (as the table shows it), or why it has none; its τ beside the
    independent-α model's, and why they differ."""
    if point.speedup is None:  # why there is no number is a sentence of its own, not words in the number's place
        headline = t("worth.measured_untimed", lang, label=point.label)
    else:
        headline = t("worth.measured_line", lang, label=point.label, speedup=f"{point.speedup:.2f}×")
    tau_model = tokens_per_verify(point.alpha, point.k)
    words = [headline,
             t("worth.tau_gap", lang, alpha=point.alpha, k=point.k, tau_model=tau_model, tau=point.tokens_per_verify)]
    if point.tree:
        words.append(t("worth.gap_tree", lang))
    elif abs(point.tokens_per_verify - tau_model) > TAU_CLOSE * tau_model:
        words.append(t("worth.gap_above" if point.tokens_per_verify > tau_model else "worth.gap_below", lang))
    return " ".join(words)


def missing_cost(points: list[MeasuredPoint], lang: str) -> str:
    """Why some runs show no c and v, and how to get them."""
    labels = list(dict.fromkeys(p.label for p in points if p.c is None))
    return t("worth.no_cost", lang, labels=", ".join(labels)) if labels else ""


def sliders(lang: str, alpha, k, c, target_precision=None) -> tuple[float, int, float, str]:
    """The three slider values and the precision, checked (a value from the API may be anything)."""
    return (number(alpha, "worth.alpha", lang, 0, 0.999), number(k, "worth.k", lang, 1, 16, integer=True),
            number(c, "worth.c", lang, 0, 10), precision(target_precision, lang))


@dataclass
class WorthView(View):
    sliders: list
    readout: gr.Markdown
    plot: gr.Plot
    table: gr.Dataframe
    scaling: gr.Plot

    @property
    def outputs(self) -> list:
        return [self.readout, self.plot, self.table, self.scaling]

    @property
    def language_inputs(self) -> list:
        return self.sliders  # /language checks them, as /worth_it does

    def render(self, session: Session, lang: str) -> dict:
        """The model at the sliders' values (kept in the view's state) beside the session's measured runs."""
        mine, points = session.of(WorthState), session.shared.points
        curves = session_curves(session)
        curve = curves.get(mine.precision)
        text = readout(mine.alpha, mine.k, mine.c, lang, curve, points[-1] if points else None)
        notes = [missing_cost(list(points), lang), precision_note(curves, mine.precision, lang)]
        return {self.readout: "<br>".join([text, *filter(None, notes)]),
                self.plot: worth_figure(mine.alpha, mine.k, mine.c, points, lang, curves, mine.precision),
                self.table: points_table(points, lang),
                self.scaling: scaling_figure(scaling_result(), lang)}

    def relabel(self, session: Session, lang: str, *values) -> dict:
        return self.move(session, lang, *sliders(lang, *values))

    def move(self, session: Session, lang: str, alpha: float, k: int, c: float,
             target_precision: str | None = None) -> dict:
        """Set the sliders' values and the precision (checked) in the view's state, and draw them."""
        mine = session.of(WorthState)
        mine.alpha, mine.k, mine.c = alpha, k, c
        mine.precision = target_precision or mine.precision
        return self.render(session, lang)


def session_curves(session: Session) -> dict[str, CostCurve]:
    """The verify-cost curves v(n) the model reads, by precision: those a Compare measured; in a session
    without one, the curve Step by step's run reads (this machine's cached curve of its target), so the
    two views never disagree about what a verify costs here."""
    curves = session.shared.curves
    run = session.of(StepperState).run
    if curves or run is None:
        return curves
    curve = run.curve()
    return {run.target.precision: curve} if curve is not None else {}


def precision_note(curves: dict[str, CostCurve], chosen: str, lang: str) -> str:
    """What the precision control needs: a Compare at the chosen precision, or at the other one to draw
    both curves; the two one-token forwards side by side once both are measured."""
    if curves and chosen not in curves:
        return t("worth.precision_missing", lang, precision=chosen)
    if len(curves) == 1:
        other = next(p for p in PRECISIONS if p not in curves)
        return t("worth.precision_other", lang, precision=other)
    if len(curves) > 1:
        return t("worth.precision_both", lang, forwards=", ".join(
            f"{p} {c.forward_s * 1000:.1f} ms" for p, c in curves.items()))
    return ""


@lru_cache(maxsize=1)
def scaling_result() -> dict | None:
    """The shipped data-scaling result (``python -m core.train.scaling``), if there is one."""
    return json.loads(SCALING_RESULT.read_text(encoding="utf-8")) if SCALING_RESULT.exists() else None


def build(page: Page) -> WorthView:
    """The view's layout and handlers; the curves redraw when a slider is released or the tab opens."""
    labels = page.labels
    labels.make(gr.Markdown, text="worth.intro")
    with gr.Row():
        alpha = labels.make(gr.Slider, 0, 0.99, value=0.6, step=0.01, elem_id="worth-alpha", label="worth.alpha")
        k = labels.make(gr.Slider, 1, 16, value=4, step=1, elem_id="worth-k", label="worth.k")
        c = labels.make(gr.Slider, 0, 1, value=0.05, step=0.01, elem_id="worth-c", label="worth.c", info="worth.c_info")
        target_precision = labels.make(gr.Radio, list(PRECISIONS), value=PRECISIONS[0], elem_id="worth-precision",
                                       label="ctl.precision", info="worth.precision_info")
    status = gr.Markdown(elem_id="worth-status", elem_classes=["sdl-status"])
    text = gr.Markdown(readout(0.6, 4, 0.05, labels.lang), elem_id="worth-readout")
    plot = labels.make(gr.Plot, elem_id="worth-plot", label="panel.worth")
    use_last = labels.make(gr.Button, elem_id="worth-use-last", text="btn.use_last")
    table = labels.make(gr.Dataframe, points_table([], labels.lang), interactive=False, elem_id="worth-table",
                        wrap=True, label="panel.worth_points")  # 12 columns fit the page, as Compare's
    scaling = labels.make(gr.Plot, scaling_figure(scaling_result(), labels.lang), elem_id="worth-scaling",
                          label="panel.scaling")
    view = WorthView([alpha, k, c, target_precision], text, plot, table, scaling)
    wire(view, use_last, status, page)
    return view


def wire(view: WorthView, use_last: gr.Button, status: gr.Markdown, page: Page) -> None:
    state, lang = page.state, page.lang
    alpha, k, c, target_precision = view.sliders

    @guarded(status)
    def on_change(lang_value, session, alpha_value, k_value, c_value, precision_value=None):
        session = ensure(session)
        return {state: session, status: "",
                **view.relabel(session, lang_value, alpha_value, k_value, c_value, precision_value)}

    @guarded(status)
    def on_use_last(lang_value, session):
        session = ensure(session)
        points = session.shared.points
        if not points:
            return {status: t("worth.no_runs", lang_value)}
        p = points[-1]
        a, cc = min(round(p.alpha, 2), 0.99), min(round(p.c or 0.0, 2), 1.0)
        return {state: session, status: "", alpha: a, k: p.k, c: cc, **view.move(session, lang_value, a, p.k, cc)}

    outputs = [state, status, alpha, k, c, *view.outputs]
    gr.on([alpha.release, k.release, c.release, target_precision.change, page.tab.select], on_change,
          [lang, state, alpha, k, c, target_precision], outputs,
          api_name="worth_it", preprocess=False)  # on_change checks every value: a bad one is a message
    use_last.click(on_use_last, [lang, state], outputs, api_name="worth_use_last")
