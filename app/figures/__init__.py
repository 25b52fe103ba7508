"""Plotly figure builders that several views draw (each takes StepRecords and a language); a view's
own figures sit in its folder (``app/views/<view>/figures.py``)."""
from .kv import kv_grid_figure, pool_figure
from .live import live_figure
from .style import empty
from .tree import tree_figure

__all__ = ["empty", "kv_grid_figure", "live_figure", "pool_figure", "tree_figure"]
