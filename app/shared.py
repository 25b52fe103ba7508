"""What the views of one browser session truly share: the page's language, the verify-cost curve a
Compare measured (and its target), the measured runs Worth it? plots, and the session's own folder
for traces. Each view keeps the rest in its own state (``app.session.Session.of``)."""
from __future__ import annotations

import shutil
import tempfile
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from core.cost.curve import CostCurve
from core.cost.theory import run_model
from core.records.steps import StepRecord, write_trace
from core.studies.comparison import Comparison

from .runs import Run

MAX_POINTS = 64  # measured runs a session keeps for the worth-it view (a long session stays small)
MAX_UNCOSTED = 8  # Step-by-step runs whose records are kept until a curve gives them c and v


@dataclass(frozen=True)
class MeasuredPoint:
    """One finished run of this session (or a Compare set-up's repeats), reduced to what the model talks about."""

    label: str
    alpha: float  # the run's acceptance rate
    k: int  # draft depth from its settings
    draft_cost: float | None  # core.records.metrics.draft_cost: drafting time / verify time (as Compare shows it)
    c: float | None  # drafting time per drafted position, in one-token target forwards
    tokens_per_verify: float  # measured tau
    speedup: float | None  # median wall-clock speedup over the baseline of the same comparison
    v: float | None = None  # measured verify cost: verify time per step in one-token forwards
    v_model: float | None = None  # what the cost curve says its verifies cost
    predicted: float | None = None  # tau / (k*c + v_model)
    v_by_nodes: dict[int, float] = field(default_factory=dict)  # the run's own v(n) points
    tree: bool = False  # it drafted trees: alpha counts every node, siblings included
    disturbed: bool = False  # the CPU disturbed every timed step: c and v are flagged, kept off the axes' scale


def measured_point(label: str, records: list[StepRecord], k: int, speedup: float | None = None,
                   forward_s: float | None = None, curve: CostCurve | None = None) -> MeasuredPoint:
    """A run (or a set-up's repeats, pooled) as a point of the worth-it view: the expected-speedup
    model's terms (``core.cost.theory.run_model``) and its measured ``speedup``."""
    model = run_model(records, k, forward_s, curve)
    return MeasuredPoint(
        label=label, alpha=model.alpha, k=k, draft_cost=model.draft_cost, c=model.c, tokens_per_verify=model.tau,
        speedup=speedup, v=model.v, v_model=model.v_model, predicted=model.predicted, v_by_nodes=model.v_by_nodes,
        tree=any(len({n.depth for n in r.nodes}) < len(r.nodes) for r in records), disturbed=model.disturbed,
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


@dataclass
class TraceFolder:
    """The session's own folder of downloadable traces, made on the first and removed when it closes."""

    path: Path | None = None
    saved: int = 0  # traces written so far (their file names count up)

    def file(self, name: str) -> Path:
        """A file in this session's own folder (removed when the session closes)."""
        if self.path is None:
            self.path = Path(tempfile.mkdtemp(prefix="sdl-"))
        return self.path / name

    def save(self, run: Run) -> str:
        """Write a finished or stopped run's trace (JSON lines) and return its path."""
        self.saved += 1
        path = self.file(f"trace-{self.saved}.jsonl")
        write_trace(path, run.result)
        return str(path)

    def remove(self) -> None:
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)


@dataclass
class Shared:
    """What more than one view reads or writes: set by the language toggle, Compare and Step by step;
    read by every view (the language), Worth it? (the curve, the points), Step by step and Compare."""

    lang: str | None = None  # the language the toggle last switched to (None: never switched)
    # the verify-cost curves Compare measured on the last comparison's target, by target precision
    # (a target is its path or hub id, as RunResult.target names it, and a precision: float32, int8)
    cost_curves: dict[tuple[str, str], CostCurve] = field(default_factory=dict)
    points: deque[MeasuredPoint] = field(default_factory=lambda: deque(maxlen=MAX_POINTS))  # the latest runs
    # Step-by-step runs whose c and v wait for a curve: (their point, records, k, target)
    uncosted: deque = field(default_factory=lambda: deque(maxlen=MAX_UNCOSTED))
    traces: TraceFolder = field(default_factory=TraceFolder)

    def language(self, lang: str) -> str:
        """The page's language now: the toggle's last choice (``lang``), unless the visitor switched
        while a handler was running (Play, Compare), which then draws its next yields in the new one."""
        return self.lang or lang

    def curve_for(self, target: str, precision: str = "float32") -> CostCurve | None:
        """The session's verify-cost curve of ``target`` at ``precision``, if Compare measured it."""
        return self.cost_curves.get((target, precision))

    def set_curve(self, target: str, precision: str, curve: CostCurve) -> None:
        """A Compare's curve; the curves of another target than this one are let go (Worth it? draws the
        curves of one target, each precision's)."""
        self.cost_curves = {key: c for key, c in self.cost_curves.items() if key[0] == target}
        self.cost_curves[(target, precision)] = curve

    @property
    def curves(self) -> dict[str, CostCurve]:
        """The last comparison's target's curves, by precision (float32 first)."""
        return dict(sorted(((precision, c) for (_, precision), c in self.cost_curves.items()),
                           key=lambda item: item[0] != "float32"))

    def add_run(self, label: str, records: list[StepRecord], k: int, target: tuple[str, str],
                curve: CostCurve | None) -> None:
        """A finished Step-by-step run on ``target`` (its path, its precision) as a point of Worth it?; one
        whose c and v are unknown yet (no one-token forward of this machine measured) is kept, to be
        filled in once a Compare measures it."""
        point = measured_point(label, records, k, curve=curve)
        self.points.append(point)
        if point.c is None:
            self.uncosted.append((point, records, k, target))

    def cost_points(self) -> None:
        """Give the runs that had no c and v theirs, from the session's verify-cost curve (a Compare's)."""
        waiting = list(self.uncosted)
        self.uncosted.clear()
        for old, records, k, target in waiting:
            curve = self.curve_for(*target)
            if curve is None:
                self.uncosted.append((old, records, k, target))
                continue
            new = measured_point(old.label, records, k, curve=curve)
            self.points = deque((new if p is old else p for p in self.points), maxlen=MAX_POINTS)
