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

from core.metrics import tally
from core.records import RunResult, StepRecord, Trace, write_trace
from core.theory import draft_cost_ratio

from . import memory
from .controls import RunRequest
from .figures import MeasuredPoint


class Run:
    """One decoding run driven a step at a time. Calls are serialised, so a Step that arrives
    while Play is mid-step waits instead of re-entering the engine."""

    def __init__(self, request: RunRequest):
        decoder, prompt_ids = request.build()
        self.request = request
        self.prompt = request.prompt
        self.decoder = decoder
        self.records: list[StepRecord] = []
        self.done = False  # finished, stopped, or failed: the engine has returned its KV blocks
        self._steps = decoder.steps(prompt_ids)
        self._lock = threading.Lock()

    def step(self) -> StepRecord | None:
        """Advance one speculative step; None once the run is done."""
        with self._lock:
            if self.done:
                return None
            try:
                record = next(self._steps)
            except StopIteration:
                self.done = True
                return None
            except BaseException:
                self.done = True
                raise
            self.records.append(record)
            if record.finished:
                for _ in self._steps:  # let the engine leave its loop and build the RunResult
                    pass
                self.done = True
                memory.give_back()
            return record

    def stop(self) -> None:
        """Cancel the run: the engine releases every KV block it holds."""
        with self._lock:
            if not self.done:
                self._steps.close()
                self.done = True
                memory.give_back()

    @property
    def result(self) -> RunResult | None:
        """The engine's RunResult once the run is done (also after a stop)."""
        return self.decoder.result if self.done else None

    @property
    def finished(self) -> bool:
        return bool(self.records) and self.records[-1].finished


def measured_point(label: str, result: RunResult, speedup: float | None = None) -> MeasuredPoint:
    """Reduce a finished run to the expected-speedup model's terms, all from the run's records."""
    k = int(result.settings["k"])
    totals = tally(result.steps)
    return MeasuredPoint(
        label=label, alpha=result.acceptance_rate, k=k, c=draft_cost_ratio(totals.draft_s, totals.verify_s, k),
        tokens_per_verify=result.mean_accepted_tokens, speedup=speedup,
    )


@dataclass
class CompareRow:
    label: str
    result: RunResult
    speedup: float  # baseline wall time / this run's wall time, same comparison
    identical: bool | None  # same tokens as the baseline (greedy only)


MAX_POINTS = 64  # measured runs a session keeps for the worth-it view (a long session stays small)


@dataclass
class Session:
    run: Run | None = None  # step by step
    lesson_run: Run | None = None  # the classroom's live part
    playing: bool = False
    compare_rows: list[CompareRow] = field(default_factory=list)
    compare_stop: bool = False
    points: deque[MeasuredPoint] = field(default_factory=lambda: deque(maxlen=MAX_POINTS))  # the latest runs
    replay: Trace | None = None
    replay_index: int = 0
    batch: dict | None = None  # the batch-size study shown (a bench result with a batch sweep)
    lesson_frame: int = 0
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
        for run in (self.run, self.lesson_run):
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
