"""`kafkalog describe` of one segment and of one KRaft snapshot file: the header-by-header scan
(FileLogInputStream's walk over size fields; the bytes between headers never read unless a CRC
is asked for), index health, and their typed reports. ``describe.py`` builds partitions and log
directories from these."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, List, Optional, Set, Tuple, Union

from ..format import codecs
from ..format.errors import CorruptRecordError, LimitExceededError
from ..format.records import (ATTR_CODEC, ATTR_DELETE_HORIZON, ATTR_TIMESTAMP_TYPE, INT64_MAX,
                              INT64_MIN, LOG_APPEND_TIME, LOG_OVERHEAD, V2_HEADER, V2_OVERHEAD,
                              Batch)
from ..format.scan import MIN_HEADER, InvalidBytes
from ..format.validity import MAX_RELATIVE_OFFSET, Misplaced, OffsetOrder, crc_problem
from . import names
from .files import FileFormatError, printable_name
from .findings import (CRC_MISMATCH, INDEX_MISSING, INDEX_SANITY, INDEX_ZERO_TAIL, INVALID_BYTES,
                       OFFSET_ORDER, UNREADABLE, UNREADABLE_RECORDS, Finding)
from .index import OffsetIndex, TimeIndex
from .report import Report, field, report
from .segment import DEFAULT_MAX_MESSAGE_SIZE, LogFile, Segment

if TYPE_CHECKING:
    pass



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
