"""A segment's index files held against its log, entry by entry, as DumpLogSegments and the
broker check them (OffsetIndex, TimeIndex and TransactionIndex and their sanity checks at
LogLoader's start-up): each check returns a list of ``Finding`` (an empty list: the file is
sound), and a file's findings are a ``FileReport``. The batch chain a segment's checks share
(``BatchChain``: each batch's header read once) lives here too."""

from __future__ import annotations

import array
import bisect
from typing import (Dict, Iterable, List, Optional, Tuple, Union, cast)

from ..format import control
from ..format.errors import CorruptRecordError, LimitExceededError
from ..format.records import Batch
from ..format.scan import InvalidBytes
from .findings import (ABORT_WITHOUT_TXN, NOT_A_BATCH, NOT_INCREASING, OFFSET_MISMATCH,
                       OFFSET_NOT_FOUND, POSITION_PAST_END, SANITY, TIMESTAMP_MISMATCH,
                       TIMESTAMP_OUT_OF_ORDER, TXN_FIRST_OFFSET, TXN_WITHOUT_ABORT, UNREADABLE,
                       Finding)
from .index import OffsetIndex, TimeIndex
from .report import Report, field, report
from .segment import LogFile, Segment
from .txnindex import TransactionIndex


AnyIndex = Union[OffsetIndex, TimeIndex]


def check_offset_index(index: OffsetIndex, log: LogFile,
                       chain: Optional["BatchChain"] = None) -> List[Finding]:
    """Every entry must point at the start of a batch whose last offset is the entry's offset,
    inside the log, with offsets strictly increasing.

    Positions on the log's batch chain (``chain``, read once: see BatchChain) are looked up,
    not read again; a position off the chain (a corrupt entry) is read where it points, once.
    """
    problems = []
    prev = None
    if chain is None:
        chain = BatchChain(log)
    off_chain: Dict[int, Optional[_Summary]] = {}
    for offset, position in index.entries:
        if prev is not None and offset <= prev:
            problems.append(Finding(NOT_INCREASING,
                "index offset %d follows %d: entries must increase"
                % (offset, prev), index.path, index_offset=offset, previous_offset=prev))
        prev = offset
        item = chain.batch_summary(position)
        if item is None and 0 <= position < log.size:
            if position not in off_chain:
                off_chain[position] = _Summary.of(chain.segment.batch_at(position, log))
            item = off_chain[position]
        if item is None:
            problems.append(Finding(POSITION_PAST_END,
                "index offset %d points at position %d, past the end of the "
                "log (%d bytes)" % (offset, position, log.size), index.path,
                index_offset=offset, position=position))
        elif item.reason is not None:
            problems.append(Finding(NOT_A_BATCH,
                "index offset %d points at position %d, where no batch starts "
                "(%s)" % (offset, position, item.reason), index.path,
                index_offset=offset, position=position))
        elif item.last_offset != offset:
            problems.append(Finding(OFFSET_MISMATCH,
                "Index offset: %d, log offset: %d" % (offset, item.last_offset), index.path,
                index_offset=offset, log_offset=item.last_offset,
                position=position))
    return problems


def _max_record_timestamp(log: LogFile, batch: Batch) -> int:
    """The largest record timestamp of ``batch`` (-1 without records), a chunk at a time."""
    best = None
    for recs in log.iter_records(batch):
        if len(recs):
            top = max(recs.timestamps)
            best = top if best is None or top > best else best
    return -1 if best is None else best


class _Summary:
    """What the offset index check needs of an entry of the log: a batch's last offset, or why
    no batch starts there."""

    __slots__ = ("last_offset", "reason")

    def __init__(self, last_offset: int, reason: Optional[str] = None) -> None:
        self.last_offset = last_offset
        self.reason = reason

    @classmethod
    def of(cls, item: Optional[Union[Batch, InvalidBytes]]) -> Optional["_Summary"]:
        if item is None:
            return None
        if isinstance(item, Batch):
            return cls(item.last_offset)
        return cls(-1, item.reason)


