"""The verify-cost curve's disk cache is read back checked: a file that is not a curve the probe could
have measured (NaN, negated, falling, the wrong length, not JSON) is measured again, with a message
naming the file, and never reaches the controller."""
from __future__ import annotations

import json

import pytest

from core.cost import curve as curves
from core.cost.probe import VERIFY_SIZES

GOOD = {"tokens": list(VERIFY_SIZES), "ratio": [1.0 + 0.1 * i for i in range(len(VERIFY_SIZES))],
        "forward_s": 0.004, "device": "cpu", "threads": 2, "model": "tiny"}


def damaged(**change) -> dict:
    return {**GOOD, **change}


CASES = {
    "nan": '{"tokens": %s, "ratio": [1.0, NaN], "forward_s": 0.004, "device": "cpu", "threads": 2, "model": "x"}'
           % json.dumps(list(VERIFY_SIZES)),
    "nan forward": json.dumps(damaged()).replace("0.004", "NaN"),
    "negated": json.dumps(damaged(ratio=[-r for r in GOOD["ratio"]], forward_s=-0.004)),
    "negative forward": json.dumps(damaged(forward_s=-0.004)),
    "falling": json.dumps(damaged(ratio=[1.0, 2.0] + [1.5] * (len(VERIFY_SIZES) - 2))),
    "short": json.dumps(damaged(ratio=GOOD["ratio"][:-1])),
    "other sizes": json.dumps(damaged(tokens=[1, 32], ratio=[1.0, 2.0])),
    "not json": "{ this is not",
    "a list": "[]",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_damaged_cache_file_is_measured_again_with_a_message_naming_it(tmp_path, monkeypatch, tiny, case):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    target, _ = tiny
    path = curves.cache_path(target)
    path.parent.mkdir(parents=True)
    path.write_text(CASES[case])
    with pytest.raises(curves.DamagedCurve, match=str(path)):
        curves.read_curve(path)
    assert curves.cached_curve(target) is None  # the page never uses it

    asked = []  # the real probe takes seconds; a stand-in curve shows that a measurement was asked for
    monkeypatch.setattr(curves, "measure", lambda target: asked.append(target) or curves.CostCurve(**GOOD))
    lines: list[str] = []
    curve = curves.cost_curve(target, log=lines.append)
    assert asked == [target] and curve == curves.CostCurve(**GOOD)
    assert str(path) in lines[0] and "damaged" in lines[0]
    assert curves.read_curve(path) == curve  # the file now holds the new measurement


def test_a_good_cache_file_reads_back_as_it_was_written(tmp_path):
    path = tmp_path / "curve.json"
    path.write_text(json.dumps(GOOD))
    assert curves.read_curve(path) == curves.CostCurve(**GOOD)
