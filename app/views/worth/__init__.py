"""Worth it? The expected-speedup model with sliders, the verify-cost curve and the measured runs."""
from .state import WorthState
from .view import build

__all__ = ["WorthState", "build"]
