"""The trace file's schema (docs/trace.md), typed and bounded: what a real run can write, nothing more.

Every number is bounded by the engine's own limits (tree nodes, depth, new tokens, block size,
the KV pool a run of that prompt and budget allocates) and every string and list by a length,
so a hand-made trace cannot make the Replay view build a figure no run could produce. The
fields mirror ``core.records.steps`` (a test keeps the two in step); checks that relate fields
(parents before children, the accepted path, totals, the KV grid) are model validators that
read the run's limits from the validation context.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, model_validator

from core.common.errors import UserError, counted
from core.common.limits import (MAX_ALTERNATIVES, MAX_BLOCK_SIZE, MAX_DEPTH, MAX_LABEL, MAX_MODEL_REF, MAX_NEW_TOKENS,
                         MAX_OUTPUT_CHARS, MAX_PROMPT_CHARS, MAX_PROMPT_TOKENS, MAX_REJECTION_TOKENS, MAX_SECONDS,
                         MAX_SEED, MAX_TEMPERATURE, MAX_TOKEN_ID, MAX_TOKEN_TEXT, MAX_TRACE_BYTES, MAX_TRACE_LINES,
                         MAX_TREE_NODES, MAX_WIDTH, MIB)
from core.records.steps import TRACE_SCHEMA, StepRecord, Trace

MAX_EXPANSION = MAX_WIDTH + (MAX_DEPTH - 1) * MAX_WIDTH**2  # EAGLE-2 scores top_k + (depth - 1) * top_k^2
SLOT_STATES = frozenset("LWF.")
MAX_POOL_BLOCKS = MAX_PROMPT_TOKENS + MAX_NEW_TOKENS + MAX_TREE_NODES + 3  # block size 1: one block per slot

TokenId = Annotated[int, Field(ge=0, lt=MAX_TOKEN_ID)]
Count = Annotated[int, Field(ge=0, le=MAX_PROMPT_TOKENS + MAX_NEW_TOKENS)]
RunTotal = Annotated[int, Field(ge=0, le=(MAX_PROMPT_TOKENS + MAX_NEW_TOKENS) * (MAX_TREE_NODES + 1))]
Probability = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
Seconds = Annotated[float, Field(ge=0.0, le=MAX_SECONDS, allow_inf_nan=False)]
Text = Annotated[str, Field(max_length=MAX_TOKEN_TEXT)]
Name = Annotated[str, Field(max_length=MAX_MODEL_REF)]
Label = Annotated[str, Field(max_length=MAX_LABEL)]
BlockKey = Annotated[str, Field(pattern=r"^(0|[1-9][0-9]{0,6})$")]  # a block id as a JSON object key
BlockId = Annotated[int, Field(ge=0)]  # below the pool size: checked against the run's limits


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)  # fields added later are ignored (docs/trace.md)


@dataclass(frozen=True)
class RunLimits:
    """What one run could have written: from its header (and the pool size its summary reports)."""

    block_size: int
    pool_blocks: int  # blocks in the run's target KV pool
    draft_pool_blocks: int
    max_new_tokens: int


def _limits(info: ValidationInfo) -> RunLimits:
    return info.context["limits"]


class TraceSettings(_Record):
    max_new_tokens: Annotated[int, Field(ge=1, le=MAX_NEW_TOKENS)]
    temperature: Annotated[float, Field(ge=0.0, le=MAX_TEMPERATURE, allow_inf_nan=False)]
    seed: Annotated[int, Field(ge=0, le=MAX_SEED)]
    block_size: Annotated[int, Field(ge=1, le=MAX_BLOCK_SIZE)]
    k: Annotated[int, Field(ge=1, le=MAX_DEPTH)] | None = None
    tree: Annotated[str, Field(pattern=r"^[1-8]x([1-9]|1[0-6])$")] | None = None
    ngram_n: Annotated[int, Field(ge=1, le=64)] | None = None
    draft_size: Label | None = None
    drafter_weights: Name | None = None
    medusa_choices: Annotated[str, Field(max_length=10_000)] | None = None
    eagle_nodes: Annotated[int, Field(ge=1, le=MAX_TREE_NODES)] | None = None
    device: Label | None = None
    dtype: Label | None = None
    record: bool | None = None
    inspect: bool | None = None  # steps carry the laws behind their acceptance (``inspect``)
    auto: bool | None = None  # the goodput controller chose how much of the shape to verify


class TraceHeader(_Record):
    prompt: Annotated[str, Field(max_length=MAX_PROMPT_CHARS)]
    prompt_tokens: Annotated[list[TokenId], Field(min_length=1, max_length=MAX_PROMPT_TOKENS)]
    preset: Name
    drafter: Label
    target: Name
    draft: Name | None = None
    settings: TraceSettings

    def limits(self, pool_blocks: int | None = None, draft_pool_blocks: int | None = None) -> RunLimits:
        """The run's bounds; the pools are at most what ``SpeculativeDecoder.begin`` allocates."""
        s = self.settings
        capacity = len(self.prompt_tokens) + s.max_new_tokens + MAX_TREE_NODES + 1
        most = math.ceil(capacity / s.block_size) + 1
        return RunLimits(s.block_size, min(pool_blocks or most, most), min(draft_pool_blocks or most, most),
                         s.max_new_tokens)


