"""Checking a segment's indexes against its log, as DumpLogSegments and the broker do (the
sanity checks of OffsetIndex, TimeIndex and TransactionIndex at LogLoader's start-up).

Each check returns a list of ``Problem``; an empty list means the file is sound.
``verify_segment`` checks one segment's indexes, ``verify_target`` every index a path stands for.
"""

from __future__ import annotations

import array
import bisect
import os
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Optional, Protocol, Sized,
                    Tuple, TypeVar, Union, cast)

from ..errors import KafkalogError, UsageError
from ..format import control
from ..format.errors import CorruptRecordError, LimitExceededError
from ..format.records import Batch
from ..format.scan import InvalidBytes
from . import files, names
from .files import (ActiveSegments, FileChangedError, FileFormatError, Found, expand,
                    printable_name)
from .index import OffsetIndex, TimeIndex
from .leader_epochs import LeaderEpochCache, read_checkpoint_strict
from .partition import Partition
from .segment import DEFAULT_MAX_MESSAGE_SIZE, LogFile, Segment
from .txnindex import TransactionIndex

_AnyIndex = Union[OffsetIndex, TimeIndex]

# Problem kinds (stable names, used in JSON output).
OFFSET_MISMATCH = "offset_mismatch"            # entry's offset != lastOffset of the batch there
NOT_A_BATCH = "not_a_batch_start"              # no complete batch starts at the entry's position
POSITION_PAST_END = "position_past_end"
NOT_INCREASING = "not_increasing"
TIMESTAMP_MISMATCH = "timestamp_mismatch"
TIMESTAMP_OUT_OF_ORDER = "timestamp_out_of_order"
OFFSET_NOT_FOUND = "offset_not_found"
SANITY = "sanity_check_failed"
TXN_WITHOUT_ABORT = "txn_entry_without_abort"
ABORT_WITHOUT_TXN = "abort_without_txn_entry"
TXN_FIRST_OFFSET = "txn_first_offset_mismatch"
UNREADABLE = "unreadable"
MISSING_LOG = "missing_log"
# a live segment's .log without its .index: LogSegment.sanityCheck throws NoSuchFileException and
# LogLoader.loadSegmentFiles recovers the segment (an error in the broker's log when the segment
# is below the recovery point or the shutdown was clean). A problem for a sealed segment; for the
# active one a note (MISSING_INDEX_NOTE): a crash can leave it so, and the broker's load
# recovers the segment above the recovery point in any case.
MISSING_INDEX = "missing_index"
MISSING_INDEX_NOTE = "missing_active_index"
# a note: a live segment's .log without its .timeindex, which the broker creates empty
# (LogSegment.sanityCheck) without recovering the segment
MISSING_TIME_INDEX_NOTE = "missing_time_index"
# the leader-epoch-checkpoint against the log's batches (LeaderEpochCheck)
MALFORMED_CHECKPOINT = "malformed_checkpoint"    # not a file LeaderEpochFileCache wrote
LEADER_EPOCH_MISSING = "leader_epoch_missing"    # batches of an epoch the cache lacks there
LEADER_EPOCH_MISMATCH = "leader_epoch_mismatch"  # the cache gives a later epoch for them
LEADER_EPOCH_BACKWARDS = "leader_epoch_backwards"  # an epoch below one earlier in the log
# Note kinds: a cache entry at or past the log end offset, which the broker drops at load;
# batches before the cache's first entry, of no later epoch (a cache started after them)
LEADER_EPOCH_PAST_END = "leader_epoch_past_end"
LEADER_EPOCH_BEFORE_CACHE = "leader_epoch_before_cache"
# A note kind: an index whose log is gone as the broker removes a segment's files one at a time
BROKER_STATE = "broker_state"


class Problem:
    """One finding: ``kind`` (above), a one-line ``message``, and the numbers behind it."""

    __slots__ = ("file", "kind", "message", "fields")

    def __init__(self, file: str, kind: str, message: str, **fields: Any) -> None:
        # file names (and messages naming files) as they may be printed: escaped, one line
        self.file = files.printable_name(file)
        self.kind = kind
        self.message = files.printable_name(message)
        self.fields = fields

    def as_dict(self) -> Dict[str, Any]:
        out = {"type": "problem", "file": self.file, "kind": self.kind, "message": self.message}
        out.update(self.fields)
        return out


def batch_at(log: LogFile, position: int) -> Optional[Union[Batch, InvalidBytes]]:
    """The entry (Batch or InvalidBytes) that starts at ``position`` of ``log``, or None past
    the end."""
    if position < 0 or position >= log.size:
        return None
    for item in log.entries(position):
        return item
    return None


