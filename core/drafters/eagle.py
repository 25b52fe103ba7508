"""``eagle`` and ``eagle3``: the EAGLE feature drafter with EAGLE-2's dynamic draft tree.

The drafter network (``eagle_net``) pairs the target's feature at position t with token t+1.
When a step starts, the root -- the last committed token -- has no target feature yet, but the
feature of the token before it does: the pair (that feature, root) gives the root's next-token
guess. Each step:

1. **catch up** -- feed the pairs whose target features arrived since the last step (one
   forward); these entries stay in the drafter's paged KV cache;
2. **expand** (EAGLE-2) -- at depth 1 take the root's ``top_k`` children; at each further
   depth feed the ``top_k`` nodes of the previous depth with the best cumulative confidence
   (product of draft probabilities along the path) and give each its ``top_k`` children;
3. **prune** -- keep the ``nodes`` best nodes by cumulative confidence (a kept node's parent is
   always kept) for the target's single verify forward.

Entries written while expanding were computed from the drafter's own guessed features; they
are dropped after the verify, and the next catch-up recomputes the accepted positions from the
target's true features. ``last_expansion`` keeps the whole scored tree before pruning.

Greedy (temperature 0) proposes the top-k tokens. With sampling, the tree is still chosen
deterministically from the (temperature-scaled) draft probabilities -- a tree shape that
depended on random draws would bias the output -- and each node's draft law is one-hot on its
token, so the engine's recursive rejection sampling stays exact (as in EAGLE-2's reference
code, where q = 1 for drafted tokens).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from pydantic import Field

from core.drafters.base import Capabilities, Drafter, DrafterInputs, DraftShape, ProposeContext
from core.drafters.eagle_net import FeatureDrafterConfig, FeatureDrafterNet, run_segment
from core.drafters.vocab import ContextColumns
from core.drafters.weights import LearnedOptions, default_folder, load_checked, prepared
from core.common.limits import MAX_TREE_NODES
from core.records.steps import AnatomyRecord, ExpansionRecord
from core.runtime.kv_cache import PagedKVCache, RequestKV, SlotLayout
from core.runtime.tree import DraftTree


class EagleOptions(LearnedOptions):
    eagle_nodes: int | None = Field(
        None, ge=1, le=MAX_TREE_NODES,
        description="nodes kept for the verify after EAGLE-2's expansion (default: the full WIDTHxDEPTH tree's "
                    f"size, at most {MAX_TREE_NODES})")

    def labels(self) -> list[str]:
        return [] if self.eagle_nodes is None else [f"N={self.eagle_nodes}"]

    def node_limit(self) -> int | None:
        return self.eagle_nodes


@dataclass
class Expansion:
    """Every node the drafter scored in one step, before pruning (candidate order: depth by depth).

    ``scores`` are cumulative log draft probabilities (the confidence EAGLE-2 ranks by);
    ``kept_as[i]`` is candidate i's node index in the proposed DraftTree, or -1 if pruned.
    """

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)  # candidate index, -1 = the root
    depths: list[int] = field(default_factory=list)
    probs: list[float] = field(default_factory=list)  # draft probability given the parent
    scores: list[float] = field(default_factory=list)
    expanded: list[bool] = field(default_factory=list)  # fed to the drafter to get children
    kept_as: list[int] = field(default_factory=list)

    def add(self, token: int, parent: int, depth: int, prob: float, score: float) -> int:
        self.tokens.append(token)
        self.parents.append(parent)
        self.depths.append(depth)
        self.probs.append(prob)
        self.scores.append(score)
        self.expanded.append(False)
        self.kept_as.append(-1)
        return len(self.tokens) - 1

    def best(self, candidates: list[int], n: int) -> list[int]:
        """The ``n`` candidates with the highest score (earlier first on ties)."""
        return sorted(candidates, key=lambda i: (-self.scores[i], i))[:n]

    def renumbered(self, where: dict[int, int]) -> Expansion:
        """A copy whose kept candidates point into another tree: node ``n`` of the proposed tree
        became node ``where[n]`` (a wrapper merged or pruned it; a node it dropped is pruned here)."""
        kept_as = [where.get(node, -1) if node >= 0 else -1 for node in self.kept_as]
        return Expansion(self.tokens, self.parents, self.depths, self.probs, self.scores, self.expanded, kept_as)

    def record(self, texts: list[str]) -> ExpansionRecord:
        """The StepRecord's copy, with each candidate's text."""
        return ExpansionRecord(
            tokens=list(self.tokens), texts=texts, parents=list(self.parents), depths=list(self.depths),
            probs=[round(p, 6) for p in self.probs], scores=[round(s, 6) for s in self.scores],
            expanded=list(self.expanded), kept_as=list(self.kept_as),
        )


def prune(expansion: Expansion, n: int) -> list[int]:
    """The ``n`` best candidates whose parent is kept too, by score; parents before children."""
    kept: set[int] = set()
    for i in expansion.best(list(range(len(expansion.tokens))), len(expansion.tokens)):
        if len(kept) == n:
            break
        if expansion.parents[i] < 0 or expansion.parents[i] in kept:
            kept.add(i)
    return sorted(kept, key=lambda i: (expansion.depths[i], i))


@dataclass(frozen=True)
class Recipe:
    """How a feature drafter's weights are trained (``core.train.eagle`` and the Gemma trainer read it)."""

    fused_layers: bool  # True: low, middle and last target layers (EAGLE-3); False: the last only (EAGLE-1)
    output_norm: bool  # a final norm before the LM head
    ttt_steps: int  # training-time test: steps unrolled on the drafter's own outputs (1 = off)
    feature_weight: float  # weight of the next-feature regression loss (EAGLE-1's second loss)
    parallel_tokens: int = 0  # P-EAGLE: learned placeholders, so that one forward drafts this many more tokens

    def layers(self, num_layers: int) -> tuple[int, ...]:
        """The target ``hidden_states`` indices it reads by default."""
        return (1, num_layers // 2, num_layers) if self.fused_layers else (num_layers,)


class EagleDrafter(Drafter):
    """EAGLE (-1 features, EAGLE-2 tree) trained for ``target``; weights from ``weights``.

    The tree: depth ``shape.depth``; ``shape.width`` (EAGLE-2's top-k) children per expanded
    node and expanded nodes per depth; ``eagle_nodes`` nodes kept for the verify
    (default: the full ``shape`` tree's size, at most what the expansion scores and the node limit).
    """

    name = "eagle"
    recipe = Recipe(fused_layers=False, output_norm=False, ttt_steps=1, feature_weight=1.0)
    # EAGLE-2 prunes what it expands; it scores 84 candidates in a 4x6 tree, the controller keeps what pays
    capabilities = Capabilities(drafts_full_tree=False, auto_tree=DraftShape(4, 6, auto=True))

    Options = EagleOptions

    @classmethod
    def build(cls, options: EagleOptions, inputs: DrafterInputs) -> "EagleDrafter":
        return cls(inputs.shape, inputs.target, options.drafter_weights, inputs.block_size, options.eagle_nodes,
                   options.half_products, options.draft_vocab_only)

    def __init__(self, shape: DraftShape, target, weights: str | None = None, block_size: int = 16,
                 eagle_nodes: int | None = None, half_products: bool = True, draft_vocab_only: bool = False):
        super().__init__(shape)
        folder = weights or default_folder(target.path, self.name)

        def make(config: dict, state: dict[str, torch.Tensor]) -> FeatureDrafterNet:
            net_config = FeatureDrafterConfig(**{**config["net"], "target_layers": tuple(config["net"]["target_layers"])})
            embed = target.model.get_input_embeddings().weight
            head = target.model.get_output_embeddings().weight
            net = FeatureDrafterNet(net_config, embed, head, state.get("draft_vocab"))
            load_checked(net, state, folder)
            net.to(device=head.device, dtype=head.dtype).eval()
            if half_products:
                net.use_half_products()
            return net

        config, self.net = prepared(folder, self.name, target.model, half_products, make)
        self.hidden_layers = self.net.config.target_layers
        self.target_num_layers = int(config["target"]["num_hidden_layers"])
        self.ttt_steps = config.get("training", {}).get("options", {}).get("ttt_steps")  # None: not recorded
        self.draft_vocab_only = draft_vocab_only
        self.context: ContextColumns | None = None  # the request's tokens outside the draft vocabulary
        self.model_path = str(folder)
        self.block_size = block_size
        self.depth = shape.depth
        self.top_k = shape.width  # DraftShape.parse keeps it within 1..MAX_WIDTH
        scored = self.top_k + (self.depth - 1) * self.top_k**2
        self.num_nodes = eagle_nodes if eagle_nodes is not None else min(shape.num_nodes, scored, MAX_TREE_NODES)
        self.max_nodes = self.num_nodes
        self.kv: RequestKV | None = None
        self.last_expansion: Expansion | None = None
        self.waiting: list[list[torch.Tensor]] = []  # target hidden states not yet fed: per observe, [n, H] a layer
        self.fed = 0  # committed positions whose pair the drafter cache holds
        self.root_out: torch.Tensor | None = None  # drafter output at the newest fed pair [H]

    def start(self, prompt_ids: list[int], capacity_tokens: int) -> None:
        expanded_per_step = (self.depth - 1) * self.top_k
        num_blocks = -(-(capacity_tokens + expanded_per_step) // self.block_size) + 1
        layout = SlotLayout(num_layers=1, num_kv_heads=self.net.config.num_key_value_heads,
                            head_dim=self.net.config.hidden_size // self.net.config.num_attention_heads,
                            dtype=self.net.head_weight.dtype, device=self.net.head_weight.device)
        pool = PagedKVCache(layout, num_blocks=num_blocks, block_size=self.block_size)
        self.kv = pool.new_request()
        self.waiting = []
        self.fed = 0
        self.root_out = None
        self.last_expansion = None
        self.context = None if self.draft_vocab_only else self.net.context_columns()

    def observe(self, tokens: list[int], hidden: list[torch.Tensor]) -> None:
        self.waiting.append(hidden)  # fused when next drafted, all at once: a plain step pays nothing here

    @torch.inference_mode()
    def propose(self, ctx: ProposeContext) -> DraftTree:
        self.last_expansion = None
        depth = min(self.depth, ctx.max_depth)
        if depth <= 0 or not (self.waiting or self.fed):
            return DraftTree()  # a one-token prompt: no target feature yet
        if self.context is not None:
            self.context.read(ctx.tokens)
        expansion = self._scored(ctx.tokens, depth, ctx.temperature)
        self.last_expansion = expansion
        return self._tree(expansion, ctx.temperature)

    def commit(self, tree: DraftTree, accepted: tuple[int, ...]) -> None:
        self.kv.commit([])  # expansion entries used guessed features: recomputed from true ones next step

    def stop(self) -> None:
        if self.kv is not None:
            self.kv.release_all()

    def expansion(self) -> Expansion | None:
        return self.last_expansion

    def anatomy(self, piece) -> AnatomyRecord | None:
        """The target layers it reads, its draft vocabulary and how it was trained (its expansion is the
        step's ``expansion``); None when it drafted nothing this step."""
        if self.last_expansion is None:
            return None
        return AnatomyRecord(drafter=self.name, target_layers=list(self.hidden_layers),
                             target_num_layers=self.target_num_layers, draft_vocab_size=self.net.config.draft_vocab_size,
                             vocab_size=self.net.vocab_size, ttt_steps=self.ttt_steps)

    def own_kv(self):
        return self.kv

    # ---- the three phases ----------------------------------------------------------------------
    def _scored(self, tokens: list[int], depth: int, temperature: float) -> Expansion:
        """Phases 1 and 2: every candidate of this step, scored (``peagle`` drafts them otherwise)."""
        return self._expand(self._catch_up(tokens), depth, temperature)

    def _catch_up(self, tokens: list[int]) -> torch.Tensor:
        """Feed pairs (feature t, token t+1) for the newly observed positions; returns the root's out [H]."""
        if self.waiting:
            features = self.net.fuse_target([torch.cat(layer) for layer in zip(*self.waiting)])  # [n, H]
            self.waiting = []
            new_tokens = tokens[self.fed + 1 : self.fed + 1 + len(features)]
            with self.counted_forward():
                self.root_out = run_segment(self.net, self.kv, features, new_tokens)[-1]
            self.kv.commit(list(range(len(features))))
            self.fed += len(features)
        return self.root_out

    def _expand(self, root_out: torch.Tensor, depth: int, temperature: float) -> Expansion:
        """EAGLE-2's expansion: score top_k children per fed node, feed the top_k best per depth."""
        expansion = Expansion()
        outputs = {-1: root_out}  # candidate -> drafter output at it (the feature guessed after it)
        fed: list[int] = []  # candidates in drafter-cache write order
        frontier = [-1]
        # ranked as they are: the target-wide logits would only add -inf entries
        columns = self.net.columns if self.context is None else self.context.columns
        for level in range(1, depth + 1):
            out = torch.stack([outputs[c] for c in frontier])
            logits = columns.proposable(self.net.draft_logits(out, self.context)).float()
            logprobs = torch.log_softmax(logits / (temperature if temperature > 0 else 1.0), dim=-1)  # [m, columns]
            top = torch.topk(logprobs, self.top_k, dim=-1)
            tokens = columns.target_ids(top.indices).tolist()
            level_nodes = []
            for row, parent in enumerate(frontier):
                base = 0.0 if parent < 0 else expansion.scores[parent]
                for logprob, token in zip(top.values[row].tolist(), tokens[row]):
                    level_nodes.append(expansion.add(token, parent, level, math.exp(logprob), base + logprob))
            if level == depth:
                break
            frontier = expansion.best(level_nodes, self.top_k)
            segment_parents = [
                -1 if expansion.parents[c] < 0 else fed.index(expansion.parents[c]) for c in fed + frontier
            ]
            features = torch.stack([outputs[expansion.parents[c]] for c in frontier])  # [top_k, H]
            with self.counted_forward():
                out = run_segment(self.net, self.kv, features, [expansion.tokens[c] for c in frontier],
                                  segment_parents)
            for c, row in zip(frontier, out):
                outputs[c] = row
                expansion.expanded[c] = True
            fed += frontier
        return expansion

    def _tree(self, expansion: Expansion, temperature: float) -> DraftTree:
        """The pruned expansion as a DraftTree (one-hot draft laws when sampling)."""
        tree = DraftTree()
        for c in prune(expansion, self.num_nodes):
            parent = expansion.parents[c]
            dist = None
            if temperature > 0:
                dist = torch.zeros(self.net.vocab_size)
                dist[expansion.tokens[c]] = 1.0
            expansion.kept_as[c] = tree.add(
                expansion.tokens[c], -1 if parent < 0 else expansion.kept_as[parent], expansion.probs[c], dist,
                proposer=f"{self.name}-d{expansion.depths[c]}",
            )
        return tree


class Eagle3Drafter(EagleDrafter):
    """EAGLE-3: the same drafting, with fused low/middle/high target features and a drafter
    trained with training-time test; everything that differs is in its weights' config."""

    name = "eagle3"
    recipe = Recipe(fused_layers=True, output_norm=True, ttt_steps=4, feature_weight=0.0)
