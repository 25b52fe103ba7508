"""Batched speculative decoding: several requests decoded together, ONE target forward per step.

Each request keeps everything of its own that the single-request engine has -- a
``SpeculativeDecoder`` with its drafter, acceptance, tallies and StepRecords, and a ``RequestKV``
(block table, slot mapping) -- but all requests' KV live in ONE shared block pool, and the
target's forwards are batched: the prefill of every prompt is one forward, then each step is one
forward over every active request's ``[root] + tree``, padded to the longest (a per-request 4D
tree mask and position ids; padding rows are never written to the cache). Acceptance is ragged:
each request accepts its own prefix and commits (or frees) its own slots. A request that reaches
EOS or its token budget leaves the batch and returns its blocks at once; the others go on.
With ``max_batch`` below the number of prompts the batch is continuous: the waiting requests join,
in order, as places free up (``BatchDecoder.serve`` yields a ``BatchStep`` per forward saying who
joined, who left, each request's StepRecord and its drafter's own KV).

Drafting runs per request (each drafter object proposes for its own request); only the target's
forwards are batched. With greedy decoding every request's output is token for token what it is
alone (and what ``model.generate`` gives); with sampling each request draws from its own
generator, seeded as it would be alone.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from time import perf_counter
from typing import Iterator

from core.engine.decoder import Ending, SpeculativeDecoder
from core.common.errors import UserError
from core.records.steps import KVStepRecord, RunResult, StepRecord
from core.runtime.acceptance import TargetView
from core.runtime.forward import chain_parents, run_batch_body
from core.runtime.kv_cache import PagedForward, PagedKVCache
from core.runtime.tree import with_root

MAX_BATCH = {"cpu": 16, "cuda": 64}


def max_batch(device) -> int:
    """The largest batch allowed on this device type (16 on CPU, 64 on CUDA)."""
    return MAX_BATCH.get(getattr(device, "type", str(device)), MAX_BATCH["cpu"])


def check_batch_size(batch: int, device) -> None:
    limit = max_batch(device)
    if not isinstance(batch, int) or not 1 <= batch <= limit:
        raise UserError(f"batch size must be between 1 and {limit} on {getattr(device, 'type', device)} (got {batch!r})")


@dataclass
class BatchResult:
    """Per-request RunResults (in request order) and the batch's own totals."""

    results: list[RunResult]
    wall_s: float
    target_forwards: int  # batched verify forwards (the prefill not counted)
    peak_blocks_in_use: int  # of the shared pool
    blocks_in_use_after: int
    stop_reason: str  # "done" | "cancelled" | "error"

    @property
    def new_tokens(self) -> int:
        return sum(r.new_tokens for r in self.results)

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.wall_s if self.wall_s > 0 else 0.0


@dataclass(frozen=True)
class BatchStep:
    """One batched verify forward of a (continuous) batch, as the engine did it.

    Request indices are positions in the batch's prompt list (its queue order).
    """

    step: int  # 0-based batched verify forward
    records: dict[int, StepRecord | None]  # request -> its own StepRecord, for every request in this forward
    joined: list[int]  # admitted and prefilled just before this forward
    left: list[int]  # finished with this step: their blocks are back in the pool
    waiting: list[int]  # still queued after this step
    prefix_tokens: dict[int, int]  # request -> committed tokens its tree hung from (its mask's prefix columns)
    query_rows: int  # rows per request in the padded forward: the longest [root] + tree
    draft_kv: dict[int, KVStepRecord]  # request -> its drafter's own cache this step, for drafters that have one
    returned_blocks: dict[int, int]  # leaving request -> target blocks it returned to the shared pool
    pool_in_use: int  # blocks of the shared pool in use after the step (leavers' blocks returned)
    pool_blocks: int  # blocks in the shared pool
    verify_s: float  # seconds of the batched verify forward


