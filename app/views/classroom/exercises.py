"""Two of predict mode's questions, checked against the step the engine really ran.

- ``reject``: which drafted node does the target refuse first? The target reads the tree from the root
  down the branch it agrees with, and the first node it disagrees with ends its path: the answer is a
  child of the path's last kept node (or of the root) that was refused -- at temperature 0 the target
  refuses every child there at once, so any of them is right -- or ``NONE`` when it kept a whole branch
  and added a bonus token.
- ``count``: how many tokens does the step write? The record's emitted tokens: the kept drafted ones and
  the target's own (correction or bonus), fewer where the run ended inside the step (end-of-text, budget).

The step is drafted and verified before the class guesses (the engine's step is one call); what the
class sees until the reveal is the draft alone, which the verify cannot change. A step that drafted
nothing leaves nothing to guess, and a question left unanswered is not a guess: neither is scored.
"""
from __future__ import annotations

from dataclasses import dataclass

from core.records.steps import StepRecord

NONE = -1  # the answer "the target refuses none: it keeps a whole branch"
KINDS = ("keep", "reject", "count")  # the step questions: keep is ``Predict.reveal``'s own


@dataclass(frozen=True)
class Stop:
    """Where the target's path through one step's tree ended."""

    kept: tuple[int, ...]  # node ids of the accepted path, the root's child first
    refused: tuple[int, ...]  # the path's last node's children the target refused, in the order tried; () if none

    @property
    def first(self) -> int:
        """The node the target refused first (the first tried), or NONE."""
        return self.refused[0] if self.refused else NONE


@dataclass(frozen=True)
class Check:
    """One answered question: ``right`` counts only when ``scored``."""

    kind: str  # "reject" | "count"
    guess: int | None  # a node id or NONE (reject), a number of tokens (count); None: not answered
    answer: int  # Stop.first (reject) or the tokens the step wrote (count)
    scored: bool
    right: bool
    unscored: str = ""  # why not scored: "nothing" (the step drafted nothing) | "blank" (no answer)


def stop_of(record: StepRecord) -> Stop | None:
    """Where the target stopped in ``record``'s tree; None when the step drafted nothing."""
    if not record.nodes:
        return None
    kept = tuple(n.id for n in sorted((n for n in record.nodes if n.status == "accepted"), key=lambda n: n.depth))
    last = kept[-1] if kept else -1
    refused = tuple(n.id for n in record.nodes if n.parent == last and n.status == "rejected")
    return Stop(kept, refused)


def check_reject(record: StepRecord, guess: int | None) -> Check:
    """Is ``guess`` (a node id, or NONE) a node the target refused where its path ended?"""
    stop = stop_of(record)
    if stop is None or guess is None:
        return Check("reject", guess, NONE if stop is None else stop.first, False, False,
                     "nothing" if stop is None else "blank")
    right = guess in stop.refused if stop.refused else guess == NONE
    return Check("reject", guess, stop.first, True, right)


def check_count(record: StepRecord, guess: int | None) -> Check:
    """Is ``guess`` the number of tokens the step wrote?"""
    answer = len(record.emitted)
    if not record.nodes or guess is None:
        return Check("count", guess, answer, False, False, "nothing" if not record.nodes else "blank")
    return Check("count", guess, answer, True, guess == answer)


def count_choices(record: StepRecord) -> list[int]:
    """The counts a step can write: 1 (only the target's token) to its tree's depth + 1."""
    return list(range(1, max((n.depth for n in record.nodes), default=0) + 2))