class BatchChain:
    """The batches a scan of ``log`` from position 0 meets, as two arrays (positions, last
    offsets), built in one pass: "the first batch that a scan from position P meets whose last
    offset reaches X" is then a search, not a rescan of the log.

    A scan from a position on the chain meets the chain's batches from there on (a scan depends
    only on where it starts). A start off the chain (a corrupt index's position) is scanned
    from until it joins the chain or the data ends, once per start.
    """

    def __init__(self, log: LogFile) -> None:
        self.log = log
        self.segment = Segment.at(log.path)
        self.positions = array.array("q")
        self.lasts = array.array("q")
        # what the leader epoch check needs (LeaderEpochCheck): each batch's base offset and
        # partitionLeaderEpoch (-1 for a v0/v1 entry, which has none)
        self.bases = array.array("q")
        self.epochs = array.array("i")
        monotonic = True
        prev = None
        for batch in self.segment.batches(0, log):
            if prev is not None and batch.last_offset < prev:
                monotonic = False
            prev = batch.last_offset
            self.positions.append(batch.position)
            self.lasts.append(batch.last_offset)
            self.bases.append(batch.base_offset)
            self.epochs.append(batch.partition_leader_epoch if batch.magic >= 2 else -1)
        self._tree = None if monotonic else _MaxTree(self.lasts)
        # start -> ([(position, last offset)], chain index joined or None)
        self._off_chain: Dict[int, Tuple[List[Tuple[int, int]], Optional[int]]] = {}

    def _index_of(self, position: int) -> Optional[int]:
        i = bisect.bisect_left(self.positions, position)
        if i < len(self.positions) and self.positions[i] == position:
            return i
        return None

    def batch_summary(self, position: int) -> Optional[_Summary]:
        """A _Summary of the batch at ``position`` when it is on the chain, else None."""
        i = self._index_of(position)
        return None if i is None else _Summary(self.lasts[i])

    def _first_from(self, i: int, offset: int) -> Optional[int]:
        """The first chain index >= i whose last offset is at least ``offset``, or None."""
        j: Optional[int]
        if self._tree is None:
            j = bisect.bisect_left(self.lasts, offset, i)
        else:
            j = self._tree.first_at_least(i, offset)
        return j if j is not None and j < len(self.lasts) else None

    def find(self, start: int, offset: int) -> Optional[Tuple[int, int]]:
        """(position, last offset) of the first batch a scan from ``start`` meets whose last
        offset is at least ``offset``, or None."""
        start = min(max(start, 0), self.log.size)  # as the scanner clamps a start
        i = self._index_of(start)
        if i is None:
            if start not in self._off_chain:
                self._off_chain[start] = self._walk_off_chain(start)
            prefix, i = self._off_chain[start]
            for position, last in prefix:
                if last >= offset:
                    return position, last
            if i is None:
                return None
        j = self._first_from(i, offset)
        return None if j is None else (self.positions[j], self.lasts[j])

    def _walk_off_chain(self, start: int) -> Tuple[List[Tuple[int, int]], Optional[int]]:
        prefix: List[Tuple[int, int]] = []
        for batch in self.segment.batches(start, self.log):
            joined = self._index_of(batch.position)
            if joined is not None:
                return prefix, joined
            prefix.append((batch.position, batch.last_offset))
        return prefix, None


