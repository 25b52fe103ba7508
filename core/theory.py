"""The expected-speedup model of speculative decoding (Leviathan et al., 2023, section 3).

Assume every drafted token is accepted independently with probability ``alpha`` and the
draft proposes a chain of ``k`` tokens per step. One verify forward of the target then yields

    tokens_per_verify = (1 - alpha**(k + 1)) / (1 - alpha)

tokens on average (the accepted prefix plus the correction or bonus token). If one draft
forward costs ``c`` target forwards, a step costs ``k * c + 1`` target forwards of time, so

    wallclock_speedup = (1 - alpha**(k + 1)) / ((1 - alpha) * (k * c + 1)).

Worked example: alpha = 0.6, k = 4, c = 0.05 gives 2.31 tokens per verify and a 1.92x speedup.
"""
from __future__ import annotations

import math

from .errors import UserError


def _check(alpha: float, k: int, c: float = 0.0) -> None:
    if not (isinstance(alpha, (int, float)) and math.isfinite(alpha) and 0.0 <= alpha <= 1.0):
        raise UserError(f"the acceptance rate alpha must be between 0 and 1 (got {alpha!r})")
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise UserError(f"k must be a whole number >= 0 (got {k!r})")
    if not (isinstance(c, (int, float)) and math.isfinite(c) and c >= 0.0):
        raise UserError(f"the draft cost c must be a number >= 0 (got {c!r})")


def tokens_per_verify(alpha: float, k: int) -> float:
    """Expected tokens one target verify forward yields: 1 + alpha + ... + alpha**k."""
    _check(alpha, k)
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def wallclock_speedup(alpha: float, k: int, c: float) -> float:
    """Expected speedup over the target alone when one draft forward costs ``c`` target forwards."""
    _check(alpha, k, c)
    return tokens_per_verify(alpha, k) / (k * c + 1.0)


def draft_cost_ratio(draft_seconds: float, verify_seconds: float, k: int) -> float:
    """``c`` measured from a run: drafting time per drafted position over verify time.

    ``draft_seconds`` and ``verify_seconds`` are totals over the same steps, ``k`` the draft
    depth of each step; returns 0 when nothing was timed.
    """
    if draft_seconds < 0 or verify_seconds < 0:
        raise UserError("timings must be >= 0")
    if k <= 0 or verify_seconds == 0:
        return 0.0
    return draft_seconds / (k * verify_seconds)
