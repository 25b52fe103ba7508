"""vLLM as the oracle: the same greedy requests through vLLM and through the lab on vLLM's schedule
(``core.vllm.schedule``), compared token for token and counter for counter.

A method is named once and mapped to both engines (``Method``): ``none``, ``eagle3`` (the lab's
exportable EAGLE-3 written in vLLM's checkpoint layout), ``peagle`` (the lab's exportable P-EAGLE,
vLLM's EAGLE-3 with ``parallel_drafting``), ``draft`` (vLLM's ``draft_model``) and ``ngram`` (vLLM's
prompt lookup; the lab's ``ngram`` drafter with vLLM's lookup rule).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from core.api import encode_prompt
from core.drafters.checkpoint import KINDS as EXPORTED  # the lab's learned drafters vLLM loads (``export_drafter``)
from core.drafters.checkpoint import checkpoint_config, checkpoint_weights, speculative_config, write_checkpoint
from core.drafters.weights import load_folder
from core.common.errors import UserError
from core.common.limits import MAX_DEPTH
from core.models.loading import drafter_home, load_model, resolve_preset
from core.records.metrics import tally
from core.api.request import DecodeRequest
from core.vllm import env
from core.vllm.client import SpecCounters, VllmRunner
from core.vllm.schedule import decode

METHODS = ("none", "eagle3", "peagle", "draft", "ngram")
TITLES = {"eagle3": "EAGLE-3", "peagle": "P-EAGLE"}
NGRAM_MIN = 2  # vLLM's prompt_lookup_min for the ngram method (its documented examples use 2)


def exports_dir() -> Path:
    return env.venv_dir().parent / "exports"


def export_drafter(target_path: str, kind: str = "eagle3", out: Path | None = None) -> Path:
    """The target's exportable ``kind`` (``<kind>-reference`` next to it) in vLLM's checkpoint layout
    (what ``python -m core export --drafter <kind> --format vllm`` writes); rewritten every call."""
    source = drafter_home(target_path) / f"{kind}-reference"
    out = out or exports_dir() / f"{Path(target_path).name}-{Path(target_path).parent.name}-{kind}"
    target = load_model(target_path, "cpu")
    lab, state = load_folder(source, kind, target.model)
    head = target.model.get_output_embeddings().weight.detach()
    config = checkpoint_config(lab, target.model.config.get_text_config(), head.shape[0])
    write_checkpoint(out, config, checkpoint_weights(state, head), f"{kind} drafter exported from {source.name}\n")
    return out


@dataclass(frozen=True)
class Method:
    """One speculative method as both engines name it."""

    name: str  # one of METHODS
    k: int = 3
    ngram_max: int = 4
    checkpoint: str | None = None  # eagle3, peagle: the exported folder (``export_drafter``)
    draft_path: str | None = None  # the draft model's folder

    @property
    def label(self) -> str:
        return "none" if self.name == "none" else f"{self.name} k={self.k}"

    def speculative_config(self) -> dict | None:
        if self.name == "none":
            return None
        if self.name in EXPORTED:
            return speculative_config(self.checkpoint, self.k)
        if self.name == "draft":
            return {"method": "draft_model", "model": self.draft_path, "num_speculative_tokens": self.k}
        return {"method": "ngram", "num_speculative_tokens": self.k, "prompt_lookup_max": self.ngram_max,
                "prompt_lookup_min": NGRAM_MIN}

    def request(self, prompt: str, preset: str, max_new_tokens: int) -> DecodeRequest:
        """The lab's request for the same method."""
        options = {}
        if self.name in EXPORTED:
            # vLLM drafts in float32, over the draft vocabulary alone
            options.update(drafter_weights=self.checkpoint, draft_precision="float32", draft_vocab_only=True)
        if self.name == "ngram":
            options.update(ngram_n=self.ngram_max, ngram_min=NGRAM_MIN, ngram_lookup="vllm")
        return DecodeRequest.of(prompt, preset, self.name, k=self.k, max_new_tokens=max_new_tokens,
                                draft=self.draft_path if self.name == "draft" else None, **options)


def method(name: str, preset: str, k: int = 3) -> Method:
    """``name`` for the preset's models (exporting its EAGLE-3 when asked for), ``k`` draft tokens a step."""
    if name not in METHODS:
        raise UserError(f"vLLM comparison methods are {', '.join(METHODS)} (got {name!r})")
    if not 1 <= k <= MAX_DEPTH:
        raise UserError(f"--k must be between 1 and {MAX_DEPTH} (got {k})")
    p = resolve_preset(preset)
    if name in EXPORTED:
        if not (drafter_home(p.target) / f"{name}-reference").is_dir():
            raise UserError(f"this target has no exportable {TITLES[name]} ({name}-reference) to give vLLM")
        return Method(name, k, checkpoint=str(export_drafter(p.target, name)))
    if name == "draft":
        if not p.draft:
            raise UserError(f"the preset {preset!r} has no draft model")
        return Method(name, k, draft_path=p.draft)
    return Method(name, k)


class Comparison(BaseModel):
    """One prompt through both engines."""

    prompt: str
    identical: bool  # the same new tokens
    vllm_tokens: int
    lab_tokens: int
    vllm: SpecCounters
    lab: SpecCounters  # the lab on vLLM's schedule

    @property
    def same_counts(self) -> bool:
        return self.vllm == self.lab


def lab_counters(result) -> SpecCounters:
    totals = tally(result.steps)
    return SpecCounters(drafts=totals.drafts, draft_tokens=totals.draft_tokens, accepted_tokens=totals.accepted_tokens,
                        accepted_per_position=totals.accepted_per_position)


def compare(runner: VllmRunner, spec: Method, preset: str, prompts: list[str], max_new_tokens: int) -> list[Comparison]:
    """Each prompt alone through vLLM (its counters' growth over that request) and through the lab."""
    target = load_model(resolve_preset(preset).target, "cpu")
    rows = []
    for prompt in prompts:
        ids = encode_prompt(target, prompt, max_new_tokens)
        theirs = runner.generate([ids], max_new_tokens)
        ours = decode(spec.request(prompt, preset, max_new_tokens), "vllm")
        vllm, lab = theirs.spec, lab_counters(ours)
        width = max(len(vllm.accepted_per_position), len(lab.accepted_per_position))
        rows.append(Comparison(
            prompt=prompt, identical=theirs.outputs[0].tokens == ours.tokens,
            vllm_tokens=len(theirs.outputs[0].tokens), lab_tokens=len(ours.tokens),
            vllm=_padded(vllm, width), lab=_padded(lab, width)))
    return rows


def _padded(counters: SpecCounters, width: int) -> SpecCounters:
    """Per-position counts to ``width`` positions (vLLM reports k positions even when the tail is 0)."""
    per = list(counters.accepted_per_position) + [0] * (width - len(counters.accepted_per_position))
    return counters.model_copy(update={"accepted_per_position": per})


def markdown(spec: Method, rows: list[Comparison]) -> str:
    lines = [f"### {spec.label}", "", "| prompt | identical | vLLM drafts / tokens / accepted / per position | "
             "lab (vLLM's schedule) | equal |", "|---|---|---|---|---|"]

    def cell(c: SpecCounters) -> str:
        return f"{c.drafts} / {c.draft_tokens} / {c.accepted_tokens} / {c.accepted_per_position}"

    for r in rows:
        lines.append(f"| {r.prompt[:24]!r} | {'✓' if r.identical else '✗'} | {cell(r.vllm)} | {cell(r.lab)} | "
                     f"{'✓' if r.same_counts else '✗'} |")
    return "\n".join(lines) + "\n"
