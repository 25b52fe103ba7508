"""The runner side of ``core.common.runner``'s protocol: answer JSON-line requests on stdin, each answer
on one stdout line marked with ``MARK``. Standard library only: a runner script (``core/vllm/runner.py``,
``core/llamacpp/runner.py``) runs under another virtual environment's Python and imports this file by
its folder, not as part of the lab's package."""
from __future__ import annotations

import json
import sys
import traceback
from typing import Callable

MARK = "@@sdlab@@ "  # before each answer: the engine may print its own logs on stdout too


def answer(obj: dict) -> None:
    sys.stdout.write(MARK + json.dumps(obj) + "\n")
    sys.stdout.flush()


def serve(handle: Callable[[dict], dict]) -> int:
    """Say ready, then answer each request with ``handle(request)`` until ``quit`` or the end of stdin;
    an error in a request is answered ``{"error", "traceback"}`` and the loop goes on."""
    answer({"ready": True})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            if request.get("op") == "quit":
                answer({"bye": True})
                return 0
            answer(handle(request))
        except Exception as e:  # the lab reads the error; the runner stays up for the next request
            answer({"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(limit=8)})
    return 0
