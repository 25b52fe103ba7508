"""The import graph of ``core/``, read from the source (every ``import``, function-local ones included).

    python tests/import_graph.py            # layers, and any import that points up or closes a circle

``LAYERS`` is the architecture (docs/architecture.md): each layer is a folder (or sibling folders), and
a module may import from its own layer and the ones below it, never above. A module in a folder no
layer names counts as pointing up. ``tests/test_architecture.py`` holds the code to it.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = (  # lowest first; each layer is one folder of core (the package root is the top: its entry points)
    ("core.common",),  # errors, files, limits, the one timer: the standard library only
    ("core.records",),
    ("core.runtime",),
    ("core.models",),
    ("core.cost",),
    ("core.drafters",),
    ("core.engine",),
    ("core.api",),
    ("core.studies", "core.serving", "core.vllm", "core.llamacpp", "core.train"),
    ("core.cli",),
    ("core",),
)


def modules(package: str = "core") -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (``core.drafters`` is its __init__)."""
    found = {}
    for path in (ROOT / package).rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports, anywhere in its source."""
    edges: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            edges.setdefault(name, set()).update(t for t in targets if t in mods and t != name)
    return edges


def folder_of(module: str) -> str:
    """The folder a module sits in, as a dotted name (a package's ``__init__`` sits in its own)."""
    return module if (ROOT / module.replace(".", "/")).is_dir() else module.rpartition(".")[0]


def layer_of(module: str) -> int:
    """The layer of the folder ``module`` sits in; -1 for a folder no layer names."""
    folder = folder_of(module)
    return next((i for i, layer in enumerate(LAYERS) if folder in layer), -1)


def upward(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Imports that point to a higher layer (or from a module no layer names)."""
    return sorted((a, b) for a, targets in edges.items() for b in targets
                  if layer_of(a) < 0 or layer_of(b) < 0 or layer_of(b) > layer_of(a))


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def main() -> int:
    mods = modules()
    edges = imports(mods)
    for i, layer in reversed(list(enumerate(LAYERS))):
        names = sorted(m for m in mods if layer_of(m) == i)
        print(f"layer {i}: {', '.join(layer)}  ({len(names)} modules)")
    top = sorted(p.name for p in (ROOT / "core").glob("*.py"))
    print(f"modules directly in core/: {len(top)} ({', '.join(top)})")
    bad, loops = upward(edges), circles(edges)
    print(f"imports pointing up: {len(bad)}")
    for a, b in bad:
        print(f"  {a} -> {b}")
    print(f"import circles: {len(loops)}")
    for group in loops:
        print("  " + " <-> ".join(group))
    return 1 if bad or loops else 0


if __name__ == "__main__":
    sys.exit(main())
