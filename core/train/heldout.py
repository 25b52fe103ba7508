"""Drafters on held-out prompts, greedy: tau, acceptance, per-position acceptance, draft cost.

Prompts are ``assets/prompts/heldout.txt``: openings of held-out documents of each corpus
source (never trained on, by the target or by any drafter); ``--prompts chat`` takes the
chat-style set ``assets/prompts/chat.txt`` instead. Each drafter decodes every prompt through the
real engine; the numbers are pooled over all prompts:

* ``tau`` -- new tokens per target forward (``RunResult.tau``);
* ``acceptance`` -- drafted tokens accepted / drafted tokens proposed;
* ``per_position[i]`` -- share of drafting steps whose token at depth i+1 was accepted;
* ``draft_cost`` -- drafting time per step / verify (one target forward) time per step;
* ``speedup`` -- tokens/s against the ``none`` drafter in the same run (CPU timings: noisy).

    python -m core.train.heldout --preset tiny            # prints the table of docs/drafters.md
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass

from core.drafters.base import Drafter
from core.engine.decoder import DecodeSettings, SpeculativeDecoder
from core.models.prompts import load_prompts
from core.records.metrics import Tallies

HELDOUT_NEW_TOKENS = 64  # tokens each held-out prompt is decoded for (not a limit: that is core.common.limits.MAX_NEW_TOKENS)


@dataclass
class HeldoutNumbers:
    label: str
    tau: float
    acceptance: float
    per_position: list[float]
    proposed_per_step: float
    draft_cost: float
    tokens_per_s: float
    prompts: int

    def rounded(self) -> dict:
        data = asdict(self)
        data.update({k: round(v, 3) for k, v in data.items() if isinstance(v, float)})
        data["per_position"] = [round(v, 3) for v in self.per_position]
        return data


def heldout_prompts(target, prompts: str = "heldout") -> list[list[int]]:
    """Token ids of a held-out prompt set (``heldout``: book-style, ``chat``: chat-style; or a file)."""
    return [target.tokenizer(prompt).input_ids for prompt in load_prompts(prompts)]


def evaluate(target, make_drafter: Callable[[], Drafter], prompts: list[list[int]], label: str,
             max_new_tokens: int = HELDOUT_NEW_TOKENS) -> HeldoutNumbers:
    """Decode every prompt greedily with a fresh drafter from ``make_drafter``; pool the counts."""
    totals = Tallies()
    wall = 0.0
    settings = DecodeSettings(max_new_tokens=max_new_tokens, temperature=0.0)
    for ids in prompts:
        decoder = SpeculativeDecoder(target, make_drafter(), settings,
                                     {"prompt": "", "preset": "", "drafter": label, "settings": {}})
        for step in decoder.steps(ids):
            totals.add(step)
        wall += decoder.result.wall_s
    return HeldoutNumbers(
        label=label,
        tau=totals.tau,
        acceptance=totals.acceptance_rate,
        per_position=totals.per_position_acceptance,
        proposed_per_step=totals.draft_tokens / totals.steps,
        draft_cost=totals.draft_cost or 0.0,
        tokens_per_s=totals.new_tokens / wall,
        prompts=len(prompts),
    )


def record_in_folder(target, kind: str, saved: dict, folder, module,
                     lineup: list[tuple[str, Callable[[], Drafter]]]) -> None:
    """After training: held-out numbers of each (label, factory) into ``saved["heldout"]``, saved
    with ``module``'s weights in ``folder`` (``config.json``), and printed."""
    from core.drafters.weights import save_folder

    prompts = heldout_prompts(target)
    results = [evaluate(target, factory, prompts, label) for label, factory in lineup]
    saved["heldout"] = [r.rounded() for r in results]
    save_folder(folder, saved, module)
    for r in results:
        print(f"[{kind}] held-out {r.label}: tau {r.tau:.2f} acceptance {r.acceptance:.2f} "
              f"per position {[round(p, 2) for p in r.per_position]}", file=sys.stderr)


