"""A log directory, partition or segment at a glance (`kafkalog describe`): offsets, record and
batch counts, sizes, time ranges, codecs, index health, leader epochs, producer snapshots, and
the log directory's checkpoints held against the logs.

Fast by design: a segment is read batch header by batch header, as FileLogInputStream follows
size fields, and the bytes between headers are never read (no CRC is computed unless asked:
``check_crc`` reads every byte through ``LogFile.entries()``, the scan every command shares).
Any entry that is not a plain v2 header goes through that shared scan too, so damage is
judged by the same rules as in `dump`, `verify-index` and `recover`. No v2 batch is
decompressed: its record count is the header's ``recordsCount`` (after compaction
``lastOffsetDelta + 1`` overstates it). A legacy (v0/v1) compressed wrapper has no count: its
inner messages are decoded and counted. Time ranges come
from the headers too: a v2 batch spans ``baseTimestamp`` (its first record's timestamp, as
the producer writes it) to ``maxTimestamp``; a LogAppendTime batch, or one whose
``baseTimestamp`` holds a delete horizon, counts as ``maxTimestamp`` alone.

Inconsistencies are ``problems`` (a command exits 1 on any); what the broker takes in its
stride at load (a stale entry it ignores or drops) is a ``note``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from . import names
from .files import FileFormatError
from .findings import (CLEANER_OFFSET_OUT_OF_RANGE, HIGH_WATERMARK_OUT_OF_RANGE,
                       LEADER_EPOCH_PAST_END, LOG_START_BELOW_LOG, LOG_START_PAST_END, NO_SEGMENTS,
                       RECOVERY_POINT_PAST_END, SEGMENT_OVERLAP, SNAPSHOT_PAST_END,
                       UNREADABLE, Finding)
from .leader_epochs import read_checkpoint_strict
from .logdir import LogDir, partitions_of
from .partition import Partition
from .report import Report, field, report
from .describe_segment import (IndexHealth, KraftSnapshotDescription, SegmentDescription,
                               describe_kraft_snapshot, describe_segment)
from .segment import DEFAULT_MAX_MESSAGE_SIZE, Segment
from .snapshot import read_snapshot

if TYPE_CHECKING:
    from .topic_config import ClusterConfigs


@report
class PartitionDescription(Report):
    """One partition directory: its segments, totals and checkpoints.

    ``directory``: its path; ``topic``/``partition``: what its name says (None: not a
    partition directory's name); ``segments``: oldest first; ``log_start_offset``: the
    broker's (LogLoader: the checkpointed log start, or the first segment's base offset when
    that is higher; None: no segment); ``log_end_offset``: the next offset to be written (None:
    no segment). ``recovery_point``, ``checkpointed_log_start_offset``, ``high_watermark`` and
    ``cleaner_offset``: the log directory's checkpoints' entries for it (None where the file
    has no line for it); ``first_dirty_offset`` and ``dirty_ratio``: the log cleaner's, for a
    compacted topic (its cleanup.policy from the log directory's metadata partition; None for
    another topic, or when the log directory holds no metadata partition); ``leader_epochs``:
    the leader-epoch-checkpoint's (epoch, start offset) entries; ``snapshots``: the producer
    snapshots' (offset, producers; None: the snapshot could not be read); ``kraft_snapshots``:
    the KRaft snapshots of a metadata partition, oldest first (by end offset, then epoch), the
    newest one read (its records and batches), the others known by name and size; ``problems`` and
    ``notes``: the partition's own (its segments' are theirs). ``records``, ``batches``,
    ``size``: its segments' totals."""

    directory: str
    topic: Optional[str] = field(init=False)
    partition: Optional[int] = field(init=False)
    segments: List[SegmentDescription] = field(default_factory=list)
    log_start_offset: Optional[int] = None
    log_end_offset: Optional[int] = None
    recovery_point: Optional[int] = None
    checkpointed_log_start_offset: Optional[int] = None
    high_watermark: Optional[int] = None
    cleaner_offset: Optional[int] = None
    first_dirty_offset: Optional[int] = None
    dirty_ratio: Optional[float] = None
    leader_epochs: List[Tuple[int, int]] = field(default_factory=list)
    snapshots: List[Tuple[int, Optional[int]]] = field(default_factory=list)
    kraft_snapshots: List[KraftSnapshotDescription] = field(default_factory=list)
    problems: List[Finding] = field(default_factory=list)
    notes: List[Finding] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.topic, self.partition = names.topic_partition(self.directory)

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
        return ([p for s in self.segments for p in s.problems] + self.problems
                + [p for k in self.kraft_snapshots for p in k.problems])

    def all_notes(self) -> List[Finding]:
        return [n for s in self.segments for n in s.notes] + self.notes


