"""Production monitor: poll a Prometheus endpoint (a vLLM server, or this lab's own /metrics) and
plot, per window, what speculation is doing there and whether it pays."""
from __future__ import annotations

import time
from dataclasses import dataclass

import gradio as gr

from core import UserError
from core.serving.monitor import NotMetrics, RemoteTarget, Watch, fetch, parse, verdict

from ...controls import MonitorPolicy, number
from ...figures import empty
from ...guard import error_markdown, guarded
from ...i18n import t
from ...session import Session, ensure
from ..page import Page, View
from .figures import monitor_figure
from .state import DEFAULT_COST, MonitorState

DEFAULT_INTERVAL_S = 2.0


def read(url: str, policy: MonitorPolicy, lang: str):
    """One scrape of ``url``; a refused target gets the page's language."""
    try:
        return parse(fetch(url, policy.allow_remote), time.monotonic())
    except RemoteTarget as e:
        raise UserError(t("err.monitor_remote", lang, host=e.host, addresses=", ".join(e.addresses))) from None
    except NotMetrics as e:
        raise UserError(t("err.monitor_not_metrics", lang, url=url, line=e.line)) from None


def verdict_line(watch: Watch, cost_estimate: float, lang: str) -> str:
    if not watch.windows:
        return ""
    w = watch.windows[-1]
    v = verdict(w, cost_estimate)
    common = dict(s=w.seconds, r=w.running, w=w.waiting)
    if v.paying is None:
        return t("mon.verdict_idle", lang, **common)
    how = t("mon.measured" if v.measured else "mon.estimated", lang)
    # a mark drawn by page.css, not an emoji (a box where no emoji font is installed)
    mark = f'<span class="sdl-mark {"sdl-mark-yes" if v.paying else "sdl-mark-no"}"></span>'
    return mark + t("mon.verdict_pays" if v.paying else "mon.verdict_not", lang, tau=v.tau, be=v.break_even,
                    cost=v.cost, how=how, acc=w.accepted_per_s, dr=w.drafted_per_s, **common)


def summary(watch: Watch, lang: str) -> str:
    o = watch.overall
    tau = "—" if o.tau is None else f"{o.tau:.3f}"
    per_position = " ".join(f"{p:.3f}" for p in o.per_position) or "—"
    return t("mon.summary", lang, s=o.seconds, tau=tau, drafts=o.totals.drafts, draft_tokens=o.totals.draft_tokens,
             accepted=o.totals.accepted_tokens, per_position=per_position)


@dataclass
class MonitorView(View):
    status: gr.Markdown
    verdict: gr.Markdown
    summary: gr.Markdown
    plot: gr.Plot

    @property
    def outputs(self) -> list:
        return [self.verdict, self.summary, self.plot]

    def render(self, session: Session, lang: str) -> dict:
        mine = session.of(MonitorState)
        watch = mine.watch
        if watch is None:
            return {self.verdict: "", self.summary: "", self.plot: empty(t("mon.hint", lang))}
        return {self.verdict: verdict_line(watch, mine.cost, lang), self.summary: summary(watch, lang),
                self.plot: monitor_figure(watch, lang)}


@dataclass
class MonitorControls:
    url: gr.Textbox
    interval: gr.Number
    cost: gr.Number
    start: gr.Button
    stop: gr.Button


def build_controls(page: Page) -> MonitorControls:
    labels = page.labels
    labels(gr.Markdown(labels.text("mon.intro")), value="mon.intro")
    with gr.Row():
        url = labels(gr.Textbox(page.monitor_policy.default_url, label=labels.text("mon.url"), scale=3,
                                elem_id="mon-url"), label="mon.url")
        interval = labels(gr.Number(DEFAULT_INTERVAL_S, label=labels.text("mon.interval"), elem_id="mon-interval",
                                    scale=1), label="mon.interval")
        cost = labels(gr.Number(DEFAULT_COST, label=labels.text("mon.cost"), info=labels.text("mon.cost_info"),
                                elem_id="mon-cost", scale=1), label="mon.cost", info="mon.cost_info")
    with gr.Row():
        start_btn = labels(gr.Button(labels.text("mon.start"), variant="primary", elem_id="mon-start"),
                           value="mon.start")
        stop_btn = labels(gr.Button(labels.text("mon.stop"), elem_id="mon-stop"), value="mon.stop")
    return MonitorControls(url, interval, cost, start_btn, stop_btn)


