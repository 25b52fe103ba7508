"""Batch size: each drafter's throughput against batch size, and where speculation stops paying."""
from .state import BatchState
from .view import build

__all__ = ["BatchState", "build"]
