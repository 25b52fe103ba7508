"""What the engine records of a learned drafter's insides at each step (``StepRecord.anatomy``), on tiny:
Medusa's heads' top tokens equal the heads run again on the step's feature; EAGLE-3's read layers, draft
vocabulary and training unroll equal its drafter's and its weights' config; the trace keeps them."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from anatomy_runs import eagle3_run, medusa_run, run

from core.records.steps import StepRecord

ROOT = Path(__file__).resolve().parent.parent


def test_medusa_records_each_heads_top_tokens_from_its_tensors():
    records, expected = medusa_run()
    for record, heads in zip(records, expected):
        assert [h.depth for h in record.anatomy.heads] == [1, 2, 3, 4]
        for head, (tokens, probs) in zip(record.anatomy.heads, heads):
            assert head.tokens == tokens
            assert head.probs == pytest.approx(probs, abs=1e-5)
        # greedy: a node of the 2x3 tree at depth d is rank 1 or 2 of head d's list
        for node in record.nodes:
            assert node.token in record.anatomy.heads[node.depth - 1].tokens[:2]
    assert StepRecord.from_dict(records[-1].to_dict()) == records[-1]  # the trace keeps it


def test_eagle3_records_its_fused_layers_and_draft_vocabulary():
    records, drafter = eagle3_run()
    config = json.loads((ROOT / "assets" / "tiny" / "eagle3" / "config.json").read_text())
    for record in records:
        anatomy = record.anatomy
        assert anatomy.drafter == "eagle3"
        assert anatomy.target_layers == list(drafter.hidden_layers) == config["net"]["target_layers"]
        assert anatomy.target_num_layers == config["target"]["num_hidden_layers"]
        assert anatomy.draft_vocab_size == drafter.net.config.draft_vocab_size == config["net"]["draft_vocab_size"]
        assert anatomy.vocab_size == drafter.net.vocab_size
        assert anatomy.ttt_steps == config["training"]["options"]["ttt_steps"]
    assert StepRecord.from_dict(records[-1].to_dict()) == records[-1]


def test_hybrid_names_its_feature_drafter_and_plain_drafters_record_nothing():
    hybrid = run("hybrid", steps=2)[-1].anatomy
    assert (hybrid.drafter, hybrid.feature_drafter, hybrid.target_layers) == ("hybrid", "eagle3", [1, 2, 4])
    for drafter in ("draft", "ngram", "none"):
        assert all(r.anatomy is None for r in run(drafter, steps=2))
