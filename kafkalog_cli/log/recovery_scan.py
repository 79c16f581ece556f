"""A segment's recovery scan (LogSegment.recover): its batches validated one by one as the broker
validates them when it loads a segment it must recover (header, CRC, records, control records,
offsets, the batch size limit), the producer state and leader epochs they carry, and the indexes
rebuilt from them; and the comparison of a segment's index files with the rebuilt ones. The
plan (``recover.plan_partition``) calls it for each segment it recovers."""

from __future__ import annotations

import errno
from typing import Callable, List, Optional, Tuple, Union

from ..errors import KafkalogError
from ..format import codecs
from ..format.crc import crc32c
from ..format.errors import CorruptRecordError, LimitExceededError
from ..format.records import (ATTR_CODEC, ATTR_CONTROL, ATTR_TIMESTAMP_TYPE, LEGACY_HEADER,
                              LOG_OVERHEAD, PREFIX, V2_HEADER, V2_OVERHEAD, Batch, read_batch)
from ..format.scan import (INT64_MAX, INT64_MIN, InvalidBytes, plain_records_ok,
                           v2_records_ok)
from ..format.speedups import speedups
from ..format.validity import (MAX_RELATIVE_OFFSET, batch_problem, control_problem,
                               order_problem)
from .files import FileFormatError, read_sized
from .leader_epochs import LeaderEpochCache
from .producer_state import InvalidTxnStateError, ProducerState, end_marker
from .indexbuild import DEFAULT_INDEX_INTERVAL, AbortedEntry, IndexBuilder
from .segment import BATCH_LIMIT_FACTOR, DEFAULT_MAX_MESSAGE_SIZE, LogFile, Segment
from .recover_plan import SegmentReport
from .txnindex import TransactionIndex


# -- analysing a segment (LogSegment.recover) -----------------------------------------------------

class UnloadableBatchError(KafkalogError, OSError):
    """A batch the broker's own recovery fails on (not one it truncates): the partition is
    left as it is. Exit code 2."""


class SegmentScan:
    """The longest valid prefix of a segment: its rebuilt indexes (``builder``, ``aborted``),
    its offsets and records, and why and where it ends."""

    def __init__(self, builder: IndexBuilder) -> None:
        self.valid_end = 0
        self.first_bad: Optional[int] = None
        self.reason: Optional[str] = None
        self.last_offset: Optional[int] = None
        self.first_offset: Optional[int] = None
        self.records = 0
        self.bad_offset: Optional[int] = None  # base offset of the first invalid batch
        # The first invalid batch is valid but for an offset past 32 bits from the base: the
        # segment is split there (LogSegmentOffsetOverflowException), not cut.
        self.overflow = False
        self.builder = builder
        self.aborted: List[AbortedEntry] = []
        # (position, base offset, last offset) of batches kept with their records unchecked
        self.unchecked: List[Tuple[int, int, int]] = []
        # the positions of the v2 batches of a producer (producer id >= 0) kept, in order: all
        # that the producer state rebuild after recovery reads of the segment
        self.producer_positions: List[int] = []

    def keep(self, position: int, size: int, base_offset: int, last_offset: int,
             max_timestamp: int, records: int) -> None:
        """The batch of ``size`` bytes at ``position`` is valid: index it and extend the valid
        prefix over it (``records``: how many it holds)."""
        # LogSegment.recover indexes the batch header's maxTimestamp
        self.builder.add(position, size, last_offset, max_timestamp)
        self.valid_end = position + size
        self.last_offset = last_offset
        if self.first_offset is None:
            self.first_offset = base_offset
        self.records += records

    @property
    def next_offset(self) -> Optional[int]:
        """The offset after the last valid batch (None: there is none)."""
        return None if self.last_offset is None else self.last_offset + 1


