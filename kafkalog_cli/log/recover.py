"""Offline recovery of a partition: what a broker does after an unclean shutdown, losing nothing.

``plan_partition`` reads a partition directory and decides; ``execute`` carries the plan out.
Everything removed (files, and the bytes cut from a .log) goes verbatim into a quarantine folder
inside the partition directory, which a broker ignores (it only loads files). The steps are
ordered so that a crash at any moment leaves a state from which running again finishes the job:
later segments are moved away before the corrupt one is cut (so a rerun still sees why they
must go), cut bytes are saved before the log is truncated, and index files are written through
temporary files that are flushed and renamed into place. No step replaces a file: every rename
refuses an existing destination (``indexbuild.rename_noreplace``), each run's quarantine folder
is new, and each file set aside there gets a name of its own (``Quarantine``).
"""

import datetime
import errno
import json
import os
import stat

from ..format import control
from ..format.errors import CorruptRecordError, LimitExceededError
from ..format.records import Batch
from .files import FileFormatError, printable_name
from . import names
from .names import base_offset_from_name, lifecycle_suffix, partition_file_kind
from .index import OffsetIndex, TimeIndex
from .indexbuild import (DEFAULT_INDEX_INTERVAL, TMP_SUFFIX, IndexBuilder, TxnTracker, fsync_dir,
                         rename_noreplace, txn_index_bytes, write_atomically, write_new)
from .segment import (BATCH_LIMIT_FACTOR, DEFAULT_MAX_MESSAGE_SIZE, LogFile, order_problem,
                      reach_problem)
from .txnindex import TransactionIndex

MANIFEST = "manifest.json"

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
                 "timeindex_entries", "txn_entries", "moved", "notes")

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
        self.notes = []                # things said, not changed (batches left unchecked)

    @property
    def cut(self):
        return self.size - self.kept


class PartitionPlan:
    def __init__(self, directory):
        self.directory = directory
        self.actions = []
        self.segments = []
        self.notes = []   # (file name, text): found and reported, left alone
        self.blocked = set()  # Kafka names held by something that is not a regular file

    @property
    def changes(self):
        return bool(self.actions)

    def add(self, kind, name, why, **kw):
        self.actions.append(Action(kind, name, why, **kw))


# -- analysing a segment -----------------------------------------------------------------------

class _Scan:
    """The longest valid prefix of a segment, with what is needed to rebuild and check its
    indexes: where each batch starts, what it ends with, its max timestamp."""

    def __init__(self):
        self.valid_end = 0
        self.first_bad = None
        self.reason = None
        self.last_offset = None
        self.builder = None
        self.aborted = []
        self.last_at = {}        # batch position -> its last offset
        self.max_ts_of = {}      # batch last offset -> the batch header's max timestamp
        self.unchecked = []      # (position, base offset, last offset) of batches kept unchecked


def _header_problem(batch, base, prev_last):
    """Why a batch is invalid by its header alone (size and completeness are the scanner's)."""
    if not batch.is_valid:
        return "CRC mismatch (stored %d, computed %s)" % (batch.crc, batch.computed_crc)
    if batch.magic > 2:
        return "unknown magic %d" % batch.magic
    return (order_problem(batch.last_offset, prev_last)
            or reach_problem(batch.last_offset, base))


# KRaft control records whose values the readers decode (and call invalid when they cannot)
_KRAFT_TYPES = (control.LEADER_CHANGE, control.SNAPSHOT_HEADER, control.SNAPSHOT_FOOTER,
                control.KRAFT_VERSION, control.KRAFT_VOTERS)


def control_problem(recs):
    """Why the records of a control batch are malformed, or None: every key a control key
    (ControlRecordType: at least 4 bytes, a version that is not negative), an ABORT/COMMIT
    value an end transaction marker (EndTransactionMarker), a KRaft control value readable as
    its type. The same rule as the readers' (a record they cannot show makes them exit 1)."""
    for offset, key, value in zip(recs.offsets, recs.keys, recs.values):
        try:
            type_id = control.control_type(key)
            if type_id in (control.ABORT, control.COMMIT):
                control.end_txn_marker(value)
            elif type_id in _KRAFT_TYPES:
                control.kraft_control_json(type_id, value)
        except CorruptRecordError as e:
            return "control record at offset %d: %s" % (offset, e)
    return None


