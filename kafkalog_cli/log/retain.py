"""Retention as the broker runs it (UnifiedLog.deleteOldSegments): which segments go, and
deleting them the broker's way (renamed to .deleted together, removed later,
as UnifiedLog.deleteSegmentFiles and LogManager's delayed delete).

Passes run in the broker's order on what is left after the previous one: log start offset, size,
time (UnifiedLog.deleteLogStartOffsetBreachedSegments, deleteRetentionSizeBreachedSegments,
deleteRetentionMsBreachedSegments). Each walks the segments oldest first and stops at the first
that cannot go: the high watermark must be at or above the segment's upper bound (the next
segment's base offset, or the log end offset for the last one), the policy must hold, and the
last segment goes only when it is not empty and the caller allows rolling it away.

``retain_partition`` runs the whole job on one partition, in the order the steps must take:
finish a deletion a crash interrupted, plan, roll the active segment when it is to go, rename the
deleted segments' files, raise the recovery point and truncate the leader epochs at the new log
start offset, remove the .deleted files whose delay has passed.
"""

from __future__ import annotations

import os
import time
from typing import Callable, Iterator, List, Optional, Tuple

from . import checkpoints, names
from .append import PartitionWriter
from .files import FileFormatError
from .indexbuild import fsync_dir, write_atomically
from .leader_epochs import LeaderEpochCache
from .lock import LockHeld, LogDirLock
from .logdir import CleanShutdownMarker
from .partition import Partition
from .producer_state import load_state, snapshot_path, write_snapshot
from .report import Report, field, report
from .segment import Segment

KEPT, DELETED = "kept", "deleted"  # a segment's fate


@report
class RetainedSegment(Report):
    """A segment as retention sees it.

    ``segment``: the log.segment.Segment; ``base_offset``: its base offset; ``size``: its .log's
    bytes; ``next_offset``: the offset after its last batch (``base_offset`` when it holds none);
    ``first_timestamp``: the first batch's max timestamp (ms; None: no batch);
    ``largest_timestamp``: its largest timestamp (ms; -1: none) and ``timestamp_source``, where
    that came from (the time index, the batches, ...); ``fate``: KEPT or DELETED, with the
    reason ``why`` (None: kept, no reason given); ``records``: the records of its batches (from
    their headers); ``first_offset``: the first batch's base offset (None: it holds no batch).
    Raises ValueError for a segment whose file name holds no base offset."""

    segment: Segment
    base_offset: int = field(init=False)
    size: int = field(init=False)
    next_offset: int = field(init=False)
    first_timestamp: Optional[int] = None
    largest_timestamp: int = -1
    timestamp_source: str = ""
    fate: str = KEPT
    why: Optional[str] = None
    records: int = 0
    first_offset: Optional[int] = None

    def __post_init__(self) -> None:
        if self.segment.base_offset is None:
            raise ValueError("%s: the file name holds no base offset" % self.segment.log_path)
        self.base_offset = self.segment.base_offset
        self.size = self.segment.size()
        self.next_offset = self.base_offset

    @property
    def last_offset(self) -> Optional[int]:
        """The last offset of its last batch (None: it holds none)."""
        return None if self.first_offset is None else self.next_offset - 1

    @property
    def name(self) -> str:
        """The .log file's name."""
        return self.segment.name


def _read_batches(seg: RetainedSegment) -> int:
    """Set the next offset, the first offset, the record count and the first batch's max
    timestamp from the batches' headers; return the largest max timestamp of the batches (-1
    when none has one)."""
    largest = -1
    for batch in seg.segment.batches():
        seg.next_offset = batch.last_offset + 1
        if seg.first_offset is None:
            seg.first_offset = batch.base_offset
        # a legacy entry's header has no count: its offsets say how many messages it holds
        seg.records += (batch.count if batch.count is not None
                        else batch.last_offset - batch.base_offset + 1)
        largest = max(largest, batch.max_timestamp)
        if seg.first_timestamp is None:
            seg.first_timestamp = batch.max_timestamp
    return largest


