"""Where a verify's time goes: mask building, the body (and its kernels), the LM head, the argmax.

    python bench/profile_verify.py [--preset gemma-270m] [--sizes 1,5,25] [--repeats 10] [--threads 2]

The probe is ``core.cost.probe``'s (n new tokens as a chain after 64 cached tokens, the engine's
own verify path). The mask column times building the 4D mask and positions alone; the body
column includes that same work. Each section is timed with ``torch.profiler`` over every repeat, all sizes
interleaved after a warm-up; prints milliseconds per verify per section, then the body's
heaviest kernels (self CPU time) per size. The cores may be shared: compare columns, not runs.
"""
from __future__ import annotations

import argparse
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from core.cost.probe import VERIFY_CONTEXT, latency_context
from core.models.loading import load_model, resolve_preset
from core.models.prompts import HELDOUT_PROMPTS, load_prompts
from core.runtime.acceptance import TargetView
from core.runtime.forward import _segment_inputs, chain_parents, run_segment
from core.runtime.head import LMHead
from core.runtime.kv_cache import PagedKVCache

SECTIONS = ("mask", "body", "lm_head", "argmax")


@torch.inference_mode()
def verify_sections(model, kv, ids: list[int], head: LMHead, tag: str) -> None:
    """One verify of ``ids`` with each section labelled ``tag:section`` for the profiler."""
    with record_function(f"{tag}:mask"):
        _segment_inputs(model, kv, len(ids), chain_parents(len(ids)))  # what run_segment builds first
    with record_function(f"{tag}:body"):
        out = run_segment(model, kv, ids, chain_parents(len(ids)))
    with record_function(f"{tag}:lm_head"):
        logits = head(out.last_hidden)
    with record_function(f"{tag}:argmax"):
        TargetView.of(logits)
    kv.commit([])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="gemma-270m")
    parser.add_argument("--sizes", default="1,5,25")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sizes = [int(s) for s in args.sizes.split(",")]
    target = load_model(resolve_preset(args.preset).target, "cpu")
    model, head = target.model, LMHead.of(target.model)
    context = latency_context(target, load_prompts(HELDOUT_PROMPTS), VERIFY_CONTEXT)
    kv = PagedKVCache.for_model(model, -(-(len(context) + max(sizes)) // 16) + 1, 16).new_request()
    run_segment(model, kv, context, chain_parents(len(context)))
    kv.commit(list(range(len(context))))
    for n in sizes:  # warm-up
        verify_sections(model, kv, context[-n:], head, f"n={n}")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(args.repeats):
            for n in sizes:
                with record_function(f"verify n={n}"):
                    verify_sections(model, kv, context[-n:], head, f"n={n}")
    kv.release_all()
    report(prof, sizes, args)


def report(prof, sizes: list[int], args) -> None:
    events = prof.key_averages()
    ms = {e.key: e.cpu_time_total / 1e3 / args.repeats for e in events}
    print(f"ms per verify after {VERIFY_CONTEXT} cached tokens, {args.preset}, {args.threads} thread(s), "
          f"{args.repeats} repeats\n")
    print("| n | total | " + " | ".join(SECTIONS) + " | total ÷ total(n=1) |\n" + "|---" * (len(SECTIONS) + 3) + "|")
    for n in sizes:
        cells = " | ".join(f"{ms.get(f'n={n}:{s}', 0):.1f}" for s in SECTIONS)
        total = ms[f"verify n={n}"]
        print(f"| {n} | {total:.1f} | {cells} | {total / ms[f'verify n={sizes[0]}']:.2f} |")
    kernels: dict[int, dict[str, float]] = defaultdict(dict)
    for n in sizes:  # self time of each op under this size's body
        body = prof.profiler.function_events
        for event in body:
            if event.name == f"n={n}:body":
                for child in _descendants(event):
                    kernels[n][child.name] = kernels[n].get(child.name, 0) + child.self_cpu_time_total / 1e3 / args.repeats
    print("\nThe body's heaviest kernels (self ms per verify):\n")
    for n in sizes:
        top = sorted(kernels[n].items(), key=lambda kv: -kv[1])[:6]
        print(f"- n={n}: " + ", ".join(f"{name} {t:.1f}" for name, t in top))


def _descendants(event):
    for child in event.cpu_children:
        yield child
        yield from _descendants(child)


if __name__ == "__main__":
    main()
