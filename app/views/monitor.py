"""Production monitor: poll a Prometheus endpoint (a vLLM server, or this lab's own /metrics) and
plot, per window, what speculation is doing there and whether it pays."""
from __future__ import annotations

import time
from dataclasses import dataclass

import gradio as gr

from core import UserError
from core.serving.monitor import NotMetrics, RemoteTarget, Watch, fetch, is_loopback_host, parse, verdict

from ..controls import number
from ..figures import empty, monitor_figure
from ..guard import error_markdown, guarded
from ..i18n import t
from ..labels import Labels
from ..session import Session, ensure

DEFAULT_INTERVAL_S = 2.0
DEFAULT_COST = 0.2


@dataclass(frozen=True)
class MonitorPolicy:
    """Fixed when the server starts (app.py): the URL the field starts with, and whether targets
    off this machine may be polled (off by default: no request forgery through a public page)."""

    default_url: str = "http://127.0.0.1:7860/metrics"
    allow_remote: bool = False

    @classmethod
    def for_server(cls, host: str, port: int, allow_remote: bool = False) -> "MonitorPolicy":
        """The lab's own /metrics, reached over loopback when the server listens there or everywhere."""
        own = "127.0.0.1" if is_loopback_host(host) or host in ("0.0.0.0", "::", "") else host
        own = f"[{own}]" if ":" in own else own  # an IPv6 address: http://[2001:db8::1]:7860/metrics
        return cls(default_url=f"http://{own}:{port}/metrics", allow_remote=allow_remote)


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
class MonitorView:
    status: gr.Markdown
    verdict: gr.Markdown
    summary: gr.Markdown
    plot: gr.Plot

    @property
    def outputs(self) -> list:
        return [self.verdict, self.summary, self.plot]

    def render(self, session: Session, lang: str) -> dict:
        watch = session.monitor
        if watch is None:
            return {self.verdict: "", self.summary: "", self.plot: empty(t("mon.hint", lang))}
        return {self.verdict: verdict_line(watch, session.monitor_cost, lang), self.summary: summary(watch, lang),
                self.plot: monitor_figure(watch, lang)}


def build(labels: Labels, state: gr.State, lang: gr.Radio, policy: MonitorPolicy) -> MonitorView:
    labels(gr.Markdown(labels.text("mon.intro")), value="mon.intro")
    with gr.Row():
        url = labels(gr.Textbox(policy.default_url, label=labels.text("mon.url"), scale=3, elem_id="mon-url"),
                     label="mon.url")
        interval = labels(gr.Number(DEFAULT_INTERVAL_S, label=labels.text("mon.interval"), elem_id="mon-interval",
                                    scale=1), label="mon.interval")
        cost = labels(gr.Number(DEFAULT_COST, label=labels.text("mon.cost"), info=labels.text("mon.cost_info"),
                                elem_id="mon-cost", scale=1), label="mon.cost", info="mon.cost_info")
    with gr.Row():
        start_btn = labels(gr.Button(labels.text("mon.start"), variant="primary", elem_id="mon-start"),
                           value="mon.start")
        stop_btn = labels(gr.Button(labels.text("mon.stop"), elem_id="mon-stop"), value="mon.stop")
    status = gr.Markdown(elem_id="mon-status", elem_classes=["sdl-status"])
    verdict_md = gr.Markdown(elem_id="mon-verdict")
    summary_md = gr.Markdown(elem_id="mon-summary")
    plot = labels(gr.Plot(label=labels.text("tab.monitor"), elem_id="mon-plot"), label="tab.monitor")
    timer = gr.Timer(DEFAULT_INTERVAL_S, active=False)
    view = MonitorView(status, verdict_md, summary_md, plot)

    @guarded(status)
    def on_start(lang_value, session, url_value, interval_value, cost_value):
        session = ensure(session)
        every = number(interval_value, "mon.interval", lang_value, 0.5, 60)
        session.monitor_cost = number(cost_value, "mon.cost", lang_value, 0, 10)
        target = str(url_value or "").strip()
        session.monitor = None  # a failed start leaves no plot or verdict of the last endpoint behind
        session.monitor_run += 1  # a tick still reading the last endpoint then changes nothing (on_tick)
        try:
            first = read(target, policy, lang_value)
        except UserError as e:
            return {state: session, status: error_markdown(str(e), lang_value), timer: gr.Timer(active=False),
                    **view.render(session, lang_value)}
        session.monitor = Watch(url=target, first=first, last=first)
        note = t("mon.started", lang_value, url=target, every=every)
        if not first.spec_decode:
            note += "<br>" + t("mon.no_spec", lang_value, url=target)
        return {state: session, status: note, timer: gr.Timer(every, active=True), **view.render(session, lang_value)}

    def on_tick(lang_value, session):
        session = ensure(session)
        watch, run = session.monitor, session.monitor_run
        if watch is None:
            return {timer: gr.Timer(active=False)}
        try:
            reading = read(watch.url, policy, lang_value)
        except UserError as e:  # the server went away: say so and keep polling
            reading = e
        if session.monitor_run != run:  # Start or Stop was pressed while this tick read: theirs is the news
            return {status: gr.skip()}
        if isinstance(reading, UserError):
            return {status: error_markdown(str(reading), lang_value)}
        watch.add(reading)
        return {state: session, status: "", **view.render(session, lang_value)}

    @guarded(status)
    def on_stop(lang_value, session):
        session = ensure(session)
        session.monitor_run += 1
        return {state: session, status: t("mon.stopped", lang_value), timer: gr.Timer(active=False)}

    outputs = [state, status, timer, verdict_md, summary_md, plot]
    start_btn.click(on_start, [lang, state, url, interval, cost], outputs, api_name="monitor_start",
                    concurrency_limit=4)
    timer.tick(on_tick, [lang, state], outputs, api_name="monitor_tick", concurrency_limit=4,
               show_progress="hidden")
    stop_btn.click(on_stop, [lang, state], outputs, api_name="monitor_stop", concurrency_limit=None)
    return view
