"""Producer state snapshots (<offset>.snapshot): version 1, CRC-32C, 46-byte entries."""

from __future__ import annotations

import struct
from typing import Union

from ..format.crc import crc32c

from .entries import LazyEntries
from .files import FileFormatError, read_sized

HEADER = struct.Struct(">hIi")  # version, crc, count
# producerId, epoch, lastSequence, lastOffset, offsetDelta, timestamp, coordinatorEpoch,
# currentTxnFirstOffset
ENTRY = struct.Struct(">qhiqiqiq")


class ProducerEntry:
    __slots__ = ("producer_id", "epoch", "last_sequence", "last_offset", "offset_delta",
                 "timestamp", "coordinator_epoch", "current_txn_first_offset")

    def __init__(self, producer_id: int, epoch: int, last_sequence: int, last_offset: int,
                 offset_delta: int, timestamp: int, coordinator_epoch: int,
                 current_txn_first_offset: int) -> None:
        (self.producer_id, self.epoch, self.last_sequence, self.last_offset, self.offset_delta,
         self.timestamp, self.coordinator_epoch, self.current_txn_first_offset) = (
            producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp,
            coordinator_epoch, current_txn_first_offset)

    @property
    def has_batch_metadata(self) -> bool:
        return self.last_offset >= 0

    @property
    def first_sequence(self) -> int:
        """lastSequence - offsetDelta, continuing from Integer.MAX_VALUE below 0
        (DefaultRecordBatch.decrementSequence)."""
        seq = self.last_sequence - self.offset_delta
        return seq + 0x80000000 if self.last_sequence < self.offset_delta else seq


def read_snapshot(path: str) -> LazyEntries[ProducerEntry]:
    """The entries of a producer snapshot, checked as ProducerStateManager.readSnapshot does."""
    return parse_snapshot(read_sized(path))


def parse_snapshot(data: Union[bytes, bytearray, memoryview]) -> LazyEntries[ProducerEntry]:
    """The entries of a producer snapshot's bytes (see read_snapshot)."""
    if len(data) < 2:
        raise FileFormatError("Snapshot failed schema validation: %d bytes, too short for a version"
                              % len(data))
    (version,) = struct.unpack_from(">h", data, 0)
    if version != 1:
        raise FileFormatError("Snapshot contained an unknown file version %d" % version)
    if len(data) < HEADER.size:
        raise FileFormatError("Snapshot failed schema validation: %d bytes, too short for a header"
                              % len(data))
    _, stored, count = HEADER.unpack_from(data, 0)
    if count < 0 or HEADER.size + count * ENTRY.size > len(data):
        raise FileFormatError("Snapshot failed schema validation: %d entries do not fit in %d bytes"
                              % (count, len(data)))
    computed = crc32c(memoryview(data)[6:])
    if stored != computed:
        raise FileFormatError("Snapshot is corrupt (CRC is no longer valid). Stored crc: %d. "
                              "Computed crc: %d" % (stored, computed))
    # unpacked as they are used: a snapshot may list millions of producers
    return LazyEntries(count, lambda i: ProducerEntry(
        *ENTRY.unpack_from(data, HEADER.size + i * ENTRY.size)), "snapshot entry")
