"""What the engine reports: one StepRecord per speculative step, one RunResult per run,
and the trace file (JSON lines) that stores them. The UI renders these and computes nothing.

Trace format (documented in docs/trace.md): line 1 is a ``header`` record, then one ``step``
record per step, then a ``summary`` record; every line carries ``"schema": TRACE_SCHEMA``.
``core.records.trace`` reads and validates trace files.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable

from core.common.files import write_atomic
from core.records.detail import InspectRecord, PositionRecord, RejectionRecord

TRACE_SCHEMA = 1


@dataclass(frozen=True)
class NodeRecord:
    id: int  # index in the draft tree (breadth-first)
    token: int
    text: str
    parent: int  # -1: the root (the last committed token)
    depth: int  # 1 for the root's children
    draft_prob: float  # the draft's probability of this token given its ancestors (q)
    target_prob: float  # the target's probability of this token given its ancestors (p)
    status: str  # "accepted" | "rejected" | "not_reached"
    proposer: str  # which drafter part proposed it (e.g. "draft", "ngram")


@dataclass(frozen=True)
class TokenRecord:
    token: int
    text: str  # the text this token added to the decoded output
    kind: str  # "accepted" | "correction" | "bonus" | "target"


@dataclass(frozen=True)
class KVStepRecord:
    blocks_before: int
    blocks_after: int
    slots_written: int
    slots_freed: int
    freed_blocks: list[int]
    block_table: list[int]  # after commit
    slot_grid: dict[str, str]  # block id -> one char per slot: L live, W written+kept, F freed, . free
    pool_in_use: int  # blocks of the pool in use after commit (all requests)


@dataclass(frozen=True)
class ExpansionRecord:
    """EAGLE-2's whole scored tree of one step, before pruning (candidate order: depth by depth)."""

    tokens: list[int]
    texts: list[str]
    parents: list[int]  # candidate index, -1 = the root
    depths: list[int]
    probs: list[float]  # draft probability given the parent
    scores: list[float]  # cumulative log draft probability, what EAGLE-2 ranks by
    expanded: list[bool]  # fed to the drafter to get children
    kept_as: list[int]  # index in the step's ``nodes``, or -1 if pruned


@dataclass(frozen=True)
class HeadRecord:
    """One Medusa head's reading at a step: its most likely tokens at its offset."""

    depth: int  # the tree depth it guesses (head i: depth i + 1, the token i + 2 places after the root's feature)
    tokens: list[int]  # its top tokens, most likely first
    texts: list[str]
    probs: list[float]  # its probabilities of them (at the step's temperature; softmax of the logits at 0)


@dataclass(frozen=True)
class AnatomyRecord:
    """What a learned drafter read and held at one step, from its own tensors and weights' config (the
    page's anatomy picture). ``drafter`` names the kind; the other fields are those the kind has."""

    drafter: str  # "medusa" | "eagle" | "eagle3" | "peagle" | "hybrid"
    heads: list[HeadRecord] = field(default_factory=list)  # Medusa: every head's top tokens this step
    target_layers: list[int] = field(default_factory=list)  # EAGLE family: the target hidden_states it reads
    # (indices into transformers' hidden_states: 0 the embeddings, L the last layer's output)
    target_num_layers: int | None = None  # L, the target's decoder layers
    draft_vocab_size: int | None = None  # the columns its LM head scores (None: the target's whole vocabulary)
    vocab_size: int | None = None  # the target's vocabulary
    ttt_steps: int | None = None  # training-time test steps its weights were trained with (1: none; None: not recorded)
    feature_drafter: str | None = None  # hybrid: the feature drafter beside the n-gram lookup


@dataclass(frozen=True)
class DecisionRecord:
    """What the goodput controller (``--k auto``) decided before the verify, and how it turned out."""

    offered: int  # nodes the drafter proposed (0: it was not asked this step)
    chosen: int  # nodes sent to the verify
    expected_tokens: float  # tokens the step was expected to yield (1 + expected accepted)
    expected_gain: float  # expected tokens per second over a plain decode step's
    reason: str  # "off" (drafting paused) | "check" (a plain step, timed: the controller's ``_check_due``) |
    # "empty" (nothing proposed) | "none" | "part" | "all"
    plain_step_s: float  # expected seconds of a plain one-token step
    realised_gain: float | None = None  # tokens per second of the step over a plain step's
    depth: int | None = None  # levels the drafter was asked for (0: none; None: not recorded)
    probe: bool = False  # drafting did not pay; this step drafted anyway (``depth`` levels) to measure again

    @property
    def expected_seconds(self) -> float | None:
        """What the controller expected the step to take once drafted: its tokens at the plain step's
        seconds over the expected gain -- a plain step and the larger verify's extra (a plain step:
        the plain step's seconds); the draft's own time comes on top."""
        return self.expected_tokens * self.plain_step_s / self.expected_gain if self.expected_gain > 0 else None


