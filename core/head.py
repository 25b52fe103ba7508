"""The LM head, applied apart from the decoder body and only to the rows that need logits.

A causal LM's forward is body (embeddings, layers, final norm) then head (hidden -> vocabulary
logits, then the config's final scaling, e.g. Gemma's soft-capping). The engine runs the body
over every new token (the KV must be written) but needs logits only for verify rows: none for a
prefill. On a CPU the head's kernel path also matters: for a few rows ``torch.mm(W, h.T)`` is
much faster than ``F.linear(h, W)`` (what ``nn.Linear`` calls) on a 262k-row head, with the same
result up to float rounding (~1e-5).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class LMHead:
    """``logits = scale * softcap(hidden @ weight.T + bias)``, the way the model's own forward computes them."""

    weight: torch.Tensor  # [vocab, hidden_size], the model's own (tied or not): never copied
    bias: torch.Tensor | None  # [vocab]
    softcap: float | None  # config.final_logit_softcapping (Gemma 2/3)
    scale: float  # config.logit_scale (Cohere) or 1 / config.logits_scaling (Granite); else 1

    @classmethod
    def of(cls, model) -> LMHead:
        head = model.get_output_embeddings()
        if not isinstance(head, torch.nn.Linear):
            raise TypeError(f"{type(model).__name__}: the LM head is not a Linear layer")
        config = model.config.get_text_config()
        scale = float(getattr(config, "logit_scale", None) or 1.0) / float(getattr(config, "logits_scaling", None) or 1.0)
        return cls(head.weight, head.bias, getattr(config, "final_logit_softcapping", None), scale)

    @property
    def vocab_size(self) -> int:
        return self.weight.shape[0]

    @torch.inference_mode()
    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden ``[n, hidden_size]`` (after the final norm) -> logits ``[n, vocab]`` float32.

        The result is a transposed view of a ``[vocab, n]`` product (row ``i`` has stride ``n``).
        """
        logits = torch.mm(self.weight, hidden.to(self.weight.dtype).T).T  # [n, vocab]
        if self.bias is not None:
            logits = logits + self.bias
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        if self.scale != 1.0:
            logits = logits * self.scale
        return logits.float()
