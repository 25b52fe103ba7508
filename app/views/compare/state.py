"""What Compare keeps of a browser session."""
from __future__ import annotations

from dataclasses import dataclass

from core.studies.comparison import Comparison

from ...session import ViewState


@dataclass
class CompareState(ViewState):
    comparison: Comparison | None = None  # the last comparison (possibly still running)
    stop: bool = False  # Stop was pressed: the comparison ends after the run going on

    def close(self) -> None:
        self.stop = True
