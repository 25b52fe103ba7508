"""The speculative step loop: propose -> verify -> accept -> commit; a StepRecorder (core.engine.recorder)
turns each step into its StepRecord.

One target forward per step verifies the whole draft tree (tree attention, depth positions);
accepted nodes keep their KV slots, the others are released. With the ``none`` drafter every
step is a plain one-token decode through the same code: the baseline.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from time import perf_counter
from typing import Iterator

import torch

from core.common.timing import disturbed, thread_wait_s, waited_since
from core.drafters.base import Drafter, ProposeContext
from core.models.loading import LoadedModel
from core.records.metrics import Tallies
from core.engine.recorder import StepOutcome, StepRecorder
from core.records.steps import RunResult, StepRecord
from core.runtime.acceptance import Acceptance, TargetView, greedy_accept, speculative_accept
from core.runtime.forward import SegmentOutput, chain_parents, run_segment
from core.runtime.head import LMHead
from core.runtime.kv_cache import CommitStats, PagedKVCache, RequestKV
from core.runtime.tree import DraftTree, with_root


MAX_GAIN_OVER_TOKENS = 1.25  # a step faster than this many plain steps a token is not timed against a true plain step


@dataclass(frozen=True)
class DecodeSettings:
    max_new_tokens: int = 64
    temperature: float = 0.0
    seed: int = 0
    block_size: int = 16
    record: bool = True  # build a StepRecord per step (off only to measure the recording's cost)
    inspect: bool = False  # record the laws behind each step's acceptance (core.records.detail), for the page


@dataclass(frozen=True, kw_only=True)
class Proposal:
    """A drafted tree waiting for the target's verify."""

    root: int  # the last committed token, the tree's root
    tree: DraftTree
    draft_s: float  # seconds the drafter took to propose ``tree``
    blocks_before: int  # blocks in the request's table before the verify
    draft_forward_s: tuple[float, ...] = ()  # seconds of each drafting forward within ``draft_s``


@dataclass
class _RunState:
    """What one run has produced so far."""

    tokens: list[int]  # prompt + output so far
    resumed_at: float | None  # perf_counter() when the engine last took over; None while it waits
    waited_at_resume: float | None = None  # thread_wait_s() then (None: the kernel does not say)
    new_tokens: list[int] = field(default_factory=list)
    totals: Tallies = field(default_factory=Tallies)  # core.records.metrics: the one definition of the run's numbers
    stop_reason: str = ""  # set when the run ends
    busy_s: float = 0.0  # the engine's own time so far, not counting waits between steps
    busy_wait_s: float = 0.0  # seconds of that time the engine's thread waited for a core (``disturbed``)

    def extend(self, emitted: list[int]) -> None:
        self.tokens += emitted
        self.new_tokens += emitted

    def suspend(self) -> None:
        """The engine hands control back (``steps()`` yields): its clock stops until ``resume``."""
        if self.resumed_at is not None:
            self.busy_s += perf_counter() - self.resumed_at
            self.busy_wait_s += waited_since(self.waited_at_resume) or 0.0
            self.resumed_at = self.waited_at_resume = None

    def resume(self) -> None:
        if self.resumed_at is None:
            self.resumed_at, self.waited_at_resume = perf_counter(), thread_wait_s()

    def clock(self) -> float:
        """The engine's own seconds on this run so far (``busy_s`` and the time since it took over)."""
        return self.busy_s + (0.0 if self.resumed_at is None else perf_counter() - self.resumed_at)

    def wait_clock(self) -> float:
        """Seconds of the engine's own time so far that its thread waited for a core (``clock``'s twin;
        a thread that resumes the run elsewhere -- another of the page's workers -- counts its own)."""
        return self.busy_wait_s + (0.0 if self.resumed_at is None else waited_since(self.waited_at_resume) or 0.0)


@dataclass(frozen=True, kw_only=True)
class _Emitted:
    """The tokens a step adds to the output: accepted nodes then the correction/bonus, cut at EOS
    and at the token budget."""

    tokens: list[int]
    kinds: list[str]  # "accepted" | "correction" | "bonus" | "target", per token


