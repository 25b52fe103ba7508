"""The numbers the live plots draw, read off a run's StepRecords.

Running values use the engine's own definitions, so after the last step they equal the
RunResult: acceptance = drafted tokens accepted / drafted tokens proposed; tokens per target
forward = new tokens / target forwards; per-position acceptance = share of drafting steps whose
draft position i was accepted.
"""
from __future__ import annotations

from dataclasses import dataclass

from core.records import StepRecord


@dataclass(frozen=True)
class RunSeries:
    steps: list[int]  # 1-based step numbers
    step_acceptance: list[float | None]  # accepted / drafted this step; None when nothing was drafted
    running_acceptance: list[float | None]
    step_tokens: list[int]  # tokens this step's one target forward yielded
    running_tokens_per_forward: list[float]
    per_position_acceptance: list[float]  # over all steps so far


def run_series(records: list[StepRecord]) -> RunSeries:
    step_acceptance, running_acceptance = [], []
    proposed = accepted = drafting_steps = 0
    accepted_at: list[int] = []
    for r in records:
        drafted = len(r.nodes)
        step_acceptance.append(r.accepted_length / drafted if drafted else None)
        if drafted:
            proposed += drafted
            accepted += r.accepted_length
            drafting_steps += 1
            depth = max(n.depth for n in r.nodes)
            accepted_at += [0] * (depth - len(accepted_at))
            for i in range(r.accepted_length):
                accepted_at[i] += 1
        running_acceptance.append(accepted / proposed if proposed else None)
    return RunSeries(
        steps=[r.step + 1 for r in records],
        step_acceptance=step_acceptance,
        running_acceptance=running_acceptance,
        step_tokens=[len(r.emitted) for r in records],
        running_tokens_per_forward=[r.new_tokens_total / r.target_forwards_total for r in records],
        per_position_acceptance=[n / drafting_steps for n in accepted_at],
    )


def draft_and_verify_seconds(records: list[StepRecord]) -> tuple[float, float]:
    """Total drafting and verifying time over the steps that drafted something."""
    drafting = [r for r in records if r.nodes]
    return sum(r.draft_s for r in drafting), sum(r.verify_s for r in drafting)