class BatchDecoder:
    """Decodes several prompts together. Iterate ``steps()``: one ``{request index: StepRecord}``
    per batched target forward (only the requests in it); or ``serve()``: one ``BatchStep`` per
    forward. Afterwards ``result``.

    Continuous batching: with ``max_batch`` smaller than the number of prompts, at most
    ``max_batch`` requests decode at once; the rest wait in a queue (in prompt order) and the next
    one joins -- prefilled in a forward of its own -- as soon as a running request finishes and
    returns its blocks. The shared pool is sized for the ``max_batch`` largest requests.

    Closing the iterator early (a cancel) or an exception returns every block of the shared pool
    and of every drafter.
    """

    def __init__(self, decoders: list[SpeculativeDecoder], prompt_ids: list[list[int]], max_batch: int | None = None):
        if len(decoders) != len(prompt_ids) or not decoders:
            raise UserError("a batch needs one prompt per decoder, and at least one")
        target = decoders[0].target
        self.max_running = len(decoders) if max_batch is None else max_batch
        check_batch_size(self.max_running, target.device)
        if any(d.target is not target for d in decoders):
            raise UserError("every request of a batch must use the same target model")
        if len({d.settings.block_size for d in decoders}) != 1:
            raise UserError("every request of a batch must use the same KV block size")
        self.decoders = decoders
        self.prompt_ids = [list(ids) for ids in prompt_ids]
        self.target = target
        # the target hidden states any drafter observes, in one forward
        self.hidden_layers = tuple(sorted({layer for d in decoders for layer in d.drafter.hidden_layers}))
        self.pool: PagedKVCache | None = None
        self.result: BatchResult | None = None

    def steps(self) -> Iterator[dict[int, StepRecord | None]]:
        served = self.serve()
        try:
            for batch_step in served:
                yield batch_step.records
        finally:
            served.close()  # a cancel reaches the serving loop, which returns every block

    def serve(self) -> Iterator[BatchStep]:
        start = perf_counter()
        self.pool = self._shared_pool()
        forward = PagedForward(self.pool)
        queue = list(range(len(self.decoders)))
        running: list[int] = []
        forwards = 0
        with Ending(lambda reason: self._end(reason, running, forwards, start), default="done"):
            joined = self._admit(forward, queue, running)
            while running:
                batch_step = self._serve_step(forward, running, joined, queue, forwards)
                forwards += 1
                waiting = list(running)
                for i in waiting:  # time between steps (a user's clicks) is not the requests' engine time
                    self.decoders[i].state.suspend()
                yield batch_step
                for i in waiting:
                    self.decoders[i].state.resume()
                joined = self._admit(forward, queue, running)

    def _end(self, stop_reason: str, running: list[int], forwards: int, start: float) -> None:
        """Return the blocks of every request still running and build ``result``."""
        for i in running:
            self.decoders[i].end(stop_reason)
        self.result = BatchResult(
            results=[d.result for d in self.decoders if d.result is not None],
            wall_s=perf_counter() - start,
            target_forwards=forwards,
            peak_blocks_in_use=self.pool.pool.peak_in_use,
            blocks_in_use_after=self.pool.pool.blocks_in_use,
            stop_reason=stop_reason,
        )

    def _admit(self, forward: PagedForward, queue: list[int], running: list[int]) -> list[int]:
        """Move queued requests into the batch while there is room; prefill them together."""
        joined = []
        while queue and len(running) < self.max_running:
            i = queue.pop(0)
            self.decoders[i].begin(self.prompt_ids[i], self.pool)
            running.append(i)
            joined.append(i)
        self._prefill(forward, joined)
        return joined

    def _serve_step(self, forward: PagedForward, running: list[int], joined: list[int], queue: list[int],
                    step: int) -> BatchStep:
        """One step of the running requests; the finished ones leave and return their blocks."""
        prefix = {i: len(self.decoders[i].kv.committed) for i in running}
        for kv in filter(None, map(self._draft_kv, running)):
            kv.begin_step()
        records, verify_s, rows = self._step(forward, running)
        draft_kv = {i: kv.step_record() for i in running if (kv := self._draft_kv(i)) is not None}
        left, returned = [], {}
        for i in list(running):
            if self.decoders[i].finished:
                returned[i] = len(self.decoders[i].kv.block_table)
                self.decoders[i].end()  # its blocks go back to the pool now
                running.remove(i)
                left.append(i)
        return BatchStep(step=step, records=records, joined=joined, left=left, waiting=list(queue),
                         prefix_tokens=prefix, query_rows=rows, draft_kv=draft_kv, returned_blocks=returned,
                         pool_in_use=self.pool.pool.blocks_in_use, pool_blocks=self.pool.pool.num_blocks,
                         verify_s=verify_s)

    def _draft_kv(self, i: int):
        """Request ``i``'s drafter cache (``RequestKV``), if its drafter has one."""
        return self.decoders[i].drafter.own_kv()

    def _shared_pool(self) -> PagedKVCache:
        """One pool with room for the ``max_batch`` largest requests at their largest (as each would
        size its own): no more than that many hold blocks at once."""
        block_size = self.decoders[0].settings.block_size
        need = sorted((math.ceil(d.capacity_tokens(len(ids)) / block_size) + 1
                       for d, ids in zip(self.decoders, self.prompt_ids)), reverse=True)
        blocks = sum(need[: self.max_running])
        return PagedKVCache.for_model(self.target.model, blocks, block_size)

    def _prefill(self, forward: PagedForward, which: list[int]) -> None:
        """Requests ``which``: every prompt but its last token, in one forward (prompts of one token
        have nothing to prefill)."""
        todo = [i for i in which if len(self.prompt_ids[i]) > 1]
        if not todo:
            return
        prefixes = [self.prompt_ids[i][:-1] for i in todo]
        outs = self._forward(forward, todo, prefixes, [chain_parents(len(p)) for p in prefixes])
        for i, prefix, (_, hidden) in zip(todo, prefixes, outs):
            self.decoders[i].commit_prefill(prefix, hidden)

    def _step(self, forward: PagedForward, running: list[int]) -> tuple[dict[int, StepRecord | None], float, int]:
        """propose (per request) -> ONE verify forward over all trees -> accept and commit (per request).
        Returns the records, the verify's seconds and its rows per request (padded)."""
        proposals = {i: self.decoders[i].make_proposal() for i in running}
        inputs = [[proposals[i].root] + proposals[i].tree.tokens for i in running]
        t0 = perf_counter()
        outs = self._forward(forward, running, inputs, [with_root(proposals[i].tree.parents) for i in running],
                             head=True)
        verify_s = perf_counter() - t0
        records = {}
        for i, (view, hidden) in zip(running, outs):
            records[i] = self.decoders[i].complete_step(proposals[i], view, hidden, verify_s)
        return records, verify_s, max(len(row) for row in inputs)

    def _forward(self, forward: PagedForward, which: list[int], input_ids, parents, head: bool = False):
        """One target forward for requests ``which``: per request its TargetView (with ``head``: the LM
        head over every request's rows in one product; else None) and the hidden layers its drafter
        asked for."""
        kvs = [self.decoders[i].kv for i in which]
        outs = run_batch_body(self.target.model, forward, kvs, input_ids, parents, self.hidden_layers)
        views = (TargetView.split_from_head(self.decoders[0].head, [o.last_hidden for o in outs],
                                            [self.decoders[i].settings.temperature for i in which])
                 if head else [None] * len(outs))
        layers = [[self.hidden_layers.index(layer) for layer in self.decoders[i].drafter.hidden_layers] for i in which]
        return [(view, [out.hidden[j] for j in mine]) for view, out, mine in zip(views, outs, layers)]


def run_batch(batch: BatchDecoder) -> BatchResult:
    """Decode the whole batch; returns its result."""
    for _ in batch.steps():
        pass
    return batch.result
