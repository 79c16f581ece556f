"""Retention as the broker runs it (UnifiedLog.deleteOldSegments, semantics.md d): which
segments go, and deleting them the broker's way (renamed to .deleted together, removed later).

Passes run in the broker's order on what is left after the previous one: log start offset, size,
time. Each walks the segments oldest first and stops at the first that cannot go: the high
watermark must be at or above the segment's upper bound (the next segment's base offset, or the
log end offset for the last one), the policy must hold, and the last segment goes only when it
is not empty and the caller allows rolling it away.
"""

import errno
import os
import time

from ..format.records import Batch
from . import checkpoints
from .files import FileFormatError
from . import names
from .names import base_offset_from_name, lifecycle_suffix
from .index import TimeIndex
from .indexbuild import fsync_dir, rename_noreplace, write_atomically
from .segment import LogFile

DELETED = ".deleted"


class Segment:
    """A segment as retention sees it: size, offsets, largest timestamp and where that came from."""

    __slots__ = ("name", "base", "size", "next_offset", "largest_ts", "ts_source", "first_ts",
                 "fate", "why")

    def __init__(self, name, base):
        self.name = name
        self.base = base
        self.fate = "kept"
        self.why = None


def _scan(path, seg):
    """Next offset and max/min batch timestamps from the batches (their headers only)."""
    seg.next_offset = seg.base
    largest = -1
    first = None
    with LogFile(path) as log:
        for item in log.entries():
            if not isinstance(item, Batch):
                break
            seg.next_offset = item.last_offset + 1
            largest = max(largest, item.max_timestamp)
            if first is None:
                first = item.max_timestamp
    seg.first_ts = first
    return largest


def _largest_timestamp(directory, seg, batches_ts):
    """From the time index's last entry; failing that the batches; failing that the mtime."""
    tpath = os.path.join(directory, "%020d.timeindex" % seg.base)
    if os.path.isfile(tpath):
        try:
            index = TimeIndex(tpath, seg.base)
            if index.count and not index.trimmed().sanity_problems():
                ts = index.entries[-1][0]
                if ts >= 0:
                    return ts, "time index"
        except (OSError, FileFormatError):
            pass
    if batches_ts >= 0:
        return batches_ts, "batches"
    return int(os.path.getmtime(os.path.join(directory, seg.name)) * 1000), "file mtime"


def load_segments(directory):
    logs = sorted((n for n in os.listdir(directory) if names.partition_file_kind(n) == names.LOG
                   and not lifecycle_suffix(n)),
                  key=base_offset_from_name)
    out = []
    for i, n in enumerate(logs):
        seg = Segment(n, base_offset_from_name(n))
        path = os.path.join(directory, n)
        seg.size = os.path.getsize(path)
        batches_ts = _scan(path, seg)
        seg.largest_ts, seg.ts_source = _largest_timestamp(directory, seg, batches_ts)
        if i == len(logs) - 1 and batches_ts > seg.largest_ts:
            # The active segment's time index lacks its final entry until a roll (the broker
            # keeps that maximum in memory): its batches know better.
            seg.largest_ts, seg.ts_source = batches_ts, "batches"
        out.append(seg)
    return out


class Policy:
    def __init__(self, retention_ms=None, retention_bytes=None, log_start_offset=None, now=None,
                 high_watermark=None, roll_active=False):
        self.retention_ms = retention_ms
        self.retention_bytes = retention_bytes
        self.log_start_offset = log_start_offset
        self.now = now if now is not None else int(time.time() * 1000)
        self.high_watermark = high_watermark
        self.roll_active = roll_active


class RetentionPlan:
    def __init__(self, directory, segments, high_watermark, hw_source, log_end):
        self.directory = directory
        self.segments = segments
        self.high_watermark = high_watermark
        self.hw_source = hw_source
        self.log_end = log_end
        self.roll_first = False

    @property
    def deleted(self):
        return [s for s in self.segments if s.fate == "deleted"]

    @property
    def new_log_start(self):
        kept = [s for s in self.segments if s.fate != "deleted"]
        return kept[0].base if kept else self.log_end


def _partition_of(directory):
    topic, _, number = os.path.basename(os.path.normpath(directory)).rpartition("-")
    return (topic, int(number)) if topic and number.isdigit() else (None, None)


