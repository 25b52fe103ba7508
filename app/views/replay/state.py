"""What Replay keeps of a browser session."""
from __future__ import annotations

from dataclasses import dataclass

from core.records.steps import Trace

from ...session import ViewState


@dataclass
class ReplayState(ViewState):
    trace: Trace | None = None  # the trace loaded (uploaded, or the shipped example)
    index: int = 0  # the step shown (0-based)