class KVTotals(_Record):
    block_size: Annotated[int, Field(ge=1, le=MAX_BLOCK_SIZE)]
    blocks_total: Annotated[int, Field(ge=1)]
    slots_written: RunTotal | None = None
    slots_freed: RunTotal | None = None
    blocks_allocated: RunTotal | None = None
    blocks_freed: RunTotal | None = None
    peak_blocks_in_use: Count | None = None
    blocks_in_use_after: Count | None = None


class TraceSummary(_Record):
    prompt: Annotated[str, Field(max_length=MAX_PROMPT_CHARS)] | None = None
    text: Annotated[str, Field(max_length=MAX_OUTPUT_CHARS)]
    tokens: Annotated[list[TokenId], Field(max_length=MAX_NEW_TOKENS)]
    new_tokens: Annotated[int, Field(ge=0, le=MAX_NEW_TOKENS)]
    target_forwards: Annotated[int, Field(ge=0, le=MAX_NEW_TOKENS)]
    draft_forwards: Count | None = None
    draft_tokens_proposed: Annotated[int, Field(ge=0, le=MAX_NEW_TOKENS * MAX_TREE_NODES)] | None = None
    draft_tokens_accepted: Annotated[int, Field(ge=0, le=MAX_NEW_TOKENS)] | None = None
    acceptance_rate: Probability | None = None
    mean_accepted_tokens: Annotated[float, Field(ge=0.0, le=MAX_DEPTH + 1, allow_inf_nan=False)] | None = None
    per_position_acceptance: Annotated[list[Probability], Field(max_length=MAX_DEPTH)] = []
    wall_s: Seconds | None = None
    tokens_per_s: Annotated[float, Field(ge=0.0, allow_inf_nan=False)] | None = None
    target: Name | None = None
    draft: Name | None = None
    preset: Name | None = None
    drafter: Label | None = None
    kv: KVTotals
    draft_kv: KVTotals | None = None
    stop_reason: Label = ""
    baseline_match: bool | None = None

    @model_validator(mode="after")
    def _totals(self) -> "TraceSummary":
        if self.new_tokens != len(self.tokens):
            raise ValueError(f"new_tokens is {self.new_tokens} but tokens has {len(self.tokens)}")
        if self.new_tokens and not self.target_forwards:
            raise ValueError("target_forwards is 0 although tokens were made")
        return self


class TraceNode(_Record):
    id: Annotated[int, Field(ge=0, lt=MAX_TREE_NODES)]
    token: TokenId
    text: Text
    parent: Annotated[int, Field(ge=-1, lt=MAX_TREE_NODES - 1)]
    depth: Annotated[int, Field(ge=1, le=MAX_DEPTH)]
    draft_prob: Probability
    target_prob: Probability
    status: Literal["accepted", "rejected", "not_reached"]
    proposer: Label


class TraceToken(_Record):
    token: TokenId
    text: Text
    kind: Literal["root", "accepted", "correction", "bonus", "target"]


