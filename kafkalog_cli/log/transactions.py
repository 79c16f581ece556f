"""The transactions of a partition, as its log holds them: per producer id, each transaction
from its first transactional data batch to the COMMIT or ABORT marker that ends it, whether
each aborted one is listed in the .txnindex of the segment holding its marker, and the
transactions no marker has ended yet (hanging candidates), with how long they have been open
and how far they hold back the last stable offset.

The state is followed as the broker's ProducerStateManager follows it (ProducerAppendInfo): a
producer has at most one open transaction, begun by its first transactional data batch and
ended by the next end marker of that producer id, whatever the marker's producer epoch. A
marker with a newer epoch than the transaction's data is the coordinator ending it after
bumping the epoch (TransactionCoordinator fencing a producer that timed out or was replaced,
and, with transactions V2, every marker). An aborted transaction is listed in the .txnindex of
the segment holding its marker (TransactionIndex, AbortedTxn), with the last stable offset of
that moment; a marker with no open transaction of its producer (an empty transaction, or one
whose data is gone from the log) ends nothing and is listed nowhere.
"""

from __future__ import annotations

import os
import time
from typing import Dict, Iterator, List, Optional, Tuple, Union

from ..errors import KafkalogError, UsageError
from ..format import control
from ..format.errors import CorruptRecordError
from ..format.records import Batch, Records
from .files import FileFormatError, printable_name
from .indexbuild import TxnTracker
from .partition import Partition
from .read import CONTROL, BatchProblem, BatchRead, Note, problem_text, segment_events, to_say
from .report import Report, report
from .segment import DEFAULT_MAX_MESSAGE_SIZE, Segment
from .txnindex import AbortedTxn
from .verify import TargetError, partition_targets

# Kafka's transaction.max.timeout.ms default: a transaction open longer is past any timeout a
# producer may ask for, and the coordinator should have aborted it.
DEFAULT_HANGING_AFTER_MS = 900000

COMMIT, ABORT, OPEN = "COMMIT", "ABORT", "OPEN"

# What the ages of open transactions are measured against (``age_from``): a time (``now``,
# else the wall clock), or the newest batch timestamp of each partition
AGE_FROM_NOW, AGE_FROM_NEWEST_TIMESTAMP = "now", "newest-timestamp"
AGE_FROM = (AGE_FROM_NOW, AGE_FROM_NEWEST_TIMESTAMP)

# Where the reference time of the ages came from (PartitionSummary.reference_source)
WALL_CLOCK = "wallClock"              # the clock of the machine, read once per call
NOW_GIVEN = "now"                    # the caller's ``now`` (--now)
NEWEST_TIMESTAMP = "newestTimestamp"  # the newest batch timestamp in the partition


@report
class Transaction(Report):
    """One transaction of a producer in the partition ``directory``: ``first_offset`` (base
    offset of its first transactional data batch; None for a marker that ended no open
    transaction), ``first_timestamp`` (that batch's max timestamp), ``producer_epoch`` (that
    batch's epoch, else the marker's), ``batches`` and ``records`` (its data batches and their
    record count), then, once ended, ``marker`` (COMMIT or ABORT), ``end_offset`` (the marker's
    offset), ``marker_producer_epoch`` (the marker batch's producer epoch),
    ``coordinator_epoch``, ``marker_timestamp`` and ``segment`` (the base offset of the
    segment holding the marker).
    For an ABORT: ``in_txn_index`` (is it listed in that segment's .txnindex; None when the
    .txnindex cannot be read) and ``txn_index_problem`` (what differs in the entry listed, or
    why the index could not be read). For an open one: ``age_ms`` and ``lso_lag`` (offsets from
    its first offset to the log end offset) and ``hanging`` (older than the threshold).
    Timestamps and ages are in ms. The marker's fields (``end_offset`` to ``segment``) are None
    while it is open; ``age_ms`` and ``lso_lag`` are None once it is ended (``age_ms`` also
    when there is no reference time or first timestamp)."""

    directory: str
    producer_id: int
    producer_epoch: int
    first_offset: Optional[int]
    first_timestamp: Optional[int]
    batches: int = 0
    records: int = 0
    marker: Optional[str] = None
    end_offset: Optional[int] = None
    marker_producer_epoch: Optional[int] = None
    coordinator_epoch: Optional[int] = None
    marker_timestamp: Optional[int] = None
    segment: Optional[int] = None
    in_txn_index: Optional[bool] = None
    txn_index_problem: Optional[str] = None
    age_ms: Optional[int] = None
    lso_lag: Optional[int] = None
    hanging: bool = False

    @property
    def state(self) -> str:
        """COMMIT, ABORT, or OPEN (no marker has ended it)."""
        return self.marker if self.marker is not None else OPEN

    @property
    def epoch_bumped(self) -> bool:
        """Was it ended by a marker of a newer producer epoch than its data's: the coordinator
        bumped the epoch to end it (a fenced producer's transaction, or transactions V2)?"""
        return (self.marker_producer_epoch is not None
                and self.marker_producer_epoch > self.producer_epoch)

    @property
    def empty(self) -> bool:
        """A marker that ended no open transaction of its producer."""
        return self.first_offset is None


