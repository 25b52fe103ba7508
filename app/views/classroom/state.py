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
    told_finished: Run | None = None  # the finished run a press was told it would drop (``tell_finished``)
    # the predict mode's own run: part 2's panels (redrawn on a language switch) never show a step
    # whose verdict the class has not guessed yet
    predict_run: Run | None = None
    predict: Predict = field(default_factory=Predict)  # the predict mode over ``predict_run``
    batch_answered: bool = False  # the batch question's measured answer shows once the class has guessed

    def tell_finished(self, run: Run | None) -> bool:
        """True on the first press after ``run`` finished: that press only says so, and the next one
        may drop it for a new run. False for no run, a run going on, or one already told about."""
        if run is None or not run.done or self.told_finished is run:
            return False
        self.told_finished = run
        return True

    def close(self) -> None:
        for run in (self.run, self.predict_run):
            if run is not None:
                run.stop()
