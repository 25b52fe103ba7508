"""The observer of the engine's step: turns what one step did into its StepRecord.

The decoder (``core.engine.decoder``) runs propose -> verify -> accept -> commit and hands each
step's facts (a ``StepOutcome``) to a ``StepRecorder``, which reads the text of every token, the
target's probability of every node, the KV cache's slot states and the drafter's own records
(EAGLE-2's expansion, the goodput controller's decision). With recording off the decoder holds no
recorder and none of this is computed.

It sits in the engine's folder, not beside the record types it fills (``core.records.steps``): it
reads the runtime's tree, acceptance and KV objects and the drafter, which themselves report with
those types. A step whose timing the CPU disturbed is labelled (``StepRecord.disturbed``).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from core.drafters.base import Drafter
from core.records.steps import KVStepRecord, NodeRecord, StepRecord, TokenRecord
from core.runtime.acceptance import Acceptance, TargetView, node_status
from core.runtime.inspect import inspect_step
from core.runtime.kv_cache import CommitStats, RequestKV
from core.runtime.tree import DraftTree


class TextTracker:
    """Turns output token ids into the text each one adds (decoding the whole output each time,
    so multi-token characters and leading spaces come out right)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.text = ""
        self._pieces: dict[int, str] = {}

    def extend(self, ids: list[int]) -> list[str]:
        added = []
        for token in ids:
            self.ids.append(token)
            text = self.tokenizer.decode(self.ids, skip_special_tokens=True)
            added.append(text[len(self.text) :] if text.startswith(self.text) else text)
            self.text = text
        return added

    def piece(self, token: int) -> str:
        """A token's own text, for tree nodes (the raw token when it is a partial character)."""
        if token not in self._pieces:
            text = self.tokenizer.decode([token])
            if "\ufffd" in text or not text:
                text = str(self.tokenizer.convert_ids_to_tokens(token))
            self._pieces[token] = text
        return self._pieces[token]


@dataclass(frozen=True, kw_only=True)
class StepOutcome:
    """The facts of one step, as the engine did it: what its StepRecord is built from. Built by keyword
    only, so two fields of one type (``draft_s`` and ``verify_s``) cannot trade places."""

    step_index: int  # 0-based
    root: int  # the last committed token the tree hung from
    tree: DraftTree
    target: TargetView
    acceptance: Acceptance
    emitted_tokens: list[int]  # tokens added to the output (accepted + next, cut at EOS / budget)
    emitted_kinds: list[str]  # "accepted" | "correction" | "bonus" | "target", per emitted token
    commit_stats: CommitStats  # the KV slots this step's commit kept and freed
    blocks_before: int  # blocks in the request's table before the verify
    draft_s: float  # seconds drafting this step's tree
    verify_s: float  # seconds of the target's verify forward
    draft_forward_s: tuple[float, ...] = ()  # seconds of each drafting forward within ``draft_s``
    new_tokens_total: int  # output tokens of the run after this step
    target_forwards_total: int  # target forwards of the run after this step (prefill not counted)
    run_finished: bool  # this step ended the run
    wait_s: float | None = None  # seconds of draft and verify the thread waited for a core (None: not measured)
    disturbed: str = ""  # why its times are not this machine's undisturbed ones (``SpeculativeDecoder.disturbance``)


@dataclass
class StepRecorder:
    """Builds one StepRecord per step of one run and keeps them (``records``)."""

    tokenizer: object
    kv: RequestKV  # the request's target cache, read after the step's commit
    drafter: Drafter
    inspect: bool = False  # also record the laws behind each acceptance (core.records.detail)
    records: list[StepRecord] = field(default_factory=list)

    def __post_init__(self):
        self.text = TextTracker(self.tokenizer)

    def step(self, outcome: StepOutcome) -> StepRecord:
        """The step's StepRecord, kept in ``records``."""
        text, tree, acceptance = self.text, outcome.tree, outcome.acceptance
        record = StepRecord(
            step=outcome.step_index,
            root=TokenRecord(outcome.root, text.piece(outcome.root), "root"),
            nodes=self._nodes(tree, acceptance, outcome.target),
            accepted_length=len(acceptance.accepted),
            next=TokenRecord(acceptance.next_token, text.piece(acceptance.next_token), acceptance.next_kind),
            emitted=[TokenRecord(t, p, k) for t, p, k in
                     zip(outcome.emitted_tokens, text.extend(outcome.emitted_tokens), outcome.emitted_kinds)],
            new_tokens_total=outcome.new_tokens_total,
            target_forwards_total=outcome.target_forwards_total,
            kv=self._kv(outcome.commit_stats, outcome.blocks_before),
            draft_kv_blocks=None if (draft_kv := self.drafter.own_kv()) is None else draft_kv.cache.pool.blocks_in_use,
            draft_s=round(outcome.draft_s, 6),
            verify_s=round(outcome.verify_s, 6),
            draft_forward_s=[round(x, 6) for x in outcome.draft_forward_s] or None,
            finished=outcome.run_finished,
            expansion=self._expansion(),
            anatomy=self.drafter.anatomy(text.piece),
            decision=self._decision(outcome),
            inspect=inspect_step(tree, outcome.target, acceptance, text.piece) if self.inspect else None,
            wait_s=None if outcome.wait_s is None else round(outcome.wait_s, 6),
            disturbed=outcome.disturbed,
        )
        self.records.append(record)
        return record

    def _nodes(self, tree: DraftTree, acceptance: Acceptance, target: TargetView) -> list[NodeRecord]:
        status = node_status(tree, acceptance.accepted)
        depths = tree.depths
        target_probs = target.node_probs(tree)
        return [
            NodeRecord(
                id=i,
                token=tree.tokens[i],
                text=self.text.piece(tree.tokens[i]),
                parent=tree.parents[i],
                depth=depths[i],
                draft_prob=round(tree.draft_probs[i], 6),
                target_prob=round(target_probs[i], 6),
                status=status[i],
                proposer=tree.proposer[i],
            )
            for i in range(len(tree))
        ]

    def _kv(self, commit: CommitStats, blocks_before: int) -> KVStepRecord:
        written = list(commit.kept_slots) + list(commit.freed_slots)
        return KVStepRecord(
            blocks_before=blocks_before,
            blocks_after=len(self.kv.block_table),
            slots_written=len(written),
            slots_freed=len(commit.freed_slots),
            freed_blocks=list(commit.freed_blocks),
            block_table=list(self.kv.block_table),
            slot_grid={str(b): g for b, g in self.kv.slot_states(written, list(commit.freed_slots)).items()},
            pool_in_use=self.kv.cache.pool.blocks_in_use,
        )

    def _expansion(self):
        expansion = self.drafter.expansion()
        return None if expansion is None else expansion.record([self.text.piece(t) for t in expansion.tokens])

    def _decision(self, outcome: StepOutcome):
        """The goodput controller's decision, with the gain the step realised over a plain step."""
        decision = self.drafter.decision()
        if decision is None:
            return None
        seconds = outcome.draft_s + outcome.verify_s
        return replace(decision, realised_gain=round(len(outcome.emitted_tokens) * decision.plain_step_s / seconds, 4)
                       if seconds > 0 else None)
