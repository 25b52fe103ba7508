"""Speculative Decoding Lab: a real, instrumented speculative decoder (torch + transformers).

``generate`` is the one-call API; ``build_decoder(DecodeRequest.of(...))`` gives a step-by-step decoder.
"""
from core.api import build_decoder, generate, target_greedy
from core.common.errors import UserError
from core.records.steps import RunResult, StepRecord
from core.records.trace import read_trace
from core.api.request import DecodeRequest

__all__ = ["generate", "build_decoder", "DecodeRequest", "target_greedy", "UserError", "RunResult", "StepRecord",
           "read_trace"]
