"""A partition's leader epochs (LeaderEpochFileCache) and its ``leader-epoch-checkpoint``
(LeaderEpochCheckpointFile): which leader epoch each offset was written in.

Each entry (epoch, start offset) says the epoch's first offset. The cache keeps them ordered by
epoch with start offsets that never go down: a new entry removes the entries it contradicts.
"""

from __future__ import annotations

import os
import re
from typing import List, Optional, Tuple

from ..errors import UsageError
from . import names
from .checkpoints import (MAX_CHECKPOINT_BYTES, checkpoint_bytes, java_number,
                          read_leader_epochs)
from .files import FileFormatError, read_sized
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


# -- the strict reader (verify-index) --------------------------------------------------------

# Integer.parseInt / Long.parseLong: an optional sign, then digits; nothing around them.
_JAVA_INT = re.compile(r"[+-]?[0-9]+\Z")
# java.util.regex's \s, which LeaderEpochCheckpointFile's formatter splits an entry on
_JAVA_SPACE = re.compile(r"[ \t\n\x0b\f\r]+")
# BufferedReader.readLine's line terminators
_JAVA_LINES = re.compile(r"\r\n|\r|\n")
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)


def _java_number(path: str, n: int, text: str, bounds: Tuple[int, int], what: str) -> int:
    if not _JAVA_INT.match(text):
        raise FileFormatError("%s: line %d: %s %r is not a number" % (path, n, what, text[:40]))
    value = java_number(text, bounds)
    if value is None:
        raise FileFormatError("%s: line %d: %s %s does not fit in %d bits"
                              % (path, n, what, text[:40] + ("..." if len(text) > 40 else ""),
                                 32 if bounds == _INT32 else 64))
    return value


def read_checkpoint_strict(path: str) -> List[EpochEntry]:
    """The (epoch, start offset) entries of the leader-epoch-checkpoint at ``path``, read as
    the broker reads it (CheckpointFile.CheckpointReadBuffer with LeaderEpochCheckpointFile's
    formatter: a version line that is exactly 0, a count, then ``epoch startOffset`` lines
    split on whitespace, as many as the count says; an empty file, or one holding only the
    version, has no entries) and held to what LeaderEpochFileCache keeps: epochs and start
    offsets not negative (``assign`` refuses them) and both strictly increasing from line to
    line (a file the cache wrote; ``assign`` would silently drop the entries a later line
    contradicts, so such a file was not written by a broker).

    Raises FileFormatError naming the file and the line, OSError when it cannot be read.
    The lenient reader the commands use to update the file is ``LeaderEpochCache.read``."""
    raw = read_sized(path, MAX_CHECKPOINT_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FileFormatError("%s: line %d: not UTF-8 text (byte %d)"
                              % (path, raw.count(b"\n", 0, e.start) + 1, e.start)) from None
    lines = _JAVA_LINES.split(text)
    if lines and lines[-1] == "":
        lines.pop()  # the last line's terminator
    if not lines:
        return []
    version = _java_number(path, 1, lines[0], _INT32, "version")
    if version != 0:
        raise FileFormatError("%s: line 1: unrecognised version %d (expected 0)"
                              % (path, version))
    if len(lines) < 2:
        return []
    count = _java_number(path, 2, lines[1], _INT32, "entry count")
    entries: List[EpochEntry] = []
    for n, line in enumerate(lines[2:], start=3):
        fields = _JAVA_SPACE.split(line)
        while len(fields) > 1 and fields[-1] == "":
            fields.pop()  # String.split drops trailing empty strings
        if len(fields) != 2 or fields[0] == "":
            raise FileFormatError("%s: line %d: expected 'epoch startOffset', found %r"
                                  % (path, n, line))
        epoch = _java_number(path, n, fields[0], _INT32, "epoch")
        start = _java_number(path, n, fields[1], _INT64, "start offset")
        if epoch < 0 or start < 0:
            raise FileFormatError("%s: line %d: negative epoch or start offset (%d %d): the "
                                  "broker refuses it (LeaderEpochFileCache.assign)"
                                  % (path, n, epoch, start))
        if entries and (epoch <= entries[-1][0] or start <= entries[-1][1]):
            raise FileFormatError(
                "%s: line %d: epoch %d at offset %d does not follow epoch %d at offset %d: a "
                "cache's epochs and start offsets both increase strictly (LeaderEpochFileCache."
                "assign drops the entries a new one contradicts)"
                % (path, n, epoch, start, entries[-1][0], entries[-1][1]))
        entries.append((epoch, start))
    if len(entries) != count:
        raise FileFormatError("%s: line 2: the count says %d entries, the file holds %d"
                              % (path, count, len(entries)))
    return entries
