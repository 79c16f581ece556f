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
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

from ..errors import KafkalogError
from ..format import control
from ..format.errors import CorruptRecordError
from ..format.records import Batch, Records
from .files import FileFormatError, printable_name
from .indexbuild import TxnTracker
from .logdir import partitions_of
from .partition import Partition
from .read import BatchRead, problem_text, segment_events
from .segment import DEFAULT_MAX_MESSAGE_SIZE, Segment
from .txnindex import AbortedTxn
from .verify import TargetError

# Kafka's transaction.max.timeout.ms default: a transaction open longer is past any timeout a
# producer may ask for, and the coordinator should have aborted it.
DEFAULT_HANGING_AFTER_MS = 900000

COMMIT, ABORT, OPEN = "COMMIT", "ABORT", "OPEN"

# Where the reference time of the ages comes from
NOW_GIVEN = "now"                    # the caller's --now
NEWEST_TIMESTAMP = "newestTimestamp"  # the newest batch timestamp in the partition


class Transaction:
    """One transaction of a producer: ``first_offset`` (base offset of its first transactional
    data batch; None for a marker that ended no open transaction), ``first_timestamp`` (that
    batch's max timestamp), ``producer_epoch`` (that batch's epoch), ``batches`` and
    ``records`` (its data batches and their record count), then, once ended, ``marker`` (COMMIT
    or ABORT), ``end_offset`` (the marker's offset), ``marker_epoch`` (the marker batch's
    producer epoch), ``coordinator_epoch``, ``marker_timestamp`` and ``segment`` (the base
    offset of the segment holding the marker). For an ABORT: ``in_txn_index`` (is it listed in
    that segment's .txnindex; None when the .txnindex cannot be read) and ``txn_index_problem``
    (what differs in the entry listed, or why the index could not be read). For an open one:
    ``age_ms`` and ``lso_lag`` (offsets from its first offset to the log end offset), set by
    the partition's report, and ``hanging`` (older than the threshold)."""

    __slots__ = ("producer_id", "producer_epoch", "first_offset", "first_timestamp", "batches",
                 "records", "marker", "end_offset", "marker_epoch", "coordinator_epoch",
                 "marker_timestamp", "segment", "in_txn_index", "txn_index_problem", "age_ms",
                 "lso_lag", "hanging")

    def __init__(self, producer_id: int, producer_epoch: int, first_offset: Optional[int],
                 first_timestamp: Optional[int]) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.first_offset = first_offset
        self.first_timestamp = first_timestamp
        self.batches = 0
        self.records = 0
        self.marker: Optional[str] = None
        self.end_offset: Optional[int] = None
        self.marker_epoch: Optional[int] = None
        self.coordinator_epoch: Optional[int] = None
        self.marker_timestamp: Optional[int] = None
        self.segment: Optional[int] = None
        self.in_txn_index: Optional[bool] = None
        self.txn_index_problem: Optional[str] = None
        self.age_ms: Optional[int] = None
        self.lso_lag: Optional[int] = None
        self.hanging = False

    @property
    def state(self) -> str:
        """COMMIT, ABORT, or OPEN (no marker has ended it)."""
        return self.marker if self.marker is not None else OPEN

    @property
    def epoch_bumped(self) -> bool:
        """Was it ended by a marker of a newer producer epoch than its data's: the coordinator
        bumped the epoch to end it (a fenced producer's transaction, or transactions V2)?"""
        return self.marker_epoch is not None and self.marker_epoch > self.producer_epoch

    @property
    def empty(self) -> bool:
        """A marker that ended no open transaction of its producer."""
        return self.first_offset is None


