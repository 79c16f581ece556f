"""Offline recovery of a partition: what a broker does after an unclean shutdown, losing nothing.

``plan_partition`` reads a partition directory and decides; ``execute`` carries the plan out.
Everything removed (files, and the bytes cut from a .log) goes verbatim into a quarantine folder
inside the partition directory, which a broker ignores (it only loads files). The steps are
ordered so that a crash at any moment leaves a state from which running again finishes the job:
later segments are moved away before the corrupt one is cut (so a rerun still sees why they
must go), cut bytes are saved before the log is truncated, and index files are written through
temporary files that are flushed and renamed into place.
"""

import datetime
import json
import os

from ..format import control
from ..format.errors import CorruptRecordError, LimitExceededError
from ..format.records import Batch
from . import files
from .files import FileFormatError, base_offset_from_name, file_kind, lifecycle_suffix
from .index import OffsetIndex, TimeIndex
from .indexbuild import (DEFAULT_INDEX_INTERVAL, TMP_SUFFIX, IndexBuilder, TxnTracker, fsync_dir,
                         txn_index_bytes, write_atomically)
from .segment import BATCH_LIMIT_FACTOR, DEFAULT_MAX_MESSAGE_SIZE, LogFile
from .txnindex import TransactionIndex

QUARANTINE = "kafkalog-quarantine"
MAX_RELATIVE_OFFSET = 2 ** 31 - 1

MOVE, RENAME, CUT, WRITE, REMOVE = "move", "rename", "cut", "write", "remove"


class Action:
    """One change: move a file to quarantine, rename a .swap into place, cut a .log (its tail
    saved to quarantine first), or write a rebuilt index file."""

    __slots__ = ("kind", "name", "why", "target", "start", "end", "data")

    def __init__(self, kind, name, why, target=None, start=None, end=None, data=None):
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
                 "timeindex_entries", "txn_entries", "moved")

    def __init__(self, name, size):
        self.name = name
        self.size = size
        self.kept = size
        self.first_bad = None
        self.reason = None
        self.index_entries = None      # set when the index is rebuilt
        self.timeindex_entries = None
        self.txn_entries = None
        self.moved = False

    @property
    def cut(self):
        return self.size - self.kept


class PartitionPlan:
    def __init__(self, directory):
        self.directory = directory
        self.actions = []
        self.segments = []

    @property
    def changes(self):
        return bool(self.actions)

    def add(self, kind, name, why, **kw):
        self.actions.append(Action(kind, name, why, **kw))


# -- analysing a segment -----------------------------------------------------------------------

class _Scan:
    """The longest valid prefix of a segment, with what is needed to rebuild and check its
    indexes: where each batch starts, what it ends with, its max record timestamp."""

    def __init__(self):
        self.valid_end = 0
        self.first_bad = None
        self.reason = None
        self.last_offset = None
        self.builder = None
        self.aborted = []
        self.last_at = {}        # batch position -> its last offset
        self.max_ts_of = {}      # batch last offset -> max record timestamp


def _batch_problem(batch, recs_or_error, base, prev_last):
    if not batch.is_valid:
        return "CRC mismatch (stored %d, computed %s)" % (batch.crc, batch.computed_crc)
    if batch.magic > 2:
        return "unknown magic %d" % batch.magic
    if isinstance(recs_or_error, str):
        return "records cannot be read: %s" % recs_or_error
    if prev_last is not None and batch.last_offset <= prev_last:
        return "last offset %d does not follow offset %d" % (batch.last_offset, prev_last)
    if not 0 <= batch.last_offset - base <= MAX_RELATIVE_OFFSET:
        return "last offset %d does not fit a segment based at %d" % (batch.last_offset, base)
    return None


