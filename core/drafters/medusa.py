"""``medusa``: extra decoding heads on the target's last hidden state; no second model to deploy.

Head i is a residual block followed by an LM head (the target's, shared, unless trained with
its own). Read at the hidden state of position t -- whose own LM head gives token t+1, the next
root -- head i guesses token t+2+i: head 0 proposes the tree's depth 1, head 1 depth 2, ...
All heads read the same hidden state, so one cheap head pass drafts the whole tree.

The tree is static, written as Medusa's ``medusa_choices``: a list of paths of ranks, e.g.
``[[0], [1], [0, 0]]`` = head 0's top-1 and top-2 under the root, and head 1's top-1 under the
first. Greedy: rank r is the head's r-th most likely token. Sampling: rank r is the r-th draw
without replacement from the head's law (the structure does not depend on the draws, so the
engine's recursive rejection sampling stays exact).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import torch
from pydantic import Field, field_validator
from torch import nn
from torch.nn import functional as F

from core.drafters.base import Drafter, DrafterInputs, DraftShape, ProposeContext, pick_children
from core.drafters.vocab import Columns, ContextColumns, keep_draft_vocab
from core.drafters.weights import LearnedOptions, default_folder, load_checked, prepared
from core.common.errors import UserError
from core.common.limits import MAX_TREE_NODES
from core.records.steps import AnatomyRecord, HeadRecord
from core.runtime.kernels import half_linears, half_product
from core.runtime.tree import DraftTree

MAX_RANK = 32
ANATOMY_TOP = 5  # each head's top tokens a step records (more where the tree reads deeper ranks of it)

Choices = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class MedusaConfig:
    num_heads: int
    hidden_size: int
    own_lm_head: bool = False  # each head trains its own LM head (initialised from the target's)
    draft_vocab_size: int | None = None  # heads score only these target tokens (None: the whole vocabulary)


class ResBlock(nn.Module):
    """h + SiLU(W h + b), zero-initialised so a fresh head starts as the target's own LM head."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.linear = nn.Linear(hidden_size, hidden_size)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden + F.silu(self.linear(hidden))


class MedusaHeads(nn.Module):
    """K heads; ``forward(hidden [..., H]) -> logits [..., K, draft vocab]``.

    ``draft_vocab`` ([draft_vocab_size] target ids, or None) restricts the LM head to those rows:
    with a 262k-token target vocabulary the full head would cost as much as the target's own.
    """

    def __init__(self, config: MedusaConfig, target_head_weight: torch.Tensor,
                 draft_vocab: torch.Tensor | None = None):
        super().__init__()
        self.config = config
        self.vocab_size = target_head_weight.shape[0]
        self.target_head = target_head_weight.detach()  # [vocab, H]: every id's row (context columns read it)
        self.blocks = nn.ModuleList(ResBlock(config.hidden_size) for _ in range(config.num_heads))
        keep_draft_vocab(self, draft_vocab, config.draft_vocab_size)
        if self.draft_vocab is not None:
            target_head_weight = target_head_weight[self.draft_vocab]
        if config.own_lm_head:
            self.lm_heads = nn.Parameter(target_head_weight.detach().clone().repeat(config.num_heads, 1, 1))
        else:
            self.lm_heads = None
            self.shared_head = target_head_weight.detach()  # [vocab, H], the target's; not saved
        self.head_products = None  # set by ``use_half_products``

    def use_half_products(self) -> None:
        """Inference on a CPU: the blocks and the LM heads through fp16 products, a few times faster
        at a draft's one row (``core.runtime.kernels.half_product``; float32 elsewhere)."""
        half_linears(self)
        if self.lm_heads is None:
            products = [half_product(self.shared_head)] * self.config.num_heads  # one packed copy, shared
        else:
            products = [half_product(weight) for weight in self.lm_heads]
        self.head_products = None if None in products else products

    def forward(self, hidden: torch.Tensor, context: ContextColumns | None = None) -> torch.Tensor:
        """hidden [..., H] -> logits [..., K, draft vocab], followed by the ``context``'s extra columns when given."""
        per_head = torch.stack([block(hidden) for block in self.blocks], dim=-2)  # [..., K, H]
        if self.head_products is not None and not torch.is_grad_enabled():
            logits = torch.stack([product(per_head[..., k, :]) for k, product in enumerate(self.head_products)], dim=-2)
        elif self.lm_heads is None:
            logits = per_head @ self.shared_head.T  # [..., K, vocab]
        else:
            logits = torch.einsum("...kh,kvh->...kv", per_head, self.lm_heads)
        if context is None or not len(context.extra_ids):
            return logits
        return torch.cat([logits, context.logits(per_head).to(logits.dtype)], dim=-1)

    def context_columns(self) -> ContextColumns | None:
        """Extra columns for one request's own tokens: only with a reduced draft vocabulary and the
        target's own head rows (heads of their own score with trained copies)."""
        if self.draft_vocab is None or self.lm_heads is not None:
            return None
        return ContextColumns(self.draft_vocab, self.target_head)

    @property
    def columns(self) -> Columns:
        """Which target id each column of ``forward``'s logits scores."""
        return Columns(self.draft_vocab, self.vocab_size)


