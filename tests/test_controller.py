"""The goodput controller (--k auto / --tree auto) and the verify-cost curve it reads."""
from __future__ import annotations

import json

import pytest

from core import DecodeRequest, build_decoder, generate, target_greedy
from core.controller import Calibration, GoodputController, best_first, subtree
from core.cost import CostCurve, cost_curve
from core.tree import DraftTree

pytestmark = pytest.mark.usefixtures("one_thread")

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


def test_the_calibration_starts_at_the_drafters_word_and_learns():
    a = Calibration()
    assert a(0.85) == pytest.approx(0.85)
    for _ in range(50):
        a.observe(0.85, 1, False)
    assert a(0.85) < 0.05 and a(0.25) == pytest.approx(0.25)
    assert a.at_depth(1) < 0.05 and a.at_depth(2) == pytest.approx(0.5)


def test_it_verifies_all_when_verifying_is_flat_and_none_when_it_is_steep():
    tree = tree_of([-1, 0, 1, 2], [0.9, 0.9, 0.9, 0.9])
    flat = GoodputController.__new__(GoodputController)
    flat.curve, flat.verify_scale, flat.calibration = FLAT, 1.0, Calibration()
    kept, expected, gain = flat._choose(tree, plain_s=0.01)
    assert kept == [0, 1, 2, 3] and expected == pytest.approx(1 + 0.9 + 0.81 + 0.729 + 0.6561)
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


def test_auto_sampling_keeps_the_seeded_law():
    """At temperature > 0 a pruned draft is still verified by the exact rule (the chi-square test of
    the target's law over many seeds is in tests/test_sampling.py); here: reproducible from the seed."""
    a = generate("我爱", drafter="draft", k="auto", temperature=0.8, seed=3, max_new_tokens=16)
    b = generate("我爱", drafter="draft", k="auto", temperature=0.8, seed=3, max_new_tokens=16)
    assert a.tokens == b.tokens


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
    import core.api
    from app.figures.tree import tree_figure
    from app.render import step_sentence

    monkeypatch.setattr(core.api, "cost_curve", lambda target: FLAT)  # verifying more costs nothing: keep all
    result = generate("床前明月光，疑是地上霜。床前明月光，", drafter="hybrid", tree="auto", max_new_tokens=12)
    sentences = [step_sentence(r, "en") for r in result.steps]
    assert all('class="sdl-why"' in s and "Why" in s for s in sentences)
    assert "Why all" in sentences[0]
    mixed = [r for r in result.steps if len({n.proposer.split("-")[0] for n in r.nodes}) > 1]
    names = [trace.name for trace in tree_figure(mixed[0], "en").data]
    assert any(str(name).startswith("proposed by: ngram") for name in names)
