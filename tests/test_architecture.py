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
    assert top == ["__init__.py", "__main__.py"], top


def test_a_layer_is_a_folder():
    assert import_graph.folder_of("core.common.timing") == "core.common"
    assert import_graph.folder_of("core.drafters") == "core.drafters"
    assert import_graph.folder_of("core.__main__") == "core"
    assert import_graph.layer_of("core.engine.recorder") > import_graph.layer_of("core.drafters.base")
    assert import_graph.layer_of("core.nowhere.module") == -1  # a folder no layer names is flagged
    assert import_graph.upward({"core.nowhere.module": {"core.common.errors"}}) == [
        ("core.nowhere.module", "core.common.errors")]
