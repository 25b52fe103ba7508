"""Replay: step through a saved trace with no model loaded."""
from .state import ReplayState
from .view import build

__all__ = ["ReplayState", "build"]