def check_offset_index(index: OffsetIndex, log: LogFile,
                       chain: Optional["_BatchChain"] = None) -> List[Problem]:
    """Every entry must point at the start of a batch whose last offset is the entry's offset,
    inside the log, with offsets strictly increasing.

    Positions on the log's batch chain (``chain``, read once: see _BatchChain) are looked up,
    not read again; a position off the chain (a corrupt entry) is read where it points, once.
    """
    problems = []
    prev = None
    if chain is None:
        chain = _BatchChain(log)
    off_chain: Dict[int, Optional[_Summary]] = {}
    for offset, position in index.entries:
        if prev is not None and offset <= prev:
            problems.append(Problem(index.path, NOT_INCREASING,
                                    "index offset %d follows %d: entries must increase"
                                    % (offset, prev), index_offset=offset, previous_offset=prev))
        prev = offset
        item = chain.batch_summary(position)
        if item is None and 0 <= position < log.size:
            if position not in off_chain:
                off_chain[position] = _Summary.of(batch_at(log, position))
            item = off_chain[position]
        if item is None:
            problems.append(Problem(index.path, POSITION_PAST_END,
                                    "index offset %d points at position %d, past the end of the "
                                    "log (%d bytes)" % (offset, position, log.size),
                                    index_offset=offset, position=position))
        elif item.reason is not None:
            problems.append(Problem(index.path, NOT_A_BATCH,
                                    "index offset %d points at position %d, where no batch starts "
                                    "(%s)" % (offset, position, item.reason),
                                    index_offset=offset, position=position))
        elif item.last_offset != offset:
            problems.append(Problem(index.path, OFFSET_MISMATCH,
                                    "Index offset: %d, log offset: %d" % (offset, item.last_offset),
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


class _BatchChain:
    """The batches a scan of ``log`` from position 0 meets, as two arrays (positions, last
    offsets), built in one pass: "the first batch that a scan from position P meets whose last
    offset reaches X" is then a search, not a rescan of the log.

    A scan from a position on the chain meets the chain's batches from there on (a scan depends
    only on where it starts). A start off the chain (a corrupt index's position) is scanned
    from until it joins the chain or the data ends, once per start.
    """

    def __init__(self, log: LogFile) -> None:
        self.log = log
        self.positions = array.array("q")
        self.lasts = array.array("q")
        # what the leader epoch check needs (LeaderEpochCheck): each batch's base offset and
        # partitionLeaderEpoch (-1 for a v0/v1 entry, which has none)
        self.bases = array.array("q")
        self.epochs = array.array("i")
        monotonic = True
        prev = None
        for batch in log.batches(0):
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
        for batch in self.log.batches(start):
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
                     chain: Optional[_BatchChain] = None) -> List[Problem]:
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
        chain = _BatchChain(log)
    # batch position -> max record timestamp, or the error reading it
    max_timestamps: Dict[int, Union[int, CorruptRecordError]] = {}
    for ts, offset in tindex.entries:
        start = oindex.lookup(offset)[1] if oindex is not None else 0
        found = chain.find(start, offset)
        if found is None or found[1] != offset:
            log_offset = -1 if found is None else found[1]
            problems.append(Problem(tindex.path, OFFSET_NOT_FOUND,
                                    "Indexed offset: %d, found log offset: %d"
                                    % (offset, log_offset),
                                    index_offset=offset, log_offset=log_offset))
        else:
            position = found[0]
            if position not in max_timestamps:
                batch = cast(Batch, batch_at(log, position))  # on the chain: a batch starts there
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
                problems.append(Problem(tindex.path, UNREADABLE,
                                        "batch at position %d for indexed offset %d cannot be "
                                        "read: %s" % (position, offset, max_ts),
                                        index_offset=offset))
            elif max_ts != ts:
                problems.append(Problem(tindex.path, TIMESTAMP_MISMATCH,
                                        "Index timestamp: %d, log timestamp: %d" % (ts, max_ts),
                                        index_timestamp=ts, log_timestamp=max_ts))
            if prev_ts >= ts:
                problems.append(Problem(tindex.path, TIMESTAMP_OUT_OF_ORDER,
                                        "Index timestamp: %d, Previously indexed timestamp: %d"
                                        % (ts, prev_ts), index_timestamp=ts,
                                        previous_timestamp=prev_ts))
        prev_ts = ts
    return problems


def sanity_problems(index: _AnyIndex) -> List[Problem]:
    """The broker's start-up sanity check of an index, as Problems."""
    return [Problem(index.path, SANITY, message) for message in index.sanity_problems()]


def check_txn_index(txn: TransactionIndex, log: LogFile) -> List[Problem]:
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
    for item in log.batches():
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
            problems.append(Problem(txn.path, TXN_WITHOUT_ABORT,
                                    "aborted transaction of producer %d ending at offset %d: no "
                                    "ABORT marker of that producer there"
                                    % (e.producer_id, e.last_offset),
                                    producer_id=e.producer_id, last_offset=e.last_offset))
        elif (marker[1] is not None and marker[1] != e.first_offset
              and (txn.base_offset is None
                   or not e.first_offset < txn.base_offset <= marker[1])):
            # (a transaction begun in an earlier segment starts before this one's base)
            problems.append(Problem(txn.path, TXN_FIRST_OFFSET,
                                    "aborted transaction of producer %d ending at offset %d: first "
                                    "offset %d, the log says %d" % (e.producer_id, e.last_offset,
                                                                     e.first_offset, marker[1]),
                                    producer_id=e.producer_id, first_offset=e.first_offset,
                                    log_first_offset=marker[1]))
    for offset, (pid, first) in sorted(aborts.items()):
        if first is not None and offset not in listed:
            problems.append(Problem(txn.path, ABORT_WITHOUT_TXN,
                                    "ABORT marker of producer %d at offset %d (transaction from "
                                    "offset %d) has no entry" % (pid, offset, first),
                                    producer_id=pid, last_offset=offset, first_offset=first))
    return problems


class FileReport:
    """What verifying one index file found: ``problems`` fail it, ``notes`` only inform;
    ``error``, an OSError, says the file could not be opened as a regular file at all (a
    FIFO, a device, a directory, no permission): unreadable input rather than a finding."""

    __slots__ = ("path", "kind", "entries", "problems", "notes", "error")

    def __init__(self, path: str, kind: str, entries: int = 0, problems: Iterable[Problem] = (),
                 notes: Iterable[Problem] = (), error: Optional[OSError] = None) -> None:
        self.path = path
        self.kind = kind
        self.entries = entries
        self.problems = list(problems)
        self.notes = list(notes)
        self.error = error


class _HasEntries(Protocol):
    @property
    def entries(self) -> Sized: ...


_I = TypeVar("_I", bound=_HasEntries)


def _open_index(kind: str, path: str,
                reader: Callable[[str], _I]) -> Tuple[Optional[_I], FileReport]:
    """An index file read (None when it cannot be), and its report so far: an OSError is
    unreadable input (``error``), a malformed file a problem."""
    try:
        index = reader(path)
    except OSError as e:
        note = vanished_note(path, e)
        if note is not None:
            return None, FileReport(path, kind, notes=[note])
        return None, FileReport(path, kind, error=e)
    except FileFormatError as e:
        return None, FileReport(path, kind, problems=[unreadable(path, e)])
    return index, FileReport(path, kind, len(index.entries))


class _SegmentCheck:
    """The checks of one segment's indexes against its log (``log``: None when the segment
    has no .log), the log's batch chain read once, when an index first needs it."""

    def __init__(self, segment: Segment, log: Optional[LogFile], active: bool,
                 sanity_only: bool) -> None:
        self.segment = segment
        self.log = log
        self.active = active
        self.sanity_only = sanity_only
        self._chain: Optional[_BatchChain] = None

    def chain(self, log: LogFile) -> _BatchChain:
        if self._chain is None:
            self._chain = _BatchChain(log)
        return self._chain

    def offset_and_time_indexes(self) -> List[FileReport]:
        """The .index, then the .timeindex (its entries are found from the offset index's)."""
        reports = []
        oindex = None
        readers: Tuple[Tuple[str, Callable[[str], _AnyIndex]], ...] = (
            (names.INDEX, OffsetIndex), (names.TIMEINDEX, TimeIndex))
        for kind, reader in readers:
            path = self.segment.file(kind)
            if not os.path.lexists(path):
                report = (self.missing_offset_index(path) if kind == names.INDEX
                          else self.missing_time_index(path))
                if report is not None:
                    reports.append(report)
                continue
            index, report = _open_index(kind, path, reader)
            reports.append(report)
            if index is None:
                continue
            if isinstance(index, OffsetIndex):
                oindex = index
            self._check_index(index, oindex, report)
        return reports

    def missing_time_index(self, path: str) -> Optional[FileReport]:
        """A note on a live segment's missing .timeindex: the broker's load creates it empty and
        goes on (LogSegment.sanityCheck), without recovering the segment; the segment's time
        lookups then find nothing in it, and time retention falls back to the .log's
        modification time (LogSegment.largestTimestamp). None when there is nothing to say."""
        if self.log is None or self.segment.suffix or not os.path.lexists(self.segment.log_path):
            return None
        log_name = files.printable_name(os.path.basename(self.segment.log_path))
        note = Problem(path, MISSING_TIME_INDEX_NOTE,
                       "the segment %s has no time index: a broker's load creates it empty "
                       "(time retention of the segment then goes by the file's modification "
                       "time); kafkalog recover --full rebuilds it" % log_name)
        return FileReport(path, names.TIMEINDEX, notes=[note])

    def missing_offset_index(self, path: str) -> Optional[FileReport]:
        """The report on a live segment's missing .index (None: nothing to say): the broker's
        load recovers such a segment (LogSegment.sanityCheck, LogLoader.loadSegmentFiles)."""
        if self.log is None or self.segment.suffix or not os.path.lexists(self.segment.log_path):
            # no log (nothing to index), or a segment being deleted, cleaned or swapped, whose
            # files go one at a time
            return None
        log_name = files.printable_name(os.path.basename(self.segment.log_path))
        if self.active:
            note = Problem(path, MISSING_INDEX_NOTE,
                           "the active segment %s has no offset index: a broker's load recovers "
                           "the segment and rebuilds it" % log_name)
            return FileReport(path, names.INDEX, notes=[note])
        problem = Problem(path, MISSING_INDEX,
                          "the offset index of the sealed segment %s is missing: a broker's "
                          "load recovers the segment to rebuild it (kafkalog recover does the "
                          "same)" % log_name)
        return FileReport(path, names.INDEX, problems=[problem])

    def _check_index(self, index: _AnyIndex, oindex: Optional[OffsetIndex],
                     report: FileReport) -> None:
        if index.zero_tail and not self.active:
            report.notes.append(zero_tail_note(index))
        checked = index.trimmed() if self.active and not self.sanity_only else index
        report.problems.extend(sanity_problems(checked))
        if self.sanity_only:
            return
        if self.log is None:
            note = broker_state_note(index.path)
            if note is not None:
                report.notes.append(note)
            else:
                report.problems.append(missing_log(index.path, self.segment.log_path))
        elif isinstance(index, OffsetIndex):
            report.problems.extend(check_offset_index(index, self.log, self.chain(self.log)))
        else:
            report.problems.extend(check_time_index(index, oindex, self.log,
                                                    header_timestamps=True,
                                                    chain=self.chain(self.log)))

    def txn_index(self) -> Optional[FileReport]:
        """The .txnindex's report; for a segment without one, a report only when the log has
        aborted transactions it should list."""
        path = self.segment.txn_index_path
        if os.path.lexists(path):
            txn, report = _open_index(names.TXNINDEX, path, TransactionIndex)
            if txn is not None:
                report.problems.extend(Problem(path, SANITY, m) for m in txn.sanity_problems())
                if not self.sanity_only and self.log is not None:
                    report.problems.extend(check_txn_index(txn, self.log))
            return report
        if self.sanity_only or self.log is None or self.segment.suffix:
            # a segment being deleted, cleaned or swapped has its files renamed and removed one
            # at a time (LogSegment.changeFileSuffixes, deleteIfExists): one may be gone
            return None
        # The broker creates the file with the first aborted transaction: none, no file.
        problems = check_txn_index(TransactionIndex.empty(path), self.log)
        return FileReport(path, names.TXNINDEX, 0, problems) if problems else None


def verify_segment(segment: Segment, active: bool, sanity_only: bool = False,
                   max_message_size: Optional[int] = None,
                   epochs: Optional["LeaderEpochCheck"] = None) -> List[FileReport]:
    """Check the .index, .timeindex and .txnindex of ``segment`` (those that exist).

    ``active``: the partition's last segment, whose indexes a live or crashed broker leaves
    pre-allocated; their zero tail is trimmed before the sanity check, as the broker trims it on
    close. Anywhere else a zero tail is reported (a crash can leave one: KAFKA-19200), and with
    ``sanity_only`` the broker's start-up check runs on the file exactly as it is.

    ``epochs``: the partition's leader epoch check, given this segment's batches (read once,
    with the indexes' checks) when the segment is live and its log is sound to the end of
    the checks.

    Raises OSError when the log exists but cannot be opened as a regular file, and
    FileChangedError when it is truncated or replaced before the checks end (the findings
    would mix two files); an index that cannot be read is a report with ``error`` set, and
    the others are still checked.
    """
    # lexists: a symlink to a device or a FIFO is refused by the reader, not taken for no log
    log = (segment.open(max_message_size or DEFAULT_MAX_MESSAGE_SIZE)
           if os.path.lexists(segment.log_path) else None)
    try:
        check = _SegmentCheck(segment, log, active, sanity_only)
        reports = check.offset_and_time_indexes()
        txn = check.txn_index()
        feed = (epochs is not None and log is not None and not sanity_only
                and not segment.suffix)
        chain = check.chain(log) if feed and log is not None else None
        if log is not None:
            # The indexes were read by name after the log was opened: a log truncated or
            # replaced meanwhile (retention, the cleaner's swap, a copy put in place) was
            # compared with indexes that are not its own. A segment already being deleted,
            # cleaned or swapped whose log is gone was finished by the broker (its .log goes
            # first): what was read of it is its own.
            try:
                log.check_unchanged()
            except FileChangedError:
                if not segment.suffix or os.path.lexists(segment.log_path):
                    raise
        if epochs is not None and chain is not None:
            epochs.add_segment(segment.base_offset, chain, active)
        return reports if txn is None else reports + [txn]
    finally:
        if log is not None:
            log.close()


def zero_tail_note(index: _AnyIndex) -> Problem:
    """A Problem-shaped note on an index of a sealed segment that still has a zero tail."""
    return Problem(index.path, "zero_tail",
                   "%d zero-filled slots after the %d real entries of a sealed segment's index%s"
                   % (index.zero_tail, index.count,
                      " (left at its full pre-allocated size, as a crash can leave it: KAFKA-19200)"
                      if index.preallocated else ""))


def unreadable(path: str, error: BaseException) -> Problem:
    """A Problem for a file that cannot be read at all."""
    if isinstance(error, OSError):
        message = "%s" % (error.strerror or error)
    else:
        message = str(error)
        prefix = path + ": "
        if message.startswith(prefix):
            message = message[len(prefix):]
    return Problem(path, UNREADABLE, message)


def broker_state_note(path: str) -> Optional[Problem]:
    """A note when the index ``path``, whose .log is missing, is one of the broker's own
    in-between states rather than damage, else None.

    LocalLog.deleteSegmentFiles renames every file of a segment to ``.deleted``
    (LogSegment.changeFileSuffixes: the .log first, then .index, .timeindex, .txnindex) and
    removes them after file.delete.delay.ms (LogSegment.deleteIfExists: the .log first again),
    so any of the renamed indexes may outlive the log; the cleaner and a segment split rename
    ``.cleaned`` to ``.swap`` and ``.swap`` to the live name the same way, and LogLoader deletes
    or completes what a crash leaves of them at start-up. A live index whose .log already bears
    a lifecycle suffix is caught in the middle of such a rename.
    """
    name = os.path.basename(path)
    suffix = names.lifecycle_suffix(name)
    log_name = os.path.basename(names.sibling(path, names.LOG))
    if suffix == names.DELETED:
        why = ("the broker is deleting this segment: it renames each of its files to .deleted "
               "and removes them one at a time, the .log first (LocalLog.deleteSegmentFiles)")
    elif suffix:
        why = ("a %s file the log cleaner or a segment split leaves until it is swapped in or "
               "LogLoader removes it at start-up" % suffix)
    else:
        renamed = [log_name + s for s in names.LIFECYCLE_SUFFIXES
                   if os.path.lexists(os.path.join(os.path.dirname(path), log_name + s))]
        if not renamed:
            return None
        why = ("its log is named %s: the broker is renaming this segment's files, the .log "
               "first (LogSegment.changeFileSuffixes)" % renamed[0])
    return Problem(path, BROKER_STATE, "no log file %s beside it: %s; "
                   "entries not checked" % (log_name, why))


def vanished_note(path: str, error: OSError) -> Optional[Problem]:
    """A note when ``path``, a file of a segment being deleted, cleaned or swapped (a
    lifecycle suffix), was gone by the time it was read (``error``: ENOENT), as the broker
    removes such files (LogSegment.deleteIfExists after file.delete.delay.ms, LogLoader at
    start-up); None for any other file or error."""
    suffix = names.lifecycle_suffix(os.path.basename(path))
    if not suffix or not isinstance(error, FileNotFoundError):
        return None
    return Problem(path, BROKER_STATE, "removed before it could be read, as the broker removes "
                   "%s files: not checked" % suffix)


def missing_log(path: str, log_path: str) -> Problem:
    return Problem(path, MISSING_LOG, "no log file %s beside it: entries not checked (the broker "
                   "deletes such an index)" % os.path.basename(log_path))


# -- leader epochs ---------------------------------------------------------------------------------

class _EpochRun:
    """Consecutive v2 batches with the same finding (``key``: kind, the batches' epoch, the
    epoch they are compared with): reported once, as one Problem."""

    __slots__ = ("key", "first", "last", "batches", "since")

    def __init__(self, key: Tuple[str, int, Optional[int]], first: int, last: int,
                 since: Optional[int]) -> None:
        self.key = key
        self.first = first
        self.last = last
        self.batches = 1
        self.since = since  # where the compared epoch starts (cache entry, or earlier batch)


class LeaderEpochCheck:
    """A partition's ``leader-epoch-checkpoint`` against the v2 batches of its live segments,
    given a segment at a time in offset order from the batch chains verify reads for the
    indexes (batch headers only: nothing is decompressed, the log is not read again).

    The file is read strictly (``read_checkpoint_strict``): one not written by the broker's
    LeaderEpochFileCache is a MALFORMED_CHECKPOINT problem and the batches are not judged.
    Then every v2 batch with a partitionLeaderEpoch (>= 0; v0/v1 entries carry none) must
    carry the epoch the cache gives for its base offset (LeaderEpochFileCache.epochForOffset:
    the entry starting at or before it whose successor starts after it), since UnifiedLog.append
    and LogSegment.recover assign each epoch at the base offset of its first batch: a batch
    with a higher epoch, or none in the cache, is LEADER_EPOCH_MISSING, one with a lower epoch
    LEADER_EPOCH_MISMATCH, and a batch whose epoch is below one earlier in the log
    LEADER_EPOCH_BACKWARDS (reported instead: the cache, whose epochs only increase, cannot
    hold it). Consecutive batches with one finding are one problem.

    Batches before the cache's first entry (all of them, for an empty cache) whose epoch is
    not above that entry's are a LEADER_EPOCH_BEFORE_CACHE note: the broker leaves such a log
    itself when its cache starts after them (UnifiedLog.append clears the cache when a v0/v1
    batch is appended; a partition loaded without a checkpoint starts with an empty cache, and
    LogLoader reassigns epochs from the recovered segments only), and it serves them as
    epochs older than its cache (LeaderEpochFileCache.endOffsetFor).

    Batches below the partition's log start offset (its log directory's
    log-start-offset-checkpoint) are not judged: the cache covers the log from there only
    (LeaderEpochFileCache.truncateFromStart, at every log start increase and in LogLoader).
    """

    def __init__(self, directory: str, sanity_only: bool = False) -> None:
        self.directory = directory
        self.path = os.path.join(directory, names.LEADER_EPOCH_CHECKPOINT)
        self.cache: Optional[LeaderEpochCache] = None
        self.error: Optional[OSError] = None
        self.problems: List[Problem] = []
        self.notes: List[Problem] = []
        self.log_end: Optional[int] = None  # known once the active segment is given
        self.sanity_only = sanity_only
        self.log_start: Optional[int] = None
        self._starts: List[int] = []
        self._highest: Optional[Tuple[int, int]] = None  # (epoch, base offset) so far
        self._run: Optional[_EpochRun] = None
        try:
            self.cache = LeaderEpochCache(read_checkpoint_strict(self.path))
        except OSError as e:
            self.error = e
            return
        except FileFormatError as e:
            message = str(e)
            if message.startswith(self.path + ": "):
                message = message[len(self.path) + 2:]
            self.problems.append(Problem(self.path, MALFORMED_CHECKPOINT, message))
            return
        self._starts = [start for _, start in self.cache.entries]
        self.log_start = _checkpointed_log_start(directory)

    @classmethod
    def of(cls, directory: str, sanity_only: bool = False) -> Optional["LeaderEpochCheck"]:
        """The check of the partition in ``directory``, or None when it has no
        leader-epoch-checkpoint (the broker starts with an empty cache: nothing to check)."""
        if not os.path.lexists(os.path.join(directory, names.LEADER_EPOCH_CHECKPOINT)):
            return None
        check = cls(directory, sanity_only)
        if isinstance(check.error, FileNotFoundError):
            return None  # removed since (a broker deleting the partition)
        return check

    @property
    def judging(self) -> bool:
        return self.cache is not None and not self.sanity_only

    def add_segment(self, base_offset: Optional[int], chain: _BatchChain, active: bool) -> None:
        """The batches of a live segment (after those of the segments before it), and,
        for the ``active`` one, the log end offset (LogSegment.readNextOffset: the offset after
        its last batch, its base offset when it has none)."""
        if not self.judging:
            return
        bases, lasts, epochs = chain.bases, chain.lasts, chain.epochs
        log_start = self.log_start
        for i in range(len(bases)):
            epoch = epochs[i]
            if epoch < 0:
                continue  # v0/v1, or a v2 batch written with no epoch (-1)
            last = lasts[i]
            at = bases[i]
            if log_start is not None:
                if last < log_start:
                    continue
                at = max(at, log_start)
            self._batch(at, last, epoch)
        if active:
            self.log_end = lasts[-1] + 1 if len(lasts) else base_offset

    def _batch(self, at: int, last: int, epoch: int) -> None:
        highest = self._highest
        if highest is not None and epoch < highest[0]:
            self._extend((LEADER_EPOCH_BACKWARDS, epoch, highest[0]), at, last, highest[1])
            return
        if highest is None or epoch > highest[0]:
            self._highest = (epoch, at)
        i = bisect.bisect_right(self._starts, at) - 1
        assert self.cache is not None
        cached = self.cache.entries[i][0] if i >= 0 else None
        if cached == epoch:
            self._flush()
            return
        if cached is None:
            first_epoch, first_start = self.cache.entries[0] if self._starts else (None, None)
            if first_epoch is None or epoch <= first_epoch:
                self._extend((LEADER_EPOCH_BEFORE_CACHE, epoch, first_epoch), at, last,
                             first_start)
                return
        kind = LEADER_EPOCH_MISSING if cached is None or epoch > cached else LEADER_EPOCH_MISMATCH
        self._extend((kind, epoch, cached), at, last, self._starts[i] if i >= 0 else None)

    def _extend(self, key: Tuple[str, int, Optional[int]], at: int, last: int,
                since: Optional[int]) -> None:
        run = self._run
        if run is not None and run.key == key:
            run.last = max(run.last, last)
            run.batches += 1
            return
        self._flush()
        self._run = _EpochRun(key, at, last, since)

    def _flush(self) -> None:
        run, self._run = self._run, None
        if run is None:
            return
        kind, epoch, other = run.key
        since = cast(int, run.since)  # set for a finding that compares with an epoch
        span = ("offset %d" % run.first if run.first == run.last
                else "offsets %d to %d" % (run.first, run.last))
        where = ("the batch at %s carries" % span if run.batches == 1
                 else "the %d batches at %s carry" % (run.batches, span))
        assign = ("the broker assigns an epoch at the base offset of its first batch: "
                  "UnifiedLog.append, LogSegment.recover")
        if kind == LEADER_EPOCH_BEFORE_CACHE:
            self.notes.append(Problem(
                self.path, kind, "%s leader epoch %d, before the cache's %s: not covered by "
                "it, as when the broker's cache starts after them (no checkpoint then, or one "
                "cleared by a v0/v1 append: UnifiedLog.append)"
                % (where, epoch, "first entry (epoch %d at offset %d)" % (other, since)
                   if other is not None else "entries (it has none)"),
                offset=run.first, last_offset=run.last, batches=run.batches, epoch=epoch,
                cache_epoch=other, cache_start_offset=run.since))
            return
        if kind == LEADER_EPOCH_BACKWARDS:
            previous = cast(int, other)
            message = ("%s leader epoch %d, below epoch %d of the batch at offset %d before: "
                       "a partition's epochs only increase" % (where, epoch, previous, since))
            fields: Dict[str, Any] = {"previous_epoch": previous, "previous_offset": since}
        elif other is None:
            message = ("%s leader epoch %d, which the cache lacks: %s (%s)"
                       % (where, epoch, "it has no entry" if not self._starts else
                          "its first entry starts at offset %d" % self._starts[0], assign))
            fields = {"cache_epoch": None}
        elif kind == LEADER_EPOCH_MISSING:
            message = ("%s leader epoch %d, which the cache lacks: it gives epoch %d from "
                       "offset %d there (%s)" % (where, epoch, other, since, assign))
            fields = {"cache_epoch": other, "cache_start_offset": since}
        else:
            message = ("%s leader epoch %d, but the cache gives the later epoch %d from offset "
                       "%d there" % (where, epoch, other, since))
            fields = {"cache_epoch": other, "cache_start_offset": since}
        self.problems.append(Problem(self.path, kind, message, offset=run.first,
                                     last_offset=run.last, batches=run.batches, epoch=epoch,
                                     **fields))

    def report(self) -> FileReport:
        """What was found: the checkpoint's FileReport (``error`` when it could not be read)."""
        self._flush()
        if self.cache is not None and self.log_end is not None and not self.sanity_only:
            # Entries at or past the log end offset are a note, not a problem: the broker
            # drops them when it loads the log (LogLoader.load calls
            # LeaderEpochFileCache.truncateFromEndAsyncFlush at the recovered log end offset),
            # and a broker leaves them in normal operation: truncateFromEndAsyncFlush writes
            # the file in the background, so a crash keeps entries the log was truncated below
            # ("handled by another truncateFromEnd call on log loading procedure", it says),
            # and a new leader assigns its epoch at the log end offset before it writes
            # anything (UnifiedLog.maybeAssignEpochStartOffset from Partition.makeLeader).
            for epoch, start in self.cache.entries:
                if start >= self.log_end:
                    self.notes.append(Problem(
                        self.path, LEADER_EPOCH_PAST_END,
                        "epoch %d starts at offset %d, at or past the log end offset %d: the "
                        "broker drops the entry when it loads the log (LogLoader: "
                        "LeaderEpochFileCache.truncateFromEnd)" % (epoch, start, self.log_end),
                        epoch=epoch, offset=start, log_end_offset=self.log_end))
        entries = len(self.cache.entries) if self.cache is not None else 0
        return FileReport(self.path, names.LEADER_EPOCHS, entries, self.problems, self.notes,
                          error=self.error)


def _checkpointed_log_start(directory: str) -> Optional[int]:
    """The partition's entry in its log directory's log-start-offset-checkpoint, or None (no
    file, no entry, a directory name that is no partition's, or a file that cannot be read:
    verify-index does not judge that file)."""
    try:
        return Partition(directory).checkpointed(names.LOG_START_OFFSET_CHECKPOINT)
    except (OSError, KafkalogError):
        return None


# -- what a path given to verify-index stands for ------------------------------------------------

CHECKED_KINDS = (names.LOG, names.INDEX, names.TIMEINDEX, names.TXNINDEX)


class TargetError:
    """A path, or a file or directory it stands for, that could not be checked: ``error`` says
    why (an OSError, or a KafkalogError whose message names the file)."""

    __slots__ = ("path", "error")

    def __init__(self, path: str, error: BaseException) -> None:
        self.path = path
        self.error = error


class UnknownFile:
    """A file met in a directory with a Kafka suffix on a name Kafka does not give: nobody's
    segment or index, not checked."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path


def segments_to_check(found: Iterable[Found]) -> List[Tuple[Segment, bool, Optional[str]]]:
    """(segment, active, only) per segment to check: ``only`` is the one index file asked
    for, or None for all of the segment's indexes. From a directory, each segment once (and an
    index whose log is missing, to report it)."""
    out: List[Tuple[Segment, bool, Optional[str]]] = []
    is_active = ActiveSegments()
    for f in found:
        segment = Segment.at(f.path)
        if f.kind == names.LOG:
            out.append((segment, is_active(segment.log_path), None))
        elif f.kind in CHECKED_KINDS and (f.explicit or not os.path.lexists(segment.log_path)):
            out.append((segment, is_active(segment.log_path), f.path))
    return out


def verify_target(path: str, sanity_only: bool = False,
                  max_message_size: Optional[int] = None
                  ) -> Iterator[Union[FileReport, TargetError, UnknownFile]]:
    """Verify the indexes ``path`` stands for (an index or log file, a partition directory, a
    log directory): a FileReport per index file checked, in order, and, as they are met, a
    TargetError for what cannot be checked and an UnknownFile for what is not checked."""
    try:
        found = expand(path)
    except OSError as e:  # NoSegmentsError too: its message names the path
        yield TargetError(path, e)
        return
    if len(found) == 1 and found[0].explicit and found[0].kind not in CHECKED_KINDS:
        yield TargetError(path, UsageError("%s: not a log or index file" % printable_name(path)))
        return
    checked = []
    # partition directories holding a leader-epoch-checkpoint, in order
    epoch_dirs: List[str] = []
    for f in found:
        if f.error is not None:
            yield TargetError(f.path, f.error)  # a partition directory that cannot be read
        elif f.kind is None and names.file_kind(f.path) in CHECKED_KINDS:
            yield UnknownFile(f.path)
        elif f.kind in CHECKED_KINDS:
            checked.append(f)
        elif f.kind == names.LEADER_EPOCHS and not f.explicit:
            epoch_dirs.append(os.path.dirname(f.path))
    # The leader epoch check of a partition is given the batches of its live segments, each
    # read once with its indexes' checks; its report follows the partition's segments'.
    started: Dict[str, Optional[LeaderEpochCheck]] = {}
    current: Optional[LeaderEpochCheck] = None
    for segment, active, only in segments_to_check(checked):
        directory = os.path.dirname(segment.log_path)
        if current is not None and current.directory != directory:
            yield current.report()
            current = None
        if only is None and directory not in started:
            # a segment's .log, named or met in its partition directory
            current = started[directory] = LeaderEpochCheck.of(directory, sanity_only)
        epochs = current if only is None and current is not None and current.judging else None
        try:
            reports = verify_segment(segment, active, sanity_only, max_message_size, epochs)
        except OSError as e:
            where = e.filename or segment.log_path
            note = vanished_note(where, e)
            if note is not None:
                yield FileReport(where, names.file_kind(where) or names.LOG, notes=[note])
            else:
                yield TargetError(where, e)
            continue
        except MemoryError:
            # findings by the million (an index of garbage as large as Kafka allows)
            yield TargetError(only or segment.log_path, KafkalogError(
                "%s: too many findings to hold in the memory available"
                % printable_name(only or segment.log_path)))
            continue
        for report in reports:
            if only is None or report.path == only:
                yield report
    if current is not None:
        yield current.report()
    for directory in epoch_dirs:
        if directory not in started:  # a partition with no segment to check
            check = LeaderEpochCheck.of(directory, sanity_only)
            if check is not None:
                yield check.report()


__all__ = ["Problem", "FileFormatError", "FileReport", "LeaderEpochCheck", "TargetError",
           "UnknownFile",
           "broker_state_note", "check_offset_index", "check_time_index", "check_txn_index",
           "sanity_problems", "vanished_note",
           "verify_segment", "verify_target"]
