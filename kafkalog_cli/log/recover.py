"""Offline recovery of a partition: what a broker does after an unclean shutdown (LogLoader's
load of a partition and LogSegment.recover of its segments), losing nothing.

``plan_partition`` reads a partition directory and decides; ``execute`` carries the plan out;
``recover_partition`` does both. Everything removed (files, and the bytes cut from a .log) goes
verbatim into a quarantine folder inside the partition directory, which a broker ignores (it
only loads files). The steps are ordered so that a crash at any moment leaves a state from which
running again finishes the job: later segments are moved away before the corrupt one is cut (so
a rerun still sees why they must go), cut bytes are saved before the log is truncated, and index
files are written through temporary files that are flushed and renamed into place. No step
replaces a file: every rename refuses an existing destination (``indexbuild.rename_noreplace``),
each run's quarantine folder is new, and each file set aside there gets a name of its own
(``Quarantine``).
"""

from __future__ import annotations

import datetime
import errno
import json
import os
import stat
from typing import Any, Dict, List, Optional, Set, Tuple, Union

from ..errors import KafkalogError
from ..format import control
from ..format.errors import CorruptRecordError, LimitExceededError
from ..format.records import Batch, Records
from . import names
from .files import FileFormatError, printable_name
from .index import OffsetIndex, TimeIndex
from .indexbuild import (DEFAULT_INDEX_INTERVAL, TMP_SUFFIX, AbortedEntry, IndexBuilder,
                         TxnTracker, fsync_dir, rename_noreplace, txn_index_bytes,
                         write_atomically, write_new)
from .segment import (BATCH_LIMIT_FACTOR, DEFAULT_MAX_MESSAGE_SIZE, LogFile, Segment,
                      order_problem, reach_problem)
from .txnindex import TransactionIndex

MANIFEST = "manifest.json"

MOVE, RENAME, CUT, WRITE, REMOVE = "move", "rename", "cut", "write", "remove"


class Action:
    """One change: move a file to quarantine, rename a .swap into place, cut a .log (its tail
    saved to quarantine first), or write a rebuilt index file."""

    __slots__ = ("kind", "name", "why", "target", "start", "end", "data")

    def __init__(self, kind: str, name: str, why: str, target: str = "", start: int = 0,
                 end: int = 0, data: bytes = b"") -> None:
        self.kind = kind
        self.name = name      # file name inside the partition directory
        self.why = why
        self.target = target  # RENAME: the new name
        self.start = start    # CUT: keep [0, start), save [start, end)
        self.end = end
        self.data = data      # WRITE: the new contents


class SegmentReport:
    """What recovery found and did for one segment."""

    __slots__ = ("name", "size", "kept", "first_bad", "reason", "index_entries",
                 "timeindex_entries", "txn_entries", "moved", "notes")

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self.kept = size
        self.first_bad: Optional[int] = None
        self.reason: Optional[str] = None
        self.index_entries: Optional[int] = None      # set when the index is rebuilt
        self.timeindex_entries: Optional[int] = None
        self.txn_entries: Optional[int] = None
        self.moved = False
        self.notes: List[str] = []     # things said, not changed (batches left unchecked)

    @property
    def cut(self) -> int:
        return self.size - self.kept


