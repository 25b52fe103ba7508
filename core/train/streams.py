"""Corpus text as token streams, and the seeded random windows cut from them.

Every trainer reads the corpus (``core.train.corpus``) the same way: each source's documents
encoded as one stream ``<s> doc </s> <s> doc </s> ...``, sources drawn by a weight that gives
each language its share, and windows cut at random positions with an explicit generator.
"""
from __future__ import annotations

from collections.abc import Iterator

import torch

from core.train.corpus import SOURCES

LANGUAGE_SHARE = {"zh": 0.1, "en": 0.9}  # default share of training sequences per language


def token_streams(documents: dict[str, list[str]], tokenizer) -> dict[str, torch.Tensor]:
    """Per source, its documents encoded as ``<s> doc </s> <s> doc </s> ...`` (int64)."""
    streams = {}
    for name, docs in documents.items():
        encoded = tokenizer.backend_tokenizer.encode_batch(docs, add_special_tokens=False)
        ids = [t for doc in encoded for t in [tokenizer.bos_token_id, *doc.ids, tokenizer.eos_token_id]]
        streams[name] = torch.tensor(ids, dtype=torch.long)
    return streams


def source_weights(streams: dict[str, torch.Tensor], zh_share: float | None = None) -> dict[str, float]:
    """Sampling weight per source: the language's share (``LANGUAGE_SHARE``, or ``zh_share`` for
    Chinese and the rest for English) split by size within the language."""
    shares = LANGUAGE_SHARE if zh_share is None else {"zh": zh_share, "en": 1.0 - zh_share}
    language = {source.name: source.language for source in SOURCES}
    sizes = {name: len(ids) for name, ids in streams.items()}
    total = {lang: sum(n for name, n in sizes.items() if language[name] == lang) for lang in shares}
    return {name: shares[language[name]] * n / total[language[name]] for name, n in sizes.items()}


def random_batches(
    streams: dict[str, torch.Tensor], weights: dict[str, float], batch_size: int,
    seq_len: int, generator: torch.Generator,
) -> Iterator[torch.Tensor]:
    """Endless batches ``[batch_size, seq_len + 1]`` of random windows; sources drawn by weight."""
    names = list(streams)
    probs = torch.tensor([weights[name] for name in names], dtype=torch.double)
    while True:
        rows = []
        for source in torch.multinomial(probs, batch_size, replacement=True, generator=generator):
            ids = streams[names[source]]
            start = int(torch.randint(len(ids) - seq_len, (1,), generator=generator))
            rows.append(ids[start:start + seq_len + 1])
        yield torch.stack(rows)


def eval_windows(ids: torch.Tensor, seq_len: int, max_tokens: int) -> list[torch.Tensor]:
    """Consecutive non-overlapping windows (the last may be shorter) predicting ``max_tokens`` at most."""
    ids = ids[:max_tokens + 1]
    return [ids[i:i + seq_len + 1] for i in range(0, len(ids) - 1, seq_len)]
