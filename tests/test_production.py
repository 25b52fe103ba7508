"""The Prometheus exporter (vLLM's names, fed by core.records.metrics), the monitor's parsing and windows
(on the lab's own output and on a vLLM-format sample), and the monitor's address check."""
from __future__ import annotations

import socket
from pathlib import Path

import pytest
from app_server import TINY_MISSING, TINY_READY, free_port
from prometheus_client import start_http_server
from prometheus_client.parser import text_string_to_metric_families

from core import DecodeRequest, UserError, build_decoder
from core.records.metrics import tally
from core.serving.monitor import (RemoteTarget, Scrape, Watch, checked_target, drafted_positions, fetch, parse, verdict,
                                  window)
from core.serving.prometheus import LabMetrics

DATA = Path(__file__).resolve().parent / "data"


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """Every sample as (name, sorted labels) -> value, read with prometheus-client's parser."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.fixture(scope="module")
def eagle_run():
    """A real tiny run (eagle3, a 2x3 tree) fed step by step into a fresh LabMetrics."""
    if not TINY_READY:
        pytest.skip(TINY_MISSING)
    lab = LabMetrics()
    decoder, prompt_ids = build_decoder(DecodeRequest.of("It is a truth universally", preset="tiny", drafter="eagle3",
                                                         tree="2x3", max_new_tokens=40))
    records = []
    with lab.request("tiny") as meter:
        for record in decoder.steps(prompt_ids):
            meter.observe(record)
            records.append(record)
        running_inside = samples(lab.exposition().decode())
    return lab, records, running_inside


def test_counters_carry_vllm_names_and_equal_the_records_totals(eagle_run):
    lab, records, running_inside = eagle_run
    totals = tally(records)
    got = samples(lab.exposition().decode())
    labels = (("engine", "0"), ("model_name", "tiny"))
    assert totals.drafts > 5 and totals.accepted_tokens > 0
    assert got[("vllm:spec_decode_num_drafts_total", labels)] == totals.drafts
    assert got[("vllm:spec_decode_num_draft_tokens_total", labels)] == totals.draft_tokens
    assert got[("vllm:spec_decode_num_accepted_tokens_total", labels)] == totals.accepted_tokens
    per_pos = {dict(k[1])["position"]: v for k, v in got.items()
               if k[0] == "vllm:spec_decode_num_accepted_tokens_per_pos_total"}
    assert per_pos == {str(i): n for i, n in enumerate(totals.accepted_per_position)}  # 0-based, as vLLM
    assert [per_pos[str(i)] / totals.drafts for i in range(len(per_pos))] == pytest.approx(
        totals.per_position_acceptance)
    assert got[("vllm:generation_tokens_total", labels)] == totals.new_tokens
    assert got[("sdlab_target_forwards_total", labels)] == totals.steps
    assert got[("sdlab_verify_seconds_count", labels)] == totals.steps
    assert got[("sdlab_verify_seconds_sum", labels)] == pytest.approx(totals.all_verify_s)
    assert got[("sdlab_draft_seconds_total", labels)] == pytest.approx(totals.draft_s)
    assert got[("sdlab_kv_blocks_freed_total", labels)] == sum(len(r.kv.freed_blocks) for r in records)
    assert running_inside[("vllm:num_requests_running", labels)] == 1
    assert running_inside[("sdlab_kv_blocks_in_use", labels)] == records[-1].kv.blocks_after > 0
    assert got[("vllm:num_requests_running", labels)] == 0  # the run ended
    assert got[("sdlab_kv_blocks_in_use", labels)] == 0


def test_the_monitor_reads_back_the_engines_numbers(eagle_run):
    lab, records, _ = eagle_run
    totals = tally(records)
    w = window(Scrape(t=0.0), parse(lab.exposition().decode(), t=4.0))
    assert w.tau == pytest.approx(1 + totals.accepted_tokens / totals.drafts) == totals.mean_acceptance_length
    assert w.per_position == pytest.approx(totals.per_position_acceptance)
    assert w.drafted_per_s == pytest.approx(totals.draft_tokens / 4.0)
    assert w.totals.draft_cost == pytest.approx(totals.draft_cost)  # measured from the sdlab_ timings
    assert verdict(w, cost_estimate=99.0).measured


def test_a_vllm_sample_parses_into_windows_and_figures():
    """tests/data/vllm_metrics_t{0,1}.txt: two scrapes 10 s apart, written after vLLM's metric names,
    labels (model_name, engine, 0-based position) and prometheus-client's text format."""
    from app.views.production.figures import monitor_figure

    before = parse((DATA / "vllm_metrics_t0.txt").read_text(), t=100.0)
    after = parse((DATA / "vllm_metrics_t1.txt").read_text(), t=110.0)
    assert before.spec_decode and before.draft_s is None  # vLLM has no sdlab_ timings
    w = window(before, after)
    assert (w.totals.drafts, w.totals.draft_tokens, w.totals.accepted_tokens) == (300, 900, 540)
    assert w.tau == pytest.approx(2.8)
    assert w.per_position == pytest.approx([0.8, 0.6, 0.4])
    assert (w.drafted_per_s, w.accepted_per_s) == (pytest.approx(90.0), pytest.approx(54.0))
    assert (w.running, w.waiting) == (9, 2)
    v = verdict(w, cost_estimate=0.3)
    assert v.paying and not v.measured and v.break_even == pytest.approx(1.3)
    assert verdict(w, cost_estimate=2.0).paying is False
    watch = Watch(url="http://127.0.0.1:8000/metrics", first=before, last=before)
    watch.add(after)
    fig = monitor_figure(watch, "en")
    bars = [trace for trace in fig.data if trace.type == "bar"]
    assert list(bars[0].y) == pytest.approx([0.8, 0.6, 0.4]) and list(bars[0].x) == [1, 2, 3]
    tau_trace = next(trace for trace in fig.data if trace.name == "τ")
    assert list(tau_trace.y) == pytest.approx([2.8])
    assert (fig.layout.yaxis4.tickformat, fig.layout.yaxis4.dtick) == ("d", 1)  # requests: 9 running, no 8.5


