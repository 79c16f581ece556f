"""Building a segment's .index, .timeindex and .txnindex exactly as a broker's recovery does
(LogSegment.recover, with ProducerStateManager's list of aborted transactions), and writing files
so that a crash never leaves half a file.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from . import names
from .files import writing_temporary
from .index import OffsetIndex, TimeIndex
from .txnindex import ENTRY as TXN_ENTRY

OFFSET_ENTRY = OffsetIndex.entry  # the files' layouts
TIME_ENTRY = TimeIndex.entry
_INT32 = 1 << 31

DEFAULT_INDEX_INTERVAL = 4096  # index.interval.bytes

# An aborted transaction as the .txnindex lists it (AbortedTxn): producer id, first offset,
# last offset, last stable offset.
AbortedEntry = Tuple[int, int, int, int]


class IndexBuilder:
    """Feed the valid batches of a segment in order with ``add``; then ``offset_index_bytes``
    and ``time_index_bytes`` are the files the broker would write (trimmed to their entries).

    The entries are kept packed as the files hold them (``offset_index``, ``time_index``:
    bytearrays that recovery's C loop extends too, ``recovery_scan.recover_run_python``);
    an entry that does not fit the layout (a position past 31 bits) and every one after it wait
    in ``offset_overflow``/``time_overflow``, so that the ``*_bytes`` methods raise
    struct.error for it as packing them all at the end would."""

    def __init__(self, base_offset: int, interval: int = DEFAULT_INDEX_INTERVAL) -> None:
        self.base_offset = base_offset
        self.interval = interval
        self.offset_index = bytearray()  # (relative offset, position) entries, packed
        self.time_index = bytearray()    # (timestamp, relative offset) entries, packed
        self.offset_overflow: List[Tuple[int, int]] = []  # (absolute offset, position)
        self.time_overflow: List[Tuple[int, int]] = []    # (timestamp, absolute offset)
        self.valid_bytes = 0
        self.last_index_entry = 0
        self.max_ts = -1            # max timestamp so far, and the last offset of its batch
        self.max_ts_offset = -1
        self.last_time_ts = -1      # the timestamp of the last time index entry (-1: none)

    def add(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        """The next valid batch: at ``position``, ``size`` bytes (LogSegment.recover indexes
        a batch once index.interval.bytes have passed since the last entry)."""
        if max_timestamp > self.max_ts:
            self.max_ts, self.max_ts_offset = max_timestamp, last_offset
        if self.valid_bytes - self.last_index_entry > self.interval:
            self._put(OFFSET_ENTRY, self.offset_index, self.offset_overflow,
                      last_offset - self.base_offset, self.valid_bytes, (last_offset,
                                                                        self.valid_bytes))
            self._maybe_time_entry()
            self.last_index_entry = self.valid_bytes
        self.valid_bytes += size

    def fits(self, last_offset: int, max_timestamp: int) -> bool:
        """Would ``add`` of the batch ending at ``last_offset`` (within 32 bits of the base
        offset) with ``max_timestamp`` pack each entry it makes (when the entries before it
        did)? (recover_run leaves any other batch to the general path.)"""
        if self.valid_bytes - self.last_index_entry <= self.interval:
            return True  # no entry
        if self.offset_overflow or self.time_overflow or not -_INT32 <= self.valid_bytes < _INT32:
            return False
        max_ts, max_ts_offset = self.max_ts, self.max_ts_offset
        if max_timestamp > max_ts:
            max_ts, max_ts_offset = max_timestamp, last_offset
        return (max_ts <= self.last_time_ts
                or -_INT32 <= max_ts_offset - self.base_offset < _INT32)

    def _put(self, layout: struct.Struct, packed: bytearray, overflow: List[Tuple[int, int]],
             a: int, b: int, entry: Tuple[int, int]) -> None:
        if not overflow:
            try:
                packed += layout.pack(a, b)
                return
            except struct.error:
                pass
        overflow.append(entry)

    def _maybe_time_entry(self) -> None:
        if self.max_ts > self.last_time_ts:
            self._put(TIME_ENTRY, self.time_index, self.time_overflow, self.max_ts,
                      self.max_ts_offset - self.base_offset, (self.max_ts, self.max_ts_offset))
            self.last_time_ts = self.max_ts

    def finish(self) -> "IndexBuilder":
        """The final time index entry, appended at the end of recovery when it is newer."""
        self._maybe_time_entry()
        return self

    @property
    def offset_entries(self) -> List[Tuple[int, int]]:
        """The offset index entries: (absolute offset, position)."""
        base = self.base_offset
        return [(o + base, p) for o, p in OFFSET_ENTRY.iter_unpack(self.offset_index)
                ] + self.offset_overflow

    @property
    def time_entries(self) -> List[Tuple[int, int]]:
        """The time index entries: (timestamp, absolute offset)."""
        base = self.base_offset
        return [(t, o + base) for t, o in TIME_ENTRY.iter_unpack(self.time_index)
                ] + self.time_overflow

    @property
    def offset_count(self) -> int:
        return len(self.offset_index) // OFFSET_ENTRY.size + len(self.offset_overflow)

    @property
    def time_count(self) -> int:
        return len(self.time_index) // TIME_ENTRY.size + len(self.time_overflow)

    def offset_index_bytes(self) -> bytes:
        base = self.base_offset
        return bytes(self.offset_index) + b"".join(OFFSET_ENTRY.pack(o - base, p)
                                                   for o, p in self.offset_overflow)

    def time_index_bytes(self) -> bytes:
        base = self.base_offset
        return bytes(self.time_index) + b"".join(TIME_ENTRY.pack(t, o - base)
                                                 for t, o in self.time_overflow)


def txn_index_bytes(aborted: Iterable[AbortedEntry]) -> bytes:
    """.txnindex bytes of AbortedTxn-like tuples (producer id, first, last, last stable offset)."""
    return b"".join(TXN_ENTRY.pack(0, pid, first, last, lso) for pid, first, last, lso in aborted)


class TxnTracker:
    """Open transactions along a partition, to list the aborted ones as the broker does: one
    entry per ABORT marker of a producer with an open transaction, whose last stable offset is
    the first offset of the earliest other open transaction, else the marker's offset + 1."""

    def __init__(self) -> None:
        self.open: Dict[int, int] = {}  # producer id -> first offset of its open transaction

    def data(self, producer_id: int, first_offset: int) -> None:
        """A transactional data batch of ``producer_id`` at ``first_offset``."""
        self.open.setdefault(producer_id, first_offset)

    def marker(self, producer_id: int, offset: int, aborted: bool) -> Optional[AbortedEntry]:
        """A COMMIT/ABORT marker; returns the aborted transaction's entry, or None."""
        first = self.open.pop(producer_id, None)
        if not aborted or first is None:
            return None
        return (producer_id, first, offset, min(self.open.values(), default=offset + 1))


def write_atomically(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file that is flushed and renamed into
    place, then flush the directory: after a crash the file is the old one or the new one.
    An existing ``path`` is replaced: for files whose old contents are not worth keeping (a
    checkpoint being rewritten, our own manifest growing)."""
    tmp = _write_tmp(path, data)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path) or ".")


def write_new(path: str, data: bytes) -> None:
    """Like ``write_atomically``, for a file that must not exist yet: an existing ``path`` is
    never replaced (FileExistsError, and the temporary file is removed)."""
    tmp = _write_tmp(path, data)
    try:
        rename_noreplace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    fsync_dir(os.path.dirname(path) or ".")


def _write_tmp(path: str, data: bytes) -> str:
    # Our own name: what an interrupted write left there (a file, or a symlink planted at the
    # name) is removed and a new file created (O_EXCL|O_NOFOLLOW), never followed.
    # A write that fails (a full disk) leaves nothing of ours behind.
    tmp = path + names.TMP_SUFFIX
    with writing_temporary(tmp) as f:
        f.write(data)
    return tmp


def fsync_dir(directory: str) -> None:
    """Flush a directory: the renames, creations and removals in it made durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- renaming without replacing --------------------------------------------------------------------

_AT_FDCWD = -100
_RENAME_NOREPLACE = 1


def _load_renameat2() -> Optional[Callable[..., int]]:
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    fn.restype = ctypes.c_int
    return fn


_renameat2 = _load_renameat2()
# errno values meaning "this primitive is not available here": try the next one
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP}


def rename_noreplace(src: str, dst: str) -> str:
    """Rename ``src`` to ``dst``, never replacing an existing ``dst`` (FileExistsError instead).

    Atomic where the system offers it: Linux's renameat2(RENAME_NOREPLACE) (glibc 2.28+, most
    local file systems); else a hard link to the new name (which fails if the name exists) and
    the removal of the old one (a crash between the two leaves the file under both names,
    nothing lost); else, on a file system without hard links, a check for the new name and
    then a rename, which is safe against other kafkalog commands because every caller holds
    the log directory's lock. Returns which way was used ("renameat2", "link", "check").
    """
    if _renameat2 is not None:
        if _renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst),
                      _RENAME_NOREPLACE) == 0:
            return "renameat2"
        err = ctypes.get_errno()
        if err not in _UNSUPPORTED:
            raise OSError(err, os.strerror(err), src, None, dst) if err != errno.EEXIST else \
                FileExistsError(err, os.strerror(err), dst)
    try:
        os.link(src, dst, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError as e:
        if e.errno not in _UNSUPPORTED | {errno.EMLINK}:
            raise
        if os.path.lexists(dst):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), dst) from None
        os.rename(src, dst)
        return "check"
    os.unlink(src)
    return "link"
