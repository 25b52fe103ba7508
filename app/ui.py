"""The page: a header with the language toggle, then one tab per view. Per-session data lives in
one ``gr.State`` (``app.session.Session``); models are cached by the engine across sessions."""
from __future__ import annotations

from pathlib import Path

import gradio as gr

from core import gemma
from core.models import PRESETS, resolve_preset
from core.trace_schema import MAX_TRACE_BYTES

from .controls import ModelPolicy
from .guard import guarded
from .i18n import DEFAULT_LANG, LANG_CHOICES, t
from . import memory
from .labels import Labels
from .limits import RunGate, ServerLimits
from .session import close_session, ensure
from .views import batch, classroom, compare, replay, stepper, worth
from .views.worth import sliders

CSS_PATH = Path(__file__).with_name("page.css")
MAX_UPLOAD = MAX_TRACE_BYTES  # the largest upload: a trace (bench results are refused above 5 MB)
REDRAW_PLOTS_JS = "() => { setTimeout(() => window.dispatchEvent(new Event('resize')), 60); }"


def preset_choices(default_preset: str) -> list[str]:
    """The built-in presets (``gemma-270m`` only where installed), plus the one given on the command
    line if it is a folder or hub id."""
    names = [name for name in PRESETS if name != "gemma-270m" or gemma.available()]
    if default_preset not in names:
        names.append(default_preset)
    return names


def build_app(default_preset: str = "tiny", lang: str = DEFAULT_LANG, policy: ModelPolicy = ModelPolicy(),
              limits: ServerLimits = ServerLimits()) -> gr.Blocks:
    """Build the Blocks app; nothing is loaded until a run asks for a model. ``policy``: whether
    visitors may name their own target / draft models, and whether model code may run; ``limits``:
    runs at once, the work per request, the queue (``app.limits``)."""
    presets = preset_choices(default_preset)
    gate = RunGate(limits)
    drafter = "draft" if resolve_preset(default_preset).draft else "ngram"  # a bare model folder has no draft
    if default_preset == "gemma-270m":
        drafter = "eagle3"  # a learned drafter with a dynamic tree to watch (numbers: docs/gemma.md)
    labels = Labels(lang)
    with gr.Blocks(title=t("app.title", lang)) as demo:
        state = gr.State(None, delete_callback=close_session)
        with gr.Row(equal_height=True):
            labels(gr.Markdown(t("app.header", lang), elem_id="app-header"), value="app.header")
            lang_radio = gr.Radio(LANG_CHOICES, value=lang, show_label=False, elem_id="lang-toggle",
                                  container=False, scale=0, min_width=200)
        with gr.Tabs() as tabs:
            with labels(gr.Tab(t("tab.step", lang), id="step", elem_id="tab-step"), label="tab.step"):
                step_view = stepper.build(labels, state, lang_radio, presets, default_preset, drafter,
                                          policy, gate)
            with labels(gr.Tab(t("tab.compare", lang), id="compare", elem_id="tab-compare"), label="tab.compare"):
                compare_view = compare.build(labels, state, lang_radio, presets, default_preset, policy,
                                             gate)
            with labels(gr.Tab(t("tab.classroom", lang), id="classroom", elem_id="tab-classroom"),
                        label="tab.classroom"):
                class_view = classroom.build(labels, state, lang_radio, presets, default_preset, gate)
            with labels(gr.Tab(t("tab.worth", lang), id="worth", elem_id="tab-worth"), label="tab.worth") as worth_tab:
                worth_view = worth.build(labels, state, lang_radio, worth_tab)
            with labels(gr.Tab(t("tab.replay", lang), id="replay", elem_id="tab-replay"), label="tab.replay"):
                replay_view = replay.build(labels, state, lang_radio)
            with labels(gr.Tab(t("tab.batch", lang), id="batch", elem_id="tab-batch"), label="tab.batch"):
                batch_view = batch.build(labels, state, lang_radio, presets, default_preset, gate)
        labels(gr.Markdown(t("app.footer", lang), elem_id="app-footer"), value="app.footer")

        tabs.select(None, js=REDRAW_PLOTS_JS)  # plots drawn while their tab was hidden need the real width
        status = step_view.status

        @guarded(status)
        def on_language(lang_value, session, alpha, k, c):
            session = ensure(session)
            values = {
                **step_view.render(session, lang_value),
                **compare_view.render(session, lang_value),
                **class_view.render(session, lang_value),
                **worth_view.render(session, lang_value, *sliders(lang_value, alpha, k, c)),
                **replay_view.render(session, lang_value),
                **batch_view.render(session, lang_value),
            }
            return {state: session, **labels.updates(lang_value, values)}

        views = (step_view, compare_view, class_view, worth_view, replay_view, batch_view)
        outputs = list(dict.fromkeys([state, status, *labels.components, *(c for v in views for c in v.outputs)]))
        lang_radio.change(on_language, [lang_radio, state, *worth_view.sliders], outputs, api_name="language",
                          preprocess=False)
    return demo


def launch(demo: gr.Blocks, host: str, port: int, limits: ServerLimits = ServerLimits()) -> None:
    """Serve ``demo``; at most ``limits.queue_size`` requests wait, the rest are refused at once."""
    memory.limit_arenas()  # before Gradio's worker threads start (app.memory)
    demo.queue(default_concurrency_limit=2, max_size=limits.queue_size).launch(
        server_name=host, server_port=port, css_paths=[CSS_PATH], max_file_size=MAX_UPLOAD,
        footer_links=["api", "settings"], show_error=False,
    )
