"""The app's /metrics and its Production monitor, against ``python app.py --preset tiny``."""
from __future__ import annotations

import urllib.request

import pytest
from app_server import TINY_MISSING, TINY_READY
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING)
gradio_client = pytest.importorskip("gradio_client")

STEP_ARGS = ("en", "It is a truth universally", "tiny", "eagle3", 3, 2, 0, 0, 24, 8, "", "")


def scrape(url: str) -> dict:
    """/metrics, read with prometheus-client's parser: sample name -> {labels: value}."""
    with urllib.request.urlopen(url + "metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    out: dict = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_metrics_equal_the_stepped_runs_records(url):
    from core import read_trace
    from core.records.metrics import tally

    c = gradio_client.Client(url, verbose=False)
    for _ in range(5):
        c.predict(*STEP_ARGS, api_name="/step")
    during = scrape(url)
    *_, download = c.predict("en", api_name="/stop")[:3]
    trace = read_trace(download["value"])
    totals = tally(trace.steps)
    assert len(trace.steps) == 5 and totals.drafts == 5

    got = scrape(url)
    labels = (("engine", "0"), ("model_name", "tiny"))
    assert got["vllm:spec_decode_num_drafts_total"][labels] == totals.drafts
    assert got["vllm:spec_decode_num_draft_tokens_total"][labels] == totals.draft_tokens
    assert got["vllm:spec_decode_num_accepted_tokens_total"][labels] == totals.accepted_tokens
    per_pos = {dict(k)["position"]: v for k, v in got["vllm:spec_decode_num_accepted_tokens_per_pos_total"].items()}
    assert [per_pos[str(i)] for i in range(len(per_pos))] == pytest.approx(
        [p * totals.drafts for p in totals.per_position_acceptance])
    assert got["vllm:generation_tokens_total"][labels] == totals.new_tokens
    assert got["sdlab_verify_seconds_count"][labels] == 5
    # between two Steps the run is not decoding: paused, not running (the gauge counts requests decoding)
    assert during["vllm:num_requests_running"][labels] == 0 and during["sdlab_requests_paused"][labels] == 1
    assert got["vllm:num_requests_running"][labels] == 0 and got["sdlab_requests_paused"][labels] == 0
    assert during["sdlab_kv_blocks_in_use"][labels] > 0 and got["sdlab_kv_blocks_in_use"][labels] == 0


def test_the_monitor_refuses_a_remote_target(url):
    c = gradio_client.Client(url, verbose=False)
    status, *_ = c.predict("en", "http://10.20.30.40:8000/metrics", 2, 0.2, api_name="/monitor_start")
    assert "10.20.30.40" in status and "--allow-remote-monitor" in status
    status, *_ = c.predict("en", url + "metrics", 2, 0.2, api_name="/monitor_start")
    assert "Watching" in status


def test_a_tick_that_read_across_a_start_changes_nothing(url):
    """A poll still reading the last endpoint when Start is pressed again must not overwrite the new
    start's message (nor bring the old endpoint's plot back): the monitor's CI flake of 2026-12."""
    import http.server
    import threading

    text = urllib.request.urlopen(url + "metrics", timeout=10).read()
    second_read, release = threading.Event(), threading.Event()
    reads = []

    class SlowMetrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            reads.append(self.path)
            if len(reads) > 1:  # the start's read answers at once, the tick's waits
                second_read.set()
                release.wait(30)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(text)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), SlowMetrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        c = gradio_client.Client(url, verbose=False)
        slow = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        status, *_ = c.predict("en", slow, 60, 0.2, api_name="/monitor_start")
        assert "Watching" in status
        tick = c.submit("en", api_name="/monitor_tick")
        assert second_read.wait(30)
        status, *_ = c.predict("en", url + "config", 60, 0.2, api_name="/monitor_start")
        assert "Prometheus" in status
        release.set()
        status, timer, verdict, summary, plot = tick.result(timeout=30)
        skipped = {"__type__": "update"}
        assert status == skipped and verdict == skipped and plot == skipped  # not cleared by the stale tick
        status, timer, *_ = c.predict("en", api_name="/monitor_tick")
        assert timer["active"] is False  # no watch since the failed start: the polling stops
    finally:
        release.set()
        server.shutdown()
