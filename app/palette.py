"""One colour per way a token can come about, shared by every view (figures and HTML)."""
from __future__ import annotations

from core.drafters import drafter_color

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
