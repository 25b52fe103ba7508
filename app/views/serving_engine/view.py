"""In a serving engine: the reference article's vLLM chapter on the real engine. A queue of
requests is decoded as a continuous batch (``core.engine.batch.BatchDecoder.serve``), one batched verify
forward per Step: requests join and leave, each request's tree-attention mask, the target's
shared paged blocks beside the draft model's own cache, and the four production questions
answered from what this batch measured."""
from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from core import UserError
from core.records.metrics import tally
from core.api.request import DecodeRequest

from ...controls import DRAFTER_NAMES, SERVING_DEFAULT, choice, number, prompt_text
from ...figures.style import empty
from ...guard import guarded
from ...i18n import t
from ...session import Session, ensure
from ..batch_sizes.sweeps import EXAMPLE_RESULTS
from ..page import Page, View
from .figures import kv_pair_figure, masks_figure, timeline_figure
from .state import ServingRun, ServingState

ROOT = Path(__file__).resolve().parents[3]
BLOCK_SIZE = 4  # small blocks, so a step's returned blocks show in a small grid
MAX_REQUESTS = 8
MAX_BUDGET = 64
DEFAULT_BUDGET = 16
MAX_SERVING_BATCH = 4
RUN_DELAY_S = 0.25
DEFAULT_REQUESTS = "12 | 我爱\n20 | It is a truth universally acknowledged\n6 | 床前明月光，\n16 | The quick brown fox\n" \
                   "10 | 春眠不觉晓，"


def parse_requests(text, lang: str) -> list[tuple[int, str]]:
    """One request a line: ``budget | prompt`` or just ``prompt`` (budget 16)."""
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    if not 1 <= len(lines) <= MAX_REQUESTS:
        raise UserError(t("serve.err_requests", lang, limit=MAX_REQUESTS, n=len(lines)))
    out = []
    for line in lines:
        head, bar, rest = line.partition("|")
        if bar and head.strip().isdigit():
            budget = number(head.strip(), "serve.budget", lang, 1, MAX_BUDGET, integer=True)
            out.append((budget, prompt_text(rest.strip(), lang)))
        else:
            out.append((DEFAULT_BUDGET, prompt_text(line, lang)))
    return out


def serving_requests(lang: str, presets: list[str], text, preset, drafter, k) -> list[DecodeRequest]:
    preset = choice(preset, presets, "ctl.preset", lang)
    drafter = choice(drafter, DRAFTER_NAMES, "ctl.drafter", lang)
    depth = number(k, "ctl.k", lang, 1, 8, integer=True)
    return [DecodeRequest.of(prompt, preset, drafter, depth, max_new_tokens=budget, block_size=BLOCK_SIZE)
            for budget, prompt in parse_requests(text, lang)]


def request_records(run: ServingRun, i: int) -> list:
    return [s.records[i] for s in run.steps if i in s.records]


def names(ids) -> str:
    return ", ".join(f"#{i + 1}" for i in ids) or "–"


def status_markdown(run: ServingRun | None, lang: str, changed: bool = False) -> str:
    if run is None or not run.steps:
        return t("hint.press_step", lang) if run is None else t("serve.ready", lang)
    s = run.steps[-1]
    done = sorted(i for step in run.steps for i in step.left)
    lines = [t("serve.status", lang, step=s.step + 1, running=names(sorted(s.records)), waiting=names(s.waiting),
               done=names(done), used=s.pool_in_use, total=s.pool_blocks)]
    for i in s.joined:
        lines.append(t("serve.event_joined", lang, request=i + 1, prefix=s.prefix_tokens[i]))
    for i in s.left:
        lines.append(t("serve.event_left", lang, request=i + 1, blocks=s.returned_blocks[i],
                       tokens=s.records[i].new_tokens_total))
    if run.done:
        lines.append(t("serve.done", lang, after=run.batch.result.blocks_in_use_after,
                       peak=run.batch.result.peak_blocks_in_use))
    if changed:
        lines.append(t("run.changed", lang))
    return "<br>".join(lines)


