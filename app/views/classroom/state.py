"""What the classroom keeps of a browser session."""
from __future__ import annotations

from dataclasses import dataclass, field

from ...runs import Run
from ...session import ViewState
from .prediction import Predict


@dataclass
class ClassroomState(ViewState):
    frame: int = 0  # part 1: the illustration's frame shown
    run: Run | None = None  # part 2: the live run
    predict: Predict = field(default_factory=Predict)  # the predict mode over the live run

    def close(self) -> None:
        if self.run is not None:
            self.run.stop()