class TraceKV(_Record):
    blocks_before: Count
    blocks_after: Count
    slots_written: Annotated[int, Field(ge=1, le=MAX_TREE_NODES + 1)]
    slots_freed: Annotated[int, Field(ge=0, le=MAX_TREE_NODES)]
    freed_blocks: Annotated[list[BlockId], Field(max_length=MAX_TREE_NODES)]
    block_table: Annotated[list[BlockId], Field(max_length=MAX_POOL_BLOCKS)]
    slot_grid: Annotated[dict[BlockKey, Annotated[str, Field(max_length=MAX_BLOCK_SIZE)]],
                         Field(max_length=MAX_POOL_BLOCKS)]
    pool_in_use: Count

    @model_validator(mode="after")
    def _fits_the_pool(self, info: ValidationInfo) -> "TraceKV":
        limits = _limits(info)
        owned, freed = set(self.block_table), set(self.freed_blocks)
        if len(owned) != len(self.block_table) or len(self.block_table) != self.blocks_after:
            raise ValueError("block_table must list blocks_after distinct blocks")
        if max(owned | freed, default=0) >= limits.pool_blocks or owned & freed:
            raise ValueError(f"block ids must be below the run's pool of {limits.pool_blocks} blocks, "
                             "and a freed block cannot stay in the block table")
        if max(self.blocks_before, self.pool_in_use) > limits.pool_blocks or self.slots_freed > self.slots_written:
            raise ValueError("block or slot counts beyond what the run's pool holds")
        if set(self.slot_grid) != {str(b) for b in owned | freed}:
            raise ValueError("slot_grid keys must be the block_table's and freed_blocks' ids")
        for block, slots in self.slot_grid.items():
            if len(slots) != limits.block_size or not SLOT_STATES.issuperset(slots):
                raise ValueError(f"slot_grid[{block}] must be {limits.block_size} characters from 'LWF.'")
        return self


class TraceExpansion(_Record):
    """EAGLE-2's scored candidates as parallel lists (``kept_as``: node id or -1)."""

    tokens: Annotated[list[TokenId], Field(max_length=MAX_EXPANSION)]
    texts: Annotated[list[Text], Field(max_length=MAX_EXPANSION)]
    parents: Annotated[list[Annotated[int, Field(ge=-1, lt=MAX_EXPANSION)]], Field(max_length=MAX_EXPANSION)]
    depths: Annotated[list[Annotated[int, Field(ge=1, le=MAX_DEPTH)]], Field(max_length=MAX_EXPANSION)]
    probs: Annotated[list[Probability], Field(max_length=MAX_EXPANSION)]
    scores: Annotated[list[Annotated[float, Field(le=0.0, ge=-1e6, allow_inf_nan=False)]],
                      Field(max_length=MAX_EXPANSION)]
    expanded: Annotated[list[bool], Field(max_length=MAX_EXPANSION)]
    kept_as: Annotated[list[Annotated[int, Field(ge=-1, lt=MAX_TREE_NODES)]], Field(max_length=MAX_EXPANSION)]

    @model_validator(mode="after")
    def _parallel(self) -> "TraceExpansion":
        n = len(self.tokens)
        if any(len(getattr(self, name)) != n for name in type(self).model_fields):
            raise ValueError("the expansion's lists must all have one entry per candidate")
        for i, (parent, depth) in enumerate(zip(self.parents, self.depths)):
            if parent >= i or depth != (1 if parent < 0 else self.depths[parent] + 1):
                raise ValueError(f"candidate {i}: its parent must come before it, one level up")
        return self


MAX_HEAD_TOP = 32  # a Medusa head's top tokens a step records: at most its deepest rank (MAX_RANK)
MAX_READ_LAYERS = 8  # the target layers a feature drafter reads (EAGLE-3: three)
MAX_LAYER = 1024


class TraceHead(_Record):
    """One Medusa head's top tokens at a step."""

    depth: Annotated[int, Field(ge=1, le=MAX_DEPTH)]
    tokens: Annotated[list[TokenId], Field(max_length=MAX_HEAD_TOP)]
    texts: Annotated[list[Text], Field(max_length=MAX_HEAD_TOP)]
    probs: Annotated[list[Probability], Field(max_length=MAX_HEAD_TOP)]

    @model_validator(mode="after")
    def _parallel(self) -> "TraceHead":
        if not len(self.tokens) == len(self.texts) == len(self.probs):
            raise ValueError("tokens, texts and probs must have one entry per head candidate")
        return self