class PartitionTransactions:
    """The transactions of one partition (``directory``), by producer id and epoch, then in
    offset order (a marker that ended nothing at its own offset), with ``log_end_offset``,
    ``last_stable_offset`` (the first offset of the earliest open transaction, else the log
    end offset), ``newest_timestamp`` (the newest batch max timestamp, None without batches),
    the ``reference_ms`` the ages of open transactions are measured from and where it comes
    from (``reference_source``: NOW_GIVEN or NEWEST_TIMESTAMP), ``hanging_after_ms`` and
    ``problems`` (one line each: invalid data passed over, an unreadable .txnindex)."""

    __slots__ = ("directory", "transactions", "log_end_offset", "last_stable_offset",
                 "newest_timestamp", "reference_ms", "reference_source", "hanging_after_ms",
                 "problems")

    def __init__(self, directory: str, transactions: List[Transaction], log_end_offset: int,
                 newest_timestamp: Optional[int], reference_ms: Optional[int],
                 reference_source: str, hanging_after_ms: int, problems: List[str]) -> None:
        self.directory = directory
        self.transactions = transactions
        self.log_end_offset = log_end_offset
        self.newest_timestamp = newest_timestamp
        self.reference_ms = reference_ms
        self.reference_source = reference_source
        self.hanging_after_ms = hanging_after_ms
        self.problems = problems
        firsts = [t.first_offset for t in self.open if t.first_offset is not None]
        self.last_stable_offset = min(firsts, default=log_end_offset)

    @property
    def open(self) -> List[Transaction]:
        return [t for t in self.transactions if t.marker is None]

    @property
    def hanging(self) -> List[Transaction]:
        return [t for t in self.transactions if t.hanging]

    @property
    def lso_lag(self) -> int:
        """How many offsets the open transactions hold the last stable offset back by."""
        return self.log_end_offset - self.last_stable_offset

    def count(self, state: str) -> int:
        return sum(1 for t in self.transactions if t.state == state and not t.empty)

    @property
    def missing_from_txn_index(self) -> List[Transaction]:
        """The aborted transactions not listed in their segment's .txnindex."""
        return [t for t in self.transactions if t.in_txn_index is False]


class _Scan:
    """The walk over one partition's batches (ProducerStateManager's view of them)."""

    def __init__(self) -> None:
        self.open: Dict[int, Transaction] = {}  # producer id -> its open transaction
        self.done: List[Transaction] = []
        self.tracker = TxnTracker()  # the aborted transactions' index entries, as Kafka lists them
        self.expected: Dict[Tuple[int, int], Tuple[int, int, int, int]] = {}
        self.newest: Optional[int] = None
        self.log_end: Optional[int] = None
        self.problems: List[str] = []

    def batch(self, segment: Segment, batch: Batch, records: Optional[Records]) -> None:
        if batch.magic >= 2 and batch.max_timestamp >= 0:
            self.newest = batch.max_timestamp if self.newest is None else max(self.newest,
                                                                              batch.max_timestamp)
        self.log_end = batch.last_offset + 1
        if not batch.is_transactional or batch.producer_id < 0:
            return
        pid = batch.producer_id
        if not batch.is_control:
            self.tracker.data(pid, batch.base_offset)
            txn = self.open.get(pid)
            if txn is None:
                txn = self.open[pid] = Transaction(pid, batch.producer_epoch, batch.base_offset,
                                                   batch.max_timestamp)
            txn.batches += 1
            txn.records += batch.count
            return
        if records is None or not len(records):
            return  # an empty control batch: its transaction was cleaned away (no marker)
        try:
            type_id = control.control_type(records.keys[0])
            if type_id not in (control.ABORT, control.COMMIT):
                return
            version, coordinator_epoch = control.end_txn_marker(records.values[0])
        except CorruptRecordError as e:
            self.problems.append("%s: the control batch at offset %d: %s"
                                 % (printable_name(segment.log_path), batch.base_offset, e))
            return
        entry = self.tracker.marker(pid, batch.base_offset, type_id == control.ABORT)
        if entry is not None:
            self.expected[(pid, batch.base_offset)] = entry
        txn = self.open.pop(pid, None)
        if txn is None:
            txn = Transaction(pid, batch.producer_epoch, None, None)
        txn.marker = control.control_type_name(type_id)
        txn.end_offset = batch.base_offset
        txn.marker_epoch = batch.producer_epoch
        txn.coordinator_epoch = coordinator_epoch
        txn.marker_timestamp = records.timestamps[0]
        txn.segment = segment.base_offset
        self.done.append(txn)


def _index_entries(segment: Segment, problems: List[str]) -> Optional[Sequence[AbortedTxn]]:
    """The entries of the segment's .txnindex (none when it has no file), or None (said in
    ``problems``) when it cannot be read."""
    if not os.path.exists(segment.txn_index_path):
        return []
    try:
        return segment.txn_index().entries
    except (OSError, FileFormatError) as e:
        problems.append("%s: cannot be read: %s" % (printable_name(segment.txn_index_path),
                                                      getattr(e, "strerror", None) or e))
        return None


