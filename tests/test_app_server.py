"""The app as a server that no visitor can pin or blow up (``python app.py --preset tiny``, run here
with two decoding slots to keep the test short): a request past the slots is told the server is
busy at once, a client that goes away stops its run, every endpoint answers a bad value with a
message, replayed traces stay within a time and size budget, and the model cache is bounded."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from app_server import TINY_MISSING, TINY_READY, client, running_app
from trace_cases import RENDER_BUDGET_S, RESPONSE_BUDGET_BYTES, write_blow_up_traces

pytestmark = pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING)
gradio_client = pytest.importorskip("gradio_client")

MAX_RUNS = 2
START_BUDGET_S = 5.0
PLAY = dict(lang="en", prompt="我爱", preset="tiny", drafter="draft", k=4, width=1, temperature=0, seed=0,
            max_new_tokens=400, eagle_nodes=16, target="", draft="")
STEP = {**PLAY, "max_new_tokens": 8}
COMPARE = ("en", "It is a truth", "tiny", ["ngram"], "4", 0, 0, 400, "", "")
DROPPED_CLIENT = """
import sys
from gradio_client import Client
job = Client(sys.argv[1], verbose=False).submit(*{args!r}, api_name={api_name!r})
for update in job:
    print("running", flush=True)
    break
import time
time.sleep(600)
"""


@pytest.fixture(scope="module")
def url():
    unreachable_hub = {"HF_ENDPOINT": "http://127.0.0.1:9"}  # nothing listens there, network or not
    with running_app("tiny", args=("--max-runs", str(MAX_RUNS), "--queue-size", "8"), env=unreachable_hub) as address:
        yield address


def status_of(c, args: dict, api_name: str = "/step") -> str:
    return c.predict(*args.values(), api_name=api_name)[0]


def start_play(url):
    """A client whose Play is running (it has sent its first step)."""
    c = client(url)
    job = c.submit(*PLAY.values(), api_name="/play")
    deadline = time.monotonic() + 60
    while len(job.outputs()) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(job.outputs()) >= 2, "the Play did not start"
    return c


def timed_status(url, args=STEP) -> tuple[float, str]:
    start = time.monotonic()
    status = status_of(client(url), args)
    return time.monotonic() - start, status


def test_a_request_past_the_slots_is_told_the_server_is_busy_at_once(url):
    players = [start_play(url) for _ in range(MAX_RUNS)]
    seconds, status = timed_status(url)
    print(f"\n[busy] with {MAX_RUNS} Plays running a Step is answered in {seconds:.2f} s")
    assert seconds < START_BUDGET_S and "the server is busy: 2 decoding runs are in progress" in status
    for c in players:
        assert "0 blocks in use after the run" in c.predict("en", api_name="/stop")[0]
    seconds, status = timed_status(url)
    assert seconds < START_BUDGET_S and "1/8 tokens" in status


@pytest.mark.parametrize("api_name,args", [("/play", tuple(PLAY.values())), ("/compare", COMPARE)])
def test_a_dropped_client_stops_its_run(url, api_name, args):
    """The second slot's Play (or comparison) belongs to a process that is killed: its slot (and
    run) must be given back within 5 s, seen from outside as a Step that is no longer refused."""
    holder = start_play(url)
    dropped = subprocess.Popen([sys.executable, "-c", DROPPED_CLIENT.format(args=args, api_name=api_name), url],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert dropped.stdout.readline().strip() == "running"
        time.sleep(1.0)
        assert "the server is busy" in timed_status(url)[1]
    finally:
        dropped.kill()
        dropped.wait()
    killed = time.monotonic()
    while "the server is busy" in timed_status(url)[1]:
        assert time.monotonic() - killed < START_BUDGET_S, "the dropped client's run still holds its slot"
        time.sleep(0.2)
    seconds = time.monotonic() - killed
    print(f"\n[drop] {api_name}: the dropped client's run stopped {seconds:.2f} s after the client died")
    holder.predict("en", api_name="/stop")


def test_one_long_run_per_page_and_a_budget_per_request(url):
    c = start_play(url)
    status = c.predict(*PLAY.values(), api_name="/play")[0]
    assert "this page already has a run going" in status
    c.predict("en", api_name="/stop")
    big = {**PLAY, "width": 2, "k": 6}  # 400 tokens x (126 nodes + 1)
    assert "this request asks for too much work: 50800 token-nodes" in status_of(client(url), big)
    compare = ("en", "It is", "tiny", ["draft", "ngram", "medusa"], "4, 2x4", 0, 0, 400, "", "")
    assert "the limit is 32768" in client(url).predict(*compare, api_name="/compare")[0]


@pytest.mark.parametrize("api_name,args,message", [
    ("/step", {**STEP, "temperature": "nan"}, "Temperature must be a number from 0 to 2"),
    ("/step", {**STEP, "temperature": [0.5]}, "Temperature must be a number from 0 to 2"),
    ("/step", {**STEP, "drafter": "eagle3", "eagle_nodes": "x"}, "EAGLE nodes N must be a number from 1 to 128"),
    ("/step", {**STEP, "seed": 2**70}, "Seed must be a number"),
    ("/step", {**STEP, "preset": None}, "Model preset cannot be None"),
    ("/step", {**STEP, "prompt": "<img src=x>" * 300}, "the prompt is too long"),
    ("/compare", ("en", "It is", "tiny", None, "4", 0, 0, 8, "", ""), "choose at least one drafter"),
    ("/compare", ("en", "It is", "tiny", ["draft"], "4", "hot", 0, 8, "", ""), "Temperature must be"),
    ("/worth_it", ("en", None, None, None), "acceptance rate α must be a number"),
    ("/language", (None, 0.6, 4, 0.05), "the page language must be zh or en"),
    ("/language", ("en", "x", 4, 0.05), "acceptance rate α must be a number"),
    ("/replay_goto", ("en", "nan"), "must be a number"),
])
def test_every_bad_value_is_a_message(url, api_name, args, message):
    values = args.values() if isinstance(args, dict) else args
    status = client(url).predict(*values, api_name=api_name)[0]
    assert "Error" in status or "出错了" in status
    assert message in status and "<img" not in status


def test_an_unreachable_hub_fails_fast(url):
    seconds, status = timed_status(url, {**STEP, "target": "someone/not-cached-model"})
    print(f"\n[hub] an uncached hub id is refused in {seconds:.2f} s")
    assert seconds < START_BUDGET_S and "not in the local hub cache and the hub" in status


def test_replaying_the_blow_up_traces_stays_within_budget(url, tmp_path):
    c = client(url)
    for path in write_blow_up_traces(tmp_path):
        start = time.monotonic()
        outputs = c.predict("en", gradio_client.handle_file(str(path)), api_name="/replay_upload")
        seconds, size = time.monotonic() - start, len(json.dumps(outputs))
        print(f"\n[replay] {path.name} ({path.stat().st_size:,} bytes): {seconds:.2f} s, {size:,} bytes back")
        assert seconds < RENDER_BUDGET_S and size < RESPONSE_BUDGET_BYTES
        assert "trace line 2, field" in outputs[0]


def test_a_message_is_shown_as_plain_text():
    """Colour codes (a weights loader's warning) are dropped and markup quoted from a value is escaped."""
    from app.guard import error_markdown

    shown = error_markdown("\x1b[31mcould not load model '<img src=x>'\x1b[0m\n\n![x](http://example.invalid/y)", "en")
    assert "\x1b" not in shown and "<img" not in shown and "&lt;img src=x&gt;" in shown
    assert "\n" not in shown and shown.startswith('<div class="sdl-error">')
