"""One pass of the log cleaner over a partition, offline (Kafka's Cleaner.doClean).

The pass cleans from the first dirty offset up to the first uncleanable offset as
``cleaner.cleaner_status`` finds them (LogCleanerManager.cleanableOffsets), with the offset map
``cleaner.build_offset_map`` builds (SkimpyOffsetMap: a full map ends the pass early). The
segments below the map's reach are grouped as Cleaner.groupSegmentsBySize groups them, and each
group is copied into one new segment (Cleaner.cleanSegments, cleanInto): each source segment is
read a cleaner I/O buffer at a time (growing it for a larger batch, as growBuffersOrFail), each
chunk filtered as MemoryRecords.filterTo filters it with the cleaner's RecordFilter
(shouldRetainRecord: the last record of each key, tombstones until their delete horizon;
CleanedTransactionMetadata: aborted transactions' batches removed, markers kept while
needed; the batches holding an active producer's last sequence kept, empty if need be) and the
retained batches appended to the new segment at once (LogSegment.append: an index entry when
index.interval.bytes have passed). A v2 batch whose records are all kept is copied as it is;
one that loses records, or holds a tombstone or an empty transaction's marker not yet stamped,
and every v0/v1 message set kept, is written again as MemoryRecords.buildRetainedRecordsInto
writes it (format/encode.py: a v2 batch, its codec at Kafka's default level, the delete horizon
stamped in its base timestamp, a v2 batch's last offset and sequence kept).

Carried out as LocalLog.replaceSegments (replace_segments.py), the whole pass at once: every
group's new segment written as ``.cleaned`` files (a batch the broker's cleaner would fail on
stops the pass with nothing changed); an intent file written (``.kafkalog-compact-intent``: the
pass's end offset and each new segment's size and CRC); the ``.cleaned`` files renamed
``.swap`` from the highest group down, each group's .log last (until the lowest group's .log
is renamed, a kill leaves a swap LogLoader and ``recover`` undo whole; from then on one they
complete whole); the old segments renamed ``.deleted`` (kept: ``recover`` sets them aside in
its quarantine, ``retain`` removes them after its file delete delay), the ``.swap`` files
renamed into place; then ``cleaner-offset-checkpoint`` is updated and the intent removed. A
rerun after a kill and ``recover`` reads the intent: the new segments in place, it writes
their indexes where recover (as LogLoader) left others, and the checkpoint; else the pass is
made again."""

from __future__ import annotations

import hashlib
import heapq
import os
import time
import zlib
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Set, Tuple, Union

from ..errors import InvalidDataError
from ..format.control import ABORT, COMMIT, control_type
from ..format.encode import encode_empty_v2, encode_retained_v2
from ..format.records import (Batch)
from . import names
from .cleaner import (CleanerStatus, _segments_overlapping, build_offset_map,
                      status_and_aborted)
from .indexbuild import (IndexBuilder, txn_index_bytes)
from .lock import LogDirLock
from .logdir import CleanShutdownMarker
from .offset_map import OffsetMap
from .partition import Partition
from .producer_state import rebuild
from .replace_segments import (CompactError, finish, finish_interrupted, remove_cleaned, swap_in,
                               to_swap, write_intent)
from .report import Report, field, report
from .segment import LogFile, Segment
from .topic_config import TopicConfig

if TYPE_CHECKING:
    from .verify import TargetError

NO_TIMESTAMP = -1
INT32_MAX = (1 << 31) - 1

# why a partition is not cleaned
NOT_COMPACTED = "its cleanup.policy does not include compact"
NOTHING_DIRTY = "nothing to clean: the first dirty offset is the first uncleanable offset"
UNCLEANABLE = "the broker's cleaner would fail on it"


@report
class CleanedGroup(Report):
    """One new segment: the segments it replaces (``bases``), what they held and what it
    holds. ``records_*`` count records (a control batch's marker included), ``batches_*``
    batches (an empty batch kept for a producer's state counts among the kept)."""

    base_offset: int
    bases: List[int] = field(default_factory=list)
    records_before: int = 0
    records_after: int = 0
    batches_before: int = 0
    batches_after: int = 0
    batches_rewritten: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    tombstones_removed: int = 0
    markers_removed: int = 0
    horizons_stamped: int = 0
    aborted_records_removed: int = 0