# ---- the static tree -----------------------------------------------------------------------
def parse_choices(spec) -> Choices:
    """Medusa choices from a JSON string or a list of paths; sorted parents-first and validated."""
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError:
            raise UserError(f"medusa choices must be JSON like [[0], [1], [0, 0]] (got {spec!r})") from None
    try:
        if not isinstance(spec, (list, tuple)) or not all(isinstance(path, (list, tuple)) for path in spec):
            raise TypeError("not a list of lists")
        paths = sorted({tuple(_rank(r) for r in path) for path in spec}, key=lambda p: (len(p), p))
    except (TypeError, ValueError, OverflowError):
        raise UserError("medusa choices must be a list of lists of ranks, e.g. [[0], [1], [0, 0]]") from None
    if not paths or len(paths) > MAX_TREE_NODES:
        raise UserError(f"medusa choices must hold between 1 and {MAX_TREE_NODES} paths (got {len(paths)})")
    known = set(paths)
    for path in paths:
        if not path or not all(0 <= r < MAX_RANK for r in path):
            raise UserError(f"a medusa path is a non-empty list of ranks in 0..{MAX_RANK - 1} (got {list(path)})")
        if len(path) > 1 and path[:-1] not in known:
            raise UserError(f"medusa path {list(path)} has no parent {list(path[:-1])} in the choices")
    return tuple(paths)


def _rank(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"rank {value!r} is not a whole number")
    return value


class MedusaOptions(LearnedOptions):
    medusa_choices: str | None = Field(
        None, max_length=20_000,
        description='medusa tree: "tuned" (chosen at training) or paths of ranks, e.g. "[[0], [1], [0, 0]]" '
                    "(default: the --k/--tree shape)")

    @field_validator("medusa_choices")
    @classmethod
    def _valid(cls, value: str | None) -> str | None:
        if value not in (None, "tuned"):
            try:
                parse_choices(value)
            except UserError as e:
                raise ValueError(str(e)) from None
        return value


def choices_for_shape(shape: DraftShape, num_heads: int) -> Choices:
    """The full ``width``-ary tree of ``shape`` (a chain when width is 1), no deeper than the heads reach."""
    paths: list[tuple[int, ...]] = []
    level: list[tuple[int, ...]] = [()]
    for _ in range(min(shape.depth, num_heads)):
        level = [parent + (rank,) for parent in level for rank in range(shape.width)]
        paths += level
    return tuple(paths)


def build_tree(choices: Choices, head_logits: torch.Tensor, max_depth: int, temperature: float,
               generator: torch.Generator, columns: Columns | None = None) -> DraftTree:
    """Turn the heads' guesses into the static tree ``choices`` (paths deeper than ``max_depth`` dropped).

    head_logits: [K, vocab], row i from head i (depth i + 1); with ``columns``, [K, proposable columns].
    """
    widths: dict[tuple[int, ...], int] = {}
    for path in choices:
        widths[path[:-1]] = max(widths.get(path[:-1], 0), path[-1] + 1)
    tree = DraftTree()
    node_of: dict[tuple[int, ...], int] = {(): -1}
    draws: dict[tuple[int, ...], list] = {}
    for path in choices:
        parent, rank, depth = path[:-1], path[-1], len(path)
        if depth > min(max_depth, head_logits.shape[0]) or parent not in node_of:
            continue
        if parent not in draws:
            draws[parent] = pick_children(head_logits[depth - 1], widths[parent], temperature, generator, columns)
        if rank < len(draws[parent]):  # sampling stops early when the law has no mass left
            token, prob, dist = draws[parent][rank]
            node_of[path] = tree.add(token, node_of[parent], prob, dist, proposer=f"medusa-head{depth - 1}")
    return tree