@report
class PartitionSummary(Report):
    """What one partition (``directory``) holds, given after its transactions: how many were
    committed, aborted (``missing_from_txn_index`` of them not in their .txnindex) and ended
    nothing (``empty``), the ``open`` ones (``hanging`` of them), ``log_end_offset``,
    ``last_stable_offset`` (the first offset of the earliest open transaction, else the log end
    offset), ``newest_timestamp`` (the newest batch max timestamp, None without batches), the
    ``reference_ms`` the ages are measured from and where it comes from (``reference_source``:
    WALL_CLOCK, NOW_GIVEN or NEWEST_TIMESTAMP), ``hanging_after_ms`` and ``problems`` (how
    many Notes of invalid data or unreadable .txnindex files were given). Offsets are Kafka
    offsets, times in ms."""

    directory: str
    hanging_after_ms: int
    committed: int = 0
    aborted: int = 0
    empty: int = 0
    missing_from_txn_index: int = 0
    open: int = 0
    hanging: int = 0
    log_end_offset: int = 0
    last_stable_offset: int = 0
    newest_timestamp: Optional[int] = None
    reference_ms: Optional[int] = None
    reference_source: str = NEWEST_TIMESTAMP
    problems: int = 0

    @property
    def transactions(self) -> int:
        return self.committed + self.aborted + self.empty + self.open

    @property
    def lso_lag(self) -> int:
        """How many offsets the open transactions hold the last stable offset back by."""
        return self.log_end_offset - self.last_stable_offset


Item = Union[Transaction, PartitionSummary, Note]


class _TxnIndexOf:
    """The .txnindex of the segment being read, loaded at its first ABORT marker:
    {(producer id, last offset): entry}, or None when it cannot be read."""

    def __init__(self) -> None:
        self.base: Optional[int] = None
        self.entries: Optional[Dict[Tuple[int, int], AbortedTxn]] = None
        self.problem: Optional[str] = None

    def load(self, segment: Segment) -> Optional[str]:
        """Make ``segment``'s index the current one; returns why it cannot be read the first
        time it is loaded, else None."""
        if self.base == segment.base_offset:
            return None
        self.base = segment.base_offset
        self.entries, self.problem = {}, None
        if not os.path.exists(segment.txn_index_path):
            return None
        try:
            self.entries = {(e.producer_id, e.last_offset): e
                            for e in segment.txn_index().entries}
        except (OSError, FileFormatError) as e:
            self.entries = None
            self.problem = "%s: cannot be read: %s" % (printable_name(segment.txn_index_path),
                                                       getattr(e, "strerror", None) or e)
            return self.problem
        return None