def load_segments(directory: str) -> List[RetainedSegment]:
    """The live segments of the partition ``directory``, oldest first, each read."""
    segments = Partition(directory).segments()
    out = []
    for i, segment in enumerate(segments):
        seg = RetainedSegment(segment)
        batches_ts = _read_batches(seg)
        seg.largest_timestamp, seg.timestamp_source = segment.largest_timestamp(batches_ts)
        if i == len(segments) - 1 and batches_ts > seg.largest_timestamp:
            # The active segment's time index lacks its final entry until a roll (the broker
            # keeps that maximum in memory): its batches know better.
            seg.largest_timestamp, seg.timestamp_source = batches_ts, "batches"
        out.append(seg)
    return out


@report
class Policy(Report):
    """The retention settings.

    ``retention_ms``: retention.ms (None: no time limit); ``retention_bytes``: retention.bytes
    (None: no size limit); ``log_start_offset``: a log start offset as DeleteRecords leaves it
    (None: none given); ``now``: the time retention is judged at (ms since the epoch; None
    given: the current time, read when the Policy is made, so never None after);
    ``high_watermark``: the high watermark to use when the replication-offset-checkpoint has
    none (None: none given); ``roll_active``: whether the active segment may be rolled away."""

    retention_ms: Optional[int] = None
    retention_bytes: Optional[int] = None
    log_start_offset: Optional[int] = None
    now: Optional[int] = None
    high_watermark: Optional[int] = None
    roll_active: bool = False

    def __post_init__(self) -> None:
        if self.now is None:
            self.now = int(time.time() * 1000)


@report
class RetentionPlan(Report):
    """Each segment's fate, and the offsets it was judged by.

    ``directory``: the partition directory; ``segments``: its live segments, oldest first, each
    with its fate; ``high_watermark`` and ``high_watermark_source``, where it came from;
    ``log_end``: the log end offset; ``roll_first``: every segment goes, so the active one is
    rolled first; ``policy_log_start``: Policy.log_start_offset (0 when not given);
    ``recovery_point_raise``: (old, new) of the partition's recovery-point-offset-checkpoint
    entry, raised to the log start offset (a dry run's: would be), or None;
    ``recovery_point_problem``: why that checkpoint was not read (None: it was);
    ``deleted_files_removed``: the names of the .deleted files of earlier deletions removed,
    their delay past (a dry run's: that would be removed now; this run's own deletions are the
    segments deleted)."""

    directory: str
    segments: List[RetainedSegment]
    high_watermark: int
    high_watermark_source: str
    log_end: int
    roll_first: bool = False
    policy_log_start: int = 0
    recovery_point_raise: Optional[Tuple[int, int]] = None
    recovery_point_problem: Optional[str] = None
    deleted_files_removed: List[str] = field(default_factory=list)

    @property
    def deleted(self) -> List[RetainedSegment]:
        return [s for s in self.segments if s.fate == DELETED]

    @property
    def records_removed(self) -> int:
        """Records of the segments deleted."""
        return sum(s.records for s in self.deleted)

    @property
    def bytes_removed(self) -> int:
        return sum(s.size for s in self.deleted)

    @property
    def removed_offsets(self) -> Optional[Tuple[int, int]]:
        """(first, last) offset of the batches of the segments deleted (None: none)."""
        firsts = [s.first_offset for s in self.deleted if s.first_offset is not None]
        lasts = [s.last_offset for s in self.deleted if s.last_offset is not None]
        return (min(firsts), max(lasts)) if firsts and lasts else None

    @property
    def old_log_start(self) -> int:
        """The first segment's base offset before the deletion."""
        return self.segments[0].base_offset if self.segments else self.log_end

    @property
    def new_log_start(self) -> int:
        kept = [s for s in self.segments if s.fate != DELETED]
        return kept[0].base_offset if kept else self.log_end

    @property
    def log_start_offset(self) -> int:
        """The partition's log start offset once the deletion is done: the first kept
        segment's base, or the policy's log start offset (a DeleteRecords') when higher,
        bounded by the high watermark as UnifiedLog.maybeIncrementLogStartOffset bounds it."""
        return max(self.new_log_start, min(self.policy_log_start, self.high_watermark))

    @property
    def log_start_moves(self) -> bool:
        """Does the log start offset move with no segment deleted (a policy's log start
        offset inside the first segment, above the one recorded)? The broker's DeleteRecords
        moves it so (UnifiedLog.maybeIncrementLogStartOffset), whatever retention deletes
        after: the checkpoints and the leader epochs follow."""
        if self.deleted:
            return False
        recorded = max([self.old_log_start] + _checkpointed_log_start(Partition(self.directory)))
        return self.log_start_offset > recorded


