"""A log directory, partition or segment at a glance (`kafkalog describe`): offsets, record and
batch counts, sizes, time ranges, codecs, index health, leader epochs, producer snapshots, and
the log directory's checkpoints held against the logs.

Fast by design: a segment is read batch header by batch header (``LogFile.entries()``, the scan
every command shares), never decompressing a v2 batch: its record count is the header's
``recordsCount`` (after compaction ``lastOffsetDelta + 1`` overstates it). A legacy (v0/v1)
compressed wrapper has no count: its inner messages are decoded and counted. Time ranges come
from the headers too: a v2 batch spans ``baseTimestamp`` (its first record's timestamp, as
the producer writes it) to ``maxTimestamp``; a LogAppendTime batch, or one whose
``baseTimestamp`` holds a delete horizon, counts as ``maxTimestamp`` alone.

Inconsistencies are ``problems`` (a command exits 1 on any); what the broker takes in its
stride at load (a stale entry it ignores or drops) is a ``note``.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

from ..format.errors import CorruptRecordError, LimitExceededError
from ..format.records import LOG_APPEND_TIME, Batch
from ..format.scan import InvalidBytes
from . import names
from .files import FileFormatError, printable_name
from .index import OffsetIndex, TimeIndex
from .leader_epochs import read_checkpoint_strict
from .logdir import LogDir, partitions_of
from .partition import Partition
from .segment import DEFAULT_MAX_MESSAGE_SIZE, LogFile, Segment, order_problem, reach_problem
from .snapshot import read_snapshot
from .verify import sanity_problems

# Problem and note kinds (stable names, used in JSON output)
INVALID_BYTES = "invalid_bytes"              # bytes that hold no batch: recovery cuts there
CRC_MISMATCH = "crc_mismatch"
UNREADABLE_RECORDS = "unreadable_records"    # a legacy wrapper whose messages cannot be read
OFFSET_ORDER = "offset_order"                # a batch's offsets out of place in its segment
SEGMENT_OVERLAP = "segment_overlap"          # a segment's offsets reach the next one's base
INDEX_SANITY = "index_sanity"                # OffsetIndex/TimeIndex.sanityCheck fails
UNREADABLE = "unreadable"                    # a file of the partition that cannot be read
RECOVERY_POINT_PAST_END = "recovery_point_past_end"
LOG_START_PAST_END = "log_start_past_end"
HIGH_WATERMARK_OUT_OF_RANGE = "high_watermark_out_of_range"
# notes
INDEX_MISSING = "index_missing"              # rebuilt by the broker at load
INDEX_ZERO_TAIL = "index_zero_tail"
LOG_START_BELOW_LOG = "log_start_below_log"
CLEANER_OFFSET_OUT_OF_RANGE = "cleaner_offset_out_of_range"
LEADER_EPOCH_PAST_END = "leader_epoch_past_end"
SNAPSHOT_PAST_END = "snapshot_past_end"
NO_SEGMENTS = "no_segments"


class Finding:
    """A problem or a note: ``kind`` (above), a one-line ``message``, the ``file`` it is about,
    and the numbers behind it (``fields``, named as in JSON)."""

    __slots__ = ("kind", "message", "file", "fields")

    def __init__(self, kind: str, message: str, file: str, **fields: object) -> None:
        self.kind = kind
        self.message = printable_name(message)
        self.file = printable_name(file)
        self.fields = fields

    def __repr__(self) -> str:
        return "Finding(%r, %r)" % (self.kind, self.message)


class IndexHealth:
    """One index file of a segment: its real entries and the broker's sanity check's
    findings (``sanity``: messages; empty when sound). ``error``: why it could not be read."""

    __slots__ = ("path", "kind", "entries", "sanity", "zero_tail", "error")

    def __init__(self, path: str, kind: str) -> None:
        self.path = path
        self.kind = kind
        self.entries: Optional[int] = None
        self.sanity: List[str] = []
        self.zero_tail = 0
        self.error: Optional[str] = None


class SegmentDescription:
    """One segment: ``first_offset``/``last_offset`` are None for a segment without batches;
    ``next_offset`` is the offset after its last batch (its base offset when empty:
    LogSegment.readNextOffset). Timestamps are None when no batch carries one."""

    def __init__(self, path: str, base_offset: Optional[int], active: bool,
                 topic: Optional[str], partition: Optional[int]) -> None:
        self.path = path
        self.base_offset = base_offset
        self.active = active
        self.topic = topic
        self.partition = partition
        self.size = 0
        self.first_offset: Optional[int] = None
        self.last_offset: Optional[int] = None
        self.records = 0
        self.batches = 0
        self.min_timestamp: Optional[int] = None
        self.max_timestamp: Optional[int] = None
        self.codecs: List[str] = []
        self.magic: List[int] = []
        self.offset_index: Optional[IndexHealth] = None
        self.time_index: Optional[IndexHealth] = None
        self.problems: List[Finding] = []
        self.notes: List[Finding] = []

    @property
    def next_offset(self) -> Optional[int]:
        if self.last_offset is not None:
            return self.last_offset + 1
        return self.base_offset


class PartitionDescription:
    """One partition directory: its segments, totals and checkpoints. ``log_start_offset``
    is the broker's (LogLoader: the checkpointed log start, or the first segment's base
    offset when that is higher); ``log_end_offset`` the next offset to be written. The
    checkpointed offsets are None where the log directory's file has no line for it."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.topic, self.partition = names.topic_partition(directory)
        self.segments: List[SegmentDescription] = []
        self.log_start_offset: Optional[int] = None
        self.log_end_offset: Optional[int] = None
        self.recovery_point: Optional[int] = None
        self.checkpointed_log_start: Optional[int] = None
        self.high_watermark: Optional[int] = None
        self.cleaner_offset: Optional[int] = None
        self.leader_epochs: List[Tuple[int, int]] = []
        self.snapshots: List[Tuple[int, Optional[int]]] = []  # (offset, producers or None)
        self.problems: List[Finding] = []
        self.notes: List[Finding] = []

    @property
    def records(self) -> int:
        return sum(s.records for s in self.segments)

    @property
    def batches(self) -> int:
        return sum(s.batches for s in self.segments)

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    def all_problems(self) -> List[Finding]:
        return [p for s in self.segments for p in s.problems] + self.problems

    def all_notes(self) -> List[Finding]:
        return [n for s in self.segments for n in s.notes] + self.notes


