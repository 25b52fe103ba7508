"""The goodput controller (``core/controller.py``) against its version at another git revision, in
one process: every ``auto`` spec decodes every held-out prompt with both controllers, interleaved
with ``none`` prompt by prompt, ``--repeats`` times; each controller keeps its own memory across
requests, as a server would. Prints, per spec and controller, the median speedup over ``none``
(pooled, Chinese half, English half), the worst prompt and every prompt's.

    python bench/controller_ab.py --rev HEAD~1 [--specs eagle3:auto,draft:auto] [--preset tiny]
                                  [--repeats 8] [--max-new-tokens 40] [--threads 2]

The controller reads the clock, so run it on idle cores. Differences of a few percent need
several runs to be believed: the same code's pooled speedup moves by 2-4% from run to run.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import core.api as api  # noqa: E402
import core.controller as current  # noqa: E402
from core.bench import BenchConfig, engine_runner, language  # noqa: E402
from core.prompts import HELDOUT_PROMPTS, load_prompts  # noqa: E402


def controller_at(rev: str):
    """``core/controller.py`` as it was at ``rev``, imported as a module of the ``core`` package."""
    source = subprocess.run(["git", "show", f"{rev}:core/controller.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "controller_at_rev.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("core._controller_at_rev", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
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
    parser.add_argument("--specs", default="eagle3:auto,draft:auto", help="core.bench specs with auto")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=40)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    config = BenchConfig(preset=args.preset, max_new_tokens=args.max_new_tokens, threads=args.threads)
    prompts = load_prompts(HELDOUT_PROMPTS)
    variants = [("none", "none", None)] + [
        (f"{spec} @ {name}", spec, module)
        for spec in args.specs.split(",") for name, module in (("this tree", current), (args.rev, controller_at(args.rev)))
    ]
    runs = {label: [runner(config, p, spec, module) for p in prompts] for label, spec, module in variants}
    for per_prompt in runs.values():
        per_prompt[0]()  # warm-up
    walls: dict[str, list[list[float]]] = {label: [[] for _ in prompts] for label in runs}
    for repeat in range(args.repeats):
        for i in range(len(prompts)):
            for label, per_prompt in runs.items():
                walls[label][i].append(per_prompt[i]().wall_s)
        print(f"repeat {repeat + 1}/{args.repeats}", file=sys.stderr)
    base = [statistics.median(w) for w in walls["none"]]
    halves = [language(p) for p in prompts]
    print(f"{args.preset}, {len(prompts)} prompts x {args.max_new_tokens} tokens, {args.repeats} interleaved repeats, "
          f"{args.threads} threads; speedup over none (median over prompts)\n")
    print("| run | pooled | zh | en | worst prompt | per prompt |\n|---|---|---|---|---|---|")
    for label in runs:
        ratios = [b / statistics.median(w) for b, w in zip(base, walls[label])]
        zh = [r for r, h in zip(ratios, halves) if h == "zh"] or [float("nan")]
        en = [r for r, h in zip(ratios, halves) if h == "en"] or [float("nan")]
        print(f"| {label} | {statistics.median(ratios):.3f} | {statistics.median(zh):.3f} | "
              f"{statistics.median(en):.3f} | {min(ratios):.3f} | {' '.join(f'{r:.2f}' for r in ratios)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
