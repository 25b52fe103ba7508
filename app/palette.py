"""One colour per way a token can come about, shared by every view (figures and HTML)."""
from __future__ import annotations

import re

DRAFTER_COLORS = {  # one hue per drafter (Tableau 10), the baseline dark; the draft sizes in shades of draft's
    "none": "#3d3d3d",
    "draft": "#4e79a7",
    "draft-xs": "#9cc3e6",
    "draft-l": "#1f3f66",
    "ngram": "#f28e2b",
    "medusa": "#b07aa1",
    "eagle": "#59a14f",
    "eagle3": "#e15759",
    "peagle": "#edc948",
    "hybrid": "#9c755f",
    "hybrid-peagle": "#c9a66b",
}
OTHER_DRAFTER = "#777777"  # a label that names no drafter


def drafter_color(label: str) -> str:
    """The colour of the drafter a label, spec or proposer starts with (``eagle3 · tree 4x5``,
    ``draft:auto``, ``ngram``): one colour per drafter in every figure; grey if none matches."""
    return DRAFTER_COLORS.get(re.split(r"[\s:·+]", label.strip(), maxsplit=1)[0], OTHER_DRAFTER)


COLORS = {
    "accepted": "#2e9e44",  # a drafted token the target kept
    "rejected": "#d62f2f",  # a drafted token the target refused
    "correction": "#f08a00",  # the target's own token at the first miss
    "bonus": "#7b4fd6",  # the target's extra token after a fully accepted draft
    "target": "#2b6cb0",  # a plain one-token step (no draft)
    "not_reached": "#b8b8b8",  # drafted after a miss: never judged
    "proposed": "#8a9bb0",  # drafted, not verified yet (classroom illustration)
    "pruned": "#e4e4e4",  # scored by EAGLE-2's expansion, cut before the verify
    "folded": "#f2f2f2",  # a collapsed branch the target never reached ("+N" nodes)
    "root": "#3d3d3d",  # the last committed token the draft hangs from
    "prompt": "#3d3d3d",
}
BOTH_PROPOSERS = "#1a202c"  # the outline of a node that two parts of a hybrid tree proposed alike


def proposer_color(family: str) -> str:
    """A node's outline when one tree mixes proposers (hybrid): its drafter's colour, dark for both."""
    return BOTH_PROPOSERS if "+" in family else drafter_color(family)
KV_COLORS = {
    "L": "#8fa8c8",  # live: written in an earlier step
    "W": COLORS["accepted"],  # written this step and kept
    "F": COLORS["rejected"],  # written this step and freed
    ".": "#ececec",  # free
}


def visible(text: str) -> str:
    """A token's text with whitespace made visible (for tree nodes and tooltips)."""
    if text == "":
        return "∅"
    return text.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥")


def kind_key(kind: str, resampled: bool = False) -> str:
    """The i18n key that names a token's kind. At temperature > 0 the target's token after a refused
    draft is drawn from the residual norm(max(0, p - q)): a resample, not a correction."""
    return "kind.resample" if resampled and kind == "correction" else "kind." + kind


def resampled(record) -> bool:
    """Whether a StepRecord's refusal was settled by sampling (its inspected rejection at temperature > 0)."""
    rejection = record.inspect.rejection if record.inspect is not None else None
    return rejection is not None and rejection.temperature > 0
