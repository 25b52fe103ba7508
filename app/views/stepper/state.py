"""What Step by step keeps of a browser session."""
from __future__ import annotations

from dataclasses import dataclass

from ...runs import Run
from ...session import ViewState


@dataclass
class StepperState(ViewState):
    run: Run | None = None  # the run going on (or the last one, done)
    playing: bool = False  # Play is advancing it
    expand_tree: bool = False  # the tree drawn whole, unreached branches unfolded

    def close(self) -> None:
        self.playing = False
        if self.run is not None:
            self.run.stop()
