"""The page: a header with the language toggle, one tab per view of ``VIEWS``, the glossary of its
symbols under them. Per-session data lives in one ``gr.State`` (``app.session.Session``); models are
cached by the engine across sessions."""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import gradio as gr

from core.common.limits import MAX_TRACE_BYTES
from core.models import gemma
from core.models.loading import PRESETS

from . import memory
from .controls import ModelPolicy, MonitorPolicy
from .guard import guarded
from .i18n import DEFAULT_LANG, LANG_CHOICES, t
from .labels import Labels
from .page_limits import RunGate, ServerLimits
from .phone import PHONE_CSS_PATH, cue_css
from .session import SESSIONS, close_session, ensure, forget_idle
from .views import batch_sizes, classroom, compare, glossary, production, replay, serving_engine, stepper, worth
from .views.page import Page, View

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


@dataclass(frozen=True)
class Tab:
    id: str  # the tab's id (its element: ``tab-<id>``)
    label: str  # the key of its label in ``app.i18n``
    build: Callable[[Page], View]


# The page, tab by tab: a new view is one line here (and its folder under app/views/).
VIEWS = (
    Tab("step", "tab.step", stepper.build),
    Tab("compare", "tab.compare", compare.build),
    Tab("classroom", "tab.classroom", classroom.build),
    Tab("worth", "tab.worth", worth.build),
    Tab("replay", "tab.replay", replay.build),
    Tab("batch", "tab.batch", batch_sizes.build),
    Tab("monitor", "tab.monitor", production.build),
    Tab("serving", "tab.serving", serving_engine.build),
)


def build_app(default_preset: str = "tiny", lang: str = DEFAULT_LANG, policy: ModelPolicy = ModelPolicy(),
              monitor_policy: MonitorPolicy = MonitorPolicy(), limits: ServerLimits = ServerLimits()) -> gr.Blocks:
    """Build the Blocks app; nothing is loaded until a run asks for a model. ``policy``: whether
    visitors may name their own target / draft models, and whether model code may run;
    ``monitor_policy``: the production monitor's default URL and whether it may poll other machines;
    ``limits``: runs at once, the work per request, the queue (``app.page_limits``)."""
    labels = Labels(lang)
    with gr.Blocks(title=t("app.title", lang)) as demo:
        # an idle session is closed after the time-to-live (app.session): runs stopped, memory returned
        state = gr.State(None, time_to_live=limits.session_ttl_s, delete_callback=close_session)
        with gr.Row(equal_height=True):
            labels.make(gr.Markdown, text="app.header", elem_id="app-header")
            lang_radio = gr.Radio(LANG_CHOICES, value=lang, show_label=False, elem_id="lang-toggle",
                                  container=False, scale=0, min_width=200)
        page = Page(labels, state, lang_radio, preset_choices(default_preset), default_preset, policy, monitor_policy,
                    RunGate(limits))
        views = build_tabs(page)
        symbols = glossary.build(page)  # under every tab: what each symbol on the page means
        labels.make(gr.Markdown, text="app.footer", elem_id="app-footer")
        lang_radio.change(None, lang_radio, js=GRADIO_LOCALE_JS)
        # a refused switch (a bad slider value sent to /language) is said in Step by step's status line
        wire_language(page, [*views.values(), symbols], views["step"].status)
    return demo


def build_tabs(page: Page) -> dict[str, View]:
    """One tab per entry of ``VIEWS``, in order; the built views by tab id."""
    views = {}
    with gr.Tabs() as tabs:
        for tab in VIEWS:
            with page.labels.make(gr.Tab, label=tab.label, id=tab.id, elem_id=f"tab-{tab.id}") as component:
                views[tab.id] = tab.build(replace(page, tab=component))
    tabs.select(None, js=REDRAW_PLOTS_JS)  # plots drawn while their tab was hidden need the real width
    return views


def wire_language(page: Page, views: list[View], status: gr.Markdown) -> None:
    """The language toggle redraws every view in the new language (each with its own inputs, if any)."""
    state, labels = page.state, page.labels

    @guarded(status)
    def on_language(lang_value, session, *values):
        session = ensure(session)
        session.shared.lang = lang_value  # a run going on (Play, Compare) draws its next steps in it
        shown, rest = {}, list(values)
        for view in views:
            mine, rest = rest[:len(view.language_inputs)], rest[len(view.language_inputs):]
            shown.update(view.relabel(session, lang_value, *mine))
        return {state: session, **labels.updates(lang_value, shown)}

    inputs = [c for view in views for c in view.language_inputs]
    outputs = list(dict.fromkeys([state, status, *labels.components, *(c for v in views for c in v.outputs)]))
    page.lang.change(on_language, [page.lang, state, *inputs], outputs, api_name="language", preprocess=False)


def launch(demo: gr.Blocks, host: str, port: int, limits: ServerLimits = ServerLimits(),
           routes: list | None = None) -> None:
    """Serve ``demo``; at most ``limits.queue_size`` requests wait, the rest are refused at once.
    ``routes``: extra Starlette routes served beside the page (``/metrics``)."""
    memory.limit_arenas()  # before Gradio's worker threads start (app.memory)
    SESSIONS.configure(limits.max_sessions, limits.session_ttl_s)
    threading.Thread(target=_forget_idle_sessions, args=(demo, limits.session_ttl_s), daemon=True).start()
    demo.queue(default_concurrency_limit=2, max_size=limits.queue_size).launch(
        state_session_capacity=SESSION_CAPACITY_FACTOR * limits.max_sessions,
        server_name=host, server_port=port, css_paths=[CSS_PATH, PHONE_CSS_PATH], css=cue_css(), js=JS_PATH.read_text(encoding="utf-8"), max_file_size=MAX_TRACE_BYTES,
        footer_links=["api", "settings"], show_error=False, app_kwargs={"routes": list(routes or [])},
        _frontend=False,  # no self-check: its 3 s request to localhost times out on a busy machine and aborts the start
    )


log = logging.getLogger("app")
SESSION_CAPACITY_FACTOR = 4  # Gradio keeps this many times the live-session cap (page loads without a state
# included) before it drops the oldest on its own, which it does without closing them
FORGET_EVERY_S = 5.0


def _forget_idle_sessions(demo: gr.Blocks, ttl_s: float) -> None:
    """Every few seconds, drop what Gradio keeps of sessions its time-to-live has closed (``app.session.forget_idle``)."""
    while True:
        time.sleep(FORGET_EVERY_S)
        holder = getattr(demo, "state_holder", None)  # set once the server app exists
        try:
            if holder is not None:
                forget_idle(holder, ttl_s)
        except Exception:  # it reads Gradio's own bookkeeping: a change there must not end the sweeping
            log.exception("dropping idle sessions failed")
