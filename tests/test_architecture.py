"""The layers of core/ (docs/architecture.md) hold: imports point down, never in a circle."""
from __future__ import annotations

import attributes
import house_counts
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


def test_every_instance_attribute_is_created_in_init():
    assert attributes.late_attributes("core") == []
    assert attributes.late_attributes("app") == []


def test_the_attribute_checker_sees_an_attribute_created_late(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "base.py").write_text(
        "class Base:\n    shared = 1\n    def __init__(self):\n        self.made = 0\n")
    (tmp_path / "pkg" / "run.py").write_text(
        "from dataclasses import dataclass\nfrom pkg.base import Base\n\n"
        "class Run(Base):\n"
        "    def __init__(self):\n        super().__init__()\n        self.kept = []\n"
        "    def start(self):\n        self.kept, self.made, self.shared = [], 1, 2\n        self.late = 3\n"
        "        self.count += 1\n\n"
        "@dataclass\nclass Fields:\n    field: int = 0\n"
        "    def __post_init__(self):\n        self.derived = 1\n"
        "    def step(self):\n        self.field, self.derived = 2, 3\n        self.other = 4\n\n"
        "class Reset:\n    def __init__(self):\n        self._reset()\n"
        "    def _reset(self):\n        self.count = 0\n    def again(self):\n        self._reset()\n"
        "        self.count, self.later = 1, 2\n")
    assert attributes.late_attributes(tmp_path / "pkg") == [
        ("pkg.run", "Fields", "other", "step"), ("pkg.run", "Reset", "later", "again"),
        ("pkg.run", "Run", "count", "start"), ("pkg.run", "Run", "late", "start")]  # a helper __init__ calls counts


def test_no_function_outside_training_is_longer_than_a_screen_and_no_view_state_is_a_god_object():
    assert house_counts.functions_over(60) == []  # core (but core/train), app, bench, app.py
    assert max(fields for *_, fields in house_counts.app_states()) <= 8