class Ending:
    """``with Ending(finish): ...`` calls ``finish(reason)`` however the block is left: ``default`` when
    it ran to its end, "cancelled" when the generator around it was closed, "error" when it raised."""

    def __init__(self, finish, default: str | None = None):
        self.finish, self.default = finish, default

    def __enter__(self) -> "Ending":
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        reason = self.default
        if kind is not None and issubclass(kind, GeneratorExit):
            reason = "cancelled"
        elif kind is not None and issubclass(kind, Exception):
            reason = "error"
        self.finish(reason)
        return False


class SpeculativeDecoder:
    """Decodes one prompt. Iterate ``steps()`` for the StepRecords; afterwards ``result`` holds the RunResult.

    Closing the iterator early (a cancelled run) or an exception inside still returns every KV
    block of the target and of the drafter. The run's ``wall_s`` is the engine's own time: the
    clock stops while ``steps()`` is suspended at a yield (a user stepping by hand, Play's delay).

    ``steps()`` is ``begin`` -> ``prefill`` -> (``make_proposal`` -> ``verify`` -> ``complete_step``)
    until ``finished`` -> ``end``. A batch (``core.engine.batch``) drives the same calls for many
    decoders, replacing only the target forwards by one forward over all of them.
    """

    def __init__(self, target: LoadedModel, drafter: Drafter, settings: DecodeSettings, run_info: dict):
        self.target = target
        self.head = LMHead.of(target.model)  # read once: the verify of every step applies it
        self.drafter = drafter
        self.settings = settings
        self.run_info = run_info  # prompt, preset, drafter, settings echoed into the result
        self.result: RunResult | None = None
        self.kv: RequestKV | None = None
        self.generator: torch.Generator | None = None  # the run's sampling generator, seeded by ``begin``
        self.prompt_ids: list[int] = []  # the run's prompt
        self.state: _RunState | None = None  # what the current run has produced so far
        self.recorder: StepRecorder | None = None  # builds the StepRecords (None with recording off)

    # ---- the four verbs ----------------------------------------------------------------------
    def propose(self, tokens: list[int], remaining: int, generator: torch.Generator) -> DraftTree:
        ctx = ProposeContext(tokens, max_depth=remaining - 1, temperature=self.settings.temperature, generator=generator,
                             clock=self.state.clock(), wait_clock=self.state.wait_clock())
        return self.drafter.propose(ctx)

    def verify(self, root: int, tree: DraftTree) -> tuple[TargetView, list[torch.Tensor]]:
        """ONE target forward over [root] + tree.

        Returns the TargetView the acceptance rule reads (logits ``[1 + len(tree), vocab]`` kept on
        the model's device), and the hidden states the drafter asked for
        (``[1 + len(tree), hidden_size]`` each).
        """
        out = self._forward([root] + tree.tokens, with_root(tree.parents))
        return TargetView.from_head(self.head, out.last_hidden, self.settings.temperature), out.hidden

    def accept(self, tree: DraftTree, target: TargetView, generator: torch.Generator) -> Acceptance:
        if self.settings.temperature > 0:
            return speculative_accept(tree, target, generator)
        return greedy_accept(tree, target)

    def commit(self, root: int, tree: DraftTree, acceptance: Acceptance, hidden: list[torch.Tensor]) -> CommitStats:
        rows = [0] + [node + 1 for node in acceptance.accepted]
        stats = self.kv.commit(rows)
        self.drafter.commit(tree, acceptance.accepted)
        self._observe([root] + [tree.tokens[n] for n in acceptance.accepted], hidden, rows)
        return stats

    def prefill(self, prompt_ids: list[int]) -> None:
        """The prompt but its last token into the cache (the body only: no logits are needed); the
        last becomes the first root."""
        prefix = list(prompt_ids[:-1])
        if prefix:
            self.commit_prefill(prefix, self._forward(prefix, chain_parents(len(prefix))).hidden)

    def commit_prefill(self, prefix: list[int], hidden: list[torch.Tensor]) -> None:
        """The prefix's K/V were just written: keep them, and show the drafter the target's hidden states."""
        rows = list(range(len(prefix)))
        self.kv.commit(rows)
        self._observe(prefix, hidden, rows)

    def _forward(self, tokens: list[int], segment_parents: list[int]) -> SegmentOutput:
        return run_segment(self.target.model, self.kv, tokens, segment_parents, self.drafter.hidden_layers)

    def _observe(self, tokens: list[int], hidden: list[torch.Tensor], rows: list[int]) -> None:
        if self.drafter.hidden_layers:
            if len(rows) == len(hidden[0]):  # every row (a plain step, the prefill): as they are
                self.drafter.observe(tokens, hidden)
            elif rows[-1] == len(rows) - 1:  # rows ascend from 0: the first len(rows), a view (a chain)
                self.drafter.observe(tokens, [h[: len(rows)] for h in hidden])
            else:
                self.drafter.observe(tokens, [h[rows] for h in hidden])

    # ---- the loop ----------------------------------------------------------------------------
    def steps(self, prompt_ids: list[int]) -> Iterator[StepRecord | None]:
        self.begin(prompt_ids)
        with Ending(self.end):
            self.prefill(prompt_ids)
            while not self.finished:
                waited = thread_wait_s()
                proposal = self.make_proposal()
                t0 = perf_counter()
                target, hidden = self.verify(proposal.root, proposal.tree)
                record = self.complete_step(proposal, target, hidden, verify_s=perf_counter() - t0,
                                            wait_s=waited_since(waited))
                self.state.suspend()  # time between steps (a user's clicks, Play's delay) is not the run's
                yield record
                self.state.resume()

    def capacity_tokens(self, prompt_len: int) -> int:
        """The most tokens this run's cache holds at once: prompt, output and one draft tree."""
        return prompt_len + self.settings.max_new_tokens + self.drafter.max_nodes + 1

    def begin(self, prompt_ids: list[int], pool: PagedKVCache | None = None) -> None:
        """Start a run: a KV request in ``pool`` (by default a pool of its own, sized for this run),
        the drafter, the tallies."""
        s = self.settings
        capacity = self.capacity_tokens(len(prompt_ids))
        if pool is None:
            pool = PagedKVCache.for_model(self.target.model, math.ceil(capacity / s.block_size) + 1, s.block_size)
        self.kv = pool.new_request()
        self.generator = torch.Generator().manual_seed(s.seed)
        self.recorder = StepRecorder(self.target.tokenizer, self.kv, self.drafter, inspect=s.inspect) if s.record else None
        self.state = _RunState(tokens=list(prompt_ids), resumed_at=perf_counter(), waited_at_resume=thread_wait_s())
        self.prompt_ids = list(prompt_ids)
        self.drafter.start(list(prompt_ids), capacity)

    @property
    def finished(self) -> bool:
        return bool(self.state.stop_reason)

    def make_proposal(self) -> Proposal:
        """This step's draft tree from the drafter, timed, with the root it hangs from."""
        run = self.state
        log = self.drafter.forward_log
        logged = len(log)
        t0 = perf_counter()
        tree = self.propose(run.tokens, self.settings.max_new_tokens - len(run.new_tokens), self.generator)
        return Proposal(root=run.tokens[-1], tree=tree, draft_s=perf_counter() - t0,
                        blocks_before=len(self.kv.block_table), draft_forward_s=tuple(log[logged:]))

    def complete_step(self, proposal: Proposal, target: TargetView, hidden: list[torch.Tensor],
                      verify_s: float, wait_s: float | None = None) -> StepRecord | None:
        """accept -> commit -> emit -> count -> stop rules; the recorder (if any) makes the StepRecord.
        ``wait_s``: seconds of the draft and the verify the thread waited for a core (None: not measured)."""
        run, tree = self.state, proposal.tree
        acceptance = self.accept(tree, target, self.generator)
        commit_stats = self.commit(proposal.root, tree, acceptance, hidden)
        emitted = self.emit(tree, acceptance)
        label = self.disturbance(proposal.draft_s, verify_s, wait_s, len(emitted.tokens))
        run.totals.add_step(drafted=len(tree), depth=max(tree.depths, default=0), accepted=len(acceptance.accepted),
                            emitted=len(emitted.tokens), draft_s=proposal.draft_s, verify_s=verify_s,
                            disturbed=bool(label))
        run.extend(emitted.tokens)
        run.stop_reason = self.stop_reason_after(emitted.tokens)
        if self.recorder is None:
            return None
        return self.recorder.step(StepOutcome(
            step_index=run.totals.steps - 1, root=proposal.root, tree=tree, target=target, acceptance=acceptance,
            emitted_tokens=emitted.tokens, emitted_kinds=emitted.kinds, commit_stats=commit_stats,
            blocks_before=proposal.blocks_before, draft_s=proposal.draft_s, verify_s=verify_s,
            draft_forward_s=proposal.draft_forward_s, new_tokens_total=len(run.new_tokens), target_forwards_total=run.totals.steps,
            run_finished=self.finished, wait_s=wait_s, disturbed=label))

    def disturbance(self, draft_s: float, verify_s: float, wait_s: float | None, emitted: int) -> str:
        """Why this step's times are not this machine's undisturbed ones ("" if they are;
        ``core.common.timing.disturbed``): its waits for a core, and its seconds against what the goodput
        controller expected -- the draft as it went, the rest as its decision said. "plain" where the step
        ran faster than its tokens allow against the plain step it is compared with (a step verifying
        more than one token costs at least a plain step): then that plain step was measured slow."""
        decision = self.drafter.decision()
        expected = decision.expected_seconds if decision is not None else None
        reason = disturbed(draft_s + verify_s, wait_s, None if expected is None else expected + draft_s)
        if not reason and decision is not None and draft_s + verify_s > 0 \
                and emitted * decision.plain_step_s / (draft_s + verify_s) > MAX_GAIN_OVER_TOKENS * emitted:
            return "plain"
        return reason

    def emit(self, tree: DraftTree, acceptance: Acceptance) -> _Emitted:
        """The step's output tokens, cut after an EOS and at the remaining budget."""
        remaining = self.settings.max_new_tokens - len(self.state.new_tokens)
        tokens = [tree.tokens[n] for n in acceptance.accepted] + [acceptance.next_token]
        kinds = ["accepted"] * len(acceptance.accepted) + [acceptance.next_kind]
        eos = self.target.eos_ids
        cut = min(remaining, next((i + 1 for i, t in enumerate(tokens) if t in eos), len(tokens)))
        return _Emitted(tokens=tokens[:cut], kinds=kinds[:cut])

    def stop_reason_after(self, emitted: list[int]) -> str:
        """Why the run ends after a step that emitted ``emitted`` ("" while it goes on)."""
        if emitted[-1] in self.target.eos_ids:
            return "eos"
        if len(self.state.new_tokens) >= self.settings.max_new_tokens:
            return "max_new_tokens"
        return ""

    def end(self, stop_reason: str | None = None) -> RunResult:
        """Return every KV block (target and drafter) and build ``result``; ``stop_reason`` (cancelled,
        error) overrides the run's own."""
        run = self.state
        if stop_reason:
            run.stop_reason = stop_reason
        run.resume()
        try:
            self.drafter.stop()
        finally:
            self.kv.release_all()
        text = self.target.tokenizer.decode(run.new_tokens, skip_special_tokens=True)
        run.suspend()
        self.result = RunResult(
            **self.run_info,
            text=text,
            tokens=run.new_tokens,
            prompt_tokens=self.prompt_ids,
            target_forwards=run.totals.steps,
            draft_forwards=self.drafter.forwards,
            draft_tokens_proposed=run.totals.draft_tokens,
            draft_tokens_accepted=run.totals.accepted_tokens,
            per_position_acceptance=run.totals.per_position_acceptance,
            wall_s=run.busy_s,
            target=self.target.path,
            draft=self.drafter.model_path,
            kv=self.kv.summary(),
            draft_kv=self.drafter.kv_summary(),
            stop_reason=run.stop_reason,
            steps=[] if self.recorder is None else self.recorder.records,
        )
        return self.result
