"""The speculative step loop: propose -> verify -> accept -> commit, one StepRecord per step.

One target forward per step verifies the whole draft tree (tree attention, depth positions);
accepted nodes keep their KV slots, the others are released. With the ``none`` drafter every
step is a plain one-token decode through the same code: the baseline.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from time import perf_counter
from typing import Iterator

import torch

from .acceptance import Acceptance, greedy_accept, node_status, speculative_accept
from .drafters.base import Drafter, ProposeContext
from .forward import chain_parents, forward_segment
from .kv_cache import CommitStats, PagedKVCache, RequestKV
from .models import LoadedModel
from .records import KVStepRecord, NodeRecord, RunResult, StepRecord, TokenRecord
from .tree import DraftTree, with_root


@dataclass(frozen=True)
class DecodeSettings:
    max_new_tokens: int = 64
    temperature: float = 0.0
    seed: int = 0
    block_size: int = 16
    record: bool = True  # build a StepRecord per step (off only to measure the recording's cost)


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


class SpeculativeDecoder:
    """Decodes one prompt. Iterate ``steps()`` for the StepRecords; afterwards ``result`` holds the RunResult.

    Closing the iterator early (a cancelled run) or an exception inside still returns every KV
    block of the target and of the drafter.
    """

    def __init__(self, target: LoadedModel, drafter: Drafter, settings: DecodeSettings, run_info: dict):
        self.target = target
        self.drafter = drafter
        self.settings = settings
        self.run_info = run_info  # prompt, preset, drafter, settings echoed into the result
        self.result: RunResult | None = None
        self.kv: RequestKV | None = None

    # ---- the four verbs ----------------------------------------------------------------------
    def propose(self, tokens: list[int], remaining: int, generator: torch.Generator) -> DraftTree:
        ctx = ProposeContext(tokens, max_depth=remaining - 1, temperature=self.settings.temperature, generator=generator)
        return self.drafter.propose(ctx)

    def verify(self, root: int, tree: DraftTree) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """ONE target forward over [root] + tree.

        Returns target_probs ``[1 + len(tree), vocab]`` on CPU, and the hidden states the drafter
        asked for (``[1 + len(tree), hidden_size]`` each).
        """
        logits, hidden = self._forward([root] + tree.tokens, with_root(tree.parents))
        temperature = self.settings.temperature if self.settings.temperature > 0 else 1.0
        return torch.softmax(logits / temperature, dim=-1).cpu(), hidden

    def accept(self, tree: DraftTree, target_probs: torch.Tensor, generator: torch.Generator) -> Acceptance:
        if self.settings.temperature > 0:
            return speculative_accept(tree, target_probs, generator)
        return greedy_accept(tree, target_probs)

    def commit(self, root: int, tree: DraftTree, acceptance: Acceptance, hidden: list[torch.Tensor]) -> CommitStats:
        rows = [0] + [node + 1 for node in acceptance.accepted]
        stats = self.kv.commit(rows)
        self.drafter.commit(tree, acceptance.accepted)
        self._observe([root] + [tree.tokens[n] for n in acceptance.accepted], hidden, rows)
        return stats

    def prefill(self, prompt_ids: list[int]) -> None:
        """The prompt but its last token into the cache; the last becomes the first root."""
        if len(prompt_ids) < 2:
            return
        prefix = prompt_ids[:-1]
        _, hidden = self._forward(prefix, chain_parents(len(prefix)))
        self.kv.commit(list(range(len(prefix))))
        self._observe(prefix, hidden, list(range(len(prefix))))

    def _forward(self, tokens: list[int], segment_parents: list[int]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        layers = self.drafter.hidden_layers
        out = forward_segment(self.target.model, self.kv, tokens, segment_parents, layers)
        return out if layers else (out, [])

    def _observe(self, tokens: list[int], hidden: list[torch.Tensor], rows: list[int]) -> None:
        if self.drafter.hidden_layers:
            self.drafter.observe(tokens, [h[rows] for h in hidden])

    # ---- the loop ----------------------------------------------------------------------------
    def steps(self, prompt_ids: list[int]) -> Iterator[StepRecord | None]:
        s = self.settings
        model = self.target.model
        capacity = len(prompt_ids) + s.max_new_tokens + self.drafter.max_nodes + 1
        pool = PagedKVCache.for_model(model, math.ceil(capacity / s.block_size) + 1, s.block_size)
        self.kv = pool.new_request()
        generator = torch.Generator().manual_seed(s.seed)
        text = TextTracker(self.target.tokenizer)
        tokens = list(prompt_ids)
        new_tokens: list[int] = []
        records: list[StepRecord] = []
        proposed = accepted_total = forwards = drafted_steps = 0
        accepted_at: list[int] = []  # accepted_at[i]: steps whose draft position i+1 was accepted
        stop_reason = ""
        start = perf_counter()
        self.drafter.start(list(prompt_ids), capacity)
        try:
            self.prefill(list(prompt_ids))
            for step in range(s.max_new_tokens):
                remaining = s.max_new_tokens - len(new_tokens)
                root = tokens[-1]
                t0 = perf_counter()
                tree = self.propose(tokens, remaining, generator)
                t1 = perf_counter()
                blocks_before = len(self.kv.block_table)
                target_probs, hidden = self.verify(root, tree)
                t2 = perf_counter()
                acceptance = self.accept(tree, target_probs, generator)
                commit = self.commit(root, tree, acceptance, hidden)

                emitted = [tree.tokens[n] for n in acceptance.accepted] + [acceptance.next_token]
                kinds = ["accepted"] * len(acceptance.accepted) + [acceptance.next_kind]
                cut = next((i + 1 for i, t in enumerate(emitted) if t in self.target.eos_ids), len(emitted))
                emitted, kinds = emitted[: min(cut, remaining)], kinds[: min(cut, remaining)]
                forwards += 1
                if len(tree):
                    drafted_steps += 1
                    proposed += len(tree)
                    accepted_total += len(acceptance.accepted)
                    depth = max(tree.depths)
                    accepted_at += [0] * (depth - len(accepted_at))
                    for i in range(len(acceptance.accepted)):
                        accepted_at[i] += 1
                tokens += emitted
                new_tokens += emitted
                finished = emitted[-1] in self.target.eos_ids or len(new_tokens) >= s.max_new_tokens
                if finished:
                    stop_reason = "eos" if emitted[-1] in self.target.eos_ids else "max_new_tokens"

                record = None
                if s.record:
                    outcome = _StepOutcome(
                        step, root, tree, target_probs, acceptance, emitted, kinds, commit,
                        blocks_before, draft_s=t1 - t0, verify_s=t2 - t1, finished=finished,
                    )
                    record = self._record(outcome, text, len(new_tokens), forwards)
                    records.append(record)
                yield record
                if finished:
                    break
        except GeneratorExit:
            stop_reason = "cancelled"
            raise
        except Exception:
            stop_reason = "error"
            raise
        finally:
            self.drafter.stop()
            self.kv.release_all()
            wall = perf_counter() - start
            self.result = RunResult(
                **self.run_info,
                text=self.target.tokenizer.decode(new_tokens, skip_special_tokens=True),
                tokens=new_tokens,
                prompt_tokens=list(prompt_ids),
                target_forwards=forwards,
                draft_forwards=self.drafter.forwards,
                draft_tokens_proposed=proposed,
                draft_tokens_accepted=accepted_total,
                per_position_acceptance=[n / drafted_steps for n in accepted_at],
                wall_s=wall,
                target=self.target.path,
                draft=self.drafter.model_path,
                kv=self.kv.summary(),
                draft_kv=self.drafter.kv_summary(),
                stop_reason=stop_reason,
                steps=records,
            )

    def _record(self, o: "_StepOutcome", text: TextTracker, new_total: int, forwards: int) -> StepRecord:
        tree, acceptance = o.tree, o.acceptance
        status = node_status(tree, acceptance.accepted)
        depths = tree.depths
        nodes = [
            NodeRecord(
                id=i,
                token=tree.tokens[i],
                text=text.piece(tree.tokens[i]),
                parent=tree.parents[i],
                depth=depths[i],
                draft_prob=round(tree.draft_probs[i], 6),
                target_prob=round(float(o.target_probs[tree.parents[i] + 1, tree.tokens[i]]), 6),
                status=status[i],
                proposer=tree.proposer[i],
            )
            for i in range(len(tree))
        ]
        pieces = text.extend(o.emitted)
        emitted_records = [TokenRecord(t, p, k) for t, p, k in zip(o.emitted, pieces, o.kinds)]
        commit = o.commit
        written = list(commit.kept_slots) + list(commit.freed_slots)
        kv = KVStepRecord(
            blocks_before=o.blocks_before,
            blocks_after=len(self.kv.block_table),
            slots_written=len(written),
            slots_freed=len(commit.freed_slots),
            freed_blocks=list(commit.freed_blocks),
            block_table=list(self.kv.block_table),
            slot_grid={str(b): g for b, g in self.kv.slot_states(written, list(commit.freed_slots)).items()},
            pool_in_use=self.kv.cache.pool.blocks_in_use,
        )
        draft_kv = self.drafter.kv_summary()
        return StepRecord(
            step=o.step,
            root=TokenRecord(o.root, text.piece(o.root), "root"),
            nodes=nodes,
            accepted_length=len(acceptance.accepted),
            next=TokenRecord(acceptance.next_token, text.piece(acceptance.next_token), acceptance.next_kind),
            emitted=emitted_records,
            new_tokens_total=new_total,
            target_forwards_total=forwards,
            kv=kv,
            draft_kv_blocks=None if draft_kv is None else draft_kv["blocks_in_use_after"],
            draft_s=round(o.draft_s, 6),
            verify_s=round(o.verify_s, 6),
            finished=o.finished,
        )


@dataclass(frozen=True)
class _StepOutcome:
    """The facts of one step that its StepRecord is built from."""

    step: int
    root: int
    tree: DraftTree
    target_probs: torch.Tensor  # [1 + len(tree), vocab]
    acceptance: Acceptance
    emitted: list[int]
    kinds: list[str]
    commit: CommitStats
    blocks_before: int
    draft_s: float
    verify_s: float
    finished: bool
