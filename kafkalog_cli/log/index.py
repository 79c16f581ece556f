"""The offset index (.index) and time index (.timeindex) of a segment, read as the broker reads them.

Both share one base class, as Kafka's AbstractIndex: fixed-size entries, no stored count, a file
that a live broker pre-allocates to its full size and fills with zeros after the last entry.
``slots`` counts every whole slot (Kafka's ``entries``, zero tail included, what the sanity check
sees); ``entries`` stops at the zero tail as DumpLogSegments does: at the first entry after the
first whose relative offset is 0.
"""

import array
import bisect
import os
import struct
import sys

from .files import FileFormatError, base_offset_from_name

DEFAULT_INDEX_BYTES = 10 * 1024 * 1024  # segment.index.bytes


class _Index:
    entry = None          # struct.Struct of one entry
    kind = None

    def __init__(self, path, base_offset=None):
        self.path = path
        if base_offset is None:
            base_offset = base_offset_from_name(path)
            if base_offset is None:
                raise FileFormatError("%s: the file name holds no base offset" % path)
        self.base_offset = base_offset
        with open(path, "rb") as f:
            self.data = f.read()
        self.file_size = len(self.data)
        self.slots = self.file_size // self.entry.size
        self.entries = self._real_entries()

    @property
    def max_slots(self):
        """Slots of a file pre-allocated to the default segment.index.bytes."""
        return DEFAULT_INDEX_BYTES // self.entry.size

    @property
    def zero_tail(self):
        """Whole slots after the real entries (a pre-allocated tail: zeros, as a live broker
        leaves the active segment's index, or a crashed one any segment's)."""
        return self.slots - len(self.entries)

    @property
    def preallocated(self):
        """Left at its full pre-allocated size (normal for the active segment only)."""
        return self.file_size == self.max_slots * self.entry.size and self.zero_tail > 0

    def _relative(self, raw):
        raise NotImplementedError

    def _absolute(self, raw):
        raise NotImplementedError

    def _real_entries(self):
        raw = list(self.entry.iter_unpack(memoryview(self.data)[:self.slots * self.entry.size]))
        n = len(raw)
        for i in range(1, n):
            if self._relative(raw[i]) == 0:
                n = i
                break
        return [self._absolute(r) for r in raw[:n]]

    def trimmed(self):
        """The same index cut to its real entries, as the broker trims it on close and roll."""
        trimmed = object.__new__(type(self))
        trimmed.__dict__.update(self.__dict__)
        trimmed.data = self.data[:len(self.entries) * self.entry.size]
        trimmed.file_size = len(trimmed.data)
        trimmed.slots = len(self.entries)
        return trimmed

    def slot(self, i):
        """Slot ``i`` as an absolute entry, zero tail or not."""
        return self._absolute(self.entry.unpack_from(self.data, i * self.entry.size))


class OffsetIndex(_Index):
    """``entries``: (absolute offset, position) pairs."""

    entry = struct.Struct(">ii")
    kind = "index"

    def _relative(self, raw):
        return raw[0]

    def _absolute(self, raw):
        return (self.base_offset + raw[0], raw[1])

    def _real_entries(self):
        # Offsets and positions in C-speed arrays: an index has up to 1.3 million slots.
        slots = array.array("i", self.data[:self.slots * 8])
        if sys.byteorder == "little":
            slots.byteswap()
        relative = slots[0::2]
        n = len(relative)
        if n > 1:
            try:
                n = relative.index(0, 1)
            except ValueError:
                pass
        base = self.base_offset
        return [(base + rel, pos) for rel, pos in zip(relative[:n], slots[1:2 * n:2])]

    def sanity_problems(self):
        """OffsetIndex.sanityCheck, condition for condition (what the broker checks)."""
        problems = []
        if self.slots and self.slot(self.slots - 1)[0] < self.base_offset:
            problems.append("corrupt index: last offset %d is below the base offset %d"
                            % (self.slot(self.slots - 1)[0], self.base_offset))
        if self.file_size % self.entry.size:
            problems.append("corrupt index: file size %d is not a multiple of %d"
                            % (self.file_size, self.entry.size))
        return problems

    def lookup(self, offset):
        """The position to start a scan for ``offset``: the largest entry at or below it."""
        i = bisect.bisect_right(self.entries, (offset, 2 ** 31)) - 1
        return self.entries[i] if i >= 0 else (self.base_offset, 0)


class TimeIndex(_Index):
    """``entries``: (timestamp, absolute offset) pairs."""

    entry = struct.Struct(">qi")
    kind = "timeindex"

    def _relative(self, raw):
        return raw[1]

    def _absolute(self, raw):
        return (raw[0], self.base_offset + raw[1])

    def sanity_problems(self):
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

    def lookup(self, timestamp):
        """The largest entry whose timestamp is at most ``timestamp``, else (-1, base)."""
        keys = [e[0] for e in self.entries]
        i = bisect.bisect_right(keys, timestamp) - 1
        return self.entries[i] if i >= 0 else (-1, self.base_offset)


def sibling(path, suffix):
    """The file of the same segment with another suffix (``X.index`` -> ``X.log``)."""
    directory, name = os.path.split(path)
    return os.path.join(directory, name.split(".", 1)[0] + suffix)
