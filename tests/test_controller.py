"""The goodput controller (--k auto / --tree auto) and the verify-cost curve it reads."""
from __future__ import annotations

import json
import math

import pytest

from core import DecodeRequest, build_decoder, generate, target_greedy
from core.cost.curve import CostCurve, cost_curve
from core.drafters.controller import PLAIN_CHECK_GAP, Calibration, GoodputController, best_first, subtree
from core.runtime.tree import DraftTree


FLAT = CostCurve(tokens=[1, 32], ratio=[1.0, 1.0], forward_s=0.01, device="cpu", threads=1, model="x")
STEEP = CostCurve(tokens=[1, 2, 32], ratio=[1.0, 2.0, 32.0], forward_s=0.01, device="cpu", threads=1, model="x")


def tree_of(parents: list[int], probs: list[float]) -> DraftTree:
    tree = DraftTree()
    for i, (parent, prob) in enumerate(zip(parents, probs)):
        tree.add(100 + i, parent, prob)
    return tree


def test_best_first_keeps_parents_and_sibling_order():
    # root -> 0 (0.3), 1 (0.9 but after its elder sibling 0); 0 -> 2 (0.9); 1 -> 3 (0.9)
    tree = tree_of([-1, -1, 0, 1], [0.3, 0.9, 0.9, 0.9])
    order = best_first(tree, tree.draft_probs)
    assert order[0] == 0  # the first child comes first, whatever its sibling's chance
    assert order.index(1) > order.index(0) and order.index(3) > order.index(1) and order.index(2) > order.index(0)
    assert order == [0, 1, 3, 2]  # path chances: 1 -> .9, 3 -> .81, 2 -> .27
    kept = subtree(tree, sorted(order[:3]))
    assert kept.tokens == [100, 101, 103] and kept.parents == [-1, -1, 1]


def test_the_calibration_starts_at_its_prior_and_learns():
    a = Calibration()
    assert a(0.85) == pytest.approx(0.85) and a(0.85, prior=0.4) == pytest.approx(0.4)
    for _ in range(50):
        a.observe(0.85, False)
    assert a(0.85) < 0.05 and a(0.85, prior=0.9) < 0.05 and a(0.25) == pytest.approx(0.25)


def test_acceptance_by_level_learns_and_an_untried_level_is_no_better_than_the_one_above():
    a = Calibration()
    assert a.on_path(3) == pytest.approx([0.5, 0.5, 0.5])
    for _ in range(40):
        a.observe_path(drafted=2, kept=1)  # level 1 always kept, level 2 never
    first, second, third = a.on_path(3)
    assert first > 0.9 and second < 0.1 and third == pytest.approx(second)  # (older steps fade)
    assert a.carried().on_path(1) == pytest.approx([(2 + 2 * 0.5) / 4])  # the same rate, worth 2 observations


def test_it_verifies_all_when_verifying_is_flat_and_none_when_it_is_steep():
    tree = tree_of([-1, 0, 1, 2], [0.9, 0.9, 0.9, 0.9])
    flat = GoodputController.__new__(GoodputController)
    flat.curve, flat.verify_scale, flat.calibration = FLAT, 1.0, Calibration()
    kept, expected, gain = flat._choose(tree, plain_s=0.01)
    assert kept == [0, 1, 2, 3]  # each node worth its level's acceptance (no data yet: one half)
    assert expected == pytest.approx(1 + 0.5 + 0.25 + 0.125 + 0.0625)
    assert gain == pytest.approx(expected)
    flat.curve = STEEP
    kept, expected, gain = flat._choose(tree, plain_s=0.01)
    assert kept == [] and expected == 1.0 and gain == 1.0


@pytest.mark.parametrize("drafter, shape", [("draft", dict(k="auto")), ("ngram", dict(k="auto")),
                                            ("draft", dict(tree="auto")), ("medusa", dict(k="auto")),
                                            ("eagle3", dict(tree="auto")), ("eagle", dict(k="auto"))])