def _records_problem(log: LogFile, batch: Batch,
                     scan: SegmentScan) -> Tuple[Optional[str], Optional[bytes]]:
    """Why the records of ``batch`` make it invalid (None: they do not), and a control batch's
    first record key (its end marker's; None for an empty one). Decoded chunk by chunk: memory
    stays bounded by the batch's decompressed size, however many records it holds.

    Records inflating further than the bound are no proof of damage: the batch is kept, its
    records unchecked, and ``scan.unchecked`` says so."""
    log.ensure(batch.position, batch.position + batch.size)
    if plain_records_ok(log.buf, batch, log.max_message_size):
        return None, None  # an uncompressed data batch whose records read: none made
    marker_key = None
    try:
        for recs in log.iter_records(batch):
            if batch.is_control:
                if marker_key is None and len(recs):
                    marker_key = recs.keys[0]
                reason = control_problem(recs)
                if reason is not None:
                    return reason, marker_key
    except LimitExceededError:
        scan.unchecked.append((batch.position, batch.base_offset, batch.last_offset))
        return None, None
    except CorruptRecordError as e:
        return "records cannot be read: %s" % e, marker_key
    return None, marker_key


def observe_epoch(cache: LeaderEpochCache, batch: Batch, path: str) -> None:
    """LogSegment.recover's assignment of a v2 batch's leader epoch. From a negative base
    offset LeaderEpochFileCache.assign refuses it (IllegalArgumentException) and the broker
    cannot load the partition: recover leaves it as it is, said in one line."""
    latest = cache.latest_epoch
    epoch = batch.partition_leader_epoch
    if batch.base_offset < 0 <= epoch and (latest is None or epoch > latest):
        raise UnloadableBatchError(
            errno.EINVAL, "the batch at position %d has the negative base offset %d (its last "
            "offset %d) with leader epoch %d: the broker's recovery cannot assign that epoch "
            "(LeaderEpochFileCache.assign refuses a negative start offset) and cannot load the "
            "partition; left as it is" % (batch.position, batch.base_offset, batch.last_offset,
                                          batch.partition_leader_epoch), path)
    cache.observe(batch.partition_leader_epoch, batch.base_offset)


def scan_segment(segment: Segment, prev_last: Optional[int], state: ProducerState,
                 interval: int = DEFAULT_INDEX_INTERVAL,
                 max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                 epochs: Optional[LeaderEpochCache] = None) -> SegmentScan:
    """Validate ``segment``'s .log batch by batch and build its indexes (LogSegment.recover).
    A batch is valid when it is complete, its size and magic are right, its CRC holds, its last
    offset follows ``prev_last`` (the previous batch's) and fits the segment, its records decode
    and are as many as the header says, and, in a control batch, they are well-formed control
    records. A batch whose records inflate past the bound is kept with its records unchecked
    (its CRC holds, and the broker's recovery does not look inside a data batch): ``unchecked``
    lists them. ``state`` is the partition's producer state, which each valid batch updates
    (LogSegment.recover's updateProducerState): its aborted transactions' .txnindex entries
    are the segment's.

    Runs of the common batch (``recover_run``: uncompressed data, nothing to tell but its
    facts) are taken a chunk of the file at a time; every other batch, and the first invalid
    one, goes through the general path (``_take``) one at a time."""
    base = segment.base_offset
    if base is None:
        raise ValueError("%s: the file name holds no base offset" % segment.log_path)
    result = SegmentScan(IndexBuilder(base, interval))
    # A record as large as its batch may inflate to is valid: the broker's recovery keeps it.
    with segment.open(max_message_size, record_limit_factor=BATCH_LIMIT_FACTOR) as log:
        runs = _Runs(log, result, state, epochs)
        pos = 0
        while True:
            pos, prev_last = runs.take(pos, prev_last)
            item = next(log.entries(pos), None)
            if item is None or not _take(segment, log, item, result, state, epochs, prev_last):
                break
            assert isinstance(item, Batch)
            prev_last = item.last_offset
            pos = item.position + item.size
    result.builder.finish()
    return result


def _take(segment: Segment, log: LogFile, item: Union[Batch, InvalidBytes],
          result: SegmentScan, state: ProducerState, epochs: Optional[LeaderEpochCache],
          prev_last: Optional[int]) -> bool:
    """The general path for one entry of the scan: keep it in ``result`` (True) or say why it
    ends the valid prefix (False)."""
    if not isinstance(item, Batch):
        result.first_bad, result.reason = item.position, item.reason
        return False
    base = segment.base_offset
    reason = batch_problem(item, base, prev_last)
    if reason is None:
        reason, _ = _records_problem(log, item, result)
    if reason is not None:
        result.first_bad, result.reason = item.position, reason
        result.bad_offset = item.base_offset
        result.overflow = (item.is_valid and item.magic <= 2
                           and order_problem(item.last_offset, prev_last) is None
                           and segment.overflows(item))
        return False
    aborted = update_producer_state(state, log, item)
    if aborted is not None:
        result.aborted.append(aborted)
    if item.magic >= 2 and item.producer_id >= 0:
        result.producer_positions.append(item.position)
    # a legacy entry's header has no count: its offsets say how many messages it holds
    result.keep(item.position, item.size, item.base_offset, item.last_offset,
                item.max_timestamp, item.count if item.count is not None
                else item.last_offset - item.base_offset + 1)
    if epochs is not None and item.magic >= 2:
        observe_epoch(epochs, item, segment.log_path)
    return True