def test_a_window_shows_only_the_positions_it_drafted_at():
    """The counter keeps every position label it ever saw: after a k = 8 run, a k = 4 run's windows
    showed positions 5-8 as zeros. A window reads up to its mean draft length or its last acceptance."""
    from app.views.production.figures import monitor_figure

    old = (50.0, 40.0, 30.0, 20.0, 10.0, 5.0, 2.0, 1.0)  # an earlier k = 8 run
    before = Scrape(t=0, drafts=100, draft_tokens=800, accepted_tokens=158, accepted_per_position=old)
    now = (9.0, 6.0, 3.0, 0.0)  # ten k = 4 drafts since; nothing accepted at position 4
    after = Scrape(t=2, drafts=110, draft_tokens=840, accepted_tokens=176,
                   accepted_per_position=tuple(a + b for a, b in zip(old, now)) + old[4:])
    w = window(before, after)
    assert w.totals.accepted_per_position == [9, 6, 3, 0] and w.per_position == pytest.approx([0.9, 0.6, 0.3, 0.0])
    watch = Watch(url="http://127.0.0.1:7860/metrics", first=before, last=before)
    watch.add(after)
    bars = next(trace for trace in monitor_figure(watch, "en").data if trace.type == "bar")
    assert list(bars.x) == [1, 2, 3, 4]
    assert drafted_positions(0, 0, [0, 0]) == 0  # nothing drafted, no positions
    assert drafted_positions(10, 15, [7, 2, 1, 0]) == 3  # a tree or a cut draft: its deepest acceptance


def test_the_verdict_mark_is_drawn_by_the_page_not_an_emoji():
    """✅ rendered as a box on a machine without an emoji font: the verdict starts with a CSS mark."""
    from app.views.production.view import verdict_line

    before = parse((DATA / "vllm_metrics_t0.txt").read_text(), t=100.0)
    watch = Watch(url="http://127.0.0.1:8000/metrics", first=before, last=before)
    watch.add(parse((DATA / "vllm_metrics_t1.txt").read_text(), t=110.0))
    for cost, mark in ((0.3, "sdl-mark-yes"), (2.0, "sdl-mark-no")):
        for lang in ("zh", "en"):
            line = verdict_line(watch, cost, lang)
            assert line.startswith(f'<span class="sdl-mark {mark}"></span>')
            assert not any(0x2600 <= ord(c) <= 0x27BF or ord(c) >= 0x1F000 or c == "\ufe0f" for c in line), line
    css = (Path(__file__).resolve().parent.parent / "app" / "page.css").read_text()
    assert ".sdl-mark-yes::after" in css and ".sdl-mark-no::after" in css


def test_a_counter_reset_counts_from_zero():
    w = window(Scrape(t=0, drafts=500, accepted_tokens=900), Scrape(t=1, drafts=20, accepted_tokens=30))
    assert (w.totals.drafts, w.totals.accepted_tokens) == (20, 30)


