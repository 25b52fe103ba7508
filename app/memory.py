"""Keep a long-running server's memory flat (glibc only; elsewhere these do nothing).

Gradio runs handlers on a pool of threads, and glibc gives threads their own malloc arenas: torch's
many short-lived CPU tensors then leave free pages spread over up to 8 x cores arenas, and the
process's memory creeps up under many concurrent visitors although nothing is leaked (one thread
doing the same runs stays flat). ``limit_arenas`` caps the arenas when the server starts;
``give_back`` returns free heap pages to the system after a run ends."""
from __future__ import annotations

import ctypes
import ctypes.util
import functools

M_ARENA_MAX = -8  # mallopt parameter (glibc malloc.h)
SERVER_ARENAS = 2


@functools.cache
def _libc():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


def limit_arenas(arenas: int = SERVER_ARENAS) -> None:
    if _libc() is not None:
        _libc().mallopt(M_ARENA_MAX, arenas)


def give_back() -> None:
    if _libc() is not None:
        _libc().malloc_trim(0)
