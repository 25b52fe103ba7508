"""The page: a header with the language toggle, then one tab per view. Per-session data lives in
one ``gr.State`` (``app.session.Session``); models are cached by the engine across sessions."""
from __future__ import annotations

from pathlib import Path

import gradio as gr

from core.common.limits import MAX_TRACE_BYTES
from core.models import gemma
from core.models.loading import PRESETS, resolve_preset

from . import memory
from .controls import ModelPolicy
from .guard import guarded
from .i18n import DEFAULT_LANG, LANG_CHOICES, t
from .labels import Labels
from .page_limits import RunGate, ServerLimits
from .session import close_session, ensure
from .views import batch, classroom, compare, monitor, replay, serving, stepper, worth
from .views.monitor import MonitorPolicy
from .views.page import Page
from .views.worth import sliders

CSS_PATH = Path(__file__).with_name("page.css")
JS_PATH = Path(__file__).with_name("page.js")  # run once when the page loads
REDRAW_PLOTS_JS = "() => { setTimeout(() => window.dispatchEvent(new Event('resize')), 60); }"
GRADIO_LOCALE_JS = "(lang) => window.sdlGradioLocale(lang)"  # page.js: Gradio's own words in the page's language


def preset_choices(default_preset: str) -> list[str]:
    """The built-in presets (``gemma-270m`` only where installed), plus the one given on the command
    line if it is a folder or hub id."""
    names = [name for name in PRESETS if name != "gemma-270m" or gemma.available()]
    if default_preset not in names:
        names.append(default_preset)
    return names


def build_app(default_preset: str = "tiny", lang: str = DEFAULT_LANG, policy: ModelPolicy = ModelPolicy(),
              monitor_policy: MonitorPolicy = MonitorPolicy(), limits: ServerLimits = ServerLimits()) -> gr.Blocks:
    """Build the Blocks app; nothing is loaded until a run asks for a model. ``policy``: whether
    visitors may name their own target / draft models, and whether model code may run;
    ``monitor_policy``: the production monitor's default URL and whether it may poll other machines;
    ``limits``: runs at once, the work per request, the queue (``app.page_limits``)."""
    presets = preset_choices(default_preset)
    gate = RunGate(limits)
    drafter = resolve_preset(default_preset).default_drafter
    labels = Labels(lang)
    with gr.Blocks(title=t("app.title", lang)) as demo:
        state = gr.State(None, delete_callback=close_session)
        with gr.Row(equal_height=True):
            labels.make(gr.Markdown, text="app.header", elem_id="app-header")
            lang_radio = gr.Radio(LANG_CHOICES, value=lang, show_label=False, elem_id="lang-toggle",
                                  container=False, scale=0, min_width=200)
        page = Page(labels, state, lang_radio, presets, default_preset, policy, gate)
        with gr.Tabs() as tabs:
            with labels.make(gr.Tab, label="tab.step", id="step", elem_id="tab-step"):
                step_view = stepper.build(page, drafter)
            with labels.make(gr.Tab, label="tab.compare", id="compare", elem_id="tab-compare"):
                compare_view = compare.build(page)
            with labels.make(gr.Tab, label="tab.classroom", id="classroom", elem_id="tab-classroom"):
                class_view = classroom.build(page)
            with labels.make(gr.Tab, label="tab.worth", id="worth", elem_id="tab-worth") as worth_tab:
                worth_view = worth.build(labels, state, lang_radio, worth_tab)
            with labels.make(gr.Tab, label="tab.replay", id="replay", elem_id="tab-replay"):
                replay_view = replay.build(labels, state, lang_radio, default_preset)
            with labels.make(gr.Tab, label="tab.batch", id="batch", elem_id="tab-batch"):
                batch_view = batch.build(page)
            with labels.make(gr.Tab, label="tab.monitor", id="monitor", elem_id="tab-monitor"):
                monitor_view = monitor.build(labels, state, lang_radio, monitor_policy)
            with labels.make(gr.Tab, label="tab.serving", id="serving", elem_id="tab-serving"):
                serving_view = serving.build(page)
        labels.make(gr.Markdown, text="app.footer", elem_id="app-footer")

        tabs.select(None, js=REDRAW_PLOTS_JS)  # plots drawn while their tab was hidden need the real width
        lang_radio.change(None, lang_radio, js=GRADIO_LOCALE_JS)
        status = step_view.status

        @guarded(status)
        def on_language(lang_value, session, alpha, k, c):
            session = ensure(session)
            session.lang = lang_value  # a run going on (Play, Compare) draws its next steps in it
            values = {
                **step_view.render(session, lang_value),
                **compare_view.render(session, lang_value),
                **class_view.render(session, lang_value),
                **worth_view.render(session, lang_value, *sliders(lang_value, alpha, k, c)),
                **replay_view.render(session, lang_value),
                **batch_view.render(session, lang_value),
                **monitor_view.render(session, lang_value),
                **serving_view.render(session, lang_value),
            }
            return {state: session, **labels.updates(lang_value, values)}

        views = (step_view, compare_view, class_view, worth_view, replay_view, batch_view, monitor_view, serving_view)
        outputs = list(dict.fromkeys([state, status, *labels.components, *(c for v in views for c in v.outputs)]))
        lang_radio.change(on_language, [lang_radio, state, *worth_view.sliders], outputs, api_name="language",
                          preprocess=False)
    return demo


def launch(demo: gr.Blocks, host: str, port: int, limits: ServerLimits = ServerLimits(),
           routes: list | None = None) -> None:
    """Serve ``demo``; at most ``limits.queue_size`` requests wait, the rest are refused at once.
    ``routes``: extra Starlette routes served beside the page (``/metrics``)."""
    memory.limit_arenas()  # before Gradio's worker threads start (app.memory)
    demo.queue(default_concurrency_limit=2, max_size=limits.queue_size).launch(
        server_name=host, server_port=port, css_paths=[CSS_PATH], js=JS_PATH.read_text(encoding="utf-8"), max_file_size=MAX_TRACE_BYTES,
        footer_links=["api", "settings"], show_error=False, app_kwargs={"routes": list(routes or [])},
        _frontend=False,  # no self-check: its 3 s request to localhost times out on a busy machine and aborts the start
    )