def _check_index(txns: List[Transaction], segments: List[Segment],
                 expected: Dict[Tuple[int, int], Tuple[int, int, int, int]],
                 problems: List[str]) -> None:
    """Set ``in_txn_index`` of every aborted transaction: is its entry (producer id, marker
    offset) in the .txnindex of the segment holding its marker, and as the broker writes it?"""
    by_segment: Dict[Optional[int], Optional[Dict[Tuple[int, int], AbortedTxn]]] = {}
    for segment in segments:
        if any(t.segment == segment.base_offset and t.marker == ABORT for t in txns):
            entries = _index_entries(segment, problems)
            by_segment[segment.base_offset] = None if entries is None else {
                (e.producer_id, e.last_offset): e for e in entries}
    for t in txns:
        base, end = t.segment, t.end_offset
        if t.marker != ABORT or t.empty or base is None or end is None:
            continue
        listed = by_segment.get(base)
        if listed is None:
            t.txn_index_problem = "the .txnindex cannot be read"
            continue
        entry = listed.get((t.producer_id, end))
        t.in_txn_index = entry is not None
        want = expected.get((t.producer_id, end))
        if entry is not None and want is not None:
            wrong = ["%s %d (expected %d)" % (name, got, exp) for name, got, exp in
                     (("firstOffset", entry.first_offset, want[1]),
                      ("lastStableOffset", entry.last_stable_offset, want[3]))
                     if got != exp]
            if wrong:
                t.txn_index_problem = "listed with " + ", ".join(wrong)


def partition_transactions(directory: str, now: Optional[int] = None,
                           hanging_after_ms: int = DEFAULT_HANGING_AFTER_MS,
                           max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
                           ) -> PartitionTransactions:
    """The transactions of the partition in ``directory``. The ages of open transactions are
    measured from ``now`` (epoch ms) or, when None, from the newest batch timestamp in the
    partition, back to the max timestamp of their first batch; one is hanging when its age is
    above ``hanging_after_ms``. Invalid data (a batch whose CRC fails, bytes that are no batch)
    is passed over and said in ``problems``. Raises OSError when a file cannot be read."""
    partition = Partition(directory)
    segments = partition.segments()
    scan = _Scan()
    for segment, event in segment_events(segments, records=True, valid_only=True,
                                         max_message_size=max_message_size):
        if isinstance(event, BatchRead):
            if not event.first:
                continue
            if event.batch.is_valid:
                scan.batch(segment, event.batch, event.records)
            else:
                scan.problems.append("%s: the batch at position %d (offset %d): its CRC does not "
                                     "match its bytes; passed over"
                                     % (printable_name(segment.log_path), event.batch.position,
                                        event.batch.base_offset))
        elif event.counted:
            scan.problems.append(problem_text(segment.log_path, event))
    txns = scan.done + list(scan.open.values())
    _check_index(txns, segments, scan.expected, scan.problems)
    log_end: int = (scan.log_end if scan.log_end is not None
                    else (segments[-1].base_offset or 0) if segments else 0)
    source = NOW_GIVEN if now is not None else NEWEST_TIMESTAMP
    reference = now if now is not None else scan.newest
    for t in scan.open.values():
        assert t.first_offset is not None
        t.lso_lag = log_end - t.first_offset
        if reference is not None and t.first_timestamp is not None and t.first_timestamp >= 0:
            t.age_ms = reference - t.first_timestamp
            t.hanging = t.age_ms > hanging_after_ms
    # per producer id and epoch, in offset order
    txns.sort(key=lambda t: (t.producer_id, t.producer_epoch,
                             t.first_offset if t.first_offset is not None else t.end_offset or 0))
    return PartitionTransactions(directory, txns, log_end, scan.newest, reference, source,
                                 hanging_after_ms, scan.problems)


def transactions_of(path: str, now: Optional[int] = None,
                    hanging_after_ms: int = DEFAULT_HANGING_AFTER_MS,
                    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
                    ) -> Iterator[Union[PartitionTransactions, TargetError]]:
    """partition_transactions for every partition ``path`` stands for (a .log file's
    partition, a partition directory, every partition of a log directory), and a TargetError
    for what cannot be read (the other partitions are still read). Raises UsageError for a
    file that is not a segment."""
    errors: List[Tuple[str, OSError]] = []
    try:
        directories = partitions_of(path, errors)
    except OSError as e:
        directories = []
        errors.append((path, e))
    for where, error in errors:
        yield TargetError(where, error)
    for directory in directories:
        try:
            yield partition_transactions(directory, now, hanging_after_ms, max_message_size)
        except (OSError, KafkalogError) as e:
            yield TargetError(directory, e)