# -- the common batch, run after run ---------------------------------------------------------

# The bytes of the file read at a time for recover_run: many batches, few enough to stay in
# the CPU's cache while they are checked (copying the file into fresh memory costs more than
# checking it). A batch larger than RUN_MAX_BATCH is left to the general path.
RUN_CHUNK = 1 << 20
RUN_MAX_BATCH = 16 << 20
INT32_MAX = (1 << 31) - 1


def recover_run_python(buf: codecs.Bytes, pos: int, end: int, at: int, scan: SegmentScan,
                       prev_last: Optional[int], limit: int, epoch_limit: int,
                       crc: Callable[[codecs.Bytes], int]) -> Tuple[int, Optional[int], bool]:
    """scan_segment's loop over its common batch, batch after batch, in ``buf[pos:end]``
    (byte i of ``buf`` is byte ``at + i`` of the segment): each batch that the general path
    (``_take``) would keep by its own bytes alone, with nothing to decode, tell or assign, is
    kept in ``scan`` (``SegmentScan.keep``, which feeds ``scan.builder``; its position in
    ``scan.producer_positions`` when it has a producer, whose state the caller then updates).
    That is a whole v2 batch (magic 2) whose CRC holds by ``crc``, whose last offset follows
    ``prev_last`` (None: no batch before it) and fits the segment based at the builder's base
    offset, uncompressed, not a control batch, whose records read (``plain_records_ok`` with
    ``limit``), whose leader epoch is negative or at most ``epoch_limit`` (then
    LeaderEpochCache.observe changes nothing), and whose index entries, if it makes any, fit
    the files' layouts. It stops at the first other batch, which the general path takes (or
    finds why it is invalid).

    Returns (the position reached, the last offset kept (``prev_last`` when none), short: it
    stopped for want of bytes: fewer than a v2 batch header before ``end``, or a batch running
    past it). ``_speedups.recover_run`` is its C mirror (tests/format/test_c_differential.py).
    """
    if not 0 <= pos <= end <= len(buf):
        raise ValueError("positions outside the data")
    builder = scan.builder
    base = builder.base_offset
    while end - pos >= V2_OVERHEAD:
        (base_offset, size, ple, _, stored, attrs, last_delta, base_ts, max_ts, pid, _, _,
         count) = V2_HEADER.unpack_from(buf, pos)
        total = size + LOG_OVERHEAD
        if buf[pos + 16] != 2 or total < V2_OVERHEAD:
            return pos, prev_last, False
        if total > end - pos:
            return pos, prev_last, True
        last = base_offset + last_delta
        attrs &= 0xFF
        if (not INT64_MIN <= last <= INT64_MAX or attrs & (ATTR_CODEC | ATTR_CONTROL)
                or (prev_last is not None and last <= prev_last)
                or not 0 <= last - base <= MAX_RELATIVE_OFFSET
                or 0 <= ple and epoch_limit < ple):
            return pos, prev_last, False
        if not builder.fits(last, max_ts):
            return pos, prev_last, False
        if crc(memoryview(buf)[pos + 21:pos + total]) != stored:
            return pos, prev_last, False
        if count and not v2_records_ok(buf, pos + V2_OVERHEAD, pos + total, count, base_offset,
                                       base_ts, bool(attrs & ATTR_TIMESTAMP_TYPE), limit):
            return pos, prev_last, False
        if pid >= 0:
            scan.producer_positions.append(at + pos)
        scan.keep(at + pos, total, base_offset, last, max_ts, count)
        prev_last = last
        pos += total
    return pos, prev_last, True


recover_run = (recover_run_python if speedups is None
               else speedups.recover_run)  # the C mirror (format/speedups.py)


