"""log/report.py's ``report`` against the dataclasses module: the same class declared both
ways takes the same arguments, gets the same defaults and fields, and has the same repr and
equality."""

import dataclasses
from typing import ClassVar, List, Optional

import pytest

from kafkalog_cli.log.report import Report, field, report


def _declare(decorate, field_of):
    class Base(Report):
        first: int
        label: Optional[str] = None

    class Thing(Base):
        LIMIT: ClassVar[int] = 10
        items: List[int] = field_of(default_factory=list)
        label: Optional[str] = "x"  # declared again: keeps its place, takes the new default
        total: int = field_of(init=False)
        flag: bool = False

        def __post_init__(self):
            self.total = self.first + len(self.items)

    decorate(Base)
    return decorate(Thing)


Ours = _declare(report, field)
Theirs = _declare(dataclasses.dataclass(repr=True, eq=True), dataclasses.field)


def _repr_tail(obj):
    return repr(obj).split("(", 1)[1]


@pytest.mark.parametrize("args, kwargs", [
    ((1,), {}),
    ((1, "y"), {}),
    ((1,), {"items": [4, 5], "flag": True}),
    ((), {"first": 7, "label": None}),
    ((2, "z", [1]), {"flag": True}),
])
def test_a_report_is_made_as_a_dataclass_is(args, kwargs):
    ours, theirs = Ours(*args, **kwargs), Theirs(*args, **kwargs)
    assert _repr_tail(ours) == _repr_tail(theirs)
    assert vars(ours) == vars(theirs)
    assert ours == Ours(*args, **kwargs) and not ours != Ours(*args, **kwargs)
    assert ours != Ours(99)
    assert ours.LIMIT == 10
    assert Ours.__report_fields__ == tuple(f.name for f in dataclasses.fields(Theirs))


def test_a_default_factory_makes_a_new_value_for_each_report():
    a, b = Ours(1), Ours(1)
    a.items.append(3)
    assert b.items == []


@pytest.mark.parametrize("args, kwargs", [
    ((), {}),                       # first is required
    ((1, "a", [], False, 5), {}),   # too many positional arguments
    ((1,), {"first": 2}),           # first given twice
    ((1,), {"total": 3}),           # not an __init__ argument
    ((1,), {"nope": 3}),
])
def test_wrong_arguments_are_refused_as_a_dataclass_refuses_them(args, kwargs):
    with pytest.raises(TypeError):
        Theirs(*args, **kwargs)
    with pytest.raises(TypeError):
        Ours(*args, **kwargs)


def test_reports_are_unhashable_as_dataclasses_with_equality_are():
    with pytest.raises(TypeError):
        hash(Ours(1))
