"""Step by step: one run, advanced a step at a time (or played), every panel redrawn per step."""
from .state import StepperState
from .view import build

__all__ = ["StepperState", "build"]