class TraceAnatomy(_Record):
    """What a learned drafter read at a step (``core.records.steps.AnatomyRecord``)."""

    drafter: Annotated[str, Field(max_length=32)]
    heads: Annotated[list[TraceHead], Field(max_length=MAX_DEPTH)] = []
    target_layers: Annotated[list[Annotated[int, Field(ge=0, le=MAX_LAYER)]], Field(max_length=MAX_READ_LAYERS)] = []
    target_num_layers: Annotated[int, Field(ge=1, le=MAX_LAYER)] | None = None
    draft_vocab_size: Annotated[int, Field(ge=1, le=MAX_TOKEN_ID)] | None = None
    vocab_size: Annotated[int, Field(ge=1, le=MAX_TOKEN_ID)] | None = None
    ttt_steps: Annotated[int, Field(ge=1, le=MAX_DEPTH * 4)] | None = None
    feature_drafter: Annotated[str, Field(max_length=32)] | None = None

    @model_validator(mode="after")
    def _within(self) -> "TraceAnatomy":
        if self.target_num_layers is not None and any(i > self.target_num_layers for i in self.target_layers):
            raise ValueError("a read layer beyond the target's layers")
        if None not in (self.draft_vocab_size, self.vocab_size) and self.draft_vocab_size > self.vocab_size:
            raise ValueError("a draft vocabulary larger than the target's")
        return self


class TraceDecision(_Record):
    """The goodput controller's decision of a step (``--k auto``)."""

    offered: Annotated[int, Field(ge=0, le=MAX_TREE_NODES)]
    chosen: Annotated[int, Field(ge=0, le=MAX_TREE_NODES)]
    expected_tokens: Annotated[float, Field(ge=0.0, le=MAX_TREE_NODES + 1, allow_inf_nan=False)]
    expected_gain: Annotated[float, Field(ge=0.0, le=1e6, allow_inf_nan=False)]
    reason: Literal["off", "check", "empty", "none", "part", "all"]
    plain_step_s: Seconds
    realised_gain: Annotated[float, Field(ge=0.0, le=1e6, allow_inf_nan=False)] | None = None
    depth: Annotated[int, Field(ge=0, le=MAX_TREE_NODES)] | None = None
    probe: bool = False


Nats = Annotated[float, Field(ge=0.0, le=64.0, allow_inf_nan=False)]  # ln(2**24) < 17
NodeOrRoot = Annotated[int, Field(ge=-1, lt=MAX_TREE_NODES)]
Candidates = Annotated[list[Probability], Field(max_length=MAX_REJECTION_TOKENS)]


class TracePosition(_Record):
    """The target's top alternatives and entropy after one node (``core.records.detail``)."""

    parent: NodeOrRoot
    tokens: Annotated[list[TokenId], Field(max_length=MAX_ALTERNATIVES)]
    texts: Annotated[list[Text], Field(max_length=MAX_ALTERNATIVES)]
    probs: Annotated[list[Probability], Field(max_length=MAX_ALTERNATIVES)]
    entropy: Nats

    @model_validator(mode="after")
    def _parallel(self) -> "TracePosition":
        if not len(self.tokens) == len(self.texts) == len(self.probs):
            raise ValueError("tokens, texts and probs must have one entry per alternative")
        return self


class TraceRejection(_Record):
    """The refused node's laws: p, q and the residual over a few candidate tokens."""

    parent: NodeOrRoot
    tried: Annotated[list[Annotated[int, Field(ge=0, lt=MAX_TREE_NODES)]],
                     Field(min_length=1, max_length=MAX_TREE_NODES)]
    accept_probs: Annotated[list[Probability], Field(max_length=MAX_TREE_NODES)]
    temperature: Annotated[float, Field(ge=0.0, le=MAX_TEMPERATURE, allow_inf_nan=False)]
    next_token: TokenId
    tokens: Annotated[list[TokenId], Field(max_length=MAX_REJECTION_TOKENS)]
    texts: Annotated[list[Text], Field(max_length=MAX_REJECTION_TOKENS)]
    target_probs: Candidates
    target_other: Probability
    draft_probs: Candidates | None = None
    draft_other: Probability | None = None
    residual_probs: Candidates | None = None
    residual_other: Probability | None = None

    @model_validator(mode="after")
    def _parallel(self) -> "TraceRejection":
        n = len(self.tokens)
        lists = [self.texts, self.target_probs, self.draft_probs, self.residual_probs]
        if len(self.accept_probs) != len(self.tried) or any(x is not None and len(x) != n for x in lists):
            raise ValueError("one accept_prob per tried node, and one text and probability per candidate token")
        return self


