"""Soak (opt-in tier, ``SDLAB_SLOW=1``): 16 users at once on one ``python app.py --preset tiny``,
through gradio_client, for a bounded time (``SDLAB_SOAK_S``, default 90 s). Every user steps
short runs to the end, round after round, and replays each run's trace; every run's tokens must
be the ones the same settings give alone (``core.generate``), and the server's memory (RSS) after
the soak must be within 10% of what it was after the first round::

    SDLAB_SLOW=1 python -m pytest -q -s tests/test_soak.py
"""
from __future__ import annotations

import os
import threading
import time

import pytest
from app_server import TINY_MISSING, TINY_READY, running_app

pytestmark = [pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING),
              pytest.mark.skipif(os.environ.get("SDLAB_SLOW") != "1",
                                 reason="the soak test is slow: run it with SDLAB_SLOW=1 (tests/test_soak.py)")]
gradio_client = pytest.importorskip("gradio_client")
psutil = pytest.importorskip("psutil")

USERS = 16
SOAK_S = float(os.environ.get("SDLAB_SOAK_S", "90"))
MAX_NEW_TOKENS = 10
RUNS = [  # (prompt, drafter, k, width, temperature, seed): the users take them in turn
    ("我爱", "draft", 4, 1, 0.0, 0), ("It is a truth", "ngram", 3, 1, 0.0, 0),
    ("我爱中国", "eagle3", 4, 2, 0.0, 0),
    ("The sea", "none", 1, 1, 0.0, 0), ("山高", "draft", 3, 2, 0.0, 0), ("春风", "draft", 4, 1, 0.8, 7),
    ("Once upon", "medusa", 3, 1, 0.0, 0), ("明月", "eagle", 3, 1, 0.9, 3),
]


@pytest.fixture(scope="module")
def solo():
    """Each run's tokens when it runs alone, in this process."""
    from core import generate

    return {run: generate(run[0], drafter=run[1], k=run[2], tree=None if run[3] == 1 else f"{run[3]}x{run[2]}",
                          temperature=run[4], seed=run[5], max_new_tokens=MAX_NEW_TOKENS).tokens for run in RUNS}


def one_run(c, run) -> list[int]:
    """Step a run to its end through /step, then replay its trace; the tokens it made."""
    from core import read_trace

    prompt, drafter, k, width, temperature, seed = run
    args = ("en", prompt, "tiny", drafter, k, width, temperature, seed, MAX_NEW_TOKENS, 16, "", "")
    for _ in range(MAX_NEW_TOKENS + 1):
        status, _, download, *_ = c.predict(*args, api_name="/step")
        assert "Error" not in status, status
        if "· done" in status:
            break
    trace = download["value"]
    outputs = c.predict("en", gradio_client.handle_file(trace), api_name="/replay_upload")
    assert "Error" not in outputs[0], outputs[0]
    c.predict("en", api_name="/reset")
    return read_trace(trace).summary["tokens"]


def test_sixteen_users_get_their_solo_outputs_and_memory_stays_flat(solo):
    with running_app("tiny", args=("--max-runs", str(USERS), "--queue-size", "64"), with_process=True) as (url, proc):
        server = psutil.Process(proc.pid)
        first_round = threading.Barrier(USERS + 1)
        deadline = time.monotonic() + SOAK_S
        rounds, failures = [0] * USERS, []

        def user(i: int) -> None:
            c = gradio_client.Client(url, verbose=False)
            try:
                while True:
                    run = RUNS[(i + rounds[i]) % len(RUNS)]
                    assert one_run(c, run) == solo[run], f"user {i}: {run} differs from its solo run"
                    rounds[i] += 1
                    if rounds[i] == 1:
                        first_round.wait()
                    if time.monotonic() > deadline:
                        return
            except BaseException as e:  # noqa: BLE001 -- reported below
                failures.append(e)
                first_round.abort()

        threads = [threading.Thread(target=user, args=(i,)) for i in range(USERS)]
        for thread in threads:
            thread.start()
        first_round.wait()
        rss_first = server.memory_info().rss
        samples = []
        while any(thread.is_alive() for thread in threads):
            samples.append(round(server.memory_info().rss / 2**20))
            time.sleep(5)
        rss_last = server.memory_info().rss
    assert not failures, failures[:3]
    growth = rss_last / rss_first - 1
    print(f"\n[soak] {USERS} users, {SOAK_S:.0f} s, {sum(rounds)} runs ({min(rounds)}-{max(rounds)} per user); "
          f"server RSS {rss_first / 2**20:.0f} MB after the first round, {rss_last / 2**20:.0f} MB after "
          f"the soak ({growth:+.1%}); every 5 s (MB): {samples}")
    assert growth < 0.10
