"""The classroom's predict mode: before a step is shown, the student answers one question about it --
which drafted tokens the target keeps, which one it refuses first, how many tokens the step writes
(the last two: ``exercises``) -- then the step is revealed and scored, each kind of question apart.

A pure state machine over StepRecords: ``guess`` -- the step's drafted tree is shown without its
verdict (the draft is fixed before the verify, so nothing of the outcome leaks); ``revealed`` -- the
truth and the running score. Each drafted token the target ruled on counts once: right when the
student's keep/refuse matches the target's. A token after a miss was never reached by the
target, so no guess on it is right or wrong: it is not scored.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from core.records.steps import NodeRecord, StepRecord
from core.studies.batch_size import baseline_of

from ...palette import visible
from .exercises import KINDS, Check, check_count, check_reject


@dataclass(frozen=True)
class Score:
    right: int = 0
    total: int = 0

    def add(self, right: int, total: int) -> "Score":
        return Score(self.right + right, self.total + total)


@dataclass(frozen=True)
class Predict:
    phase: str = "idle"  # "idle" (no step drawn) | "guess" | "revealed"
    step: int = -1  # the record being guessed or shown
    picked: frozenset[int] = frozenset()  # node ids the student said the target keeps
    score: Score = field(default_factory=Score)  # the keep question's, over the run
    last: Score = field(default_factory=Score)  # the last revealed step's own score (keep)
    kind: str = "keep"  # the question asked: one of ``exercises.KINDS``
    check: Check | None = None  # the last revealed step's verdict on a reject or count question
    reject: Score = field(default_factory=Score)  # each question's score over the run
    count: Score = field(default_factory=Score)

    def next_step(self, step: int, kind: str | None = None) -> "Predict":
        """A new step was drafted (and verified behind the curtain): ask ``kind`` (default: the same question)."""
        return replace(self, phase="guess", step=step, picked=frozenset(), check=None, kind=kind or self.kind)

    def ask(self, kind: str) -> "Predict":
        """Ask another question of the step being guessed (or of the next one, once this is revealed)."""
        if kind not in KINDS:
            raise ValueError(f"unknown question {kind!r}: one of {', '.join(KINDS)}")
        return replace(self, kind=kind)

    def answer(self, record: StepRecord, guess: int | None) -> "Predict":
        """Check ``guess`` to the reject or count question against ``record``; score it if it is scored."""
        if self.phase != "guess" or record.step != self.step or self.kind == "keep":
            return self
        check = (check_reject if self.kind == "reject" else check_count)(record, guess)
        score = getattr(self, self.kind)
        if check.scored:
            score = score.add(int(check.right), 1)
        return replace(self, phase="revealed", check=check, **{self.kind: score})

    def reveal(self, record: StepRecord, picked) -> "Predict":
        """Score ``picked`` (node ids) against what the target kept; a second reveal changes nothing."""
        if self.phase != "guess" or record.step != self.step or self.kind != "keep":
            return self
        chosen = frozenset(int(p) for p in picked)
        ruled = judged(record)
        right = sum((n.id in chosen) == (n.status == "accepted") for n in ruled)
        mine = Score(right, len(ruled))
        return replace(self, phase="revealed", picked=chosen, score=self.score.add(mine.right, mine.total), last=mine)


def drafted(record: StepRecord) -> list[tuple[str, int]]:
    """The choices: (the token's text, its node id), drafted order."""
    return [(f"{n.id + 1}: {visible(n.text)}", n.id) for n in record.nodes]


def judged(record: StepRecord) -> list[NodeRecord]:
    """The drafted tokens the target kept or refused; those it never reached are not among them."""
    return [n for n in record.nodes if n.status != "not_reached"]


def hidden(record: StepRecord) -> list[NodeRecord]:
    """The step's nodes as the student sees them before the reveal: every one "proposed", no p."""
    return [replace(n, status="proposed", target_prob=float("nan")) for n in record.nodes]


@dataclass(frozen=True)
class BatchQuestion:
    """"Does <drafter> still pay at batch <batch>?", answered by a measured batch sweep."""

    drafter: str
    batch: int
    speedup: float  # the drafter's tokens per second over plain decoding's at that batch, measured
    source: str  # what it was measured on
    device: str  # "CPU" | "GPU": said beside the answer, which the lesson's quoted GPU figure stands near

    @property
    def pays(self) -> bool:
        return self.speedup > 1.0


def batch_question(result: dict | None) -> BatchQuestion | None:
    """The question a sweep (a bench result with ``batch_sweep``) answers best: at its largest batch,
    the drafter that paid at batch 1 and stopped paying soonest (else the first drafter)."""
    if not result or not result.get("batch_sweep"):
        return None
    rows = result["batch_sweep"]
    batch = max(r["batch"] for r in rows)
    speed = {(r["batch"], r["drafter"]): r["tokens_per_s"] for r in rows}
    drafters = [d for d in dict.fromkeys(r["drafter"] for r in rows)  # the lab's (vLLM's rows are beside them)
                if d != "none" and baseline_of(d) == "none" and (batch, d) in speed]
    if not drafters or (batch, "none") not in speed:
        return None
    crossover = result.get("batch_crossover") or {}
    paid_first = [d for d in drafters if (1, d) in speed and speed[1, d] > speed.get((1, "none"), float("inf"))]
    stops = sorted((crossover[d], d) for d in paid_first if crossover.get(d) is not None)
    drafter = stops[0][1] if stops else drafters[0]
    source = f"{result.get('preset', '–')}, {result.get('hardware') or result.get('device', '–')}"
    device = "GPU" if str(result.get("device", "cpu")).startswith("cuda") else "CPU"
    return BatchQuestion(drafter, batch, speed[batch, drafter] / speed[batch, "none"], source, device)
