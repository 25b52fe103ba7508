"""``python -m core bench``: speed and acceptance of each drafter, side by side in one process.

Every configuration runs on the same prompts, interleaved (prompt by prompt, repeat by
repeat) after a warm-up, by the lab's one timer (``core.common.timing.time_interleaved``), so
slow drifts of the machine hit all of them alike. Speedups are the lab's one definition
(``core.common.timing.speedup``): the median over prompts of the ``none`` baseline's median wall
time over the configuration's, measured in the same run; τ and acceptance are
``core.records.metrics.tally`` over every repeat's step records. With ``--compare-hf``
transformers' own ``generate()`` -- plain,
assisted generation with the same draft model, and prompt lookup -- is measured the same
way, so our ratios stand beside theirs; ``--compare-vllm`` and ``--compare-llamacpp`` time those
engines' warm runners (``core.vllm.peer``, ``core.llamacpp.peer``) in the same rounds.
``verify_ratio`` (``core.cost.probe``) is the cost of verifying n tokens against one forward, for the
target and the draft, with and without the LM head. ``--batch-sweep`` adds the batch-size study
(``core.studies.batch_size``): throughput of each drafter against batch size, and the target's forward latency
against query tokens x batch.
"""
from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import sys
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from time import perf_counter
from typing import Callable

import torch

from core.api import build_decoder, greedy_generate_kwargs
from core.cost.probe import VERIFY_CONTEXT, VERIFY_REPEATS, latency_context, measure_verify_cost, verify_markdown
from core.common.timing import prompt_speedups, speedup, time_interleaved
from core.drafters import BASELINE, DraftModelDrafter, NgramDrafter
from core.common.errors import UserError
from core.common.files import write_text_atomic
from core.models.loading import load_model, pick_device, resolve_preset
from core.models.prompts import HELDOUT_PROMPTS, load_prompts
from core.records.metrics import Tallies, tally
from core.runtime.quantized import PRECISIONS
from core.api.request import DecodeRequest, split_spec
from core.studies.batch_size import baseline_of, crossover, measure_latency, measure_throughput, parse_batch_sizes
from core.studies.results import worst
from core.llamacpp import env as llamacpp_env
from core.llamacpp.peer import LlamaCppPeer, check_preset
from core.vllm.peer import VllmPeer

BATCH_PEER_METHODS = ("none", "ngram")  # vLLM's series in the batch-size study: with and without its ngram
IDENTICAL = {True: "✓", False: "✗", None: "sampled"}  # the table's identical column (None: temperature > 0)
PLAIN_LLAMACPP = "llamacpp:none"  # llama.cpp's plain decoding, the reference of its own lookup


@dataclass(frozen=True)
class BenchConfig:
    preset: str = "tiny"
    drafters: tuple[str, ...] = (BASELINE, DraftModelDrafter.name, NgramDrafter.name)
    prompts_file: str = str(HELDOUT_PROMPTS)
    max_new_tokens: int = 64
    repeats: int = 3
    k: int = 4
    tree: str | None = None
    temperature: float = 0.0  # > 0: every drafter samples, prompt i with seed i (speedups then per new token)
    compare_hf: bool = False
    compare_vllm: bool = False  # also time vLLM-CPU's plain decoding and its CPU methods (core.vllm.peer)
    compare_llamacpp: bool = False  # also time llama.cpp, plain and prompt lookup, on the GGUF (core.llamacpp.peer)
    overhead: bool = False  # also time the first drafter with step records off
    null_arm: bool = False  # also time ``none`` a second time (``NULL_ARM``): how far one prompt moves with no change
    threads: int | None = None  # torch CPU threads for the measurement (None: torch's default)
    batch_sweep: str | tuple[int, ...] = ()  # batch sizes of the batch-size study, e.g. "1,2,4" (empty: none)
    verify_repeats: int = VERIFY_REPEATS  # passes of the verify-cost probe (core.cost.probe)
    device: str = "auto"
    target: str | None = None  # overrides the preset's target / draft
    draft: str | None = None
    target_precisions: tuple[str, ...] = ("float32",)  # every drafter at each; speedups against the first's none

    @property
    def arms(self) -> tuple[str, ...]:
        """The drafter specs timed: ``drafters`` at the first precision, then again at each other one
        (``spec:target_precision=int8``)."""
        return self.drafters + tuple(f"{spec}:target_precision={precision}"
                                     for precision in self.target_precisions[1:] for spec in self.drafters)

    def reference(self, arm: str) -> str:
        """The arm whose output ``arm``'s must equal: ``none`` at the same target precision."""
        precision = split_spec(arm)[1].get("target_precision", self.target_precisions[0])
        return BASELINE if precision == self.target_precisions[0] else f"{BASELINE}:target_precision={precision}"

    def request(self, prompt: str, spec: str, seed: int = 0) -> DecodeRequest:
        """The run of drafter ``spec``: a name, optionally ``:SHAPE`` (k, WxD, auto or auto-tree) and
        ``:option=value`` parts, e.g. ``eagle3:4x5:eagle_nodes=24`` or ``hybrid:auto``; without a
        shape, the bench's ``k`` / ``tree``."""
        name, flat = split_spec(spec)
        flat = {"k": self.k, "tree": self.tree, **flat}
        flat = {"target_precision": self.target_precisions[0], **flat}
        return DecodeRequest.of(prompt, self.preset, name, max_new_tokens=self.max_new_tokens, device=self.device,
                                target=self.target, draft=self.draft, temperature=self.temperature, seed=seed,
                                **flat)

    @property
    def sampled(self) -> bool:
        return self.temperature > 0


