"""Speculative Decoding Lab: a real, instrumented speculative decoder (torch + transformers).

``generate`` is the one-call API; ``build_decoder(DecodeRequest.of(...))`` gives a step-by-step decoder.
"""
from .api import build_decoder, generate, target_greedy
from .errors import UserError
from .records import RunResult, StepRecord
from .request import DecodeRequest
from .trace_schema import read_trace

__all__ = ["generate", "build_decoder", "DecodeRequest", "target_greedy", "UserError", "RunResult", "StepRecord",
           "read_trace"]
