"""What Worth it? keeps of a browser session: where its sliders stand (the measured runs it plots
are shared: ``app.shared.Shared.points``)."""
from __future__ import annotations

from dataclasses import dataclass

from ...session import ViewState


@dataclass
class WorthState(ViewState):
    alpha: float = 0.6  # the acceptance rate slider
    k: int = 4  # the draft length slider
    c: float = 0.05  # the draft cost slider: one drafted position, in one-token target forwards
    precision: str = "float32"  # whose verify-cost curve v(n) the model reads (each measured one is drawn)