class _Runs:
    """``recover_run`` over a segment's file, from a position on, a chunk read at a time into
    a buffer of its own (``RUN_CHUNK``, more for a larger batch), up to where the general path
    takes over; the producer state updated by the batches of a producer it keeps."""

    def __init__(self, log: LogFile, scan: SegmentScan, state: ProducerState,
                 epochs: Optional[LeaderEpochCache]) -> None:
        self.log, self.scan, self.state, self.epochs = log, scan, state, epochs
        self.buffer = bytearray(min(RUN_CHUNK, log.size))
        self.limit = min(log.max_message_size, INT64_MAX)

    def _worth_it(self, pos: int) -> bool:
        """Does the entry at ``pos`` look like a batch ``recover_run`` keeps (a v2 batch
        neither compressed nor a control batch)? Asked of the general path's window before a
        chunk is read, so that a segment of other batches is not read twice."""
        log = self.log
        if log.size - pos < V2_OVERHEAD:
            return False
        log.ensure(pos, pos + V2_OVERHEAD)
        return log.buf[pos + 16] == 2 and not log.buf[pos + 22] & (ATTR_CODEC | ATTR_CONTROL)

    def take(self, pos: int, prev_last: Optional[int]) -> Tuple[int, Optional[int]]:
        """Keep the common batches from ``pos`` on; (where the general path takes over, the
        last offset kept (``prev_last`` when none))."""
        log, scan = self.log, self.scan
        if not self._worth_it(pos):
            return pos, prev_last
        epochs = self.epochs
        latest = None if epochs is None else epochs.latest_epoch
        epoch_limit = (INT32_MAX if epochs is None else -1 if latest is None
                       else max(-1, min(latest, INT32_MAX)))  # (leader epochs are 32 bits)
        while pos < log.size:
            buffer = self.buffer
            n = log.read_into(buffer, pos)
            kept = len(scan.producer_positions)
            reached, prev_last, short = recover_run(buffer, 0, n, pos, scan, prev_last,
                                                    self.limit, epoch_limit, crc32c)
            for p in scan.producer_positions[kept:]:
                at = p - pos
                batch = read_batch(buffer, at, V2_OVERHEAD, 2)  # its header
                batch.position, batch.computed_crc = p, None
                batch.size = PREFIX.unpack_from(buffer, at)[1] + LOG_OVERHEAD
                update_producer_state(self.state, log, batch)
            if not short or pos + n == log.size:
                return pos + reached, prev_last
            if reached == 0:
                # a batch larger than the buffer
                total = PREFIX.unpack_from(buffer, 0)[1] + LOG_OVERHEAD
                if total > RUN_MAX_BATCH:
                    return pos, prev_last
                self.buffer = bytearray(total)
            pos += reached
        return pos, prev_last


def update_producer_state(state: ProducerState, log: LogFile,
                           batch: Batch) -> Optional[AbortedEntry]:
    """LogSegment.recover's updateProducerState for one valid batch (ProducerState.append); the
    .txnindex entry of the aborted transaction it ends, or None. What the broker's loading
    would refuse (a control record that is no end marker, a non-transactional write inside an
    open transaction) leaves the state as it was: the batch itself is valid and kept."""
    if batch.magic < 2 or batch.producer_id < 0:
        return None
    try:
        return state.append(batch, end_marker(log, batch) if batch.is_control else None)
    except (CorruptRecordError, LimitExceededError, InvalidTxnStateError):
        return None


# -- comparing the indexes a segment has with the rebuilt ones ------------------------------------

# An index file larger than this is no index the broker wrote (segment.index.bytes tops out at
# Int.MAX, but a file past this is not read into memory to be compared: it is replaced).
MAX_INDEX_READ = 64 * 1024 * 1024


def same_index(path: str, rebuilt: bytes, entry_size: int, active: bool) -> bool:
    """Is the index file at ``path`` the one LogSegment.recover rebuilds, byte for byte? The
    active segment's may go on with zeros after its entries, to a whole number of entries (the
    broker pre-allocates it to segment.index.bytes, and expands it again when it loads the
    log); a sealed segment's may not (it is trimmed on roll)."""
    try:
        data = read_sized(path, MAX_INDEX_READ)
    except (OSError, FileFormatError):
        return False
    if data == rebuilt:
        return True
    return (active and len(data) % entry_size == 0 and data[:len(rebuilt)] == rebuilt
            and not data[len(rebuilt):].strip(b"\0"))


