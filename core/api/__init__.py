"""The lab's entry layer: one validated request (``DecodeRequest``) and the calls that run it
(``generate``, ``build_decoder``, ``build_batch``)."""
from core.api.decoding import (build_batch, build_decoder, encode_prompt, generate, greedy_generate_kwargs,
                               target_greedy)
from core.api.request import DecodeRequest

__all__ = ["DecodeRequest", "build_batch", "build_decoder", "encode_prompt", "generate", "greedy_generate_kwargs",
           "target_greedy"]