def _high_watermark(directory, policy, log_start, log_end):
    """(high watermark, where it came from), clamped into [log start, log end]."""
    topic, number = _partition_of(directory)
    path = os.path.join(os.path.dirname(os.path.abspath(directory)), "replication-offset-checkpoint")
    hw, source = None, None
    if topic is not None and os.path.isfile(path):
        for t, p, offset in checkpoints.read_offset_checkpoint(path):
            if (t, p) == (topic, number):
                hw, source = offset, "replication-offset-checkpoint"
    if hw is None and policy.high_watermark is not None:
        hw, source = policy.high_watermark, "--high-watermark"
    if hw is None:
        hw, source = log_end, "log end offset (no replication-offset-checkpoint entry, no --high-watermark)"
    return min(max(hw, log_start), log_end), source


def plan_retention(directory, policy):
    segments = load_segments(directory)
    log_end = segments[-1].next_offset if segments else 0
    log_start = segments[0].base if segments else 0
    hw, source = _high_watermark(directory, policy, log_start, log_end)
    plan = RetentionPlan(directory, segments, hw, source, log_end)
    remaining = list(segments)

    def walk(predicate, label):
        nonlocal remaining
        gone = 0
        for i, seg in enumerate(remaining):
            last = i == len(remaining) - 1
            upper = remaining[i + 1].base if not last else log_end
            if last and not policy.roll_active:
                seg.why = seg.why or "active segment (--roll-active lets it go)"
                break
            if last and seg.next_offset == seg.base:
                seg.why = seg.why or "active segment, empty"
                break
            if hw < upper:
                seg.why = "above the high watermark %d (%s)" % (hw, source)
                break
            why_not = predicate(seg, remaining[i + 1] if not last else None)
            if why_not is not None:
                seg.why = why_not
                break
            seg.fate, seg.why = "deleted", label
            gone += 1
        remaining = remaining[gone:]

    if policy.log_start_offset is not None:
        def below_start(seg, nxt):
            if nxt is not None and nxt.base <= policy.log_start_offset:
                return None
            if nxt is None and log_end <= policy.log_start_offset:
                return None
            return "holds offsets at or above the log start offset %d" % policy.log_start_offset
        walk(below_start, "log start offset %d" % policy.log_start_offset)
    if policy.retention_bytes is not None and policy.retention_bytes >= 0:
        diff = sum(s.size for s in remaining) - policy.retention_bytes

        def over_size(seg, nxt):
            nonlocal diff
            if diff - seg.size >= 0:
                diff -= seg.size
                return None
            return "needed to stay above retention bytes %d" % policy.retention_bytes
        walk(over_size, "retention bytes %d" % policy.retention_bytes)
    if policy.retention_ms is not None and policy.retention_ms >= 0:
        def too_old(seg, nxt):
            if policy.now - seg.largest_ts > policy.retention_ms:
                return None
            if seg.largest_ts > policy.now:
                return "future timestamps (%d, from the %s) hold it back" % (seg.largest_ts,
                                                                            seg.ts_source)
            return "newest timestamp %d (from the %s) too recent" % (seg.largest_ts, seg.ts_source)
        walk(too_old, "retention ms %d" % policy.retention_ms)
    for i, seg in enumerate(segments):
        if seg.why is None:
            seg.why = ("active segment" if i == len(segments) - 1 else
                       "an older segment is kept, and retention stops at the first kept segment")
    plan.roll_first = bool(segments) and segments[-1].fate == "deleted"
    return plan


def segment_files(directory, base):
    """The names of a segment's files present now (its .log last), and snapshots at its base."""
    stem = names.offset_stem(base)
    found = [n for n in os.listdir(directory) if n.split(".", 1)[0] == stem
             and not lifecycle_suffix(n) and names.partition_file_kind(n) in
             (names.INDEX, names.TIMEINDEX, names.TXNINDEX, names.SNAPSHOT)]
    log = names.offset_name(base, names.LOG)
    return sorted(found) + ([log] if os.path.exists(os.path.join(directory, log)) else [])


INTENT = ".kafkalog-retain-intent"


