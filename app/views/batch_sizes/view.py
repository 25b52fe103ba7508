"""Batch size: each drafter's throughput against batch size, where speculation stops paying, and
the target's forward latency against the tokens in one forward -- from a bench result (uploaded,
or the project's CPU result) or from a small sweep run here."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from core import UserError
from core.models.loading import pick_device
from core.studies.batch_size import VLLM, baseline_of, parse_batch_sizes, read_sweep_result

from ...controls import PRECISIONS, SWEEP_DEFAULT, number, precision
from ...guard import guarded
from ...i18n import t
from ...session import Session, ensure
from ..page import Page, View
from ..upload import refusal
from .figures import batch_figure
from .state import BatchState
from .sweeps import EXAMPLE_RESULTS, MAX_LIVE_NEW_TOKENS, SWEEP_DRAFTERS, live_sweep


def verdict_markdown(result: dict | None, lang: str) -> str:
    """Where each drafter stops paying, and what the numbers were measured on."""
    if not result or not result.get("batch_sweep"):
        return ""
    rows = result["batch_sweep"]
    speed = {(r["batch"], r["drafter"]): r["tokens_per_s"] for r in rows}
    device = result.get("hardware") or result.get("device", "–")
    lines = [t("batch.source", lang, preset=result.get("preset", "–"), device=device,
               tokens=result.get("max_new_tokens", "–"), threads=result.get("torch_threads", "–"),
               precision=(result.get("target_precisions") or ["float32"])[0])]
    for name, batch in result["batch_crossover"].items():
        label = t("batch.peer_series", lang, method=name.removeprefix(VLLM)) if name.startswith(VLLM) else name
        if batch is None:
            lines.append(t("batch.verdict_pays", lang, drafter=label))
        else:
            lines.append(t("batch.verdict_stops", lang, drafter=label, batch=batch,
                           speedup=speed[batch, name] / speed[batch, baseline_of(name)]))
    if any(name.startswith(VLLM) for name in result["batch_crossover"]):
        lines.append(t("batch.peer_note", lang))
    return "\n\n".join(lines)


@dataclass
class BatchView(View):
    verdict: gr.Markdown
    plot: gr.Plot

    @property
    def outputs(self) -> list:
        return [self.verdict, self.plot]

    def render(self, session: Session, lang: str) -> dict:
        result = session.of(BatchState).result
        return {self.verdict: verdict_markdown(result, lang), self.plot: batch_figure(result, lang)}


@dataclass
class BatchControls:
    """The file box, the example button, and the live sweep's settings and button."""

    upload: gr.File
    example: gr.Button
    preset: gr.Dropdown
    drafters: gr.CheckboxGroup
    sizes: gr.Textbox
    max_new: gr.Slider
    precision: gr.Radio
    run: gr.Button


def build_controls(page: Page) -> BatchControls:
    labels = page.labels
    labels.make(gr.Markdown, text="batch.intro")
    with gr.Row():
        upload = labels.make(gr.File, file_types=[".json"], elem_id="batch-upload", scale=3, label="batch.upload")
        example = labels.make(gr.Button, elem_id="batch-example", scale=1, text="btn.batch_example")
    with gr.Row():
        preset = labels.make(gr.Dropdown, page.presets, value=page.default_preset, scale=1, label="ctl.preset")
        drafters = labels.make(gr.CheckboxGroup, list(SWEEP_DRAFTERS), value=SWEEP_DEFAULT, scale=2,
                               elem_id="batch-drafters", label="batch.drafters")
        sizes = labels.make(gr.Textbox, "1,2,4", elem_id="batch-sizes", scale=1, label="batch.sizes")
        max_new = labels.make(gr.Slider, 4, MAX_LIVE_NEW_TOKENS, value=16, step=1, elem_id="batch-max-new", scale=1,
                              label="batch.max_new")
        precision_radio = labels.make(gr.Radio, list(PRECISIONS), value=PRECISIONS[0], elem_id="batch-precision",
                                      scale=1, label="ctl.precision", info="ctl.precision_info")
        run = labels.make(gr.Button, variant="primary", elem_id="batch-run", scale=1, text="btn.batch_run")
    return BatchControls(upload, example, preset, drafters, sizes, max_new, precision_radio, run)