@dataclass
class Timing:
    """One timed run: its own wall time (model loading left out), its tokens and its step totals
    (``core.records.metrics.tally`` of its records; empty for transformers' runs and records off)."""

    wall_s: float
    tokens: list[int]
    totals: Tallies = field(default_factory=Tallies)


NULL_ARM = "none (again)"


def engine_runner(config: BenchConfig, prompt: str, drafter: str, record: bool = True,
                  seed: int = 0) -> Callable[[], Timing]:
    request = config.request(prompt, drafter, seed)

    def run() -> Timing:
        decoder, ids = build_decoder(request, record=record)
        start = perf_counter()
        for _ in decoder.steps(ids):
            pass
        wall = perf_counter() - start
        return Timing(wall, decoder.result.tokens, tally(decoder.result.steps))

    return run


def hf_runners(config: BenchConfig, prompt: str) -> dict[str, Callable[[], Timing]]:
    """transformers' generate(): plain, assisted with the same draft (constant k), prompt lookup.

    Assisted generation is left out when the preset's draft reads a reduced vocabulary
    (``vocab_map``): transformers' assistant must emit the target's ids itself.
    """
    decoder, ids = build_decoder(config.request(prompt, DraftModelDrafter.name))
    target, draft = decoder.target, decoder.drafter.draft
    input_ids = torch.tensor([ids], device=target.device)
    common = greedy_generate_kwargs(target, input_ids, config.max_new_tokens)
    variants = {
        "generate": {},
        "assisted": dict(
            assistant_model=draft.model, num_assistant_tokens=config.k,
            num_assistant_tokens_schedule="constant", assistant_confidence_threshold=0.0,
        ),
        "prompt_lookup": dict(prompt_lookup_num_tokens=config.k, max_matching_ngram_size=3),
    }
    if draft.vocab_map is not None:
        del variants["assisted"]

    def runner(extra):
        @torch.inference_mode()
        def run() -> Timing:
            start = perf_counter()
            out = target.model.generate(input_ids, **common, **extra)
            return Timing(perf_counter() - start, out[0, len(ids) :].tolist())

        return run

    return {name: runner(extra) for name, extra in variants.items()}


def vllm_timing(call) -> Callable[[], Timing]:
    """A vLLM request (``core.vllm.peer``) as a Timing: its wall time inside the runner and its
    counters (vLLM reports drafts, draft tokens and accepted tokens; not its forwards)."""
    def run() -> Timing:
        generation = call()
        spec = generation.spec
        tokens = generation.outputs[0].tokens
        return Timing(generation.wall_s, tokens, Tallies(drafts=spec.drafts, draft_tokens=spec.draft_tokens,
                                                         accepted_tokens=spec.accepted_tokens))

    return run


def llamacpp_timing(call) -> Callable[[], Timing]:
    """A llama.cpp request (``core.llamacpp.peer``) as a Timing: its wall time inside the runner and its
    tokens (llama-cpp-python counts no drafts)."""
    def run() -> Timing:
        generation = call()
        return Timing(generation.wall_s, generation.tokens)

    return run


def language(prompt: str) -> str:
    """"zh" for a prompt with Chinese characters, else "en" (the held-out set's two halves)."""
    return "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in prompt) else "en"


