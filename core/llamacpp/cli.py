"""``python -m core llamacpp setup|status`` (docs/llamacpp.md).

* ``setup``: build llama-cpp-python's wheel once when it is missing (tens of minutes on 2 cores, kept),
  then llama.cpp's venv under ``~/.cache``, with pip's own output shown;
* ``status``: where the venv is and what it holds, or the command that builds it (exit 1).

``python -m core bench --compare-llamacpp`` times llama.cpp beside the lab (``core.llamacpp.peer``).
"""
from __future__ import annotations

import json
import sys

from core.llamacpp import env


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="llamacpp_command", required=True)
    sub.add_parser("setup", help="build llama-cpp-python's wheel once (kept) and its virtual environment under "
                                 "~/.cache")
    sub.add_parser("status", help="where the llama.cpp environment is and what it holds")


def run(args) -> int:
    """A failure of pip or of the wheel's build (``VenvError``) reaches ``core.cli``'s error boundary,
    which prints its first line."""
    return {"setup": run_setup, "status": run_status}[args.llamacpp_command](args)


def run_setup(args) -> int:
    env.setup(lambda line: print(line, file=sys.stderr, flush=True))
    return 0


def run_status(args) -> int:
    found = env.stamp()
    wheel = env.built_wheel()
    print(json.dumps({"venv": str(env.venv_dir()), "ready": env.ready(), "installed": found.model_dump(),
                      "wheel": str(wheel) if wheel else None}) if found else env.missing_reason())
    return 0 if env.ready() else 1
