"""DecodeRequest: one validated object per run; the CLI, the API and the app derive from it."""
from __future__ import annotations

import argparse
import math

import pytest

from core import DecodeRequest, UserError, generate
from core.cli.generate import add_generate_arguments
from core.drafters import DRAFTERS, lookup, option_fields
from core.api.request import drafter_names


def test_every_drafter_option_is_a_flag_and_a_recorded_setting():
    parser = argparse.ArgumentParser()
    add_generate_arguments(parser)
    flags = {a.dest for a in parser._actions}
    request = DecodeRequest.of("我爱", drafter="eagle3", tree="4x5", eagle_nodes=24)
    settings = request.settings(request.decode_settings())
    for name in option_fields():
        assert name in flags and name in settings
    assert settings["eagle_nodes"] == 24 and settings["ngram_n"] is None and settings["tree"] == "4x5"
    assert request.label() == "eagle3 · tree 4x5 · N=24"


def test_names_and_aliases_come_from_the_registry():
    assert drafter_names() == ["none", "draft-xs", "draft", "draft-l", "ngram", "medusa", "eagle", "eagle3", "peagle",
                               "hybrid", "hybrid-peagle"]
    cls, fixed = lookup("draft-xs")
    assert cls is DRAFTERS["draft"] and fixed == {"draft_size": "xs"}
    assert DecodeRequest.of("hi", drafter="draft-l").options.draft_size == "l"
    assert DecodeRequest.of("hi", drafter="hybrid-peagle").options.feature_drafter == "peagle"


@pytest.mark.parametrize("options, message", [
    (dict(preset=None), "preset"),
    (dict(tree=5), "tree"),
    (dict(tree="2x3x4"), "WIDTHxDEPTH"),
    (dict(temperature=None), "temperature"),
    (dict(temperature="hot"), "temperature"),
    (dict(temperature=math.nan), "temperature"),
    (dict(temperature=2e-215), "0 \\(greedy\\) or at least 0.01"),  # logits / T overflowed: a NaN law, not an error
    (dict(max_new_tokens=None), "max_new_tokens"),
    (dict(max_new_tokens=math.inf), "max_new_tokens"),
    (dict(max_new_tokens=math.nan), "max_new_tokens"),
    (dict(max_new_tokens=2.5), "max_new_tokens"),
    (dict(k=math.inf), "k must be a whole number"),
    (dict(k=True), "k must be a whole number"),
    (dict(k=0), "between 1 and 16"),
    (dict(seed=2**64), "seed"),
    (dict(seed=-1), "seed"),
    (dict(block_size=0), "block_size"),
    (dict(device="tpu"), "device"),
    (dict(trust_remote_code="yes"), "trust_remote_code"),
    (dict(drafter="ngram", ngram_n="x"), "ngram_n"),
    (dict(drafter="ngram", ngram_n=9), "ngram_n"),
    (dict(drafter="eagle", eagle_nodes="x"), "eagle_nodes"),
    (dict(drafter="eagle", eagle_nodes=0), "eagle_nodes"),  # was silently the default
    (dict(drafter="medusa", medusa_choices='{"0": 1}'), "medusa_choices"),  # was read as paths
    (dict(drafter="medusa", medusa_choices="[[0], [0, 0, 0]]"), "no parent"),
    (dict(drafter=None), "drafter"),
    (dict(drafter="turbo"), "unknown drafter"),
    (dict(eagle_nodes=8), "applies to --drafter eagle or eagle3"),
    (dict(drafter="draft-xs", draft_size="l"), "already sets --draft-size xs"),
    (dict(colour="red"), "unknown option"),
])
def test_bad_values_are_user_errors_naming_the_field(options, message):
    with pytest.raises(UserError, match=message):
        DecodeRequest.of("我爱", **options)


@pytest.mark.parametrize("prompt, message", [(123, "prompt"), ("", "empty"), ("  \n", "empty"),
                                             ("bad \udc80 byte", "prompt"), (None, "prompt")])
def test_bad_prompts(prompt, message):
    with pytest.raises(UserError, match=message):
        generate(prompt, max_new_tokens=2)


def test_a_drafter_option_left_unset_takes_its_default():
    assert DecodeRequest.of("hi", drafter="ngram", ngram_n=None).options.ngram_n == 3


def test_the_trace_path_is_checked_before_decoding(tmp_path):
    for bad in (tmp_path, tmp_path / "missing" / "t.jsonl"):
        with pytest.raises(UserError, match="--trace"):
            generate("我爱", max_new_tokens=2, trace=bad)


def test_a_run_whose_trace_cannot_be_written_still_returns_its_result(tmp_path, monkeypatch):
    import core.api.decoding

    def fail(path, result):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(core.api.decoding, "write_trace", fail)
    result = generate("我爱", max_new_tokens=4, trace=tmp_path / "t.jsonl")
    assert result.new_tokens == 4 and "No space left" in result.trace_error
    assert "trace_error" in result.to_dict()


def test_an_eagle_trace_keeps_its_typed_expansion(tmp_path):
    from core import read_trace
    from core.records.steps import ExpansionRecord

    path = tmp_path / "eagle.jsonl"
    result = generate("床前明月光，", drafter="eagle", tree="4x3", eagle_nodes=10, max_new_tokens=6, trace=path)
    replayed = read_trace(path).steps
    assert isinstance(replayed[0].expansion, ExpansionRecord)
    assert [s.expansion for s in replayed] == [s.expansion for s in result.steps]


def test_a_new_drafter_is_one_module_and_one_registry_line(monkeypatch):
    """What adding a drafter takes: a Drafter subclass with its Options (its module) and an entry in
    DRAFTERS. Its name, its flag, its recorded setting and its runs follow with no other change."""
    from pydantic import Field

    from core.drafters import DRAFTERS
    from core.drafters.base import Drafter, DrafterOptions
    from core.runtime.tree import DraftTree

    class RepeatOptions(DrafterOptions):
        repeat_times: int = Field(2, ge=1, le=4, description="how often to propose the last token again")

    class RepeatDrafter(Drafter):
        """Proposes the last token again: right on repeated characters, and always lossless."""

        name = "repeat"
        Options = RepeatOptions

        @classmethod
        def build(cls, options, inputs):
            drafter = cls(inputs.shape)
            drafter.times = options.repeat_times
            return drafter

        def propose(self, ctx):
            tree, parent = DraftTree(), -1
            for _ in range(min(self.times, ctx.max_depth)):
                parent = tree.add(ctx.tokens[-1], parent, 1.0, None, proposer="repeat")
            return tree

    monkeypatch.setitem(DRAFTERS, "repeat", RepeatDrafter)
    parser = argparse.ArgumentParser()
    add_generate_arguments(parser)
    assert "repeat" in drafter_names() and any(a.dest == "repeat_times" for a in parser._actions)
    result = generate("哈哈哈哈", drafter="repeat", repeat_times=3, max_new_tokens=8, check=True)
    assert result.baseline_match and result.settings["repeat_times"] == 3
    assert result.draft_tokens_proposed > 0
    with pytest.raises(UserError, match="--repeat-times applies to --drafter repeat"):
        DecodeRequest.of("hi", drafter="ngram", repeat_times=2)
