"""A decoding run driven one step at a time from the page (Step by step, the classroom): the engine's
generator advanced under a lock, its records kept, every step counted in the server's /metrics."""
from __future__ import annotations

import threading
from contextlib import AbstractContextManager, nullcontext

from core.api import build_decoder
from core.cost.curve import CostCurve, cached_curve
from core.engine.decoder import SpeculativeDecoder
from core.records.steps import RunResult, StepRecord
from core.api.request import DecodeRequest
from core.serving.prometheus import lab_metrics

from . import memory


def model_name(request: DecodeRequest) -> str:
    """The ``model_name`` label of a run in /metrics: the preset, or the model the visitor named."""
    return request.target or request.preset


class Stepped:
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
        with self._lock, self._stepping():
            item = self._next()
            if item is None:
                return None
            if self._take(item):
                self._finish()
            return item

    def _stepping(self) -> AbstractContextManager:
        """Entered around each step (the run counts as running in /metrics only then)."""
        return nullcontext()

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


class Run(Stepped):
    """One decoding run driven a step at a time. Once done it keeps what the page shows -- its records
    and result -- and lets the decoder go (its KV pool, the drafter's state): a session holds the size
    of what it shows, not of the run's machinery."""

    def __init__(self, request: DecodeRequest):
        decoder, prompt_ids = build_decoder(request, inspect=True)  # the page shows why each step kept what it kept
        # the server's /metrics counts every step, and the run as running only while a step is computed
        self.meter = lab_metrics().meter(model_name(request), stepped=True)
        self.request = request
        self.prompt = request.prompt
        self.decoder: SpeculativeDecoder | None = decoder  # None once the run is done
        self.target = decoder.target  # the loaded target (cached by the engine across sessions)
        self.final: RunResult | None = None  # the engine's result, once done
        self.records: list[StepRecord] = []
        super().__init__(decoder.steps(prompt_ids))  # done: the engine has returned its KV blocks

    def _stepping(self) -> AbstractContextManager:
        return self.meter.stepping()

    def _take(self, record: StepRecord) -> bool:
        self.records.append(record)
        self.meter.observe(record)
        return record.finished

    def _end(self) -> None:
        super()._end()
        self.meter.close()
        if self.decoder is not None:  # the engine has built its result on the way out
            self.final, self.decoder = self.decoder.result, None
        memory.give_back()

    def curve(self) -> CostCurve | None:
        """The target's verify-cost curve v(n) on this machine if it was measured before (by an ``auto``
        run, Compare, or ``python -m core cost``): read from the disk cache, never measured here -- a
        measurement takes seconds to minutes and would be disturbed by the run itself."""
        return cached_curve(self.target)

    @property
    def result(self) -> RunResult | None:
        """The engine's RunResult once the run is done (also after a stop)."""
        return self.final

    @property
    def finished(self) -> bool:
        return bool(self.records) and self.records[-1].finished
