"""Classroom: the article's 我爱中国 example frame by frame, the same prompt on a real model, the
predict mode and the written lesson."""
from .state import ClassroomState
from .view import build

__all__ = ["ClassroomState", "build"]