def scan_segment(path, base, prev_last, tracker, interval, max_message_size):
    """Validate ``path`` batch by batch (size, magic, CRC, records decodable and as many as the
    header says, offsets increasing and fitting the segment) and build its indexes."""
    result = _Scan()
    result.builder = IndexBuilder(base, interval)
    # A record as large as its batch may inflate to is valid: the broker's recovery keeps it.
    with LogFile(path, max_message_size, record_limit_factor=BATCH_LIMIT_FACTOR) as log:
        for item in log.entries():
            if not isinstance(item, Batch):
                result.first_bad, result.reason = item.position, item.reason
                break
            try:
                recs = log.records(item)
            except LimitExceededError:
                # Inflating further than the bound lets us is no proof of damage (the CRC holds,
                # and the broker does not look inside): keep the batch, its records unchecked.
                recs = None
            except CorruptRecordError as e:
                recs = str(e)
            reason = _batch_problem(item, recs, base, prev_last)
            if reason is not None:
                result.first_bad, result.reason = item.position, reason
                break
            if recs is not None:
                _track_transactions(item, recs, tracker, result.aborted)
            result.builder.add(item.position, item.size, item.last_offset, item.max_timestamp)
            result.last_at[item.position] = item.last_offset
            result.max_ts_of[item.last_offset] = (
                item.max_timestamp if recs is None else max(recs.timestamps) if len(recs) else -1)
            result.valid_end = item.position + item.size
            prev_last = item.last_offset
    result.builder.finish()
    result.last_offset = prev_last
    return result


def _track_transactions(batch, recs, tracker, aborted):
    if not batch.is_transactional or batch.producer_id < 0:
        return
    if not batch.is_control:
        tracker.data(batch.producer_id, batch.base_offset)
        return
    for offset, key in zip(recs.offsets, recs.keys):
        try:
            type_id = control.control_type(key)
        except CorruptRecordError:
            continue
        if type_id in (control.ABORT, control.COMMIT):
            entry = tracker.marker(batch.producer_id, offset, type_id == control.ABORT)
            if entry is not None:
                aborted.append(entry)


def _offset_index_ok(path, scan, active):
    """Does the .index at ``path`` point only at batch starts with the right last offsets,
    increasing, and pass the broker's sanity check?"""
    try:
        index = OffsetIndex(path)
    except (OSError, FileFormatError):
        return False
    if index.zero_tail and not active:
        return False  # a sealed segment's index left pre-allocated (KAFKA-19200): trim it
    if (index.trimmed() if active else index).sanity_problems():
        return False
    prev = None
    for offset, position in index.entries:
        if scan.last_at.get(position) != offset or (prev is not None and offset <= prev):
            return False
        prev = offset
    return True


def _time_index_ok(path, scan, active):
    """Does every entry of the .timeindex name the last offset of a batch whose max record
    timestamp it holds, timestamps increasing, and pass the broker's sanity check?"""
    try:
        index = TimeIndex(path)
    except (OSError, FileFormatError):
        return False
    if index.zero_tail and not active:
        return False
    if (index.trimmed() if active else index).sanity_problems():
        return False
    prev = -1
    for ts, offset in index.entries:
        if scan.max_ts_of.get(offset) != ts or ts <= prev:
            return False
        prev = ts
    return True


# -- planning a partition ------------------------------------------------------------------------

def _base(name):
    return base_offset_from_name(name)


def _plan_leftovers(plan, names):
    """semantics.md a.2 steps 1-2: .deleted, .cleaned and .swap files; returns the file names
    as they will be once the plan is carried out, each mapped to the name it has now."""
    view = {n: n for n in names}
    for n in names:
        if n.endswith(".deleted") and not n.endswith(".checkpoint.deleted"):
            plan.add(MOVE, n, "left by the broker for deletion (.deleted)")
            del view[n]
    cleaned = [n for n in names if n.endswith(".cleaned")]
    min_cleaned = min((_base(n) for n in cleaned if _base(n) is not None), default=None)
    swaps = [n for n in names if n.endswith(".swap")]
    for n in swaps:
        if min_cleaned is not None and _base(n) is not None and _base(n) >= min_cleaned:
            plan.add(MOVE, n, "swap file of a segment split that did not finish")
            del view[n]
    for n in cleaned:
        plan.add(MOVE, n, "log cleaner output that was never swapped in (.cleaned)")
        del view[n]
    swaps = [n for n in swaps if n in view]
    log_swaps = [n for n in swaps if n.endswith(".log.swap")]
    return view, swaps, log_swaps


