"""Checking a segment's indexes against its log, as DumpLogSegments and the broker do.

Each check returns a list of ``Problem``; an empty list means the file is sound.
"""

import os

from ..format import control
from ..format.errors import CorruptRecordError
from ..format.records import Batch
from ..format.scan import scan
from . import files
from .files import FileFormatError
from .index import OffsetIndex, TimeIndex
from .txnindex import TransactionIndex

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


class Problem:
    """One finding: ``kind`` (above), a one-line ``message``, and the numbers behind it."""

    __slots__ = ("file", "kind", "message", "fields")

    def __init__(self, file, kind, message, **fields):
        self.file = file
        self.kind = kind
        self.message = message
        self.fields = fields

    def as_dict(self):
        out = {"type": "problem", "file": self.file, "kind": self.kind, "message": self.message}
        out.update(self.fields)
        return out


def batch_at(log, position):
    """The entry (Batch or InvalidBytes) that starts at ``position`` of ``log``, or None past
    the end."""
    if position < 0 or position >= log.size:
        return None
    for item in scan(log.buf, position, log.size):
        return item
    return None


def check_offset_index(index, log):
    """Every entry must point at the start of a batch whose last offset is the entry's offset,
    inside the log, with offsets strictly increasing."""
    problems = []
    prev = None
    for offset, position in index.entries:
        if prev is not None and offset <= prev:
            problems.append(Problem(index.path, NOT_INCREASING,
                                    "index offset %d follows %d: entries must increase"
                                    % (offset, prev), index_offset=offset, previous_offset=prev))
        prev = offset
        item = batch_at(log, position)
        if item is None:
            problems.append(Problem(index.path, POSITION_PAST_END,
                                    "index offset %d points at position %d, past the end of the "
                                    "log (%d bytes)" % (offset, position, log.size),
                                    index_offset=offset, position=position))
        elif not isinstance(item, Batch):
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


def _max_record_timestamp(log, batch):
    recs = log.records(batch)
    return max(recs.timestamps) if len(recs) else -1


def check_time_index(tindex, oindex, log):
    """DumpLogSegments' three checks of a time index: the batch that each entry's offset ends
    must exist, hold the entry's timestamp as its max record timestamp, and timestamps must
    increase from entry to entry."""
    problems = []
    prev_ts = -1
    for ts, offset in tindex.entries:
        start = oindex.lookup(offset)[1] if oindex is not None else 0
        found = None
        for item in scan(log.buf, min(start, log.size), log.size):
            if isinstance(item, Batch) and item.last_offset >= offset:
                found = item
                break
        if found is None or found.last_offset != offset:
            log_offset = -1 if found is None else found.last_offset
            problems.append(Problem(tindex.path, OFFSET_NOT_FOUND,
                                    "Indexed offset: %d, found log offset: %d" % (offset, log_offset),
                                    index_offset=offset, log_offset=log_offset))
        else:
            try:
                max_ts = _max_record_timestamp(log, found)
            except CorruptRecordError as e:
                problems.append(Problem(tindex.path, UNREADABLE,
                                        "batch at position %d for indexed offset %d cannot be read: %s"
                                        % (found.position, offset, e), index_offset=offset))
                max_ts = None
            if max_ts is not None and max_ts != ts:
                problems.append(Problem(tindex.path, TIMESTAMP_MISMATCH,
                                        "Index timestamp: %d, log timestamp: %d" % (ts, max_ts),
                                        index_timestamp=ts, log_timestamp=max_ts))
            if prev_ts >= ts:
                problems.append(Problem(tindex.path, TIMESTAMP_OUT_OF_ORDER,
                                        "Index timestamp: %d, Previously indexed timestamp: %d"
                                        % (ts, prev_ts), index_timestamp=ts, previous_timestamp=prev_ts))
        prev_ts = ts
    return problems


def sanity_problems(index):
    """The broker's start-up sanity check of an index, as Problems."""
    return [Problem(index.path, SANITY, message) for message in index.sanity_problems()]