def questions_markdown(run: ServingRun | None, lang: str) -> str:
    """The article's four production questions, each answered with a number this batch measured."""
    if run is None or not run.steps:
        return ""
    return "\n\n".join([t("serve.q_title", lang), _bound(run, lang), _draft_cost(run, lang), _acceptance(run, lang),
                        _large_batch(run, lang)])


def _bound(run: ServingRun, lang: str) -> str:
    """Q1: verify time against the tokens in the batched forward (requests × padded rows); the
    first forward (a warm-up for the kernels) is left out once there are others. The verdict compares
    the smallest and the largest n timed often enough to weigh their spread (``bound_verdict``)."""
    timed = run.steps[1:] or run.steps
    by_tokens: dict[int, list[float]] = {}
    for s in timed:
        by_tokens.setdefault(len(s.records) * s.query_rows, []).append(s.verify_s)
    ms = {n: 1000 * statistics.median(v) for n, v in sorted(by_tokens.items())}
    table = ", ".join(t("serve.q1_point", lang, tokens=n, ms=ms[n], count=len(by_tokens[n])) for n in ms)
    if len(ms) == 1:
        return t("serve.q1_one", lang, table=table, n=len(timed))
    counted = [n for n in ms if len(by_tokens[n]) >= MIN_TIMINGS]
    low, high = (counted[0], counted[-1]) if len(counted) > 1 else (min(ms), max(ms))
    tokens_x, time_x = high / low, ms[high] / ms[low]
    verdict = bound_verdict(by_tokens[low], by_tokens[high], tokens_x, lang)
    return t("serve.q1", lang, table=table, low=low, high=high, tokens_x=tokens_x, time_x=time_x, verdict=verdict,
             n=len(timed))


MIN_TIMINGS = 3  # timings of one n before their spread says anything
MEMORY_SHARE = 0.25  # time grows less than this share of the tokens' growth, even at the slow end: memory-bound
COMPUTE_SHARE = 0.5  # more than this share, even at the fast end: compute-bound


def bound_verdict(low_s: list[float], high_s: list[float], tokens_x: float, lang: str) -> str:
    """Memory-bound or compute-bound, said only where the timings carry it. The measure: how fast the
    time grows from the smaller n to the larger, as a share of growing in step with the tokens (0: flat,
    1: in step), read at both ends of the spread (each n's middle half of timings: its quartiles).
    Memory-bound when even the slow reading stays under ``MEMORY_SHARE``, compute-bound when even the
    fast one passes ``COMPUTE_SHARE``; otherwise the noise covers the answer, and the text says so."""
    if tokens_x < 2:
        return t("serve.q1_narrow", lang)
    if min(len(low_s), len(high_s)) < MIN_TIMINGS:
        return t("serve.q1_few", lang, timings=MIN_TIMINGS)
    time_x = statistics.median(high_s) / statistics.median(low_s)
    if time_x < 1 or time_x > 1.2 * tokens_x:
        return t("serve.q1_noise", lang)
    (low_fast, _, low_slow), (high_fast, _, high_slow) = (statistics.quantiles(s, n=4, method="inclusive")
                                                          for s in (low_s, high_s))
    least = (high_fast / low_slow - 1) / (tokens_x - 1)
    most = (high_slow / low_fast - 1) / (tokens_x - 1)
    key = ("serve.q1_memory" if most < MEMORY_SHARE else "serve.q1_compute" if least > COMPUTE_SHARE
           else "serve.q1_unclear")
    return t(key, lang, least=max(least, 0.0), most=most, memory=MEMORY_SHARE, compute=COMPUTE_SHARE)


def _draft_cost(run: ServingRun, lang: str) -> str:
    """Q2: core.records.metrics.draft_cost over every request's StepRecords; KV memory of draft and target."""
    records = [r for s in run.steps for r in s.records.values()]
    cost = tally(records).draft_cost
    pool = run.batch.pool
    draft_caches = [d.drafter.own_kv() for d in run.batch.decoders if d.drafter.own_kv() is not None]
    target_mb = pool.pool.peak_in_use * pool.block_bytes / 1e6
    line = t("serve.q2", lang, cost=cost) if cost is not None else t("serve.q2_none", lang)
    if draft_caches:
        draft_mb = sum(kv.counters.peak_blocks_in_use * kv.cache.block_bytes for kv in draft_caches) / 1e6
        line += " " + t("serve.q2_memory", lang, target=target_mb, draft=draft_mb,
                        blocks=pool.pool.peak_in_use, share=draft_mb / (draft_mb + target_mb))
    else:
        line += " " + t("serve.q2_memory_none", lang, target=target_mb, blocks=pool.pool.peak_in_use)
    return line


