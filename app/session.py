"""Per-browser-session state (held in ``gr.State``): the runs in progress, the last comparison,
measured points for the worth-it view, and a replayed trace. Nothing here is shared between
sessions; models are the only shared thing, cached by the engine."""
from __future__ import annotations

import shutil
import tempfile
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from core.api import build_decoder
from core.cost.curve import CostCurve, cached_curve
from core.cost.theory import run_model
from core.engine.batch import BatchDecoder, BatchStep
from core.records.steps import RunResult, StepRecord, Trace, write_trace
from core.api.request import DecodeRequest
from core.serving.monitor import Watch
from core.serving.prometheus import lab_metrics
from core.studies.comparison import Comparison

from . import memory
from .figures import MeasuredPoint
from .predict import Predict


def model_name(request: DecodeRequest) -> str:
    """The ``model_name`` label of a run in /metrics: the preset, or the model the visitor named."""
    return request.target or request.preset


class _Stepped:
    """A generator advanced one item per call under a lock (a Step that arrives while Play is
    mid-step waits instead of re-entering the engine); ``done`` once it ends, fails or is stopped."""

    def __init__(self, items):
        self.done = False
        self._items = items
        self._lock = threading.Lock()

    def _next(self):
        """The next item, or None once the generator is over (call with the lock held)."""
        if self.done:
            return None
        try:
            return next(self._items)
        except StopIteration:
            self._end()
            return None
        except BaseException:
            self._end()
            raise

    def step(self):
        """Advance one item (a step, a batched step); None once the generator is over."""
        with self._lock:
            item = self._next()
            if item is None:
                return None
            if self._take(item):
                self._finish()
            return item

    def _take(self, item) -> bool:
        """Keep ``item``; True when it is the last one (called with the lock held)."""
        raise NotImplementedError

    def _finish(self) -> None:
        """Let the generator leave its loop (it builds its result there), then end."""
        for _ in self._items:
            pass
        self._end()

    def _end(self) -> None:
        self.done = True

    def stop(self) -> None:
        """Cancel: the engine releases every KV block it holds."""
        with self._lock:
            if not self.done:
                self._items.close()
                self._end()


class Run(_Stepped):
    """One decoding run driven a step at a time."""

    def __init__(self, request: DecodeRequest):
        decoder, prompt_ids = build_decoder(request, inspect=True)  # the page shows why each step kept what it kept
        self.meter = lab_metrics().meter(model_name(request))  # the server's /metrics counts every step
        self.request = request
        self.prompt = request.prompt
        self.decoder = decoder
        self.records: list[StepRecord] = []
        super().__init__(decoder.steps(prompt_ids))  # done: the engine has returned its KV blocks

    def _take(self, record: StepRecord) -> bool:
        self.records.append(record)
        self.meter.observe(record)
        return record.finished

    def _end(self) -> None:
        super()._end()
        self.meter.close()
        memory.give_back()

    def curve(self) -> CostCurve | None:
        """The target's verify-cost curve v(n) on this machine if it was measured before (by an ``auto``
        run, Compare, or ``python -m core cost``): read from the disk cache, never measured here -- a
        measurement takes seconds to minutes and would be disturbed by the run itself."""
        return cached_curve(self.decoder.target)

    @property
    def result(self) -> RunResult | None:
        """The engine's RunResult once the run is done (also after a stop)."""
        return self.decoder.result if self.done else None

    @property
    def finished(self) -> bool:
        return bool(self.records) and self.records[-1].finished


class ServingRun(_Stepped):
    """A queue of requests decoded as a continuous batch (``core.engine.batch.BatchDecoder.serve``), one
    batched step at a time."""

    def __init__(self, requests: list[DecodeRequest], max_batch: int):
        built = [build_decoder(r) for r in requests]
        self.requests = requests
        self.prompts = [r.prompt for r in requests]
        self.batch = BatchDecoder([d for d, _ in built], [ids for _, ids in built], max_batch=max_batch)
        self.steps: list[BatchStep] = []
        super().__init__(self.batch.serve())  # done: every block is back

    def _take(self, batch_step: BatchStep) -> bool:
        self.steps.append(batch_step)
        return not batch_step.waiting and set(batch_step.left) == set(batch_step.records)  # the last requests left


def measured_point(label: str, records: list[StepRecord], k: int, speedup: float | None = None,
                   forward_s: float | None = None, curve: CostCurve | None = None) -> MeasuredPoint:
    """A run (or a set-up's repeats, pooled) as a point of the worth-it view: the expected-speedup
    model's terms (``core.cost.theory.run_model``) and its measured ``speedup``."""
    model = run_model(records, k, forward_s, curve)
    return MeasuredPoint(
        label=label, alpha=model.alpha, k=k, draft_cost=model.draft_cost, c=model.c, tokens_per_verify=model.tau,
        speedup=speedup, v=model.v, v_model=model.v_model, predicted=model.predicted, v_by_nodes=model.v_by_nodes,
        tree=any(len({n.depth for n in r.nodes}) < len(r.nodes) for r in records),
    )


