"""The classroom's live part (part 2) on records written by hand, no model loaded: what its lines say
the drafter drafts never contradicts what the run drafted; a step the token budget left no room to
draft blames the budget, not the drafting cost; a finished run is dropped only on a second press."""
from __future__ import annotations

import re
from dataclasses import replace
from types import SimpleNamespace

from app.i18n import t
from app.page_limits import RunGate, ServerLimits
from app.render import step_sentence
from app.session import Session
from app.views.classroom import ClassroomState
from app.views.classroom import view as classroom
from app.views.classroom.content import LIVE_PROMPT, drafting_sentence, live_note
from app.views.classroom.view import LIVE_K, LIVE_MAX_NEW_TOKENS, ClassroomView, live_request
from app.views.panels import StepPanels
from core.records.steps import DecisionRecord, KVStepRecord, NodeRecord, StepRecord, TokenRecord

KV = KVStepRecord(blocks_before=1, blocks_after=1, slots_written=0, slots_freed=0, freed_blocks=[], block_table=[0],
                  slot_grid={}, pool_in_use=1)
SETTINGS = (LIVE_PROMPT, "tiny", "hybrid")  # the live part's prompt, preset and drafter


def step(i: int, drafted: int, before: int, kept: int = 0, finished: bool = False,
         decision: DecisionRecord | None = None) -> StepRecord:
    """Step ``i`` (0-based), ``before`` new tokens into the run: a chain of ``drafted`` guesses, ``kept`` of
    them accepted, then the target's own token."""
    status = lambda d: "accepted" if d < kept else "rejected" if d == kept else "not_reached"  # noqa: E731
    nodes = [NodeRecord(id=d, token=100 + d, text=f"g{d}", parent=d - 1, depth=d + 1, draft_prob=0.5, target_prob=0.5,
                        status=status(d), proposer="ngram") for d in range(drafted)]
    nxt = TokenRecord(token=7, text="好", kind="target" if not drafted else "bonus" if kept == drafted else "correction")
    emitted = [TokenRecord(n.token, n.text, "accepted") for n in nodes[:kept]] + [nxt]
    return StepRecord(step=i, root=TokenRecord(1, "我", "root"), nodes=nodes, accepted_length=kept, next=nxt,
                      emitted=emitted, new_tokens_total=before + len(emitted), target_forwards_total=i + 1, kv=KV,
                      draft_kv_blocks=None, draft_s=0.001, verify_s=0.01, finished=finished, decision=decision)


def numbers(text: str) -> set[int]:
    """The counts a sentence states (not the 3 of "EAGLE-3")."""
    return {int(n) for n in re.findall(r"(?<![\w-])\d+", text)}


def test_the_live_part_promises_no_more_than_the_run_drafts():
    """The shape line said hybrid drafts "4 to 8 nodes per step" while the run's lines said 1–6, and its
    last step (one token of budget left) drafted nothing. The shape line states only the most a step
    drafts; the lines under it count what the run drafted, the steps that drafted nothing too."""
    run = [step(0, 6, before=0, kept=5), step(1, 1, before=6), step(2, 0, before=7, finished=True)]
    for lang in ("zh", "en"):
        for drafter, most in (("hybrid", 2 * LIVE_K), ("draft", LIVE_K), ("eagle3", LIVE_K)):
            shape = drafting_sentence(drafter, LIVE_K, lang)
            assert numbers(shape) == {most}, shape  # an upper bound, never a least count a step may miss
            assert re.search("最多" if lang == "zh" else "up to|at most", shape), shape
        note = live_note(run, lang)
        assert t("class.drafted", lang, low=1, high=6, steps=2) in note
        assert t("class.drafted_none", lang, n=1) in note
    assert "1 step drafted nothing" in live_note(run, "en")


OFF = DecisionRecord(offered=0, chosen=0, expected_tokens=1.0, expected_gain=1.0, reason="off", plain_step_s=0.01,
                     depth=0)


