"""Memory per visitor is bounded: at most ``--max-sessions`` sessions at once (a new one beyond is
told so, in either language), and one idle for ``--session-ttl`` seconds is closed, its runs stopped
and what Gradio keeps of it dropped, so the server's memory returns after abandoned sessions."""
from __future__ import annotations

import time
import uuid

import pytest

from app.guard import guarded
from app.session import Sessions, SessionsFull
from app.i18n import t


def test_the_cap_refuses_a_new_session_with_a_message_in_the_pages_language():
    sessions = Sessions(limit=2, ttl_s=600)
    first, second = sessions.admit(), sessions.admit()
    with pytest.raises(SessionsFull) as refused:
        sessions.admit()
    assert "服务器已满" in refused.value.message("zh") and "2 个会话" in refused.value.message("zh")
    assert refused.value.message("en").startswith("The server is full: 2 sessions are open")
    assert "10 minutes" in refused.value.message("en")
    sessions.discard(first)  # a session closed (by its time-to-live, or its browser) makes room
    assert len(sessions) == 1 and sessions.admit() is not second


def test_a_handler_shows_the_refusal_in_the_visitors_language(monkeypatch):
    import app.session

    monkeypatch.setattr(app.session, "SESSIONS", Sessions(limit=1, ttl_s=60))
    taken = app.session.SESSIONS.admit()  # the one place is taken (and held: the count is of live sessions)
    assert len(app.session.SESSIONS) == 1 and taken is not None
    status = object()

    @guarded(status)
    def handler(lang, session):
        return {"session": app.session.ensure(session)}

    for lang in ("zh", "en"):
        [out] = list(handler(lang, None))
        assert t("err.sessions_full", lang, n=1, minutes=1).split("：")[0].split(":")[0] in out[status]


@pytest.fixture(scope="module")
def short_lived_app():
    from app_server import running_app

    with running_app("tiny", args=("--session-ttl", "4", "--max-sessions", "400"), with_process=True) as (url, proc):
        yield url, proc


def test_200_abandoned_api_sessions_give_their_memory_back_after_the_ttl(short_lived_app):
    """Two waves of 200 visitors who each make one call and leave: after each wave's time-to-live the
    server is back within 10% of where it started (without the time-to-live each wave adds its share)."""
    import gradio_client
    import psutil

    url, proc = short_lived_app
    server = psutil.Process(proc.pid)
    client = gradio_client.Client(url, verbose=False)

    def wave(visitors: int) -> tuple[int, int]:
        """``visitors`` who each make one call and leave; RSS with them, and after the time-to-live."""
        for _ in range(visitors):
            client.session_hash = uuid.uuid4().hex  # a new visitor each time, who never comes back
            client.predict("en", api_name="/lesson_next")
        grown = server.memory_info().rss
        time.sleep(4 + 5 + 3)  # the time-to-live, one sweep, and a margin
        return grown, server.memory_info().rss

    wave(20)  # the server warmed: what every call builds once, the allocator's first pools
    before = server.memory_info().rss
    readings = [wave(200), wave(200)]
    print(f"\n[sessions] RSS {before / 2**20:.0f} MB; per wave of 200 (with them, after the time-to-live): "
          + ", ".join(f"{g / 2**20:.0f} -> {a / 2**20:.0f} MB" for g, a in readings))
    assert readings[-1][1] <= before * 1.10


def test_a_finished_run_keeps_what_the_page_shows_and_lets_its_decoder_go():
    """A session holds the size of what it shows: a finished run keeps its records and result, not its
    decoder (the KV pool sized for the run, the drafter's state)."""
    import gc
    import weakref

    from app.runs import Run
    from core.api.request import DecodeRequest

    run = Run(DecodeRequest.of("我爱", "tiny", "draft", k=3, max_new_tokens=6))
    decoder = weakref.ref(run.decoder)
    while run.step() is not None:
        pass
    gc.collect()
    assert run.done and run.decoder is None and decoder() is None  # nothing else holds it
    assert run.result.tokens == [e.token for r in run.records for e in r.emitted]
