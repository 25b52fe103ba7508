"""Instance attributes are created in ``__init__``: a reader of a class finds every attribute it has there.

``late_attributes(root)`` lists ``(module, class, attribute, method)`` for each ``self.X = ...`` in a
method other than ``__init__`` / ``__post_init__`` / ``setUp`` where ``X`` is created nowhere a
reader looks first: not in those methods (nor in a method of the class they call on ``self``, as
``self._begin_run(None)``), not in the class body (class attributes, dataclass and
pydantic fields, properties) of the class or of its bases found under ``root`` (bases from outside,
``nn.Module`` or ``BaseModel``, are not read).

    python tests/attributes.py [folder ...]      # core by default
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONSTRUCTORS = ("__init__", "__post_init__", "setUp")


def _module_name(path: Path, top: Path) -> str:
    """``core.engine.decoder`` for ``top/core/engine/decoder.py``."""
    parts = list(path.relative_to(top).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _self_targets(node: ast.AST, self_name: str) -> list[str]:
    """The attribute names ``self.X`` that an assignment target writes (tuples and starred unpacked)."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == self_name:
        return [node.attr]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [name for element in node.elts for name in _self_targets(element, self_name)]
    if isinstance(node, ast.Starred):
        return _self_targets(node.value, self_name)
    return []


def _assigned(method: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """Every ``self.X`` the method assigns (nested functions and loops included), in order."""
    args = method.args.posonlyargs + method.args.args
    decorators = {d.id for d in method.decorator_list if isinstance(d, ast.Name)}
    if not args or decorators & {"staticmethod", "classmethod"}:
        return []
    self_name, names = args[0].arg, []
    for node in ast.walk(method):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            targets = [node.target]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets = [node.optional_vars]
        else:
            continue
        for target in targets:
            names += _self_targets(target, self_name)
    return names


def _self_calls(method: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names of the methods ``method`` calls on its own ``self``."""
    args = method.args.posonlyargs + method.args.args
    if not args:
        return set()
    self_name = args[0].arg
    return {node.func.attr for node in ast.walk(method) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
            and node.func.value.id == self_name}


def _class_body_names(cls: ast.ClassDef) -> set[str]:
    """Names the class body itself creates: class attributes, fields, methods and properties."""
    names = set()
    for node in cls.body:
        if isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
    return names


class _Index:
    """Every class under the folders read, by module and name, with what each module imports by name."""

    def __init__(self, paths: list[Path], top: Path):
        self.trees = {_module_name(p, top): ast.parse(p.read_text(encoding="utf-8"), str(p)) for p in paths}
        self.classes: dict[tuple[str, str], ast.ClassDef] = {}
        self.imported: dict[str, dict[str, tuple[str, str]]] = {}
        for module, tree in self.trees.items():
            names = {}
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    self.classes.setdefault((module, node.name), node)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names.update({a.asname or a.name: (node.module, a.name) for a in node.names})
            self.imported[module] = names

    def resolve(self, module: str, name: str, hops: int = 0) -> tuple[str, ast.ClassDef] | None:
        """The class ``name`` means in ``module``: defined there, or imported (through re-exports) from a
        module read; None for a class from elsewhere."""
        if (module, name) in self.classes:
            return module, self.classes[(module, name)]
        if module in self.imported and name in self.imported[module] and hops < 8:
            return self.resolve(*self.imported[module][name], hops + 1)
        return None

    def bases(self, module: str, cls: ast.ClassDef) -> list[tuple[str, ast.ClassDef]]:
        """The class's bases that are defined in the folders read."""
        found = (self.resolve(module, base.id) for base in cls.bases if isinstance(base, ast.Name))
        return [base for base in found if base is not None]

    def created(self, module: str, cls: ast.ClassDef, seen: frozenset = frozenset()) -> set[str]:
        """What the class and its known bases create up front: body names and constructor assignments."""
        if (module, cls.name) in seen:
            return set()
        names = _class_body_names(cls)
        methods = {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for name in CONSTRUCTORS:
            if name in methods:
                names.update(_assigned(methods[name]))
                for called in _self_calls(methods[name]) & set(methods):  # one level: the constructor's helpers
                    names.update(_assigned(methods[called]))
        for owner, base in self.bases(module, cls):
            names |= self.created(owner, base, seen | {(module, cls.name)})
        return names


def _python_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def late_attributes(root: str | Path, skip: tuple[str, ...] = ()) -> list[tuple[str, str, str, str]]:
    """``(module, class, attribute, method)`` for each instance attribute first created outside the
    constructors; ``skip``: sub-folders of ``root`` not read (as ``"train"``)."""
    root = Path(root) if Path(root).is_absolute() else ROOT / root
    paths = [p for p in _python_files(root) if not any(p.relative_to(root).parts[0] == s for s in skip)]
    index = _Index(paths, root.parent)
    found = set()
    for (module, _), cls in index.classes.items():
        created = index.created(module, cls)
        for node in cls.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name not in CONSTRUCTORS:
                found.update((module, cls.name, name, node.name) for name in _assigned(node) if name not in created)
    return sorted(found)


if __name__ == "__main__":
    for folder in sys.argv[1:] or ["core"]:
        rows = late_attributes(folder)
        for row in rows:
            print("{}.{}.{} (first set in {})".format(*row))
        print(f"{folder}: {len(rows)} attribute(s) created outside __init__")
