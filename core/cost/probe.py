"""The one verify probe: what verifying n tokens costs against one forward, ``verify_ratio`` =
time(n) / time(1), for one request or a batch of them.

Speculation pays only when the tokens a step gains beat what its verify costs over a plain
decode step; on a GPU a few extra query rows are nearly free (reading the weights dominates), on
a CPU they are not. The probe is the engine's own verify path: ``n`` new tokens written as a
chain after ``VERIFY_CONTEXT`` cached tokens through the paged cache (mask, positions, gather),
the decoder body, then -- with the LM head -- the head over the n rows and the argmax the greedy
rule reads. Without the head it is the body alone (what the prefill and a drafter's own catch-up
pay). With ``batch`` > 1 every one of ``batch`` requests verifies its n tokens in ONE forward, the
batch engine's path (``run_batch_body``, ``TargetView.split_from_head``): the batch-size study's
forward latency. Every (model, head, n) probe is timed by the lab's one timer
(``core.common.timing.time_interleaved``: one warm-up pass, then every probe once per repeat,
interleaved); the reported time is the median. The verify-cost curve (``core.cost.curve``), the
bench, the batch-size study and the scripts in ``bench/`` all measure with it.
"""
from __future__ import annotations

import math
from typing import Callable

import torch

from core.common.timing import time_interleaved
from core.models.loading import LoadedModel
from core.runtime.acceptance import TargetView
from core.runtime.forward import chain_parents, run_batch_body, run_segment
from core.runtime.head import LMHead
from core.runtime.kv_cache import PagedForward, PagedKVCache, RequestKV

VERIFY_SIZES = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 25, 32)
VERIFY_CONTEXT = 64  # cached tokens before each probe
VERIFY_REPEATS = 7
LATENCY_CONTEXT = 128  # cached tokens per request in the batch-size latency probe
BLOCK_SIZE = 16


def latency_context(target: LoadedModel, prompts: list[str], length: int = LATENCY_CONTEXT) -> list[int]:
    """``length`` real token ids (the prompts' own, repeated)."""
    ids = [t for p in prompts for t in target.tokenizer(p).input_ids]
    return (ids * (length // max(1, len(ids)) + 1))[:length]


def verify_probe(model, kvs: list[RequestKV], ids: list[int], head: LMHead | None,
                 forward: PagedForward | None = None) -> Callable[[], None]:
    """One verify of ``ids`` (a chain) by every request of ``kvs`` over what each holds; their slots
    are released afterwards. One request runs the engine's single-request path; several run in
    ONE batched forward through ``forward`` (the batch engine's path)."""
    parents = chain_parents(len(ids))

    @torch.inference_mode()
    def probe() -> None:
        if forward is None:
            [kv] = kvs
            out = run_segment(model, kv, ids, parents)
            if head is not None:
                TargetView.from_head(head, out.last_hidden, 0.0)  # what a greedy verify reads
        else:
            outs = run_batch_body(model, forward, kvs, [ids] * len(kvs), [parents] * len(kvs))
            if head is not None:
                TargetView.split_from_head(head, [out.last_hidden for out in outs], [0.0] * len(kvs))
        if model.device.type == "cuda":
            torch.cuda.synchronize(model.device)
        for kv in kvs:
            kv.commit([])

    return probe


def measure_verify_cost(models: dict[str, LoadedModel], context: list[int], sizes: tuple[int, ...] = VERIFY_SIZES,
                        repeats: int = VERIFY_REPEATS, heads: tuple[bool, ...] = (True, False),
                        batch: int = 1) -> dict:
    """``{"context_tokens", "repeats", "batch", "rows": [{model, lm_head, n, ms, verify_ratio}]}`` for each
    named model (``heads``: with the LM head, without it, or both); ``batch`` requests each hold
    ``context`` and verify n tokens in one forward (``ms`` is that forward's).

    ``context`` are target token ids; a model over a smaller vocabulary reads them folded into its
    own (which tokens are read does not change the cost). ``verify_ratio`` divides by the same
    model's time at ``sizes[0]`` (n = 1) with the same head setting.
    """
    probes: dict[tuple[str, bool, int], Callable[[], None]] = {}
    requests: list[RequestKV] = []
    try:
        for name, loaded in models.items():
            model, vocab = loaded.model, loaded.vocab_size
            ids = [t % vocab for t in context]
            per_request = math.ceil((len(ids) + max(sizes)) / BLOCK_SIZE) + 1
            cache = PagedKVCache.for_model(model, batch * per_request, BLOCK_SIZE)
            kvs = [cache.new_request() for _ in range(batch)]
            requests += kvs
            forward = PagedForward(cache) if batch > 1 else None
            if forward is None:
                run_segment(model, kvs[0], ids, chain_parents(len(ids)))
            else:
                run_batch_body(model, forward, kvs, [ids] * batch, [chain_parents(len(ids))] * batch)
            for kv in kvs:
                kv.commit(list(range(len(ids))))
            for lm_head in heads:
                head = LMHead.of(model) if lm_head else None
                for n in sizes:
                    probe_ids = (ids * (n // len(ids) + 1))[-n:]
                    probes[name, lm_head, n] = verify_probe(model, kvs, probe_ids, head, forward)
        times = {key: samples.median for key, samples in time_interleaved(probes, repeats).items()}
    finally:
        for kv in requests:
            kv.release_all()
    rows = [{"model": name, "lm_head": lm_head, "n": n, "ms": times[name, lm_head, n] * 1e3,
             "verify_ratio": times[name, lm_head, n] / times[name, lm_head, sizes[0]]}
            for name, lm_head, n in probes]
    return {"context_tokens": len(context), "repeats": repeats, "batch": batch, "rows": rows}


def verify_markdown(cost: dict) -> list[str]:
    """The curves as one table: rows n, columns model x (with / without the LM head)."""
    rows = cost.get("rows") or []
    if not rows:
        return []
    columns = list(dict.fromkeys((r["model"], r["lm_head"]) for r in rows))
    cell = {(r["model"], r["lm_head"], r["n"]): r for r in rows}
    one = {c: cell[(*c, min(r["n"] for r in rows))]["ms"] for c in columns}
    header = " | ".join(f"{m} {'with' if h else 'without'} LM head ({one[m, h]:.1f} ms at n=1)" for m, h in columns)
    lines = ["", f"Verify cost: time of n new tokens ÷ time of 1 (after {cost['context_tokens']} cached tokens, "
                 f"median of {cost['repeats']}, interleaved):", "", f"| n | {header} |", "|---" * (len(columns) + 1) + "|"]
    for n in sorted({r["n"] for r in rows}):
        lines.append(f"| {n} | " + " | ".join(f"{cell[(*c, n)]['verify_ratio']:.2f}" for c in columns) + " |")
    return lines
