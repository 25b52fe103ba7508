"""The goodput controller (``core/drafters/controller.py``) against its version at another git revision, in
one process: every ``auto`` spec decodes every held-out prompt with both controllers, interleaved
with ``none`` prompt by prompt, ``--repeats`` times; each controller keeps its own memory across
requests, as a server would. Prints, per spec and controller, the median speedup over ``none``
(pooled, Chinese half, English half), the worst prompt and every prompt's.

    python bench/controller_ab.py --rev HEAD~1 [--specs eagle3:auto,draft:auto] [--preset tiny]
                                  [--repeats 8] [--max-new-tokens 40] [--threads 2] [--set NAME=VALUE]
                                  [--prompts heldout|chat|FILE]

The controller reads the clock, so run it on idle cores. Differences of a few percent need
several runs to be believed: the same code's pooled speedup moves by 2-4% from run to run, and
one prompt's by more (``--rev HEAD`` runs this tree against itself: the noise to beat).
"""
from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent

import core.api as api
import core.drafters.controller as current
from core.models.prompts import HELDOUT_PROMPTS, load_prompts
from core.studies.bench import BenchConfig, ab_markdown, engine_runner, summarize, time_prompts


def controller_at(rev: str):
    """``core/drafters/controller.py`` as it was at ``rev``, imported as a module of ``core.drafters``
    (revisions from the sub-package layout on; before it the controller was ``core/controller.py``)."""
    shown = subprocess.run(["git", "show", f"{rev}:core/drafters/controller.py"], cwd=ROOT, capture_output=True,
                           text=True)
    if shown.returncode:
        sys.exit(f"error: {rev} has no core/drafters/controller.py (it predates the sub-package layout)")
    source = shown.stdout
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("core.drafters._controller_at_rev", None))
    module.__package__ = "core.drafters"
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"{rev}:core/drafters/controller.py", "exec"), module.__dict__)
    return module


def runner(config: BenchConfig, prompt: str, spec: str, module):
    """One decode of ``prompt`` with ``module``'s controller (None: ``none``, no controller)."""
    run = engine_runner(config, prompt, spec)
    if module is None:
        return run

    def with_controller():
        api.GoodputController = module.GoodputController
        try:
            return run()
        finally:
            api.GoodputController = current.GoodputController

    return with_controller


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rev", required=True, help="the git revision whose controller to compare against")
    parser.add_argument("--specs", default="eagle3:auto,draft:auto", help="core.studies.bench specs with auto")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=40)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompts", default=str(HELDOUT_PROMPTS), help="a held-out set's name or a prompts file")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="change a constant of this tree's controller for the run, e.g. CARRY_WEIGHT=4 "
                             "(repeatable; --rev HEAD then weighs the change alone)")
    args = parser.parse_args(argv)
    for item in args.set:
        name, _, value = item.partition("=")
        if not (name.isupper() and isinstance(getattr(current, name, None), (int, float))):
            parser.error(f"--set: core/drafters/controller.py has no numeric constant {name!r}")
        setattr(current, name, type(getattr(current, name))(value))
    torch.set_num_threads(args.threads)
    config = BenchConfig(preset=args.preset, max_new_tokens=args.max_new_tokens, threads=args.threads)
    prompts = load_prompts(args.prompts)
    this = f"this tree ({', '.join(args.set)})" if args.set else "this tree"
    controllers = ((this, current), (args.rev, controller_at(args.rev)))
    variants = [("none", "none", None)] + [
        (f"{spec} @ {name}", spec, module) for spec in args.specs.split(",") for name, module in controllers
    ]
    runs = {label: [runner(config, p, spec, module) for p in prompts] for label, spec, module in variants}
    timings = time_prompts(runs, args.repeats, lambda message: print(message, file=sys.stderr))
    rows = summarize(timings, "none", prompts)
    print(f"{args.preset}, {len(prompts)} prompts x {args.max_new_tokens} tokens, {args.repeats} interleaved repeats, "
          f"{args.threads} threads; speedup over none (median over prompts)\n")
    print("\n".join(ab_markdown(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
