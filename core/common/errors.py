"""Errors a user can cause. The CLI and the app show their message and nothing else."""


class UserError(ValueError):
    """A bad request: unknown preset or drafter, empty prompt, out-of-range setting, bad file."""


class KVCacheFull(RuntimeError):
    """The block pool has no free block left for this request."""


def one_line(text: str, limit: int = 300) -> str:
    """The first line of ``text``, at most ``limit`` characters ("" for an empty text): how an error
    from a library or a file is quoted in a one-line message."""
    first = (text.strip().splitlines() or [""])[0]
    return first if len(first) <= limit else first[: limit - 1] + "…"


def listed(names: list[str], shown: int = 3) -> str:
    """``a, b, c and 4 more``: the first ``shown`` names of a list a message cites, and how many it leaves out."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def counted(n: int, noun: str) -> str:
    """``1 new token``, ``2 new tokens``: a count and its noun, singular for one (messages and CLI lines)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
