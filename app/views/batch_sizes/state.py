"""What Batch size keeps of a browser session."""
from __future__ import annotations

from dataclasses import dataclass

from ...session import ViewState


@dataclass
class BatchState(ViewState):
    result: dict | None = None  # the batch-size study shown (a bench result with a batch sweep)
