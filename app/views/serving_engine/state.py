"""What the serving view keeps of a browser session: its continuous batch, decoded one batched step
at a time."""
from __future__ import annotations

from dataclasses import dataclass

from core.api import build_decoder
from core.api.request import DecodeRequest
from core.engine.batch import BatchDecoder, BatchStep

from ...runs import Stepped
from ...session import ViewState


class ServingRun(Stepped):
    """A queue of requests decoded as a continuous batch (``core.engine.batch.BatchDecoder.serve``), one
    batched step at a time."""

    def __init__(self, requests: list[DecodeRequest], max_batch: int):
        built = [build_decoder(r) for r in requests]
        self.requests = requests
        self.prompts = [r.prompt for r in requests]
        self.batch = BatchDecoder([d for d, _ in built], [ids for _, ids in built], max_batch=max_batch)
        self.steps: list[BatchStep] = []
        super().__init__(self.batch.serve())  # done: every block is back

    def _take(self, batch_step: BatchStep) -> bool:
        self.steps.append(batch_step)
        return not batch_step.waiting and set(batch_step.left) == set(batch_step.records)  # the last requests left


@dataclass
class ServingState(ViewState):
    run: ServingRun | None = None  # the continuous batch
    settings: tuple = ()  # the control values it was started with

    def close(self) -> None:
        if self.run is not None:
            self.run.stop()