@report
class Description(Report):
    """What a path stands for, described.

    ``partitions``: a log directory's or one partition's; ``segments``: for a segment's .log
    named alone, that segment only; ``kraft_snapshots``: for KRaft snapshot files named alone,
    those (read); ``errors``: (path, exception) for what could not be read at
    all (the others are still described); ``problems``: the log directory's own (an unreadable
    checkpoint)."""

    partitions: List[PartitionDescription] = field(default_factory=list)
    segments: List[SegmentDescription] = field(default_factory=list)
    kraft_snapshots: List[KraftSnapshotDescription] = field(default_factory=list)
    errors: List[Tuple[str, BaseException]] = field(default_factory=list)
    problems: List[Finding] = field(default_factory=list)

    def all_segments(self) -> List[SegmentDescription]:
        return self.segments + [s for p in self.partitions for s in p.segments]

    def all_kraft_snapshots(self) -> List[KraftSnapshotDescription]:
        return self.kraft_snapshots + [k for p in self.partitions for k in p.kraft_snapshots]

    def all_problems(self) -> List[Finding]:
        return (self.problems + [p for s in self.segments for p in s.problems]
                + [p for k in self.kraft_snapshots for p in k.problems]
                + [p for part in self.partitions for p in part.all_problems()])

    def all_notes(self) -> List[Finding]:
        return ([n for s in self.segments for n in s.notes]
                + [n for part in self.partitions for n in part.all_notes()])

    @property
    def consistent(self) -> bool:
        return not self.all_problems()


def _kraft_snapshots(part: PartitionDescription, max_message_size: int,
                     check_crc: bool) -> None:
    """The partition's KRaft snapshots, by end offset then epoch; the newest read."""
    ids = sorted((found, n) for n in os.listdir(part.directory)
                 for found in [names.kraft_snapshot_id(n)] if found is not None)
    for i, (_, n) in enumerate(ids):
        path = os.path.join(part.directory, n)
        try:
            part.kraft_snapshots.append(describe_kraft_snapshot(
                path, i == len(ids) - 1, max_message_size, check_crc))
        except OSError as e:
            part.problems.append(Finding(UNREADABLE, e.strerror or str(e), path))


# -- a partition -----------------------------------------------------------------------------------

class _Checkpoints:
    """The log directories whose offset checkpoints the partitions described are held
    against (each a LogDir, which reads a checkpoint once), and the findings of the files
    that could not be read, one each."""

    def __init__(self, directories: Sequence[str] = ()) -> None:
        self.log_dirs: Dict[str, LogDir] = {}
        self.configs: Dict[str, Optional[ClusterConfigs]] = {}
        self.problems: List[Finding] = []
        for directory in directories:  # held before any checkpoint is read: one read each
            self.partition(directory)

    def cluster_configs(self, log_dir: str) -> "Optional[ClusterConfigs]":
        """The topic settings of the log directory's metadata partition, read once (None when
        it holds none, or it cannot be read)."""
        if log_dir not in self.configs:
            found = None
            if os.path.isdir(os.path.join(log_dir, "__cluster_metadata-0")):
                from ..errors import InvalidDataError
                from .topic_config import cluster_configs  # (here: only a KRaft log dir needs it)
                try:
                    found = cluster_configs(log_dir)
                except (InvalidDataError, OSError):
                    found = None
            self.configs[log_dir] = found
        return self.configs[log_dir]

    def partition(self, directory: str) -> Partition:
        log_dir = os.path.dirname(os.path.abspath(directory))
        parent = self.log_dirs.get(log_dir)
        if parent is None:
            parent = self.log_dirs[log_dir] = LogDir(log_dir)
        return parent.holding(directory)

    def get(self, partition: Partition, name: str) -> Optional[int]:
        topic, number = partition.topic, partition.number
        if topic is None or number is None:
            return None
        try:
            # a file present that is not a regular file is a finding too
            return partition.parent.offset_checkpoint(name, [(topic, number)]).get((topic, number))
        except (OSError, FileFormatError) as e:
            path = os.path.join(partition.log_dir, name)
            text = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            if text.startswith(path + ": "):
                text = text[len(path) + 2:]
            if not any(f.file == path for f in self.problems):
                self.problems.append(Finding(UNREADABLE, text, path))
            return None