def _swap_range(directory, log_swaps, max_message_size):
    """[min base, max next offset) of the swap segments."""
    low = high = None
    for n in log_swaps:
        base = _base(n)
        nxt = base
        with LogFile(os.path.join(directory, n), max_message_size) as log:
            for item in log.entries():
                if isinstance(item, Batch):
                    nxt = item.last_offset + 1
        low = base if low is None else min(low, base)
        high = nxt if high is None else max(high, nxt)
    return low, high


def plan_partition(directory, interval=DEFAULT_INDEX_INTERVAL,
                   max_message_size=DEFAULT_MAX_MESSAGE_SIZE):
    """Everything recovery would change in ``directory``, with a report per segment."""
    plan = PartitionPlan(directory)
    names = sorted(n for n in os.listdir(directory) if os.path.isfile(os.path.join(directory, n)))
    for n in names:
        if n.endswith(TMP_SUFFIX):
            plan.add(REMOVE, n, "temporary file of an interrupted kafkalog write")
    names = [n for n in names if not n.endswith(TMP_SUFFIX)]
    view, swaps, log_swaps = _plan_leftovers(plan, names)
    if log_swaps:
        low, high = _swap_range(directory, log_swaps, max_message_size)
        for n in sorted(view):
            if (not lifecycle_suffix(n) and _base(n) is not None and low <= _base(n) < high
                    and file_kind(n) is not None):
                plan.add(MOVE, n, "replaced by the swap segment covering offsets %d-%d"
                         % (low, high - 1))
                del view[n]
    # The .log.swap first: once it is in place, the segment's other swap files are plain renames.
    for n in sorted(swaps, key=lambda n: not n.endswith(".log.swap")):
        final = n[:-len(".swap")]
        plan.add(RENAME, n, "completing a swap the broker had started", target=final)
        view[final] = view.pop(n)
    logs = sorted((n for n in view if file_kind(n) == files.LOG and not lifecycle_suffix(n)
                   and _base(n) is not None), key=_base)
    log_stems = {n.split(".", 1)[0] for n in logs}
    for n in sorted(view):
        if (file_kind(n) in (files.INDEX, files.TIMEINDEX, files.TXNINDEX)
                and not lifecycle_suffix(n) and n.split(".", 1)[0] not in log_stems):
            plan.add(MOVE, n, "index without a log (the broker deletes it)")
            del view[n]
    _plan_segments(plan, view, logs, interval, max_message_size)
    return plan


def _plan_segments(plan, view, logs, interval, max_message_size):
    directory = plan.directory
    tracker = TxnTracker()
    prev_last = None
    for i, name in enumerate(logs):
        path = os.path.join(directory, view[name])
        base = _base(name)
        report = SegmentReport(name, os.path.getsize(path))
        plan.segments.append(report)
        scan = scan_segment(path, base, prev_last, tracker, interval, max_message_size)
        cut = scan.first_bad is not None
        active = cut or i == len(logs) - 1
        stem = name.split(".", 1)[0]
        if cut:
            report.kept, report.first_bad, report.reason = scan.valid_end, scan.first_bad, scan.reason
            new_end = scan.last_offset + 1 if scan.last_offset is not None else base
            for later in logs[i + 1:]:
                later_stem = later.split(".", 1)[0]
                plan.segments.append(_moved_report(directory, view, later))
                for n in sorted(view):
                    if n.split(".", 1)[0] == later_stem and file_kind(n) != files.SNAPSHOT:
                        plan.add(MOVE, n, "after the corrupt segment %s (the broker deletes it)" % name)
                        del view[n]
            for n in sorted(view):
                if file_kind(n) == files.SNAPSHOT and _base(n) is not None and _base(n) > new_end:
                    plan.add(MOVE, n, "producer snapshot above the new log end offset %d" % new_end)
                    del view[n]
            plan.add(CUT, name, scan.reason, start=scan.valid_end, end=report.size)
        _plan_indexes(plan, view, stem, scan, active, cut, report)
        if cut:
            return
        prev_last = scan.last_offset


