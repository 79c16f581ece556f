"""Writing to a partition as a broker does: append batches to the active segment, keep its
indexes as the append path does (LogSegment.append, semantics.md b.4), roll (c.1-c.3).

The active segment's .index and .timeindex are kept trimmed to their entries and appended to;
a crash can leave them short or long by an entry, which `kafkalog recover` puts right.
"""

import errno
import fcntl
import os
import time

from ..format.records import Batch
from .names import LOG, base_offset_from_name, file_kind, lifecycle_suffix
from .index import OffsetIndex, TimeIndex
from .indexbuild import IndexBuilder, fsync_dir, write_atomically, write_new
from .segment import DEFAULT_MAX_MESSAGE_SIZE, MAX_RELATIVE_OFFSET, LogFile

DEFAULT_SEGMENT_BYTES = 1024 ** 3           # segment.bytes
DEFAULT_SEGMENT_INDEX_BYTES = 10 * 1024 ** 2  # segment.index.bytes
PARTITION_LOCK = ".kafkalog-append.lock"


class AppendError(Exception):
    """The partition cannot be written as it is (a damaged active segment, another writer)."""


def segment_name(base):
    return "%020d" % base


def now_ms():
    return int(time.time() * 1000)


class RollPolicy:
    def __init__(self, segment_bytes=DEFAULT_SEGMENT_BYTES, segment_ms=None,
                 segment_index_bytes=DEFAULT_SEGMENT_INDEX_BYTES, index_interval=4096):
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        self.max_index_entries = segment_index_bytes // OffsetIndex.entry.size
        self.max_time_entries = segment_index_bytes // TimeIndex.entry.size - 1
        self.index_interval = index_interval


class _Active:
    """The open active segment: its files and the in-memory state the broker keeps for it."""

    def __init__(self, directory, base):
        self.base = base
        stem = os.path.join(directory, segment_name(base))
        self.log_path, self.index_path, self.time_path = (stem + ".log", stem + ".index",
                                                          stem + ".timeindex")
        self.size = 0
        self.first_batch_ts = None       # max timestamp of the first batch (time-based roll)
        self.max_ts = -1                 # max timestamp so far, and the last offset of its batch
        self.max_ts_offset = -1
        self.index_entries = 0
        self.time_entries = 0
        self.last_time_ts = -1
        self.bytes_since_index = 0       # in memory only, as on a broker: 0 after a restart
        self.log = self.index = self.timeindex = None

    def open_files(self):
        self.log = open(self.log_path, "ab")
        self.index = open(self.index_path, "ab")
        self.timeindex = open(self.time_path, "ab")

    def files(self):
        return (self.log, self.index, self.timeindex)

    def flush(self):
        for f in self.files():
            if f is not None and not f.closed:
                f.flush()
                os.fsync(f.fileno())

    def close(self):
        for f in self.files():
            if f is not None:
                f.close()