def comparison_points(comparison: Comparison) -> list[MeasuredPoint]:
    """One point per drafting set-up of a finished comparison, its repeats pooled, its speedup the median."""
    points = []
    for setup in comparison.setups[1:]:
        if setup.results and setup.request.drafter_class.capabilities.drafts:
            speedup = comparison.speedup(setup)
            points.append(measured_point(setup.label, setup.records, setup.request.shape.depth,
                                         speedup.median, comparison.forward_s, comparison.curve))
    return points


MAX_POINTS = 64  # measured runs a session keeps for the worth-it view (a long session stays small)
MAX_UNCOSTED = 8  # Step-by-step runs whose records are kept until a curve gives them c and v


@dataclass
class Session:
    run: Run | None = None  # step by step
    lang: str | None = None  # the language the toggle last switched to (None: never switched)
    lesson_run: Run | None = None  # the classroom's live part
    playing: bool = False
    comparison: Comparison | None = None  # the last comparison (possibly still running)
    compare_stop: bool = False
    points: deque[MeasuredPoint] = field(default_factory=lambda: deque(maxlen=MAX_POINTS))  # the latest runs
    cost_curve: CostCurve | None = None  # the verify-cost curve of the last comparison's target
    cost_target: str | None = None  # that target (a path or hub id, as RunResult.target names it)
    # Step-by-step runs whose c and v wait for a curve: (their point, records, k, target)
    uncosted: deque = field(default_factory=lambda: deque(maxlen=MAX_UNCOSTED))

    def language(self, lang: str) -> str:
        """The page's language now: the toggle's last choice (``lang``), unless the visitor switched
        while a handler was running (Play, Compare), which then draws its next yields in the new one."""
        return self.lang or lang

    def curve_for(self, target: str) -> CostCurve | None:
        """The session's verify-cost curve if it belongs to ``target``."""
        return self.cost_curve if self.cost_target == target else None

    def add_run(self, label: str, records: list[StepRecord], k: int, target: str, curve: CostCurve | None) -> None:
        """A finished Step-by-step run as a point of Worth it?; one whose c and v are unknown yet (no
        one-token forward of this machine measured) is kept, to be filled in once a Compare measures it."""
        point = measured_point(label, records, k, curve=curve)
        self.points.append(point)
        if point.c is None:
            self.uncosted.append((point, records, k, target))

    def cost_points(self) -> None:
        """Give the runs that had no c and v theirs, from the session's verify-cost curve (a Compare's)."""
        waiting = list(self.uncosted)
        self.uncosted.clear()
        for old, records, k, target in waiting:
            curve = self.curve_for(target)
            if curve is None:
                self.uncosted.append((old, records, k, target))
                continue
            new = measured_point(old.label, records, k, curve=curve)
            self.points = deque((new if p is old else p for p in self.points), maxlen=MAX_POINTS)
    replay: Trace | None = None
    replay_index: int = 0
    batch: dict | None = None  # the batch-size study shown (a bench result with a batch sweep)
    serving: ServingRun | None = None  # the serving view's continuous batch
    serving_settings: tuple = ()  # the control values it was started with
    lesson_frame: int = 0
    predict: Predict = field(default_factory=Predict)  # the classroom's predict mode
    expand_tree: bool = False  # Step by step draws the whole tree, unreached branches unfolded
    monitor: Watch | None = None  # the production monitor's readings
    monitor_cost: float = 0.2  # its draft cost estimate, for endpoints without timings
    monitor_run: int = 0  # counts Start and Stop presses: a tick that read across one drops its reading
    _dir: Path | None = None
    _traces: int = 0

    def trace_path(self, name: str) -> Path:
        """A file in this session's own folder (removed when the session closes)."""
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="sdl-"))
        return self._dir / name

    def save_trace(self, run: Run) -> str:
        """Write a finished or stopped run's trace (JSON lines) and return its path."""
        self._traces += 1
        path = self.trace_path(f"trace-{self._traces}.jsonl")
        write_trace(path, run.result)
        return str(path)

    def close(self) -> None:
        """Stop every run (returning its KV blocks) and delete this session's files."""
        self.playing = False
        self.compare_stop = True
        for run in (self.run, self.lesson_run, self.serving):
            if run is not None:
                run.stop()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)


def ensure(session: Session | None) -> Session:
    return session if session is not None else Session()


def close_session(session: Session | None) -> None:
    """``gr.State``'s delete callback: runs when a browser session ends or expires."""
    if session is not None:
        session.close()