def _high_watermark(directory: str, policy: Policy, log_start: int,
                    log_end: int) -> Tuple[int, str]:
    """(high watermark, where it came from), clamped into [log start, log end]: the log
    directory's replication-offset-checkpoint, else the policy's, else the log end offset."""
    checkpoint = names.REPLICATION_OFFSET_CHECKPOINT
    hw = Partition(directory).checkpointed(checkpoint)
    source = checkpoint if hw is not None else None
    if hw is None and policy.high_watermark is not None:
        hw, source = policy.high_watermark, "--high-watermark"
    if hw is None:
        hw, source = log_end, ("log end offset (no replication-offset-checkpoint entry, "
                               "no --high-watermark)")
    return min(max(hw, log_start), log_end), source or ""


# A policy's test of one segment (the next one, None for the last): None when it may go, else
# why it stays.
Predicate = Callable[[RetainedSegment, Optional[RetainedSegment]], Optional[str]]


def _walk(plan: RetentionPlan, policy: Policy, remaining: List[RetainedSegment],
          predicate: Predicate, label: str) -> List[RetainedSegment]:
    """One pass of UnifiedLog.deleteOldSegments: the segments from the oldest on that may go,
    up to the first that may not, marked DELETED (``label`` says by what); returns the others."""
    gone = 0
    for i, seg in enumerate(remaining):
        last = i == len(remaining) - 1
        nxt = None if last else remaining[i + 1]
        upper = plan.log_end if nxt is None else nxt.base_offset
        if last and not policy.roll_active:
            seg.why = seg.why or "active segment (--roll-active lets it go)"
            break
        if last and seg.next_offset == seg.base_offset:
            seg.why = seg.why or "active segment, empty"
            break
        if plan.high_watermark < upper:
            seg.why = "above the high watermark %d (%s)" % (plan.high_watermark,
                                                           plan.high_watermark_source)
            break
        why_not = predicate(seg, nxt)
        if why_not is not None:
            seg.why = why_not
            break
        seg.fate, seg.why = DELETED, label
        gone += 1
    return remaining[gone:]


def _below_log_start(start: int, log_end: int) -> Predicate:
    """deleteLogStartOffsetBreachedSegments: a segment wholly below the log start offset."""
    def test(seg: RetainedSegment, nxt: Optional[RetainedSegment]) -> Optional[str]:
        if (nxt.base_offset if nxt is not None else log_end) <= start:
            return None
        return "holds offsets at or above the log start offset %d" % start
    return test


def _over_size(limit: int, remaining: List[RetainedSegment]) -> Predicate:
    """deleteRetentionSizeBreachedSegments: the oldest segments while the partition stays at
    or above ``limit`` bytes without them."""
    diff = sum(s.size for s in remaining) - limit

    def test(seg: RetainedSegment, nxt: Optional[RetainedSegment]) -> Optional[str]:
        nonlocal diff
        if diff - seg.size >= 0:
            diff -= seg.size
            return None
        return "needed to stay above retention bytes %d" % limit
    return test


def _too_old(retention_ms: int, now: int) -> Predicate:
    """deleteRetentionMsBreachedSegments: a segment whose largest timestamp is older than
    ``retention_ms`` at ``now``."""
    def test(seg: RetainedSegment, nxt: Optional[RetainedSegment]) -> Optional[str]:
        if now - seg.largest_timestamp > retention_ms:
            return None
        if seg.largest_timestamp > now:
            return "future timestamps (%d, from the %s) hold it back" % (seg.largest_timestamp,
                                                                        seg.timestamp_source)
        return "newest timestamp %d (from the %s) too recent" % (seg.largest_timestamp,
                                                                 seg.timestamp_source)
    return test