def markdown_table(rows: list[HeldoutNumbers], baseline_tokens_per_s: float) -> str:
    depth = max((len(r.per_position) for r in rows), default=0)
    head = ["drafter", "τ", "acceptance", *[f"pos {i + 1}" for i in range(depth)], "nodes/step",
            "draft cost", "speedup"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        positions = [f"{p:.2f}" for p in r.per_position] + ["–"] * (depth - len(r.per_position))
        lines.append("| " + " | ".join([
            r.label, f"{r.tau:.2f}", f"{r.acceptance:.2f}", *positions, f"{r.proposed_per_step:.1f}",
            f"{r.draft_cost:.2f}", f"{r.tokens_per_s / baseline_tokens_per_s:.2f}×",
        ]) + " |")
    return "\n".join(lines)


# ---- the table of docs/drafters.md ----------------------------------------------------------
def lineup(target) -> list[tuple[str, Callable[[], Drafter]]]:
    """Every drafter of the comparison whose weights exist for ``target``, as (label, factory):
    the draft models of each size, ngram, then the learned drafters (and EAGLE-3's no-TTT ablation)."""
    from core.drafters.base import DraftShape
    from core.drafters.draft_model import DraftModelDrafter
    from core.drafters.eagle import Eagle3Drafter, EagleDrafter
    from core.drafters.medusa import MedusaDrafter
    from core.drafters.ngram import NgramDrafter
    from core.drafters.none import NoDrafter
    from core.models.loading import check_same_tokenizer, drafter_home, load_model

    chain4, chain5, tree = DraftShape(1, 4), DraftShape(1, 5), DraftShape(4, 5)
    vocab = target.vocab_size
    home = drafter_home(target.path)
    rows: list[tuple[str, Callable[[], Drafter]]] = [("none", NoDrafter)]
    for name in ("draft-xs", "draft", "draft-l"):
        if (home / name / "model.safetensors").exists():
            draft = load_model(str(home / name), "cpu")
            check_same_tokenizer(target, draft)
            rows.append((f"{name} k=4", lambda d=draft: DraftModelDrafter(chain4, draft=d, vocab_size=vocab)))
    rows.append(("ngram k=4", lambda: NgramDrafter(chain4, vocab_size=vocab)))
    learned = [
        ("medusa", "medusa k=4", lambda: MedusaDrafter(chain4, target=target)),
        ("medusa", "medusa tuned tree", lambda: MedusaDrafter(chain4, target=target, medusa_choices="tuned")),
        ("eagle", "eagle k=5", lambda: EagleDrafter(chain5, target=target)),
        ("eagle", "eagle tree 4x5 N=24", lambda: EagleDrafter(tree, target=target, eagle_nodes=24)),
        ("eagle3", "eagle3 k=5", lambda: Eagle3Drafter(chain5, target=target)),
        ("eagle3", "eagle3 tree 4x5 N=24", lambda: Eagle3Drafter(tree, target=target, eagle_nodes=24)),
        ("eagle3-no-ttt", "eagle3 without TTT k=5",
         lambda: Eagle3Drafter(chain5, target=target, weights=str(home / "eagle3-no-ttt"))),
    ]
    rows += [(label, make) for kind, label, make in learned if (home / kind / "model.safetensors").is_file()]
    return rows


def main(argv: list[str] | None = None) -> int:
    from core.models.loading import load_model, resolve_preset

    parser = argparse.ArgumentParser(prog="python -m core.train.heldout", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--max-new-tokens", type=int, default=HELDOUT_NEW_TOKENS)
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON lines too")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--prompts", default="heldout",
                        help="held-out set: heldout (book-style, default), chat (chat-style), or a prompts file")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    preset = resolve_preset(args.preset)
    target = load_model(preset.target, "cpu")
    prompts = heldout_prompts(target, args.prompts)
    rows = []
    for label, factory in lineup(target):
        rows.append(evaluate(target, factory, prompts, label, args.max_new_tokens))
        print(f"[heldout] {label}: tau {rows[-1].tau:.2f}", file=sys.stderr, flush=True)
        if args.json:
            print(json.dumps(rows[-1].rounded(), ensure_ascii=False))
    print(markdown_table(rows, rows[0].tokens_per_s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