class Description:
    """What a path stands for, described: ``partitions`` (a log directory's or one
    partition's), or for a segment's .log named alone, ``segments`` only. ``errors``: (path,
    exception) for what could not be read at all (the others are still described)."""

    def __init__(self) -> None:
        self.partitions: List[PartitionDescription] = []
        self.segments: List[SegmentDescription] = []
        self.errors: List[Tuple[str, BaseException]] = []
        self.problems: List[Finding] = []  # the log directory's own (an unreadable checkpoint)

    def all_segments(self) -> List[SegmentDescription]:
        return self.segments + [s for p in self.partitions for s in p.segments]

    def all_problems(self) -> List[Finding]:
        return (self.problems + [p for s in self.segments for p in s.problems]
                + [p for part in self.partitions for p in part.all_problems()])

    def all_notes(self) -> List[Finding]:
        return ([n for s in self.segments for n in s.notes]
                + [n for part in self.partitions for n in part.all_notes()])

    @property
    def consistent(self) -> bool:
        return not self.all_problems()


# -- a segment -------------------------------------------------------------------------------------

class _Range:
    """The smallest and largest of the timestamps given (negative ones: none)."""

    __slots__ = ("low", "high")

    def __init__(self) -> None:
        self.low: Optional[int] = None
        self.high: Optional[int] = None

    def add(self, low: int, high: int) -> None:
        if low >= 0 and (self.low is None or low < self.low):
            self.low = low
        if high >= 0 and (self.high is None or high > self.high):
            self.high = high


def _v2_time_range(batch: Batch) -> Tuple[int, int]:
    """The (first, max) timestamps a v2 batch's header tells."""
    if batch.timestamp_type == LOG_APPEND_TIME or batch.has_delete_horizon:
        # every record carries the append time; a delete horizon replaces baseTimestamp
        return batch.max_timestamp, batch.max_timestamp
    return batch.base_timestamp, batch.max_timestamp


