"""The EAGLE feature drafter network, shared by ``eagle`` and ``eagle3`` (and their training).

One decoder layer reads, at position t, the target's feature at t together with the embedding
of token t+1, and outputs a feature for position t+1; the target's LM head (optionally cut
down to a smaller draft vocabulary) turns it into a guess for token t+2. Drafting deeper feeds
the drafter's own output back in as the next feature, so it runs autoregressively in feature
space::

    input   = combine([norm(embed(token t+1)), norm(feature t)])    2H -> H
    out t   = DecoderLayer(input)                                    attention over earlier inputs
    logits  = lm_head(out t)              (eagle: out is a predicted target feature)
            = lm_head(norm(out t))        (eagle3: out is the drafter's own state)

``layout`` "reference" (eagle3 only) replaces ``combine`` + the Llama layer by EAGLE-3's reference
layer (``eagle3_layer``), the one vLLM and SGLang load: what ``python -m core export`` writes.

``peagle`` (P-EAGLE) is EAGLE-3 drafting in parallel: ``parallel_tokens`` placeholder pairs follow
the real pairs in the same forward, so the outputs at the last real pair and at each placeholder guess
every token of a step at once (``core.drafters.peagle``). ``placeholders`` "depth" (the lab's): the
newest true feature shifted by a learned offset, and a learned token embedding, per depth; "shared"
(vLLM's ``parallel_drafting``): one learned ``mask_hidden`` in the space of the target layers read,
fused like them, and the embedding of the vocabulary token ``ptd_token_id``, the same at every depth.

``eagle`` reads one target layer (the last, after the final norm) and learns to predict the
next feature. ``eagle3`` fuses low, middle and high layers (``fuse``: 3H -> H) and is trained
only on tokens, unrolled on its own outputs (training-time test, see ``core.train.eagle``).
The target's embedding and LM head are borrowed, not copied: only the drafter's own weights
are saved.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers import LlamaConfig
from transformers.cache_utils import Cache
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm, LlamaRotaryEmbedding

from core.drafters.eagle3_layer import Eagle3ReferenceLayer
from core.drafters.vocab import Columns, ContextColumns, keep_draft_vocab
from core.runtime.forward import chain_parents
from core.runtime.kernels import half_linears, half_product
from core.runtime.kv_cache import RequestKV
from core.runtime.tree import attention_mask, position_ids

LAYOUTS = ("lab", "reference")
PLACEHOLDERS = ("depth", "shared")


@dataclass(frozen=True)
class FeatureDrafterConfig:
    target_layers: tuple[int, ...]  # hidden_states indices read from the target (0 = embeddings)
    hidden_size: int  # the target's
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    max_position_embeddings: int
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    output_norm: bool = False  # eagle3: a norm of its own before the LM head
    draft_vocab_size: int | None = None  # None: the target's whole vocabulary
    layout: str = "lab"  # "reference": EAGLE-3's reference layer (vLLM's llama_eagle3), see eagle3_layer
    parallel_tokens: int = 0  # peagle: placeholder pairs, one per depth after the first
    placeholders: str = "depth"  # peagle: "depth" (learned per depth) or "shared" (vLLM's mask_hidden + ptd_token_id)
    ptd_token_id: int = 0  # peagle, "shared": the token whose embedding every placeholder reads

    def llama_config(self) -> LlamaConfig:
        config = LlamaConfig(
            hidden_size=self.hidden_size, intermediate_size=self.intermediate_size, num_hidden_layers=1,
            num_attention_heads=self.num_attention_heads, num_key_value_heads=self.num_key_value_heads,
            max_position_embeddings=self.max_position_embeddings, rms_norm_eps=self.rms_norm_eps,
            rope_theta=self.rope_theta,
        )
        config._attn_implementation = "sdpa"
        return config


class FeatureDrafterNet(nn.Module):
    """The drafter; ``embed_weight`` [vocab, H] and ``head_weight`` [vocab, H] are the target's.

    ``draft_vocab`` ([draft_vocab_size] target ids, or None) restricts the LM head to those rows.
    """

    def __init__(self, config: FeatureDrafterConfig, embed_weight: torch.Tensor, head_weight: torch.Tensor,
                 draft_vocab: torch.Tensor | None = None):
        super().__init__()
        self.config = config
        hidden = config.hidden_size
        llama = config.llama_config()
        n_layers = len(config.target_layers)
        self.fuse = nn.Linear(n_layers * hidden, hidden, bias=False) if n_layers > 1 else None
        if config.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}")
        if config.placeholders not in PLACEHOLDERS:
            raise ValueError(f"placeholders must be one of {PLACEHOLDERS}")
        if config.parallel_tokens and config.placeholders == "shared":  # vLLM's: before the fusion, like the target's
            self.mask_hidden = nn.Parameter(torch.zeros(n_layers * hidden))
        elif config.parallel_tokens:  # P-EAGLE's placeholders: what a position not drafted yet reads
            self.mask_features = nn.Parameter(torch.zeros(config.parallel_tokens, hidden))  # offsets, see placeholders
            self.mask_embeddings = nn.Parameter(torch.randn(config.parallel_tokens, hidden))
        if config.layout == "reference":
            self.layer = Eagle3ReferenceLayer(llama)
        else:
            self.token_norm = LlamaRMSNorm(hidden, eps=config.rms_norm_eps)
            self.feature_norm = LlamaRMSNorm(hidden, eps=config.rms_norm_eps)
            self.combine = nn.Linear(2 * hidden, hidden, bias=False)
            self.layer = LlamaDecoderLayer(llama, layer_idx=0)
        self.rotary = LlamaRotaryEmbedding(llama)
        self.norm = LlamaRMSNorm(hidden, eps=config.rms_norm_eps) if config.output_norm else None
        self.vocab_size = head_weight.shape[0]
        self.target_head = head_weight.detach()  # [vocab, H]: every id's row (context columns read it)
        keep_draft_vocab(self, draft_vocab, config.draft_vocab_size)
        if self.draft_vocab is not None:
            head_weight = head_weight[self.draft_vocab]
        self.embed_weight = embed_weight.detach()  # plain tensors: borrowed from the target, not saved
        self.head_weight = head_weight.detach()  # [draft vocab, H]
        self.head_product = None  # set by ``use_half_products``

    def use_half_products(self) -> None:
        """Inference on a CPU: the head and every Linear layer through fp16 products, a few times
        faster at a draft's few rows (``core.runtime.kernels.half_product``; float32 elsewhere)."""
        half_linears(self)
        self.head_product = half_product(self.head_weight)

    def fuse_target(self, hidden: list[torch.Tensor]) -> torch.Tensor:
        """The target's hidden states at ``target_layers`` (each [..., H]) -> the input feature [..., H]."""
        if self.fuse is None:
            return hidden[0]
        return self.fuse(torch.cat(hidden, dim=-1))

    def placeholders(self, anchor: torch.Tensor, depths: int) -> tuple[torch.Tensor, torch.Tensor]:
        """P-EAGLE's inputs for the positions of depths 2..``depths + 1`` of a step drafted from ``anchor``
        (the fused feature of the last position with a true target feature, [..., H]): (features
        [..., depths, H], token embeddings [depths, H]). A placeholder's feature is the anchor's shifted by a
        learned offset per depth (zero at the start: the newest true feature, as Medusa's heads read it);
        its token embedding is learned per depth. ``placeholders`` "shared" (vLLM's): every depth reads the
        fused ``mask_hidden`` and the embedding of ``ptd_token_id``, whatever the anchor."""
        if depths > self.config.parallel_tokens:
            raise ValueError(f"this drafter drafts at most {self.config.parallel_tokens + 1} tokens in parallel")
        if self.config.placeholders == "shared":
            feature = self.fuse(self.mask_hidden) if self.fuse is not None else self.mask_hidden
            embedding = self.embed_weight[self.config.ptd_token_id]
            return (feature.expand(*anchor.shape[:-1], depths, feature.shape[-1]),
                    embedding.expand(depths, embedding.shape[-1]))
        return anchor[..., None, :] + self.mask_features[:depths], self.mask_embeddings[:depths]

    def forward(self, features: torch.Tensor, tokens: torch.Tensor | None, positions: torch.Tensor,
                mask: torch.Tensor, cache: Cache | None = None, embedded: torch.Tensor | None = None) -> torch.Tensor:
        """features [B, n, H] (feature of position t), tokens [B, n] (token t+1), positions [B, n] (t),
        mask [B or 1, 1, n, n_cached + n] additive -> out [B, n, H] (the feature guessed for t+1).
        ``embedded`` [B, n, H] in place of ``tokens``: token embeddings given as they are (P-EAGLE's
        placeholders)."""
        if embedded is None:
            embedded = F.embedding(tokens, self.embed_weight)
        if self.config.layout == "reference":
            return self.layer(embedded, features, mask, self.rotary(features, positions), cache)
        x = self.combine(torch.cat([self.token_norm(embedded), self.feature_norm(features)], dim=-1))
        rope = self.rotary(x, positions)
        return self.layer(x, attention_mask=mask, position_ids=positions, cache=cache,
                          use_cache=cache is not None, position_embeddings=rope)

    def draft_logits(self, out: torch.Tensor, context: ContextColumns | None = None) -> torch.Tensor:
        """out [..., H] -> logits over the draft vocabulary [..., draft vocab], followed by the
        ``context``'s extra columns when given (``context.columns`` names them all)."""
        out = out if self.norm is None else self.norm(out)
        if self.head_product is None or torch.is_grad_enabled():
            logits = out @ self.head_weight.T
        else:
            logits = self.head_product(out)
        if context is None or not len(context.extra_ids):
            return logits
        return torch.cat([logits, context.logits(out).to(logits.dtype)], dim=-1)

    def context_columns(self) -> ContextColumns | None:
        """Extra columns for one request's own tokens (None without a reduced draft vocabulary)."""
        return None if self.draft_vocab is None else ContextColumns(self.draft_vocab, self.target_head)

    @property
    def columns(self) -> Columns:
        """Which target id each column of ``draft_logits`` scores."""
        return Columns(self.draft_vocab, self.vocab_size)

    def target_logits(self, out: torch.Tensor) -> torch.Tensor:
        """out [..., H] -> logits over the target's vocabulary [..., vocab] (-inf outside the draft vocabulary)."""
        return self.columns.to_target(self.draft_logits(out))


def run_segment(net: FeatureDrafterNet, kv: RequestKV, features: torch.Tensor, tokens: list[int] | torch.Tensor,
                segment_parents: list[int] | None = None) -> torch.Tensor:
    """Feed ``(features[i], tokens[i])`` pairs through the drafter with its paged cache.

    Like ``core.runtime.forward.forward_segment``: ``segment_parents`` covers the entries already pending
    this step followed by the new ones (default: a plain chain). features [n, H] -> out [n, H].
    ``tokens`` as embeddings [n, H] instead of ids: fed as they are (P-EAGLE's placeholders).
    """
    n = len(tokens)
    parents = chain_parents(n) if segment_parents is None else segment_parents
    n_prefix = len(kv.committed)
    device = features.device
    mask = attention_mask(n_prefix, parents, n, dtype=features.dtype, device=device)
    positions = position_ids(n_prefix, parents, n, device=device)
    cache = kv.begin_forward(kv.allocate(n))
    if isinstance(tokens, torch.Tensor) and tokens.is_floating_point():
        return net(features[None], None, positions, mask, cache, embedded=tokens[None])[0]
    token_ids = torch.tensor([tokens], dtype=torch.long, device=device)
    return net(features[None], token_ids, positions, mask, cache)[0]
