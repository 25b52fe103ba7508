"""Reduced draft vocabularies: a drafter that scores only some of the target's tokens.

A draft vocabulary is a sorted list of target ids (``draft_vocab`` [n]); row i of the drafter's
LM head scores target id ``draft_vocab[i]``. Two maps cross between the vocabularies::

    draft_rows(draft_vocab, V)          target id -> draft row ([V], ``outside`` for ids not in it)
    to_target_vocab(logits, draft_vocab, V)  draft logits [..., n] -> target logits [..., V], -inf elsewhere

A drafter that only ranks its own columns (greedy top-k) need not build the target-wide logits:
``Columns`` keeps the columns that score some target id and maps a chosen column back to its id --
a softmax or top-k over them is the one over the target's vocabulary without the -inf entries
(on Gemma: 8,192 columns in place of 262,144, a millisecond a row).

Worked example, ``draft_vocab = [2, 5]``, V = 6: ``draft_rows`` is ``[-1, -1, 0, -1, -1, 1]``, and
draft logits ``[a, b]`` become ``[-inf, -inf, a, -inf, -inf, b]``: a token outside is never proposed.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


def draft_rows(draft_vocab: torch.Tensor | None, vocab_size: int, outside: int = -1) -> torch.Tensor | None:
    """[vocab_size] target id -> its row in ``draft_vocab``, ``outside`` for ids not in it
    (None when ``draft_vocab`` is None: the drafter keeps the whole vocabulary)."""
    if draft_vocab is None:
        return None
    rows = torch.full((vocab_size,), outside, dtype=torch.long, device=draft_vocab.device)
    rows[draft_vocab] = torch.arange(len(draft_vocab), device=draft_vocab.device)
    return rows


def to_target_vocab(logits: torch.Tensor, draft_vocab: torch.Tensor | None, vocab_size: int) -> torch.Tensor:
    """Draft logits [..., n] -> logits over the target's vocabulary [..., vocab_size].

    With ``draft_vocab`` its i-th column goes to target id ``draft_vocab[i]`` (columns past
    ``len(draft_vocab)``, such as an "other" id, are dropped) and every other id gets -inf. Without
    one the draft already speaks target ids: its logits are cut, or padded with -inf, to ``vocab_size``.
    """
    if draft_vocab is not None:
        full = logits.new_full((*logits.shape[:-1], vocab_size), float("-inf"))
        return full.index_copy_(-1, draft_vocab, logits[..., : len(draft_vocab)])
    if logits.shape[-1] >= vocab_size:
        return logits[..., :vocab_size]
    pad = logits.new_full((*logits.shape[:-1], vocab_size - logits.shape[-1]), float("-inf"))
    return torch.cat([logits, pad], dim=-1)


def keep_draft_vocab(module: nn.Module, draft_vocab: torch.Tensor | None, size: int | None) -> None:
    """Set ``module.draft_vocab``: ``draft_vocab`` as a buffer (saved with the module's weights) when the
    config asks for a draft vocabulary of ``size`` ids, None when ``size`` is None (the whole vocabulary)."""
    if size is None:
        module.draft_vocab = None
        return
    if draft_vocab is None or len(draft_vocab) != size:
        raise ValueError("draft_vocab must list draft_vocab_size target ids")
    module.register_buffer("draft_vocab", draft_vocab.to(torch.long))


@dataclass(frozen=True)
class Columns:
    """What the columns of a drafter's logits score: column i scores target id ``draft_vocab[i]``
    (None: target id i) in a target vocabulary of ``vocab_size`` ids."""

    draft_vocab: torch.Tensor | None
    vocab_size: int

    def proposable(self, logits: torch.Tensor) -> torch.Tensor:
        """Draft logits [..., n] -> the columns that score a target id [..., m] (an "other" id's
        column, or columns past the target's vocabulary, left out)."""
        return logits[..., : self.vocab_size if self.draft_vocab is None else len(self.draft_vocab)]

    def target_ids(self, columns: torch.Tensor) -> torch.Tensor:
        """Indices into ``proposable``'s columns -> the target ids they score."""
        return columns if self.draft_vocab is None else self.draft_vocab[columns]

    def to_target(self, logits: torch.Tensor) -> torch.Tensor:
        """``proposable`` logits [..., m] -> logits over the target's vocabulary [..., vocab_size]."""
        return to_target_vocab(logits, self.draft_vocab, self.vocab_size)
