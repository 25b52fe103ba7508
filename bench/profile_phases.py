"""Where a speculative step's time goes: propose / verify / accept / commit / record / the rest.

    python bench/profile_phases.py [--preset tiny] [--drafters none,draft,ngram:auto] [--max-new-tokens 64]
                                   [--prompts FILE] [--threads 1] [--no-records]

Drafters are ``core.studies.bench`` specs (``eagle3:auto``, ``ngram:4``, ``eagle3:4x5:eagle_nodes=24``).
``--never-draft``: the goodput controller of every ``auto`` drafter decides "no draft" at every
step -- what an ``auto`` run's plain steps cost against ``none``'s (the controller, the records,
a feature drafter's hidden states).

Times each phase of the engine's step (a subclass of SpeculativeDecoder that wraps the four verbs
and its StepRecorder) over every prompt, after a warm-up, and the same prompts through
transformers' generate() (plain, assisted with the same draft, prompt lookup) for comparison.
Prints one Markdown table of milliseconds per generated token.
"""
from __future__ import annotations

import argparse
from collections import defaultdict
from time import perf_counter

import torch

from core.api import build_decoder
from core.drafters.controller import GoodputController
from core.engine.decoder import SpeculativeDecoder
from core.models.prompts import HELDOUT_PROMPTS, load_prompts
from core.studies.bench import BenchConfig, hf_runners

PHASES = ("propose", "verify", "accept", "commit", "record")


class TimedDecoder(SpeculativeDecoder):
    """The engine, with the time of each phase added up in ``phases``."""

    def __init__(self, decoder: SpeculativeDecoder, phases: dict[str, float]):
        super().__init__(decoder.target, decoder.drafter, decoder.settings, decoder.run_info)
        self.phases = phases

    def _timed(self, phase, call, *args):
        start = perf_counter()
        out = call(*args)
        self.phases[phase] += perf_counter() - start
        return out

    def propose(self, *args):
        return self._timed("propose", super().propose, *args)

    def verify(self, *args):
        return self._timed("verify", super().verify, *args)

    def accept(self, *args):
        return self._timed("accept", super().accept, *args)

    def commit(self, *args):
        return self._timed("commit", super().commit, *args)

    def begin(self, *args):
        super().begin(*args)
        if self.recorder is not None:  # the StepRecorder's work, timed as "record"
            step = self.recorder.step
            self.recorder.step = lambda outcome: self._timed("record", step, outcome)


def profile_engine(prompt: str, config: BenchConfig, drafter: str, phases: dict[str, float], record: bool) -> int:
    decoder, ids = build_decoder(config.request(prompt, drafter), record=record)
    timed = TimedDecoder(decoder, phases)
    start = perf_counter()
    for _ in timed.steps(ids):
        pass
    phases["total"] += perf_counter() - start
    phases["target_forwards"] += timed.result.target_forwards
    phases["draft_forwards"] += timed.result.draft_forwards
    return timed.result.new_tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--drafters", default="none,draft,ngram")
    parser.add_argument("--prompts", default=str(HELDOUT_PROMPTS))
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-records", action="store_true", help="engine runs with StepRecords off")
    parser.add_argument("--never-draft", action="store_true", help="auto drafters never draft (plain steps)")
    args = parser.parse_args()
    if args.never_draft:
        GoodputController._depth = lambda self, limit, plain_s: (0, False)
    torch.set_num_threads(args.threads)
    prompts = load_prompts(args.prompts)
    drafters = [d.strip() for d in args.drafters.split(",") if d.strip()]
    config = BenchConfig(preset=args.preset, k=args.k, max_new_tokens=args.max_new_tokens)
    hf = [hf_runners(config, p) for p in prompts]

    for d in drafters:  # warm-up
        profile_engine(prompts[0], config, d, defaultdict(float), not args.no_records)
    for runners in hf[0].values():
        runners()
    phases = {d: defaultdict(float) for d in drafters}
    hf_wall: dict[str, float] = defaultdict(float)
    tokens: dict[str, int] = defaultdict(int)
    for i, prompt in enumerate(prompts):
        for d in drafters:
            tokens[d] += profile_engine(prompt, config, d, phases[d], not args.no_records)
        for name, run in hf[i].items():
            timing = run()
            hf_wall[name] += timing.wall_s
            tokens[f"hf {name}"] += len(timing.tokens)

    print(f"ms per generated token, {len(prompts)} prompts x {args.max_new_tokens} new tokens, "
          f"{args.threads} thread(s), k={args.k}, records {'off' if args.no_records else 'on'}\n")
    print("| run | total | " + " | ".join(PHASES) + " | rest | target fwd | draft fwd |")
    print("|---" * (len(PHASES) + 5) + "|")
    for d in drafters:
        p, n = phases[d], tokens[d]
        rest = p["total"] - sum(p[x] for x in PHASES)
        cells = " | ".join(f"{1e3 * p[x] / n:.2f}" for x in PHASES)
        print(f"| {d} | {1e3 * p['total'] / n:.2f} | {cells} | {1e3 * rest / n:.2f} | "
              f"{p['target_forwards'] / n:.2f} | {p['draft_forwards'] / n:.2f} |")
    for name, wall in hf_wall.items():
        print(f"| transformers {name} | {1e3 * wall / tokens[f'hf {name}']:.2f} |" + " |" * (len(PHASES) + 3))


if __name__ == "__main__":
    main()
