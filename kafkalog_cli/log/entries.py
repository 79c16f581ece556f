"""A sequence of fixed-size entries unpacked as they are used: index, transaction index and
producer snapshot files may hold millions of entries, and no list of them is built."""

from collections.abc import Sequence


class LazyEntries(Sequence):
    """``count`` entries, the i-th given by ``entry(i)``; ``what`` names them in errors."""

    __slots__ = ("_count", "_entry", "_what")

    def __init__(self, count, entry, what):
        self._count = count
        self._entry = entry
        self._what = what

    def __len__(self):
        return self._count

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._count))]
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError("%s out of range" % self._what)
        return self._entry(i)

    def __iter__(self):
        entry = self._entry
        for i in range(self._count):
            yield entry(i)
