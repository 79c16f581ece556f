"""The transaction index (.txnindex): the aborted transactions of a segment (AbortedTxn)."""

from __future__ import annotations

import re
import struct
from typing import List, Optional, Sequence

from .entries import LazyEntries
from .files import FileFormatError, read_sized
from .names import base_offset_from_name

ENTRY = struct.Struct(">hqqqq")  # version, producerId, firstOffset, lastOffset, lastStableOffset


class AbortedTxn:
    __slots__ = ("version", "producer_id", "first_offset", "last_offset", "last_stable_offset")

    def __init__(self, version: int, producer_id: int, first_offset: int, last_offset: int,
                 last_stable_offset: int) -> None:
        self.version = version
        self.producer_id = producer_id
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.last_stable_offset = last_stable_offset


_POSITIVE = re.compile(b"[\x01-\x7f]")


def _entry(data: bytes, pos: int) -> AbortedTxn:
    # AbortedTxn.version() reads one (signed) byte of the two the field takes
    version = data[pos] - 256 if data[pos] >= 128 else data[pos]
    _, pid, first, last, lso = ENTRY.unpack_from(data, pos)
    return AbortedTxn(version, pid, first, last, lso)


class TransactionIndex:
    """Every whole 34-byte entry of the file; a trailing partial entry is ignored, as in Kafka."""

    entries: Sequence[AbortedTxn]

    def __init__(self, path: str, base_offset: Optional[int] = None) -> None:
        self.path = path
        self.base_offset = base_offset_from_name(path) if base_offset is None else base_offset
        data = read_sized(path)
        self.file_size = len(data)
        self.trailing = len(data) % ENTRY.size
        count = len(data) // ENTRY.size
        # Kafka reads the version as one signed byte: 0x01-0x7F make it throw. The first byte
        # of every entry, searched at once (no entry is unpacked for it).
        bad = _POSITIVE.search(data[:count * ENTRY.size:ENTRY.size])
        if bad is not None:
            pos = bad.start() * ENTRY.size
            raise FileFormatError("%s: unexpected aborted transaction version %d at position %d"
                                  % (path, data[pos], pos))
        self.entries = LazyEntries(count, lambda i: _entry(data, i * ENTRY.size),
                                   "transaction index entry")

    @classmethod
    def empty(cls, path: str, base_offset: Optional[int] = None) -> "TransactionIndex":
        """The index of a segment without a .txnindex file (no aborted transaction)."""
        txn = object.__new__(cls)
        txn.path = path
        txn.base_offset = base_offset_from_name(path) if base_offset is None else base_offset
        txn.file_size = txn.trailing = 0
        txn.entries = []
        return txn

    def sanity_problems(self) -> List[str]:
        """The broker's start-up check: no entry may end below the segment's base offset."""
        if self.base_offset is None:
            return []
        return ["corrupt transaction index: entry %d ends at offset %d, below the base offset %d"
                % (i, e.last_offset, self.base_offset)
                for i, e in enumerate(self.entries) if e.last_offset < self.base_offset]
