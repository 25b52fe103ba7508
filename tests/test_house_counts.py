"""tests/house_counts.py counts long functions and state fields as it says, on crafted sources."""
from house_counts import long_functions, state_classes


def body(lines: int) -> str:
    return "".join(f"    x{i} = {i}\n" for i in range(lines))


def test_a_function_counts_from_its_def_line_to_its_last_line():
    source = (
        "import functools\n\n"
        "@functools.cache\n"  # decorators are not counted
        "def exactly_sixty():\n" + body(59) + "\n"
        "def sixty_one():\n" + body(60) + "\n"
        "class Tool:\n"
        "    def method(self):\n" + "".join(f"        y{i} = {i}\n" for i in range(70)) + "\n"
        "async def outer():\n" + body(5) + "    def inner():\n" + "".join(f"        z{i} = {i}\n" for i in range(61))
    )
    assert long_functions(source) == [("sixty_one", 65, 61), ("Tool.method", 128, 71), ("outer", 200, 68),
                                      ("outer.inner", 206, 62)]
    assert long_functions(source, limit=70) == [("Tool.method", 128, 71)]


def test_state_fields_are_dataclass_fields_or_what_init_assigns():
    source = '''
from dataclasses import dataclass, field
from typing import ClassVar

@dataclass
class ViewState:
    a: int = 0
    b: list = field(default_factory=list)
    LIMIT: ClassVar[int] = 3
    def helper(self):
        self.c = 1

class Session:
    def __init__(self):
        self.a = 1
        self.b, self.c = 2, 3
        self.a += 1
        local = 4
    def later(self):
        self.d = 5

class Helper:
    pass
'''
    assert state_classes(source) == [("ViewState", 2), ("Session", 3)]