def test_a_step_the_budget_left_no_room_to_draft_blames_the_budget():
    """The last step of a 16-token run, one token of budget left: the controller records "off" (its
    "drafting costs more than it saves"), but the budget is why nothing was drafted."""
    last = step(9, 0, before=LIVE_MAX_NEW_TOKENS - 1, finished=True, decision=OFF)
    for lang in ("zh", "en"):
        sentence = step_sentence(last, lang, LIVE_MAX_NEW_TOKENS)
        assert t("why.budget", lang) in sentence and t("why.off", lang) not in sentence
    assert t("why.off", "en") in step_sentence(last, "en", 64)  # with tokens to spare, the cost was the reason
    assert t("why.budget", "en") in step_sentence(replace(last, decision=None), "en", LIVE_MAX_NEW_TOKENS)  # fixed k
    short = step(8, 2, before=LIVE_MAX_NEW_TOKENS - 3, kept=2,
                 decision=DecisionRecord(2, 2, 2.5, 1.2, "all", 0.01, depth=2))
    assert t("why.depth_budget", "en", depth=2, left=3) in step_sentence(short, "en", LIVE_MAX_NEW_TOKENS)
    assert t("why.depth", "en", depth=2) in step_sentence(short, "en", 64)


def fake_view() -> ClassroomView:
    """The classroom view with stand-ins for its components (each only a key of the dicts it returns)."""
    panels = StepPanels(object(), object(), object(), None, None, None)
    return ClassroomView(object(), object(), object(), panels, object(), object())


def test_the_live_part_passes_its_budget_to_the_step_sentence():
    view, session = fake_view(), Session()
    records = [step(0, 4, before=0, kept=4), step(1, 0, before=LIVE_MAX_NEW_TOKENS - 1, finished=True, decision=OFF)]
    session.of(ClassroomState).run = SimpleNamespace(request=live_request("en", ["tiny"], *SETTINGS),
                                                     prompt=LIVE_PROMPT, records=records, done=True)
    assert t("why.budget", "en") in view.render_live(session, "en")[view.panels.sentence]


class CountedRun:
    """A run that takes one step and ends, without a model; every one made is kept in ``made``."""

    made: list = []

    def __init__(self, request):
        self.request, self.prompt, self.records, self.done = request, request.prompt, [], False
        CountedRun.made.append(self)

    def step(self):
        if self.done:
            return None
        self.done = True
        self.records.append(step(0, 0, before=0, finished=True))
        return self.records[-1]

    def stop(self):
        self.done = True


def test_a_finished_run_is_dropped_only_on_a_second_press(monkeypatch):
    """Step (or Run to the end) after the run finished said nothing and started a new run, dropping the
    old one: the first press says the run is finished and what another press does; the second starts anew."""
    monkeypatch.setattr(classroom, "Run", CountedRun)
    monkeypatch.setattr(CountedRun, "made", [])
    status, state, view = object(), object(), fake_view()
    press = classroom.handlers(view, status, state, ["tiny"], RunGate(ServerLimits()))
    finished = SimpleNamespace(request=live_request("en", ["tiny"], *SETTINGS), prompt=LIVE_PROMPT,
                               records=[step(0, 0, before=0, finished=True)], done=True)
    for button in ("step", "run"):
        session = Session()
        mine = session.of(ClassroomState)
        mine.run, CountedRun.made = finished, []
        *_, told = press[button]("en", session, *SETTINGS)
        assert mine.run is finished and CountedRun.made == []  # kept, on screen
        assert told[status] == t("class.finished", "en")
        *_, again = press[button]("en", session, *SETTINGS)
        assert len(CountedRun.made) == 1 and mine.run is CountedRun.made[0]  # now a new run
        assert "sdl-error" not in str(again.get(status, ""))
    *_, zh = press["step"]("zh", session, *SETTINGS)  # the new run finished too: asked again, in Chinese
    assert zh[status] == t("class.finished", "zh") and len(CountedRun.made) == 1
