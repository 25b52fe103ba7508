"""The numbers the live plots draw, read off a run's StepRecords.

Running values are ``core.records.metrics``, the engine's own definitions, so after the last step they
equal the RunResult.
"""
from __future__ import annotations

from dataclasses import dataclass

from core.records.metrics import per_position_acceptance, running
from core.records.steps import StepRecord


@dataclass(frozen=True)
class RunSeries:
    steps: list[int]  # 1-based step numbers
    step_acceptance: list[float | None]  # accepted / drafted this step; None when nothing was drafted
    running_acceptance: list[float | None]
    step_tokens: list[int]  # tokens this step's one target forward yielded
    running_tokens_per_forward: list[float]
    per_position_acceptance: list[float]  # over all steps so far


def run_series(records: list[StepRecord]) -> RunSeries:
    running_acceptance, running_tokens = [], []
    for totals in running(records):
        running_acceptance.append(totals.acceptance_rate if totals.draft_tokens else None)
        running_tokens.append(totals.tau)
    return RunSeries(
        steps=[r.step + 1 for r in records],
        step_acceptance=[r.accepted_length / len(r.nodes) if r.nodes else None for r in records],
        running_acceptance=running_acceptance,
        step_tokens=[len(r.emitted) for r in records],
        running_tokens_per_forward=running_tokens,
        per_position_acceptance=per_position_acceptance(records),
    )