def test_malformed_text_is_a_user_error():
    with pytest.raises(UserError):
        parse("vllm:spec_decode_num_drafts_total{engine=0} twelve\n", t=0)


@pytest.mark.parametrize("url", ["http://10.1.2.3:8000/metrics", "http://[2001:db8::1]/metrics",
                                 "https://192.168.0.7/metrics", "http://metrics.example/metrics"])
def test_non_loopback_targets_are_refused(url, monkeypatch):
    real = socket.getaddrinfo

    def fake(host, *args, **kw):  # a name that resolves off this machine, without a network
        if host == "metrics.example":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("203.0.113.9", 80))]
        return real(host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    with pytest.raises(RemoteTarget):
        checked_target(url, allow_remote=False)
    assert checked_target(url, allow_remote=True).netloc == url.split("/")[2]


@pytest.mark.parametrize("url", ["file:///etc/passwd", "gopher://127.0.0.1/", "http:///metrics", "127.0.0.1:80"])
def test_only_http_urls_are_polled(url):
    with pytest.raises(UserError):
        checked_target(url, allow_remote=True)


def test_loopback_names_are_fetched_at_the_checked_address():
    lab = LabMetrics()
    lab.drafts.labels("m", "0").inc(3)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=lab.registry)
    try:
        target = checked_target(f"http://localhost:{port}/metrics", allow_remote=False)
        assert target.address_url.startswith(("http://127.0.0.1:", "http://[::1]:"))
        assert target.netloc == f"localhost:{port}" and target.path == "/metrics"
        scrape = parse(fetch(f"http://localhost:{port}/metrics"), t=0)
        assert scrape.drafts == 3
    finally:
        server.shutdown()
        thread.join(5)


def test_metrics_route_is_for_this_machine_unless_allowed():
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from app.metrics_route import metrics_route

    remote = TestClient(Starlette(routes=[metrics_route()]))  # its client address is not loopback
    assert remote.get("/metrics").status_code == 403
    allowed = TestClient(Starlette(routes=[metrics_route(allow_remote=True)])).get("/metrics")
    assert allowed.status_code == 200 and allowed.headers["content-type"].startswith("text/plain")
    local = TestClient(Starlette(routes=[metrics_route()]), client=("127.0.0.1", 5000)).get("/metrics")
    assert local.status_code == 200


def test_serve_metrics_decodes_prompts_and_serves_them(tmp_path):
    import subprocess
    import sys
    import time
    import urllib.request

    from core import generate

    if not TINY_READY:
        pytest.skip(TINY_MISSING)
    texts = ["我爱", "It is a truth"]
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(texts) + "\n", encoding="utf-8")
    expected = tally([r for p in texts for r in generate(p, preset="tiny", drafter="ngram", k=3,
                                                          max_new_tokens=12).steps])
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "core", "serve-metrics", "--preset", "tiny", "--drafter", "ngram",
                             "--k", "3", "--max-new-tokens", "12", "--prompts", str(prompts), "--rounds", "1",
                             "--port", str(port)], cwd=Path(__file__).resolve().parent.parent,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    labels = (("engine", "0"), ("model_name", "tiny"))
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                got = samples(urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode())
            except OSError:
                got = {}
            if got.get(("vllm:generation_tokens_total", labels)) == expected.new_tokens and \
                    got.get(("vllm:num_requests_running", labels)) == 0:
                break
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.5)
        assert got[("vllm:spec_decode_num_drafts_total", labels)] == expected.drafts
        assert got[("vllm:spec_decode_num_accepted_tokens_total", labels)] == expected.accepted_tokens
        assert got[("vllm:num_requests_waiting", labels)] == 0
    finally:
        proc.terminate()
        proc.wait(15)


def test_serve_metrics_refuses_a_public_address_without_the_flag():
    from core.cli import main

    assert main(["serve-metrics", "--host", "0.0.0.0", "--port", str(free_port())]) == 2


def test_an_sglang_endpoint_gives_tau_from_its_gauge():
    """tests/data/sglang_metrics.txt, written for this test after SGLang's metric names and labels: it
    has no draft counters, so tau is its acceptance-length gauge (mean over ranks), nothing per position."""
    text = (DATA / "sglang_metrics.txt").read_text()
    before, after = parse(text, t=0.0), parse(text, t=5.0)
    assert after.spec_decode and after.accept_length == pytest.approx(3.0)
    w = window(before, after)
    assert w.tau == pytest.approx(3.0) and w.per_position == [] and w.drafted_per_s == 0
    assert (w.running, w.waiting) == (12, 3)
    assert verdict(w, cost_estimate=0.5).paying