class TraceInspect(_Record):
    positions: Annotated[list[TracePosition], Field(max_length=MAX_TREE_NODES + 1)]
    rejection: TraceRejection | None = None


class TraceStep(_Record):
    step: Annotated[int, Field(ge=0, lt=MAX_NEW_TOKENS)]
    root: TraceToken
    nodes: Annotated[list[TraceNode], Field(max_length=MAX_TREE_NODES)]
    accepted_length: Annotated[int, Field(ge=0, le=MAX_DEPTH)]
    next: TraceToken
    emitted: Annotated[list[TraceToken], Field(min_length=1, max_length=MAX_DEPTH + 1)]
    new_tokens_total: Annotated[int, Field(ge=1, le=MAX_NEW_TOKENS)]
    target_forwards_total: Annotated[int, Field(ge=1, le=MAX_NEW_TOKENS)]
    kv: TraceKV
    draft_kv_blocks: Count | None = None
    draft_s: Seconds
    verify_s: Seconds
    finished: bool
    expansion: TraceExpansion | None = None
    decision: TraceDecision | None = None
    inspect: TraceInspect | None = None  # traces written before it was recorded have none
    wait_s: Seconds | None = None
    disturbed: Literal["", "cpu", "slow", "plain"] = ""
    draft_forward_s: Annotated[list[Seconds], Field(max_length=MAX_DEPTH + 1)] | None = None
    anatomy: TraceAnatomy | None = None

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> "TraceStep":
        self._check_tree()
        self._check_tokens()
        limits = _limits(info)
        if self.new_tokens_total > limits.max_new_tokens:
            raise ValueError(f"new_tokens_total is beyond the run's max_new_tokens ({limits.max_new_tokens})")
        if self.draft_kv_blocks is not None and self.draft_kv_blocks > limits.draft_pool_blocks:
            raise ValueError(f"draft_kv_blocks is beyond the draft's pool of {limits.draft_pool_blocks} blocks")
        return self

    def _check_tree(self) -> None:
        """Ids in order, parents before children one level up, the accepted nodes one path from the root."""
        depth = {-1: 0}
        for i, node in enumerate(self.nodes):
            if node.id != i or node.parent >= i or node.depth != depth[node.parent] + 1:
                raise ValueError(f"nodes[{i}]: ids must be 0, 1, ... and a parent must come before its "
                                 "child, one level up")
            depth[i] = node.depth
        accepted = [n for n in self.nodes if n.status == "accepted"]
        path_ok = all(n.parent == (accepted[j - 1].id if j else -1) for j, n in enumerate(accepted))
        if len(accepted) != self.accepted_length or not path_ok:
            raise ValueError("accepted_length must count the accepted nodes, which form one path from the root")
        if self.expansion is not None and max(self.expansion.kept_as, default=-1) >= len(self.nodes):
            raise ValueError("expansion.kept_as names a node the tree does not have")
        if self.inspect is not None:
            named = [p.parent for p in self.inspect.positions]
            rejection = self.inspect.rejection
            if rejection is not None:
                named += [rejection.parent, *rejection.tried]
                if any(c >= len(self.nodes) or self.nodes[c].parent != rejection.parent for c in rejection.tried):
                    raise ValueError("inspect.rejection.tried must be children of its parent")
            if max(named, default=-1) >= len(self.nodes):
                raise ValueError("inspect names a node the tree does not have")

    def _check_tokens(self) -> None:
        if self.root.kind != "root" or self.next.kind not in ("correction", "bonus", "target"):
            raise ValueError("root.kind must be 'root' and next.kind correction, bonus or target")
        if len(self.emitted) > self.accepted_length + 1 or any(t.kind == "root" for t in self.emitted):
            raise ValueError("emitted holds at most the accepted tokens and the target's own token")