def same_txn_index(path: Optional[str], rebuilt: bytes) -> bool:
    """Is the .txnindex at ``path`` (None: there is none) the rebuilt one, byte for byte (no
    file and an empty one both say: no aborted transaction)?"""
    if path is None:
        return not rebuilt
    try:
        return read_sized(path, MAX_INDEX_READ) == rebuilt
    except (OSError, FileFormatError):
        return False


def txn_below_base(path: str) -> bool:
    """Does the .txnindex at ``path`` hold an entry whose last offset is below the segment's
    base offset (LogSegment.sanityCheck's CorruptIndexException, which sends the segment to
    recovery)? One that cannot be read at all says so too."""
    try:
        return bool(TransactionIndex(path).sanity_problems())
    except (OSError, FileFormatError):
        return True


# -- what the bytes set aside or cut hold ---------------------------------------------------------

def count_removed(report: SegmentReport, path: str, start: int) -> None:
    """What the bytes of the .log ``path`` from ``start`` on (a tail cut, or a whole segment set
    aside) hold, into ``report``: the records and offset range of the whole batches there (by
    their headers, valid or not: what a reader of the quarantined bytes finds), and the bytes
    after the last of them that hold no batch. Headers only, as LogFile.batches reads them."""
    end = start
    first: Optional[int] = None
    last: Optional[int] = None
    records = 0
    segment = Segment.at(path)
    with segment.open() as log:
        for batch in segment.batches(start, log):
            first = batch.base_offset if first is None else min(first, batch.base_offset)
            last = batch.last_offset if last is None else max(last, batch.last_offset)
            # (a damaged header's negative count holds no record)
            records += max(0, batch.count if batch.count is not None
                           else batch.last_offset - batch.base_offset + 1)
            end = batch.position + batch.size
        size = log.size
    report.first_offset_removed, report.last_offset_removed = first, last
    report.removed_records = records
    report.torn_bytes = max(0, size - end)
    if report.torn_bytes:
        before = last
        if before is None:  # the batches kept before the cut, else the segment's base
            before = (report.next_offset - 1 if report.next_offset is not None
                      else report.base_offset - 1 if report.base_offset is not None else None)
        torn = torn_batch(path, end, report.torn_bytes, before)
        if torn is not None:
            report.torn_first_offset, report.torn_last_offset, report.torn_records = torn


def torn_batch(path: str, position: int, available: int,
               before: Optional[int]) -> Optional[Tuple[int, int, int]]:
    """(base offset, last offset, records) of the batch whose first ``available`` bytes
    end the file at ``position`` (a write torn by a crash: FileLogInputStream.nextBatch finds
    its size past the end of the file), from its header; None when no header can be read
    there: fewer bytes than a header, a size that does not run past the file's end (then it
    is no torn batch), a magic that is not 0-2, figures no producer writes, a base offset not
    after ``before`` (the last offset before it), or a compressed legacy wrapper (its header
    holds its last offset only). A v2 header is DefaultRecordBatch's (RECORD_BATCH_OVERHEAD,
    61 bytes: baseOffset, lastOffsetDelta, recordsCount); a legacy entry is one message
    (LegacyRecord: its offset)."""
    with open(path, "rb") as f:
        f.seek(position)
        head = f.read(min(available, V2_HEADER.size))
    if len(head) < LEGACY_HEADER.size:
        return None
    offset, size, _, magic, attributes = LEGACY_HEADER.unpack_from(head)
    if size + 12 <= available:
        return None
    if magic == 2:
        if len(head) < V2_HEADER.size or size < V2_HEADER.size - 12:
            return None
        fields = V2_HEADER.unpack_from(head)
        first, delta, count = fields[0], fields[6], fields[12]
        if delta < 0 or count < 0 or count > delta + 1:
            return None
        last = first + delta
    elif magic in (0, 1):
        # (a message's smallest size: crc, magic, attributes, key and value lengths, and
        # in v1 a timestamp)
        if attributes & ATTR_CODEC or size < (14 if magic == 0 else 22):
            return None
        first = last = offset
        count = 1
    else:
        return None
    if first < 0 or (before is not None and first <= before):
        return None
    return first, last, count