class _Scan:
    """The walk over one partition's batches (ProducerStateManager's view of them)."""

    def __init__(self, directory: str, hanging_after_ms: int) -> None:
        self.summary = PartitionSummary(directory, hanging_after_ms)
        self.open: Dict[int, Transaction] = {}  # producer id -> its open transaction
        self.tracker = TxnTracker()  # the aborted transactions' index entries, as Kafka lists them
        self.index = _TxnIndexOf()

    def batch(self, segment: Segment, batch: Batch, records: Optional[Records]) -> Iterator[Item]:
        """The transaction ``batch`` ends, if any, and what is wrong with it."""
        summary = self.summary
        if batch.magic >= 2 and batch.max_timestamp >= 0:
            summary.newest_timestamp = max(batch.max_timestamp, summary.newest_timestamp
                                           if summary.newest_timestamp is not None
                                           else batch.max_timestamp)
        summary.log_end_offset = batch.last_offset + 1
        if not batch.is_transactional or batch.producer_id < 0:
            return
        pid = batch.producer_id
        if not batch.is_control:
            self.tracker.data(pid, batch.base_offset)
            txn = self.open.get(pid)
            if txn is None:
                txn = self.open[pid] = Transaction(summary.directory, pid, batch.producer_epoch,
                                                   batch.base_offset, batch.max_timestamp)
            txn.batches += 1
            txn.records += batch.count or 0  # a transactional batch is v2: its count is set
            return
        if records is None or not len(records):
            return  # an empty control batch: its transaction was cleaned away (no marker)
        try:
            type_id = control.control_type(records.keys[0])
            if type_id not in (control.ABORT, control.COMMIT):
                return
            coordinator_epoch = control.end_txn_marker(records.values[0])[1]
        except CorruptRecordError as e:
            summary.problems += 1
            yield Note("%s: the control batch at offset %d: %s"
                       % (printable_name(segment.log_path), batch.base_offset, e), counted=True)
            return
        expected = self.tracker.marker(pid, batch.base_offset, type_id == control.ABORT)
        txn = self.open.pop(pid, None)
        if txn is None:
            txn = Transaction(summary.directory, pid, batch.producer_epoch, None, None)
            summary.empty += 1
        elif type_id == control.ABORT:
            summary.aborted += 1
        else:
            summary.committed += 1
        txn.marker = control.control_type_name(type_id)
        txn.end_offset = batch.base_offset
        txn.marker_producer_epoch = batch.producer_epoch
        txn.coordinator_epoch = coordinator_epoch
        txn.marker_timestamp = records.timestamps[0]
        txn.segment = segment.base_offset
        if expected is not None:
            problem = self.index.load(segment)
            if problem is not None:
                summary.problems += 1
                yield Note(problem, counted=True)
            self._check_index(txn, expected)
        yield txn

    def _check_index(self, txn: Transaction, expected: Tuple[int, int, int, int]) -> None:
        """Is the aborted ``txn`` listed in the .txnindex of its marker's segment, as the
        broker writes it (``expected``: producer id, first, last and last stable offset)?"""
        entries = self.index.entries
        if entries is None:
            txn.txn_index_problem = "the .txnindex cannot be read"
            return
        entry = entries.get((expected[0], expected[2]))
        txn.in_txn_index = entry is not None
        if entry is not None:
            wrong = ["%s %d (expected %d)" % (name, got, want) for name, got, want in
                     (("firstOffset", entry.first_offset, expected[1]),
                      ("lastStableOffset", entry.last_stable_offset, expected[3]))
                     if got != want]
            if wrong:
                txn.txn_index_problem = "listed with " + ", ".join(wrong)
        else:
            self.summary.missing_from_txn_index += 1

    def finish(self, segments: List[Segment], reference: Tuple[Optional[int], str]
               ) -> Iterator[Item]:
        """The open transactions, in the order they began, then the summary; their ages
        against ``reference`` (the time and its source; None and NEWEST_TIMESTAMP: the newest
        batch timestamp of the partition)."""
        summary = self.summary
        if summary.log_end_offset == 0 and segments:
            summary.log_end_offset = segments[-1].base_offset or 0  # no batch: an empty log
        summary.reference_ms, summary.reference_source = reference
        if summary.reference_source == NEWEST_TIMESTAMP:
            summary.reference_ms = summary.newest_timestamp
        reference_ms = summary.reference_ms
        summary.last_stable_offset = summary.log_end_offset
        for t in sorted(self.open.values(), key=lambda t: t.first_offset or 0):
            first = t.first_offset if t.first_offset is not None else summary.log_end_offset
            summary.open += 1
            summary.last_stable_offset = min(summary.last_stable_offset, first)
            t.lso_lag = summary.log_end_offset - first
            if (reference_ms is not None and t.first_timestamp is not None
                    and t.first_timestamp >= 0):
                t.age_ms = reference_ms - t.first_timestamp
                t.hanging = t.age_ms > summary.hanging_after_ms
                summary.hanging += t.hanging
            yield t
        yield summary