def walls(per_prompt: list[list[Timing]], per_token: bool = False) -> list[list[float]]:
    """``[prompt][repeat]`` wall seconds, what ``core.common.timing.speedup`` reads; ``per_token``: over
    the run's new tokens (sampled runs of two drafters may end at an end token at different lengths)."""
    return [[t.wall_s / max(len(t.tokens), 1) if per_token else t.wall_s for t in runs] for runs in per_prompt]


def summarize(timings: dict[str, list[list[Timing]]], baseline: str, prompts: list[str],
              sampled: bool = False, reference: Callable[[str], str] | None = None) -> dict[str, dict]:
    """timings[name][prompt] = list over repeats. Speedup: ``core.common.timing.speedup`` against
    ``baseline``, also per language half and for the worst single prompt; τ and acceptance pool
    every repeat's step totals. ``sampled``: the runs sampled, so speedups compare seconds per new
    token and identity to the baseline is not asked (``None``: the χ² test of tests/test_sampling.py
    is what shows the law is the target's). ``reference(name)``: the arm whose tokens ``name``'s must
    equal (default ``baseline``; another target precision has its own ``none``)."""
    out = {}
    base = walls(timings[baseline], sampled)
    for name, per_prompt in timings.items():
        seconds = walls(per_prompt, sampled)
        wall_s = walls(per_prompt) if sampled else seconds  # a run's own seconds, for its tokens/s
        ratios = prompt_speedups(base, seconds)
        every = [t for runs in per_prompt for t in runs]  # all repeats: an ``auto`` run learns from the ones before
        totals = sum((t.totals for t in every), Tallies())
        rates = [len(runs[0].tokens) / w for runs, w in zip(per_prompt, map(statistics.median, wall_s)) if w > 0]
        out[name] = {
            "tokens_per_s": statistics.median(rates),
            "speedup": speedup(base, seconds),
            "min_speedup": min(ratios),  # the worst single prompt
            "prompt_speedups": ratios,  # per prompt, in the prompts file's order (its worst is named in bench.md)
            "speedup_by_language": {
                lang: statistics.median(r for r, p in zip(ratios, prompts) if language(p) == lang)
                for lang in sorted({language(p) for p in prompts})
            },
            "tau": totals.tau if totals.steps else None,
            "acceptance_rate": totals.acceptance_rate if totals.draft_tokens else None,
            "per_position_acceptance": totals.per_position_acceptance if totals.drafts else None,  # depth 1, 2, ...
            "draft_ms": totals.draft_s / totals.drafts * 1e3 if totals.drafts else None,  # per drafting step
            "target_forwards": totals.steps,
            "new_tokens": sum(len(t.tokens) for t in every),
            "identical_to_baseline": None if sampled else all(
                t.tokens == base_runs[0].tokens
                for runs, base_runs in zip(per_prompt, timings[reference(name) if reference else baseline])
                for t in runs
            ),
        }
    return out


def ab_markdown(rows: dict[str, dict]) -> list[str]:
    """An A/B script's table of ``summarize``'s rows: per run the pooled speedup, the halves, the
    worst prompt and every prompt's."""
    lines = ["| run | pooled | zh | en | worst prompt | per prompt |", "|---|---|---|---|---|---|"]
    for label, row in rows.items():
        halves = row["speedup_by_language"]
        lines.append(f"| {label} | {row['speedup']:.3f} | {halves.get('zh', float('nan')):.3f} | "
                     f"{halves.get('en', float('nan')):.3f} | {row['min_speedup']:.3f} | "
                     f"{' '.join(f'{r:.2f}' for r in row['prompt_speedups'])} |")
    return lines


