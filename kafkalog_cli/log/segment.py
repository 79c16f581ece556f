"""A segment (Kafka's LogSegment): its base offset and its files, and the reading of its .log
file, copied into memory a window at a time, scanned batch by batch in bounded memory, and safe
against the file changing under us."""

from __future__ import annotations

import errno
import mmap
import os
import platform
import sys
from typing import TYPE_CHECKING, Iterable, Iterator, List, Optional, Tuple, Union

from ..errors import api_errors
from ..format import codecs
from ..format.errors import CorruptRecordError
from ..format.records import (LEGACY_MIN_SIZE, LOG_OVERHEAD, PREFIX, RECORD_CHUNK, V2_OVERHEAD,
                              Batch, Records, decode_records, iter_records, read_batch)
from ..format.scan import INT64_MAX, INT64_MIN, MIN_HEADER, InvalidBytes, entry_problem, scan
from ..format.validity import MAX_RELATIVE_OFFSET
from . import names
from .files import FileChangedError, FileFormatError, check_unchanged, open_regular
from .index import OffsetIndex, TimeIndex
from .txnindex import TransactionIndex

if TYPE_CHECKING:
    from .leader_epochs import LeaderEpochCache
    from .producer_state import ProducerState
    from .recovery_scan import SegmentScan

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
# A batch holds many messages: its decompressed size may reach this multiple of the
# per-message limit before it counts as a decompression bomb.
BATCH_LIMIT_FACTOR = 16
# Bytes already scanned are dropped from memory in steps of this size, so that the resident
# size stays flat however large the file is.
RELEASE_STEP = 32 * 1024 * 1024
# How far ahead of the scan the file is read: the first read after a jump is small (a seek
# or an index check reads one batch), and each following one twice as large, up to WINDOW.
FIRST_READ = 64 * 1024
WINDOW = 16 * 1024 * 1024
_MAX_READ = 1 << 30  # one preadv call at most (Linux stops a read a little short of 2 GiB)
_PAGE = mmap.PAGESIZE
_HUGE = 2 * 1024 * 1024  # released memory is given back in whole (huge) pages of this size
# Private anonymous memory for ``buf``. MAP_NORESERVE: only the window read is ever touched, so
# the whole size need not be reserved (Linux's default overcommit check would otherwise refuse a
# segment larger than RAM and swap). Not every Python names the flag; its value is 0x4000 on the
# architectures below.
_ANON_FLAGS = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(
    mmap, "MAP_NORESERVE",
    0x4000 if sys.platform.startswith("linux") and platform.machine() in (
        "x86_64", "i386", "i686", "aarch64", "arm64", "armv7l", "armv8l", "riscv64", "s390x")
    else 0)