def _apply_policy(plan: RetentionPlan, policy: Policy) -> None:
    """The three passes in the broker's order, each on what the previous one left."""
    remaining = list(plan.segments)
    if policy.log_start_offset is not None:
        remaining = _walk(plan, policy, remaining,
                          _below_log_start(policy.log_start_offset, plan.log_end),
                          "log start offset %d" % policy.log_start_offset)
    if policy.retention_bytes is not None and policy.retention_bytes >= 0:
        remaining = _walk(plan, policy, remaining, _over_size(policy.retention_bytes, remaining),
                          "retention bytes %d" % policy.retention_bytes)
    if policy.retention_ms is not None and policy.retention_ms >= 0:
        assert policy.now is not None  # Policy.__post_init__ reads the clock when none is given
        _walk(plan, policy, remaining, _too_old(policy.retention_ms, policy.now),
              "retention ms %d" % policy.retention_ms)


def plan_retention(directory: str, policy: Policy) -> RetentionPlan:
    """Which segments of the partition ``directory`` retention deletes under ``policy``, and
    why each other one stays."""
    segments = load_segments(directory)
    log_end = segments[-1].next_offset if segments else 0
    log_start = segments[0].base_offset if segments else 0
    hw, source = _high_watermark(directory, policy, log_start, log_end)
    plan = RetentionPlan(directory, segments, hw, source, log_end)
    plan.policy_log_start = policy.log_start_offset or 0
    _apply_policy(plan, policy)
    for i, seg in enumerate(segments):
        if seg.why is None:
            seg.why = ("active segment" if i == len(segments) - 1 else
                       "an older segment is kept, and retention stops at the first kept segment")
    plan.roll_first = bool(segments) and segments[-1].fate == DELETED
    if plan.deleted or plan.log_start_moves:
        plan.recovery_point_raise, plan.recovery_point_problem = _recovery_point_below(
            directory, plan.log_start_offset)
    return plan


_INTENT_LOG_START = "log_start_offset"  # the label of the intent's second line


def pending_deletion(directory: str) -> bool:
    """Did a crash interrupt a deletion (its intent file is there)?"""
    return os.path.exists(os.path.join(directory, names.RETAIN_INTENT))


def finish_interrupted(directory: str) -> List[str]:
    """Finish a deletion a crash interrupted: the bases it had decided, and the new log start,
    are in the intent file written before the first rename (so that no half-deleted segment is
    left, and no segment that merely has .deleted files beside it, as the log cleaner leaves,
    is taken for one). Returns the names renamed."""
    path = os.path.join(directory, names.RETAIN_INTENT)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        lines = f.read().splitlines()
    log_start: Optional[int] = None
    try:
        words = lines[0].split()
        start: Optional[int] = int(words[0])
        bases = [int(x) for x in words[1:]]
        # the log start offset (RetentionPlan.log_start_offset); an intent without that line
        # (an older kafkalog's) had the first kept base for it
        extra = lines[1].split() if len(lines) > 1 else []
        if extra[:1] == [_INTENT_LOG_START]:
            log_start = int(extra[1])
    except (ValueError, IndexError):
        start, bases = None, []  # a torn intent file: the deletion had not begun
    done = []
    if start is not None:
        done = _rename_segments(directory, bases)
        log_start = start if log_start is None else log_start
        update_log_start_checkpoint(directory, start, log_start)
        raise_recovery_point(directory, log_start)
        truncate_leader_epochs(directory, log_start)
    os.unlink(path)
    fsync_dir(directory)
    return done


def _rename_segments(directory: str, bases: List[int]) -> List[str]:
    """Rename the files of the segments at ``bases``, and the producer snapshots named by those
    bases (UnifiedLog.deleteProducerSnapshots: ProducerStateManager.removeAndMarkSnapshotForDeletion
    of each deleted segment's base offset; a snapshot at another offset below the new log start
    stays, for the next load to remove)."""
    done = []
    for base in bases:
        snapshot = names.offset_name(base, names.SNAPSHOT)
        if os.path.lexists(os.path.join(directory, snapshot)):
            Segment.rename_aside(directory, snapshot, snapshot, names.DELETED)
            done.append(snapshot)
        # the segment's .log goes last (Segment.change_suffix): a run interrupted before it
        # still finds the segment, and finish_interrupted renames the rest
        done.extend(Segment(directory, base).change_suffix(names.DELETED))
    fsync_dir(directory)
    return done


