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
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Set, Tuple, Union

from ..format import codecs
from ..format.errors import CorruptRecordError, LimitExceededError
from ..format.records import (ATTR_CODEC, ATTR_DELETE_HORIZON, ATTR_TIMESTAMP_TYPE, INT64_MAX,
                              INT64_MIN, LOG_APPEND_TIME, LOG_OVERHEAD, V2_HEADER, V2_OVERHEAD,
                              Batch)
from ..format.scan import MIN_HEADER, InvalidBytes
from ..format.validity import MAX_RELATIVE_OFFSET, Misplaced, OffsetOrder, crc_problem
from . import names
from .files import FileFormatError, printable_name
from .findings import (CLEANER_OFFSET_OUT_OF_RANGE, CRC_MISMATCH, HIGH_WATERMARK_OUT_OF_RANGE,
                       INDEX_MISSING, INDEX_SANITY, INDEX_ZERO_TAIL, INVALID_BYTES,
                       LEADER_EPOCH_PAST_END, LOG_START_BELOW_LOG, LOG_START_PAST_END, NO_SEGMENTS,
                       OFFSET_ORDER, RECOVERY_POINT_PAST_END, SEGMENT_OVERLAP, SNAPSHOT_PAST_END,
                       UNREADABLE, UNREADABLE_RECORDS, Finding)
from .index import OffsetIndex, TimeIndex
from .leader_epochs import read_checkpoint_strict
from .logdir import LogDir, partitions_of
from .partition import Partition
from .report import Report, field, report
from .segment import DEFAULT_MAX_MESSAGE_SIZE, LogFile, Segment
from .snapshot import read_snapshot

if TYPE_CHECKING:
    from .topic_config import ClusterConfigs


@report
class IndexHealth(Report):
    """One index file of a segment.

    ``path``: the file's path; ``kind``: its Kafka kind (``names.INDEX`` or
    ``names.TIMEINDEX``); ``entries``: its real entries (None: not read); ``sanity``: the
    messages of the broker's sanity check's findings (empty when sound); ``zero_tail``: the
    all-zero entries after the last real one (a preallocated index's tail); ``error``: why it
    could not be read (None: it was)."""

    path: str
    kind: str
    entries: Optional[int] = None
    sanity: List[str] = field(default_factory=list)
    zero_tail: int = 0
    error: Optional[str] = None


@report
class SegmentDescription(Report):
    """One segment.

    ``path``: its .log file; ``base_offset``: the offset its name holds (None: the name holds
    none); ``active``: the partition's last segment; ``topic``/``partition``: the partition
    its directory names (None: not a partition directory's name); ``size``: the .log's bytes;
    ``first_offset``/``last_offset``: the first batch's base offset and the largest last
    offset (None for a segment without batches); ``records``/``batches``: how many (from the
    batch headers); ``min_timestamp``/``max_timestamp`` (ms; None when no batch carries one);
    ``codecs``: the compression codecs' names, sorted; ``magic``: the batch versions, sorted;
    ``offset_index``/``time_index``: their health (None: not looked at); ``problems``: the
    inconsistencies found; ``notes``: what the broker takes in its stride.
    ``next_offset``: the offset after its last batch (its base offset when empty:
    LogSegment.readNextOffset)."""

    path: str
    base_offset: Optional[int]
    active: bool
    topic: Optional[str]
    partition: Optional[int]
    size: int = 0
    first_offset: Optional[int] = None
    last_offset: Optional[int] = None
    records: int = 0
    batches: int = 0
    min_timestamp: Optional[int] = None
    max_timestamp: Optional[int] = None
    codecs: List[str] = field(default_factory=list)
    magic: List[int] = field(default_factory=list)
    offset_index: Optional[IndexHealth] = None
    time_index: Optional[IndexHealth] = None
    problems: List[Finding] = field(default_factory=list)
    notes: List[Finding] = field(default_factory=list)

    @property
    def next_offset(self) -> Optional[int]:
        if self.last_offset is not None:
            return self.last_offset + 1
        return self.base_offset


@report
class KraftSnapshotDescription(Report):
    """One KRaft snapshot file (``<20-digit end offset>-<10-digit epoch>.checkpoint``, or
    ``bootstrap.checkpoint``: Snapshots.java, BootstrapDirectory).

    ``path``: the file; ``end_offset``/``epoch``: the snapshot id its name holds
    (OffsetAndEpoch: the metadata log's offsets below ``end_offset`` are in it; None for
    ``bootstrap.checkpoint``); ``size``: its bytes; ``records``/``batches``: how many (from the
    batch headers, control records included; None: not read); ``problems``: what its batches
    hold that is not sound (None-read files have none)."""

    path: str
    end_offset: Optional[int]
    epoch: Optional[int]
    size: int = 0
    records: Optional[int] = None
    batches: Optional[int] = None
    problems: List[Finding] = field(default_factory=list)


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


