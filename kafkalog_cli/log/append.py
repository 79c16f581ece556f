"""Writing to a partition as a broker does: append batches to the active segment and keep its
indexes as LogSegment.append does, roll where LogSegment.shouldRoll says so, and seal the
active segment and open the next one as UnifiedLog.roll does (with the producer snapshot at the
new base offset). Around the segments, as UnifiedLog.append keeps them: the leader epoch cache,
the producer state and the transaction index.

The active segment's .index and .timeindex are kept trimmed to their entries and appended to.
Every write goes straight to the kernel (no user-space buffer), in LogSegment.append's order:
the batch to the .log first, then its index entries. A broker's memory-mapped index holds its
entries in the page cache the moment they are written; ours do too, so after a kill at any
instant the index holds the entries of the batches written, or fewer, and never an entry
past the log. `kafkalog recover` rebuilds what a kill left short. Plain batches (no producer)
may be gathered (``append_plain``) and written a run at a time, in the same order: the run's
batches to the .log, then their index entries (``write_out``, called before any other write).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from dataclasses import dataclass
from typing import IO, BinaryIO, Iterator, List, Optional, Set, Tuple, Type, Union

from ..errors import KafkalogError, UsageError
from ..format.records import V2_HEADER, Batch, read_batch
from . import names
from .files import open_for_append, open_lock_file
from .index import OffsetIndex, TimeIndex
from .indexbuild import DEFAULT_INDEX_INTERVAL, IndexBuilder, fsync_dir, write_atomically, write_new
from .leader_epochs import LeaderEpochCache
from .logdir import CleanShutdownMarker
from .partition import Partition
from .producer_state import EndMarker, ProducerState, load_state, snapshot_path, write_snapshot
from .segment import DEFAULT_MAX_MESSAGE_SIZE, MAX_RELATIVE_OFFSET, Segment
from .txnindex import ENTRY as TXN_ENTRY

DEFAULT_SEGMENT_BYTES = 1024 ** 3           # segment.bytes
DEFAULT_SEGMENT_INDEX_BYTES = 10 * 1024 ** 2  # segment.index.bytes
PARTITION_LOCK = names.APPEND_LOCK


class WriteFailed(KafkalogError):
    """A write to the partition failed (a full disk: ENOSPC, EDQUOT, EFBIG; or EIO): the
    active segment's files were cut back to the last whole batch and flushed. The message
    says where the partition now ends and what of this run is on disk: exit code 2."""

    def __init__(self, message: str, log_end_offset: int) -> None:
        super().__init__(message)
        self.log_end_offset = log_end_offset


class AppendError(KafkalogError):
    """The partition cannot be written as it is (a damaged active segment, another writer):
    exit code 2."""


def now_ms() -> int:
    return int(time.time() * 1000)


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


@dataclass(frozen=True)
class RollResult:
    """What a roll asked for by hand did: ``sealed`` is the segment it sealed, or None when it
    did not roll (``reason`` says why); ``active`` is the active segment afterwards."""

    active: Segment
    sealed: Optional[Segment] = None
    reason: Optional[str] = None

    @property
    def rolled(self) -> bool:
        return self.sealed is not None


class _Active:
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


class PartitionWriter:
    """Appends encoded batches to a partition directory. Use as a context manager; the caller
    holds the log directory's lock (Partition.lock()) around it."""

    def __init__(self, directory: str, policy: Optional[RollPolicy] = None,
                 max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                 lock_partition: bool = True) -> None:
        self.directory = directory
        self.lock_partition = lock_partition
        self.policy = policy or RollPolicy()
        self.max_message_size = max_message_size
        self._lock_fd: Optional[int] = None
        self._lock_created = False
        self._active: Optional[_Active] = None
        self.next_offset = 0  # the log end offset, once open
        self._start_offset = 0  # the log end offset when opened
        self._lifted = False  # this writer lifted the clean-shutdown marker
        self.rolled: List[int] = []  # base offsets of the segments this writer created
        self._producers: Optional[ProducerState] = None  # loaded when first needed
        self._epochs: Optional[LeaderEpochCache] = None
        # (epoch, base offset) of the log's last v2 batch with an epoch: the active segment's
        # from its scan (None: it holds none, the earlier segments are read when needed)
        self._active_epoch: Optional[Tuple[int, int]] = None
        # lifted while the writer is open (a kill leaves none: the next load recovers)
        self._marker = CleanShutdownMarker(Partition(directory).log_dir)
        # what append_plain gathered for write_out: batches, offset and time index entries
        self._out: List[bytes] = []
        self._out_index: List[bytes] = []
        self._out_time: List[bytes] = []
        # the log end offset of what is written to the files (``next_offset`` runs ahead of it
        # while append_plain gathers)
        self.written_offset = 0

    @property
    def active(self) -> _Active:
        assert self._active is not None, "a PartitionWriter is used inside its with block"
        return self._active

    # -- opening -----------------------------------------------------------------------------
    def __enter__(self) -> "PartitionWriter":
        created = not os.path.isdir(self.directory)
        os.makedirs(self.directory, exist_ok=True)
        if created:
            fsync_dir(os.path.dirname(os.path.abspath(self.directory)))
        if self.lock_partition:
            self._lock_partition()
        try:
            self._lifted = self._marker.lift()
            last = Partition(self.directory).active_segment()
            base = None if last is None else last.base_offset
            if base is None:
                self._create_segment(0)
            else:
                self._load_active(base)
            self._start_offset = self.written_offset = self.next_offset
        except BaseException:
            self._unlock()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._active is not None:
                self.write_out()
                self._active.flush()
                self._active.close()
            if exc[0] is None:
                if self._lifted:
                    self._snapshot_for_clean_load()
                self._marker.restore()   # everything written is flushed
        finally:
            self._unlock()

    def _snapshot_for_clean_load(self) -> None:
        """Before the clean-shutdown marker goes back: a producer snapshot at the log end
        offset when the run appended to a partition that has none.

        A load after a clean shutdown that finds no snapshot at all skips the producer state
        rebuild (UnifiedLog.rebuildProducerState: "latestSnapshotOffset().isEmpty() &&
        reloadFromCleanShutdown" takes empty snapshots instead of reading the log): the
        producers this run wrote would be forgotten (a client's resend taken as new, an open
        transaction not held). A broker's own clean shutdown never leaves a written partition
        so: UnifiedLog.close takes a snapshot at the log end (ProducerStateManager.takeSnapshot),
        and this is that snapshot. With a snapshot there, the load reads it and replays the log
        after it, the batches appended here included."""
        if self.next_offset <= self._start_offset or Partition(self.directory).snapshot_paths():
            return
        write_snapshot(self.directory, self.next_offset, self.producers.snapshot_bytes(),
                       replace=False)

    def _lock_partition(self) -> None:
        path = os.path.join(self.directory, PARTITION_LOCK)
        self._lock_created = not os.path.exists(path)
        fd = open_lock_file(path)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EACCES, errno.EAGAIN):
                raise AppendError("%s: another kafkalog process is writing this partition"
                                  % self.directory) from None
            raise
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            if self._lock_created:
                # Safe to remove: every kafkalog writer also holds the log directory's .lock,
                # so nobody else can be waiting on this file.
                os.unlink(os.path.join(self.directory, PARTITION_LOCK))
            os.close(self._lock_fd)
            self._lock_fd = None

    def _load_active(self, base: int) -> None:
        """Open the last segment to append to, with the state a broker's LogLoader rebuilds
        for it; AppendError when it is not whole (recover first)."""
        active = _Active(self.directory, base)
        builder = IndexBuilder(base, self.policy.index_interval)
        starts, next_offset = self._scan_active(active, builder)
        # A missing index is rebuilt as the broker's recovery would (without the final time
        # entry, which belongs to the roll); one that points past the log is left to recover.
        active.index_entries = self._open_index(active.index_path, OffsetIndex, base,
                                                builder.offset_index_bytes())
        active.time_entries = self._open_index(active.time_path, TimeIndex, base,
                                               builder.time_index_bytes())
        self._check_indexes(active, starts, next_offset)
        active.open_files()
        self._active = active
        self.next_offset = next_offset

    def _scan_active(self, active: _Active, builder: IndexBuilder) -> Tuple[Set[int], int]:
        """Read the active segment's batches into ``active`` and ``builder``: (the positions
        batches start at, the next offset)."""
        next_offset = active.base
        starts: Set[int] = set()
        with active.segment.open(self.max_message_size) as log:
            for item in log.entries():
                batch = _require_whole(item, active.log_path)
                active.note_batch(batch.max_timestamp, batch.last_offset)
                builder.add(batch.position, batch.size, batch.last_offset, batch.max_timestamp)
                starts.add(batch.position)
                next_offset = batch.last_offset + 1
                if batch.magic >= 2 and batch.partition_leader_epoch >= 0:
                    self._active_epoch = (batch.partition_leader_epoch, batch.base_offset)
            active.size = log.size
        return starts, next_offset

    @staticmethod
    def _check_indexes(active: _Active, starts: Set[int], next_offset: int) -> None:
        index = active.segment.offset_index()
        tindex = active.segment.time_index()
        if ((index.count and (index.entries[-1][1] not in starts
                              or index.entries[-1][0] >= next_offset))
                or (tindex.count and tindex.entries[-1][1] >= next_offset)):
            raise AppendError("%s: its indexes point past its log (an interrupted write): run "
                              "`kafkalog recover` first" % active.log_path)
        if tindex.count:
            active.last_time_ts = tindex.entries[-1][0]
        # The bytes since the last offset index entry go on from the file, as LogSegment.recover
        # counts them (an entry once index.interval.bytes have passed since the last one, the
        # first counted from position 0). A broker restarts the count at 0 after a restart
        # (LogSegment.bytesSinceLastIndexEntry lives in memory): going on instead makes the
        # index the same whether the input came in one run or in several, or in a run killed
        # part-way and then recovered (which rebuilds it with recover's count), so that such
        # runs end in the same files as one uninterrupted run. Either index is valid.
        active.bytes_since_index = active.size - (index.entries[-1][1] if index.count else 0)

    @staticmethod
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

    def _create_segment(self, base: int) -> None:
        active = _Active(self.directory, base)
        # The indexes first, the .log last: a crash leaves no segment without its indexes.
        for path in (active.index_path, active.time_path, active.log_path):
            _create_empty(path)
        fsync_dir(self.directory)
        active.open_files()
        self._active = active
        self.next_offset = self.written_offset = base

    # -- writing -----------------------------------------------------------------------------
    def should_roll(self, batch_size: int, batch_max_ts: int, batch_last_offset: int) -> bool:
        """LogSegment.shouldRoll, for a batch about to be appended: the segment would outgrow
        segment.bytes, its records would span more than segment.ms, an index is full, or the
        batch's offsets would not fit the segment's 32-bit relative offsets."""
        a, p = self.active, self.policy
        if a.size == 0:
            return False  # an empty segment never rolls
        if a.size > p.segment_bytes - batch_size:
            return True
        if (p.segment_ms is not None and a.first_batch_ts is not None and a.first_batch_ts >= 0
                and batch_max_ts - a.first_batch_ts > p.segment_ms):
            return True
        if a.index_entries >= p.max_index_entries or a.time_entries >= p.max_time_entries:
            return True
        return batch_last_offset - a.base > MAX_RELATIVE_OFFSET

    # -- the state kept beside the segments ---------------------------------------------------
    @property
    def producers(self) -> ProducerState:
        """The partition's producer state at the log end offset, as ProducerStateManager keeps
        it: loaded when first asked for, then kept up to date by ``append``."""
        if self._producers is None:
            self.write_out()  # the log as appended so far is read
            # ProducerStateManager's loading (UnifiedLog.rebuildProducerState): the newest
            # readable snapshot in range, then the log after it; no snapshot written or removed
            partition = Partition(self.directory)
            self._producers = load_state(partition.segments(), partition.snapshot_paths(),
                                         self.next_offset, now_ms(),
                                         max_message_size=self.max_message_size).state
        return self._producers

    @property
    def epochs(self) -> LeaderEpochCache:
        """The partition's leader epochs (its leader-epoch-checkpoint), read when first asked
        for."""
        if self._epochs is None:
            self._epochs = LeaderEpochCache.read(self.directory)
        return self._epochs

    def log_leader_epoch(self) -> Optional[Tuple[int, int]]:
        """(epoch, base offset) of the log's last v2 batch that carries a partition leader
        epoch, or None: the active segment's, from the scan that opened it; when it holds none,
        the segments before it, each read from its last offset index entry on (the tail, headers
        only), from its start when the tail holds no such batch."""
        if self._active_epoch is not None:
            return self._active_epoch
        active = self.active.base
        for segment in reversed(Partition(self.directory).segments()):
            if segment.base_offset is None or segment.base_offset >= active:
                continue
            found = _last_epoch(segment, self.max_message_size)
            if found is not None:
                return found
        return None

    def leader_epoch_for_append(self, requested: Optional[int] = None) -> int:
        """The partition leader epoch a new batch carries: ``requested``, or the higher of the
        cache's latest epoch and the epoch of the log's last v2 batch, else 0. UsageError for
        one below either: a leader's epoch only grows.

        The log counts as much as the cache. A broker that loads a partition without a
        leader-epoch-checkpoint starts with an empty cache (CheckpointFile creates the file
        empty) and fills it from the batches only for the segments it recovers (LogLoader's
        recoverLog: LogSegment.recover calls LeaderEpochFileCache.assign for each v2 batch of
        a higher epoch); after a clean shutdown it recovers none, so its cache may lag the
        epochs its batches carry. Its next leader epoch still comes from the controller, above
        every epoch the partition was written in (Partition.makeLeader, then UnifiedLog.
        maybeAssignEpochStartOffset): never below the log's last batch, whose epoch only grew
        along the log."""
        latest = self.epochs.latest_epoch
        in_log = self.log_leader_epoch()
        if requested is None:
            return max(0, latest if latest is not None else 0,
                       in_log[0] if in_log is not None else 0)
        if latest is not None and requested < latest:
            raise UsageError("leader epoch %d is below the latest epoch %d of %s"
                             % (requested, latest, os.path.join(
                                 self.directory, names.LEADER_EPOCH_CHECKPOINT)))
        if in_log is not None and requested < in_log[0]:
            raise UsageError("leader epoch %d is below epoch %d of the batch at offset %d in %s"
                             % (requested, in_log[0], in_log[1], self.directory))
        return requested

    # -- writing -----------------------------------------------------------------------------
    def append(self, data: bytes, last_offset: int, max_timestamp: int,
               marker: Optional[EndMarker] = None) -> None:
        """Append one encoded batch ending at ``last_offset``, as UnifiedLog.append does once the
        offsets are assigned: the leader epoch cache first (a newer epoch assigned,
        LeaderEpochFileCache.assign, the checkpoint written at once), a roll where the broker
        would, the batch and its index entries (LogSegment.append: one every
        index.interval.bytes), then the producer state
        and, for an ABORT marker ending a transaction, the .txnindex entry with the last stable
        offset (ProducerStateManager.lastStableOffset). ``marker``: a control batch's end
        transaction marker."""
        self.write_out()
        batch = _header(data)
        if batch is not None:
            if self.epochs.observe(batch.partition_leader_epoch, batch.base_offset):
                self.epochs.write(self.directory)
        elif self.epochs.entries:
            # UnifiedLog.append: an append of an older message format clears the cache
            self._epochs = LeaderEpochCache()
            self._epochs.write(self.directory)
        if self.should_roll(len(data), max_timestamp, last_offset):
            self.roll()
        a = self.active
        position = a.size
        with self._whole_batches():
            _write(a.log, data)
            a.note_batch(max_timestamp, last_offset)
            if a.bytes_since_index > self.policy.index_interval:
                _write(a.index, OffsetIndex.entry.pack(last_offset - a.base, position))
                a.index_entries += 1
                self._maybe_time_entry()
                a.bytes_since_index = 0
            a.bytes_since_index += len(data)
            a.size += len(data)
            self.next_offset = last_offset + 1
            if batch is not None and batch.producer_id >= 0:
                aborted = self.producers.append(batch, marker)
                if aborted is not None:
                    a.append_aborted(TXN_ENTRY.pack(0, *aborted))
        if self._producers is not None:
            self._producers.end_offset = self.next_offset  # updateMapEndOffset

    def append_plain(self, data: bytes, base_offset: int, last_offset: int, max_timestamp: int,
                     leader_epoch: int) -> None:
        """``append`` of a v2 batch of no producer whose header the caller wrote (base offset,
        partition leader epoch): the same steps, but the batch and its index entries are
        gathered, to be written by ``write_out`` a run of batches at a time (one write per
        file; before anything else is written, and at a flush or roll)."""
        if self.epochs.observe(leader_epoch, base_offset):
            self.write_out()
            self.epochs.write(self.directory)
        if self.should_roll(len(data), max_timestamp, last_offset):
            self.roll()
        a = self.active
        position = a.size
        self._out.append(data)
        a.note_batch(max_timestamp, last_offset)
        if a.bytes_since_index > self.policy.index_interval:
            self._out_index.append(OffsetIndex.entry.pack(last_offset - a.base, position))
            a.index_entries += 1
            entry = self._time_entry()
            if entry is not None:
                self._out_time.append(entry)
            a.bytes_since_index = 0
        a.bytes_since_index += len(data)
        a.size += len(data)
        self.next_offset = last_offset + 1
        if self._producers is not None:
            self._producers.end_offset = self.next_offset  # updateMapEndOffset

    def write_out(self) -> None:
        """Write what ``append_plain`` gathered: the batches to the .log, then their offset
        and time index entries (LogSegment.append's order)."""
        if not self._out:
            return
        a = self.active
        out, index, times = self._out, self._out_index, self._out_time
        self._out, self._out_index, self._out_time = [], [], []
        with self._whole_batches():
            _write_parts(a.log, out)
            if index:
                _write_parts(a.index, index)
            if times:
                _write_parts(a.timeindex, times)

    @contextlib.contextmanager
    def _whole_batches(self) -> Iterator[None]:
        """Writes of whole batches (and their index entries) to the active segment, all or
        none: when one fails (a full disk), every file of the segment is cut back to its size
        before them and flushed, and WriteFailed says where the partition ends. On success
        ``written_offset`` moves to ``next_offset``."""
        a = self.active
        before = [(f, os.fstat(f.fileno()).st_size) for f in a.files() if f is not None]
        had_txnindex = a.txnindex is not None
        try:
            yield
        except OSError as e:
            for f, size in before:
                os.ftruncate(f.fileno(), size)
            if not had_txnindex and a.txnindex is not None:
                os.ftruncate(a.txnindex.fileno(), 0)
            a.flush()
            self._out, self._out_index, self._out_time = [], [], []
            raise self.write_failed(e) from None
        self.written_offset = self.next_offset

    def write_failed(self, error: OSError) -> WriteFailed:
        """WriteFailed for ``error``, a write that failed: what of this run is on disk (each
        batch whole, flushed by the caller) and where the partition ends."""
        end = self.written_offset
        done = ("this run's offsets %d to %d (its first %d records) are written"
                % (self._start_offset, end - 1, end - self._start_offset)
                if end > self._start_offset else "nothing of this run is written")
        return WriteFailed("%s: %s: stopped at offset %d; %s, nothing after; the partition "
                           "ends whole at offset %d"
                           % (self.directory, error.strerror or error, end, done, end - 1), end)

    def _time_entry(self) -> Optional[bytes]:
        """TimeIndex.maybeAppend: an entry only when the max timestamp has grown (None
        otherwise), counted as written."""
        a = self.active
        if a.max_ts > a.last_time_ts:
            a.time_entries += 1
            a.last_time_ts = a.max_ts
            return TimeIndex.entry.pack(a.max_ts, a.max_ts_offset - a.base)
        return None

    def _maybe_time_entry(self) -> None:
        """TimeIndex.maybeAppend: an entry only when the max timestamp has grown."""
        entry = self._time_entry()
        if entry is not None:
            _write(self.active.timeindex, entry)

    def flush(self) -> None:
        self.write_out()
        self.active.flush()

    def flush_written(self) -> None:
        """After a failed write: the batches gathered and not written are dropped, what is
        written is flushed."""
        self._out, self._out_index, self._out_time = [], [], []
        self.next_offset = self.written_offset
        if self._active is not None:
            self._active.flush()

    def roll(self) -> None:
        """UnifiedLog.roll: seal the active segment (LogSegment.onBecomeInactiveSegment writes
        its final time index entry; its indexes are already trimmed) and start an empty one
        named by the next offset."""
        self.write_out()
        self._maybe_time_entry()
        self.active.flush()
        self.active.close()
        self._create_segment(self.next_offset)
        self.rolled.append(self.next_offset)
        # ProducerStateManager.takeSnapshot at the new segment's base offset, unless one is
        # there already (a roll a crash interrupted after it)
        if not os.path.lexists(snapshot_path(self.directory, self.next_offset)):
            write_snapshot(self.directory, self.next_offset, self.producers.snapshot_bytes(),
                           replace=False)

    # -- rolling by hand -----------------------------------------------------------------------
    def roll_refusal(self, if_bytes: Optional[int] = None, if_older: Optional[int] = None,
                     now: Optional[int] = None) -> Optional[str]:
        """Why a roll asked for by hand is not made, or None: an empty segment never rolls (as
        in LogSegment.shouldRoll); ``if_bytes``: not before the segment holds that many bytes;
        ``if_older``: not before its first batch is older than that many ms at ``now``."""
        a = self.active
        if a.size == 0:
            return "the active segment is empty"
        if if_bytes is not None and a.size < if_bytes:
            return "the active segment holds %d bytes, fewer than %d" % (a.size, if_bytes)
        if if_older is not None:
            now = now_ms() if now is None else now
            if a.first_batch_ts is None or a.first_batch_ts >= now - if_older:
                return "the active segment's first batch is not older than %d ms" % if_older
        return None

    def roll_unless(self, if_bytes: Optional[int] = None, if_older: Optional[int] = None,
                    now: Optional[int] = None) -> RollResult:
        """Roll unless ``roll_refusal`` gives a reason not to."""
        reason = self.roll_refusal(if_bytes, if_older, now)
        if reason is not None:
            return RollResult(self.active.segment, reason=reason)
        sealed = self.active.segment
        self.roll()
        return RollResult(self.active.segment, sealed)