class _MaxTree:
    """A max segment tree over an array: the first index at or after i holding a value at
    least x, in logarithmic time (for logs whose last offsets go down somewhere)."""

    def __init__(self, values: Iterable[int]) -> None:
        values = list(values)
        n = 1
        while n < len(values):
            n *= 2
        self.n = n
        low = -(1 << 63)
        tree = [low] * (2 * n)
        tree[n:n + len(values)] = values
        for k in range(n - 1, 0, -1):
            tree[k] = max(tree[2 * k], tree[2 * k + 1])
        self.tree = tree

    def first_at_least(self, i: int, x: int) -> Optional[int]:
        tree, n = self.tree, self.n
        if i >= n:
            return None
        k = i + n
        if tree[k] >= x:
            return i
        # climb while k is a right child or its right sibling holds nothing large enough
        while True:
            while k & 1:
                k >>= 1
                if k == 0:
                    return None
            k += 1  # the right sibling: the next block after what was covered
            if tree[k] >= x:
                break
        while k < n:
            k = 2 * k if tree[2 * k] >= x else 2 * k + 1
        return k - n


def check_time_index(tindex: TimeIndex, oindex: Optional[OffsetIndex], log: LogFile,
                     header_timestamps: bool = False,
                     chain: Optional[BatchChain] = None) -> List[Finding]:
    """DumpLogSegments' three checks of a time index: the batch that each entry's offset ends
    must exist, hold the entry's timestamp as its max record timestamp, and timestamps must
    increase from entry to entry.

    ``header_timestamps``: compare with the batch header's maxTimestamp instead of the max
    over its records, as LogSegment.recover indexes it (what verify-index and recover check;
    DumpLogSegments compares the records', so dump does).

    For each entry, DumpLogSegments scans the log from the offset index's position for the
    entry's offset to the first batch that reaches it; here the log is scanned once and each
    entry's batch found by a search (a time index may hold far more entries than the log has
    batches), and each batch's records are decoded once however many entries name it.
    """
    problems = []
    prev_ts = -1
    if chain is None:
        chain = BatchChain(log)
    # batch position -> max record timestamp, or the error reading it
    max_timestamps: Dict[int, Union[int, CorruptRecordError]] = {}
    for ts, offset in tindex.entries:
        start = oindex.lookup(offset)[1] if oindex is not None else 0
        found = chain.find(start, offset)
        if found is None or found[1] != offset:
            log_offset = -1 if found is None else found[1]
            problems.append(Finding(OFFSET_NOT_FOUND,
                "Indexed offset: %d, found log offset: %d"
                % (offset, log_offset), tindex.path,
                index_offset=offset, log_offset=log_offset))
        else:
            position = found[0]
            if position not in max_timestamps:
                # on the chain: a batch starts there
                batch = cast(Batch, chain.segment.batch_at(position, log))
                try:
                    max_timestamps[position] = (batch.max_timestamp if header_timestamps
                                                else _max_record_timestamp(log, batch))
                except LimitExceededError:
                    # records inflating past the bound are not decoded (the batch is valid):
                    # its header's maxTimestamp, which the broker indexes, stands for them
                    max_timestamps[position] = batch.max_timestamp
                except CorruptRecordError as e:
                    max_timestamps[position] = e
            max_ts = max_timestamps[position]
            if isinstance(max_ts, CorruptRecordError):
                problems.append(Finding(UNREADABLE,
                    "batch at position %d for indexed offset %d cannot be "
                    "read: %s" % (position, offset, max_ts), tindex.path,
                    index_offset=offset))
            elif max_ts != ts:
                problems.append(Finding(TIMESTAMP_MISMATCH,
                    "Index timestamp: %d, log timestamp: %d" % (ts, max_ts), tindex.path,
                    index_timestamp=ts, log_timestamp=max_ts))
            if prev_ts >= ts:
                problems.append(Finding(TIMESTAMP_OUT_OF_ORDER,
                    "Index timestamp: %d, Previously indexed timestamp: %d"
                    % (ts, prev_ts), tindex.path, index_timestamp=ts,
                    previous_timestamp=prev_ts))
        prev_ts = ts
    return problems


def sanity_problems(index: AnyIndex) -> List[Finding]:
    """The broker's start-up sanity check of an index, as Problems."""
    return [Finding(SANITY,
        message, index.path) for message in index.sanity_problems()]