class _Scan:
    """A segment's batches summed up into ``seg`` as they are met."""

    def __init__(self, seg: SegmentDescription, log: LogFile, segment: Segment) -> None:
        self.seg = seg
        self.log = log
        self.segment = segment
        self.name = segment.log_path
        self.codec_ids: Set[int] = set()
        self.magics: Set[int] = set()
        self.times = _Range()
        self.prev_last: Optional[int] = None
        self.order = OffsetOrder(segment.base_offset)

    def entry(self, item: Union[Batch, InvalidBytes]) -> bool:
        """Count one entry as the shared scanner (``LogFile.entries``) yields it; False at
        bytes that hold no batch (where the scan ends)."""
        seg, name = self.seg, self.name
        if isinstance(item, InvalidBytes):
            seg.problems.append(Finding(
                INVALID_BYTES, "%d bytes at position %d hold no batch (%s): recovery cuts the "
                "log there" % (item.size, item.position, item.reason), name,
                position=item.position, sizeBytes=item.size))
            return False
        batch = item
        seg.batches += 1
        self.codec_ids.add(batch.codec)
        self.magics.add(batch.magic)
        first = batch.base_offset
        crc = None if batch.computed_crc is None else crc_problem(batch)
        if crc is not None:
            seg.problems.append(Finding(
                CRC_MISMATCH, "batch at position %d (offsets %d-%d): %s"
                % (batch.position, batch.base_offset, batch.last_offset, crc), name,
                position=batch.position, baseOffset=batch.base_offset))
        count = batch.count
        if count is not None:  # a v2 batch (magic 2 or above); a legacy entry has none
            seg.records += count
            if count > 0:
                self.times.add(*_v2_time_range(batch))
        elif batch.codec == 0:
            seg.records += 1
            self.times.add(batch.max_timestamp, batch.max_timestamp)
        else:
            first = _legacy_wrapper(seg, self.log, batch, self.times, name)
        self.placed(batch.position, batch.size, first, batch.last_offset)
        return True

    def placed(self, position: int, size: int, first: int, last: int) -> None:
        """Offsets ``first``..``last`` of the batch of ``size`` bytes at ``position`` checked
        against the batches before it and the segment's base offset (format.validity's
        OffsetOrder: a stretch of batches out of place is one finding), and counted."""
        seg = self.seg
        if seg.first_offset is None:
            seg.first_offset = first
        order = self.order
        if order.prev_last != self.prev_last:
            order.forget(self.prev_last)  # batches taken by _scan_headers
        why, stretch = order.check(position, size, first, last)
        if stretch is not None:
            self.misplaced(stretch)
        base = self.segment.base_offset
        if why is None and base is not None and first < base:
            seg.problems.append(Finding(
                OFFSET_ORDER, "batch at position %d: first offset %d is below the segment's "
                "base offset %d" % (position, first, base), self.name,
                position=position, lastOffset=last))
        self.prev_last = order.prev_last
        self.reached(last)

    def reached(self, last: int) -> None:
        """The segment's last offset: the highest of its batches, in place or not."""
        seg = self.seg
        if seg.last_offset is None or last > seg.last_offset:
            seg.last_offset = last

    def taken(self, first_position: int, position: int, before: Optional[int]) -> None:
        """Batches in place taken by _scan_headers, from ``first_position`` to the one at
        ``position`` (taken last, after offset ``before``): a stretch out of place ends at the
        first; the last one is known to OffsetOrder."""
        order = self.order
        stretch = order.resumed(first_position)
        if stretch is not None:
            self.misplaced(stretch)
        order.forget(self.prev_last)
        for batch in self.log.headers(position):
            order.taken = (position, batch.size, batch.base_offset, batch.last_offset, before,
                           None)
            break

    def misplaced(self, stretch: Misplaced, ended: bool = True) -> None:
        """One finding for a stretch of batches out of place."""
        self.seg.problems.append(Finding(
            OFFSET_ORDER, "batch at position %d: %s" % (stretch.position, stretch.text(ended)),
            self.name, position=stretch.position, lastOffset=stretch.high,
            batches=stretch.batches, sizeBytes=stretch.size, resumePosition=stretch.resume))

    def finish(self) -> None:
        seg = self.seg
        stretch = self.order.finish()
        if stretch is not None:
            self.misplaced(stretch)
        seg.codecs = sorted(codecs.codec_name(c) for c in self.codec_ids)
        seg.magic = sorted(self.magics)
        seg.min_timestamp, seg.max_timestamp = self.times.low, self.times.high


def _scan_checked(scan: _Scan) -> None:
    """Every entry through the shared scanner: every byte read, every CRC computed."""
    for item in scan.log.entries():
        if not scan.entry(item):
            break


HEADER_WINDOW = 8192  # bytes read at each position where a header must be read


