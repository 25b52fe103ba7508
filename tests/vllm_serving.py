"""The Production monitor on a real ``vllm serve``: shared by tests/test_vllm_serve.py and the
screenshot script (``python tests/screenshots.py --only vllm-serve``).

The tiny target and its EAGLE-3, exported by the lab's own ``python -m core export``, served by
vLLM on loopback (``core.vllm.serve``); greedy requests through its OpenAI API; the app's monitor
polling its ``/metrics``. ``/metrics`` is read here with prometheus-client's parser, apart from the
monitor's own reading, so the page is checked against vLLM and not against itself.
"""
from __future__ import annotations

import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from app_driver import open_app, open_tab, plot, set_language
from app_server import running_app
from prometheus_client.parser import text_string_to_metric_families

from core.cli import main
from core.models.loading import resolve_preset
from core.models.prompts import load_prompts
from core.vllm.serve import Server, serve

K = 3  # num_speculative_tokens
MAX_TOKENS = 40
PROMPTS = 8  # the first held-out prompts
CONCURRENT = 2  # requests in flight at once: vLLM batches them
ACCEPTED = "#2e9e44"  # app.palette: the per-position bars' colour
SUMMARY = "{drafts} drafts · {draft_tokens} drafted tokens · {accepted} accepted · per position {per_position}"


@dataclass(frozen=True)
class Counters:
    """vLLM's spec-decode counters, as its /metrics says them (summed over label sets)."""

    drafts: int
    draft_tokens: int
    accepted: int
    per_position: tuple[int, ...]

    def __sub__(self, before: "Counters") -> "Counters":
        return Counters(self.drafts - before.drafts, self.draft_tokens - before.draft_tokens,
                        self.accepted - before.accepted,
                        tuple(a - b for a, b in zip(self.per_position, before.per_position + (0,) * K)))

    @property
    def tau(self) -> float:
        return 1 + self.accepted / self.drafts

    @property
    def acceptance_per_position(self) -> list[float]:
        return [n / self.drafts for n in self.per_position]

    def summary(self) -> str:
        """How the monitor's summary line (English) should read these counters."""
        return f"τ {self.tau:.3f} · " + SUMMARY.format(
            drafts=self.drafts, draft_tokens=self.draft_tokens, accepted=self.accepted,
            per_position=" ".join(f"{p:.3f}" for p in self.acceptance_per_position))


def counters(metrics_text: str) -> Counters:
    totals: dict[str, float] = {}
    positions: dict[int, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name == "vllm:spec_decode_num_accepted_tokens_per_pos_total":
                position = int(sample.labels["position"])
                positions[position] = positions.get(position, 0.0) + sample.value
            elif sample.name.startswith("vllm:spec_decode_num_") and sample.name.endswith("_total"):
                totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return Counters(drafts=round(totals.get("vllm:spec_decode_num_drafts_total", 0)),
                    draft_tokens=round(totals.get("vllm:spec_decode_num_draft_tokens_total", 0)),
                    accepted=round(totals.get("vllm:spec_decode_num_accepted_tokens_total", 0)),
                    per_position=tuple(round(positions[i]) for i in sorted(positions)))


def settled(server: Server, timeout_s: float = 30.0) -> Counters:
    """The counters once two readings a second apart agree (vLLM records a step's stats just after
    it answers)."""
    last, deadline = counters(server.get("/metrics")), time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = counters(server.get("/metrics"))
        if now == last:
            return now
        last = now
    raise AssertionError(f"vLLM's counters still moving after {timeout_s:.0f} s")


def export_drafter(out: Path, preset: str = "tiny") -> Path:
    """The preset target's EAGLE-3 in vLLM's layout, by the lab's own command."""
    assert main(["export", "--drafter", "eagle3", "--preset", preset, "--format", "vllm", str(out)]) == 0
    return out


@contextlib.contextmanager
def eagle3_server(drafter: Path, log_file: Path | None = None, preset: str = "tiny"):
    """One thread: on a busy 2-core machine two OpenMP threads spin-wait for each other (tests/conftest.py)."""
    with serve(resolve_preset(preset).target, {"method": "eagle3", "model": str(drafter), "num_speculative_tokens": K},
               threads=1, log_file=log_file) as server:
        yield server


def send(server: Server, prompts: list[str]) -> list[dict]:
    """Greedy completions, ``CONCURRENT`` at a time."""
    with ThreadPoolExecutor(CONCURRENT) as pool:
        return list(pool.map(lambda p: server.complete(p, MAX_TOKENS), prompts))


@dataclass(frozen=True)
class Watched:
    metrics: Counters  # what vLLM's /metrics counted between the monitor's first reading and the last
    summary: str  # the monitor's summary line, as the page shows it
    bars: dict  # the monitor's per-position bars since start (the plotly trace as drawn: x, y)
    replies: list[dict]


def watch_requests(page, server: Server, screenshot: Path | None = None, prompts: list[str] | None = None) -> Watched:
    """In the app (English), the Production monitor polling ``server``'s /metrics every second while
    ``prompts`` (the first ``PROMPTS`` held-out ones) go through vLLM; once the page shows the last counts, a full-page
    ``screenshot`` of it."""
    prompts = prompts or load_prompts()[:PROMPTS]
    with running_app("tiny", timeout_s=300) as url:
        open_app(page, url)
        set_language(page, "English")
        page.wait_for_function("document.querySelector('#tab-monitor-button').innerText.includes('Production')")
        open_tab(page, "monitor")
        before = settled(server)
        page.fill("#mon-url input, #mon-url textarea", server.metrics_url)
        page.fill("#mon-interval input", "1")
        page.click("#mon-start")
        page.wait_for_function("u => document.querySelector('#mon-status').innerText.includes(u)",
                               arg=server.metrics_url)
        replies = send(server, prompts)
        metrics = settled(server) - before
        page.wait_for_function("s => document.querySelector('#mon-summary').innerText.includes(s)",
                               arg=f"· {metrics.drafts} drafts ·", timeout=60_000)
        page.wait_for_timeout(1500)  # one more window after the last request, for the picture
        figure = plot(page, "mon-plot")
        bars = next(t for t in figure["data"] if t["color"] == ACCEPTED)
        if screenshot:
            page.screenshot(path=screenshot, full_page=True)
        return Watched(metrics, page.inner_text("#mon-summary").strip(), bars, replies)