def test_auto_is_lossless_and_records_its_decisions(drafter, shape):
    prompts = ["床前明月光，疑是地上霜。举头望明月，", "It is a truth universally acknowledged, that a single man"]
    for prompt in prompts:
        decoder, ids = build_decoder(DecodeRequest.of(prompt, "tiny", drafter, max_new_tokens=32, **shape))
        records = list(decoder.steps(ids))
        assert decoder.result.tokens == target_greedy(decoder.target, ids, 32)
        assert decoder.result.kv["blocks_in_use_after"] == 0
        assert all(r.decision is not None and r.decision.chosen == len(r.nodes) <= max(r.decision.offered, 0)
                   for r in records)
        assert all(r.decision.realised_gain is not None for r in records)
    assert decoder.result.settings["auto"] is True


def test_auto_sampling_keeps_the_seeded_law(monkeypatch):
    """At temperature > 0 a pruned draft is still verified by the exact rule (the chi-square test of
    the target's law over many seeds is in tests/test_sampling.py); here: reproducible from the seed
    given the same choices. The controller's choices follow measured times, so its clock and the
    engine's are made a fixed one (1 ms a reading) and each run starts from nothing learned."""
    import core.drafters.controller
    import core.engine.decoder

    def run():
        clock = TickingClock()
        monkeypatch.setattr(core.drafters.controller, "perf_counter", clock)
        monkeypatch.setattr(core.engine.decoder, "perf_counter", clock)
        monkeypatch.setattr(core.drafters.controller, "_MEMORY", {})
        result = generate("我爱", drafter="draft", k="auto", temperature=0.8, seed=3, max_new_tokens=16)
        assert any(r.decision.depth for r in result.steps)  # it drafted
        return result.tokens

    assert run() == run()


def test_hybrid_keeps_its_free_ngram_chain_where_eagle_is_not_asked(monkeypatch):
    """The n-gram half of ``hybrid`` costs nothing: where the controller asks EAGLE-3 for no level,
    the n-gram chain is still proposed, as deep as the budget allows; greedy output stays the
    target's and no block is left."""
    monkeypatch.setattr(GoodputController, "_depth", lambda self, limit, plain_s: (0, False))
    prompt = "床前明月光，疑是地上霜。床前明月光，疑是地上霜。床前明月光，"
    decoder, ids = build_decoder(DecodeRequest.of(prompt, "tiny", "hybrid", max_new_tokens=24, k="auto"))
    records = list(decoder.steps(ids))
    assert decoder.result.tokens == target_greedy(decoder.target, ids, 24)
    assert decoder.result.kv["blocks_in_use_after"] == 0
    assert all(r.decision.depth == 0 for r in records)
    assert max(r.decision.offered for r in records) > 4  # chains several tokens long, though no level was asked
    assert all(n.proposer == "ngram" for r in records for n in r.nodes)


