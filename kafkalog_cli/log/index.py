"""The offset index (.index) and time index (.timeindex) of a segment, read as the broker reads
them.

Both share one base class, as Kafka's AbstractIndex: fixed-size entries, no stored count, a file
that a live broker pre-allocates to its full size and fills with zeros after the last entry.
``slots`` counts every whole slot (Kafka's ``entries``, zero tail included, what the sanity check
sees); ``entries`` stops at the zero tail as DumpLogSegments does: at the first entry after the
first whose relative offset is 0, or at once when the first slot is all zeros (where Kafka's tool
prints a bogus ``offset: <base> position: 0`` line).
"""

from __future__ import annotations

import array
import os
import struct
import sys
from typing import ClassVar, List, Optional, Tuple, TypeVar

from .entries import LazyEntries
from .files import FileFormatError, open_regular, open_sized, pread_exact
from .names import base_offset_from_name

DEFAULT_INDEX_BYTES = 10 * 1024 * 1024  # segment.index.bytes

Entry = Tuple[int, int]  # an absolute entry: (offset, position) or (timestamp, offset)
_I = TypeVar("_I", bound="_Index")


def _int32s(data: bytes) -> "array.array[int]":
    """The file's bytes as big-endian int32s, in a C array."""
    ints = array.array("i", data[:len(data) - len(data) % 4])
    if sys.byteorder == "little":
        ints.byteswap()
    return ints


class _Index:
    entry: ClassVar[struct.Struct]  # one entry's layout
    kind: ClassVar[str]
    offset_int32: ClassVar[int] = 0  # which int32 of an entry holds the relative offset
    offset_field: ClassVar[int] = 0  # which field of an unpacked entry holds it
    key_field: ClassVar[int] = 0     # which field of an unpacked entry lookups search on

    def __init__(self, path: str, base_offset: Optional[int] = None) -> None:
        self.path = path
        if base_offset is None:
            base_offset = base_offset_from_name(path)
            if base_offset is None:
                raise FileFormatError("%s: the file name holds no base offset" % path)
        self.base_offset = base_offset
        # Read in bounded pieces: the real entries are found a MiB at a time and only they are
        # kept (``data``: the real entries, or slot 0 when there is none), with the last slot
        # (``_last``, which the sanity checks read); a huge or sparse file costs no more memory
        # than its real entries.
        with open_sized(path) as (f, self.file_size):
            fd = f.fileno()
            size = self.entry.size
            self.slots = self.file_size // size
            self.count = self._count_real(fd)
            self.data = pread_exact(fd, 0, max(self.count, min(self.slots, 1)) * size, path)
            self._last = (pread_exact(fd, (self.slots - 1) * size, size, path)
                          if self.slots else b"")

    def _count_real(self, fd: int) -> int:
        """Real entries: up to the first slot after the first whose relative offset is 0; none
        when the first slot is all zeros (a pre-allocated index with nothing in it yet: the
        first batch of a segment, at position 0, never gets an entry)."""
        size = self.entry.size
        width = size // 4
        if self.slots == 0 or not any(_int32s(pread_exact(fd, 0, size, self.path))):
            return 0
        # a chunk of slots at a time, read and dropped: memory stays bounded
        step = (1 << 20) // size
        for first in range(0, self.slots, step):
            stop = min(self.slots, first + step)
            chunk = pread_exact(fd, first * size, (stop - first) * size, self.path)
            relative = _int32s(chunk)[self.offset_int32::width]
            try:
                return first + relative.index(0, 1 if first == 0 else 0)
            except ValueError:
                continue
        return self.slots

    def zeros_after_entries(self) -> bool:
        """Are all the bytes after the real entries zeros (a pre-allocated tail, or a torn
        last entry shorter than one)? Read a MiB at a time."""
        start = self.count * self.entry.size
        with open_regular(self.path) as f:
            fd = f.fileno()
            end = min(os.fstat(fd).st_size, self.file_size)
            for pos in range(start, end, 1 << 20):
                if pread_exact(fd, pos, min(1 << 20, end - pos), self.path).strip(b"\x00"):
                    return False
        return True

    @property
    def entries(self) -> LazyEntries[Entry]:
        """The real entries, absolute, as a sequence read from the file's bytes as it is used
        (an index may hold hundreds of millions: no list of them is built)."""
        return LazyEntries(self.count, self.slot, "index entry")

    @property
    def max_slots(self) -> int:
        """Slots of a file pre-allocated to the default segment.index.bytes."""
        return DEFAULT_INDEX_BYTES // self.entry.size

    @property
    def zero_tail(self) -> int:
        """Whole slots after the real entries (a pre-allocated tail: zeros, as a live broker
        leaves the active segment's index, or a crashed one any segment's)."""
        return self.slots - self.count

    @property
    def preallocated(self) -> bool:
        """Left at its full pre-allocated size (normal for the active segment only)."""
        return self.file_size == self.max_slots * self.entry.size and self.zero_tail > 0

    def _absolute(self, raw: Tuple[int, ...]) -> Entry:
        raise NotImplementedError

    def _floor(self, key: int) -> Optional[Entry]:
        """The real entry with the largest key at or below ``key``, or None: a binary search
        over the file's bytes, as the broker's lookup does over its mapping."""
        lo, hi = 0, self.count - 1
        found = None
        unpack = self.entry.unpack_from
        size = self.entry.size
        field = self.key_field
        while lo <= hi:
            mid = (lo + hi) // 2
            raw = unpack(self.data, mid * size)
            k = raw[field] + (self.base_offset if field == self.offset_field else 0)
            if k <= key:
                found = raw
                lo = mid + 1
            else:
                hi = mid - 1
        return None if found is None else self._absolute(found)

    def trimmed(self: _I) -> _I:
        """The same index cut to its real entries, as the broker trims it on close and roll."""
        trimmed = object.__new__(type(self))
        trimmed.__dict__.update(self.__dict__)
        size = self.entry.size
        trimmed.data = self.data[:self.count * size]
        trimmed.file_size = len(trimmed.data)
        trimmed.slots = self.count
        trimmed._last = trimmed.data[-size:] if self.count else b""
        return trimmed

    def slot(self, i: int) -> Entry:
        """Slot ``i`` as an absolute entry, zero tail or not (a slot past the real entries and
        the last one is read from the file)."""
        size = self.entry.size
        if (i + 1) * size <= len(self.data):
            return self._absolute(self.entry.unpack_from(self.data, i * size))
        if i == self.slots - 1:
            return self._absolute(self.entry.unpack(self._last))
        if not 0 <= i < self.slots:
            raise IndexError("slot %d of %d" % (i, self.slots))
        with open_regular(self.path) as f:
            return self._absolute(self.entry.unpack(pread_exact(f.fileno(), i * size, size,
                                                                self.path)))