def build(page: Page) -> MonitorView:
    ctl = build_controls(page)
    status = gr.Markdown(elem_id="mon-status", elem_classes=["sdl-status"])
    verdict_md = gr.Markdown(elem_id="mon-verdict")
    summary_md = gr.Markdown(elem_id="mon-summary")
    plot = page.labels(gr.Plot(label=page.labels.text("tab.monitor"), elem_id="mon-plot"), label="tab.monitor")
    timer = gr.Timer(DEFAULT_INTERVAL_S, active=False)
    view = MonitorView(status, verdict_md, summary_md, plot)
    state, lang = page.state, page.lang
    h = handlers(view, timer, page)
    outputs = [state, status, timer, *view.outputs]
    ctl.start.click(h["start"], [lang, state, ctl.url, ctl.interval, ctl.cost], outputs, api_name="monitor_start",
                    concurrency_limit=4)
    timer.tick(h["tick"], [lang, state], outputs, api_name="monitor_tick", concurrency_limit=4,
               show_progress="hidden")
    ctl.stop.click(h["stop"], [lang, state], outputs, api_name="monitor_stop", concurrency_limit=None)
    return view


def handlers(view: MonitorView, timer: gr.Timer, page: Page) -> dict:
    """start (the first reading of an endpoint), tick (the next), stop."""
    state, status, policy = page.state, view.status, page.monitor_policy

    @guarded(status)
    def on_start(lang_value, session, url_value, interval_value, cost_value):
        session = ensure(session)
        mine = session.of(MonitorState)
        every = number(interval_value, "mon.interval", lang_value, 0.5, 60)
        mine.cost = number(cost_value, "mon.cost", lang_value, 0, 10)
        target = str(url_value or "").strip()
        mine.watch = None  # a failed start leaves no plot or verdict of the last endpoint behind
        mine.starts += 1  # a tick still reading the last endpoint then changes nothing (on_tick)
        try:
            first = read(target, policy, lang_value)
        except UserError as e:
            return {state: session, status: error_markdown(str(e), lang_value), timer: gr.Timer(active=False),
                    **view.render(session, lang_value)}
        mine.watch = Watch(url=target, first=first, last=first)
        note = t("mon.started", lang_value, url=target, every=every)
        if not first.spec_decode:
            note += "<br>" + t("mon.no_spec", lang_value, url=target)
        return {state: session, status: note, timer: gr.Timer(every, active=True), **view.render(session, lang_value)}

    def on_tick(lang_value, session):
        session = ensure(session)
        mine = session.of(MonitorState)
        watch, run = mine.watch, mine.starts
        if watch is None:
            return {timer: gr.Timer(active=False)}
        try:
            reading = read(watch.url, policy, lang_value)
        except UserError as e:  # the server went away: say so and keep polling
            reading = e
        if mine.starts != run:  # Start or Stop was pressed while this tick read: theirs is the news
            return {status: gr.skip()}
        if isinstance(reading, UserError):
            return {status: error_markdown(str(reading), lang_value)}
        watch.add(reading)
        return {state: session, status: "", **view.render(session, lang_value)}

    @guarded(status)
    def on_stop(lang_value, session):
        session = ensure(session)
        session.of(MonitorState).starts += 1
        return {state: session, status: t("mon.stopped", lang_value), timer: gr.Timer(active=False)}

    return {"start": on_start, "tick": on_tick, "stop": on_stop}