def _deleted_origin(n: str) -> Optional[str]:
    """The name a ``.deleted`` file had (``X.log.deleted`` and our ``X.log.2.deleted`` ->
    ``X.log``), or None for a name that is not a Kafka file's with that suffix."""
    if names.lifecycle_suffix(n) != names.DELETED:
        return None
    stem = names.without_lifecycle_suffix(n)
    head, dot, k = stem.rpartition(".")
    if dot and k.isascii() and k.isdigit() and names.partition_file_kind(head) is not None:
        stem = head
    # KRaft snapshots pending deletion (.checkpoint.deleted) are the metadata log's business
    # (KafkaMetadataLog deletes them), not a segment's: left alone, as recover leaves them.
    return stem if names.partition_file_kind(stem) not in (None, names.KRAFT_SNAPSHOT) else None


def delete_segments(plan: RetentionPlan) -> Optional[Tuple[int, int]]:
    """Rename each deleted segment's files to .deleted (indexes and snapshots first, the .log
    last), update the log start checkpoint, raise the recovery point and truncate the leader
    epochs at the new log start offset, after writing down which segments and which offsets,
    so that a rerun after a crash finishes the same job (each step after the renames is
    idempotent: it only moves an offset up to one the intent determines). The recovery point
    is raised only once the segments below it are gone: a crash in between leaves it low,
    which only makes a broker's load recover more. Returns the recovery point's (old, new)
    when it was raised."""
    directory = plan.directory
    bases = [seg.base_offset for seg in plan.deleted]
    intent = os.path.join(directory, names.RETAIN_INTENT)
    write_atomically(intent, ("%s\n%s %d\n" % (
        " ".join(str(x) for x in [plan.new_log_start] + bases), _INTENT_LOG_START,
        plan.log_start_offset)).encode())
    _rename_segments(directory, bases)
    update_log_start_checkpoint(directory, plan.new_log_start, plan.log_start_offset)
    raised = raise_recovery_point(directory, plan.log_start_offset)
    truncate_leader_epochs(directory, plan.log_start_offset)
    os.unlink(intent)
    fsync_dir(directory)
    return raised


def purge_deleted(directory: str, delay_ms: int, now_ms: int, dry_run: bool = False
                  ) -> List[str]:
    """Remove .deleted files whose deletion is older than the delay (the rename time, their
    ctime); with 0, all of them (LogManager's delayed delete, file.delete.delay.ms). Returns
    their names (with ``dry_run``, those it would remove, none removed)."""
    removed = []
    for n in sorted(os.listdir(directory)):
        if _deleted_origin(n) is None:
            continue
        path = os.path.join(directory, n)
        if delay_ms == 0 or now_ms - os.stat(path).st_ctime * 1000 >= delay_ms:
            if not dry_run:
                os.unlink(path)
            removed.append(n)
    if removed and not dry_run:
        fsync_dir(directory)
    return removed


def truncate_leader_epochs(directory: str, log_start: int) -> bool:
    """UnifiedLog.maybeIncrementLogStartOffset's LeaderEpochFileCache.truncateFromStart at the
    new log start offset (the first segment's base, or the log-start-offset-checkpoint's entry
    when that is higher): the entries below it go, the newest of them moved up to it; the
    checkpoint is rewritten when it changed. Returns whether it did."""
    if not os.path.exists(os.path.join(directory, names.LEADER_EPOCH_CHECKPOINT)):
        return False
    start = _recorded_log_start(directory, log_start)
    cache = LeaderEpochCache.read(directory)
    if not cache.truncate_from_start(start):
        return False
    cache.write(directory)
    return True


def _recorded_log_start(directory: str, log_start: int) -> int:
    """The partition's log start offset once retention is done: ``log_start``, or the
    log-start-offset-checkpoint's entry when that is higher (LogLoader loads the log start as
    the larger of the entry and the first segment's base)."""
    return max([log_start] + _checkpointed_log_start(Partition(directory)))


