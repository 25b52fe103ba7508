"""The lab's runs as Prometheus metrics, under the names a vLLM dashboard already reads.

vLLM's spec-decode counters (``vllm/v1/spec_decode/metrics.py``, ``SpecDecodingProm``) carry the
labels ``model_name`` and ``engine``; the per-position counter adds ``position``, 0-based (the
first drafted token is position "0"). prometheus-client appends ``_total`` to a counter's name
in the text format, so the counter ``vllm:spec_decode_num_drafts`` is exposed as
``vllm:spec_decode_num_drafts_total``, exactly as vLLM's own ``/metrics`` shows it::

    vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 12.0
    vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="0"} 9.0

Every count comes from ``core.records.metrics`` (one step's ``Tallies``), never recomputed here. The
lab's own numbers (verify time, drafting time, KV blocks) sit under the ``sdlab_`` prefix.
The registry is this module's own ``CollectorRegistry``, not prometheus-client's global one.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import threading
from typing import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from core.records.metrics import Tallies
from core.records.steps import StepRecord

LABELS = ("model_name", "engine")
ENGINE = "0"  # vLLM numbers its engine cores from 0; the lab has one
VERIFY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST


# attribute -> (kind, name, help, extra labels...): vLLM's names first, then the lab's own
METRICS: dict[str, tuple] = {
    "drafts": (Counter, "vllm:spec_decode_num_drafts", "Number of spec decoding drafts."),
    "draft_tokens": (Counter, "vllm:spec_decode_num_draft_tokens", "Number of draft tokens."),
    "accepted_tokens": (Counter, "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens."),
    "accepted_per_pos": (Counter, "vllm:spec_decode_num_accepted_tokens_per_pos",
                         "Accepted tokens per draft position.", "position"),
    "generation_tokens": (Counter, "vllm:generation_tokens", "Number of generation tokens processed."),
    "running": (Gauge, "vllm:num_requests_running", "Number of requests in model execution batches."),
    "waiting": (Gauge, "vllm:num_requests_waiting", "Number of requests waiting to be processed."),
    "paused": (Gauge, "sdlab_requests_paused", "Runs stepped by hand between two steps (not decoding, "
               "not counted as running)."),
    "verify_seconds": (Histogram, "sdlab_verify_seconds", "Seconds of each target verify forward."),
    "draft_seconds": (Counter, "sdlab_draft_seconds", "Seconds spent drafting, over the steps that drafted."),
    "drafting_verify_seconds": (Counter, "sdlab_drafting_verify_seconds",
                                "Verify seconds of the steps that drafted (draft cost = "
                                "sdlab_draft_seconds_total / sdlab_drafting_verify_seconds_total)."),
    "target_forwards": (Counter, "sdlab_target_forwards", "Target verify forwards (one per step)."),
    "kv_blocks_in_use": (Gauge, "sdlab_kv_blocks_in_use", "KV blocks held by the running requests."),
    "kv_blocks_freed": (Counter, "sdlab_kv_blocks_freed", "KV blocks returned to the pool after a verify."),
    "kv_slots_freed": (Counter, "sdlab_kv_slots_freed", "KV slots of rejected draft nodes released."),
}


class LabMetrics:
    """One registry with vLLM's spec-decode and request counters and the lab's ``sdlab_`` ones."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        for attribute, (kind, name, help_text, *extra) in METRICS.items():
            labels = (*LABELS, *extra)
            metric = (Histogram(name, help_text, labels, buckets=VERIFY_BUCKETS, registry=self.registry)
                      if kind is Histogram else kind(name, help_text, labels, registry=self.registry))
            setattr(self, attribute, metric)
        self._blocks: dict[tuple[str, int], int] = {}  # (model, run id) -> blocks its table holds
        self._lock = threading.Lock()
        self._ids = itertools.count()

    def observe(self, model_name: str, record: StepRecord, run_id: int = -1) -> None:
        """Count one StepRecord (its numbers as ``core.records.metrics`` defines them)."""
        step = Tallies().add(record)
        labels = (model_name, ENGINE)
        self.target_forwards.labels(*labels).inc(step.steps)
        self.generation_tokens.labels(*labels).inc(step.new_tokens)
        self.verify_seconds.labels(*labels).observe(step.all_verify_s)
        self.kv_blocks_freed.labels(*labels).inc(len(record.kv.freed_blocks))
        self.kv_slots_freed.labels(*labels).inc(record.kv.slots_freed)
        self._set_blocks(model_name, run_id, record.kv.blocks_after)
        if not step.drafts:
            return
        self.drafts.labels(*labels).inc(step.drafts)
        self.draft_tokens.labels(*labels).inc(step.draft_tokens)
        self.accepted_tokens.labels(*labels).inc(step.accepted_tokens)
        for position, accepted in enumerate(step.accepted_per_position):
            self.accepted_per_pos.labels(*labels, str(position)).inc(accepted)
        self.draft_seconds.labels(*labels).inc(step.draft_s)
        self.drafting_verify_seconds.labels(*labels).inc(step.verify_s)

    def _set_blocks(self, model_name: str, run_id: int, blocks: int | None) -> None:
        with self._lock:
            key = (model_name, run_id)
            if blocks is None:
                self._blocks.pop(key, None)
            else:
                self._blocks[key] = blocks
            total = sum(n for (model, _), n in self._blocks.items() if model == model_name)
        self.kv_blocks_in_use.labels(model_name, ENGINE).set(total)

    @contextlib.contextmanager
    def request(self, model_name: str) -> Iterator["RunMeter"]:
        """A run in progress: counted in ``vllm:num_requests_running`` until the block ends."""
        meter = self.meter(model_name)
        try:
            yield meter
        finally:
            meter.close()

    def meter(self, model_name: str, stepped: bool = False) -> "RunMeter":
        """Like ``request`` for a run whose end is not a block (call ``close`` once it is done).
        ``stepped``: a run driven a step at a time (the page's Step): it counts as running only inside
        ``RunMeter.stepping``, and as paused between steps."""
        return RunMeter(self, model_name, next(self._ids), stepped)

    @contextlib.contextmanager
    def queue(self, model_name: str, n: int) -> Iterator["Queue"]:
        """``n`` runs waiting their turn (``vllm:num_requests_waiting``); ``take`` starts one."""
        queue = Queue(self.waiting.labels(model_name, ENGINE), n)
        try:
            yield queue
        finally:
            queue.close()

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format (``CONTENT_TYPE``)."""
        return generate_latest(self.registry)


class RunMeter:
    """Feeds one run's StepRecords into ``LabMetrics``. The run counts as running until ``close`` --
    or, stepped by hand, only while a step is computed (``stepping``) and as paused in between: a
    classroom run waiting for its next click is not decoding."""

    def __init__(self, lab: LabMetrics, model_name: str, run_id: int, stepped: bool = False):
        self.lab, self.model_name, self.run_id = lab, model_name, run_id
        self.stepped = stepped
        self._open = True
        self._lock = threading.Lock()  # a Stop from another thread may close the run mid-step
        self._gauge = (lab.paused if stepped else lab.running).labels(model_name, ENGINE)
        self._gauge.inc()

    @contextlib.contextmanager
    def stepping(self) -> Iterator[None]:
        """A stepped run computes a step: running, not paused, until the block ends."""
        if self.stepped:
            self._move(self.lab.running)
        try:
            yield
        finally:
            if self.stepped:
                self._move(self.lab.paused)

    def _move(self, metric) -> None:
        with self._lock:
            if self._open:
                self._gauge.dec()
                self._gauge = metric.labels(self.model_name, ENGINE)
                self._gauge.inc()

    def observe(self, record: StepRecord | None) -> None:
        if record is not None and self._open:
            self.lab.observe(self.model_name, record, self.run_id)

    def close(self) -> None:
        """Idempotent: the run leaves the running gauge and its KV blocks leave the in-use gauge."""
        with self._lock:
            if not self._open:
                return
            self._open = False
            self._gauge.dec()
        self.lab._set_blocks(self.model_name, self.run_id, None)


class Queue:
    def __init__(self, gauge, n: int):
        self.gauge, self.left = gauge, n
        gauge.inc(n)

    def take(self) -> None:
        if self.left > 0:
            self.left -= 1
            self.gauge.dec()

    def close(self) -> None:
        self.gauge.dec(self.left)
        self.left = 0


@functools.cache
def lab_metrics() -> LabMetrics:
    """The process's one LabMetrics (created on first use): every run of the app or of
    ``python -m core serve-metrics`` feeds it."""
    return LabMetrics()