class LogFile:
    """A segment data file opened read-only. Use as a context manager.

    ``buf`` spans the whole file (``size`` bytes, measured at open) with absolute positions,
    but it is not a mapping of the file: it is private memory into which the file is read
    (preadv) just ahead of the scan, and released behind it. A file truncated while we read
    it then shows up as a short read, reported as FileChangedError (a mapping of the file
    would instead kill the process with SIGBUS on the first access past the new end).
    Bytes of ``buf`` are valid at the positions ``entries()`` yields, until the next entry is
    asked for; other ranges must be loaded first with ``ensure(start, stop)``.
    """

    def __init__(self, path: str, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                 record_limit_factor: int = 1) -> None:
        self.path = path
        self.max_message_size = max_message_size * record_limit_factor  # per record
        self.batch_limit = max_message_size * BATCH_LIMIT_FACTOR  # per decompressed batch
        self._inflater = codecs.Inflater()
        self._map = None
        self._lo = self._hi = 0  # buf[_lo:_hi] holds the file's bytes; _lo is page-aligned
        self._ahead = FIRST_READ
        self._file = open_regular(path)
        try:
            self._fd = self._file.fileno()
            self._opened = os.fstat(self._fd)
            self.size = self._opened.st_size
            if self.size:
                # Anonymous memory: pages cost nothing until written, and read as zeros again
                # once released (MADV_DONTNEED), never as a fault.
                self._map = mmap.mmap(-1, self.size, flags=_ANON_FLAGS)
                if self.size >= _HUGE and hasattr(mmap, "MADV_HUGEPAGE"):
                    # Huge pages: a fifth of the cost of faulting in fresh 4 KiB pages, which
                    # otherwise makes copying the file in dearer than mapping it.
                    try:
                        self._map.madvise(mmap.MADV_HUGEPAGE)
                    except OSError:
                        pass
                self.buf = memoryview(self._map)
            else:
                self.buf = memoryview(b"")
        except BaseException:
            self._file.close()
            raise

    def close(self) -> None:
        if self._map is not None:
            self.buf.release()
            try:
                self._map.close()
            except BufferError:
                pass  # a slice still lives (in an exception's traceback, say): freed with it
            self._map = None
        self._file.close()

    def __enter__(self) -> "LogFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check_unchanged(self) -> None:
        """Raise FileChangedError unless the path still names this file, at its size at open
        or more (files.check_unchanged): for readers that combine what they read from it with
        other files read meanwhile (its indexes). What was read from the file itself holds
        whatever happened to its name: the open file keeps its bytes."""
        check_unchanged(self.path, self._fd, self._opened)

    def _changed(self, pos: int, got: int) -> "FileChangedError":
        try:
            now = "%d bytes now" % os.fstat(self._fd).st_size
        except OSError:
            now = "its size now unknown"
        return FileChangedError(
            errno.EIO, "changed size while being read (%d bytes at open, %s; a short read at "
            "position %d)" % (self.size, now, pos + got), self.path)

    def read_into(self, buffer: Union[bytearray, memoryview], pos: int) -> int:
        """Copy the file's bytes from ``pos`` into ``buffer`` (reused by the caller); return
        how many were copied: ``len(buffer)``, or fewer where the file (as opened) ends.
        Raises FileChangedError when the file has shrunk since it was opened."""
        want = max(0, min(len(buffer), self.size - pos))
        self._pread_full(memoryview(buffer)[:want], pos)
        return want

    def _fill(self, start: int, stop: int) -> None:
        self._pread_full(self.buf[start:stop], start)

    def _pread_full(self, view: memoryview, pos: int) -> None:
        """Fill ``view`` from the file at ``pos``; a short read means the file shrank."""
        got, want = 0, len(view)
        while got < want:
            n = os.preadv(self._fd, [view[got:min(want, got + _MAX_READ)]], pos + got)
            if n <= 0:
                raise self._changed(pos, got)
            got += n

    def _drop(self, start: int, stop: int) -> None:
        """Give back the memory of ``[start, stop)`` (it then reads as zeros), rounded out to
        whole huge pages: callers drop either everything loaded or what lies before a huge
        page boundary, and nothing outside what is loaded needs keeping (a huge page dropped
        only in part would stay resident)."""
        start -= start % _HUGE
        stop = min(self.size, -(-stop // _HUGE) * _HUGE)
        if stop > start and self._map is not None and hasattr(mmap, "MADV_DONTNEED"):
            self._map.madvise(mmap.MADV_DONTNEED, start, stop - start)

    def ensure(self, start: int, stop: int) -> None:
        """Load ``buf[start:stop]`` from the file (a no-op for bytes already loaded). Bytes a
        step or more before ``start`` may be released: callers never read behind ``start``."""
        if start >= self._lo and stop <= self._hi:
            return
        stop = min(stop, self.size)
        start = max(0, min(start, stop))
        lo, hi = self._lo, self._hi
        if start < lo or start > hi + FIRST_READ or lo == hi:
            # A jump (backward, or far ahead): forget what is loaded, start a new window.
            if hi > lo:
                self._drop(lo, hi)
            lo = hi = start - start % _PAGE
            self._ahead = FIRST_READ
        elif start - lo >= RELEASE_STEP:
            lo = start - start % _HUGE
            self._drop(self._lo, lo)
        if stop > hi:
            new_hi = min(self.size, max(stop, hi + self._ahead))
            self._lo, self._hi = lo, lo  # nothing counts as loaded if the read fails
            self._fill(hi, new_hi)
            hi = new_hi
            self._ahead = min(WINDOW, self._ahead * 2)
        self._lo, self._hi = lo, hi

    def release_before(self, pos: int) -> None:
        """Let go of the loaded bytes before ``pos`` once a step's worth has been read, so
        that memory use stays flat."""
        if pos - self._lo >= RELEASE_STEP and self._hi > self._lo:
            if pos >= self._hi:
                self._drop(self._lo, self._hi)
                self._lo = self._hi = pos - pos % _PAGE
            else:
                lo = pos - pos % _HUGE
                self._drop(self._lo, lo)
                self._lo = lo

    def entries(self, start: int = 0, end: Optional[int] = None,
                resync: bool = False) -> Iterator[Union[Batch, InvalidBytes]]:
        """Batches and InvalidBytes of ``[start, end)``, as ``format.scan.scan`` yields them,
        reading the file just ahead of the scan."""
        end = self.size if end is None else min(end, self.size)
        return scan(self.buf, start, end, resync, self.ensure)

    def records(self, batch: Batch) -> Records:
        """Decode the records of ``batch`` all at once; raises CorruptRecordError on malformed
        contents. For a batch of few records: iter_records bounds memory for any batch."""
        self.ensure(batch.position, batch.position + batch.size)
        return decode_records(self.buf, batch, self._inflater, self.max_message_size,
                              self.batch_limit)

    def iter_records(self, batch: Batch, chunk: int = RECORD_CHUNK) -> Iterator[Records]:
        """The records of ``batch`` as Records of at most ``chunk`` records each, decoded as
        they are asked for: memory stays bounded by the batch's decompressed size (at most
        ``batch_limit``) plus one chunk, however many records it holds. At damage, the
        complete records before it come first, then CorruptRecordError is raised
        (LimitExceededError when the records inflate past the bound). Iterate it before asking
        ``entries()`` for the next entry (the batch's bytes are loaded until then)."""
        self.ensure(batch.position, batch.position + batch.size)
        return iter_records(self.buf, batch, self._inflater, self.max_message_size,
                            self.batch_limit, chunk)

    def batches(self, start: int = 0) -> Iterator[Batch]:
        """The complete batches from ``start`` on, up to the first bytes that hold none (the
        end of the valid chain a scan without resync follows): their headers only, no record
        is read."""
        for item in self.entries(start):
            if not isinstance(item, Batch):
                return
            yield item

    def headers(self, start: int = 0) -> Iterator[Batch]:
        """The batches ``batches(start)`` yields, by the same rules (format.scan without
        resync: the chain of entries up to the first that is no batch, a batch whose CRC does
        not match included), read header by header: one pread of at most 61 bytes per entry,
        the records never loaded, no CRC computed (``computed_crc`` is None). For readers of
        header fields only, as the broker's producer state rebuild reads a segment's
        FileChannelRecordBatch headers; a 1 GiB segment of 16 KiB batches costs 64 Ki small
        reads instead of copying the gigabyte in."""
        end = self.size
        pos = min(max(start, 0), end)
        while True:
            batch = self._header_at(pos)
            if batch is None:
                return
            yield batch
            pos += batch.size

    def headers_at(self, positions: Iterable[int]) -> Iterator[Batch]:
        """The batches that start at ``positions`` (known from an earlier walk of the chain
        from 0, in order), read as ``headers`` reads them: their headers only; it stops where
        ``headers`` would find no batch."""
        for pos in positions:
            batch = self._header_at(pos)
            if batch is None:
                return
            yield batch

    def _header_at(self, pos: int) -> Optional[Batch]:
        """The batch at ``pos`` as ``headers`` reads it, or None where the chain stops."""
        end = self.size
        if end - pos < MIN_HEADER:
            return None
        want = min(V2_OVERHEAD, end - pos)
        head = os.pread(self._fd, want, pos)
        if len(head) < want:
            raise self._changed(pos, len(head))
        _, size = PREFIX.unpack_from(head, 0)
        magic = head[16]
        if magic >= 128:
            magic -= 256  # a legacy entry to the scan, as format.scan reads the byte
        # format.scan.entry_problem's rule, its common case (a whole entry) decided here
        # without a call per batch; any other entry is judged by it
        if ((size < LEGACY_MIN_SIZE or pos + LOG_OVERHEAD + size > end
                or (magic >= 2 and size + LOG_OVERHEAD < V2_OVERHEAD))
                and entry_problem(head, 0, end - pos, size, magic) is not None):
            return None  # no whole entry here (zero fill among them): the scan stops
        batch = read_batch(head, 0, min(size + LOG_OVERHEAD, len(head)), magic)
        if magic >= 2 and not INT64_MIN <= batch.last_offset <= INT64_MAX:
            return None  # an offset range beyond a long (entry_problem's OFFSET_OVERFLOW)
        batch.position, batch.size, batch.computed_crc = pos, size + LOG_OVERHEAD, None
        return batch

    def first_base_offset(self) -> Optional[int]:
        """The base offset of the first complete entry, or None."""
        for item in self.entries():
            return getattr(item, "base_offset", None)
        return None


class Segment:
    """One segment of a partition, as Kafka's LogSegment: a base offset and the files named by
    it (``.log``, ``.index``, ``.timeindex``, ``.txnindex``). Creating one touches no file;
    each file is opened when asked for.

    ``suffix`` is a lifecycle suffix ('.deleted', '.cleaned', '.swap') or ''. A segment named
    on the command line may have a file name that holds no offset: ``base_offset`` is then
    None (``Segment.at(path)``) and its other files are found beside it by the same stem.
    """

    __slots__ = ("log_path", "base_offset", "suffix")

    def __init__(self, directory: str, base_offset: int, suffix: str = "") -> None:
        self.log_path = os.path.join(directory, names.offset_name(base_offset, names.LOG, suffix))
        self.base_offset: Optional[int] = base_offset
        self.suffix = suffix

    @classmethod
    def at(cls, path: str) -> "Segment":
        """The segment any one of whose files is ``path`` (``X.index`` -> segment ``X``)."""
        seg = cls.__new__(cls)
        seg.log_path = names.sibling(path, names.LOG)
        seg.base_offset = names.base_offset_from_name(path)
        seg.suffix = names.lifecycle_suffix(path)
        return seg

    @property
    def directory(self) -> str:
        return os.path.dirname(self.log_path)

    @property
    def name(self) -> str:
        """The .log file's name."""
        return os.path.basename(self.log_path)

    def file(self, kind: str) -> str:
        """The path of this segment's file of ``kind`` (names.LOG, INDEX, TIMEINDEX, TXNINDEX)."""
        return names.sibling(self.log_path, kind)

    @property
    def index_path(self) -> str:
        return self.file(names.INDEX)

    @property
    def time_index_path(self) -> str:
        return self.file(names.TIMEINDEX)

    @property
    def txn_index_path(self) -> str:
        return self.file(names.TXNINDEX)

    @api_errors('log_path')
    def size(self) -> int:
        """The .log file's size in bytes now."""
        return os.path.getsize(self.log_path)

    @api_errors('log_path')
    def open(self, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
             record_limit_factor: int = 1) -> "LogFile":
        """The .log file opened for reading (a LogFile; use it as a context manager).
        ``record_limit_factor``: a record may be this many times ``max_message_size``."""
        return LogFile(self.log_path, max_message_size, record_limit_factor)

    @api_errors('log_path')
    def offset_index(self) -> OffsetIndex:
        """The .index as read from disk ; OSError when it cannot be read."""
        return OffsetIndex(self.index_path, self.base_offset)

    @api_errors('log_path')
    def time_index(self) -> TimeIndex:
        """The .timeindex as read from disk."""
        return TimeIndex(self.time_index_path, self.base_offset)

    @api_errors('log_path')
    def txn_index(self) -> TransactionIndex:
        """The .txnindex as read from disk."""
        return TransactionIndex(self.txn_index_path, self.base_offset)

    # -- reads and renames (LogSegment) ---------------------------------------------------------

    def _base(self) -> int:
        if self.base_offset is None:
            raise ValueError("%s: the file name holds no base offset" % self.log_path)
        return self.base_offset

    @api_errors('log_path')
    def batches(self, start: int = 0, log: Optional[LogFile] = None,
                max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> Iterator[Batch]:
        """The batch chain of the .log from byte ``start`` (the FileLogInputStream walk every
        LogSegment read makes): the complete batches up to the first bytes that hold none, a
        batch whose CRC does not match included, as ``LogFile.batches`` yields them. Read
        through ``log`` when the .log is open already (the caller's LogFile of this segment),
        else through the .log opened for the walk and closed when it ends."""
        if log is not None:
            yield from log.batches(start)
            return
        with self.open(max_message_size) as own:
            yield from own.batches(start)

    @api_errors('log_path')
    def batch_at(self, position: int,
                 log: Optional[LogFile] = None) -> Optional[Union[Batch, InvalidBytes]]:
        """The entry (Batch or InvalidBytes) that starts at byte ``position`` of the .log, as
        the shared scan reads it there (FileRecords.batchesFrom(position)'s first), or None
        past the end. Read through ``log`` when the .log is open already."""
        if log is None:
            with self.open() as own:
                return self.batch_at(position, own)
        if position < 0 or position >= log.size:
            return None
        for item in log.entries(position):
            return item
        return None

    @api_errors('log_path')
    def next_offset(self, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> int:
        """LogSegment.readNextOffset: the offset after the last batch of the chain read from
        the last offset index entry's position on, when that holds a batch past the indexed
        offset; else of the chain read from the start (an index that cannot be read, or whose
        last entry leads nowhere); the base offset when the segment holds no batch."""
        base = self._base()
        start, offset = 0, base - 1
        try:
            entries = self.offset_index().entries
            if entries:
                offset, start = entries[-1]
        except (OSError, FileFormatError):
            start = 0
        with self.open(max_message_size) as log:
            for attempt in (start, 0):
                nxt = base
                for batch in self.batches(attempt, log):
                    nxt = batch.last_offset + 1
                if attempt == 0 or nxt > offset:
                    return nxt
        return base  # not reached

    @api_errors('log_path')
    def largest_timestamp(self, batches_max: Optional[int] = None) -> Tuple[int, str]:
        """(largest timestamp, where it comes from), as LogSegment.largestTimestamp (the
        maxTimestampSoFar a loaded segment starts from, else the .log's modification time):
        the time index's last entry ("time index": an index with entries that passes
        TimeIndex.sanityCheck once trimmed, its last timestamp not negative); failing that,
        the largest maxTimestamp of the batches ("batches": ``batches_max`` when the caller
        has walked them, -1 for none; else they are read here); failing that, the .log's
        modification time in milliseconds ("file mtime")."""
        if os.path.isfile(self.time_index_path):
            try:
                index = self.time_index()
                if index.count and not index.trimmed().sanity_problems():
                    ts = index.entries[-1][0]
                    if ts >= 0:
                        return ts, "time index"
            except (OSError, FileFormatError):
                pass
        if batches_max is None:
            batches_max = -1
            for batch in self.batches():
                batches_max = max(batches_max, batch.max_timestamp)
        if batches_max >= 0:
            return batches_max, "batches"
        return int(os.path.getmtime(self.log_path) * 1000), "file mtime"

    @api_errors('log_path')
    def overflows(self, batch: Optional[Batch] = None,
                  max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> bool:
        """LogSegment.hasOverflow: does the segment hold an offset that its 32-bit relative
        offsets cannot reach from its base offset (its next offset minus one, when it holds a
        batch: LogSegment.canConvertToRelativeOffset)? The broker splits such a segment
        (LocalLog.splitOverflowedSegment). With ``batch``: does that batch's last offset lie
        past that reach (LogSegment.recover's LogSegmentOffsetOverflowException)?"""
        base = self._base()
        if batch is not None:
            return batch.last_offset - base > MAX_RELATIVE_OFFSET
        nxt = self.next_offset(max_message_size)
        return nxt > base and nxt - 1 - base > MAX_RELATIVE_OFFSET

    @api_errors('log_path')
    def sanity_problems(self) -> List[str]:
        """LogSegment.sanityCheck: why the broker's load recovers the segment rather than
        take it as it is (empty: it is taken). No .index (NoSuchFileException: anything under
        its name counts as one, as a broker's File.exists on it), or a .txnindex (a regular
        file; none is no problem) that cannot be read or holds an entry whose last offset is
        below the base offset (TransactionIndex.sanityCheck's CorruptIndexException). The
        offset and time indexes are not checked: the broker skips their sanity checks there,
        the segments above the recovery point being recovered anyway."""
        problems = []
        if not os.path.lexists(self.index_path):
            problems.append("%s: no offset index" % self.index_path)
        if os.path.isfile(self.txn_index_path):
            try:
                problems.extend(self.txn_index().sanity_problems())
            except (OSError, FileFormatError) as e:
                problems.append(str(e))
        return problems

    def recover_scan(self, prev_last: Optional[int], state: "ProducerState",
                     interval: Optional[int] = None,
                     max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                     epochs: "Optional[LeaderEpochCache]" = None) -> "SegmentScan":
        """LogSegment.recover's reading of the segment: its batches validated one by one, the
        producer state and leader epochs they carry, the indexes rebuilt from them
        (``recovery_scan.scan_segment``; ``interval``: index.interval.bytes, its default when
        None). Raises ValueError when the file name holds no base offset."""
        from . import recovery_scan  # (imported here: it builds on this module)
        if interval is None:
            interval = recovery_scan.DEFAULT_INDEX_INTERVAL
        return recovery_scan.scan_segment(self, prev_last, state, interval, max_message_size,
                                          epochs)

    @staticmethod
    def rename_aside(directory: str, name: str, stem: str, suffix: str) -> str:
        """Rename the file ``name`` of ``directory`` to ``stem + suffix``, never over an
        existing file: when that name is taken (the log cleaner leaves the segment it replaced
        as ``X.log.deleted`` until the broker's delayed delete), to ``stem.<k>`` + ``suffix``
        with the first free k from 2. Returns the new name."""
        from .indexbuild import rename_noreplace  # (imported here: start-up time counts)
        src = os.path.join(directory, name)
        for k in range(1, 1 << 20):
            target = stem + suffix if k == 1 else "%s.%d%s" % (stem, k, suffix)
            try:
                rename_noreplace(src, os.path.join(directory, target))
                return target
            except FileExistsError:
                continue
        raise FileExistsError(errno.EEXIST, "no free %s name" % suffix, src)

    def change_suffix(self, suffix: str) -> List[str]:
        """LogSegment.changeFileSuffixes: each of the segment's files there now gets the
        lifecycle suffix ``suffix`` ('' for none) in place of its own (``rename_aside``: never
        over an existing file); its indexes first (anything under the name counts), the .log
        last and only when the name leads to a file, so that a segment whose renaming is
        interrupted still has its .log under its name and is found again (the broker renames
        the .log first: its deletion need not survive a restart half done, which ours must).
        Returns the names renamed, as they were; the Segment goes on naming them so."""
        done = []
        for kind in (names.INDEX, names.TIMEINDEX, names.TXNINDEX, names.LOG):
            path = self.file(kind)
            if os.path.exists(path) if kind == names.LOG else os.path.lexists(path):
                name = os.path.basename(path)
                self.rename_aside(self.directory, name,
                                  names.without_lifecycle_suffix(name), suffix)
                done.append(name)
        return done


    def __eq__(self, other: object) -> bool:
        return isinstance(other, Segment) and other.log_path == self.log_path

    def __hash__(self) -> int:
        return hash(self.log_path)

    def __repr__(self) -> str:
        return "Segment(%r)" % self.log_path


__all__ = ["Segment", "LogFile", "CorruptRecordError", "DEFAULT_MAX_MESSAGE_SIZE",
           "FileChangedError"]
