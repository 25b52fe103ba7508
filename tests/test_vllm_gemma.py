"""vLLM as the oracle on the real model (opt-in: ``SDLAB_VLLM_GEMMA=1``, after ``python -m core vllm setup`` and
with Gemma 3 270M converted, ``requirements-gemma.txt``).

vLLM 0.32 serves Gemma 3 with an EAGLE-3 drafter only through the lab's plugin (``core/vllm/plugin``, installed by
setup): these tests are what shows it works. The shipped reference-layout drafter
(``assets/gemma-270m/eagle3-reference``), exported by ``python -m core export``, drafts for both engines on the 16
held-out prompts:

- at k = 1..5: identical greedy text, and vLLM's spec-decode counters -- drafts, draft tokens, accepted tokens,
  accepted per position -- equal to the lab's on vLLM's schedule, prompt by prompt (k = 3 through the CLI,
  ``python -m core vllm compare --preset gemma-270m --method eagle3 --k 3 --json``);
- the lab's ``/metrics`` and vLLM's, after the same requests, read the same;
- a real ``vllm serve`` of it watched by the app's Production monitor in Chromium: the page's per-position
  acceptance is what vLLM's ``/metrics`` counted.

    SDLAB_VLLM_GEMMA=1 python -m pytest -q tests/test_vllm_gemma.py     # about 30 minutes on 2 cores
"""
from __future__ import annotations

import json
import os

import pytest
from app_driver import browser_page, missing_browser
from vllm_checks import assert_metrics_agree, runner
from vllm_serving import K, eagle3_server, export_drafter, watch_requests

from core.cli import main
from core.models import gemma
from core.models.prompts import load_prompts
from core.vllm import env
from core.vllm.oracle import compare, method

pytestmark = [
    pytest.mark.skipif(os.environ.get("SDLAB_VLLM_GEMMA") != "1",
                       reason="the Gemma vLLM tier is opt-in: SDLAB_VLLM_GEMMA=1 (after `python -m core vllm setup`)"),
    pytest.mark.skipif(not env.ready(), reason=env.missing_reason() if not env.ready() else ""),
    pytest.mark.skipif(not gemma.available(), reason="Gemma 3 270M is not converted here (docs/gemma.md)"),
]
PRESET = "gemma-270m"
MAX_NEW_TOKENS = 40
PROMPTS = load_prompts()  # the 16 held-out prompts


def agree(rows) -> None:
    assert [r.prompt for r in rows if not r.identical] == []
    assert [(r.prompt, r.vllm, r.lab) for r in rows if not r.same_counts] == []
    assert sum(r.vllm.drafts for r in rows) > 0 and sum(r.vllm.accepted_tokens for r in rows) > 0  # not vacuous


@pytest.mark.parametrize("k", [1, 2, 4, 5])
def test_vllm_and_the_lab_agree_on_gemmas_eagle3(k):
    spec = method("eagle3", PRESET, k)
    with runner(PRESET, spec) as vllm:
        rows = compare(vllm, spec, PRESET, PROMPTS, MAX_NEW_TOKENS)
    agree(rows)
    if k > 1:  # the drafter reaches past its first token on this set: the later positions are compared too
        assert sum(r.vllm.accepted_per_position[1] for r in rows) > 0


def test_the_compare_command_reports_the_same_at_k3(capsys):
    assert main(["vllm", "compare", "--preset", PRESET, "--method", "eagle3", "--k", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["method"] == "eagle3 k=3" and len(out["rows"]) == len(PROMPTS)
    assert all(r["identical"] and r["vllm"] == r["lab"] for r in out["rows"])
    assert sum(r["vllm"]["accepted_tokens"] for r in out["rows"]) > 0


def test_the_labs_metrics_read_as_vllms_after_the_same_requests():
    assert_metrics_agree(PRESET, method("eagle3", PRESET, K), PROMPTS[:4], MAX_NEW_TOKENS)


@pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser()))
def test_the_monitor_shows_gemmas_eagle3_acceptance_per_position_from_vllm_serve(tmp_path):
    drafter = export_drafter(tmp_path / "eagle3", PRESET)
    with eagle3_server(drafter, log_file=tmp_path / "vllm.log", preset=PRESET) as server, browser_page() as page:
        watched = watch_requests(page, server)
    metrics = watched.metrics
    assert metrics.drafts > 0 and metrics.accepted > 0 and metrics.draft_tokens == K * metrics.drafts
    assert len(metrics.per_position) == K and sum(metrics.per_position) == metrics.accepted
    assert metrics.summary() in watched.summary
    assert watched.bars["x"] == list(range(1, K + 1))
    assert watched.bars["y"] == pytest.approx(metrics.acceptance_per_position)
