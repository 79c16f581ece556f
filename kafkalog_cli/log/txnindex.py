"""The transaction index (.txnindex): the aborted transactions of a segment (AbortedTxn)."""

import struct

from .files import FileFormatError, base_offset_from_name, read_sized

ENTRY = struct.Struct(">hqqqq")  # version, producerId, firstOffset, lastOffset, lastStableOffset


class AbortedTxn:
    __slots__ = ("version", "producer_id", "first_offset", "last_offset", "last_stable_offset")

    def __init__(self, version, producer_id, first_offset, last_offset, last_stable_offset):
        self.version = version
        self.producer_id = producer_id
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.last_stable_offset = last_stable_offset


class TransactionIndex:
    """Every whole 34-byte entry of the file; a trailing partial entry is ignored, as in Kafka."""

    def __init__(self, path, base_offset=None):
        self.path = path
        self.base_offset = base_offset_from_name(path) if base_offset is None else base_offset
        data = read_sized(path)
        self.file_size = len(data)
        self.trailing = len(data) % ENTRY.size
        self.entries = []
        for pos in range(0, len(data) - ENTRY.size + 1, ENTRY.size):
            # Kafka reads the version as one signed byte: 0x01-0x7F make it throw.
            version = struct.unpack_from(">b", data, pos)[0]
            if version > 0:
                raise FileFormatError("%s: unexpected aborted transaction version %d at position %d"
                                      % (path, version, pos))
            _, pid, first, last, lso = ENTRY.unpack_from(data, pos)
            self.entries.append(AbortedTxn(version, pid, first, last, lso))

    @classmethod
    def empty(cls, path, base_offset=None):
        """The index of a segment without a .txnindex file (no aborted transaction)."""
        txn = object.__new__(cls)
        txn.path = path
        txn.base_offset = base_offset_from_name(path) if base_offset is None else base_offset
        txn.file_size = txn.trailing = 0
        txn.entries = []
        return txn

    def sanity_problems(self):
        """The broker's start-up check: no entry may end below the segment's base offset."""
        if self.base_offset is None:
            return []
        return ["corrupt transaction index: entry %d ends at offset %d, below the base offset %d"
                % (i, e.last_offset, self.base_offset)
                for i, e in enumerate(self.entries) if e.last_offset < self.base_offset]
