"""Writing to a partition as a broker does: append batches to the active segment and keep its
indexes as LogSegment.append does, roll where LogSegment.shouldRoll says so, and seal the
active segment and open the next one as UnifiedLog.roll does (with the producer snapshot at the
new base offset). Around the segments, as UnifiedLog.append keeps them: the leader epoch cache,
the producer state and the transaction index.

The active segment itself (its files, LogSegment.append and shouldRoll, its loading and
creation) is ``segment_writer.ActiveSegment``; this module is UnifiedLog's side around it.
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
from typing import Iterator, List, Optional, Tuple

from ..errors import KafkalogError, UsageError
from ..format.records import V2_HEADER, Batch, read_batch
from . import names
from .files import open_lock_file
from .indexbuild import fsync_dir
from .leader_epochs import LeaderEpochCache
from .logdir import CleanShutdownMarker
from .partition import Partition
from .producer_state import EndMarker, ProducerState, load_state, snapshot_path, write_snapshot
from .segment import DEFAULT_MAX_MESSAGE_SIZE, Segment
from .segment_writer import ActiveSegment, AppendError, RollPolicy
from .txnindex import ENTRY as TXN_ENTRY



class WriteFailed(KafkalogError):
    """A write to the partition failed (a full disk: ENOSPC, EDQUOT, EFBIG; or EIO): the
    active segment's files were cut back to the last whole batch and flushed. The message
    says where the partition now ends and what of this run is on disk: exit code 2."""

    def __init__(self, message: str, log_end_offset: int) -> None:
        super().__init__(message)
        self.log_end_offset = log_end_offset


def now_ms() -> int:
    return int(time.time() * 1000)


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
        self._active: Optional[ActiveSegment] = None
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
        # the log end offset of what is written to the files (``next_offset`` runs ahead of it
        # while append_plain gathers)
        self.written_offset = 0

    @property
    def active(self) -> ActiveSegment:
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
        path = os.path.join(self.directory, names.APPEND_LOCK)
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
                os.unlink(os.path.join(self.directory, names.APPEND_LOCK))
            os.close(self._lock_fd)
            self._lock_fd = None

    def _load_active(self, base: int) -> None:
        """Open the last segment to append to (ActiveSegment.load; AppendError when it is not
        whole: recover first)."""
        self._active, self.next_offset, self._active_epoch = ActiveSegment.load(
            self.directory, base, self.policy.index_interval, self.max_message_size)

    def _create_segment(self, base: int) -> None:
        self._active = ActiveSegment.create(self.directory, base)
        self.next_offset = self.written_offset = base

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
        if self.active.should_roll(self.policy, len(data), max_timestamp, last_offset):
            self.roll()
        a = self.active
        with self._whole_batches():
            a.append(data, last_offset, max_timestamp, self.policy.index_interval)
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
        if self.active.should_roll(self.policy, len(data), max_timestamp, last_offset):
            self.roll()
        self.active.gather(data, last_offset, max_timestamp, self.policy.index_interval)
        self.next_offset = last_offset + 1
        if self._producers is not None:
            self._producers.end_offset = self.next_offset  # updateMapEndOffset

    def write_out(self) -> None:
        """Write what ``append_plain`` gathered: the batches to the .log, then their offset
        and time index entries (LogSegment.append's order)."""
        if self._active is None or not self._active.pending:
            return
        with self._whole_batches():
            self.active.write_pending()

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
            a.drop_pending()
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

    def flush(self) -> None:
        self.write_out()
        self.active.flush()

    def flush_written(self) -> None:
        """After a failed write: the batches gathered and not written are dropped, what is
        written is flushed."""
        self.next_offset = self.written_offset
        if self._active is not None:
            self._active.drop_pending()
            self._active.flush()

    def roll(self) -> None:
        """UnifiedLog.roll: seal the active segment (LogSegment.onBecomeInactiveSegment writes
        its final time index entry; its indexes are already trimmed) and start an empty one
        named by the next offset."""
        self.write_out()
        self.active.write_time_entry()
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
        """Why a roll asked for by hand is not made, or None (``roll_refusal`` of the module)."""
        return roll_refusal(self.active, if_bytes, if_older, now)

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


def roll_refusal(active: ActiveSegment, if_bytes: Optional[int] = None,
                 if_older: Optional[int] = None, now: Optional[int] = None) -> Optional[str]:
    """Why a roll asked for by hand is not made of the segment ``active``, or None: an empty
    segment never rolls (as in LogSegment.shouldRoll); ``if_bytes``: not before the segment
    holds that many bytes; ``if_older``: not before its first batch is older than that many ms
    at ``now``."""
    if active.size == 0:
        return "the active segment is empty"
    if if_bytes is not None and active.size < if_bytes:
        return "the active segment holds %d bytes, fewer than %d" % (active.size, if_bytes)
    if if_older is not None:
        now = now_ms() if now is None else now
        if active.first_batch_ts is None or active.first_batch_ts >= now - if_older:
            return "the active segment's first batch is not older than %d ms" % if_older
    return None


def plan_roll(directory: str, if_bytes: Optional[int] = None, if_older: Optional[int] = None,
              now: Optional[int] = None,
              max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> RollResult:
    """What ``roll_partition`` would do, reading the partition only (no lock, no file written):
    ``sealed`` is the segment that would be sealed and ``active`` the one that would be
    created at the next offset, or ``reason`` says why there would be no roll. Raises
    AppendError when the active segment is not whole (as the roll would), OSError."""
    last = Partition(directory).active_segment()
    base = None if last is None else last.base_offset
    if last is None or base is None:
        return RollResult(Segment(directory, 0), reason="the partition has no segment")
    active = ActiveSegment(directory, base)
    next_offset = active.read(max_message_size)
    reason = roll_refusal(active, if_bytes, if_older, now)
    if reason is not None:
        return RollResult(last, reason=reason)
    return RollResult(Segment(directory, next_offset), last)


def roll_partition(directory: str, if_bytes: Optional[int] = None,
                   if_older: Optional[int] = None, now: Optional[int] = None) -> RollResult:
    """Seal the active segment of the partition ``directory`` and start an empty one at the
    next offset, as UnifiedLog.roll, unless the segment is empty or a condition is not met
    (``PartitionWriter.roll_refusal``). Takes the log directory's lock; raises LockHeld when a
    broker holds it, AppendError when the active segment is damaged, OSError."""
    with Partition(directory).lock(), PartitionWriter(directory) as writer:
        return writer.roll_unless(if_bytes, if_older, now)