def build(page: Page) -> BatchView:
    ctl = build_controls(page)
    status = gr.Markdown(elem_id="batch-status", elem_classes=["sdl-status"])
    refusal(ctl.upload, page.lang, status)
    verdict = gr.Markdown(elem_id="batch-verdict")
    plot = page.labels.make(gr.Plot, batch_figure(None, page.labels.lang), elem_id="batch-plot", label="panel.batch")
    view = BatchView(verdict, plot)
    wire(view, ctl, status, page)
    return view


def wire(view: BatchView, ctl: BatchControls, status: gr.Markdown, page: Page) -> None:
    state, lang = page.state, page.lang
    h = {name: guarded(status)(handler) for name, handler in handlers(view, status, page).items()}
    outputs = [state, status, *view.outputs]
    ctl.upload.upload(h["upload"], [lang, state, ctl.upload], outputs, api_name="batch_upload")
    ctl.upload.clear(h["upload"], [lang, state, ctl.upload], outputs, api_visibility="private")
    ctl.example.click(h["example"], [lang, state, ctl.preset], outputs, api_name="batch_example")
    ctl.run.click(h["run"], [lang, state, ctl.preset, ctl.drafters, ctl.sizes, ctl.max_new, ctl.precision], outputs,
                  api_name="batch_sweep", concurrency_id="decode", concurrency_limit=page.gate.handlers,
                  preprocess=False)


def handlers(view: BatchView, status: gr.Markdown, page: Page) -> dict:
    """upload (a bench result file), example (the shipped sweep), run (a live sweep)."""
    state, presets, gate = page.state, page.presets, page.gate

    def show(session: Session, result: dict | None, lang_value: str, message: str = "") -> dict:
        session.of(BatchState).result = result
        return {state: session, status: message, **view.render(session, lang_value)}

    def on_upload(lang_value, session, path):
        session = ensure(session)
        return show(session, read_sweep_result(path) if path else None, lang_value)

    def on_example(lang_value, session, preset_value="tiny"):
        """The shipped sweep of the chosen preset (tiny's for a preset without one)."""
        path = EXAMPLE_RESULTS.get(preset_value, EXAMPLE_RESULTS["tiny"])
        return show(ensure(session), read_sweep_result(path), lang_value)

    def on_run(lang_value, session, preset_value, drafter_values, sizes_value, max_new_value, precision_value=None):
        session = ensure(session)
        if not isinstance(preset_value, str) or preset_value not in presets:
            raise UserError(t("err.choice", lang_value, name=t("ctl.preset", lang_value), value=preset_value,
                              options=", ".join(presets)))
        chosen = [d for d in SWEEP_DRAFTERS if isinstance(drafter_values, list) and d in drafter_values]
        if not chosen:
            raise UserError(t("err.no_drafters", lang_value))
        batch_sizes = parse_batch_sizes(str(sizes_value), pick_device(None))
        new_tokens = number(max_new_value, "batch.max_new", lang_value, 4, MAX_LIVE_NEW_TOKENS, integer=True)
        target_precision = precision(precision_value, lang_value)
        with gate.slot(session, lang_value, long=True):
            yield {state: session, status: t("batch.progress", lang_value, batch=batch_sizes[0], done=0,
                                             total=len(batch_sizes))}
            for done, (b, result) in enumerate(live_sweep(preset_value, chosen, batch_sizes, new_tokens, target_precision), start=1):
                message = (t("batch.done", lang_value, n=done) if done == len(batch_sizes) else
                           t("batch.progress", lang_value, batch=batch_sizes[done], done=done,
                             total=len(batch_sizes)))
                yield show(session, result, lang_value, message)

    return {"upload": on_upload, "example": on_example, "run": on_run}