# The recovery point as UnifiedLog.updateLogStartOffset keeps it (called by
# maybeIncrementLogStartOffset when retention's deleteSegments moves the log start up): "if
# (localLog.recoveryPoint < offset) localLog.updateRecoveryPoint(offset)". The broker keeps it in
# memory and LogManager.checkpointRecoveryOffsetsInDir writes every partition's to
# recovery-point-offset-checkpoint; offline, the partition's entry is raised in the file. An entry
# at or above the log start stays. A missing entry, or a missing file, stays missing:
# LogManager.loadLog reads it as 0 and LogLoader.recoverLog then recovers from the first segment
# (LogSegments.values(recoveryPoint, ...) starts at the segment holding the recovery point, and
# the log start retention leaves is in the first remaining segment), the same segments an entry
# at the log start makes it recover; the file says nothing less without the entry. An unreadable
# file is not written over (LogManager.loadLogs reads it as empty: every segment is recovered).
# The high watermark is left alone: updateLogStartOffset raises it too, but retention never
# deletes a segment the high watermark has not passed (UnifiedLog.deletableSegments:
# highWatermark >= upperBoundOffset; maybeIncrementLogStartOffset refuses a log start above it),
# so the raise does nothing on this path, and a replication-offset-checkpoint entry below a log
# start is clamped by the broker's load anyway (UnifiedLog.updateHighWatermark); that file is
# ReplicaManager.checkpointHighWatermarks' to write, not LogManager's.

def _recovery_point_below(directory: str, log_start: int
                          ) -> Tuple[Optional[Tuple[int, int]], Optional[str]]:
    """((old, new), None) when the partition's recovery-point-offset-checkpoint entry is below
    the log start offset retention leaves (``log_start``, or the log-start-offset-checkpoint's
    entry when higher), else (None, None); (None, why) when the file cannot be read."""
    partition = Partition(directory)
    try:
        found = partition.checkpointed(names.RECOVERY_POINT_CHECKPOINT)
    except (OSError, FileFormatError) as e:
        path = os.path.join(partition.log_dir, names.RECOVERY_POINT_CHECKPOINT)
        return None, "%s: not read (%s): the recovery point is not raised" % (path, e)
    start = _recorded_log_start(directory, log_start)
    if found is None or found >= start:
        return None, None
    return (found, start), None


def raise_recovery_point(directory: str, log_start: int) -> Optional[Tuple[int, int]]:
    """Raise the partition's entry in its log directory's recovery-point-offset-checkpoint to
    the log start offset (``log_start``, or the log-start-offset-checkpoint's entry when
    higher) when it is below it, as UnifiedLog.updateLogStartOffset raises the recovery point
    (the comment above says what is left alone and why). Returns (old, new) when it did."""
    below, _ = _recovery_point_below(directory, log_start)
    if below is None:
        return None
    partition = Partition(directory)
    path = os.path.join(partition.log_dir, names.RECOVERY_POINT_CHECKPOINT)
    assert partition.topic is not None and partition.number is not None
    old = checkpoints.raise_offset_checkpoint_entry(path, partition.topic, partition.number,
                                                    below[1])
    return None if old is None else (old, below[1])


def _checkpointed_log_start(partition: Partition) -> List[int]:
    """The partition's entry of its log directory's log-start-offset-checkpoint, if any."""
    found = partition.checkpointed(names.LOG_START_OFFSET_CHECKPOINT)
    return [] if found is None else [found]


def update_log_start_checkpoint(directory: str, first_base: int, log_start: int = 0) -> bool:
    """Rewrite the log directory's log-start-offset-checkpoint for this partition whose first
    segment now starts at ``first_base`` and whose log start offset is ``log_start`` (the
    policy's, as a DeleteRecords sets it, when above that base): the log start offset only
    ever grows (an entry above the base, from a DeleteRecords, stays), and the entry is left
    out when the log start is the first segment's base, as the broker writes it
    (LogManager.checkpointLogStartOffsetsInDir). A log directory without the file gets one
    when the entry is needed (the broker writes it for every log directory): without it the
    next load would start the log at the first segment's base."""
    partition = Partition(directory)
    path = os.path.join(partition.log_dir, names.LOG_START_OFFSET_CHECKPOINT)
    topic, number = partition.topic, partition.number
    if topic is None or number is None:
        return False
    exists = os.path.isfile(path)
    if not exists and (os.path.lexists(path) or max(first_base, log_start) <= first_base):
        return False
    entries = checkpoints.read_offset_checkpoint(path) if exists else []
    start = max([first_base, log_start] + _checkpointed_log_start(partition))
    entries = [e for e in entries if (e[0], e[1]) != (topic, number)]
    if start > first_base:
        entries.append((topic, number, start))
    write_atomically(path, checkpoints.offset_checkpoint_bytes(entries))
    return True