def check_txn_index(txn: TransactionIndex, log: LogFile) -> List[Finding]:
    """The aborted transactions listed must be those the log's ABORT markers close.

    An entry needs an ABORT marker of its producer at its last offset; an ABORT marker of a
    producer that wrote transactional data in this segment needs an entry, whose first offset is
    that producer's first offset since its previous marker.
    """
    problems = []
    open_first: Dict[int, int] = {}  # producer id -> first offset of its open transaction here
    # marker offset -> (producer id, first offset in this segment or None)
    aborts: Dict[int, Tuple[int, Optional[int]]] = {}
    unknown = []       # (producer id, first, last offset) of marker batches not decoded
    for item in Segment.at(log.path).batches(log=log):
        if not item.is_transactional:
            continue
        if not item.is_control:
            open_first.setdefault(item.producer_id, item.base_offset)
            continue
        try:
            # decoded whole before any marker counts: a batch with damaged records is skipped
            markers = [(offset, key) for recs in log.iter_records(item)
                       for offset, key in zip(recs.offsets, recs.keys)]
        except LimitExceededError:
            # A valid marker batch whose records inflate past the bound: it closes its
            # producer's transaction (a control batch does, whatever its type), and whether it
            # aborts is unknown: an entry ending in it is not judged.
            open_first.pop(item.producer_id, None)
            unknown.append((item.producer_id, item.base_offset, item.last_offset))
            continue
        except CorruptRecordError:
            continue  # the log's own problem; verify reports indexes only
        for offset, key in markers:
            try:
                type_id = control.control_type(key)
            except CorruptRecordError:
                continue
            first = open_first.pop(item.producer_id, None)
            if type_id == control.ABORT:
                aborts[offset] = (item.producer_id, first)
    listed = set()
    for e in txn.entries:
        listed.add(e.last_offset)
        marker = aborts.get(e.last_offset)
        if marker is None and any(pid == e.producer_id and first <= e.last_offset <= last
                                  for pid, first, last in unknown):
            continue
        if marker is None or marker[0] != e.producer_id:
            problems.append(Finding(TXN_WITHOUT_ABORT,
                "aborted transaction of producer %d ending at offset %d: no "
                "ABORT marker of that producer there"
                % (e.producer_id, e.last_offset), txn.path,
                producer_id=e.producer_id, last_offset=e.last_offset))
        elif (marker[1] is not None and marker[1] != e.first_offset
              and (txn.base_offset is None
                   or not e.first_offset < txn.base_offset <= marker[1])):
            # (a transaction begun in an earlier segment starts before this one's base)
            problems.append(Finding(TXN_FIRST_OFFSET,
                "aborted transaction of producer %d ending at offset %d: first "
                "offset %d, the log says %d" % (e.producer_id, e.last_offset,
                                                 e.first_offset, marker[1]), txn.path,
                producer_id=e.producer_id, first_offset=e.first_offset,
                log_first_offset=marker[1]))
    for offset, (pid, first) in sorted(aborts.items()):
        if first is not None and offset not in listed:
            problems.append(Finding(ABORT_WITHOUT_TXN,
                "ABORT marker of producer %d at offset %d (transaction from "
                "offset %d) has no entry" % (pid, offset, first), txn.path,
                producer_id=pid, last_offset=offset, first_offset=first))
    return problems


@report
class FileReport(Report):
    """What verifying one index file found.

    ``path``: the file; ``kind``: its Kafka kind (``names.INDEX``, ``names.TIMEINDEX``, ...);
    ``entries``: its entries; ``problems``: the findings that fail it; ``notes``: the ones that
    only inform; ``error``: an OSError saying the file could not be opened as a regular file at
    all (a FIFO, a device, a directory, no permission): unreadable input rather than a finding
    (None: it was read)."""

    path: str
    kind: str
    entries: int = 0
    problems: List[Finding] = field(default_factory=list)
    notes: List[Finding] = field(default_factory=list)
    error: Optional[OSError] = None