# ---- reading ----------------------------------------------------------------------------------


def _field_error(number: int, error: ValidationError) -> UserError:
    """The first problem, as ``trace line N, field a.b.c: what is wrong``."""
    first = error.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    return UserError(f"trace line {number}" + (f", field {where}" if where else "") + f": {message}")


def _validate(model: type[BaseModel], number: int, record: dict, limits: RunLimits | None = None):
    try:
        return model.model_validate(record, context={"limits": limits})
    except ValidationError as e:
        raise _field_error(number, e) from None


def _json_lines(path: Path, max_bytes: int) -> list[tuple[int, dict]]:
    """(line number, object) for every non-empty line, each checked to be a schema-1 JSON object."""
    size = path.stat().st_size
    if size > max_bytes:
        raise UserError(f"trace file is {size / MIB:.1f} MB ({size:,} bytes); the limit is "
                        f"{max_bytes / MIB:g} MB ({max_bytes:,} bytes)")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise UserError("trace file is not UTF-8 text (expected JSON lines)") from None
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if len(records) == MAX_TRACE_LINES:
            raise UserError(f"trace line {number}: a trace has at most {MAX_TRACE_LINES} lines "
                            f"(a header, at most {MAX_NEW_TOKENS} steps, a summary)")
        try:
            record = json.loads(line)
        except RecursionError:
            raise UserError(f"trace line {number} is nested too deeply") from None
        except ValueError as e:  # JSONDecodeError, or an integer with thousands of digits
            raise UserError(f"trace line {number} is not JSON: {getattr(e, 'msg', e)}") from None
        if not isinstance(record, dict) or record.get("schema") != TRACE_SCHEMA:
            raise UserError(f"trace line {number}: expected an object with \"schema\": {TRACE_SCHEMA}")
        records.append((number, record))
    if len(records) < 2 or records[0][1].get("type") != "header" or records[-1][1].get("type") != "summary":
        raise UserError("a trace starts with a header line and ends with a summary line")
    return records


def read_trace(path: str | Path, max_bytes: int = MAX_TRACE_BYTES) -> Trace:
    """Read and validate a trace file: anything a real run could not have written is a UserError
    naming the line and the field."""
    records = _json_lines(Path(path), max_bytes)
    (head_line, head), (last_line, last) = records[0], records[-1]
    header = _validate(TraceHeader, head_line, head)
    summary = _validate(TraceSummary, last_line, last)
    draft_pool = summary.draft_kv.blocks_total if summary.draft_kv else None
    limits = header.limits(summary.kv.blocks_total, draft_pool)
    if summary.kv.blocks_total > limits.pool_blocks or summary.kv.block_size != limits.block_size:
        raise UserError(f"trace line {last_line}, field kv: a pool of {summary.kv.blocks_total} blocks of "
                        f"{summary.kv.block_size} slots is not what this run allocates ({limits.pool_blocks} "
                        f"blocks of {limits.block_size} at most)")
    steps, tokens, forwards = [], 0, 0
    for index, (number, record) in enumerate(records[1:-1]):
        if record.get("type") != "step":
            raise UserError(f"trace line {number}: expected a step record")
        step = _validate(TraceStep, number, record, limits)
        tokens, forwards = tokens + len(step.emitted), forwards + 1
        if (step.step, step.new_tokens_total, step.target_forwards_total) != (index, tokens, forwards):
            raise UserError(f"trace line {number}, field step: expected step {index} with running totals "
                            f"{counted(tokens, 'new token')} and {counted(forwards, 'target forward')}")
        if step.finished and number != records[-2][0]:
            raise UserError(f"trace line {number}, field finished: only the last step can finish the run")
        steps.append(StepRecord.from_dict(step.model_dump()))
    if (summary.new_tokens, summary.target_forwards) != (tokens, forwards):
        raise UserError(f"trace line {last_line}, field new_tokens: the summary says {summary.new_tokens} new "
                        f"tokens in {summary.target_forwards} forwards, the steps {tokens} in {forwards}")
    return Trace(header=header.model_dump(), steps=steps, summary=summary.model_dump())
