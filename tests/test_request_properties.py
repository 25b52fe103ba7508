"""Property-based tests of the API and the CLI: any input gives a valid run or a UserError (the CLI:
an ``error:`` line and exit status 2), never another exception, and a finished run holds no KV block."""
from __future__ import annotations

import io
import math
from contextlib import redirect_stderr, redirect_stdout

from hypothesis import event, example, given
from hypothesis import strategies as st

from core import UserError, generate
from core.cli import main


JUNK = st.one_of(st.none(), st.booleans(), st.text(max_size=6), st.just(math.inf), st.just(math.nan),
                 st.integers(-(2**70), 2**70), st.floats(allow_nan=True), st.lists(st.integers(), max_size=2),
                 st.dictionaries(st.text(max_size=2), st.integers(), max_size=1))
SMALL = st.integers(1, 4)  # valid token budgets that keep each example fast


def field(valid: st.SearchStrategy) -> st.SearchStrategy:
    """Mostly valid values, now and then junk."""
    return st.integers(0, 7).flatmap(lambda pick: JUNK if pick == 0 else valid)


COMMON = {
    "k": field(st.integers(1, 6)),
    "tree": field(st.sampled_from([None, "2x2", "1x3", (2, 2), "3x2"])),
    "temperature": field(st.sampled_from([0.0, 0.7, 1.0])),
    "seed": field(st.integers(0, 2**63 - 1)),
    "block_size": field(st.integers(1, 32)),
}
OWN = {  # each drafter's own options
    "ngram": {"ngram_n": field(st.integers(1, 8))},
    "eagle": {"eagle_nodes": field(st.integers(1, 20))},
    "eagle3": {"eagle_nodes": field(st.integers(1, 20))},
    "medusa": {"medusa_choices": field(st.sampled_from(["tuned", "[[0], [1], [0, 0]]"]))},
    "draft": {"draft_size": field(st.sampled_from(["xs", "s", "l"]))},
}
DRAFTER = field(st.sampled_from(["none", "draft", "draft-xs", "ngram", "medusa", "eagle", "eagle3"]))


@st.composite
def api_options(draw) -> dict:
    """A drafter, some common options, mostly its own options and now and then another's."""
    drafter = draw(DRAFTER)
    own = OWN.get(drafter, {}) if isinstance(drafter, str) else {}
    stray = draw(st.sampled_from([{}, {}, {}, {}, *OWN.values()]))
    options = draw(st.fixed_dictionaries({}, optional={**COMMON, **stray, **own}))
    return {"drafter": drafter, **options}


@given(prompt=field(st.text(min_size=1, max_size=12)), max_new_tokens=field(SMALL), options=api_options())
@example(prompt="0", max_new_tokens="1", options={"drafter": "none"})  # a budget given as text (found by CI)
@example(prompt="0", max_new_tokens="3.0", options={"drafter": "none"})
@example(prompt="0", max_new_tokens=1, options={"drafter": "none", "temperature": 2e-215})  # found by CI
def test_the_api_gives_a_run_or_a_user_error(prompt, max_new_tokens, options):
    try:
        result = generate(prompt, preset="tiny", max_new_tokens=max_new_tokens, **options)
    except UserError as e:
        assert str(e)
        event("user error")
        return
    event("run")
    budget = result.settings["max_new_tokens"]  # a whole number given as text ("1", "3.0") or as 2.0 is that number
    assert budget == float(max_new_tokens) and 1 <= result.new_tokens <= budget
    assert result.kv["blocks_in_use_after"] == 0
    assert result.draft_kv is None or result.draft_kv["blocks_in_use_after"] == 0


FLAG_VALUES = {
    "--drafter": st.sampled_from(["none", "draft", "ngram", "eagle", "eagle3", "medusa", "x", ""]),
    "--k": st.sampled_from(["1", "3", "0", "17", "inf", "x", "-2"]),
    "--tree": st.sampled_from(["2x2", "9x9", "x", "2x", "1x3"]),
    "--temperature": st.sampled_from(["0", "0.8", "nan", "-1", "inf", "hot"]),
    "--seed": st.sampled_from(["0", "7", "-1", str(2**70), "x"]),
    "--max-new-tokens": st.sampled_from(["1", "3", "0", "-5", "nan", "x"]),
    "--block-size": st.sampled_from(["1", "16", "0", "999"]),
    "--eagle-nodes": st.sampled_from(["1", "8", "0", "x"]),
    "--ngram-n": st.sampled_from(["1", "3", "0", "9"]),
    "--medusa-choices": st.sampled_from(["tuned", '{"0":1}', "[[0],[1]]", "[[", "[]"]),
    "--draft-size": st.sampled_from(["xs", "l", "m"]),
    "--preset": st.sampled_from(["tiny", "", "no-such-preset"]),
    "--device": st.sampled_from(["cpu", "auto", "tpu"]),
}
FLAGS = st.lists(st.sampled_from(sorted(FLAG_VALUES)), max_size=4, unique=True)


@given(data=st.data(), flags=FLAGS, prompt=st.text(max_size=8), switches=st.sets(st.sampled_from(["--json", "--check"])))
def test_the_cli_prints_a_result_or_one_error_line(data, flags, prompt, switches):
    argv = ["generate", "--prompt", prompt, "--max-new-tokens", "2", *sorted(switches)]
    for flag in flags:
        argv += [flag, data.draw(FLAG_VALUES[flag])]
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            status = main(argv)
    except SystemExit as e:  # argparse's own refusal: a usage line, status 2
        assert e.code == 2
        return
    out, err = out.getvalue(), err.getvalue()
    if status == 2:
        assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
    else:
        assert status == 0 and out
