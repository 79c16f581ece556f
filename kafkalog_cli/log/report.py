"""The base of the operations' reports (dataclasses): the repr and equality a dataclass would
generate, made from its fields when used. Generating them per class costs every command's
start-up (a dataclass's methods are compiled when its module is imported); so the reports are
declared ``@dataclass(repr=False, eq=False)`` on this base."""

from __future__ import annotations

from dataclasses import fields
from typing import Any


class Report:
    __slots__ = ()

    def __repr__(self) -> str:
        return "%s(%s)" % (type(self).__qualname__, ", ".join(
            "%s=%r" % (f.name, getattr(self, f.name)) for f in fields(self)  # type: ignore[arg-type]
            if f.repr))

    def __eq__(self, other: Any) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name)
                   for f in fields(self) if f.compare)  # type: ignore[arg-type]

    __hash__ = None  # type: ignore[assignment]  # as a dataclass's with eq: unhashable