def test_the_cost_curve_is_measured_once_and_cached(tmp_path, monkeypatch, tiny):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    target, _ = tiny
    curve = cost_curve(target)
    files = list((tmp_path / "speculative-decoding-lab" / "cost").glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["tokens"] == curve.tokens
    assert curve.ratio[0] == 1.0 and all(b >= a for a, b in zip(curve.ratio, curve.ratio[1:]))
    assert cost_curve(target) == curve  # read back, not measured again
    assert curve.v(7) >= curve.v(6) and curve.seconds(1) == pytest.approx(curve.forward_s)


def test_the_page_says_why_and_outlines_each_proposer(monkeypatch):
    import core.api.decoding
    from app.figures.tree import tree_figure
    from app.render import step_sentence

    monkeypatch.setattr(core.api.decoding, "cost_curve", lambda target: FLAT)  # verifying more costs nothing: keep all
    result = generate("床前明月光，疑是地上霜。床前明月光，", drafter="hybrid", tree="auto", max_new_tokens=12)
    sentences = [step_sentence(r, "en") for r in result.steps]
    assert all('class="sdl-why"' in s for s in sentences)
    assert "Trying a draft: " in sentences[0]  # nothing known yet: one level, to measure
    assert any("levels deep: on this run so far, that depth is the fastest" in s and "Checked all" in s
               for s in sentences)
    mixed = [r for r in result.steps if len({n.proposer.split("-")[0] for n in r.nodes}) > 1]
    names = [trace.name for trace in tree_figure(mixed[0], "en").data]
    assert any(str(name).startswith("proposed by: ngram") for name in names)


JARGON = ("Probe", "Realised", "realised", "verifies at least one node", "goodput", "α")


def test_the_why_line_is_plain_words_with_the_numbers_behind_a_detail(monkeypatch):
    """What the page says under each ``auto`` step: a sentence a student can follow, in both
    languages, and the numbers (expected and measured, from the step's own record) in a closed detail."""
    import re

    import core.api.decoding
    from app.render import decision_line

    monkeypatch.setattr(core.api.decoding, "cost_curve", lambda target: FLAT)
    result = generate("床前明月光，疑是地上霜。床前明月光，", drafter="ngram", k="auto", max_new_tokens=12)
    for record in result.steps:
        for lang in ("en", "zh"):
            line = decision_line(record, lang)
            words, numbers = line.split('<details class="sdl-why-numbers">')
            assert not any(word in words for word in JARGON), words
            assert "×" not in words and "<" not in words  # no ratios, no markup before the detail
            if lang == "zh":
                assert not re.search(r"[A-Za-z]{3,}", words.replace("token", "")), words  # no English left
            d = record.decision
            ms = (record.draft_s + record.verify_s) * 1e3
            assert f"{ms:.1f}" in numbers and f"{d.plain_step_s * 1e3:.1f}" in numbers
            assert f"{d.realised_gain:.2f}" in numbers and f"{d.expected_gain:.2f}" in numbers
            assert numbers.startswith("<summary>" + ("The numbers" if lang == "en" else "具体数字"))
    first = decision_line(result.steps[0], "en")
    assert first.startswith("Trying a draft") and "1 levels" not in first  # counts of one read as one


def test_the_draft_cost_separates_catching_up_from_drafting_levels():
    from core.drafters.controller import DraftCost

    cost = DraftCost()
    for catch_up, depth in [(1, 1), (2, 3), (20, 1), (3, 2), (1, 4), (30, 2), (2, 1)]:
        cost.observe(catch_up, depth, 0.2e-3 + 0.05e-3 * catch_up + 0.7e-3 * depth)
    assert cost.seconds(2, 3) == pytest.approx(0.2e-3 + 0.1e-3 + 2.1e-3, rel=0.02)
    assert cost.seconds(25, 1) == pytest.approx(0.2e-3 + 1.25e-3 + 0.7e-3, rel=0.02)


def _controller(curve, level_s: float, accepted: bool) -> GoodputController:
    """A controller mid-run: a draft level costs ``level_s``; 4-level drafts were all kept, or none."""
    from core.drafters.controller import DraftCost

    c = GoodputController.__new__(GoodputController)
    c.curve, c.verify_scale, c.overrun = curve, 1.0, 1.0
    c.plain_walls, c.carried_walls = [curve.forward_s], ()
    c.calibration, c.draft_cost = Calibration(), DraftCost()
    for depth in (1, 2, 3, 1):
        c.draft_cost.observe(1, depth, level_s * depth)
    for _ in range(30):
        c.calibration.observe_path(4, 4 if accepted else 0)
    c.plain_steps, c.probe_gap, c.probe_loss = 0, 4, None
    c.saved_per_step, c.first_probe_loss = 0.0, 0.0
    return c


def test_it_drafts_deep_when_levels_are_kept_and_cheap_and_not_at_all_when_they_are_not():
    good = _controller(FLAT, level_s=0.0005, accepted=True)  # a level costs 5% of a forward, always kept
    depth, probe = good._depth(8, good._plain_s())
    assert depth >= 4 and not probe
    bad = _controller(FLAT, level_s=0.004, accepted=False)  # 40% of a forward, never kept
    assert bad._depth(8, bad._plain_s()) == (0, False)
    bad.plain_steps = 4  # the probe is due
    assert bad._depth(8, bad._plain_s()) == (1, True)
    bad.probe_loss = bad._probe_loss(0.005, 1.0)
    bad._next_probe(hit=False)
    assert bad.probe_gap >= 8  # a miss: wait longer (twice, and at most 2% of the time on probes)
    bad._next_probe(hit=True)  # a hit: the depths are weighed again at the next step, the next probe
    assert bad.probe_gap == bad._affordable_gap(bad._probe_loss(0.005, 1.0))  # when affordable
    assert bad._depth(8, bad._plain_s()) == (0, False)  # and one kept token does not make 40% levels pay


def test_a_probe_drafts_the_depth_that_would_pay_best_if_the_prompt_suits_the_drafter():
    """A draft that costs 1.5 forwards to start and little per level, each level kept half the time:
    no depth beats a plain step, and deeper ones lose less. A probe asks for the depth that would
    pay best were each level kept once more (a prompt where the drafter does better than its
    record): at least as deep, learning about every level it drafts."""
    from core.drafters.controller import PROBE_OPTIMISM, DraftCost

    c = _controller(FLAT, level_s=0.0005, accepted=True)
    c.draft_cost, c.calibration = DraftCost(), Calibration()
    for depth in (1, 2, 3, 1, 4):
        c.draft_cost.observe(1, depth, 0.015 + 0.0005 * depth)
    for kept in (0, 1, 2, 0, 4, 0, 1, 3) * 4:
        c.calibration.observe_path(4, kept)
    depth, expected, pays = c._best_depth(8, c._plain_s())
    assert not pays and depth > 1 and expected > 1.5
    assert c._depth(8, c._plain_s()) == (0, False)
    c.plain_steps = 4
    hoped = c._best_depth(8, c._plain_s(), optimism=PROBE_OPTIMISM)[0]
    assert hoped >= depth and c._depth(8, c._plain_s()) == (hoped, True)


def test_a_new_prompt_is_probed_at_once_where_drafting_saved_time_on_recent_prompts():
    """What a probe loses against what drafting saved per step on the last prompts, over the steps
    this prompt has left; a drafter that saved nothing waits its affordable gap."""
    c = _controller(FLAT, level_s=0.004, accepted=False)
    c.first_probe_loss, c.probe_gap = 0.5 * FLAT.forward_s, 25
    c._first_probe(remaining=40)  # saved nothing recently
    assert c.probe_gap == 25
    c.saved_per_step = 0.1 * FLAT.forward_s  # 10% of a step: 4 steps' worth over 40, against half a step
    c._first_probe(remaining=40)
    assert c.probe_gap == 0


def test_probes_wait_until_they_are_affordable_and_then_leave_the_controller_off_until_due():
    """The gap between probes grows with what a probe loses (its cost less the token it may win),
    to at most 32 plain steps; while off, no depth is even weighed (nothing about drafting is
    learned before the next probe)."""
    c = _controller(FLAT, level_s=0.004, accepted=False)
    loss = c._probe_loss(0.5 * FLAT.forward_s, 1.0)  # a probe costs half a step and, never kept, wins nothing
    assert 23 <= c._affordable_gap(loss) <= 25  # about 0.5 step lost, at most 2% of the time
    assert c._affordable_gap(c._probe_loss(10 * FLAT.forward_s, 1.0)) == 32  # never more than 32 plain steps apart
    c.plain_steps, c.probe_gap = 3, 25
    c.calibration = None  # would fail if consulted
    assert c._depth(8, c._plain_s()) == (0, False)


@pytest.mark.parametrize("drafter, shape", [("hybrid", dict(tree="3x4")), ("hybrid", dict(tree="auto")),
                                            ("eagle3", dict(tree="auto"))])
def test_the_expansion_points_at_the_nodes_that_were_verified(tmp_path, drafter, shape):
    """EAGLE-2's scored candidates name their node in the verified tree, also where a wrapper
    renumbered it (hybrid's merge puts the n-gram chain first; the controller keeps a part); the
    trace reads back. With nothing carried over, the controller's first step probes and verifies
    at least one node, whatever the clock says of the steps after it (a busy machine may keep
    drafting off)."""
    from core import read_trace

    prompt = "床前明月光，疑是地上霜。床前明月光，"
    path = tmp_path / "run.jsonl"
    result = generate(prompt, drafter=drafter, max_new_tokens=16, trace=str(path), **shape)
    pointed = 0
    for record in result.steps:
        if record.expansion is None:
            continue
        for token, node in zip(record.expansion.tokens, record.expansion.kept_as):
            if node >= 0:
                assert record.nodes[node].token == token
                pointed += 1
    assert pointed > 0
    assert len(read_trace(path).steps) == len(result.steps)


def test_a_probe_that_the_overrun_makes_lose_is_not_repeated_at_once():
    """The regression on tiny: a probe costing 0.4 of a step beyond it and expected to bring 1.4
    tokens looks free -- but drafting steps take 20% longer than modelled (``overrun``), the same
    factor that keeps drafting off, so it loses 0.28 of a step and the next one waits; it used to
    be repeated step after step."""
    c = _controller(FLAT, level_s=0.004, accepted=False)
    c.overrun = 1.2
    loss = c._probe_loss(0.4 * FLAT.forward_s, 1.4)
    assert loss == pytest.approx(0.28 * FLAT.forward_s)
    c.probe_loss, c.probe_gap = loss, 0
    c._next_probe(hit=True)
    assert 14 <= c.probe_gap <= 15  # 0.28 of a step each, 2% of the time (ceil of 14 in floats)


class TickingClock:
    """``perf_counter`` for a run whose timings must repeat exactly: every reading advances it by a
    millisecond; ``pause`` moves it on as a user's wait between two Step clicks does (or as work does);
    ``stall`` moves it on as time spent waiting for a core, which ``waited`` (``thread_wait_s``) counts."""

    def __init__(self):
        self.now = 0.0
        self.waited = 0.0  # seconds of ``stall``: wall time the process spent without a core

    def __call__(self) -> float:
        self.now += 1e-3
        return self.now

    def waited_s(self) -> float:
        return self.waited

    def pause(self, seconds: float) -> None:
        self.now += seconds

    def stall(self, seconds: float) -> None:
        """The process waits ``seconds`` for a core (other processes' load, a stall): wall time, no CPU."""
        self.now += seconds
        self.waited += seconds

    def install(self, monkeypatch) -> None:
        """Time the engine and the controller by this clock, wall and waits for a core alike."""
        import core.common.timing
        import core.drafters.controller
        import core.engine.decoder

        for module in (core.engine.decoder, core.drafters.controller):
            monkeypatch.setattr(module, "perf_counter", self)
        for module in (core.engine.decoder, core.drafters.controller, core.common.timing):  # waited_since reads it
            monkeypatch.setattr(module, "thread_wait_s", self.waited_s)


# v(n) as the ticking clock sees tiny: a plain step takes 6 readings; a wider verify the same
TICKING_CURVE = CostCurve(tokens=[1, 32], ratio=[1.0, 1.0], forward_s=0.006, device="cpu", threads=1, model="tiny")


def paused_run(clock: TickingClock, pause: float, prompt: str) -> list[tuple]:
    """One ``draft --k auto`` run on tiny stepped by hand with ``pause`` seconds between steps: per step
    its decision (depth, probe, nodes offered and chosen, reason), the plain step the controller had
    measured, and the step's recorded draft and verify seconds."""
    decoder, ids = build_decoder(DecodeRequest.of(prompt, "tiny", "draft", k="auto", max_new_tokens=24))
    steps = []
    for record in decoder.steps(ids):
        d = record.decision
        steps.append((d.depth, d.probe, d.offered, d.chosen, d.reason, d.plain_step_s, record.draft_s, record.verify_s))
        clock.pause(pause)
    return steps


def test_a_pause_between_steps_is_not_a_step_and_does_not_reach_another_session(monkeypatch):
    """Stepping by hand with pauses of 0, 1 and 3 s between Step clicks gives the same decisions and
    the same recorded step times: the controller times only the engine's work (its clock stops at
    each yield). What the paused session taught the process-wide memory is the same too, so the
    next session on the same model (another user, or Compare's ``auto``) decides as it would have.
    The clock ticks a millisecond a reading, so that two runs time alike and may be compared exactly;
    before this fix a 1 s pause made each plain step read as a second (``plain_step_s``)."""
    import core.drafters.controller

    runs = {}
    for pause in (0.0, 1.0, 3.0):
        clock = TickingClock()
        clock.install(monkeypatch)
        monkeypatch.setattr(core.drafters.controller, "_MEMORY", {})
        paused = paused_run(clock, pause, "床前明月光，疑是地上霜。")
        other = paused_run(clock, 0.0, "It is a truth universally acknowledged, that a single man")
        runs[pause] = paused, other
    assert runs[1.0] == runs[0.0] and runs[3.0] == runs[0.0]
    paused, other = runs[0.0]
    assert len(paused) > 4 and max(step[5] for step in paused + other) < 0.5
    assert {step[0] for step in paused + other} > {0} and 0 in {step[0] for step in paused + other}  # drafted, and not always


def test_the_engine_clock_stops_while_the_run_waits(tiny):
    """A real pause of 1 s between two steps: the engine's clock (``ProposeContext.clock``) does not count it."""
    import time

    decoder, ids = build_decoder(DecodeRequest.of("我爱", "tiny", "none", max_new_tokens=3))
    steps = decoder.steps(ids)
    next(steps)
    before = decoder.state.clock()
    time.sleep(1.0)
    next(steps)
    assert decoder.state.clock() - before < 0.5
    steps.close()


AUSTEN = "It is a truth universally acknowledged, that a single man in possession of a good fortune"


def losing_drafts(monkeypatch) -> None:
    """Runs timed by a ``TickingClock`` (1 ms a reading: a plain step takes a few) whose controller
    always asks for the full depth and whose draft model takes 30 ms a draft: drafting loses."""
    from core.drafters.draft_model import DraftModelDrafter

    clock = TickingClock()
    clock.install(monkeypatch)
    monkeypatch.setattr(GoodputController, "_depth", lambda self, limit, plain_s: (limit, False))
    propose = DraftModelDrafter.propose
    monkeypatch.setattr(DraftModelDrafter, "propose", lambda self, ctx: clock.pause(0.03) or propose(self, ctx))


@pytest.mark.parametrize("guard", [True, False])
def test_the_guard_stops_drafting_on_a_run_where_it_loses_whatever_the_model_says(monkeypatch, guard):
    """A controller whose model is wrong on this run (it always asks for the full depth) and a
    drafter that costs 30 ms a draft (the clock ticks 1 ms a reading, a plain step is a few ms):
    the guard makes most steps plain and holds what drafting lost to its share of the run's time,
    its allowance and one step. Without the guard (share and allowance infinite) drafting goes on
    and loses several times that."""
    import core.drafters.controller as controller

    losing_drafts(monkeypatch)
    if not guard:  # and no timed plain steps either: they are the guard's measure
        monkeypatch.setattr(controller, "GUARD_SHARE", math.inf)
        monkeypatch.setattr(controller, "PLAIN_CHECK_GAP", math.inf)
    request = DecodeRequest.of(AUSTEN, "tiny", "draft", k="auto", max_new_tokens=32)
    decoder, ids = build_decoder(request, cost=TICKING_CURVE)
    drafter = decoder.drafter
    worst_step = 0.0
    for record in decoder.steps(ids):
        worst_step = max(worst_step, record.draft_s + record.verify_s)
        if guard:
            budget = controller.GUARD_SHARE * drafter.run_s + controller.GUARD_ALLOWANCE * drafter._plain_s()
            assert drafter.lost_s <= budget + worst_step
    drafting = sum(1 for r in decoder.result.steps if r.decision.depth)
    assert decoder.result.tokens == target_greedy(decoder.target, ids, 32)
    if guard:
        assert drafting < len(decoder.result.steps) / 3
    else:  # every step but the last (one token left: nothing to draft)
        assert drafting >= len(decoder.result.steps) - 1 and drafter.lost_s > 3 * worst_step


def test_a_plain_step_guessed_far_too_slow_is_timed_and_the_guard_then_holds(monkeypatch):
    """The cost model says a plain step takes 160 ms where it takes 6 (a curve measured on a busy
    machine). Every drafting step then looks like a win and nothing would ever time a plain step:
    a timed plain step comes after ``PLAIN_CHECK_GAP`` drafting steps, says what a plain step
    costs, and the guard stops drafting that loses."""
    losing_drafts(monkeypatch)
    wrong = CostCurve(tokens=[1, 32], ratio=[1.0, 1.0], forward_s=0.16, device="cpu", threads=1, model="tiny")
    decoder, ids = build_decoder(DecodeRequest.of(AUSTEN, "tiny", "draft", k="auto", max_new_tokens=40), cost=wrong)
    reasons = [record.decision.reason for record in decoder.steps(ids)]
    first_check = reasons.index("check")
    assert first_check <= PLAIN_CHECK_GAP + 2  # the first step is not timed, the second drafts
    assert decoder.drafter._plain_s() == pytest.approx(TICKING_CURVE.forward_s)
    assert all(reason in ("off", "check") for reason in reasons[first_check + 1 :])
    assert decoder.result.tokens == target_greedy(decoder.target, ids, 40)


def test_a_plain_step_is_timed_while_drafting_gains_little_and_not_while_it_gains_much():
    c = GoodputController.__new__(GoodputController)
    c.plain_walls, c.carried_walls, c.since_plain = [], (0.05,), PLAIN_CHECK_GAP - 1
    c.margin = 0.01 * 0.05  # drafting steps gained 1% of a plain step each
    assert not c._check_due(0.05)  # not yet: a plain step was timed a few steps ago
    c.since_plain += 1
    assert c._check_due(0.05)
    c.margin = 0.5 * 0.05  # half a plain step each: a 10% error in the plain step cannot flip that
    assert not c._check_due(0.05)
    c.carried_walls = ()  # ... unless no plain step was ever timed
    assert c._check_due(0.05)
    c.plain_walls = [0.07, 0.05, 0.5, 0.05, 0.06]  # the run's own, a stall among them
    assert c._plain_s() == 0.06


def loaded_run(monkeypatch, load) -> tuple[list, GoodputController]:
    """A ``draft --k auto`` run on tiny under a ``TickingClock``, where ``load(clock, step, plain)``
    disturbs the verify of step ``step`` (``plain``: nothing was drafted) before it runs."""
    import core.drafters.controller
    import core.engine.decoder

    clock = TickingClock()
    clock.install(monkeypatch)
    monkeypatch.setattr(core.drafters.controller, "_MEMORY", {})
    verify = core.engine.decoder.SpeculativeDecoder.verify
    steps = []

    def disturbed_verify(self, root, tree):
        load(clock, len(steps), not len(tree))
        steps.append(len(tree))
        return verify(self, root, tree)

    monkeypatch.setattr(core.engine.decoder.SpeculativeDecoder, "verify", disturbed_verify)
    decoder, ids = build_decoder(DecodeRequest.of(AUSTEN, "tiny", "draft", k="auto", max_new_tokens=40),
                                 cost=TICKING_CURVE)
    records = list(decoder.steps(ids))
    assert decoder.result.tokens == target_greedy(decoder.target, ids, 40)  # counts are untouched by time
    return records, decoder.drafter


def test_a_burst_a_spike_and_a_stall_are_labelled_and_teach_the_controller_nothing(monkeypatch):
    """Injected load: a burst of plain steps 14x slower (waiting for a core), one spike of 2 s, and
    a step slowed within the process (its CPU counted: another session on the same cores). Each such
    step is labelled disturbed in its record, the plain reference the page and the controller read
    stays what undisturbed steps measured, and no expected gain exceeds the expected tokens."""
    quiet, quiet_controller = loaded_run(monkeypatch, lambda clock, step, plain: None)
    reference = quiet_controller._plain_s()
    plain_steps = [i for i, r in enumerate(quiet) if not r.nodes]
    burst = set(plain_steps[1:5])
    spike = max(burst) + 2

    def load(clock, step, plain):
        if step in burst:
            clock.stall(13 * reference)
        elif step == spike:
            clock.stall(2.0)

    loaded, controller = loaded_run(monkeypatch, load)
    labels = {i: r.disturbed for i, r in enumerate(loaded)}
    assert len(burst) == 4 and len(loaded) > spike
    assert all(labels[i] == "cpu" for i in burst | {spike}), labels
    # the rest waited for no core and ran no slower than expected ("plain": the ticking clock's plain step holds
    # more readings than a step's draft and verify, so a fast step can outrun it -- a label of its own)
    assert sum(1 for label in labels.values() if label in ("cpu", "slow")) == len(burst | {spike})
    assert controller._plain_s() == pytest.approx(reference)  # the burst did not make plain decoding dear
    assert [r.decision.depth for r in loaded][:min(burst)] == [r.decision.depth for r in quiet][:min(burst)]
    for record in quiet + loaded:
        assert record.decision.expected_gain <= record.decision.expected_tokens + 1e-9

    def in_process(clock, step, plain):  # wall and CPU alike: the other session's work counts as ours
        if step == spike:
            clock.pause(2.0)

    shared, _ = loaded_run(monkeypatch, in_process)
    assert shared[spike].disturbed == "slow" and sum(1 for r in shared if r.disturbed in ("cpu", "slow")) == 1


def test_the_disturbance_rule():
    from core.common.timing import disturbed, thread_wait_s

    assert disturbed(0.010, 0.0) == "" and disturbed(0.010, 0.0015) == ""  # a core whenever it wanted one
    assert disturbed(0.040, 0.020) == "cpu"  # half its time waiting for a core
    assert disturbed(0.040, 0.0, expected_s=0.010) == "slow"  # never waited, yet 4x the time it should take
    assert disturbed(0.015, None, expected_s=0.010) == "" and disturbed(0.0, 0.0) == ""
    waited = thread_wait_s()
    assert waited is None or waited >= 0.0  # the kernel's count where it gives one (Linux)


def test_the_why_line_the_break_even_point_and_the_timeline_read_one_plain_reference(monkeypatch):
    """One run, one plain reference (``core.records.metrics.plain_reference``): the why-line's plain
    step, the break-even model's unit and the timeline note's plain lane all read it;
    a step the CPU disturbed says so beside its numbers, in both languages."""
    import dataclasses

    import core.api.decoding
    from app.figures.breakeven import break_even
    from app.render import decision_line, reference_note
    from core.records import metrics

    monkeypatch.setattr(core.api.decoding, "cost_curve", lambda target: FLAT)  # verifying more is free: it drafts
    result = generate(AUSTEN, drafter="draft", k="auto", max_new_tokens=24)
    records = result.steps
    reference = metrics.plain_reference(records, FLAT.forward_s)
    assert reference.source == "run" and reference.seconds == records[-1].decision.plain_step_s
    ms = f"{reference.seconds * 1e3:.1f}"
    assert ms in decision_line(records[-1], "en") and ms in reference_note(reference, "en")
    even = break_even(records, FLAT)
    assert even is not None and even.forward_s == reference.seconds

    assert all(r.decision.expected_gain <= r.decision.expected_tokens + 1e-9 for r in records)

    busy = dataclasses.replace(records[-1], disturbed="cpu", wait_s=0.4 * (records[-1].draft_s + records[-1].verify_s))
    assert "spent 40% of its time waiting for a free core" in decision_line(busy, "en")
    assert "计时被打扰" in decision_line(busy, "zh")
    assert "disturbed" not in decision_line(records[-1], "en") or records[-1].disturbed


def test_a_lasting_slowdown_of_plain_steps_is_learned_after_a_few(monkeypatch):
    """Plain steps far slower than the plain step measured (the process's cores shared within it, which no
    wait for a core shows) are left out -- until ``PLAIN_WINDOW`` in a row: then the slower level is the
    plain step now, and the controller does not stop learning for good."""
    import core.drafters.controller as controller

    quiet, quiet_controller = loaded_run(monkeypatch, lambda clock, step, plain: None)
    reference = quiet_controller._plain_s()
    monkeypatch.setattr(GoodputController, "_depth", lambda self, limit, plain_s: (0, False))  # plain steps only
    slowed, slowed_controller = loaded_run(monkeypatch, lambda clock, step, plain: clock.pause(0.05) if step > 3
                                           else None)
    assert slowed_controller._plain_s() > 5 * reference  # learned: 50 ms more a step
    slow = [r.disturbed for r in slowed[4:]]
    assert slow[: controller.PLAIN_WINDOW] == ["slow"] * controller.PLAIN_WINDOW and slow[-1] == ""
    assert slow.count("slow") <= controller.PLAIN_WINDOW + 1  # then the slower plain step is the measure
