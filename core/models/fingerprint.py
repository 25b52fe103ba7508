"""What identifies a target: the key under which its drafters, cost curves and drafter data are kept."""
from __future__ import annotations

import hashlib
import weakref

import torch

_fingerprints: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> fingerprint


def target_fingerprint(model) -> dict:
    """What identifies a target for its drafters: shape, vocabulary and a hash of its LM head.

    The hash is taken over bf16-rounded values, so one target loaded in fp32 on CPU or bf16 on
    CUDA gives the same fingerprint. Computed once per loaded model (targets are frozen).
    """
    if model not in _fingerprints:
        _fingerprints[model] = _fingerprint(model)
    return _fingerprints[model]


def _fingerprint(model) -> dict:
    config = model.config.get_text_config()
    head = model.get_output_embeddings().weight.detach()
    rows = head[:: max(1, head.shape[0] // 512)]  # a sample of rows keeps this cheap for big vocabularies
    digest = hashlib.sha256(rows.to("cpu", torch.bfloat16).view(torch.int16).numpy().tobytes()).hexdigest()
    return {
        "hidden_size": int(config.hidden_size),
        "num_hidden_layers": int(config.num_hidden_layers),
        "vocab_size": int(head.shape[0]),
        "lm_head_sha256": digest[:16],
    }