def _scan(seg: SegmentDescription, log: LogFile, segment: Segment) -> None:
    """Sum up ``log``'s batches into ``seg`` from their headers (legacy wrappers opened)."""
    codecs, magics = set(), set()
    times = _Range()
    prev_last: Optional[int] = None
    name = segment.log_path
    for item in log.entries():
        if isinstance(item, InvalidBytes):
            seg.problems.append(Finding(
                INVALID_BYTES, "%d bytes at position %d hold no batch (%s): recovery cuts the "
                "log there" % (item.size, item.position, item.reason), name,
                position=item.position, sizeBytes=item.size))
            break
        batch = item
        seg.batches += 1
        codecs.add(batch.codec_name)
        magics.add(batch.magic)
        first = batch.base_offset
        if not batch.is_valid:
            seg.problems.append(Finding(
                CRC_MISMATCH, "batch at position %d (offsets %d-%d): CRC mismatch (stored %d, "
                "computed %d)" % (batch.position, batch.base_offset, batch.last_offset, batch.crc,
                                  batch.computed_crc), name,
                position=batch.position, baseOffset=batch.base_offset))
        if batch.magic >= 2:
            seg.records += batch.count
            if batch.count > 0:
                times.add(*_v2_time_range(batch))
        elif batch.codec == 0:
            seg.records += 1
            times.add(batch.max_timestamp, batch.max_timestamp)
        else:
            first = _legacy_wrapper(seg, log, batch, times, name)
        if seg.first_offset is None:
            seg.first_offset = first
        why = order_problem(batch.last_offset, prev_last)
        if why is None and segment.base_offset is not None:
            why = reach_problem(batch.last_offset, segment.base_offset)
            if why is None and first < segment.base_offset:
                why = "first offset %d is below the segment's base offset %d" % (
                    first, segment.base_offset)
        if why is not None:
            seg.problems.append(Finding(OFFSET_ORDER, "batch at position %d: %s"
                                        % (batch.position, why), name,
                                        position=batch.position, lastOffset=batch.last_offset))
        prev_last = batch.last_offset if prev_last is None else max(prev_last, batch.last_offset)
        seg.last_offset = prev_last
    seg.codecs = sorted(codecs)
    seg.magic = sorted(magics)
    seg.min_timestamp, seg.max_timestamp = times.low, times.high


def _legacy_wrapper(seg: SegmentDescription, log: LogFile, batch: Batch, times: _Range,
                    name: str) -> int:
    """Count the inner messages of a compressed v0/v1 wrapper (its header has no count);
    return its first inner offset."""
    first = None
    try:
        for recs in log.iter_records(batch):
            if len(recs):
                if first is None:
                    first = recs.offsets[0]
                seg.records += len(recs)
                times.add(min(recs.timestamps), max(recs.timestamps))
    except (CorruptRecordError, LimitExceededError) as e:
        seg.problems.append(Finding(
            UNREADABLE_RECORDS, "wrapper at position %d (offset %d): %s"
            % (batch.position, batch.last_offset, e), name,
            position=batch.position, lastOffset=batch.last_offset))
    return batch.base_offset if first is None else first


def _index_health(segment: Segment, kind: str, active: bool) -> Optional[IndexHealth]:
    path = segment.file(kind)
    if not os.path.lexists(path):
        return None
    health = IndexHealth(path, kind)
    try:
        index = (OffsetIndex if kind == names.INDEX else TimeIndex)(path, segment.base_offset)
    except (OSError, FileFormatError) as e:
        health.error = "%s" % (e.strerror if isinstance(e, OSError) and e.strerror else e)
        return health
    health.entries = index.count
    health.zero_tail = index.zero_tail
    # the active segment's indexes are pre-allocated: checked trimmed, as the broker does on
    # close (verify._SegmentCheck does the same)
    checked = index.trimmed() if active else index
    health.sanity = [p.message for p in sanity_problems(checked)]
    return health


def describe_segment(segment: Segment, active: bool,
                     max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                     topic: Optional[str] = None,
                     partition: Optional[int] = None) -> SegmentDescription:
    """Describe one segment (``active``: its partition's last). Raises OSError when its .log
    cannot be read."""
    seg = SegmentDescription(segment.log_path, segment.base_offset, active, topic, partition)
    with segment.open(max_message_size) as log:
        seg.size = log.size
        _scan(seg, log, segment)
    if segment.base_offset is None:
        return seg  # a file named alone whose name holds no offset: its indexes are not known
    for kind in (names.INDEX, names.TIMEINDEX):
        health = _index_health(segment, kind, active)
        if kind == names.INDEX:
            seg.offset_index = health
        else:
            seg.time_index = health
        path = segment.file(kind)
        if health is None:
            if not active and seg.batches:
                seg.notes.append(Finding(INDEX_MISSING, "no %s: the broker rebuilds it when it "
                                         "loads the log" % os.path.basename(path), path))
            continue
        if health.error is not None:
            seg.problems.append(Finding(UNREADABLE, health.error, path))
        for message in health.sanity:
            seg.problems.append(Finding(INDEX_SANITY, message, path))
        if health.zero_tail and not active:
            seg.notes.append(Finding(INDEX_ZERO_TAIL, "%d zero-filled slots after the %s real "
                                     "entries of a sealed segment's index"
                                     % (health.zero_tail, health.entries), path))
    return seg


