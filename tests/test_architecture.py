"""The layers of core/ (docs/architecture.md) hold: imports point down, never in a circle."""
from __future__ import annotations

import import_graph


def test_no_import_points_up_or_closes_a_circle():
    edges = import_graph.imports(import_graph.modules())
    assert import_graph.upward(edges) == []
    assert import_graph.circles(edges) == []


def test_the_checker_sees_a_circle_and_an_upward_import():
    edges = {"core.runtime.tree": {"core.api"}, "core.api": {"core.runtime.tree"}}
    assert import_graph.circles(edges) == [["core.api", "core.runtime.tree"]]
    assert import_graph.upward(edges) == [("core.runtime.tree", "core.api")]


def test_core_itself_holds_only_the_entry_points():
    top = sorted(path.name for path in (import_graph.ROOT / "core").glob("*.py"))
    assert len(top) <= 12, top
