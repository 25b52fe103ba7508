"""House counts: a few sizes of the code base, printed as a table. It reports; the judging is
tests/test_architecture.py's (no function over 60 lines, no state object over 8 fields).

    python tests/house_counts.py

- lines of README.md;
- words in docs/*.md, in all and per file;
- ``sys.path.insert`` calls in bench/;
- functions longer than 60 lines (``def`` line to last line, ast) in core/, app/, bench/ and app.py,
  leaving out core/train/ and tests/;
- fields of the largest ``*State`` or ``Session`` class in app/ (dataclass fields, or the attributes
  its ``__init__`` assigns).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LONG = 60  # a function over this many lines is listed
FUNCTION_ROOTS = ("core", "app", "bench", "app.py")
FUNCTION_SKIP = ("core/train",)


def long_functions(source: str, limit: int = LONG) -> list[tuple[str, int, int]]:
    """(qualified name, def line, lines) of each function or method in ``source`` longer than ``limit`` lines,
    counted from its ``def`` line to its last line (decorators not counted; nested functions listed too)."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                lines = child.end_lineno - child.lineno + 1
                if lines > limit:
                    found.append((name, child.lineno, lines))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def _is_dataclass(node: ast.ClassDef) -> bool:
    def name(d: ast.expr) -> str:
        d = d.func if isinstance(d, ast.Call) else d
        return d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", "")

    return any(name(d) == "dataclass" for d in node.decorator_list)


def class_fields(node: ast.ClassDef) -> int:
    """A dataclass's fields (annotated names in its body, ``ClassVar`` left out), else the distinct
    ``self.<name>`` attributes its ``__init__`` assigns."""
    if _is_dataclass(node):
        return sum(1 for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                   and "ClassVar" not in ast.unparse(s.annotation))
    names = set()
    for s in node.body:
        if isinstance(s, ast.FunctionDef) and s.name == "__init__":
            for sub in ast.walk(s):
                targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target] \
                    if isinstance(sub, (ast.AnnAssign, ast.AugAssign)) else []
                for t in targets:
                    for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                        if isinstance(el, ast.Attribute) and isinstance(el.value, ast.Name) and el.value.id == "self":
                            names.add(el.attr)
    return len(names)


def state_classes(source: str) -> list[tuple[str, int]]:
    """(name, fields) of each class in ``source`` named ``Session`` or ending in ``State``."""
    return [(node.name, class_fields(node)) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ClassDef) and (node.name in ("Session", "Shared") or node.name.endswith("State"))]


def python_files(*roots: str, skip: tuple[str, ...] = ()) -> list[Path]:
    files = []
    for root in roots:
        path = ROOT / root
        for file in ([path] if path.is_file() else sorted(path.rglob("*.py"))):
            relative = file.relative_to(ROOT).as_posix()
            if not any(relative == s or relative.startswith(s + "/") for s in skip):
                files.append(file)
    return files


def functions_over(limit: int = LONG) -> list[tuple[str, str, int]]:
    """(file:line, function, lines) of every function over ``limit`` lines outside core/train and tests, longest first."""
    found = [(f"{f.relative_to(ROOT).as_posix()}:{line}", name, lines)
             for f in python_files(*FUNCTION_ROOTS, skip=FUNCTION_SKIP)
             for name, line, lines in long_functions(f.read_text(encoding="utf-8"), limit)]
    return sorted(found, key=lambda row: -row[2])


def app_states() -> list[tuple[str, str, int]]:
    """(file, class, fields) of every ``*State`` or ``Session`` class in app/, largest first."""
    return sorted(((f.relative_to(ROOT).as_posix(), name, fields) for f in python_files("app")
                   for name, fields in state_classes(f.read_text(encoding="utf-8"))), key=lambda row: -row[2])


def table(title: str, rows: list[tuple], headers: tuple[str, ...]) -> str:
    cells = [headers, *[tuple(str(c) for c in row) for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    right = [all(row[i].isdigit() for row in cells[1:]) and bool(cells[1:]) for i in range(len(headers))]

    def line(row: tuple[str, ...]) -> str:
        return "  ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right))

    return "\n".join([title, line(headers), "  ".join("-" * w for w in widths), *map(line, cells[1:])])


def main() -> int:
    readme = ROOT / "README.md"
    docs = sorted((ROOT / "docs").glob("*.md"))
    words = [(d.relative_to(ROOT).as_posix(), len(d.read_text(encoding="utf-8").split())) for d in docs]
    bench = [(f.relative_to(ROOT).as_posix(), f.read_text(encoding="utf-8").count("sys.path.insert"))
             for f in sorted((ROOT / "bench").glob("*.py"))]
    functions = functions_over()
    states = app_states()
    largest = states[0] if states else ("-", "-", 0)

    summary = [
        ("README.md lines", len(readme.read_text(encoding="utf-8").splitlines())),
        ("docs/*.md words", sum(n for _, n in words)),
        ("sys.path.insert in bench/", sum(n for _, n in bench)),
        (f"functions over {LONG} lines (core, app, bench, app.py; not core/train)", len(functions)),
        (f"fields of the largest *State/Session in app/ ({largest[1]}, {largest[0]})", largest[2]),
    ]
    print(table("House counts", summary, ("count", "value")))
    print()
    print(table("Words per docs/*.md", words, ("file", "words")))
    print()
    print(table(f"Functions over {LONG} lines", functions, ("where", "function", "lines")))
    print()
    print(table("*State and Session classes in app/", states, ("file", "class", "fields")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
