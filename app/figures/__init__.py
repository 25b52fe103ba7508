"""Plotly figure builders: each takes StepRecords (or measured numbers) and a language."""
from .batch import batch_figure
from .compare import compare_figure
from .kv import kv_grid_figure, pool_figure
from .live import live_figure
from .monitor import monitor_figure
from .style import empty
from .tree import tree_figure
from .worth import MeasuredPoint, worth_figure

__all__ = ["batch_figure", "compare_figure", "empty", "kv_grid_figure", "live_figure", "monitor_figure", "pool_figure", "tree_figure",
           "worth_figure", "MeasuredPoint"]
