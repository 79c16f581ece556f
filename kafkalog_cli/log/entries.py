"""A sequence of fixed-size entries unpacked as they are used: index, transaction index and
producer snapshot files may hold millions of entries, and no list of them is built."""

from __future__ import annotations

from typing import Callable, Iterator, List, Sequence, TypeVar, Union, overload

T = TypeVar("T")


class LazyEntries(Sequence[T]):
    """``count`` entries, the i-th given by ``entry(i)``; ``what`` names them in errors."""

    __slots__ = ("_count", "_entry", "_what")

    def __init__(self, count: int, entry: Callable[[int], T], what: str) -> None:
        self._count = count
        self._entry = entry
        self._what = what

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> T: ...

    @overload
    def __getitem__(self, i: slice) -> List[T]: ...

    def __getitem__(self, i: Union[int, slice]) -> Union[T, List[T]]:
        if isinstance(i, slice):
            return [self._entry(j) for j in range(*i.indices(self._count))]
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError("%s out of range" % self._what)
        return self._entry(i)

    def __iter__(self) -> Iterator[T]:
        entry = self._entry
        for i in range(self._count):
            yield entry(i)
