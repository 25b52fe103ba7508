"""Is batched greedy decoding lossless per request on this device? Every request of every batch
against the target alone (``model.generate(do_sample=False)``, same device, same dtype).

    python bench/batch_check.py [--preset tiny] [--device auto] [--batch-sizes 1,2,4,8,16]
                                [--drafters none,draft,ngram] [--max-new-tokens 32] [--out FILE.json]

Prints one Markdown table (identical requests per batch size and drafter, KV blocks left in the
pool) and exits with status 1 if any request differs or any block leaked.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from core.api import build_batch, target_greedy
from core.engine.batch import run_batch
from core.models.loading import pick_device
from core.models.prompts import load_prompts
from core.studies.batch_size import batch_prompts, parse_batch_sizes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batch-sizes", default="1,2,4,8,16")
    parser.add_argument("--drafters", default="none,draft,ngram")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--out", help="also write the rows as JSON here")
    args = parser.parse_args()
    sizes = parse_batch_sizes(args.batch_sizes, pick_device(args.device))
    prompts = load_prompts()
    rows, expected = [], {}
    for drafter in [d.strip() for d in args.drafters.split(",") if d.strip()]:
        for size in sizes:
            chosen = batch_prompts(prompts, size)
            batch = build_batch(chosen, args.preset, drafter, max_new_tokens=args.max_new_tokens, device=args.device)
            result = run_batch(batch)
            same = 0
            for prompt, ids, run in zip(chosen, batch.prompt_ids, result.results):
                if prompt not in expected:
                    expected[prompt] = target_greedy(batch.target, ids, args.max_new_tokens)
                same += run.tokens == expected[prompt]
            rows.append({"drafter": drafter, "batch": size, "identical": same, "requests": size,
                         "blocks_in_use_after": result.blocks_in_use_after,
                         "dtype": str(batch.target.model.dtype).removeprefix("torch.")})
            print(f"{drafter} batch {size}: {same}/{size} identical", file=sys.stderr)
    print("| drafter | batch | identical to generate() | KV blocks left |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['drafter']} | {r['batch']} | {r['identical']}/{r['requests']} | {r['blocks_in_use_after']} |")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0 if all(r["identical"] == r["requests"] and r["blocks_in_use_after"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
