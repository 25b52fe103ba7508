"""Production monitor: what speculation does on a Prometheus endpoint, window by window."""
from .state import MonitorState
from .view import build

__all__ = ["MonitorState", "build"]
