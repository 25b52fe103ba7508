"""Every drafter on ``gemma-270m``, held-out Chinese and English prompts, side by side in one run.

    python -m core.train.gemma_table [--max-new-tokens 48] [--threads 2] [--json FILE]

Prompts: ``assets/prompts/heldout.txt`` (openings of documents no drafter trained on), split by
language. Every drafter decodes every prompt greedily through the engine (the numbers are those
of ``core.train.heldout``: tau, acceptance, per-position acceptance, nodes per step, draft cost,
and tokens/s against ``none`` measured in the same run). Prints the markdown of docs/gemma.md.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from core.train import heldout


def main(argv: list[str] | None = None) -> int:
    from core.models.loading import load_model, resolve_preset
    from core.models.prompts import load_prompts

    parser = argparse.ArgumentParser(prog="python -m core.train.gemma_table", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", help="also write the numbers to this JSON file")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    target = load_model(resolve_preset("gemma-270m").target, "cpu")
    texts = load_prompts()
    by_language = {
        "zh": [target.tokenizer(p).input_ids for p in texts if any("\u4e00" <= c <= "\u9fff" for c in p)],
        "en": [target.tokenizer(p).input_ids for p in texts if p.isascii()],
    }
    rows = heldout.lineup(target)
    results: dict[str, list[heldout.HeldoutNumbers]] = {lang: [] for lang in by_language}
    start = time.perf_counter()
    for label, make in rows:  # one drafter at a time, both languages, so CPU load drifts hit every row alike
        for lang, prompts in by_language.items():
            results[lang].append(heldout.evaluate(target, make, prompts, label, args.max_new_tokens))
            r = results[lang][-1]
            print(f"[table] {lang} {label}: tau {r.tau:.2f} acceptance {r.acceptance:.2f} "
                  f"{r.tokens_per_s:.2f} tokens/s ({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
    names = {"zh": "Chinese", "en": "English"}
    for lang, numbers in results.items():
        print(f"\n**{names[lang]}** ({len(by_language[lang])} held-out prompts, {args.max_new_tokens} new tokens "
              f"each, greedy)\n")
        print(heldout.markdown_table(numbers, numbers[0].tokens_per_s))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({lang: [r.rounded() for r in numbers] for lang, numbers in results.items()}, f,
                      ensure_ascii=False, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
