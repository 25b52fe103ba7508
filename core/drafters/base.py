"""The one small interface every drafter implements, and helpers they share."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, replace
from time import perf_counter
from typing import TYPE_CHECKING, Callable

import torch
from pydantic import BaseModel, ConfigDict

from core.drafters.vocab import Columns
from core.common.errors import UserError
from core.common.limits import MAX_DEPTH, MAX_TREE_NODES, MAX_WIDTH
from core.runtime.tree import DraftTree

if TYPE_CHECKING:
    from core.models.loading import LoadedModel, Preset
    from core.records.steps import AnatomyRecord



@dataclass(frozen=True)
class DraftShape:
    """A full tree ``width`` wide at every node and ``depth`` deep; width 1 is a chain of k."""

    width: int = 1
    depth: int = 4
    auto: bool = False  # the goodput controller picks how much of this (the largest) shape to verify

    @classmethod
    def parse(cls, k, tree=None, full_tree: bool = True, *, auto: bool = False,
              auto_tree: "DraftShape | None" = None) -> "DraftShape":
        """The one reading of a draft shape. ``tree`` as "WxD" (e.g. "2x3") or (W, D); without it, a
        chain of ``k``. ``k="auto"`` is the goodput controller over ``AUTO_CHAIN``, ``tree="auto"`` over
        ``auto_tree`` (the drafter's largest tree); ``auto=True`` makes the given shape its limit.

        ``full_tree=False`` for drafters that prune what they expand (EAGLE-2): the full tree's
        node count is then no limit, the drafter bounds the nodes it keeps.
        """
        if tree == "auto":
            return auto_tree or AUTO_TREE
        if k == "auto" and tree in (None, ""):
            return AUTO_CHAIN
        if not isinstance(auto, bool):
            raise UserError(f"auto must be true or false (got {auto!r})")
        if tree is None or tree == "":
            shape = cls(1, _as_int(k, "k"))
        elif isinstance(tree, str):
            if len(tree) > 16:
                raise UserError(f"--tree must look like WIDTHxDEPTH, e.g. 2x3 (got {tree[:16]!r}...)")
            parts = tree.lower().split("x")
            if len(parts) != 2:
                raise UserError(f"--tree must look like WIDTHxDEPTH, e.g. 2x3 (got {tree!r})")
            shape = cls(_as_int(parts[0], "tree width"), _as_int(parts[1], "tree depth"))
        elif isinstance(tree, (tuple, list)) and len(tree) == 2:
            shape = cls(_as_int(tree[0], "tree width"), _as_int(tree[1], "tree depth"))
        else:
            raise UserError(f"tree must be \"WIDTHxDEPTH\" or (width, depth) (got {tree!r})")
        shape.validate(full_tree)
        return replace(shape, auto=True) if auto else shape

    @staticmethod
    def k_tree(word: str) -> tuple:
        """One shape word of a spec or a list of shapes as the ``k`` / ``tree`` that ``parse`` takes:
        "4" -> ("4", None), "2x3" -> (None, "2x3"), "auto" -> ("auto", None), "auto-tree" -> (None, "auto");
        anything else is read as a tree (and ``parse`` says what is wrong with it)."""
        if word == "auto":
            return "auto", None
        if word == "auto-tree":
            return None, "auto"
        return (word, None) if word.isdigit() else (None, word)

    @property
    def num_nodes(self) -> int:
        return sum(self.width**d for d in range(1, self.depth + 1))

    def validate(self, full_tree: bool = True) -> None:
        if not 1 <= self.depth <= MAX_DEPTH:
            raise UserError(f"draft depth k must be between 1 and {MAX_DEPTH} (got {self.depth})")
        if not 1 <= self.width <= MAX_WIDTH:
            raise UserError(f"tree width must be between 1 and {MAX_WIDTH} (got {self.width})")
        if full_tree and self.num_nodes > MAX_TREE_NODES:
            raise UserError(
                f"a {self.width}x{self.depth} tree has {self.num_nodes} nodes; at most {MAX_TREE_NODES} are allowed"
            )

    @property
    def tree_text(self) -> str | None:
        """"WxD" for a tree, None for a chain (how a run's settings record it)."""
        return None if self.width == 1 else f"{self.width}x{self.depth}"

    @property
    def label(self) -> str:
        """``k=4``, ``tree 2x3``, ``k=auto≤8``, ``tree auto≤4x6``."""
        limit = "auto≤" if self.auto else ""
        return f"k={limit}{self.depth}" if self.width == 1 else f"tree {limit}{self.width}x{self.depth}"

    def __str__(self) -> str:
        return f"chain k={self.depth}" if self.width == 1 else f"tree {self.width}x{self.depth}"


AUTO_CHAIN = DraftShape(1, 8, auto=True)  # --k auto: the controller verifies 0..8 of an 8-token chain
AUTO_TREE = DraftShape(2, 4, auto=True)  # --tree auto, unless the drafter names its own largest tree


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    """What a kind of drafter does, known from its class before one is built: the request's checks,
    the controller and the page's lists read it as ``drafter_cls.capabilities``."""

    drafts: bool = True  # False for the baseline that never drafts
    uses_draft_model: bool = False  # True: it reads the run's draft model (the ``draft`` reference)
    drafts_full_tree: bool = True  # False: it prunes what it expands, so a WxD shape may exceed the node limit
    free_levels: bool = False  # True: part of its draft costs nothing (a lookup), so it is asked even when
    # drafting does not pay, with ``ProposeContext.free_depth`` for that part
    auto_tree: DraftShape = AUTO_TREE  # the largest tree ``--tree auto`` lets the controller prune


def _as_int(value, what: str) -> int:
    """A whole number from an int, an integral float or a string of digits; anything else is a UserError."""
    if isinstance(value, bool):
        value = None
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise UserError(f"{what} must be a whole number (got {value!r})")


class DrafterOptions(BaseModel):
    """A drafter's own options: each drafter module subclasses this with its fields, defaults,
    limits (pydantic ``Field(ge=, le=)``) and help (``description``). The CLI's flags, the app's
    limits and the run's recorded settings are all read off these classes; a field's name is its
    flag (``ngram_n`` -> ``--ngram-n``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def labels(self) -> list[str]:
        """Parts of a run's label that name these options (e.g. ``N=24``); none by default."""
        return []

    def node_limit(self) -> int | None:
        """The most nodes these options let a verify hold, when they say (EAGLE's ``eagle_nodes``)."""
        return None


@dataclass(frozen=True)
class DrafterInputs:
    """What a drafter may build itself from, besides its options."""

    target: "LoadedModel"
    shape: DraftShape | None  # None for a drafter that drafts nothing
    block_size: int  # KV block size for a cache of its own
    preset: "Preset"
    draft_ref: str | None  # a draft model folder / hub id given in place of the preset's
    load_model: Callable[[str], "LoadedModel"]  # cached, on the run's device, with its remote-code policy


@dataclass(frozen=True)
class ProposeContext:
    tokens: list[int]  # the committed sequence; the last one is the root the tree hangs from
    max_depth: int  # never draft deeper (the remaining token budget, or the depth a controller asked for)
    temperature: float
    generator: torch.Generator
    free_depth: int | None = None  # where a controller asked for less than the budget: the budget, for the
    # levels a drafter proposes at no cost (a lookup); None: ``max_depth``
    clock: float | None = None  # the engine's own seconds on this run so far: its clock stops while the run
    # waits between steps (a user's clicks, Play's delay), so a difference of two readings is engine work only
    wait_clock: float | None = None  # seconds of that time the engine's thread waited for a core (a step that
    # waited much was disturbed: ``core.common.timing.disturbed``)


class Drafter:
    """The drafter interface, with do-nothing defaults: a drafter overrides what it needs.

    A run calls ``start``, then per step ``propose`` -> (target verifies) -> ``commit`` ->
    ``observe``, and finally ``stop`` -- also after an error or a cancel.
    """

    name: str = ""
    Options: type[DrafterOptions] = DrafterOptions
    aliases: dict[str, dict] = {}  # names -> options they fix, e.g. "draft-xs" -> draft_size "xs" (own name included)
    capabilities = Capabilities()  # what this kind of drafter does; a subclass names what differs

    def __init__(self, shape: DraftShape | None = None):
        self.shape = shape
        self.max_nodes = shape.num_nodes if shape else 0  # the largest tree it can propose
        self._forward_log: list[float] = []  # seconds of each drafting forward, in order (``counted_forward``)
        self.model_path: str | None = None  # the draft model folder, when there is one
        self.hidden_layers: tuple[int, ...] = ()  # target hidden states it wants to ``observe`` (indices
        # into transformers' hidden_states: 0 = embeddings, -1 = after the final norm)

    @classmethod
    def build(cls, options: DrafterOptions, inputs: DrafterInputs) -> "Drafter":
        """The drafter for one run, from its validated options."""
        return cls(inputs.shape)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The names a run may ask for this drafter by: its own and its ``aliases``, in display order."""
        return tuple(cls.aliases) if cls.aliases else (cls.name,)

    @property
    def forward_log(self) -> list[float]:
        """Seconds of each drafting forward so far, in order: the engine records a step's share of it
        (``StepRecord.draft_forward_s``), so a timeline draws EAGLE-3's k forwards against P-EAGLE's one."""
        return self._forward_log

    @property
    def forwards(self) -> int:
        """Drafting forwards so far (a wrapper's are its inner drafter's)."""
        return len(self.forward_log)

    @contextmanager
    def counted_forward(self):
        """Around one drafting forward: logs its seconds (``forward_log``), which counts it (``forwards``)."""
        start = perf_counter()
        yield
        self._forward_log.append(perf_counter() - start)

    def start(self, prompt_ids: list[int], capacity_tokens: int) -> None:
        """Begin a run; ``capacity_tokens`` bounds the tokens a cache must hold."""

    def propose(self, ctx: ProposeContext) -> DraftTree:
        """Return the draft tree for this step (may be empty)."""
        return DraftTree()

    def commit(self, tree: DraftTree, accepted: tuple[int, ...]) -> None:
        """Learn which nodes the target kept, so caches can follow."""

    def observe(self, tokens: list[int], hidden: list[torch.Tensor]) -> None:
        """Tokens the target just committed, with its hidden states at them.

        Called after the prefill and after every step, in sequence order: ``tokens`` are the
        newly committed tokens whose K/V the target now holds (the prompt but its last token;
        then each step's root and accepted nodes); ``hidden[j]`` is ``[len(tokens), hidden_size]``
        for layer ``hidden_layers[j]``.
        """

    def stop(self) -> None:
        """End a run and return every resource, also after an error."""

    def kv_summary(self) -> dict[str, int] | None:
        """The drafter's own KV counters, if it has a cache."""
        kv = self.own_kv()
        return None if kv is None else kv.summary()

    def own_kv(self):
        """The drafter's own paged cache for this run (``kv_cache.RequestKV``), if it has one."""
        return None

    def decision(self):
        """The goodput controller's decision for this step (``records.DecisionRecord``), else None."""
        return None

    def expansion(self):
        """This step's scored tree before pruning, for a drafter that prunes (EAGLE-2), else None.
        It has ``tokens`` and ``record(texts) -> records.ExpansionRecord``."""
        return None

    def anatomy(self, piece: Callable[[int], str]) -> "AnatomyRecord | None":
        """What this drafter read at this step, for the page's anatomy picture (``piece``: a token's
        text), or None for a drafter that has no learned parts."""
        return None


class Wrapper(Drafter):
    """A drafter built around another one, ``inner``: the run's hidden states, the drafter's cache, its
    expansion and its resources are the inner drafter's. A wrapper whose tree numbers the inner
    tree's nodes differently sets ``renumbering`` (inner node -> its node) each step, so the
    expansion points at the nodes of the tree that is verified."""

    def __init__(self, shape: DraftShape | None, inner: Drafter):
        super().__init__(shape)
        self.inner = inner
        self.hidden_layers = inner.hidden_layers
        self.model_path = inner.model_path
        self.renumbering: dict[int, int] | None = None  # None: the inner tree's numbers

    @property
    def forward_log(self) -> list[float]:
        return self.inner.forward_log

    def start(self, prompt_ids: list[int], capacity_tokens: int) -> None:
        self.inner.start(prompt_ids, capacity_tokens)

    def observe(self, tokens: list[int], hidden: list[torch.Tensor]) -> None:
        self.inner.observe(tokens, hidden)

    def stop(self) -> None:
        self.inner.stop()

    def own_kv(self):
        return self.inner.own_kv()

    def anatomy(self, piece: Callable[[int], str]) -> "AnatomyRecord | None":
        return self.inner.anatomy(piece)

    def expansion(self):
        expansion = self.inner.expansion()
        if expansion is None or self.renumbering is None:
            return expansion
        return expansion.renumbered(self.renumbering)


def pick_children(logits: torch.Tensor, width: int, temperature: float, generator: torch.Generator,
                  columns: Columns | None = None):
    """Choose up to ``width`` distinct children from one draft distribution.

    Greedy (temperature 0): the top ``width`` tokens. Sampling: draws without replacement, the
    i-th from the draft law with the earlier ones removed; each child carries that law, as the
    recursive rejection rule needs.

    logits: [vocab], or with ``columns`` a drafter's proposable columns [m] (the greedy top-k reads
    them as they are; a sampled child's law is spread over the target's vocabulary). Returns a
    list of (target token, draft_prob, draft_dist or None).
    """
    if temperature <= 0:
        probs = torch.softmax(logits.float(), dim=-1)
        top = torch.topk(probs, width)
        tokens = top.indices if columns is None else columns.target_ids(top.indices)
        return [(t, p, None) for p, t in zip(top.values.tolist(), tokens.tolist())]
    if columns is not None:
        logits = columns.to_target(logits)
    dist = torch.softmax(logits.float() / temperature, dim=-1)
    children = []
    for _ in range(width):
        total = dist.sum()
        if total <= 0:
            break
        dist = dist / total
        token = int(torch.multinomial(dist, 1, generator=generator).item())
        children.append((token, float(dist[token]), dist))
        dist = dist.clone()
        dist[token] = 0.0
    return children