def finish_interrupted(directory):
    """Finish a deletion a crash interrupted: the bases it had decided, and the new log start,
    are in the intent file written before the first rename (so that no half-deleted segment is
    left, and no segment that merely has .deleted files beside it, as the log cleaner leaves,
    is taken for one)."""
    path = os.path.join(directory, INTENT)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        words = f.read().split()
    try:
        start, bases = int(words[0]), [int(x) for x in words[1:]]
    except (ValueError, IndexError):
        start, bases = None, []  # a torn intent file: the deletion had not begun
    done = []
    if start is not None:
        done = _rename_segments(directory, bases, start)
        update_log_start_checkpoint(directory, start)
    os.unlink(path)
    fsync_dir(directory)
    return done


def _mark_deleted(directory, n):
    """Rename ``n`` to ``n.deleted``, never over an existing file: when a ``n.deleted`` is
    already there (the log cleaner leaves the segment it replaced so, under the same base
    offset, until the broker's delayed delete), ours becomes ``n.<k>.deleted`` with the first
    free k. Returns the new name."""
    src = os.path.join(directory, n)
    for k in range(1, 1 << 20):
        target = n + DELETED if k == 1 else "%s.%d%s" % (n, k, DELETED)
        try:
            rename_noreplace(src, os.path.join(directory, target))
            return target
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free .deleted name", src)


def _rename_segments(directory, bases, new_start):
    done = []
    for base in bases:
        for n in segment_files(directory, base):
            _mark_deleted(directory, n)
            done.append(n)
    for n in os.listdir(directory):  # producer snapshots below the new log start go too
        b = base_offset_from_name(n)
        if names.partition_file_kind(n) == names.SNAPSHOT and not lifecycle_suffix(n) \
                and b is not None and b < new_start:
            _mark_deleted(directory, n)
            done.append(n)
    fsync_dir(directory)
    return done


def _deleted_origin(n):
    """The name a ``.deleted`` file had (``X.log.deleted`` and our ``X.log.2.deleted`` ->
    ``X.log``), or None for a name that is not a Kafka file's with that suffix."""
    if not n.endswith(DELETED):
        return None
    stem = n[:-len(DELETED)]
    head, dot, k = stem.rpartition(".")
    if dot and k.isascii() and k.isdigit() and names.partition_file_kind(head) is not None:
        stem = head
    return stem if names.partition_file_kind(stem) is not None else None


def delete_segments(plan):
    """Rename each deleted segment's files to .deleted (indexes and snapshots first, the .log
    last) and update the log start checkpoint, after writing down which, so that a rerun after
    a crash finishes the same job."""
    directory = plan.directory
    bases = [seg.base for seg in plan.deleted]
    intent = os.path.join(directory, INTENT)
    write_atomically(intent, (" ".join(str(x) for x in [plan.new_log_start] + bases) + "\n").encode())
    _rename_segments(directory, bases, plan.new_log_start)
    update_log_start_checkpoint(directory, plan.new_log_start)
    os.unlink(intent)
    fsync_dir(directory)


def purge_deleted(directory, delay_ms, now_ms):
    """Remove .deleted files whose deletion is older than the delay (the rename time, their
    ctime); with 0, all of them."""
    removed = []
    for n in sorted(os.listdir(directory)):
        if _deleted_origin(n) is None:
            continue
        path = os.path.join(directory, n)
        if delay_ms == 0 or now_ms - os.stat(path).st_ctime * 1000 >= delay_ms:
            os.unlink(path)
            removed.append(n)
    if removed:
        fsync_dir(directory)
    return removed


def update_log_start_checkpoint(directory, first_base):
    """Rewrite the log directory's log-start-offset-checkpoint, when it exists, for this
    partition whose first segment now starts at ``first_base``: the log start offset only ever
    grows (an entry above the base, from a DeleteRecords, stays), and the entry is left out
    when the log start is the first segment's base, as the broker writes it."""
    path = os.path.join(os.path.dirname(os.path.abspath(directory)), "log-start-offset-checkpoint")
    topic, number = _partition_of(directory)
    if topic is None or not os.path.isfile(path):
        return False
    entries = checkpoints.read_offset_checkpoint(path)
    current = [o for t, p, o in entries if (t, p) == (topic, number)]
    start = max([first_base] + current)
    entries = [e for e in entries if (e[0], e[1]) != (topic, number)]
    if start > first_base:
        entries.append((topic, number, start))
    text = "0\n%d\n" % len(entries) + "".join("%s %d %d\n" % e for e in entries)
    write_atomically(path, text.encode("utf-8"))
    return True
