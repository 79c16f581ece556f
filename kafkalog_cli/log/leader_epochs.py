"""A partition's leader epochs (LeaderEpochFileCache) and its ``leader-epoch-checkpoint``
(LeaderEpochCheckpointFile): which leader epoch each offset was written in.

Each entry (epoch, start offset) says the epoch's first offset. The cache keeps them ordered by
epoch with start offsets that never go down: a new entry removes the entries it contradicts.
"""

from __future__ import annotations

import os
from typing import List, Optional, Tuple

from ..errors import UsageError
from . import names
from .checkpoints import checkpoint_bytes, read_leader_epochs
from .indexbuild import write_atomically

EpochEntry = Tuple[int, int]  # (epoch, start offset)


class LeaderEpochCache:
    """The (epoch, start offset) entries of a partition, ascending by epoch, maintained with
    LeaderEpochFileCache's rules."""

    def __init__(self, entries: Optional[List[EpochEntry]] = None) -> None:
        self.entries: List[EpochEntry] = []
        for epoch, start in entries or ():
            self.assign(epoch, start)

    @classmethod
    def read(cls, directory: str) -> "LeaderEpochCache":
        """The cache of the partition directory ``directory``: its leader-epoch-checkpoint's
        entries assigned in the file's order, as the broker's cache is built from the file; an
        empty cache when there is no file. Raises FileFormatError for a malformed file."""
        path = os.path.join(directory, names.LEADER_EPOCH_CHECKPOINT)
        if not os.path.exists(path):
            return cls()
        return cls(read_leader_epochs(path))

    def latest_entry(self) -> Optional[EpochEntry]:
        return self.entries[-1] if self.entries else None

    @property
    def latest_epoch(self) -> Optional[int]:
        return self.entries[-1][0] if self.entries else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` (LeaderEpochFileCache.assign).
        Nothing changes when the latest entry has the same epoch and a start offset not above
        it. Otherwise the entries from the end whose epoch is >= ``epoch`` or whose start
        offset is >= ``start_offset`` are removed (maybeTruncateNonMonotonicEntries) and the
        entry is added. Returns whether the cache changed (the broker then writes the file).
        Raises UsageError for a negative epoch or offset, as the broker refuses them."""
        if epoch < 0 or start_offset < 0:
            raise UsageError("invalid partition leader epoch entry (epoch %d, start offset %d)"
                             % (epoch, start_offset))
        latest = self.latest_entry()
        if latest is not None and latest[0] == epoch and start_offset >= latest[1]:
            return False
        while self.entries and (self.entries[-1][0] >= epoch
                                or self.entries[-1][1] >= start_offset):
            self.entries.pop()
        self.entries.append((epoch, start_offset))
        return True

    def observe(self, partition_leader_epoch: int, base_offset: int) -> bool:
        """A v2 batch written at ``base_offset`` with ``partition_leader_epoch``: assigned when
        the epoch is >= 0 and above the latest one (LogSegment.recover, UnifiedLog.append).
        Returns whether the cache changed."""
        latest = self.latest_epoch
        if partition_leader_epoch < 0 or (latest is not None and partition_leader_epoch <= latest):
            return False
        return self.assign(partition_leader_epoch, base_offset)

    def truncate_from_end(self, end_offset: int) -> List[EpochEntry]:
        """Remove the entries whose start offset is >= ``end_offset`` (the log was truncated
        there: LeaderEpochFileCache.truncateFromEnd). Returns the removed entries."""
        removed: List[EpochEntry] = []
        if end_offset < 0:
            return removed
        while self.entries and self.entries[-1][1] >= end_offset:
            removed.append(self.entries.pop())
        return removed

    def truncate_from_start(self, start_offset: int) -> List[EpochEntry]:
        """The log now starts at ``start_offset`` (LeaderEpochFileCache.truncateFromStart):
        the entries whose start offset is <= it are removed and the last of them is put back
        with ``start_offset`` as its start. Returns the removed entries."""
        n = 0
        while n < len(self.entries) and self.entries[n][1] <= start_offset:
            n += 1
        removed = self.entries[:n]
        if removed:
            self.entries[:n] = [(removed[-1][0], start_offset)]
        return removed

    def epoch_for_offset(self, offset: int) -> Optional[int]:
        """The epoch ``offset`` was written in (LeaderEpochFileCache.epochForOffset): the epoch
        of the last entry starting at or before it; None before the first entry."""
        found = None
        for epoch, start in self.entries:
            if start > offset:
                break
            found = epoch
        return found

    def checkpoint_bytes(self) -> bytes:
        """The leader-epoch-checkpoint of these entries as CheckpointFile writes it: the
        version, the count, then ``epoch startOffset`` lines, each ended by a newline."""
        return checkpoint_bytes(["%d %d" % e for e in self.entries])

    def write(self, directory: str) -> str:
        """Write the partition's leader-epoch-checkpoint in ``directory`` through a flushed
        temporary file renamed over the old one (CheckpointFile.write). Returns its path."""
        path = os.path.join(directory, names.LEADER_EPOCH_CHECKPOINT)
        write_atomically(path, self.checkpoint_bytes())
        return path