def scan_segment(path, base, prev_last, tracker, interval, max_message_size):
    """Validate ``path`` batch by batch and build its indexes. A batch is valid when it is
    complete, its size and magic are right, its CRC holds, its last offset follows the previous
    one and fits the segment, its records decode and are as many as the header says, and, in a
    control batch, they are well-formed control records. A batch whose records inflate past the
    bound is kept with its records unchecked (its CRC holds, and the broker's recovery does not
    look inside a data batch): ``unchecked`` lists them."""
    result = _Scan()
    result.builder = IndexBuilder(base, interval)
    # A record as large as its batch may inflate to is valid: the broker's recovery keeps it.
    with LogFile(path, max_message_size, record_limit_factor=BATCH_LIMIT_FACTOR) as log:
        for item in log.entries():
            if not isinstance(item, Batch):
                result.first_bad, result.reason = item.position, item.reason
                break
            reason = _header_problem(item, base, prev_last)
            marker_key = None   # a control batch's first record key (its end marker's)
            if reason is None:
                try:
                    # chunk by chunk: memory stays bounded by the batch's decompressed size,
                    # however many records it holds
                    for recs in log.iter_records(item):
                        if item.is_control:
                            if marker_key is None and len(recs):
                                marker_key = recs.keys[0]
                            reason = control_problem(recs)
                            if reason is not None:
                                break
                except LimitExceededError:
                    # Inflating further than the bound lets us is no proof of damage: keep the
                    # batch, its records unchecked (and say so).
                    result.unchecked.append((item.position, item.base_offset, item.last_offset))
                    marker_key = None
                except CorruptRecordError as e:
                    reason = "records cannot be read: %s" % e
            if reason is not None:
                result.first_bad, result.reason = item.position, reason
                break
            _track_transactions(item, marker_key, tracker, result.aborted)
            result.builder.add(item.position, item.size, item.last_offset, item.max_timestamp)
            result.last_at[item.position] = item.last_offset
            # LogSegment.recover indexes the batch header's maxTimestamp, so that is what an
            # existing time index is checked against too.
            result.max_ts_of[item.last_offset] = item.max_timestamp
            result.valid_end = item.position + item.size
            prev_last = item.last_offset
    result.builder.finish()
    result.last_offset = prev_last
    return result


def _track_transactions(batch, marker_key, tracker, aborted):
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


def _stray_bytes(index):
    """Non-zero bytes after an index's real entries: not a pre-allocated tail (entries after
    a slot that ends them, a torn entry), which appending after the real entries would lose."""
    return len(index.data.rstrip(b"\x00")) > index.count * index.entry.size


def _offset_index_ok(path, scan, active):
    """Does the .index at ``path`` point only at batch starts with the right last offsets,
    increasing, and pass the broker's sanity check?"""
    try:
        index = OffsetIndex(path)
    except (OSError, FileFormatError):
        return False
    if index.zero_tail and not active:
        return False  # a sealed segment's index left pre-allocated (KAFKA-19200): trim it
    if _stray_bytes(index):
        return False
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
    if _stray_bytes(index):
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


def _is_segment_swap(name):
    """A .swap of a numbered segment's log or index file (the names the log cleaner and the
    segment split give files they are about to swap in)."""
    return (name.endswith(".swap") and partition_file_kind(name) in names.SEGMENT_KINDS
            and _base(name) is not None)


