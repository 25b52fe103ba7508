"""The Production monitor on a real ``vllm serve`` (opt-in: ``SDLAB_VLLM=1``, after ``python -m core vllm
setup``; also needs the browser, like tests/test_app_monitor_browser.py).

vLLM serves the tiny target with its EAGLE-3, exported by ``python -m core export``, on loopback; 8
held-out prompts go through its OpenAI API (``/v1/completions``, greedy, two at a time) while the app's
monitor polls its ``/metrics``. The page then shows vLLM's own counts, read apart from the monitor with
prometheus-client's parser: drafts, drafted and accepted tokens, τ and acceptance per position.

    SDLAB_VLLM=1 python -m pytest -q tests/test_vllm_serve.py      # about 3 minutes on 2 cores
"""
from __future__ import annotations

import os

import pytest
from app_driver import browser_page, missing_browser
from app_server import ROOT, TINY_MISSING, TINY_READY
from vllm_serving import K, MAX_TOKENS, eagle3_server, export_drafter, watch_requests

from core.vllm import env
from core.vllm.client import VllmError
from core.vllm.serve import serve

pytestmark = [
    pytest.mark.skipif(os.environ.get("SDLAB_VLLM") != "1",
                       reason="the vLLM tier is opt-in: SDLAB_VLLM=1 (after `python -m core vllm setup`)"),
    pytest.mark.skipif(not env.ready(), reason=env.missing_reason() if not env.ready() else ""),
    pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING),
]
ARTIFACTS = ROOT / "test-artifacts"


@pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser()))
def test_the_monitor_shows_vllms_own_acceptance_per_position(tmp_path):
    ARTIFACTS.mkdir(exist_ok=True)
    drafter = export_drafter(tmp_path / "eagle3")
    with eagle3_server(drafter, log_file=tmp_path / "vllm.log") as server, browser_page() as page:
        watched = watch_requests(page, server, screenshot=ARTIFACTS / "monitor-vllm-serve.png")
        assert server.process.poll() is None
    for reply in watched.replies:  # the budget, or the end-of-sequence token before it
        assert reply["choices"][0]["finish_reason"] in ("length", "stop")
        assert 0 < reply["usage"]["completion_tokens"] <= MAX_TOKENS
    metrics = watched.metrics
    assert metrics.drafts > 0 and metrics.draft_tokens == K * metrics.drafts  # vLLM drafts k every step
    assert len(metrics.per_position) == K and sum(metrics.per_position) == metrics.accepted
    assert metrics.summary() in watched.summary
    assert watched.bars["x"] == list(range(1, K + 1))
    assert watched.bars["y"] == pytest.approx(metrics.acceptance_per_position)
    assert server.process.poll() is not None  # stopped on leaving, and its engine core with it
    with pytest.raises(ProcessLookupError):
        os.killpg(server.process.pid, 0)


def test_a_server_that_cannot_start_is_an_error_quoting_its_log(tmp_path):
    """A model folder that is not one: vLLM exits, and the error carries its own last lines."""
    (tmp_path / "empty").mkdir()
    with pytest.raises(VllmError, match=r"(?s)exited with status \d+ before it was ready.*\n.*\S"):
        with serve(tmp_path / "empty", log_file=tmp_path / "vllm.log"):
            pass