class OffsetIndex(_Index):
    """``entries``: (absolute offset, position) pairs."""

    entry = struct.Struct(">ii")
    kind = "index"
    offset_int32 = 0
    key_field = offset_field = 0

    def _absolute(self, raw: Tuple[int, ...]) -> Entry:
        return (self.base_offset + raw[0], raw[1])

    def sanity_problems(self) -> List[str]:
        """OffsetIndex.sanityCheck, condition for condition (what the broker checks)."""
        problems = []
        if self.slots and self.slot(self.slots - 1)[0] < self.base_offset:
            problems.append("corrupt index: last offset %d is below the base offset %d"
                            % (self.slot(self.slots - 1)[0], self.base_offset))
        if self.file_size % self.entry.size:
            problems.append("corrupt index: file size %d is not a multiple of %d"
                            % (self.file_size, self.entry.size))
        return problems

    def lookup(self, offset: int) -> Entry:
        """The position to start a scan for ``offset``: the largest entry at or below it, else
        (base offset, 0)."""
        return self._floor(offset) or (self.base_offset, 0)


class TimeIndex(_Index):
    """``entries``: (timestamp, absolute offset) pairs."""

    entry = struct.Struct(">qi")
    kind = "timeindex"
    offset_int32 = 2   # int32s of an entry: timestamp high, timestamp low, relative offset
    key_field = 0
    offset_field = 1

    def _absolute(self, raw: Tuple[int, ...]) -> Entry:
        return (raw[0], self.base_offset + raw[1])

    def sanity_problems(self) -> List[str]:
        """TimeIndex.sanityCheck, condition for condition."""
        problems = []
        if self.slots:
            last_ts, last_off = self.slot(self.slots - 1)
            first_ts = self.slot(0)[0]
            if last_ts < first_ts:
                problems.append("corrupt time index: last timestamp %d is below the first entry's "
                                "timestamp %d" % (last_ts, first_ts))
            if last_off < self.base_offset:
                problems.append("corrupt time index: last offset %d is below the base offset %d"
                                % (last_off, self.base_offset))
        if self.file_size % self.entry.size:
            problems.append("corrupt time index: file size %d is not a multiple of %d"
                            % (self.file_size, self.entry.size))
        return problems

    def lookup(self, timestamp: int) -> Entry:
        """The largest entry whose timestamp is at most ``timestamp``, else (-1, base)."""
        return self._floor(timestamp) or (-1, self.base_offset)