def _plan_leftovers(plan, regular):
    """LogLoader's first pass: .deleted and .cleaned files, and .swap files of a split that did
    not finish; index .swap files without their segment's .log.swap. Returns the file names as
    they will be once the plan is carried out, each mapped to the name it has now, and the
    .swap files still to be renamed into place."""
    view = {n: n for n in regular}
    for n in regular:
        if n.endswith(".deleted") and not n.endswith(".checkpoint.deleted"):
            plan.add(MOVE, n, "left by the broker for deletion (.deleted)")
            del view[n]
    cleaned = [n for n in regular if n.endswith(".cleaned")]
    min_cleaned = min((_base(n) for n in cleaned if _base(n) is not None), default=None)
    swaps = []
    for n in regular:
        if not n.endswith(".swap"):
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
    log_swap_stems = {n.split(".", 1)[0] for n in swaps if n.endswith(".log.swap")}
    for n in list(swaps):
        if n.split(".", 1)[0] not in log_swap_stems:
            # Not part of a segment swap: renaming it would replace the segment's index with
            # one nothing vouches for. Set aside; the index is checked and rebuilt if wrong.
            plan.add(MOVE, n, "index .swap without its segment's .log.swap (the broker's loader "
                     "deletes it and rebuilds the index)")
            del view[n]
            swaps.remove(n)
    return view, swaps


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


class SymlinkCutError(OSError):
    """A segment to be cut is a symlink: recover refuses the partition, changing nothing."""