# -- a partition -----------------------------------------------------------------------------------

class _Checkpoints:
    """A log directory's offset checkpoints, each read once (LogDir.offset_checkpoint)."""

    def __init__(self) -> None:
        self.read: Dict[Tuple[str, str], Dict[Tuple[str, int], int]] = {}
        self.problems: List[Finding] = []

    def get(self, log_dir: str, name: str, key: Tuple[str, int]) -> Optional[int]:
        if (log_dir, name) not in self.read:
            try:
                self.read[(log_dir, name)] = LogDir(log_dir).offset_checkpoint(name)
            except (OSError, FileFormatError) as e:
                path = os.path.join(log_dir, name)
                text = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
                if text.startswith(path + ": "):
                    text = text[len(path) + 2:]
                self.problems.append(Finding(UNREADABLE, text, path))
                self.read[(log_dir, name)] = {}
        return self.read[(log_dir, name)].get(key)


def _check_offsets(part: PartitionDescription, log_dir: str, checkpoints: _Checkpoints) -> None:
    """The log directory's checkpoints held against the partition's log."""
    if part.topic is None or part.partition is None or part.log_end_offset is None:
        return
    key = (part.topic, part.partition)
    end = part.log_end_offset
    first_base = part.segments[0].base_offset if part.segments else None
    part.recovery_point = checkpoints.get(log_dir, names.RECOVERY_POINT_CHECKPOINT, key)
    part.checkpointed_log_start = checkpoints.get(log_dir, names.LOG_START_OFFSET_CHECKPOINT, key)
    part.high_watermark = checkpoints.get(log_dir, names.REPLICATION_OFFSET_CHECKPOINT, key)
    part.cleaner_offset = checkpoints.get(log_dir, names.CLEANER_OFFSET_CHECKPOINT, key)

    def where(name: str) -> str:
        return os.path.join(log_dir, name)

    start = part.checkpointed_log_start
    part.log_start_offset = first_base if start is None else max(
        start, first_base if first_base is not None else start)
    if start is not None and start > end:
        part.problems.append(Finding(
            LOG_START_PAST_END, "log start offset %d is past the log end offset %d: the broker "
            "deletes every segment when it loads the log (LogLoader)" % (start, end),
            where(names.LOG_START_OFFSET_CHECKPOINT), checkpointOffset=start, logEndOffset=end))
        part.log_start_offset = start
    elif start is not None and first_base is not None and start < first_base:
        part.notes.append(Finding(
            LOG_START_BELOW_LOG, "log start offset %d is below the first segment's base offset "
            "%d: the broker starts the log at %d (LogLoader)" % (start, first_base, first_base),
            where(names.LOG_START_OFFSET_CHECKPOINT), checkpointOffset=start))
    if part.recovery_point is not None and part.recovery_point > end:
        part.problems.append(Finding(
            RECOVERY_POINT_PAST_END, "recovery point %d is past the log end offset %d: data "
            "flushed before the checkpoint is gone" % (part.recovery_point, end),
            where(names.RECOVERY_POINT_CHECKPOINT), checkpointOffset=part.recovery_point,
            logEndOffset=end))
    hw, low = part.high_watermark, part.log_start_offset
    if hw is not None and (hw > end or (low is not None and hw < low)):
        part.problems.append(Finding(
            HIGH_WATERMARK_OUT_OF_RANGE, "high watermark %d is outside [log start offset %s, "
            "log end offset %d]" % (hw, low, end), where(names.REPLICATION_OFFSET_CHECKPOINT),
            checkpointOffset=hw, logStartOffset=low, logEndOffset=end))
    cleaner = part.cleaner_offset
    if cleaner is not None and (cleaner > end or (low is not None and cleaner < low)):
        part.notes.append(Finding(
            CLEANER_OFFSET_OUT_OF_RANGE, "cleaner offset %d is outside [log start offset %s, "
            "log end offset %d]: the cleaner starts again from the log start "
            "(LogCleanerManager)" % (cleaner, low, end), where(names.CLEANER_OFFSET_CHECKPOINT),
            checkpointOffset=cleaner))