class PartitionPlan:
    """Everything recovery changes in one partition directory (``actions``, in order), what it
    found per segment (``segments``), and what it only reports."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.actions: List[Action] = []
        self.segments: List[SegmentReport] = []
        self.notes: List[Tuple[str, str]] = []   # (file name, text): found and reported, left alone
        self.blocked: Set[str] = set()  # Kafka names held by something that is not a regular file
        self.quarantine: Optional[str] = None  # the folder ``execute`` kept things in

    @property
    def changes(self) -> bool:
        return bool(self.actions)

    @property
    def bytes_cut(self) -> int:
        """Bytes cut from the segments kept (the segments moved away whole not counted)."""
        return sum(r.cut for r in self.segments if not r.moved)

    def add(self, kind: str, name: str, why: str, **kw: Any) -> None:
        self.actions.append(Action(kind, name, why, **kw))


# -- analysing a segment (LogSegment.recover) ------------------------------------------------------

class SegmentScan:
    """The longest valid prefix of a segment, with what is needed to rebuild and check its
    indexes: where each batch starts, what it ends with, its max timestamp."""

    def __init__(self, builder: IndexBuilder) -> None:
        self.valid_end = 0
        self.first_bad: Optional[int] = None
        self.reason: Optional[str] = None
        self.last_offset: Optional[int] = None
        self.builder = builder
        self.aborted: List[AbortedEntry] = []
        self.last_at: Dict[int, int] = {}     # batch position -> its last offset
        self.max_ts_of: Dict[int, int] = {}   # batch last offset -> the header's max timestamp
        # (position, base offset, last offset) of batches kept with their records unchecked
        self.unchecked: List[Tuple[int, int, int]] = []

    def keep(self, batch: Batch) -> None:
        """``batch`` is valid: index it and extend the valid prefix over it."""
        self.builder.add(batch.position, batch.size, batch.last_offset, batch.max_timestamp)
        self.last_at[batch.position] = batch.last_offset
        # LogSegment.recover indexes the batch header's maxTimestamp, so that is what an
        # existing time index is checked against too.
        self.max_ts_of[batch.last_offset] = batch.max_timestamp
        self.valid_end = batch.position + batch.size


def _header_problem(batch: Batch, base: int, prev_last: Optional[int]) -> Optional[str]:
    """Why a batch is invalid by its header alone (size and completeness are the scanner's)."""
    if not batch.is_valid:
        return "CRC mismatch (stored %d, computed %s)" % (batch.crc, batch.computed_crc)
    if batch.magic > 2:
        return "unknown magic %d" % batch.magic
    return (order_problem(batch.last_offset, prev_last)
            or reach_problem(batch.last_offset, base))


def control_problem(recs: Records) -> Optional[str]:
    """Why the records of a control batch are malformed, or None: every key a control key
    (ControlRecordType: at least 4 bytes, a version that is not negative), an ABORT/COMMIT
    value an end transaction marker (EndTransactionMarker), a KRaft control value readable as
    its type. The same rule as the readers' (a record they cannot show makes them exit 1)."""
    for offset, key, value in zip(recs.offsets, recs.keys, recs.values):
        try:
            type_id = control.control_type(key)
            if type_id in (control.ABORT, control.COMMIT):
                control.end_txn_marker(value)
            elif type_id in control.kraft_control_names():
                # read by format.schema as ControlRecordUtils reads it (version 0)
                control.kraft_control_json(type_id, value)
        except CorruptRecordError as e:
            return "control record at offset %d: %s" % (offset, e)
    return None


def _records_problem(log: LogFile, batch: Batch,
                     scan: SegmentScan) -> Tuple[Optional[str], Optional[bytes]]:
    """Why the records of ``batch`` make it invalid (None: they do not), and a control batch's
    first record key (its end marker's; None for an empty one). Decoded chunk by chunk: memory
    stays bounded by the batch's decompressed size, however many records it holds.

    Records inflating further than the bound are no proof of damage: the batch is kept, its
    records unchecked, and ``scan.unchecked`` says so."""
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


def scan_segment(segment: Segment, prev_last: Optional[int], tracker: TxnTracker,
                 interval: int = DEFAULT_INDEX_INTERVAL,
                 max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> SegmentScan:
    """Validate ``segment``'s .log batch by batch and build its indexes (LogSegment.recover).
    A batch is valid when it is complete, its size and magic are right, its CRC holds, its last
    offset follows ``prev_last`` (the previous batch's) and fits the segment, its records decode
    and are as many as the header says, and, in a control batch, they are well-formed control
    records. A batch whose records inflate past the bound is kept with its records unchecked
    (its CRC holds, and the broker's recovery does not look inside a data batch): ``unchecked``
    lists them. ``tracker`` follows the partition's open transactions across segments."""
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
            reason = _header_problem(item, base, prev_last)
            marker_key = None
            if reason is None:
                reason, marker_key = _records_problem(log, item, result)
            if reason is not None:
                result.first_bad, result.reason = item.position, reason
                break
            _track_transactions(item, marker_key, tracker, result.aborted)
            result.keep(item)
            prev_last = item.last_offset
    result.builder.finish()
    result.last_offset = prev_last
    return result


def _track_transactions(batch: Batch, marker_key: Optional[bytes], tracker: TxnTracker,
                        aborted: List[AbortedEntry]) -> None:
    """ProducerAppendInfo.append during recovery: a transactional data batch opens its
    producer's transaction at its base offset (from the header: its records are not needed);
    a control batch's first record, an end marker (``marker_key`` is its key; None for an
    empty control batch, whose transaction was cleaned away), closes it at the batch's base
    offset."""
    if not batch.is_transactional or batch.producer_id < 0:
        return
    if not batch.is_control:
        tracker.data(batch.producer_id, batch.base_offset)
        return
    if marker_key is None:
        return
    type_id = control.control_type(marker_key)
    if type_id in (control.ABORT, control.COMMIT):
        entry = tracker.marker(batch.producer_id, batch.base_offset, type_id == control.ABORT)
        if entry is not None:
            aborted.append(entry)


# -- checking the indexes a segment has against its scan -------------------------------------------

def _index_agrees(index_class: Union[type[OffsetIndex], type[TimeIndex]], path: str,
                  table: Dict[int, int], active: bool) -> bool:
    """Does the offset or time index at ``path`` pass the broker's sanity check, hold nothing
    after its real entries (a sealed segment's zero tail, stray bytes), and name only what the
    scan found: each entry ``(value, key)`` with ``table[key] == value``, values strictly
    increasing? For an offset index that is (last offset, batch start); for a time index
    (max timestamp, last offset), as LogSegment.recover builds them."""
    try:
        index = index_class(path)
    except (OSError, FileFormatError):
        return False
    if index.zero_tail and not active:
        return False  # a sealed segment's index left pre-allocated (KAFKA-19200): trim it
    # Non-zero bytes after the real entries are no pre-allocated tail (entries after a slot
    # that ends them, a torn entry): appending after the real entries would lose them.
    if len(index.data.rstrip(b"\x00")) > index.count * index.entry.size:
        return False
    if (index.trimmed() if active else index).sanity_problems():
        return False
    prev = -1
    for value, key in index.entries:
        if table.get(key) != value or value <= prev:
            return False
        prev = value
    return True


def _aborted_listed(path: str) -> Optional[List[AbortedEntry]]:
    """The entries of the .txnindex at ``path`` as the scan lists them, or None when it cannot
    be read or fails the broker's sanity check."""
    try:
        txn = TransactionIndex(path)
        if txn.sanity_problems():
            return None
        return [(e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)
                for e in txn.entries]
    except (OSError, FileFormatError):
        return None


# -- planning a partition (LogLoader) --------------------------------------------------------

def _base(name: str) -> int:
    """The offset a Kafka file's name starts with (one ``partition_file_kind`` knows)."""
    base = names.base_offset_from_name(name)
    if base is None:
        raise ValueError("%s: the name holds no offset" % name)
    return base


def _kind(name: str) -> Optional[str]:
    return names.partition_file_kind(name)


def _is_segment_swap(name: str) -> bool:
    """A .swap of a numbered segment's log or index file (the names the log cleaner and the
    segment split give files they are about to swap in)."""
    return names.lifecycle_suffix(name) == names.SWAP and _kind(name) in names.SEGMENT_KINDS


def _plan_odd_files(plan: PartitionPlan, entries: List[str]) -> List[str]:
    """What is not a regular file under a Kafka name (blocked: left alone, never written over),
    our own temporary files (removed), names Kafka does not give (reported). Returns the other
    regular files."""
    directory = plan.directory
    regular = [n for n in entries if os.path.isfile(os.path.join(directory, n))]
    # A FIFO, a device, a directory or a dangling symlink under a Kafka file's name: left
    # alone, and never written over (its segment's index is not rebuilt under that name).
    for n in entries:
        if _kind(n) is not None and not os.path.isfile(os.path.join(directory, n)):
            plan.blocked.add(n)
            plan.notes.append((n, "not a regular file: left alone"))
    for n in regular:
        if n.endswith(TMP_SUFFIX):
            plan.add(REMOVE, n, "temporary file of an interrupted kafkalog write")
    regular = [n for n in regular if not n.endswith(TMP_SUFFIX)]
    for n in regular:
        if _kind(n) is None and not n.startswith(".") and not names.lifecycle_suffix(n):
            plan.notes.append((n, "not a name Kafka gives a file (no segment's): left alone"))
    return regular


def _plan_leftovers(plan: PartitionPlan, regular: List[str]) -> Tuple[Dict[str, str], List[str]]:
    """LogLoader's first pass: .deleted and .cleaned files, and .swap files of a split that did
    not finish; index .swap files without their segment's .log.swap. Returns the file names as
    they will be once the plan is carried out, each mapped to the name it has now, and the
    .swap files still to be renamed into place."""
    view = {n: n for n in regular}
    for n in regular:
        if names.lifecycle_suffix(n) == names.DELETED and not n.endswith(
                ".checkpoint" + names.DELETED):
            plan.add(MOVE, n, "left by the broker for deletion (.deleted)")
            del view[n]
    cleaned = [n for n in regular if names.lifecycle_suffix(n) == names.CLEANED]
    min_cleaned = min((b for b in map(names.base_offset_from_name, cleaned) if b is not None),
                      default=None)
    swaps = []
    for n in regular:
        if names.lifecycle_suffix(n) != names.SWAP:
            continue
        if not _is_segment_swap(n):
            plan.notes.append((n, "a .swap name the broker does not write: left alone"))
            continue
        if min_cleaned is not None and _base(n) >= min_cleaned:
            plan.add(MOVE, n, "swap file of a segment split that did not finish")
            del view[n]
        else:
            swaps.append(n)
    for n in cleaned:
        plan.add(MOVE, n, "log cleaner output that was never swapped in (.cleaned)")
        del view[n]
    log_swap_bases = {_base(n) for n in swaps if _kind(n) == names.LOG}
    for n in list(swaps):
        if _base(n) not in log_swap_bases:
            # Not part of a segment swap: renaming it would replace the segment's index with
            # one nothing vouches for. Set aside; the index is checked and rebuilt if wrong.
            plan.add(MOVE, n, "index .swap without its segment's .log.swap (the broker's loader "
                     "deletes it and rebuilds the index)")
            del view[n]
            swaps.remove(n)
    return view, swaps


def _swap_range(directory: str, log_swaps: List[str]) -> Tuple[int, int]:
    """[min base, max next offset) of the swap segments."""
    low = high = None
    for n in log_swaps:
        base = nxt = _base(n)
        with Segment.at(os.path.join(directory, n)).open() as log:
            for batch in log.batches():
                nxt = batch.last_offset + 1
        low = base if low is None else min(low, base)
        high = nxt if high is None else max(high, nxt)
    assert low is not None and high is not None  # log_swaps is not empty
    return low, high


def _plan_swaps(plan: PartitionPlan, view: Dict[str, str], swaps: List[str]) -> None:
    """LogLoader's second and third passes: the segments a swap replaces go, then the .swap
    files are renamed into place."""
    if any(names.without_lifecycle_suffix(n) in plan.blocked for n in swaps):
        for n in swaps:
            plan.notes.append((n, "swap not completed: a file that is not a regular file holds "
                                  "a name it would take"))
        return
    log_swaps = [n for n in swaps if _kind(n) == names.LOG]
    if log_swaps:
        # The segments the swap replaces go (any file whose name starts with an offset in the
        # swap's range, snapshots too).
        low, high = _swap_range(plan.directory, log_swaps)
        for n in sorted(view):
            base = names.base_offset_from_name(n)
            if (not names.lifecycle_suffix(n) and base is not None and low <= base < high
                    and _kind(n) is not None):
                plan.add(MOVE, n, "replaced by the swap segment covering offsets %d-%d"
                         % (low, high - 1))
                del view[n]
    # The .swap files renamed into place, the .log.swap first (once it is in place, the
    # segment's index .swap files are plain renames). A file still holding the final name is
    # set aside first: nothing is replaced.
    for n in sorted(swaps, key=lambda n: _kind(n) != names.LOG):
        final = names.without_lifecycle_suffix(n)
        if final in view:
            plan.add(MOVE, final, "replaced by %s (completing a swap)" % printable_name(n))
            del view[final]
        plan.add(RENAME, n, "completing a swap the broker had started", target=final)
        view[final] = view.pop(n)


def _plan_orphan_indexes(plan: PartitionPlan, view: Dict[str, str], logs: List[int]) -> None:
    """Index files of no segment go, as the broker deletes them (a log that is not a regular
    file still has its indexes)."""
    bases = set(logs) | {_base(n) for n in plan.blocked if names.is_live_log(n)}
    for n in sorted(view):
        if (_kind(n) in (names.INDEX, names.TIMEINDEX, names.TXNINDEX)
                and not names.lifecycle_suffix(n) and _base(n) not in bases):
            plan.add(MOVE, n, "index without a log (the broker deletes it)")
            del view[n]


class SymlinkCutError(KafkalogError, OSError):
    """A segment to be cut is a symlink: recover refuses the partition, changing nothing."""


def plan_partition(directory: str, interval: int = DEFAULT_INDEX_INTERVAL,
                   max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> PartitionPlan:
    """Everything recovery would change in ``directory``, with a report per segment."""
    plan = PartitionPlan(directory)
    regular = _plan_odd_files(plan, sorted(os.listdir(directory)))
    view, swaps = _plan_leftovers(plan, regular)
    _plan_swaps(plan, view, swaps)
    # Names are Kafka's (a 20-digit offset), so each log has a base offset of its own.
    logs = names.live_log_bases(view)
    _plan_orphan_indexes(plan, view, logs)
    _plan_segments(plan, view, logs, interval, max_message_size)
    return plan


def _plan_segments(plan: PartitionPlan, view: Dict[str, str], logs: List[int], interval: int,
                   max_message_size: int) -> None:
    """LogLoader.recoverSegment of each segment in offset order, until one must be cut."""
    tracker = TxnTracker()
    prev_last = None
    for i, base in enumerate(logs):
        segment = Segment(plan.directory, base)
        # the file as it is now: a .log.swap still to be renamed into place, say
        source = Segment.at(os.path.join(plan.directory, view[segment.name]))
        report = SegmentReport(segment.name, source.size())
        plan.segments.append(report)
        scan = scan_segment(source, prev_last, tracker, interval, max_message_size)
        for position, first, last in scan.unchecked:
            report.notes.append(
                "records of the batch at position %d (offsets %d-%d) not checked: they inflate "
                "past %d bytes (raise --max-message-size to check them); the batch is kept"
                % (position, first, last, max_message_size * BATCH_LIMIT_FACTOR))
        cut = scan.first_bad is not None
        if cut:
            _plan_cut(plan, view, source, scan, report, logs[i + 1:])
        _plan_indexes(plan, view, base, scan, cut or i == len(logs) - 1, cut, report)
        if cut:
            return
        prev_last = scan.last_offset


def _plan_cut(plan: PartitionPlan, view: Dict[str, str], source: Segment, scan: SegmentScan,
              report: SegmentReport, later: List[int]) -> None:
    """The segment keeps its valid prefix (UnifiedLog truncation): the segments after it and
    the producer snapshots above the new log end go first."""
    name = report.name
    report.kept, report.first_bad, report.reason = scan.valid_end, scan.first_bad, scan.reason
    new_end = scan.last_offset + 1 if scan.last_offset is not None else _base(name)
    for base in later:
        later_log = names.offset_name(base, names.LOG)
        plan.segments.append(_moved_report(plan.directory, view, later_log))
        for n in sorted(names.offset_name(base, kind) for kind in names.SEGMENT_KINDS):
            if n in view:
                plan.add(MOVE, n, "after the corrupt segment %s (the broker deletes it)" % name)
                del view[n]
    for n in sorted(view):
        offset = names.base_offset_from_name(n)
        if _kind(n) == names.SNAPSHOT and offset is not None and offset > new_end:
            plan.add(MOVE, n, "producer snapshot above the new log end offset %d" % new_end)
            del view[n]
    if os.path.islink(source.log_path):
        # Cutting writes to the file the link points at, wherever it is: refused before
        # anything changes, so the partition is left as it was.
        raise SymlinkCutError(
            errno.ELOOP, "is a symlink to %s and would have to be cut at byte %d; recover "
            "writes no file outside the partition directory: put a copy of the file in "
            "place of the link, then run recover again"
            % (printable_name(os.path.realpath(source.log_path)), scan.valid_end),
            source.log_path)
    plan.add(CUT, name, scan.reason or "", start=scan.valid_end, end=report.size)


def _moved_report(directory: str, view: Dict[str, str], name: str) -> SegmentReport:
    report = SegmentReport(name, os.path.getsize(os.path.join(directory, view[name])))
    report.kept = 0
    report.moved = True
    return report


def _plan_indexes(plan: PartitionPlan, view: Dict[str, str], base: int, scan: SegmentScan,
                  active: bool, cut: bool, report: SegmentReport) -> None:
    """The segment's indexes rebuilt where missing or wrong (always after a cut), as
    LogSegment.recover rebuilds them; the .txnindex from the log's ABORT markers."""
    directory = plan.directory

    def current(kind: str) -> Tuple[str, Optional[str]]:
        n = names.offset_name(base, kind)
        return n, (os.path.join(directory, view[n]) if n in view else None)

    def write(n: str, why: str, data: bytes) -> None:
        if n in plan.blocked:
            report.notes.append("%s not rebuilt: it is not a regular file" % printable_name(n))
        else:
            plan.add(WRITE, n, why, data=data)

    def missing(n: str, p: Optional[str]) -> bool:
        return p is None and n not in plan.blocked

    name, path = current(names.INDEX)
    tname, tpath = current(names.TIMEINDEX)
    rebuild = (cut or missing(name, path) or missing(tname, tpath)
               or (path is not None and not _index_agrees(OffsetIndex, path, scan.last_at, active))
               or (tpath is not None
                   and not _index_agrees(TimeIndex, tpath, scan.max_ts_of, active)))
    if rebuild:
        why = "rebuilt for the recovered log" if cut else "missing or wrong: rebuilt"
        for n, p in ((name, path), (tname, tpath)):
            if p is not None:
                plan.add(MOVE, n, "replaced by a rebuilt index")
        write(name, why, scan.builder.offset_index_bytes())
        write(tname, why, scan.builder.time_index_bytes())
        report.index_entries = len(scan.builder.offset_entries)
        report.timeindex_entries = len(scan.builder.time_entries)
    xname, xpath = current(names.TXNINDEX)
    if xname in plan.blocked:
        return
    if xpath is None:
        wrong = bool(scan.aborted)
    else:
        wrong = cut or _aborted_listed(xpath) != scan.aborted
    if wrong:
        if xpath is not None:
            plan.add(MOVE, xname, "replaced by a rebuilt transaction index")
        expected = txn_index_bytes(scan.aborted)
        if expected:
            write(xname, "rebuilt from the log's ABORT markers", expected)
        report.txn_entries = len(scan.aborted)


# -- carrying a plan out -------------------------------------------------------------------------

class Quarantine:
    """One run's folder in ``<partition>/kafkalog-quarantine/``, made on first use.

    Nothing in it is ever replaced: the run folder gets a name no other run holds (created with
    mkdir, which fails rather than reuse a folder: two runs in the same microsecond, or a clock
    set back, take the next free name), and each file set aside gets a name nothing in the
    folder holds yet: its own name (escaped when it is not printable UTF-8), or, when a file
    of that name was already set aside in this run, the same name in a numbered subfolder
    (``2/``, ``3/``...). ``manifest.json`` maps every saved name to where it came from and why.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path: Optional[str] = None
        self.entries: List[Dict[str, Any]] = []
        self._taken = {MANIFEST}

    def folder(self) -> str:
        if self.path is None:
            self.path = _new_run_folder(self.directory)
        return self.path

    def reserve(self, name: str) -> str:
        """A relative path in the run folder, free, for a file to be saved as ``name``."""
        folder = self.folder()
        saved = printable_name(name)
        if saved.endswith(TMP_SUFFIX):
            saved += "_"  # never mistaken for one of our temporary files
        k = 1
        rel = saved
        while rel in self._taken or os.path.lexists(os.path.join(folder, rel)):
            k += 1
            sub = os.path.join(folder, str(k))
            try:
                os.mkdir(sub)
            except FileExistsError:
                pass
            if _real_dir(sub):
                rel = os.path.join(str(k), saved)
        self._taken.add(rel)
        return rel

    def record(self, entry: Dict[str, Any]) -> None:
        """Add a manifest entry and rewrite the manifest (flushed, renamed into place)."""
        self.entries.append(entry)
        partition = os.path.abspath(self.directory)
        doc: Dict[str, Any] = {"tool": "kafkalog recover", "partition": printable_name(partition)}
        if printable_name(partition) != partition:
            doc["partition_bytes_hex"] = os.fsencode(partition).hex()
        doc["entries"] = self.entries
        write_atomically(os.path.join(self.folder(), MANIFEST), json.dumps(doc, indent=1).encode())


def _real_dir(path: str) -> bool:
    """A directory, not a symlink to one (nothing is moved out of the partition through one)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _new_run_folder(directory: str) -> str:
    root = os.path.join(directory, names.QUARANTINE)
    try:
        os.mkdir(root)
    except FileExistsError:
        if not _real_dir(root):
            raise NotADirectoryError(errno.ENOTDIR, "not a directory (recover keeps what it "
                                     "sets aside in a directory of that name)", root) from None
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    for k in range(1, 100000):
        path = os.path.join(root, stamp if k == 1 else "%s-%d" % (stamp, k))
        try:
            os.mkdir(path)
        except FileExistsError:
            continue
        fsync_dir(root)
        fsync_dir(directory)
        return path
    raise FileExistsError(errno.EEXIST, "no free quarantine folder name", root)


def _entry(what: str, name: str, saved: str, why: str, **extra: Any) -> Dict[str, Any]:
    entry = {"what": what, "file": printable_name(name), "saved_as": saved, "why": why}
    if printable_name(name) != name:
        entry["file_bytes_hex"] = os.fsencode(name).hex()
    entry.update(extra)
    return entry


def _copy_range(src: str, start: int, end: int, dst: str) -> None:
    """Save bytes [start, end) of ``src`` to the new file ``dst`` in chunks, flushed and
    renamed into place (never over an existing file)."""
    tmp = dst + TMP_SUFFIX
    with open(src, "rb") as f, open(tmp, "wb") as out:
        f.seek(start)
        left = end - start
        while left > 0:
            chunk = f.read(min(left, 8 << 20))
            if not chunk:
                break
            out.write(chunk)
            left -= len(chunk)
        out.flush()
        os.fsync(out.fileno())
    rename_noreplace(tmp, dst)
    fsync_dir(os.path.dirname(dst))


def execute(plan: PartitionPlan) -> Optional[str]:
    """Carry ``plan`` out; return the quarantine folder used (None when nothing was kept).

    Every rename is one that cannot replace a file (``rename_noreplace``); a rebuilt index is
    written only where no file holds its name any more (its predecessor was set aside first).
    """
    if not plan.actions:
        return None
    directory = plan.directory
    q = Quarantine(directory)
    earlier: Dict[str, str] = {}  # name -> the .swap name it had before this run renamed it
    for a in plan.actions:
        src = os.path.join(directory, a.name)
        if a.kind == REMOVE:
            os.unlink(src)  # our own half-written temporary: the real file is intact
            fsync_dir(directory)
        elif a.kind == MOVE:
            saved = q.reserve(a.name)
            rename_noreplace(src, os.path.join(q.folder(), saved))
            fsync_dir(os.path.dirname(os.path.join(q.folder(), saved)))
            fsync_dir(directory)
            extra = {}
            if a.name in earlier:
                extra["earlier_name"] = printable_name(earlier.pop(a.name))
            q.record(_entry("moved", a.name, saved, a.why, **extra))
        elif a.kind == RENAME:
            rename_noreplace(src, os.path.join(directory, a.target))
            fsync_dir(directory)
            earlier[a.target] = a.name
        elif a.kind == CUT:
            saved = q.reserve("%s.cut-%d-%d" % (a.name, a.start, a.end))
            _copy_range(src, a.start, a.end, os.path.join(q.folder(), saved))
            q.record(_entry("cut", a.name, saved, a.why, range=[a.start, a.end]))
            with open(src, "r+b") as f:
                f.truncate(a.start)
                f.flush()
                os.fsync(f.fileno())
        elif a.kind == WRITE:
            write_new(src, a.data)
    return q.path


def recover_partition(directory: str, interval: int = DEFAULT_INDEX_INTERVAL,
                      max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                      dry_run: bool = False) -> PartitionPlan:
    """Recover the partition ``directory`` as LogLoader would after an unclean shutdown:
    plan, then (unless ``dry_run``) carry the plan out; ``quarantine`` of the plan returned
    is the folder that holds what was removed (None when nothing was). The caller holds the
    log directory's lock."""
    plan = plan_partition(directory, interval, max_message_size)
    if not dry_run:
        plan.quarantine = execute(plan)
    return plan
