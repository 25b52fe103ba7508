"""Compare drafters: the baseline and several drafters timed on one prompt in interleaved rounds."""
from .state import CompareState
from .view import build

__all__ = ["CompareState", "build"]