def _check_offsets(part: PartitionDescription, partition: Partition,
                   checkpoints: _Checkpoints) -> None:
    """The log directory's checkpoints held against the partition's log."""
    if part.topic is None or part.partition is None or part.log_end_offset is None:
        return
    log_dir = partition.log_dir
    end = part.log_end_offset
    first_base = part.segments[0].base_offset if part.segments else None
    part.recovery_point = checkpoints.get(partition, names.RECOVERY_POINT_CHECKPOINT)
    part.checkpointed_log_start_offset = checkpoints.get(partition,
                                                         names.LOG_START_OFFSET_CHECKPOINT)
    part.high_watermark = checkpoints.get(partition, names.REPLICATION_OFFSET_CHECKPOINT)
    part.cleaner_offset = checkpoints.get(partition, names.CLEANER_OFFSET_CHECKPOINT)
    configs = checkpoints.cluster_configs(log_dir)
    if configs is not None:
        from .cleaner import cleaner_status
        from .topic_config import topic_config
        config = topic_config(part.topic, configs)
        if config.compacted:
            # LogCleanerManager.cleanableOffsets and calculateCleanableBytes
            status = cleaner_status(partition, config, simulate=False)
            part.first_dirty_offset, part.dirty_ratio = status.first_dirty_offset, \
                status.dirty_ratio

    def where(name: str) -> str:
        return os.path.join(log_dir, name)

    start = part.checkpointed_log_start_offset
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
                       max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                       check_crc: bool = False) -> PartitionDescription:
    """Describe the partition directory ``directory``. Raises OSError when the directory or
    a segment's .log cannot be read."""
    if checkpoints is None:
        checkpoints = _Checkpoints()
    part = PartitionDescription(directory)
    partition = checkpoints.partition(directory)
    segments = partition.segments()
    for i, segment in enumerate(segments):
        part.segments.append(describe_segment(segment, i == len(segments) - 1, max_message_size,
                                              part.topic, part.partition, check_crc))
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
    _check_offsets(part, partition, checkpoints)
    _leader_epochs(part)
    _snapshots(part, partition)
    _kraft_snapshots(part, max_message_size, check_crc)
    return part


def describe(path: str, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
             check_crc: bool = False) -> Description:
    """Describe what ``path`` stands for: a log directory (every partition), a partition
    directory, a segment's .log (that segment alone) or a KRaft snapshot file (that file
    alone). Raises UsageError for a file that is neither, OSError when ``path`` cannot be read
    or holds no partition; a partition or segment that cannot be read is in ``errors``, the
    rest still described. ``check_crc``: read every byte and check each batch's CRC (by
    default only batch headers are read)."""
    out = Description()
    if os.path.isfile(path) and names.file_kind(path) == names.KRAFT_SNAPSHOT:
        out.kraft_snapshots.append(describe_kraft_snapshot(path, True, max_message_size,
                                                           check_crc))
        return out
    if os.path.isfile(path):
        partitions_of(path)  # UsageError for a file that is not a .log
        segment = Segment.at(path)
        directory = os.path.dirname(os.path.abspath(path))
        topic, number = names.topic_partition(directory)
        live = names.live_log_bases(os.listdir(directory))
        active = segment.base_offset is not None and bool(live) and \
            live[-1] == segment.base_offset and not segment.suffix
        out.segments.append(describe_segment(segment, active, max_message_size, topic, number,
                                             check_crc))
        return out
    errors: List[Tuple[str, OSError]] = []
    directories = partitions_of(path, errors)
    out.errors.extend(errors)
    checkpoints = _Checkpoints(directories)
    for directory in directories:
        try:
            out.partitions.append(describe_partition(directory, checkpoints, max_message_size,
                                                     check_crc))
        except OSError as e:
            out.errors.append((e.filename or directory, e))
    out.problems = checkpoints.problems
    return out


__all__ = ["Description", "PartitionDescription", "SegmentDescription", "IndexHealth",
           "KraftSnapshotDescription", "describe", "describe_kraft_snapshot",
           "describe_partition", "describe_segment"]