def _acceptance(run: ServingRun, lang: str) -> str:
    """Q3: acceptance rate and tau per request (core.records.metrics), their spread, and pooled."""
    per = [tally(request_records(run, i)) for i in range(len(run.prompts))]
    per = [p for p in per if p.steps]
    pooled = tally(r for s in run.steps for r in s.records.values())
    if not pooled.draft_tokens:
        return t("serve.q3_none", lang, tau=pooled.tau)
    rates = [p.acceptance_rate for p in per if p.draft_tokens]
    return t("serve.q3", lang, low=min(rates), high=max(rates), tau_low=min(p.tau for p in per),
             tau_high=max(p.tau for p in per), rate=pooled.acceptance_rate, tau=pooled.tau, n=len(per))


def sweep_entries(crossover: dict, drafter: str, k: int) -> list[tuple[str, int | None]]:
    """The sweep's crossover entries for ``drafter``: its labels are a drafter, or a drafter and a shape
    (``eagle3:4``, ``hybrid:auto``); the entry at this batch's depth ``k`` first, then the bare name,
    then the drafter's other shapes."""
    mine = [label for label in crossover if label.split(":")[0] == drafter]
    first = [label for label in (f"{drafter}:{k}", drafter) if label in mine]
    return [(label, crossover[label]) for label in first + [label for label in mine if label not in first]]


def _large_batch(run: ServingRun, lang: str) -> str:
    """Q4: this batch's tokens per batched forward, and where the project's shipped batch-size sweep
    (the one the Batch size view loads) saw speculation stop paying."""
    tokens = sum(len(r.emitted) for s in run.steps for r in s.records.values())
    line = t("serve.q4_live", lang, tokens=tokens, forwards=len(run.steps), per=tokens / len(run.steps),
             batch=run.batch.max_running)
    request = run.requests[0]
    path = EXAMPLE_RESULTS.get(request.preset)
    crossover = json.loads(path.read_text()).get("batch_crossover") or {} if path and path.is_file() else {}
    entries = sweep_entries(crossover, request.drafter, request.shape.depth)
    if not entries:
        return line + " " + t("serve.q4_unmeasured", lang, drafter=request.drafter)
    where = [t("serve.q4_pays", lang, drafter=label) if batch is None else t("serve.q4_stops", lang, drafter=label,
                                                                              batch=batch) for label, batch in entries]
    return line + " " + t("serve.q4_bench", lang, where="; ".join(where), k=request.shape.depth,
                          path=path.relative_to(ROOT).as_posix())


@dataclass
class ServingView(View):
    status: gr.Markdown
    timeline: gr.Plot
    masks: gr.Plot
    kv: gr.Plot
    questions: gr.Markdown

    @property
    def outputs(self) -> list:
        return [self.status, self.timeline, self.masks, self.kv, self.questions]

    def render(self, session: Session, lang: str, changed: bool = False) -> dict:
        run = session.of(ServingState).run
        if run is None or not run.steps:
            hint = empty(t("hint.press_step", lang))
            return {self.status: status_markdown(run, lang), self.timeline: hint, self.masks: hint, self.kv: hint,
                    self.questions: ""}
        last = run.steps[-1]
        return {self.status: status_markdown(run, lang, changed), self.timeline: timeline_figure(run.steps,
                run.prompts, lang), self.masks: masks_figure(last, lang),
                self.kv: kv_pair_figure(last, lang), self.questions: questions_markdown(run, lang)}


