"""In a serving engine: a queue of requests decoded as a continuous batch, one batched verify per Step."""
from .state import ServingState
from .view import build

__all__ = ["ServingState", "build"]