@report
class CompactionResult(Report):
    """The pass over the partition in ``directory`` at ``now_ms`` (carried out unless
    ``dry_run``): the cleaner's view before it (``status``), the range it cleaned up to
    ``end_offset`` (the new cleaner checkpoint), its groups, or why it was ``skipped``."""

    directory: str
    topic: Optional[str]
    partition: Optional[int]
    now_ms: int
    dry_run: bool
    status: CleanerStatus
    skipped: Optional[str] = None
    first_dirty_offset: Optional[int] = None
    end_offset: Optional[int] = None
    groups: List[CleanedGroup] = field(default_factory=list)
    renamed: List[str] = field(default_factory=list)

    @property
    def records_before(self) -> int:
        return sum(g.records_before for g in self.groups)

    @property
    def records_removed(self) -> int:
        return sum(g.records_before - g.records_after for g in self.groups)

    @property
    def bytes_before(self) -> int:
        return sum(g.bytes_before for g in self.groups)

    @property
    def bytes_removed(self) -> int:
        return sum(g.bytes_before - g.bytes_after for g in self.groups)

    @property
    def tombstones_removed(self) -> int:
        return sum(g.tombstones_removed for g in self.groups)


# -- the cleaner's transaction bookkeeping (CleanedTransactionMetadata) -----------------------

class _TxnMetadata:
    """CleanedTransactionMetadata: the aborted transactions met so far (from the
    .txnindex entries, first offset order), the producers in an aborted or committed one, and
    the .txnindex entries of the new segment (an aborted transaction whose marker is kept)."""

    def __init__(self) -> None:
        self._queue: List[Tuple[int, int, Tuple[int, int, int, int]]] = []
        self._seen: Set[Tuple[int, int, int, int]] = set()
        self._n = 0
        self.ongoing_committed: Set[int] = set()
        self.ongoing_aborted: Dict[int, List[object]] = {}  # pid -> [entry, last batch seen]
        self.cleaned_index: Optional[List[Tuple[int, int, int, int]]] = None

    def add_aborted(self, entries: List[Tuple[int, int, int, int]]) -> None:
        for entry in entries:
            if entry not in self._seen:
                self._seen.add(entry)
                self._n += 1
                heapq.heappush(self._queue, (entry[1], self._n, entry))

    def _consume_up_to(self, offset: int) -> None:
        while self._queue and self._queue[0][0] <= offset:
            entry = heapq.heappop(self._queue)[2]
            self.ongoing_aborted.setdefault(entry[0], [entry, None])

    def on_control(self, batch: Batch, marker: Optional[int]) -> bool:
        """True when the control batch can be discarded."""
        self._consume_up_to(batch.last_offset)
        if marker is None:
            return True   # an empty control batch: already cleaned
        pid = batch.producer_id
        if marker == ABORT:
            meta = self.ongoing_aborted.pop(pid, None)
            if meta is not None and meta[1] is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(meta[0])  # type: ignore[arg-type]
                return False
            return True
        if marker == COMMIT:
            if pid in self.ongoing_committed:
                self.ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch(self, batch: Batch) -> bool:
        """True when the data batch belongs to an aborted transaction."""
        self._consume_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        meta = self.ongoing_aborted.get(batch.producer_id)
        if meta is not None:
            meta[1] = batch.last_offset
            return True
        self.ongoing_committed.add(batch.producer_id)
        return False


def _aborted_entries(segments: List[Segment], start: int, upper: int
                     ) -> List[Tuple[int, int, int, int]]:
    """UnifiedLog.collectAbortedTransactions(start, upper): the .txnindex entries of the
    segments from the one holding ``start`` on that overlap [start, upper)."""
    out = []
    for segment in _segments_overlapping(segments, start, max(upper, start + 1)) or segments[-1:]:
        if not os.path.exists(segment.txn_index_path):
            continue
        for e in segment.txn_index().entries:
            if e.last_offset >= start and e.first_offset < upper:
                out.append((e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset))
    return out


# -- the new segment ---------------------------------------------------------------------------