def check_txn_index(txn, log):
    """The aborted transactions listed must be those the log's ABORT markers close.

    An entry needs an ABORT marker of its producer at its last offset; an ABORT marker of a
    producer that wrote transactional data in this segment needs an entry, whose first offset is
    that producer's first offset since its previous marker.
    """
    problems = []
    open_first = {}    # producer id -> first offset of its open transaction in this segment
    aborts = {}        # marker offset -> (producer id, first offset in this segment or None)
    for item in log.entries():
        if not isinstance(item, Batch) or not item.is_transactional:
            continue
        if not item.is_control:
            open_first.setdefault(item.producer_id, item.base_offset)
            continue
        try:
            recs = log.records(item)
        except CorruptRecordError:
            continue  # the log's own problem; verify reports indexes only
        for offset, key in zip(recs.offsets, recs.keys):
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
        if marker is None or marker[0] != e.producer_id:
            problems.append(Problem(txn.path, TXN_WITHOUT_ABORT,
                                    "aborted transaction of producer %d ending at offset %d: no ABORT "
                                    "marker of that producer there" % (e.producer_id, e.last_offset),
                                    producer_id=e.producer_id, last_offset=e.last_offset))
        elif (marker[1] is not None and marker[1] != e.first_offset
              and not e.first_offset < txn.base_offset <= marker[1]):
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
    """What verifying one index file found: ``problems`` fail it, ``notes`` only inform."""

    __slots__ = ("path", "kind", "entries", "problems", "notes")

    def __init__(self, path, kind, entries=0, problems=(), notes=()):
        self.path = path
        self.kind = kind
        self.entries = entries
        self.problems = list(problems)
        self.notes = list(notes)


def verify_segment(log_path, active, sanity_only=False, max_message_size=None):
    """Check the .index, .timeindex and .txnindex beside ``log_path`` (those that exist).

    ``active``: the partition's last segment, whose indexes a live or crashed broker leaves
    pre-allocated; their zero tail is trimmed before the sanity check, as the broker trims it on
    close. Anywhere else a zero tail is reported (a crash can leave one: KAFKA-19200), and with
    ``sanity_only`` the broker's start-up check runs on the file exactly as it is.
    """
    from .segment import LogFile, DEFAULT_MAX_MESSAGE_SIZE
    reports = []
    paths = {kind: files.segment_file(log_path, kind)
             for kind in (files.INDEX, files.TIMEINDEX, files.TXNINDEX)}
    have_log = os.path.isfile(log_path)
    log = LogFile(log_path, max_message_size or DEFAULT_MAX_MESSAGE_SIZE) if have_log else None
    try:
        oindex = None
        for kind, cls in ((files.INDEX, OffsetIndex), (files.TIMEINDEX, TimeIndex)):
            path = paths[kind]
            if not os.path.isfile(path):
                continue
            try:
                index = cls(path)
            except (OSError, FileFormatError) as e:
                reports.append(FileReport(path, kind, problems=[unreadable(path, e)]))
                continue
            report = FileReport(path, kind, len(index.entries))
            reports.append(report)
            if kind == files.INDEX:
                oindex = index
            if index.zero_tail and not active:
                report.notes.append(zero_tail_note(index))
            checked = index.trimmed() if active and not sanity_only else index
            report.problems.extend(sanity_problems(checked))
            if sanity_only:
                continue
            if log is None:
                report.problems.append(missing_log(path, log_path))
            elif kind == files.INDEX:
                report.problems.extend(check_offset_index(index, log))
            else:
                report.problems.extend(check_time_index(index, oindex, log))
        path = paths[files.TXNINDEX]
        if os.path.isfile(path):
            try:
                txn = TransactionIndex(path)
            except (OSError, FileFormatError) as e:
                reports.append(FileReport(path, files.TXNINDEX, problems=[unreadable(path, e)]))
            else:
                report = FileReport(path, files.TXNINDEX, len(txn.entries),
                                    [Problem(path, SANITY, m) for m in txn.sanity_problems()])
                reports.append(report)
                if not sanity_only and log is not None:
                    report.problems.extend(check_txn_index(txn, log))
        elif not sanity_only and log is not None:
            # The broker creates the file with the first aborted transaction: none, no file.
            problems = check_txn_index(TransactionIndex.empty(path), log)
            if problems:
                reports.append(FileReport(path, files.TXNINDEX, 0, problems))
    finally:
        if log is not None:
            log.close()
    return reports


def zero_tail_note(index):
    """A Problem-shaped note on an index of a sealed segment that still has a zero tail."""
    return Problem(index.path, "zero_tail",
                   "%d zero-filled slots after the %d real entries of a sealed segment's index%s"
                   % (index.zero_tail, index.count,
                      " (left at its full pre-allocated size, as a crash can leave it: KAFKA-19200)"
                      if index.preallocated else ""))


def unreadable(path, error):
    """A Problem for a file that cannot be read at all."""
    if isinstance(error, OSError):
        message = "%s" % (error.strerror or error)
    else:
        message = str(error)
        prefix = path + ": "
        if message.startswith(prefix):
            message = message[len(prefix):]
    return Problem(path, UNREADABLE, message)


def missing_log(path, log_path):
    return Problem(path, MISSING_LOG, "no log file %s beside it: entries not checked (the broker "
                   "deletes such an index)" % os.path.basename(log_path))


__all__ = ["Problem", "FileFormatError", "check_offset_index", "check_time_index",
           "check_txn_index", "sanity_problems"]
