"""The active segment as the append path writes it: LogSegment's append side.

Its files opened for appending and the state a broker keeps in memory for it (LogSegment's
maxTimestampAndOffsetSoFar, bytesSinceLastIndexEntry, rollingBasedTimestamp); LogSegment.append
(the batch to the .log, then an offset index entry every index.interval.bytes and a time index
entry when the max timestamp has grown, TimeIndex.maybeAppend); LogSegment.shouldRoll; the
segment made ready to append to, as a broker's LogLoader leaves the last one (its batches
scanned, its indexes trimmed to their entries or rebuilt when missing), or created empty at a
roll. ``append.PartitionWriter`` (UnifiedLog's side: the epochs, the producer state, the rolls,
the locks) writes through it.

Every write goes straight to the kernel (no user-space buffer), the batch to the .log first,
then its index entries; a run of gathered batches is written a file at a time in the same
order (``gather``, then ``write_pending``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import IO, BinaryIO, List, Optional, Set, Tuple, Type, Union

from ..errors import KafkalogError
from ..format.records import Batch
from .files import open_for_append
from .index import OffsetIndex, TimeIndex
from .indexbuild import DEFAULT_INDEX_INTERVAL, IndexBuilder, fsync_dir, write_atomically, write_new
from ..format.validity import MAX_RELATIVE_OFFSET
from .segment import Segment

DEFAULT_SEGMENT_BYTES = 1024 ** 3           # segment.bytes
DEFAULT_SEGMENT_INDEX_BYTES = 10 * 1024 ** 2  # segment.index.bytes


class AppendError(KafkalogError):
    """The partition cannot be written as it is (a damaged active segment, another writer):
    exit code 2."""


@dataclass(frozen=True)
class RollPolicy:
    """When the active segment rolls (the topic's segment.bytes, segment.ms,
    segment.index.bytes) and how often the append path adds an index entry
    (index.interval.bytes)."""

    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    segment_ms: Optional[int] = None
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES
    index_interval: int = DEFAULT_INDEX_INTERVAL

    @property
    def max_index_entries(self) -> int:
        return self.segment_index_bytes // OffsetIndex.entry.size

    @property
    def max_time_entries(self) -> int:
        # LogSegment.shouldRoll: the time index rolls one entry early, keeping a slot for the
        # entry written when the segment is sealed
        return self.segment_index_bytes // TimeIndex.entry.size - 1


class ActiveSegment:
    """The open active segment: its files and the in-memory state a broker keeps for it
    (LogSegment's maxTimestampAndOffsetSoFar, bytesSinceLastIndexEntry, rollingBasedTimestamp)."""

    def __init__(self, directory: str, base: int) -> None:
        self.segment = Segment(directory, base)
        self.base = base
        self.size = 0
        self.first_batch_ts: Optional[int] = None  # max timestamp of the first batch (segment.ms)
        self.max_ts = -1                 # max timestamp so far, and the last offset of its batch
        self.max_ts_offset = -1
        self.index_entries = 0
        self.time_entries = 0
        self.last_time_ts = -1
        self.bytes_since_index = 0       # since the last index entry (see _check_indexes)
        self.log: Optional[BinaryIO] = None
        self.index: Optional[BinaryIO] = None
        self.timeindex: Optional[BinaryIO] = None
        self.txnindex: Optional[BinaryIO] = None  # opened at the first aborted transaction
        # what ``gather`` took for ``write_pending``: batches, offset and time index entries
        self.pending: List[bytes] = []
        self.pending_index: List[bytes] = []
        self.pending_time: List[bytes] = []

    @classmethod
    def load(cls, directory: str, base: int, index_interval: int, max_message_size: int
             ) -> Tuple["ActiveSegment", int, Optional[Tuple[int, int]]]:
        """Open the last segment of ``directory`` to append to, with the state a broker's
        LogLoader rebuilds for it: (the segment, the next offset, (epoch, base offset) of its
        last v2 batch that carries a partition leader epoch or None); AppendError when it is
        not whole (recover first)."""
        active = cls(directory, base)
        builder = IndexBuilder(base, index_interval)
        starts, next_offset, last_epoch = active._scan(builder, max_message_size)
        # A missing index is rebuilt as the broker's recovery would (without the final time
        # entry, which belongs to the roll); one that points past the log is left to recover.
        active.index_entries = _open_index(active.index_path, OffsetIndex, base,
                                           builder.offset_index_bytes())
        active.time_entries = _open_index(active.time_path, TimeIndex, base,
                                          builder.time_index_bytes())
        active._check_indexes(starts, next_offset)
        active.open_files()
        return active, next_offset, last_epoch

    @classmethod
    def create(cls, directory: str, base: int) -> "ActiveSegment":
        """A new empty segment at ``base`` (UnifiedLog.roll's new segment), opened."""
        active = cls(directory, base)
        # The indexes first, the .log last: a crash leaves no segment without its indexes.
        for path in (active.index_path, active.time_path, active.log_path):
            _create_empty(path)
        fsync_dir(directory)
        active.open_files()
        return active

    def read(self, max_message_size: int) -> int:
        """Read the segment's batches into this state, as ``load`` does, writing no file (a
        roll's plan): the next offset. AppendError when the segment is not whole."""
        return self._scan(IndexBuilder(self.base, DEFAULT_INDEX_INTERVAL), max_message_size)[1]

    def _scan(self, builder: IndexBuilder, max_message_size: int
              ) -> Tuple[Set[int], int, Optional[Tuple[int, int]]]:
        """Read the segment's batches into this state and ``builder``: (the positions batches
        start at, the next offset, the epoch and base offset of the last batch with one)."""
        next_offset = self.base
        starts: Set[int] = set()
        last_epoch = None
        with self.segment.open(max_message_size) as log:
            for item in log.entries():
                batch = _require_whole(item, self.log_path)
                self.note_batch(batch.max_timestamp, batch.last_offset)
                builder.add(batch.position, batch.size, batch.last_offset, batch.max_timestamp)
                starts.add(batch.position)
                next_offset = batch.last_offset + 1
                if batch.magic >= 2 and batch.partition_leader_epoch >= 0:
                    last_epoch = (batch.partition_leader_epoch, batch.base_offset)
            self.size = log.size
        return starts, next_offset, last_epoch

    def _check_indexes(self, starts: Set[int], next_offset: int) -> None:
        index = self.segment.offset_index()
        tindex = self.segment.time_index()
        if ((index.count and (index.entries[-1][1] not in starts
                              or index.entries[-1][0] >= next_offset))
                or (tindex.count and tindex.entries[-1][1] >= next_offset)):
            raise AppendError("%s: its indexes point past its log (an interrupted write): run "
                              "`kafkalog recover` first" % self.log_path)
        if tindex.count:
            self.last_time_ts = tindex.entries[-1][0]
        # The bytes since the last offset index entry go on from the file, as LogSegment.recover
        # counts them (an entry once index.interval.bytes have passed since the last one, the
        # first counted from position 0). A broker restarts the count at 0 after a restart
        # (LogSegment.bytesSinceLastIndexEntry lives in memory): going on instead makes the
        # index the same whether the input came in one run or in several, or in a run killed
        # part-way and then recovered (which rebuilds it with recover's count), so that such
        # runs end in the same files as one uninterrupted run. Either index is valid.
        self.bytes_since_index = self.size - (index.entries[-1][1] if index.count else 0)

    @property
    def log_path(self) -> str:
        return self.segment.log_path

    @property
    def index_path(self) -> str:
        return self.segment.index_path

    @property
    def time_path(self) -> str:
        return self.segment.time_index_path

    def open_files(self) -> None:
        # unbuffered: a write is in the kernel when it returns (see the module's docstring)
        # never through a symlink (files.open_for_append refuses one)
        self.log = os.fdopen(open_for_append(self.log_path), "ab", buffering=0)
        self.index = os.fdopen(open_for_append(self.index_path), "ab", buffering=0)
        self.timeindex = os.fdopen(open_for_append(self.time_path), "ab", buffering=0)

    def files(self) -> Tuple[Optional[BinaryIO], ...]:
        return (self.log, self.index, self.timeindex, self.txnindex)

    def should_roll(self, policy: RollPolicy, batch_size: int, batch_max_ts: int,
                    batch_last_offset: int) -> bool:
        """LogSegment.shouldRoll, for a batch about to be appended: the segment would outgrow
        segment.bytes, its records would span more than segment.ms, an index is full, or the
        batch's offsets would not fit the segment's 32-bit relative offsets."""
        if self.size == 0:
            return False  # an empty segment never rolls
        if self.size > policy.segment_bytes - batch_size:
            return True
        if (policy.segment_ms is not None and self.first_batch_ts is not None
                and self.first_batch_ts >= 0
                and batch_max_ts - self.first_batch_ts > policy.segment_ms):
            return True
        if (self.index_entries >= policy.max_index_entries
                or self.time_entries >= policy.max_time_entries):
            return True
        return batch_last_offset - self.base > MAX_RELATIVE_OFFSET

    def append(self, data: bytes, last_offset: int, max_timestamp: int,
               index_interval: int) -> None:
        """LogSegment.append of one encoded batch ending at ``last_offset``: the batch to the
        .log, then an offset index entry once ``index_interval`` bytes have passed since the
        last one, with a time index entry when the max timestamp has grown."""
        position = self.size
        _write(self.log, data)
        self.note_batch(max_timestamp, last_offset)
        if self.bytes_since_index > index_interval:
            _write(self.index, OffsetIndex.entry.pack(last_offset - self.base, position))
            self.index_entries += 1
            self.write_time_entry()
            self.bytes_since_index = 0
        self.bytes_since_index += len(data)
        self.size += len(data)

    def gather(self, data: bytes, last_offset: int, max_timestamp: int,
               index_interval: int) -> None:
        """``append`` with the batch and its index entries kept in ``pending`` for
        ``write_pending`` instead of written (the segment's state moves on at once)."""
        position = self.size
        self.pending.append(data)
        self.note_batch(max_timestamp, last_offset)
        if self.bytes_since_index > index_interval:
            self.pending_index.append(OffsetIndex.entry.pack(last_offset - self.base, position))
            self.index_entries += 1
            entry = self.time_entry()
            if entry is not None:
                self.pending_time.append(entry)
            self.bytes_since_index = 0
        self.bytes_since_index += len(data)
        self.size += len(data)

    def write_pending(self) -> None:
        """Write what ``gather`` kept: the batches to the .log, then their offset and time
        index entries (LogSegment.append's order). What is kept is dropped first, written or
        not."""
        out, index, times = self.pending, self.pending_index, self.pending_time
        self.drop_pending()
        _write_parts(self.log, out)
        if index:
            _write_parts(self.index, index)
        if times:
            _write_parts(self.timeindex, times)

    def drop_pending(self) -> None:
        self.pending, self.pending_index, self.pending_time = [], [], []

    def time_entry(self) -> Optional[bytes]:
        """TimeIndex.maybeAppend: an entry only when the max timestamp has grown (None
        otherwise), counted as written."""
        if self.max_ts > self.last_time_ts:
            self.time_entries += 1
            self.last_time_ts = self.max_ts
            return TimeIndex.entry.pack(self.max_ts, self.max_ts_offset - self.base)
        return None

    def write_time_entry(self) -> None:
        """TimeIndex.maybeAppend: an entry only when the max timestamp has grown."""
        entry = self.time_entry()
        if entry is not None:
            _write(self.timeindex, entry)

    def append_aborted(self, entry: bytes) -> None:
        """Append one AbortedTxn entry to the segment's .txnindex, created at the first
        (TransactionIndex is neither pre-allocated nor memory-mapped)."""
        if self.txnindex is None:
            self.txnindex = os.fdopen(open_for_append(self.segment.txn_index_path), "ab",
                                      buffering=0)
        _write(self.txnindex, entry)

    def note_batch(self, max_timestamp: int, last_offset: int) -> None:
        """A batch now in the segment: the timestamps LogSegment tracks for rolling and for the
        time index."""
        if self.first_batch_ts is None:
            self.first_batch_ts = max_timestamp
        if max_timestamp > self.max_ts:
            self.max_ts, self.max_ts_offset = max_timestamp, last_offset

    def flush(self) -> None:
        for f in self.files():
            if f is not None and not f.closed:
                os.fsync(f.fileno())

    def close(self) -> None:
        for f in self.files():
            if f is not None:
                f.close()


def _write_parts(f: Optional[BinaryIO], parts: List[bytes]) -> None:
    """Write ``parts`` one after another to the unbuffered file ``f`` (writev, at most
    _IOV_MAX parts a call; a short write is completed)."""
    assert f is not None, "the active segment's files are open while it is written"
    for i in range(0, len(parts), _IOV_MAX):
        group = parts[i:i + _IOV_MAX]
        n = os.writev(f.fileno(), group)
        if n < sum(map(len, group)):
            _write(f, b"".join(group)[n:])


_IOV_MAX = 512


def _write(f: Optional[BinaryIO], data: bytes) -> None:
    """Write all of ``data`` to the unbuffered file ``f`` (a raw write may take fewer bytes)."""
    assert f is not None, "the active segment's files are open while it is written"
    view = memoryview(data)
    while view:
        view = view[os.write(f.fileno(), view):]


def _open_index(path: str, cls: Union[Type[OffsetIndex], Type[TimeIndex]], base: int,
                rebuilt: bytes) -> int:
    """Entries of an index we are about to append to: a missing one is written from
    ``rebuilt``; a pre-allocated zero tail (a broker leaves the active segment's index so)
    is cut first so that appends follow the last real entry."""
    if not os.path.lexists(path):
        write_new(path, rebuilt)  # never over a file that appeared meanwhile
        return len(rebuilt) // cls.entry.size
    index = cls(path, base)
    if index.zero_tail or index.file_size % index.entry.size:
        keep = index.count * index.entry.size
        if not index.zeros_after_entries():
            # not a pre-allocated tail: entries after a slot that ends them. Trimming would
            # throw them away unseen; recover checks the index and keeps what it replaces.
            raise AppendError("%s: bytes after its last entry are not zeros: run `kafkalog "
                              "recover` first" % path)
        # what goes: zeros, and a torn last entry shorter than one (a crash mid-write)
        write_atomically(path, index.data[:keep])
    return index.count


def _require_whole(item: object, path: str) -> Batch:
    """``item`` (an entry of the active segment) if it is a batch whose CRC holds, else
    AppendError: a broker would not append after damage, and neither do we."""
    if not isinstance(item, Batch) or not item.is_valid:
        raise AppendError("%s: damaged at position %d (%s): run `kafkalog recover` first"
                          % (path, getattr(item, "position"),
                             getattr(item, "reason", "CRC mismatch")))
    return item


def _create_empty(path: str) -> None:
    """Create ``path`` empty and flush it, never truncating a file that exists: an empty file a
    crashed roll left is taken as it is; anything else is not ours (AppendError)."""
    f: IO[bytes]
    try:
        f = open(path, "xb")
    except FileExistsError:
        if not (os.path.isfile(path) and not os.path.islink(path)
                and os.path.getsize(path) == 0):
            raise AppendError("%s already exists" % path) from None
        f = open(path, "rb")
    with f:
        os.fsync(f.fileno())