def build(page: Page) -> ServingView:
    labels, presets, default_preset = page.labels, page.presets, page.default_preset
    labels.make(gr.Markdown, text="serve.intro")
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            requests = labels.make(gr.Textbox, DEFAULT_REQUESTS, lines=6, elem_id="serve-requests",
                                   label="serve.requests", info="serve.requests_info")
            preset = labels.make(gr.Dropdown, presets, value=default_preset, label="ctl.preset", elem_id="serve-preset")
            drafter = labels.make(gr.Dropdown, DRAFTER_NAMES, value=SERVING_DEFAULT, label="ctl.drafter",
                                  elem_id="serve-drafter")
            with gr.Row():
                k = labels.make(gr.Number, 4, label="ctl.k", precision=0, elem_id="serve-k")
                max_batch = labels.make(gr.Slider, 1, MAX_SERVING_BATCH, value=2, step=1, label="serve.max_batch",
                                        elem_id="serve-max-batch")
            with gr.Row():
                buttons = {name: labels.make(gr.Button, text=f"btn.{key}", elem_id=f"serve-{name}", min_width=80,
                                             variant="primary" if name == "step" else "secondary")
                           for name, key in (("step", "step"), ("run", "serve_run"), ("reset", "reset"))}
            status = gr.Markdown(elem_id="serve-status", elem_classes=["sdl-status"])
        with gr.Column(scale=3):
            timeline = labels.make(gr.Plot, elem_id="serve-timeline", label="serve.panel_timeline")
            masks = labels.make(gr.Plot, elem_id="serve-masks", label="serve.panel_masks")
            kv = labels.make(gr.Plot, elem_id="serve-kv", label="serve.panel_kv")
            questions = gr.Markdown(elem_id="serve-questions")
    view = ServingView(status, timeline, masks, kv, questions)
    wire(view, buttons, [requests, preset, drafter, k, max_batch], page.state, page.lang, presets)
    return view


def wire(view: ServingView, buttons: dict, settings: list, state: gr.State, lang: gr.Radio,
         presets: list[str]) -> None:
    handlers = ServingHandlers(view, state, presets)
    outputs = [state, *view.outputs]
    for name in ("step", "run"):
        buttons[name].click(guarded(view.status)(getattr(handlers, name)), [lang, state, *settings], outputs,
                            api_name=f"serve_{name}", concurrency_limit=4)
    buttons["reset"].click(guarded(view.status)(handlers.reset), [lang, state], outputs, api_name="serve_reset",
                           concurrency_limit=None)


class ServingHandlers:
    def __init__(self, view: ServingView, state: gr.State, presets: list[str]):
        self.view, self.state, self.presets = view, state, presets

    def start(self, session: Session, lang_value: str, values: tuple):
        """A new continuous batch from the settings (the previous one returns its blocks)."""
        text, preset, drafter, k, max_batch = values
        requests = serving_requests(lang_value, self.presets, text, preset, drafter, k)
        batch = number(max_batch, "serve.max_batch", lang_value, 1, MAX_SERVING_BATCH, integer=True)
        mine = session.of(ServingState)
        if mine.run is not None:
            mine.run.stop()
        yield {self.state: session, self.view.status: t("run.loading", lang_value)}
        mine.run = ServingRun(requests, batch)
        mine.settings = values

    def step(self, lang_value, session, *values):
        session = ensure(session)
        mine = session.of(ServingState)
        if mine.run is None or mine.run.done:
            yield from self.start(session, lang_value, values)
        mine.run.step()
        yield {self.state: session, **self.view.render(session, lang_value, self.changed(session, values))}

    def run(self, lang_value, session, *values):
        session = ensure(session)
        mine = session.of(ServingState)
        if mine.run is None or mine.run.done:
            yield from self.start(session, lang_value, values)
        changed = self.changed(session, values)
        while mine.run.step() is not None:
            yield {self.state: session, **self.view.render(session, lang_value, changed)}
            time.sleep(RUN_DELAY_S)
        yield {self.state: session, **self.view.render(session, lang_value)}

    @staticmethod
    def changed(session: Session, values: tuple) -> bool:
        """Whether the controls differ from the running batch's (they apply after Reset)."""
        mine = session.of(ServingState)
        return tuple(values) != mine.settings and not mine.run.done

    def reset(self, lang_value, session):
        session = ensure(session)
        mine = session.of(ServingState)
        if mine.run is not None:
            mine.run.stop()
        mine.run = None
        return {self.state: session, **self.view.render(session, lang_value)}