def _moved_report(directory, view, name):
    report = SegmentReport(name, os.path.getsize(os.path.join(directory, view[name])))
    report.kept = 0
    report.moved = True
    return report


def _plan_indexes(plan, view, stem, scan, active, cut, report):
    directory = plan.directory

    def current(kind):
        n = "%s.%s" % (stem, kind)
        return n, (os.path.join(directory, view[n]) if n in view else None)

    name, path = current(files.INDEX)
    tname, tpath = current(files.TIMEINDEX)
    rebuild = (cut or path is None or tpath is None or not _offset_index_ok(path, scan, active)
               or not _time_index_ok(tpath, scan, active))
    if rebuild:
        why = "rebuilt for the recovered log" if cut else "missing or wrong: rebuilt"
        for n, p in ((name, path), (tname, tpath)):
            if p is not None:
                plan.add(MOVE, n, "replaced by a rebuilt index")
        plan.add(WRITE, name, why, data=scan.builder.offset_index_bytes())
        plan.add(WRITE, tname, why, data=scan.builder.time_index_bytes())
        report.index_entries = len(scan.builder.offset_entries)
        report.timeindex_entries = len(scan.builder.time_entries)
    xname, xpath = current(files.TXNINDEX)
    expected = txn_index_bytes(scan.aborted)
    if xpath is None:
        wrong = bool(scan.aborted)
    else:
        try:
            txn = TransactionIndex(xpath)
            listed = [(e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)
                      for e in txn.entries]
            wrong = cut or bool(txn.sanity_problems()) or listed != scan.aborted
        except (OSError, FileFormatError):
            wrong = True
    if wrong:
        if xpath is not None:
            plan.add(MOVE, xname, "replaced by a rebuilt transaction index")
        if expected:
            plan.add(WRITE, xname, "rebuilt from the log's ABORT markers", data=expected)
        report.txn_entries = len(scan.aborted)


# -- carrying a plan out -------------------------------------------------------------------------

def _quarantine_dir(directory):
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    path = os.path.join(directory, QUARANTINE, stamp)
    os.makedirs(path)
    return path


def _copy_range(src, start, end, dst):
    """Save bytes [start, end) of ``src`` to ``dst`` in chunks, flushed and renamed into place."""
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
    os.replace(tmp, dst)
    fsync_dir(os.path.dirname(dst))


def execute(plan):
    """Carry ``plan`` out; return the quarantine folder used (None when nothing was kept)."""
    if not plan.actions:
        return None
    directory = plan.directory
    qdir = None
    manifest = []

    def quarantine():
        nonlocal qdir
        if qdir is None:
            qdir = _quarantine_dir(directory)
        return qdir

    def record(entry):
        manifest.append(entry)
        write_atomically(os.path.join(quarantine(), "manifest.json"), json.dumps(
            {"tool": "kafkalog recover", "partition": os.path.abspath(directory),
             "entries": manifest}, indent=1).encode())

    for a in plan.actions:
        src = os.path.join(directory, a.name)
        if a.kind == REMOVE:
            os.unlink(src)  # our own half-written temporary: the real file is intact
            fsync_dir(directory)
        elif a.kind == MOVE:
            os.rename(src, os.path.join(quarantine(), a.name))
            fsync_dir(directory)
            record({"what": "moved", "file": a.name, "saved_as": a.name, "why": a.why})
        elif a.kind == RENAME:
            os.replace(src, os.path.join(directory, a.target))
            fsync_dir(directory)
        elif a.kind == CUT:
            saved = "%s.cut-%d-%d" % (a.name, a.start, a.end)
            _copy_range(src, a.start, a.end, os.path.join(quarantine(), saved))
            record({"what": "cut", "file": a.name, "saved_as": saved, "why": a.why,
                    "range": [a.start, a.end]})
            with open(src, "r+b") as f:
                f.truncate(a.start)
                f.flush()
                os.fsync(f.fileno())
        elif a.kind == WRITE:
            write_atomically(src, a.data)
    return qdir
