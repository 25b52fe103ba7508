"""``hybrid``: n-gram lookup and EAGLE-3 in one draft tree.

Where the context repeats, prompt lookup proposes a long continuation for free; where it does
not, EAGLE-3's dynamic tree guesses from the target's features. Each step the n-gram chain (if
the context's last tokens occurred before) becomes one branch and EAGLE-3's pruned tree is merged
into the same tree: a node both propose is kept once. Every node records who proposed it
(``ngram``, ``eagle3-dN`` or ``ngram+eagle3``), and the target verifies the whole tree in one
forward.

Lossless at every temperature: both proposers are deterministic functions of the committed
tokens (EAGLE-3's tree is chosen from its draft probabilities, not sampled) and every node's draft
law is one-hot on its token, so the engine's recursive rejection sampling is exact, as for each
proposer alone. ``hybrid-peagle`` puts P-EAGLE (``core.drafters.peagle``: the whole draft in one drafter
forward) in EAGLE-3's place. With ``--k auto`` / ``--tree auto`` the goodput controller decides how deep
EAGLE-3 drafts (the n-gram chain costs nothing and always goes as deep as the budget allows, also
when EAGLE-3 is not asked at all) and then keeps the part of the merged tree that pays.
"""
from __future__ import annotations

from dataclasses import replace

from typing import Literal

from pydantic import Field

from core.drafters.base import Capabilities, DrafterInputs, DraftShape, ProposeContext, Wrapper
from core.drafters.eagle import Eagle3Drafter, EagleOptions
from core.drafters.ngram import NgramDrafter
from core.drafters.peagle import PEagleDrafter
from core.common.limits import MAX_TREE_NODES
from core.records.steps import AnatomyRecord
from core.runtime.tree import DraftTree


class HybridOptions(EagleOptions):
    ngram_n: int = Field(3, ge=1, le=8, description="longest n-gram the ngram drafter matches")
    feature_drafter: Literal["eagle3", "peagle"] = Field(
        "eagle3", description="hybrid's feature drafter: eagle3 (one forward per level) or peagle (one forward a step)")


class HybridDrafter(Wrapper):
    name = "hybrid"
    Options = HybridOptions
    aliases = {"hybrid": {}, "hybrid-peagle": {"feature_drafter": PEagleDrafter.name}}
    # the n-gram chain is the free part: as deep as the budget allows, also where EAGLE-3 is not asked
    capabilities = Capabilities(drafts_full_tree=False, free_levels=True,
                                auto_tree=Eagle3Drafter.capabilities.auto_tree)

    @classmethod
    def build(cls, options: HybridOptions, inputs: DrafterInputs) -> "HybridDrafter":
        feature = PEagleDrafter if options.feature_drafter == PEagleDrafter.name else Eagle3Drafter
        eagle = feature(inputs.shape, inputs.target, options.drafter_weights, inputs.block_size,
                              options.eagle_nodes, options.half_products, options.draft_vocab_only)
        ngram = NgramDrafter(DraftShape(1, inputs.shape.depth), inputs.target.vocab_size, options.ngram_n)
        return cls(inputs.shape, ngram, eagle)

    def __init__(self, shape: DraftShape, ngram: NgramDrafter, eagle: Eagle3Drafter):
        super().__init__(shape, eagle)  # the run's features, caches and resources are EAGLE's
        self.ngram, self.eagle = ngram, eagle
        self.max_nodes = min(MAX_TREE_NODES, eagle.max_nodes + shape.depth)
        self.eagle_tree = DraftTree()

    def propose(self, ctx: ProposeContext) -> DraftTree:
        self.eagle_tree = self.eagle.propose(ctx)
        free = ctx.max_depth if ctx.free_depth is None else ctx.free_depth
        merged = self.ngram.propose(replace(ctx, max_depth=free))  # the n-gram chain (or nothing), proposer "ngram"
        self.renumbering = merge_into(merged, self.eagle_tree, self.eagle.name, self.max_nodes)
        return merged

    def anatomy(self, piece):
        """EAGLE-3's (or P-EAGLE's) anatomy, named as the hybrid's: the tree's proposers say which branch is whose."""
        inner = self.eagle.anatomy(piece)
        return AnatomyRecord(drafter=self.name, feature_drafter=self.eagle.name) if inner is None else \
            replace(inner, drafter=self.name, feature_drafter=self.eagle.name)

    def commit(self, tree: DraftTree, accepted: tuple[int, ...]) -> None:
        self.eagle.commit(self.eagle_tree, ())  # EAGLE recomputes accepted positions from true features


def merge_into(tree: DraftTree, other: DraftTree, other_name: str, max_nodes: int) -> dict[int, int]:
    """Add ``other``'s nodes to ``tree`` (parents first); a node ``tree`` already has under the same
    parent is shared, and its proposer names both. Stops at ``max_nodes``. Returns where each of
    ``other``'s nodes went (those that did not fit are missing)."""
    merged_as: dict[int, int] = {}
    for node, parent in enumerate(other.parents):
        under = -1 if parent < 0 else merged_as.get(parent)
        if under is None:
            continue  # its parent did not fit
        same = next((c for c in tree.children(under) if tree.tokens[c] == other.tokens[node]), None)
        if same is not None:
            if other_name not in tree.proposer[same]:
                tree.proposer[same] += f"+{other_name}"
        elif len(tree) < max_nodes:
            same = tree.add(other.tokens[node], under, other.draft_probs[node], other.draft_dists[node],
                            other.proposer[node])
        else:
            continue
        merged_as[node] = same
    return merged_as