class _CleanedSegment:
    """The segment a group is copied into (LogSegment as Cleaner writes it): the .log written
    batch by batch, its index entries as LogSegment.append adds them (an offset index entry
    once index.interval.bytes have passed, a time index entry when the max timestamp has
    grown; the last at onBecomeInactiveSegment); nothing written when ``directory`` is None
    (a dry run)."""

    def __init__(self, directory: Optional[str], base: int, interval: int) -> None:
        self.base = base
        self.size = 0
        self.crc = 0  # of the .log written
        self.indexes = IndexBuilder(base, interval)
        self._fd: Optional[int] = None
        if directory is not None:
            path = os.path.join(directory, names.offset_name(base, names.LOG, names.CLEANED))
            self._fd = _create(path)
            self.path = path

    def append(self, data: bytes, last_offset: int, max_timestamp: int) -> None:
        if self._fd is not None:
            self.crc = zlib.crc32(data, self.crc)
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
        self.indexes.add(self.size, len(data), last_offset, max_timestamp)
        self.size += len(data)

    def seal(self) -> None:
        self.indexes.finish()
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None

    def abandon(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            os.unlink(self.path)


def _create(path: str) -> int:
    """A new file at ``path`` (O_EXCL|O_NOFOLLOW); a stale one there (of a pass a crash
    interrupted) is removed first, never followed."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags, 0o644)
    except FileExistsError:
        os.unlink(path)
        return os.open(path, flags, 0o644)


def _write_new(path: str, data: bytes) -> None:
    fd = _create(path)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


# -- the pass ----------------------------------------------------------------------------------

class _Pass:
    """Cleaner.doClean's state over one partition."""

    def __init__(self, partition: Partition, status: CleanerStatus, keys: OffsetMap,
                 latest: int, now: int, write: bool) -> None:
        self.partition = partition
        self.status = status
        self.config: TopicConfig = status.config
        self.keys = keys
        self.latest = latest
        self.now = now
        self.write = write
        self.upper_bound = status.first_uncleanable_offset or 0
        self.retention = self.config.integer("delete.retention.ms")
        self.max_message = self.config.integer("max.message.bytes")
        self.active_last: Dict[int, Tuple[Optional[int], int]] = {}
        self.txn = _TxnMetadata()
        # each new segment written: {base offset: (.log size, its CRC-32, .txnindex bytes)}
        self.written: Dict[int, Tuple[int, int, bytes]] = {}

    def active_producers(self, segments: List[Segment], log_end: int) -> None:
        """UnifiedLog.lastRecordsOfActiveProducers: each producer the state at the log end
        holds (those expired by now dropped, as a broker loading it drops them), with the last
        offset of its last data batch (None when it has none) and its epoch."""
        state = rebuild(segments, log_end, log_start_offset=self.status.log_start_offset or 0
                        ).state
        for pid, entry in state.producers.items():
            if state.is_expired(entry, self.now):
                continue
            last = entry.batches[-1].last_offset if entry.batches else None
            self.active_last[pid] = (last, entry.epoch)

    def _last_of_producer(self, batch: Batch) -> bool:
        found = self.active_last.get(batch.producer_id)
        if found is None:
            return False
        last, epoch = found
        if last is not None:
            return batch.last_offset == last
        return batch.is_control and batch.producer_epoch == epoch

    def clean_group(self, segments: List[Segment], group: List[Segment],
                    legacy_horizon: int) -> CleanedGroup:
        directory = self.partition.directory
        base = group[0].base_offset or 0
        report_ = CleanedGroup(base, [s.base_offset or 0 for s in group])
        out = _CleanedSegment(directory if self.write else None, base,
                              self.config.integer("index.interval.bytes"))
        txn = self.txn
        txn.cleaned_index = []
        try:
            for i, segment in enumerate(group):
                upper = (group[i + 1].base_offset or 0) if i + 1 < len(group) \
                    else segment.next_offset()
                txn.add_aborted(_aborted_entries(segments, segment.base_offset or 0, upper))
                retain_legacy = int(os.path.getmtime(segment.log_path) * 1000) > legacy_horizon
                self._clean_into(segment, out, retain_legacy, report_)
            out.seal()
        except BaseException:
            out.abandon()
            raise
        report_.bytes_after = out.size
        if self.write:
            self._write_indexes(out, txn.cleaned_index, group[-1])
        return report_

    def _write_indexes(self, out: _CleanedSegment, aborted: List[Tuple[int, int, int, int]],
                       last: Segment) -> None:
        directory = self.partition.directory
        base = out.base
        _write_new(os.path.join(directory, names.offset_name(base, names.INDEX, names.CLEANED)),
                   out.indexes.offset_index_bytes())
        _write_new(os.path.join(directory, names.offset_name(base, names.TIMEINDEX,
                                                             names.CLEANED)),
                   out.indexes.time_index_bytes())
        txn = txn_index_bytes(aborted)
        if txn:
            _write_new(os.path.join(directory, names.offset_name(base, names.TXNINDEX,
                                                                 names.CLEANED)), txn)
        self.written[base] = (out.size, out.crc, txn)
        # the segment keeps the last modified time of the last one it replaces
        mtime = os.stat(last.log_path).st_mtime_ns
        for kind in (names.LOG, names.TIMEINDEX):
            os.utime(os.path.join(directory, names.offset_name(base, kind, names.CLEANED)),
                     ns=(mtime, mtime))

    def _clean_into(self, segment: Segment, out: _CleanedSegment, retain_legacy: bool,
                    group: CleanedGroup) -> None:
        """Cleaner.cleanInto: each batch of the segment filtered, what is kept appended to
        ``out``. (The broker reads the segment an I/O buffer at a time, growing the buffer for
        a larger batch; LogSegment.append indexes batch by batch, so the chunks leave no
        trace in the files.)"""
        with segment.open(self.max_message) as log:
            for item in log.entries():
                if not isinstance(item, Batch):
                    raise CompactError("%s: %d bytes at position %d hold no batch: the broker's "
                                       "cleaner fails there" % (segment.log_path, item.size,
                                                                item.position))
                if item.last_offset - out.base > INT32_MAX:
                    # LogSegment.ensureOffsetInRange: the broker splits the segment first
                    raise CompactError("%s: offset %d is beyond the 32-bit reach of the new "
                                       "segment's base offset %d: the broker's cleaner splits "
                                       "the segment first (kafkalog recover does)"
                                       % (segment.log_path, item.last_offset, out.base))
                kept = self._filter(log, item, retain_legacy, group)
                if kept is not None:
                    out.append(*kept)

    def _filter(self, log: LogFile, batch: Batch, retain_legacy: bool, group: CleanedGroup
                ) -> Optional[Tuple[bytes, int, int]]:
        """MemoryRecords.filterTo of one batch with the cleaner's RecordFilter: the bytes kept
        (None when the batch goes), with the last offset and max timestamp of their header."""
        group.batches_before += 1
        group.bytes_before += batch.size
        try:
            records = log.records(batch)
        except (InvalidDataError, ValueError) as e:
            raise CompactError("%s: the records of the batch at position %d (offset %d) cannot "
                               "be read (%s): the broker's cleaner fails there"
                               % (log.path, batch.position, batch.base_offset, e))
        n = len(records.offsets)
        group.records_before += n
        # checkBatchRetention
        if batch.is_control:
            marker = None
            if n:
                try:
                    marker = control_type(records.keys[0])
                except InvalidDataError:
                    marker = -1
            can_discard = self.txn.on_control(batch, marker)
            horizon = batch.delete_horizon_ms
            discard_records = can_discard and horizon is not None and horizon <= self.now
        else:
            can_discard = self.txn.on_batch(batch)
            discard_records = can_discard
        marker_for_empty_txn = can_discard and batch.is_control
        has_pid = batch.magic >= 2 and batch.producer_id >= 0
        if has_pid and self._last_of_producer(batch):
            retention = "RETAIN_EMPTY"
        elif batch.last_offset + 1 == self.upper_bound:
            retention = "RETAIN_EMPTY"
        elif discard_records:
            retention = "DELETE"
        else:
            retention = "DELETE_EMPTY"
        if retention == "DELETE":
            if batch.is_control:
                group.markers_removed += 1
            elif can_discard:
                group.aborted_records_removed += n
            return None
        # shouldRetainRecord, record by record
        keep: List[int] = []
        tombstones = False
        if discard_records:
            if not batch.is_control:
                group.aborted_records_removed += n
        elif batch.is_control:
            keep = list(range(n))
        else:
            # the delete horizon's rule for tombstones (v0/v1: the segment's time)
            if batch.magic >= 2:
                horizon = batch.delete_horizon_ms
                keep_deletes = horizon is None or self.now < horizon
            else:
                keep_deletes = retain_legacy
            latest, lookup, md5 = self.latest, self.keys.get, hashlib.md5
            for i, (offset, key, value) in enumerate(zip(records.offsets, records.keys,
                                                         records.values)):
                if offset > latest:
                    keep.append(i)
                    tombstones = tombstones or value is None
                elif key is None:
                    continue
                elif offset < lookup(md5(key).digest()):
                    if value is None:
                        group.tombstones_removed += 1
                elif value is not None:
                    keep.append(i)
                elif keep_deletes:
                    keep.append(i)
                    tombstones = True
                else:
                    group.tombstones_removed += 1
        if keep:
            group.records_after += len(keep)
            group.batches_after += 1
            stamp = (tombstones or marker_for_empty_txn) and batch.delete_horizon_ms is None
            # a v0/v1 message set is written again as a v2 batch even when whole
            if len(keep) == n and not stamp and batch.magic >= 2:
                data = bytes(log.buf[batch.position:batch.position + batch.size])
                return data, batch.last_offset, batch.max_timestamp
            group.batches_rewritten += 1
            if stamp:
                horizon_ms = self.now + self.retention
                group.horizons_stamped += 1
            else:
                horizon_ms = batch.delete_horizon_ms if batch.delete_horizon_ms is not None \
                    else NO_TIMESTAMP
            return encode_retained_v2(batch, records, keep, horizon_ms)
        if retention == "RETAIN_EMPTY":
            if batch.magic < 2:
                raise CompactError("%s: an empty v%d message set would be kept (Kafka refuses "
                                   "it too)" % (log.path, batch.magic))
            group.batches_after += 1
            group.batches_rewritten += 1
            return encode_empty_v2(batch), batch.last_offset, batch.max_timestamp
        if batch.is_control:
            group.markers_removed += 1
        return None



def _group_segments(segments: List[Segment], max_size: int, max_index_size: int,
                    first_uncleanable: int) -> List[List[Segment]]:
    """Cleaner.groupSegmentsBySize."""
    def index_size(path: str) -> int:
        try:
            return os.path.getsize(path)
        except OSError:
            return 0
    grouped: List[List[Segment]] = []
    segs = list(segments)
    while segs:
        group = [segs[0]]
        log_size = segs[0].size()
        idx = index_size(segs[0].index_path)
        tidx = index_size(segs[0].time_index_path)
        segs = segs[1:]
        while segs:
            nxt = segs[0]
            last_offset = ((segs[1].base_offset or 0) - 1 if len(segs) > 1
                           else first_uncleanable - 1)
            if not (log_size + nxt.size() <= max_size
                    and idx + index_size(nxt.index_path) <= max_index_size
                    and tidx + index_size(nxt.time_index_path) <= max_index_size
                    and (nxt.size() == 0
                         or last_offset - (group[-1].base_offset or 0) <= 2 ** 31 - 1)):
                break
            group.append(nxt)
            log_size += nxt.size()
            idx += index_size(nxt.index_path)
            tidx += index_size(nxt.time_index_path)
            segs = segs[1:]
        grouped.append(group)
    return grouped


def compact_partition(partition: Partition, config: Optional[TopicConfig] = None,
                      now: Optional[int] = None, dry_run: bool = False,
                      high_watermark: Optional[int] = None) -> CompactionResult:
    """One cleaning pass over ``partition`` at ``now`` (epoch ms; default the wall clock),
    carried out unless ``dry_run`` (then nothing is written: the result says what the pass
    would do). The caller holds the log directory's lock. Raises CompactError where the
    broker's cleaner would fail (nothing is changed then), OSError for a file that cannot be
    read or written."""
    now_ms = int(time.time() * 1000) if now is None else now
    if not dry_run:
        finish_interrupted(partition)
    status, aborted = status_and_aborted(partition, config, now_ms, high_watermark,
                                         simulate=False)
    result = CompactionResult(partition.directory, partition.topic, partition.number, now_ms,
                              dry_run, status, first_dirty_offset=status.first_dirty_offset)
    if not status.config.compacted:
        result.skipped = NOT_COMPACTED
        return result
    if status.problems:
        raise CompactError("%s: %s" % (UNCLEANABLE, status.problems[0].message))
    segments = partition.segments()
    start, end = status.first_dirty_offset, status.first_uncleanable_offset
    if start is None or end is None or start >= end:
        result.skipped = NOTHING_DIRTY
        return result
    keys, latest = build_offset_map(status, segments, start, end, aborted)
    if status.problems:
        raise CompactError("%s: %s" % (UNCLEANABLE, status.problems[0].message))
    if latest is None:
        result.skipped = NOTHING_DIRTY
        return result
    end_offset = latest + 1
    result.end_offset = end_offset

    # Cleaner.doClean: the legacy delete horizon from the last clean segment
    below = [s for s in segments if (s.base_offset or 0) < start]
    legacy_horizon = (int(os.path.getmtime(below[-1].log_path) * 1000)
                      - status.config.integer("delete.retention.ms") if below else 0)
    work = _Pass(partition, status, keys, latest, now_ms, write=not dry_run)
    work.active_producers(segments, segments[-1].next_offset())
    to_clean = _segments_overlapping(segments, -1, end_offset)
    groups = _group_segments(to_clean, status.config.integer("segment.bytes"),
                             status.config.integer("segment.index.bytes"), end)
    # every group is written (as .cleaned files) before the first is swapped in: where the
    # broker's cleaner would fail on a batch, the .cleaned files go and nothing has changed
    try:
        for group in groups:
            result.groups.append(work.clean_group(segments, group, legacy_horizon))
    except BaseException:
        if not dry_run:
            remove_cleaned(partition.directory, result.groups)
        raise
    if dry_run:
        return result
    # the clean-shutdown marker is lifted before the first change and put back once all is
    # flushed: a kill in between leaves none, so the next load recovers (and finishes a swap)
    marker = CleanShutdownMarker(partition.log_dir)
    marker.lift()
    write_intent(partition, end_offset, work.written,
                  status.config.integer("index.interval.bytes"))
    to_swap(partition.directory, result.groups)
    for cleaned, group in zip(result.groups, groups):
        result.renamed.extend(swap_in(partition.directory, cleaned, group))
    finish(partition, end_offset)
    marker.restore()
    return result


def compactions(path: str, given: Optional[Dict[str, object]] = None,
                now: Optional[int] = None, dry_run: bool = False,
                high_watermark: Optional[int] = None
                ) -> "Iterator[Union[CompactionResult, TargetError]]":
    """compact_partition of every partition ``path`` stands for (a .log file's partition, a
    partition directory, every partition of a log directory), each with its topic's settings
    (``given`` first, by Kafka's names; then the log directory's metadata partition; then
    Kafka's defaults), under its log directory's lock (LockHeld when a broker holds it; a dry
    run only reads). A partition that cannot be read, or on which the broker's cleaner would
    fail, is a TargetError; the others are still cleaned."""
    from .logdir import LogDir
    from .topic_config import cluster_configs, topic_config
    from .verify import TargetError, partition_targets
    by_log_dir: Dict[str, List[str]] = {}
    for target in partition_targets(path):
        if isinstance(target, TargetError):
            yield target
            continue
        by_log_dir.setdefault(os.path.dirname(os.path.abspath(target)), []).append(target)
    for log_dir, directories in by_log_dir.items():
        holder = LogDir(log_dir)
        partitions = [holder.holding(d) for d in directories]
        try:
            configs = cluster_configs(log_dir)
        except (InvalidDataError, OSError):
            configs = None
        with LogDirLock.for_run(log_dir, directories, dry_run):
            for partition in partitions:
                try:
                    yield compact_partition(partition, topic_config(partition.topic, configs,
                                                                    given),
                                            now, dry_run, high_watermark)
                except (OSError, InvalidDataError) as e:
                    yield TargetError(partition.directory, e)


__all__ = ["CleanedGroup", "CompactionResult", "CompactError", "compact_partition",
           "compactions", "NOT_COMPACTED", "NOTHING_DIRTY"]
