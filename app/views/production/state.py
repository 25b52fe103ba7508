"""What the production monitor keeps of a browser session."""
from __future__ import annotations

from dataclasses import dataclass

from core.serving.monitor import Watch

from ...session import ViewState

DEFAULT_COST = 0.2


@dataclass
class MonitorState(ViewState):
    watch: Watch | None = None  # the readings of the endpoint polled
    cost: float = DEFAULT_COST  # the draft cost estimate, for endpoints without timings
    starts: int = 0  # counts Start and Stop presses: a tick that read across one drops its reading
