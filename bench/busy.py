"""Busy processes beside a measurement: ``n`` processes spinning on the cores, as other users of a
shared machine would, for the length of a ``with`` block -- or of a command:

    python bench/busy.py 2 -- python -m core bench --preset gemma-270m ...
"""
from __future__ import annotations

import contextlib
import multiprocessing
import subprocess
import sys
import time
from typing import Iterator

MAX_SECONDS = 3600.0  # a spinner left behind ends by itself


def _spin(stop_at: float) -> None:
    while time.time() < stop_at:
        pass


@contextlib.contextmanager
def busy_processes(n: int) -> Iterator[None]:
    spinners = [multiprocessing.Process(target=_spin, args=(time.time() + MAX_SECONDS,), daemon=True)
                for _ in range(n)]
    for process in spinners:
        process.start()
    try:
        yield
    finally:
        for process in spinners:
            process.terminate()


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        raise SystemExit(__doc__)
    with busy_processes(int(sys.argv[1])):
        sys.exit(subprocess.call(sys.argv[3:]))