def _reference(now: Optional[int], age_from: str) -> Tuple[Optional[int], str]:
    """The time the ages are measured against, and its source (see finish)."""
    if age_from not in AGE_FROM:
        raise UsageError("age_from %r: not one of %s" % (age_from, ", ".join(AGE_FROM)))
    if age_from == AGE_FROM_NEWEST_TIMESTAMP:
        if now is not None:
            raise UsageError("now %d given with age_from %r: the ages are measured from one "
                             "or the other" % (now, age_from))
        return None, NEWEST_TIMESTAMP
    if now is not None:
        return now, NOW_GIVEN
    return int(time.time() * 1000), WALL_CLOCK


def partition_transactions(directory: str, now: Optional[int] = None,
                           hanging_after_ms: int = DEFAULT_HANGING_AFTER_MS,
                           max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                           age_from: str = AGE_FROM_NOW) -> Iterator[Item]:
    """The transactions of the partition in ``directory``, in bounded memory: each ended
    transaction (Transaction) as its marker is met, in log order, then the open ones in the
    order they began, then the PartitionSummary; a Note, as it is met, for invalid data (a
    batch whose CRC fails, bytes that are no batch: passed over) and for a .txnindex that
    cannot be read. The ages of open transactions are measured back to the max timestamp of
    their first batch from ``now`` (epoch ms; when None, the wall clock), or, with ``age_from``
    AGE_FROM_NEWEST_TIMESTAMP, from the newest batch timestamp in the partition; one is hanging
    when its age is above ``hanging_after_ms``. Raises UsageError for an ``age_from`` that is
    neither or a ``now`` given with the newest timestamp, OSError when a segment cannot be
    read."""
    yield from _partition_transactions(directory, _reference(now, age_from), hanging_after_ms,
                                       max_message_size)


def _partition_transactions(directory: str, reference: Tuple[Optional[int], str],
                            hanging_after_ms: int, max_message_size: int) -> Iterator[Item]:
    segments = Partition(directory).segments()
    scan = _Scan(directory, hanging_after_ms)
    for segment, event in segment_events(segments, records=True, valid_only=True,
                                         max_message_size=max_message_size):
        if isinstance(event, BatchRead):
            if not event.first:
                continue
            if event.batch.is_valid:
                yield from scan.batch(segment, event.batch, event.records)
            else:
                scan.summary.problems += 1
                yield Note("%s: the batch at position %d (offset %d): its CRC does not match "
                           "its bytes; passed over" % (printable_name(segment.log_path),
                                                       event.batch.position,
                                                       event.batch.base_offset), counted=True)
        elif to_say(event) and not (isinstance(event, BatchProblem) and event.kind == CONTROL):
            # (a malformed marker is the Note _Scan.batch gives when it reads the marker)
            scan.summary.problems += 1
            yield Note(problem_text(segment.log_path, event), counted=True)
    yield from scan.finish(segments, reference)


def transactions_of(path: str, now: Optional[int] = None,
                    hanging_after_ms: int = DEFAULT_HANGING_AFTER_MS,
                    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                    age_from: str = AGE_FROM_NOW) -> Iterator[Union[Item, TargetError]]:
    """partition_transactions for every partition ``path`` stands for (a .log file's
    partition, a partition directory, every partition of a log directory; the wall clock read
    once for them all), and a TargetError for what cannot be read (the other partitions are
    still read). Raises UsageError for a file that is not a segment, or as
    partition_transactions does."""
    reference = _reference(now, age_from)
    for directory in partition_targets(path):
        if isinstance(directory, TargetError):
            yield directory
            continue
        try:
            yield from _partition_transactions(directory, reference, hanging_after_ms,
                                               max_message_size)
        except (OSError, KafkalogError) as e:
            yield TargetError(directory, e)