@dataclass(frozen=True)
class StepRecord:
    step: int  # 0-based
    root: TokenRecord  # the last committed token the tree hangs from
    nodes: list[NodeRecord]
    accepted_length: int  # drafted tokens kept
    next: TokenRecord  # correction, bonus or plain target token
    emitted: list[TokenRecord]  # tokens added to the output this step (accepted + next, cut at EOS / budget)
    new_tokens_total: int
    target_forwards_total: int
    kv: KVStepRecord
    draft_kv_blocks: int | None  # blocks the draft model's cache holds after the step, if any
    draft_s: float
    verify_s: float
    finished: bool
    expansion: ExpansionRecord | None = None  # EAGLE-2's tree before pruning; None for drafters that do not prune
    decision: DecisionRecord | None = None  # the goodput controller's, with --k auto / --tree auto
    inspect: InspectRecord | None = None  # the laws behind the acceptance (DecodeSettings.inspect)
    wait_s: float | None = None  # seconds of draft and verify the engine's thread waited for a core (None: not measured)
    disturbed: str = ""  # "" | "cpu" | "slow" | "plain": why its times are not this machine's undisturbed
    # times (``core.common.timing.disturbed``); counts are facts either way
    draft_forward_s: list[float] | None = None  # seconds of each drafting forward within draft_s (None: none timed)
    anatomy: AnatomyRecord | None = None  # what a learned drafter read this step (None: not a learned drafter)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": TRACE_SCHEMA, "type": "step", **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "StepRecord":
        """Rebuild from ``to_dict`` output; fields this version does not know are ignored."""
        data = _known_fields(cls, data)
        data["root"] = TokenRecord(**_known_fields(TokenRecord, data["root"]))
        data["next"] = TokenRecord(**_known_fields(TokenRecord, data["next"]))
        data["emitted"] = [TokenRecord(**_known_fields(TokenRecord, t)) for t in data["emitted"]]
        data["nodes"] = [NodeRecord(**_known_fields(NodeRecord, n)) for n in data["nodes"]]
        data["kv"] = KVStepRecord(**_known_fields(KVStepRecord, data["kv"]))
        if data.get("expansion") is not None:
            data["expansion"] = ExpansionRecord(**_known_fields(ExpansionRecord, data["expansion"]))
        if data.get("decision") is not None:
            data["decision"] = DecisionRecord(**_known_fields(DecisionRecord, data["decision"]))
        if data.get("anatomy") is not None:
            anatomy = _known_fields(AnatomyRecord, data["anatomy"])
            anatomy["heads"] = [HeadRecord(**_known_fields(HeadRecord, h)) for h in anatomy.get("heads", [])]
            data["anatomy"] = AnatomyRecord(**anatomy)
        if data.get("inspect") is not None:
            inspect, rejection = data["inspect"], data["inspect"].get("rejection")
            data["inspect"] = InspectRecord(
                [PositionRecord(**_known_fields(PositionRecord, p)) for p in inspect.get("positions", [])],
                None if rejection is None else RejectionRecord(**_known_fields(RejectionRecord, rejection)))
        return cls(**data)


def _known_fields(cls, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass
class RunResult:
    """Everything ``python -m core generate --json`` prints (``to_dict``)."""

    prompt: str
    text: str
    tokens: list[int]
    prompt_tokens: list[int]
    target_forwards: int
    draft_forwards: int
    draft_tokens_proposed: int
    draft_tokens_accepted: int
    per_position_acceptance: list[float]
    wall_s: float  # the engine's own time (prefill, steps, clean-up); waits between stepped steps excluded
    target: str
    draft: str | None
    preset: str
    drafter: str
    settings: dict[str, Any]
    kv: dict[str, int]
    draft_kv: dict[str, int] | None = None
    stop_reason: str = ""
    baseline_match: bool | None = None
    trace_error: str | None = None  # set when the run finished but its trace file could not be written
    steps: list[StepRecord] = field(default_factory=list, repr=False)

    @property
    def new_tokens(self) -> int:
        return len(self.tokens)

    @property
    def acceptance_rate(self) -> float:
        return self.draft_tokens_accepted / self.draft_tokens_proposed if self.draft_tokens_proposed else 0.0

    @property
    def tau(self) -> float:
        """τ: new tokens per target verify forward, correction or bonus token included (not vLLM's
        mean acceptance length, 1 + accepted / drafts: ``core.records.metrics.Tallies``). The
        ``--json`` object and the trace summary carry it as ``mean_accepted_tokens`` (schema 1)."""
        return self.new_tokens / self.target_forwards if self.target_forwards else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k != "steps"}
        data.update(
            new_tokens=self.new_tokens,
            acceptance_rate=self.acceptance_rate,
            mean_accepted_tokens=self.tau,  # schema 1's name of tau
            tokens_per_s=self.tokens_per_s,
        )
        for optional in ("baseline_match", "trace_error"):
            if data[optional] is None:
                del data[optional]
        return data


# ---- trace files ------------------------------------------------------------------------------
def trace_lines(header: dict[str, Any], steps: Iterable[StepRecord], summary: dict[str, Any]) -> Iterable[str]:
    yield json.dumps({"schema": TRACE_SCHEMA, "type": "header", **header}, ensure_ascii=False)
    for step in steps:
        yield json.dumps(step.to_dict(), ensure_ascii=False)
    yield json.dumps({"schema": TRACE_SCHEMA, "type": "summary", **summary}, ensure_ascii=False)


def write_trace(path: str | Path, result: RunResult) -> None:
    header = {
        "prompt": result.prompt,
        "prompt_tokens": result.prompt_tokens,
        "preset": result.preset,
        "drafter": result.drafter,
        "target": result.target,
        "draft": result.draft,
        "settings": result.settings,
    }
    def write(tmp: Path) -> None:  # a failed write (a full disk) leaves the previous trace whole
        with open(tmp, "w", encoding="utf-8") as f:
            for line in trace_lines(header, result.steps, result.to_dict()):
                f.write(line + "\n")

    write_atomic(path, write)


@dataclass
class Trace:
    header: dict[str, Any]
    steps: list[StepRecord]
    summary: dict[str, Any]
