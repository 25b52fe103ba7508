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


class ContextColumns:
    """A reduced draft vocabulary widened by the request's own tokens, scored by the borrowed head.

    A reduced vocabulary leaves out tokens that are rare overall, and a reply needs some of them:
    a name, an identifier or a rare character it takes from its prompt or its own earlier text. On
    Gemma's chat-style held-out set 9.8% of the greedy tokens lie outside eagle3-chat's 16,384
    and 8 in 10 of those occurred earlier in the context. A drafter whose head rows are the target's
    own (EAGLE's, Medusa's shared head) can score any target id the same way, so the ids of the request outside
    the draft vocabulary become extra columns after the static ones, scored in float32; nothing is
    trained and nothing is saved. ``read(tokens)`` takes the request's tokens so far (prompt
    included; only the ones it has not seen are read), ``columns`` maps columns to target ids and
    ``logits(out)`` scores the extra columns.

    Worked example, ``draft_vocab = [2, 5]``, V = 6, the request ``[1, 2, 4, 1]``: the extra ids are
    ``[1, 4]``, the columns score ``[2, 5, 1, 4]``, so token 4 can be proposed though it is not in
    the draft vocabulary.
    """

    def __init__(self, draft_vocab: torch.Tensor, head_weight: torch.Tensor):
        self.draft_vocab = draft_vocab
        self.head_weight = head_weight  # [V, H], the target's head: the rows of every id
        self.vocab_size = head_weight.shape[0]
        self.known = torch.zeros(self.vocab_size, dtype=torch.bool, device=draft_vocab.device)
        self.known[draft_vocab] = True
        self.extra_ids = draft_vocab.new_empty(0)
        self.extra_rows = head_weight.new_empty(0, head_weight.shape[1], dtype=torch.float32)
        self.seen = 0
        self._columns = Columns(draft_vocab, self.vocab_size)

    def read(self, tokens: list[int]) -> None:
        new = [t for t in dict.fromkeys(tokens[self.seen :]) if 0 <= t < self.vocab_size]
        self.seen = len(tokens)
        if not new:
            return
        ids = torch.tensor(new, dtype=torch.long, device=self.known.device)
        ids = ids[~self.known[ids]]
        if len(ids):
            self.known[ids] = True
            self.extra_ids = torch.cat([self.extra_ids, ids])
            self.extra_rows = torch.cat([self.extra_rows, self.head_weight[ids].float()])
            self._columns = Columns(torch.cat([self.draft_vocab, self.extra_ids]), self.vocab_size)

    @property
    def columns(self) -> Columns:
        return self._columns

    def logits(self, out: torch.Tensor) -> torch.Tensor:
        """The head's input [..., H] -> the extra columns' logits [..., extra ids]."""
        return out.float() @ self.extra_rows.T