# ---- the drafter ----------------------------------------------------------------------------
class MedusaDrafter(Drafter):
    """Medusa heads trained for ``target``; weights from ``weights`` (default: next to the target).

    ``medusa_choices``: None drafts the engine's shape (chain or full WxD tree); "tuned" the sparse
    tree chosen at training time from held-out head accuracies; or explicit paths (JSON or list).
    """

    name = "medusa"

    Options = MedusaOptions

    @classmethod
    def build(cls, options: "MedusaOptions", inputs: DrafterInputs) -> "MedusaDrafter":
        return cls(inputs.shape, inputs.target, options.drafter_weights, options.medusa_choices,
                   options.half_products, options.draft_vocab_only)

    def __init__(self, shape: DraftShape, target, weights: str | None = None, medusa_choices=None,
                 half_products: bool = True, draft_vocab_only: bool = False):
        super().__init__(shape)
        self.hidden_layers = (-1,)  # the last layer after the final norm: what the target's LM head reads
        folder = weights or default_folder(target.path, "medusa")

        def make(config: dict, state: dict[str, torch.Tensor]) -> MedusaHeads:
            head_weight = target.model.get_output_embeddings().weight
            heads = MedusaHeads(MedusaConfig(**config["heads"]), head_weight, state.get("draft_vocab"))
            load_checked(heads, state, folder)
            heads.to(device=head_weight.device, dtype=head_weight.dtype).eval()
            if half_products:
                heads.use_half_products()
            return heads

        config, self.heads = prepared(folder, "medusa", target.model, half_products, make)
        self.model_path = str(folder)
        if medusa_choices is None:
            self.choices = choices_for_shape(shape, self.heads.config.num_heads)
        elif medusa_choices == "tuned":
            self.choices = parse_choices(config["tree"])
        else:
            self.choices = parse_choices(medusa_choices)
        deepest = max(len(path) for path in self.choices)
        if deepest > self.heads.config.num_heads:
            raise UserError(f"medusa choices reach depth {deepest}, but there are only "
                            f"{self.heads.config.num_heads} heads")
        self.max_nodes = len(self.choices)
        self.feature: torch.Tensor | None = None
        self.draft_vocab_only = draft_vocab_only
        self.context: ContextColumns | None = None  # the request's tokens outside the draft vocabulary
        # what this step's heads scored (head logits, temperature, columns): read by ``anatomy`` when the step is
        # recorded, so the drafting time does not include it
        self.reading: tuple[torch.Tensor, float, Columns] | None = None

    def start(self, prompt_ids: list[int], capacity_tokens: int) -> None:
        self.feature = None
        self.reading = None
        self.context = None if self.draft_vocab_only else self.heads.context_columns()

    def observe(self, tokens: list[int], hidden: list[torch.Tensor]) -> None:
        self.feature = hidden[0][-1]  # [H] at the newest committed position

    @torch.inference_mode()
    def propose(self, ctx: ProposeContext) -> DraftTree:
        self.reading = None
        if self.feature is None or ctx.max_depth <= 0:
            return DraftTree()  # a one-token prompt: no hidden state yet
        if self.context is not None:
            self.context.read(ctx.tokens)
        columns = self.heads.columns if self.context is None else self.context.columns
        with self.counted_forward():
            head_logits = columns.proposable(self.heads(self.feature, self.context)).float()  # [K, columns]
        self.reading = (head_logits, ctx.temperature, columns)
        return build_tree(self.choices, head_logits, ctx.max_depth, ctx.temperature, ctx.generator, columns)

    def anatomy(self, piece) -> AnatomyRecord | None:
        """Every head's top tokens at this step (the tree's nodes are cut from them), or None when it drafted nothing."""
        if self.reading is None:
            return None
        head_logits, temperature, columns = self.reading
        reading = head_reading(head_logits, self.choices, temperature, columns)
        heads = [HeadRecord(depth=i + 1, tokens=tokens, texts=[piece(t) for t in tokens],
                            probs=[round(p, 6) for p in probs]) for i, (tokens, probs) in enumerate(reading)]
        return AnatomyRecord(drafter=self.name, heads=heads)


def head_reading(head_logits: torch.Tensor, choices: Choices, temperature: float,
                 columns: Columns) -> list[tuple[list[int], list[float]]]:
    """Per head, its ``ANATOMY_TOP`` most likely target tokens (more if ``choices`` read a deeper rank of
    it) and their probabilities at ``temperature`` (0: the plain softmax, which greedy ranks by).

    head_logits: [K, proposable columns], as ``build_tree`` reads them."""
    deepest = [0] * head_logits.shape[0]
    for path in choices:
        deepest[len(path) - 1] = max(deepest[len(path) - 1], path[-1] + 1)
    probs = torch.softmax(head_logits / (temperature if temperature > 0 else 1.0), dim=-1)  # [K, columns]
    reading = []
    for head, row in enumerate(probs):
        top = torch.topk(row, min(max(ANATOMY_TOP, deepest[head]), row.shape[-1]))
        reading.append((columns.target_ids(top.indices).tolist(), top.values.tolist()))
    return reading
