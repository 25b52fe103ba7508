"""Errors a user can cause, and errors of the programs the lab runs in processes of their own (vLLM,
pip). The CLI and the app show their message and nothing else."""
import signal


class UserError(ValueError):
    """A bad request: unknown preset or drafter, empty prompt, out-of-range setting, bad file."""


class ExternalError(RuntimeError):
    """A program the lab runs in a process of its own (vLLM, pip) failed, exited or did not answer. The
    message's first line is the cause, with the exit status (``exit_status``) where the program ended;
    lines after it, if any, quote the program's own last lines. The CLI shows the first line."""


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


def exit_status(code: int) -> str:
    """``status 1``, ``status -9 (SIGKILL)``: a child's exit status as a message cites it (a negative
    status is the signal that ended it)."""
    if code < 0:
        try:
            return f"status {code} ({signal.Signals(-code).name})"
        except ValueError:
            pass
    return f"status {code}"
