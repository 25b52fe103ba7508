"""House rules a reader can count: no function longer than a screen.

``long_functions(root)`` lists ``(path, name, lines)`` for every function (method, nested function)
longer than ``limit`` lines, counted from its ``def`` line to its last line; a nested function is
counted on its own as well as inside the one around it.

    python tests/house.py [folder ...]      # core by default
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 60


def _functions(tree: ast.AST, prefix: str = ""):
    """(qualified name, node) for every function under ``tree``: ``Class.method``, ``outer.inner``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def long_functions(root: str | Path, limit: int = LIMIT, skip: tuple[str, ...] = ()) -> list[tuple[str, str, int]]:
    """``(path, name, lines)`` for each function under ``root`` longer than ``limit`` lines; ``path``
    relative to ``root``'s parent (``core/studies/bench.py``); ``skip``: sub-folders of ``root`` not read."""
    root = Path(root) if Path(root).is_absolute() else ROOT / root
    found = []
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts or path.relative_to(root).parts[0] in skip:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for name, node in _functions(tree):
            lines = node.end_lineno - node.lineno + 1
            if lines > limit:
                found.append((path.relative_to(root.parent).as_posix(), name, lines))
    return found


if __name__ == "__main__":
    for folder in sys.argv[1:] or ["core"]:
        rows = long_functions(folder)
        for path, name, lines in rows:
            print(f"{path}:{name} {lines} lines")
        print(f"{folder}: {len(rows)} function(s) over {LIMIT} lines")