class PartitionWriter:
    """Appends encoded batches to a partition directory. Use as a context manager; the caller
    holds the log directory's lock (log.lock.LogDirLock) around it."""

    def __init__(self, directory, policy=None, max_message_size=DEFAULT_MAX_MESSAGE_SIZE,
                 lock_partition=True):
        self.directory = directory
        self.lock_partition = lock_partition
        self.policy = policy or RollPolicy()
        self.max_message_size = max_message_size
        self._lock_fd = None
        self._lock_created = False
        self.active = None
        self.next_offset = None
        self.rolled = []  # base offsets of the segments this writer created

    # -- opening -----------------------------------------------------------------------------
    def __enter__(self):
        created = not os.path.isdir(self.directory)
        os.makedirs(self.directory, exist_ok=True)
        if created:
            fsync_dir(os.path.dirname(os.path.abspath(self.directory)))
        if self.lock_partition:
            self._lock_partition()
        try:
            bases = sorted(base_offset_from_name(n) for n in os.listdir(self.directory)
                           if file_kind(n) == LOG and not lifecycle_suffix(n)
                           and base_offset_from_name(n) is not None)
            if not bases:
                self._create_segment(0)
            else:
                self._load_active(bases[-1])
        except BaseException:
            self._unlock()
            raise
        return self

    def __exit__(self, *exc):
        try:
            if self.active is not None:
                self.active.flush()
                self.active.close()
        finally:
            self._unlock()

    def _lock_partition(self):
        path = os.path.join(self.directory, PARTITION_LOCK)
        self._lock_created = not os.path.exists(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EACCES, errno.EAGAIN):
                raise AppendError("%s: another kafkalog process is writing this partition"
                                  % self.directory) from None
            raise
        self._lock_fd = fd

    def _unlock(self):
        if self._lock_fd is not None:
            if self._lock_created:
                # Safe to remove: every kafkalog writer also holds the log directory's .lock,
                # so nobody else can be waiting on this file.
                os.unlink(os.path.join(self.directory, PARTITION_LOCK))
            os.close(self._lock_fd)
            self._lock_fd = None

    def _load_active(self, base):
        active = _Active(self.directory, base)
        next_offset = base
        builder = IndexBuilder(base, self.policy.index_interval)
        starts = set()
        with LogFile(active.log_path, self.max_message_size) as log:
            for item in log.entries():
                if not isinstance(item, Batch) or not item.is_valid:
                    raise AppendError("%s: damaged at position %d (%s): run `kafkalog recover` first"
                                      % (active.log_path, item.position,
                                         getattr(item, "reason", "CRC mismatch")))
                if active.first_batch_ts is None:
                    active.first_batch_ts = item.max_timestamp
                if item.max_timestamp > active.max_ts:
                    active.max_ts, active.max_ts_offset = item.max_timestamp, item.last_offset
                builder.add(item.position, item.size, item.last_offset, item.max_timestamp)
                starts.add(item.position)
                next_offset = item.last_offset + 1
            active.size = log.size
        # A missing index is rebuilt as the broker's recovery would (without the final time
        # entry, which belongs to the roll); one that points past the log is left to recover.
        active.index_entries = self._open_index(active.index_path, OffsetIndex, base,
                                                builder.offset_index_bytes())
        active.time_entries = self._open_index(active.time_path, TimeIndex, base,
                                               builder.time_index_bytes())
        index = OffsetIndex(active.index_path, base)
        tindex = TimeIndex(active.time_path, base)
        if ((index.count and (index.entries[-1][1] not in starts
                              or index.entries[-1][0] >= next_offset))
                or (tindex.count and tindex.entries[-1][1] >= next_offset)):
            raise AppendError("%s: its indexes point past its log (an interrupted write): run "
                              "`kafkalog recover` first" % active.log_path)
        if tindex.count:
            active.last_time_ts = tindex.entries[-1][0]
        active.open_files()
        self.active = active
        self.next_offset = next_offset

    @staticmethod
    def _open_index(path, cls, base, rebuilt):
        """Entries of an index we are about to append to: a missing one is written from
        ``rebuilt``; a pre-allocated zero tail (a broker leaves the active segment's index so)
        is cut first so that appends follow the last real entry."""
        if not os.path.lexists(path):
            write_new(path, rebuilt)  # never over a file that appeared meanwhile
            return len(rebuilt) // cls.entry.size
        index = cls(path, base)
        if index.zero_tail or index.file_size % index.entry.size:
            keep = index.count * index.entry.size
            whole = index.slots * index.entry.size
            if len(index.data[:whole].rstrip(b"\x00")) > keep:
                # not a pre-allocated tail: entries after a slot that ends them. Trimming would
                # throw them away unseen; recover checks the index and keeps what it replaces.
                raise AppendError("%s: bytes after its last entry are not zeros: run `kafkalog "
                                  "recover` first" % path)
            # what goes: zeros, and a torn last entry shorter than one (a crash mid-write)
            write_atomically(path, index.data[:keep])
        return index.count

    def _create_segment(self, base):
        active = _Active(self.directory, base)
        # The indexes first, the .log last: a crash leaves no segment without its indexes.
        for path in (active.index_path, active.time_path, active.log_path):
            try:
                f = open(path, "xb")  # created here, never truncating a file that exists
            except FileExistsError:
                # an empty file a crashed roll left is taken as it is; anything else is not ours
                if not (os.path.isfile(path) and not os.path.islink(path)
                        and os.path.getsize(path) == 0):
                    raise AppendError("%s already exists" % path) from None
                f = open(path, "rb")
            with f:
                os.fsync(f.fileno())
        fsync_dir(self.directory)
        active.open_files()
        self.active = active
        self.next_offset = base

    # -- writing -----------------------------------------------------------------------------
    def should_roll(self, batch_size, batch_max_ts, batch_last_offset):
        """LogSegment.shouldRoll, for a batch about to be appended (semantics.md c.1)."""
        a, p = self.active, self.policy
        if a.size == 0:
            return False  # an empty segment never rolls
        if a.size > p.segment_bytes - batch_size:
            return True
        if (p.segment_ms is not None and a.first_batch_ts is not None and a.first_batch_ts >= 0
                and batch_max_ts - a.first_batch_ts > p.segment_ms):
            return True
        if a.index_entries >= p.max_index_entries or a.time_entries >= p.max_time_entries:
            return True
        return batch_last_offset - a.base > MAX_RELATIVE_OFFSET

    def append(self, data, last_offset, max_timestamp):
        """Append one encoded batch ending at ``last_offset``; roll first where the broker
        would. Index entries follow LogSegment.append."""
        if self.should_roll(len(data), max_timestamp, last_offset):
            self.roll()
        a = self.active
        position = a.size
        a.log.write(data)
        if a.first_batch_ts is None:
            a.first_batch_ts = max_timestamp
        if max_timestamp > a.max_ts:
            a.max_ts, a.max_ts_offset = max_timestamp, last_offset
        if a.bytes_since_index > self.policy.index_interval:
            a.index.write(OffsetIndex.entry.pack(last_offset - a.base, position))
            a.index_entries += 1
            self._maybe_time_entry()
            a.bytes_since_index = 0
        a.bytes_since_index += len(data)
        a.size += len(data)
        self.next_offset = last_offset + 1

    def _maybe_time_entry(self):
        a = self.active
        if a.max_ts > a.last_time_ts:
            a.timeindex.write(TimeIndex.entry.pack(a.max_ts, a.max_ts_offset - a.base))
            a.time_entries += 1
            a.last_time_ts = a.max_ts

    def flush(self):
        self.active.flush()

    def roll(self):
        """Seal the active segment (final time index entry; its indexes are already trimmed)
        and start an empty one named by the next offset (semantics.md c.2-c.3)."""
        self._maybe_time_entry()
        self.active.flush()
        self.active.close()
        self._create_segment(self.next_offset)
        self.rolled.append(self.next_offset)
