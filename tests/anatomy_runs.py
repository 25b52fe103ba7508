"""Short greedy tiny runs for the anatomy tests, with what each step's drafter really held: Medusa's
heads run again on the feature the step read, EAGLE-3's drafter object. Computed from the drafters,
never from a figure (tests/test_anatomy_records.py, tests/test_anatomy_figures.py)."""
from __future__ import annotations

from functools import lru_cache

import torch

from core.api import build_decoder
from core.api.request import DecodeRequest
from core.drafters.medusa import ANATOMY_TOP, MedusaDrafter
from core.records.steps import StepRecord

PROMPT = "床前明月光，疑是地上霜。床前"


def run(drafter: str, steps: int = 3, hook=None, **options) -> list[StepRecord]:
    """The first ``steps`` StepRecords of a greedy tiny run; ``hook(drafter)`` is called after each propose."""
    decoder, ids = build_decoder(DecodeRequest.of(PROMPT, "tiny", drafter, 4, max_new_tokens=12, **options))
    if hook is not None:
        inner, propose = decoder.drafter, decoder.drafter.propose

        def watched(ctx):
            tree = propose(ctx)
            hook(inner)
            return tree

        inner.propose = watched
    records, stepping = [], decoder.steps(ids)
    for record in stepping:
        records.append(record)
        if len(records) == steps:
            break
    stepping.close()  # the engine gives its KV blocks back
    return records


@torch.inference_mode()
def medusa_top(drafter: MedusaDrafter) -> list[tuple[list[int], list[float]]]:
    """Each head's top tokens and probabilities, from the heads run again on the feature the step read."""
    columns = drafter.heads.columns if drafter.context is None else drafter.context.columns
    logits = columns.proposable(drafter.heads(drafter.feature, drafter.context)).float()
    top = torch.topk(torch.softmax(logits, dim=-1), ANATOMY_TOP, dim=-1)
    return [(columns.target_ids(i).tolist(), v.tolist()) for i, v in zip(top.indices, top.values)]


@lru_cache(maxsize=1)
def medusa_run() -> tuple[list[StepRecord], list]:
    """A 2x3 Medusa tree's records, and each step's heads as computed here."""
    expected = []
    records = run("medusa", hook=lambda d: expected.append(medusa_top(d)), tree="2x3")
    return records, expected


@lru_cache(maxsize=1)
def eagle3_run() -> tuple[list[StepRecord], object]:
    """EAGLE-3's records (a 3x4 expansion pruned to 10 nodes) and its drafter."""
    drafters = []
    records = run("eagle3", hook=drafters.append, tree="3x4", eagle_nodes=10)
    return records, drafters[-1]