def _header(data: bytes) -> Optional[Batch]:
    """The header of the v2 batch ``data`` (None for a legacy message)."""
    if len(data) < V2_HEADER.size or data[16] < 2:
        return None
    return read_batch(data, 0, len(data), 2)


def _last_epoch(segment: Segment, max_message_size: int) -> Optional[Tuple[int, int]]:
    """(epoch, base offset) of the last v2 batch of ``segment`` that carries a partition leader
    epoch, or None: read from its last offset index entry's position on (where LogSegment.
    readNextOffset reads from), from the start when that tail holds none or the index cannot
    be read. Headers only."""
    try:
        entries = segment.offset_index().entries
        tail = entries[-1][1] if entries else 0
    except (OSError, KafkalogError):
        tail = 0
    with segment.open(max_message_size) as log:
        for start in ((tail, 0) if tail else (0,)):
            found = None
            for batch in segment.batches(start, log):
                if batch.magic >= 2 and batch.partition_leader_epoch >= 0:
                    found = (batch.partition_leader_epoch, batch.base_offset)
            if found is not None:
                return found
    return None


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


def roll_partition(directory: str, if_bytes: Optional[int] = None,
                   if_older: Optional[int] = None, now: Optional[int] = None) -> RollResult:
    """Seal the active segment of the partition ``directory`` and start an empty one at the
    next offset, as UnifiedLog.roll, unless the segment is empty or a condition is not met
    (``PartitionWriter.roll_refusal``). Takes the log directory's lock; raises LockHeld when a
    broker holds it, AppendError when the active segment is damaged, OSError."""
    with Partition(directory).lock(), PartitionWriter(directory) as writer:
        return writer.roll_unless(if_bytes, if_older, now)