def _leader_epochs(part: PartitionDescription) -> None:
    path = os.path.join(part.directory, names.LEADER_EPOCH_CHECKPOINT)
    if not os.path.lexists(path):
        return
    try:
        part.leader_epochs = read_checkpoint_strict(path)
    except (OSError, FileFormatError) as e:
        text = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        part.problems.append(Finding(UNREADABLE, text.replace(path + ": ", "", 1), path))
        return
    end = part.log_end_offset
    for epoch, start in part.leader_epochs:
        if end is not None and start >= end:
            part.notes.append(Finding(
                LEADER_EPOCH_PAST_END, "epoch %d starts at offset %d, at or past the log end "
                "offset %d: the broker drops the entry when it loads the log "
                "(LeaderEpochFileCache.truncateFromEnd)" % (epoch, start, end), path,
                epoch=epoch, startOffset=start))


def _snapshots(part: PartitionDescription, partition: Partition) -> None:
    for offset, path in partition.snapshot_paths():
        try:
            producers: Optional[int] = len(read_snapshot(path))
        except (OSError, FileFormatError) as e:
            producers = None
            text = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            part.problems.append(Finding(UNREADABLE, text, path))
        part.snapshots.append((offset, producers))
        end = part.log_end_offset
        if end is not None and offset > end:
            part.notes.append(Finding(
                SNAPSHOT_PAST_END, "producer snapshot at offset %d is past the log end offset "
                "%d: the broker deletes it when it loads the log" % (offset, end), path,
                offset=offset))


def describe_partition(directory: str, checkpoints: Optional[_Checkpoints] = None,
                       max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
                       ) -> PartitionDescription:
    """Describe the partition directory ``directory``. Raises OSError when the directory or
    a segment's .log cannot be read."""
    if checkpoints is None:
        checkpoints = _Checkpoints()
    part = PartitionDescription(directory)
    partition = Partition(directory)
    segments = partition.segments()
    for i, segment in enumerate(segments):
        part.segments.append(describe_segment(segment, i == len(segments) - 1, max_message_size,
                                              part.topic, part.partition))
    for prev, nxt in zip(part.segments, part.segments[1:]):
        if (prev.last_offset is not None and nxt.base_offset is not None
                and prev.last_offset >= nxt.base_offset):
            part.problems.append(Finding(
                SEGMENT_OVERLAP, "%s reaches offset %d, at or past the next segment's base "
                "offset %d" % (os.path.basename(prev.path), prev.last_offset, nxt.base_offset),
                prev.path, lastOffset=prev.last_offset, nextBaseOffset=nxt.base_offset))
    if part.segments:
        part.log_end_offset = part.segments[-1].next_offset
        part.log_start_offset = part.segments[0].base_offset
    else:
        part.notes.append(Finding(NO_SEGMENTS, "no segment (.log) in the partition", directory))
    _check_offsets(part, partition.log_dir, checkpoints)
    _leader_epochs(part)
    _snapshots(part, partition)
    return part


def describe(path: str, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> Description:
    """Describe what ``path`` stands for: a log directory (every partition), a partition
    directory, or a segment's .log (that segment alone). Raises UsageError for a file that is
    not a .log, OSError when ``path`` cannot be read or holds no partition; a partition or
    segment that cannot be read is in ``errors``, the rest still described."""
    out = Description()
    if os.path.isfile(path):
        partitions_of(path)  # UsageError for a file that is not a .log
        segment = Segment.at(path)
        directory = os.path.dirname(os.path.abspath(path))
        topic, number = names.topic_partition(directory)
        live = names.live_log_bases(os.listdir(directory))
        active = segment.base_offset is not None and bool(live) and \
            live[-1] == segment.base_offset and not segment.suffix
        out.segments.append(describe_segment(segment, active, max_message_size, topic, number))
        return out
    errors: List[Tuple[str, OSError]] = []
    directories = partitions_of(path, errors)
    out.errors.extend(errors)
    checkpoints = _Checkpoints()
    for directory in directories:
        try:
            out.partitions.append(describe_partition(directory, checkpoints, max_message_size))
        except OSError as e:
            out.errors.append((e.filename or directory, e))
    out.problems = checkpoints.problems
    return out


__all__ = ["Description", "PartitionDescription", "SegmentDescription", "IndexHealth", "Finding",
           "describe", "describe_partition", "describe_segment"]
