"""Gemma 3 for vLLM with EAGLE-3's auxiliary hidden states.

vLLM's ``Gemma3ForCausalLM`` (``vllm/model_executor/models/gemma3.py``) has no EAGLE-3 interface, so
vLLM 0.32 refuses an EAGLE-3 drafter for it. This subclass adds it the way vLLM's Llama has it
(``SupportsEagle3`` on the model, ``EagleModelMixin`` on its decoder stack):

- ``set_aux_hidden_state_layers((i, j, k))`` (called by vLLM from the drafter's
  ``eagle_aux_hidden_state_layer_ids``) picks ``hidden_states`` indices: 0 is the scaled token
  embedding, i is the residual stream after decoder layer i - 1 (what transformers'
  ``output_hidden_states`` gives at index i, for i below the last layer);
- the forward then returns ``(final hidden state, [stream at i, j, k])``.

Gemma's decoder layers return ``(hidden, residual)`` with the residual add fused into the next
layer's norm, so the stream after a layer is their sum. Pipeline parallelism is not supported
(one process holds all layers: what the lab runs).
"""
from __future__ import annotations

from itertools import islice

import torch
from vllm.model_executor.models.gemma3 import Gemma3ForCausalLM, Gemma3Model
from vllm.model_executor.models.interfaces import EagleModelMixin, SupportsEagle3


class Gemma3ModelEagle3(Gemma3Model, EagleModelMixin):
    """Gemma 3's decoder stack, keeping the residual stream at the layers EAGLE-3 reads."""

    def forward(self, input_ids: torch.Tensor | None, positions: torch.Tensor, intermediate_tensors=None,
                inputs_embeds: torch.Tensor | None = None, **kwargs):
        if intermediate_tensors is not None:
            raise NotImplementedError("Gemma 3 with EAGLE-3 (the lab's plugin) runs without pipeline parallelism")
        hidden = inputs_embeds if inputs_embeds is not None else self.embed_input_ids(input_ids)
        residual = None
        aux: list[torch.Tensor] = []
        self._maybe_add_hidden_state(aux, self.start_layer, hidden, residual)
        for index, layer in enumerate(islice(self.layers, self.start_layer, self.end_layer), start=self.start_layer):
            hidden, residual = layer(positions, hidden, residual, **kwargs)
            self._maybe_add_hidden_state(aux, index + 1, hidden, residual)
        hidden, _ = self.norm(hidden, residual)
        return (hidden, aux) if aux else hidden


class Gemma3ForCausalLMEagle3(Gemma3ForCausalLM, SupportsEagle3):
    """vLLM's Gemma 3, with the EAGLE-3 interface (module docstring)."""

    def __init__(self, *, vllm_config, prefix: str = ""):
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        # the stack vLLM built, given the EAGLE-3 forward: same weights, same attention layers (building a
        # second stack would register its attention layers twice)
        self.model.__class__ = Gemma3ModelEagle3