def run_bench(config: BenchConfig, log: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> dict:
    sizes = _checked_batch_sizes(config)
    prompts = load_prompts(config.prompts_file)
    engine = _engine_arms(config, prompts)
    hf = _hf_arms(config, prompts) if config.compare_hf else {}
    threads = torch.get_num_threads()
    with contextlib.ExitStack() as peers:  # each peer's runners closed on leaving, or when a later start fails
        peer = peers.enter_context(VllmPeer(config.preset, config.k, threads, config.max_new_tokens, log=log)
                                   ) if config.compare_vllm else None
        llama = peers.enter_context(LlamaCppPeer(config.preset, config.k, threads, config.max_new_tokens, log=log)
                                    ) if config.compare_llamacpp else None
        vllm = {f"vllm:{k}": [vllm_timing(call) for call in v] for k, v in peer.requests(prompts).items()} if peer else {}
        llamacpp = {f"llamacpp:{k}": [llamacpp_timing(call) for call in v]
                    for k, v in llama.requests(prompts).items()} if llama else {}
        timings = time_prompts({**engine, **{f"hf:{k}": v for k, v in hf.items()}, **vllm, **llamacpp},
                               config.repeats, log)
        batch = batch_study(config, sizes, prompts, log, peer) if sizes else {}
    engine_summary = summarize({k: timings[k] for k in engine}, BASELINE, prompts, config.sampled, config.reference)
    result = _result_head(config, prompts, engine_summary)
    if config.overhead:
        result["overhead"] = _records_overhead(engine, timings)
    if len(config.target_precisions) > 1 and not config.sampled:
        result["precision_agreement"] = precision_agreement(config, timings)
    if hf:
        _add_hf(result, timings, prompts)
    if peer:
        _add_vllm(result, timings, vllm, prompts, peer)
    if llama:
        _add_llamacpp(result, timings, prompts, llama)
    result["verify_ratio"] = verify_study(config, prompts, log)
    result.update(batch)
    return result


def _checked_batch_sizes(config: BenchConfig) -> list[int]:
    """Refuse a bad config before anything runs and set torch's threads; the batch sizes to sweep."""
    for precision in config.target_precisions:
        if precision not in PRECISIONS:
            raise UserError(f"--target-precision: unknown precision {precision!r} (use {', '.join(PRECISIONS)})")
    if len(set(config.target_precisions)) != len(config.target_precisions) or not config.target_precisions:
        raise UserError("--target-precision: name each precision once")
    for spec in config.arms:
        config.request("x", spec)  # a bad name, shape or option is refused before anything runs
    if BASELINE not in config.drafters:
        raise UserError("--drafters must include none: speedups are measured against it")
    if config.repeats < 1:
        raise UserError("--repeats must be >= 1")
    if config.sampled and (config.compare_hf or config.compare_vllm or config.compare_llamacpp or config.batch_sweep):
        raise UserError("--compare-hf, --compare-vllm, --compare-llamacpp and --batch-sweep time greedy decoding: "
                        "leave them out with --temperature above 0")
    if config.compare_llamacpp:
        _check_llamacpp(config)
    sizes = parse_batch_sizes(config.batch_sweep, pick_device(config.device))
    if config.threads is not None:
        if not 1 <= config.threads <= 256:
            raise UserError(f"--threads must be between 1 and 256 (got {config.threads})")
        torch.set_num_threads(config.threads)
    return sizes


def _check_llamacpp(config: BenchConfig) -> None:
    """``--compare-llamacpp`` runs on the ``gemma-270m`` preset's own GGUF, from a finished setup."""
    check_preset(config.preset)
    if config.target:
        raise UserError("--compare-llamacpp runs llama.cpp on the preset's own GGUF: leave out --target")
    if not llamacpp_env.ready():
        raise UserError(llamacpp_env.missing_reason())


def _engine_arms(config: BenchConfig, prompts: list[str]) -> dict[str, list[Callable[[], Timing]]]:
    """The engine's runners per arm: every drafter, the null arm and the records-off probe when asked."""
    engine = {
        name: [engine_runner(config, p, name, seed=i) for i, p in enumerate(prompts)] for name in config.arms
    }
    if config.null_arm:
        engine[NULL_ARM] = [engine_runner(config, p, BASELINE, seed=i) for i, p in enumerate(prompts)]
    if config.overhead:
        probe = next((d for d in config.drafters if d != BASELINE), BASELINE)
        engine[f"{probe} (records off)"] = [engine_runner(config, p, probe, record=False, seed=i)
                                            for i, p in enumerate(prompts)]
    return engine


def _hf_arms(config: BenchConfig, prompts: list[str]) -> dict[str, list[Callable[[], Timing]]]:
    """transformers' runners per arm (``generate``, ``assisted`` where it can run), one per prompt."""
    per_prompt = [hf_runners(config, p) for p in prompts]
    return {name: [runners[name] for runners in per_prompt] for name in per_prompt[0]}


def _result_head(config: BenchConfig, prompts: list[str], engine_summary: dict) -> dict:
    """The result's settings, machine and engine rows; the comparisons are added after."""
    return {
        "preset": config.preset,
        "prompts": len(prompts),
        "max_new_tokens": config.max_new_tokens,
        "repeats": config.repeats,
        "k": config.k,
        "tree": config.tree,
        "temperature": config.temperature,
        "device": str(pick_device(config.device)),
        "hardware": hardware_name(pick_device(config.device)),
        "torch_threads": torch.get_num_threads(),
        "target_precisions": list(config.target_precisions),
        "drafters": {k: v for k, v in engine_summary.items() if k in config.arms or k == NULL_ARM},
        "hf": {},
        "batch_sweep": [],
    }


def precision_agreement(config: BenchConfig, timings: dict) -> dict:
    """Per target precision after the first: on how many prompts its plain greedy output equals the first
    precision's, and where each first differs (token index; None where identical) -- another precision
    is another target, so its text may differ."""
    first = [runs[0].tokens for runs in timings[BASELINE]]
    out = {}
    for precision in config.target_precisions[1:]:
        other = [runs[0].tokens for runs in timings[f"{BASELINE}:target_precision={precision}"]]
        differ = [next((i for i, (a, b) in enumerate(zip(x, y)) if a != b), None if x == y else min(len(x), len(y)))
                  for x, y in zip(first, other)]
        out[precision] = {"identical": differ.count(None), "prompts": len(differ), "first_difference": differ}
    return out


def _records_overhead(engine: dict, timings: dict) -> dict:
    """What building the StepRecords costs: one drafter's median seconds with records on and off."""
    probe = next(k for k in engine if k.endswith("(records off)"))
    on = sum(statistics.median(t.wall_s for t in runs) for runs in timings[probe.split(" ")[0]])
    off = sum(statistics.median(t.wall_s for t in runs) for runs in timings[probe])
    return {"drafter": probe.split(" ")[0], "records_on_s": on, "records_off_s": off, "overhead": on / off - 1}


def _add_hf(result: dict, timings: dict, prompts: list[str]) -> None:
    """transformers' rows (against its ``generate``) and ours ``none`` against its ``generate``."""
    hf_summary = summarize({k.removeprefix("hf:"): timings[k] for k in timings if k.startswith("hf:")}, "generate",
                           prompts)
    hf_summary["generate"]["ours_none_vs_generate"] = speedup(walls(timings["hf:generate"]), walls(timings[BASELINE]))
    result["hf"] = hf_summary
    if "assisted" not in hf_summary:
        result["hf_skipped"] = {"assisted": "the preset's draft reads a reduced vocabulary; transformers' "
                                            "assistant must emit the target's own ids"}


def _add_vllm(result: dict, timings: dict, vllm: dict, prompts: list[str], peer: VllmPeer) -> None:
    """vLLM's rows (against its ``none``), whether its plain decoding matches ours, and its versions."""
    result["vllm"] = summarize({k.removeprefix("vllm:"): timings[k] for k in vllm}, "none", prompts)
    for name, row in result["vllm"].items():  # vLLM counts drafts, not forwards: no τ
        totals = sum((t.totals for runs in timings[f"vllm:{name}"] for t in runs), Tallies())
        row["mean_acceptance_length"] = totals.mean_acceptance_length
        row["drafts"] = totals.drafts
        row.pop("target_forwards")
        row.pop("tau")
    result["vllm"]["none"]["identical_to_ours"] = all(
        v.tokens == o[0].tokens for runs, o in zip(timings["vllm:none"], timings[BASELINE]) for v in runs)
    result["vllm_info"] = peer.info()


def _add_llamacpp(result: dict, timings: dict, prompts: list[str], peer: LlamaCppPeer) -> None:
    """llama.cpp's rows, timed against the lab's ``none`` (its speedup is the lab's one ``speedup``), how
    many prompts' greedy tokens equal the lab's ``none`` (every repeat), and its own lookup's against its
    plain decoding (llama.cpp's own losslessness)."""
    names = [k for k in timings if k.startswith("llamacpp:")]  # llamacpp:none, llamacpp:lookup
    rows = summarize({"lab none": timings[BASELINE], **{n: timings[n] for n in names}}, "lab none", prompts)
    result["llamacpp"] = {n: rows[n] for n in names}

    def same(runs: list[list[Timing]], reference: list[list[Timing]]) -> int:
        return sum(all(t.tokens == ref[0].tokens for t in mine) for mine, ref in zip(runs, reference))

    for name, row in result["llamacpp"].items():
        row["identical_prompts"] = same(timings[name], timings[BASELINE])
        if name != PLAIN_LLAMACPP and PLAIN_LLAMACPP in names:
            row["identical_to_llamacpp_none"] = same(timings[name], timings[PLAIN_LLAMACPP])
    result["llamacpp_info"] = peer.info()


def time_prompts(everything: dict[str, list[Callable[[], Timing]]], repeats: int,
                 log: Callable[[str], None]) -> dict[str, list[list[Timing]]]:
    """Every configuration on every prompt, ``repeats`` times, by the lab's timer
    (``core.common.timing.time_interleaved``): interleaved prompt by prompt, after a warm-up on the
    first prompt; ``[name][prompt]`` -> the repeats' timings."""
    names = list(everything)
    prompts = len(everything[names[0]])
    runners = {(i, name): everything[name][i] for i in range(prompts) for name in names}
    log(f"warm-up: {len(names)} configurations on the first prompt")

    def progress(repeat: int, key: tuple[int, str]) -> None:
        if key[1] == names[-1]:
            log(f"[{(repeat - 1) * prompts + key[0] + 1}/{repeats * prompts}] repeat {repeat}, prompt {key[0] + 1}")

    samples = time_interleaved(runners, repeats, warmup_keys=[(0, name) for name in names],
                               seconds=lambda t: t.wall_s, on_sample=progress)
    return {name: [samples[i, name].results for i in range(prompts)] for name in names}


def verify_study(config: BenchConfig, prompts: list[str], log: Callable[[str], None]) -> dict:
    """``verify_ratio`` of the target and (when the preset or --draft names one) the draft model."""
    preset = resolve_preset(config.preset)
    models = {"target" if i == 0 else f"target {precision}":
              load_model(config.target or preset.target, config.device, precision=precision)
              for i, precision in enumerate(config.target_precisions)}
    if config.draft or preset.draft:
        models["draft"] = load_model(config.draft or preset.draft, config.device)
    log(f"verify cost: {', '.join(models)}, with and without the LM head")
    return measure_verify_cost(models, latency_context(models["target"], prompts, VERIFY_CONTEXT),
                               repeats=config.verify_repeats)


def hardware_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's model and core count: what the numbers were measured on."""
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (CUDA {torch.version.cuda})"
    model = next((line.split(":", 1)[1].strip() for line in _cpuinfo() if line.startswith("model name")),
                 platform.processor() or platform.machine())
    return f"{model}, {os.cpu_count()} CPU cores"


def _cpuinfo() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return []


def batch_study(config: BenchConfig, sizes: tuple[int, ...], prompts: list[str], log: Callable[[str], None],
                peer: VllmPeer | None = None) -> dict:
    """``batch_sweep`` (throughput per batch and drafter; with ``peer``, vLLM's continuous batching
    plain and with ``ngram`` beside it), ``batch_crossover`` and ``forward_latency``."""
    decoder_args = dict(preset=config.preset, k=config.k, tree=config.tree, max_new_tokens=config.max_new_tokens,
                        device=config.device, target=config.target, draft=config.draft)
    methods = [m for m in BATCH_PEER_METHODS if peer and m in peer.runners]
    rows = measure_throughput(sizes, config.drafters, prompts, decoder_args, config.repeats, log,
                              peer={m: partial(peer.batch_call, m) for m in methods})
    target = load_model(config.target or resolve_preset(config.preset).target, config.device)
    latency = measure_latency(target, sizes, latency_context(target, prompts), log)
    return {"batch_sweep": rows, "batch_crossover": crossover(rows), "forward_latency": latency}


def markdown_table(result: dict) -> str:
    lines = [
        f"preset `{result['preset']}`, {result['prompts']} prompts, {result['max_new_tokens']} new tokens, "
        f"{result['repeats']} repeats, k={result['k']}" + (f", tree {result['tree']}" if result["tree"] else "")
        + (f", temperature {result['temperature']} (prompt i sampled with seed i; speedups per new token)"
           if result.get("temperature") else "")
        + f"; {result.get('hardware', 'unknown hardware')}, {result['torch_threads']} torch thread(s)",
        "",
        "| configuration | tokens/s | speedup | zh / en | worst prompt | τ | acceptance | depth 1 | draft ms/step "
        "| identical |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def fmt(x, pattern):
        return "–" if x is None else pattern.format(x)

    groups = (("", result["drafters"]), ("transformers ", result["hf"]), ("vLLM-CPU ", result.get("vllm", {})),
              ("", result.get("llamacpp", {})))  # llama.cpp's rows are named llamacpp:METHOD
    for prefix, rows in groups:
        for name, row in rows.items():
            label = prefix + name
            by_language = row.get("speedup_by_language", {})
            halves = " / ".join(f"{by_language[lang]:.2f}×" if lang in by_language else "–" for lang in ("zh", "en"))
            lines.append(
                f"| {label} | {row['tokens_per_s']:.1f} | {row['speedup']:.2f}× | {halves} | "
                f"{worst(row)} | "
                f"{fmt(row['tau'] if 'tau' in row else row['mean_acceptance_length'], '{:.2f}')} | "
                f"{fmt(row['acceptance_rate'], '{:.1%}')} | "
                f"{fmt((row.get('per_position_acceptance') or [None])[0], '{:.3f}')} | "
                f"{fmt(row.get('draft_ms'), '{:.1f}')} | "
                f"{IDENTICAL[row['identical_to_baseline']]} |"
            )
    for name, reason in result.get("hf_skipped", {}).items():
        lines.append(f"| transformers {name} | not run: {reason} | | | | | | | | |")
    for prefix, info in (("vLLM-CPU ", "vllm_info"), ("llamacpp:", "llamacpp_info")):
        for name, reason in result.get(info, {}).get("skipped", {}).items():
            lines.append(f"| {prefix}{name} | not run: {reason} | | | | | | | | |")
    if "generate" in result["hf"]:
        ratio = result["hf"]["generate"]["ours_none_vs_generate"]
        lines += ["", f"Plain decoding through the engine (`none`) against transformers' `generate()`: "
                      f"{ratio:.2f}× its speed (median over prompts)."]
    lines += peer_notes(result)
    if NULL_ARM in result["drafters"]:
        row = result["drafters"][NULL_ARM]
        lines += ["", f"Null arm: `{NULL_ARM}` is `none` timed again in the same rounds, nothing changed. Its worst "
                      f"prompt, {worst(row)}, and its best, {max(row['prompt_speedups']):.2f}×, are how far one "
                      f"prompt's median of {result['repeats']} repeats moves by chance on this machine: a single "
                      f"prompt's speedup means something only outside that band."]
    if "overhead" in result:
        o = result["overhead"]
        lines += ["", f"Recording overhead ({o['drafter']}): {o['overhead']:+.1%} of wall time."]
    for precision, agreement in result.get("precision_agreement", {}).items():
        firsts = sorted(i for i in agreement["first_difference"] if i is not None)
        lines.append(f"\nThe {precision} target's greedy text equals the {result['target_precisions'][0]} target's on "
                     f"{agreement['identical']} of {agreement['prompts']} prompts"
                     + (f" (where it differs, first at token {statistics.median(firsts):.0f}, median)" if firsts else "")
                     + ": another precision is another target; each row's `identical` is against `none` at its own.")
    return "\n".join(lines + verify_markdown(result.get("verify_ratio") or {}) + sweep_markdown(result)) + "\n"


def peer_notes(result: dict) -> list[str]:
    """What the table's vLLM and llama.cpp rows are: versions, threads, how they were timed, against
    what, and how often their greedy text is the lab's."""
    lines = []
    if "vllm" in result:
        info = result["vllm_info"]
        same = result["vllm"]["none"].get("identical_to_ours")
        lines += ["", f"vLLM-CPU {info['version']} ({info['package']}), {info['threads']} thread(s): {info['timing']}. "
                      f"Its speedups are over its own plain decoding; its plain text is "
                      f"{'identical to' if same else 'NOT identical to'} the lab's `none` on every prompt. "
                      f"For vLLM the τ column is its mean acceptance length, 1 + accepted / drafts (it counts drafts, not forwards)."]
    if "llamacpp" in result:
        lines += ["", llamacpp_note(result)]
    return lines


def llamacpp_note(result: dict) -> str:
    """llama.cpp's rows: its version, file and threads, how it was timed, and on how many prompts its
    greedy tokens are the lab's ``none``'s and its lookup's are its own plain decoding's."""
    info, rows, prompts = result["llamacpp_info"], result["llamacpp"], result["prompts"]
    lookup = info["lookup"]
    identity = "; ".join(f"`{name}` on {row['identical_prompts']} of {prompts}" for name, row in rows.items())
    own = "".join(f"; `{name}` gives `{PLAIN_LLAMACPP}`'s tokens on {row['identical_to_llamacpp_none']} of {prompts}"
                  for name, row in rows.items() if "identical_to_llamacpp_none" in row)
    return (f"llama.cpp (llama-cpp-python {info['version']}) on `{info['gguf']}`, {info['threads']} thread(s): "
            f"{info['timing']}; `llamacpp:lookup` is its LlamaPromptLookupDecoding (num_pred_tokens "
            f"{lookup['num_pred_tokens']}, max_ngram_size {lookup['max_ngram_size']}). Its speedups are over the "
            f"lab's `none`. Its greedy tokens equal the lab's `none`: {identity}{own}. It computes on the Q4_K_M "
            f"weights, the lab on the same weights dequantized to float32: identical text is not expected.")


def sweep_markdown(result: dict) -> list[str]:
    """The batch-size study as two tables: tokens/s per batch and drafter, forward latency per batch and query tokens."""
    rows = result.get("batch_sweep") or []
    if not rows:
        return []
    drafters = list(dict.fromkeys(r["drafter"] for r in rows))
    cell = {(r["batch"], r["drafter"]): r for r in rows}
    sizes = sorted({r["batch"] for r in rows})
    lines = ["", "Throughput against batch size (tokens/s of all requests; speedup over the same engine's `none` at the "
                 "same batch; `vllm:` columns are vLLM-CPU's continuous batching):", "",
             "| batch | " + " | ".join(drafters) + " |", "|---" * (len(drafters) + 1) + "|"]
    for b in sizes:
        lines.append(f"| {b} | " + " | ".join(
            f"{cell[b, d]['tokens_per_s']:.1f}" + ("" if d == baseline_of(d) else f" ({cell[b, d]['speedup']:.2f}×)")
            for d in drafters) + " |")
    stops = [f"`{d}` from batch {b}" if b is not None else f"`{d}` pays at every batch measured"
             for d, b in result["batch_crossover"].items()]
    lines += ["", "Speculation stops paying (no faster than `none`): " + "; ".join(stops) + "."]
    latency = result.get("forward_latency") or []
    queries = sorted({r["query_tokens"] for r in latency})
    ms = {(r["batch"], r["query_tokens"]): r["latency_ms"] for r in latency}
    lines += ["", "Target forward latency in ms (rows: batch; columns: new tokens per request):", "",
              "| batch | " + " | ".join(str(q) for q in queries) + " |", "|---" * (len(queries) + 1) + "|"]
    for b in sorted({r["batch"] for r in latency}):
        lines.append(f"| {b} | " + " | ".join(f"{ms[b, q]:.1f}" for q in queries) + " |")
    return lines


def write_outputs(result: dict, out_dir: str | Path) -> None:
    """``bench.json``, ``bench.md`` and ``bench.html`` (the speedups, and the batch-size study when measured)."""
    import plotly.graph_objects as go

    from core.studies.batch_size_figure import sweep_figure

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "bench.json", json.dumps(result, indent=2, ensure_ascii=False))
    write_text_atomic(out / "bench.md", markdown_table(result))
    names = list(result["drafters"]) + [f"hf {n}" for n in result["hf"]]
    rows = list(result["drafters"].values()) + list(result["hf"].values())
    figure = go.Figure(go.Bar(x=names, y=[r["speedup"] for r in rows], text=[f"{r['speedup']:.2f}×" for r in rows]))
    figure.update_layout(title="Speedup over each side's own plain decoding (median over prompts)",
                         yaxis_title="speedup ×")
    figures = [figure, *verify_figures(result)]
    if result.get("batch_sweep"):
        figures.append(sweep_figure(result).update_layout(height=480))
    html = "".join(f.to_html(full_html=False, include_plotlyjs=(i == 0)) for i, f in enumerate(figures))
    write_text_atomic(out / "bench.html", f"<html><head><meta charset=\"utf-8\"></head><body>{html}</body></html>")


def verify_figures(result: dict) -> list:
    """verify_ratio against n: one line per model and head setting, the y = 1 line for reference."""
    import plotly.graph_objects as go

    rows = (result.get("verify_ratio") or {}).get("rows") or []
    if not rows:
        return []
    figure = go.Figure()
    for model, lm_head in dict.fromkeys((r["model"], r["lm_head"]) for r in rows):
        mine = [r for r in rows if r["model"] == model and r["lm_head"] == lm_head]
        figure.add_trace(go.Scatter(x=[r["n"] for r in mine], y=[r["verify_ratio"] for r in mine], mode="lines+markers",
                                    name=f"{model} {'with' if lm_head else 'without'} LM head"))
    figure.add_hline(y=1.0, line_dash="dot")
    figure.update_layout(title="Verify cost: time of n new tokens ÷ time of 1", xaxis_title="tokens verified (n)",
                         yaxis_title="verify(n) / forward(1)")
    return [figure]
