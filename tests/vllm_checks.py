"""Checks of the lab against vLLM shared by the vLLM tiers (tests/test_vllm.py on tiny, tests/test_vllm_gemma.py
on Gemma 3 270M)."""
from __future__ import annotations

import os

from core.api import build_decoder, encode_prompt
from core.models.loading import load_model, resolve_preset
from core.serving.monitor import parse
from core.serving.prometheus import lab_metrics
from core.vllm.client import VllmRunner
from core.vllm.oracle import Method
from core.vllm.schedule import vllm_steps


def runner(preset: str, spec: Method) -> VllmRunner:
    return VllmRunner(resolve_preset(preset).target, spec.speculative_config(), threads=min(2, os.cpu_count() or 1))


def assert_metrics_agree(preset: str, spec: Method, prompts: list[str], max_new_tokens: int) -> None:
    """The same requests through vLLM and the lab (on vLLM's schedule); both registries in the Prometheus text
    format, read by the Production monitor's parser, count the same drafts, draft tokens and accepted tokens,
    overall and per position."""
    lab = lab_metrics()
    target = load_model(resolve_preset(preset).target, "cpu")
    with runner(preset, spec) as vllm:
        before = parse(vllm.exposition(), 0)
        for prompt in prompts:
            vllm.generate([encode_prompt(target, prompt, max_new_tokens)], max_new_tokens)
            decoder, ids = build_decoder(spec.request(prompt, preset, max_new_tokens))
            with lab.request(preset) as meter:
                for record in vllm_steps(decoder, ids):
                    meter.observe(record)
        after = parse(vllm.exposition(), 1)
    ours = parse(lab.exposition().decode(), 1)
    assert after.drafts - before.drafts == ours.drafts > 0
    assert after.draft_tokens - before.draft_tokens == ours.draft_tokens
    assert after.accepted_tokens - before.accepted_tokens == ours.accepted_tokens > 0
    theirs = [a - (before.accepted_per_position[i] if i < len(before.accepted_per_position) else 0)
              for i, a in enumerate(after.accepted_per_position)]
    assert theirs == list(ours.accepted_per_position) + [0] * (len(theirs) - len(ours.accepted_per_position))