def plan_partition(directory, interval=DEFAULT_INDEX_INTERVAL,
                   max_message_size=DEFAULT_MAX_MESSAGE_SIZE):
    """Everything recovery would change in ``directory``, with a report per segment."""
    plan = PartitionPlan(directory)
    entries = sorted(os.listdir(directory))
    regular = [n for n in entries if os.path.isfile(os.path.join(directory, n))]
    # A FIFO, a device, a directory or a dangling symlink under a Kafka file's name: left
    # alone, and never written over (its segment's index is not rebuilt under that name).
    for n in entries:
        if partition_file_kind(n) is not None and not os.path.isfile(os.path.join(directory, n)):
            plan.blocked.add(n)
            plan.notes.append((n, "not a regular file: left alone"))
    for n in regular:
        if n.endswith(TMP_SUFFIX):
            plan.add(REMOVE, n, "temporary file of an interrupted kafkalog write")
    regular = [n for n in regular if not n.endswith(TMP_SUFFIX)]
    for n in regular:
        if partition_file_kind(n) is None and not n.startswith(".") and not lifecycle_suffix(n):
            plan.notes.append((n, "not a name Kafka gives a file (no segment's): left alone"))
    view, swaps = _plan_leftovers(plan, regular)
    if any(n[:-len(".swap")] in plan.blocked for n in swaps):
        for n in swaps:
            plan.notes.append((n, "swap not completed: a file that is not a regular file holds "
                                  "a name it would take"))
        swaps = []
    log_swaps = [n for n in swaps if n.endswith(".log.swap")]
    if log_swaps:
        # LogLoader's second pass: the segments the swap replaces go (any file whose name
        # starts with an offset in the swap's range, snapshots too).
        low, high = _swap_range(directory, log_swaps, max_message_size)
        for n in sorted(view):
            if (not lifecycle_suffix(n) and _base(n) is not None and low <= _base(n) < high
                    and partition_file_kind(n) is not None):
                plan.add(MOVE, n, "replaced by the swap segment covering offsets %d-%d"
                         % (low, high - 1))
                del view[n]
    # Third pass: the .swap files renamed into place, the .log.swap first (once it is in
    # place, the segment's index .swap files are plain renames). A file still holding the
    # final name is set aside first: nothing is replaced.
    for n in sorted(swaps, key=lambda n: not n.endswith(".log.swap")):
        final = n[:-len(".swap")]
        if final in view:
            plan.add(MOVE, final, "replaced by %s (completing a swap)" % printable_name(n))
            del view[final]
        plan.add(RENAME, n, "completing a swap the broker had started", target=final)
        view[final] = view.pop(n)
    # Names are Kafka's (a 20-digit offset), so each log has a base offset of its own.
    logs = sorted((n for n in view
                   if partition_file_kind(n) == names.LOG and not lifecycle_suffix(n)), key=_base)
    log_stems = {n.split(".", 1)[0] for n in logs}
    log_stems |= {n.split(".", 1)[0] for n in plan.blocked if partition_file_kind(n) == names.LOG
                  and not lifecycle_suffix(n)}   # its indexes are not orphans
    for n in sorted(view):
        if (partition_file_kind(n) in (names.INDEX, names.TIMEINDEX, names.TXNINDEX)
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
        for position, first, last in scan.unchecked:
            report.notes.append(
                "records of the batch at position %d (offsets %d-%d) not checked: they inflate "
                "past %d bytes (raise --max-message-size to check them); the batch is kept"
                % (position, first, last, max_message_size * BATCH_LIMIT_FACTOR))
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
                    if (n.split(".", 1)[0] == later_stem and partition_file_kind(n) in names.SEGMENT_KINDS
                            and not lifecycle_suffix(n)):
                        plan.add(MOVE, n, "after the corrupt segment %s (the broker deletes it)" % name)
                        del view[n]
            for n in sorted(view):
                if partition_file_kind(n) == names.SNAPSHOT and _base(n) is not None and _base(n) > new_end:
                    plan.add(MOVE, n, "producer snapshot above the new log end offset %d" % new_end)
                    del view[n]
            if os.path.islink(path):
                # Cutting writes to the file the link points at, wherever it is: refused before
                # anything changes, so the partition is left as it was.
                raise SymlinkCutError(
                    errno.ELOOP, "is a symlink to %s and would have to be cut at byte %d; recover "
                    "writes no file outside the partition directory: put a copy of the file in "
                    "place of the link, then run recover again"
                    % (printable_name(os.path.realpath(path)), scan.valid_end), path)
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

    def write(n, why, data):
        if n in plan.blocked:
            report.notes.append("%s not rebuilt: it is not a regular file" % printable_name(n))
        else:
            plan.add(WRITE, n, why, data=data)

    def missing(n, p):
        return p is None and n not in plan.blocked

    name, path = current(names.INDEX)
    tname, tpath = current(names.TIMEINDEX)
    rebuild = (cut or missing(name, path) or missing(tname, tpath)
               or (path is not None and not _offset_index_ok(path, scan, active))
               or (tpath is not None and not _time_index_ok(tpath, scan, active)))
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

    def __init__(self, directory):
        self.directory = directory
        self.path = None
        self.entries = []
        self._taken = {MANIFEST}

    def folder(self):
        if self.path is None:
            self.path = _new_run_folder(self.directory)
        return self.path

    def reserve(self, name):
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

    def record(self, entry):
        """Add a manifest entry and rewrite the manifest (flushed, renamed into place)."""
        self.entries.append(entry)
        partition = os.path.abspath(self.directory)
        doc = {"tool": "kafkalog recover", "partition": printable_name(partition)}
        if printable_name(partition) != partition:
            doc["partition_bytes_hex"] = os.fsencode(partition).hex()
        doc["entries"] = self.entries
        write_atomically(os.path.join(self.folder(), MANIFEST), json.dumps(doc, indent=1).encode())


def _real_dir(path):
    """A directory, not a symlink to one (nothing is moved out of the partition through one)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _new_run_folder(directory):
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


def _entry(what, name, saved, why, **extra):
    entry = {"what": what, "file": printable_name(name), "saved_as": saved, "why": why}
    if printable_name(name) != name:
        entry["file_bytes_hex"] = os.fsencode(name).hex()
    entry.update(extra)
    return entry


def _copy_range(src, start, end, dst):
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


def execute(plan):
    """Carry ``plan`` out; return the quarantine folder used (None when nothing was kept).

    Every rename is one that cannot replace a file (``rename_noreplace``); a rebuilt index is
    written only where no file holds its name any more (its predecessor was set aside first).
    """
    if not plan.actions:
        return None
    directory = plan.directory
    q = Quarantine(directory)
    earlier = {}  # name -> the .swap name it had before this run renamed it
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