def _scan_headers(scan: _Scan) -> None:
    """The v2 batches' headers only (FileLogInputStream reads a batch's header and follows
    its size field: so does this), read a window at a time where they lie; the bytes between
    headers are never read. Any entry that is not a plain v2 batch header (a legacy message, a
    size field below the minimum, an entry running past the end, an offset range that
    overflows) goes through the shared scanner (``LogFile.entries``), which judges it by the
    rules every command shares. CRCs are not computed."""
    log, seg = scan.log, scan.seg
    end = log.size
    buf = bytearray(HEADER_WINDOW)
    lo = have = 0
    pos = 0
    unpack = V2_HEADER.unpack_from
    base_limit = scan.segment.base_offset
    ids, times = scan.codec_ids, scan.times
    records = batches = 0
    prev = scan.prev_last
    run_start = taken_at = 0  # where the batches taken in a row start; the last one taken
    before: Optional[int] = None  # the last offset before the last batch taken
    while end - pos >= MIN_HEADER:
        if pos + V2_OVERHEAD > lo + have:
            have = log.read_into(buf, pos)
            lo = pos
        rel = pos - lo
        if have - rel >= V2_OVERHEAD and buf[rel + 16] == 2:
            (base, size, _, _, _, attrs, delta, base_ts, max_ts, _, _, _,
             count) = unpack(buf, rel)
            last = base + delta
            nxt = pos + LOG_OVERHEAD + size
            # a whole header (as format.scan frames it) placed as ``placed`` checks it, tested
            # in line: any other is ``entry``'s to judge
            if (size >= V2_OVERHEAD - LOG_OVERHEAD and nxt <= end and INT64_MIN <= last
                    <= INT64_MAX and (prev is None or last > prev)
                    and (base_limit is None or 0 <= base - base_limit
                         and last - base_limit <= MAX_RELATIVE_OFFSET)):
                batches += 1
                records += count
                ids.add(attrs & ATTR_CODEC)
                if count > 0:
                    if attrs & (ATTR_TIMESTAMP_TYPE | ATTR_DELETE_HORIZON):
                        base_ts = max_ts  # see _v2_time_range
                    times.add(base_ts, max_ts)
                if seg.first_offset is None:
                    seg.first_offset = base
                if batches == 1:
                    run_start = pos
                before, prev, taken_at = prev, last, pos
                pos = nxt
                continue
        # anything else: the shared scanner's judgement of the entry here
        if batches:
            scan.magics.add(2)
            scan.prev_last = prev
            scan.taken(run_start, taken_at, before)
        seg.batches += batches
        seg.records += records
        batches = records = 0
        scan.prev_last = prev
        if prev is not None:
            scan.reached(prev)
        for item in log.entries(pos):
            break
        else:
            return
        if not scan.entry(item):
            return
        prev = scan.prev_last
        pos = item.position + item.size
        lo = have = 0
    seg.batches += batches
    seg.records += records
    if prev is not None:
        scan.prev_last = prev
        scan.reached(prev)
    if batches:
        scan.magics.add(2)
        scan.taken(run_start, taken_at, before)
    if pos < end:
        # fewer bytes than a header needs: the scanner names them
        for item in log.entries(pos):
            scan.entry(item)


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
    health.sanity = [printable_name(m) for m in checked.sanity_problems()]
    return health


def describe_segment(segment: Segment, active: bool,
                     max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                     topic: Optional[str] = None, partition: Optional[int] = None,
                     check_crc: bool = False) -> SegmentDescription:
    """Describe one segment (``active``: its partition's last): from its batch headers, or
    with ``check_crc`` from every byte, each batch's CRC computed. Raises OSError when its
    .log cannot be read."""
    seg = SegmentDescription(segment.log_path, segment.base_offset, active, topic, partition)
    with segment.open(max_message_size) as log:
        seg.size = log.size
        scan = _Scan(seg, log, segment)
        (_scan_checked if check_crc else _scan_headers)(scan)
        scan.finish()
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


def describe_kraft_snapshot(path: str, read: bool = True,
                            max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                            check_crc: bool = False) -> KraftSnapshotDescription:
    """A KRaft snapshot file: its id from its name, its size, and (``read``) its batches and
    records counted as a segment's are (its records are numbered from 0:
    RecordsSnapshotWriter). Raises OSError when it cannot be read."""
    found = names.kraft_snapshot_id(path)
    end, epoch = found if found is not None else (None, None)
    snap = KraftSnapshotDescription(path, end, epoch)
    if not read:
        snap.size = os.stat(path).st_size
        return snap
    segment = Segment.at(path)
    segment.log_path, segment.base_offset = path, 0
    seg = SegmentDescription(path, 0, False, None, None)
    with LogFile(path, max_message_size) as log:
        seg.size = log.size
        scan = _Scan(seg, log, segment)
        (_scan_checked if check_crc else _scan_headers)(scan)
        scan.finish()
    snap.size, snap.records, snap.batches = seg.size, seg.records, seg.batches
    snap.problems = seg.problems
    return snap


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
