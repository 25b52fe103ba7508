"""EAGLE-3's reference decoder layer: the layout of SafeAILab's EAGLE-3 and of vLLM's
``llama_eagle3.py``, which vLLM and SGLang load drafters in.

It differs from the lab's own layout (``eagle_net``: a 2H -> H ``combine`` projection, then a
plain Llama layer) in where the two inputs meet: the attention's q/k/v read the concatenation
directly (2H wide), and the residual stream starts from the feature itself::

    e        = input_layernorm(embed(token t+1))          [.., H]
    f        = hidden_norm(feature t)                     [.., H]
    h        = o_proj(attention(q/k/v([e, f])))  + feature t         (embeddings first, 2H -> H)
    out      = mlp(post_attention_layernorm(h))  + h
"""
from __future__ import annotations

import torch
from torch import nn
from transformers import LlamaConfig
from transformers.cache_utils import Cache
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaMLP, LlamaRMSNorm


class Eagle3ReferenceLayer(nn.Module):
    """One EAGLE-3 layer over (token embedding, fused feature); weight names as vLLM's ``midlayer.*``."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        hidden = config.hidden_size
        self.input_layernorm = LlamaRMSNorm(hidden, eps=config.rms_norm_eps)  # on the token embeddings
        self.hidden_norm = LlamaRMSNorm(hidden, eps=config.rms_norm_eps)  # on the fused feature
        self.self_attn = LlamaAttention(config, layer_idx=0)
        head_dim = self.self_attn.head_dim
        self.self_attn.q_proj = nn.Linear(2 * hidden, config.num_attention_heads * head_dim, bias=False)
        self.self_attn.k_proj = nn.Linear(2 * hidden, config.num_key_value_heads * head_dim, bias=False)
        self.self_attn.v_proj = nn.Linear(2 * hidden, config.num_key_value_heads * head_dim, bias=False)
        self.post_attention_layernorm = LlamaRMSNorm(hidden, eps=config.rms_norm_eps)
        self.mlp = LlamaMLP(config)

    def forward(self, embedded: torch.Tensor, features: torch.Tensor, mask: torch.Tensor,
                position_embeddings: tuple[torch.Tensor, torch.Tensor], cache: Cache | None = None) -> torch.Tensor:
        """embedded, features [B, n, H] -> out [B, n, H] (before the drafter's final norm)."""
        x = torch.cat([self.input_layernorm(embedded), self.hidden_norm(features)], dim=-1)  # [B, n, 2H]
        attended, _ = self.self_attn(x, position_embeddings=position_embeddings, attention_mask=mask, cache=cache)
        h = features + attended
        return h + self.mlp(self.post_attention_layernorm(h))