def snapshot_producers_at_log_end(directory: str, log_end: int) -> None:
    """Before any segment goes: the producer state at the log end offset, as a snapshot there
    (written unless that very snapshot is there already).

    A broker's retention deletes segments and the snapshots below the new log start
    (UnifiedLog.deleteSegments, ProducerStateManager.deleteSnapshotsBefore) but not the
    producers it holds in memory: they stay until they expire, and the snapshot it takes at
    its next roll or at shutdown (UnifiedLog.close) holds them. Offline there is no memory: a
    later load would rebuild the state from the new log start (truncateAndReload removes the
    snapshots at or below it) and lose every producer whose batches were all deleted. Taken
    first, the snapshot carries them, and a run killed at any moment leaves the same state as
    an uninterrupted one. No producer, no snapshot: a rebuild from the new log start finds
    none either."""
    partition = Partition(directory)
    state = load_state(partition.segments(), partition.snapshot_paths(), log_end,
                       int(time.time() * 1000)).state
    if not state.snapshot_entries():
        return
    data = state.snapshot_bytes()
    path = snapshot_path(directory, log_end)
    try:
        with open(path, "rb") as f:
            if f.read(len(data) + 1) == data:
                return
    except OSError:
        pass
    write_snapshot(directory, log_end, data)


def retain_partition(directory: str, policy: Policy, dry_run: bool = False,
                     delete_delay_ms: int = 60000) -> RetentionPlan:
    """Retention of the partition ``directory``, start to end: finish a deletion a crash
    interrupted, plan (``plan_retention``), roll the active segment first when every segment
    is to go, rename the deleted segments' files to .deleted, and remove the .deleted files
    older than ``delete_delay_ms``. With ``dry_run``, only the plan. The caller holds the log
    directory's lock. Returns the plan, carried out."""
    marker = CleanShutdownMarker(Partition(directory).log_dir)
    if not dry_run and pending_deletion(directory):
        marker.lift()
        finish_interrupted(directory)
    plan = plan_retention(directory, policy)
    if dry_run:
        plan.deleted_files_removed = purge_deleted(directory, delete_delay_ms,
                                                   int(time.time() * 1000), dry_run=True)
        return plan
    earlier = {n for n in os.listdir(directory) if _deleted_origin(n) is not None}
    if plan.roll_first or plan.deleted or plan.log_start_moves:
        marker.lift()
    if plan.roll_first:
        # under the log directory's lock: no partition lock file needed
        with PartitionWriter(directory, lock_partition=False) as writer:
            writer.roll()
    if plan.deleted:
        snapshot_producers_at_log_end(directory, plan.log_end)
    if plan.deleted or plan.log_start_moves:
        # no segment to delete: the same steps with none renamed (the checkpoint, the
        # recovery point and the leader epochs at the new log start offset)
        plan.recovery_point_raise = delete_segments(plan)
    # wall-clock time: the delay runs from the rename, whatever the policy's ``now`` says
    plan.deleted_files_removed = [n for n in purge_deleted(directory, delete_delay_ms,
                                                           int(time.time() * 1000))
                                  if n in earlier]
    marker.restore()
    return plan


class LogDirRetention:
    """Retention of ``partitions`` (directories) of the log directory ``log_dir`` under its
    lock, as LogManager's retention pass goes over its logs: ``run`` yields each partition's
    plan, carried out (only planned with ``dry_run``). A real run refuses a log directory a
    broker holds (LockHeld); a dry run only reads, and goes on beside it (``lock_held`` says
    who holds it, for the caller's warning). ``current`` is the partition being retained (where
    an error without a file name is said to be). An error ends the run: the partitions after
    it are not retained."""

    def __init__(self, log_dir: str, partitions: List[str], policy: Policy,
                 dry_run: bool = False, delete_delay_ms: int = 60000) -> None:
        self.log_dir = log_dir
        self.partitions = partitions
        self.policy = policy
        self.dry_run = dry_run
        self.delete_delay_ms = delete_delay_ms
        self.lock_held: Optional[LockHeld] = None
        self.current = log_dir

    def run(self) -> Iterator[RetentionPlan]:
        with LogDirLock.for_run(self.log_dir, self.partitions, self.dry_run) as lock:
            self.lock_held = lock.held
            for directory in self.partitions:
                self.current = directory
                yield retain_partition(directory, self.policy, self.dry_run,
                                       self.delete_delay_ms)
