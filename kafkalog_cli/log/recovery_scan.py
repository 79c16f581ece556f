"""A segment's recovery scan (LogSegment.recover): its batches validated one by one as the broker
validates them when it loads a segment it must recover (header, CRC, records, control records,
offsets, the batch size limit), the producer state and leader epochs they carry, and the indexes
rebuilt from them; and the comparison of a segment's index files with the rebuilt ones. The
plan (``recover.plan_partition``) calls it for each segment it recovers."""

from __future__ import annotations

import errno
from typing import List, Optional, Tuple

from ..errors import KafkalogError
from ..format.errors import CorruptRecordError, LimitExceededError
from ..format.records import ATTR_CODEC, LEGACY_HEADER, V2_HEADER, Batch
from ..format.scan import plain_records_ok
from ..format.validity import batch_problem, control_problem, order_problem
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

    def keep(self, batch: Batch) -> None:
        """``batch`` is valid: index it and extend the valid prefix over it."""
        # LogSegment.recover indexes the batch header's maxTimestamp
        self.builder.add(batch.position, batch.size, batch.last_offset, batch.max_timestamp)
        self.valid_end = batch.position + batch.size
        self.last_offset = batch.last_offset
        if self.first_offset is None:
            self.first_offset = batch.base_offset
        # a legacy entry's header has no count: its offsets say how many messages it holds
        self.records += (batch.count if batch.count is not None
                         else batch.last_offset - batch.base_offset + 1)

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
    are the segment's."""
    base = segment.base_offset
    if base is None:
        raise ValueError("%s: the file name holds no base offset" % segment.log_path)
    result = SegmentScan(IndexBuilder(base, interval))
    # A record as large as its batch may inflate to is valid: the broker's recovery keeps it.
    with segment.open(max_message_size, record_limit_factor=BATCH_LIMIT_FACTOR) as log:
        for item in log.entries():
            if not isinstance(item, Batch):
                result.first_bad, result.reason = item.position, item.reason
                break
            reason = batch_problem(item, base, prev_last)
            marker_key = None
            if reason is None:
                reason, marker_key = _records_problem(log, item, result)
            if reason is not None:
                result.first_bad, result.reason = item.position, reason
                result.bad_offset = item.base_offset
                result.overflow = (item.is_valid and item.magic <= 2
                                   and order_problem(item.last_offset, prev_last) is None
                                   and segment.overflows(item))
                break
            aborted = update_producer_state(state, log, item)
            if aborted is not None:
                result.aborted.append(aborted)
            result.keep(item)
            if epochs is not None and item.magic >= 2:
                observe_epoch(epochs, item, segment.log_path)
            prev_last = item.last_offset
    result.builder.finish()
    return result


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
