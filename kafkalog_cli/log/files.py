"""File kinds of a partition and log directory, and expanding directories to the files in them."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from typing import BinaryIO, Collection, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from ..errors import InvalidDataError, KafkalogError
from . import names
from .names import (SEGMENT_KINDS, SNAPSHOT, base_offset_from_name, file_kind,
                    lifecycle_suffix, partition_file_kind)

# A path as the os functions take it.
StrPath = Union[str, "os.PathLike[str]"]


class NoSegmentsError(KafkalogError, OSError):
    """A directory holds no Kafka log files."""


class FileChangedError(KafkalogError, OSError):
    """The file changed while being read: another process truncated it (a broker's retention
    or recovery), or renamed another file over its name (a copy put in place, the log
    cleaner's swap). Unreadable input (exit 2); the message names the file."""


def file_changed(path: StrPath, why: str) -> FileChangedError:
    """A FileChangedError for ``path``: ``why`` says what was seen."""
    return FileChangedError(errno.EIO, why, os.fspath(path))


def check_unchanged(path: StrPath, fd: int, opened: os.stat_result) -> None:
    """Raise FileChangedError unless ``path`` still names the file open as ``fd`` (whose
    fstat at open was ``opened``) and that file holds at least the bytes it held then: a file
    renamed away or replaced by another (a new inode with other bytes), or truncated since, no
    longer agrees with what was read from it, nor with the files beside it read meanwhile."""
    try:
        now = os.stat(path)
    except OSError as e:
        raise file_changed(path, "replaced while being read (the name now: %s)"
                           % (e.strerror or e)) from None
    if (now.st_dev, now.st_ino) != (opened.st_dev, opened.st_ino):
        raise file_changed(path, "replaced while being read (another file now has its name: "
                           "%d bytes, inode %d; %d bytes, inode %d at open)"
                           % (now.st_size, now.st_ino, opened.st_size, opened.st_ino))
    size = os.fstat(fd).st_size
    if size < opened.st_size:
        raise file_changed(path, "changed size while being read (%d bytes at open, %d bytes "
                           "now)" % (opened.st_size, size))


class NotRegularFileError(KafkalogError, OSError):
    """A path that is not a regular file (a FIFO, a device, a directory, a socket, or a symlink
    to one): readers refuse it rather than block on it or read it without end."""


def open_regular(path: StrPath) -> BinaryIO:
    """Open ``path`` read-only as a binary file object, refusing anything but a regular file.

    The open itself does not block (O_NONBLOCK: a FIFO with no writer would otherwise hang in
    open()), and the check is made on the opened descriptor (fstat), so a symlink swapped
    between a check and the open cannot slip a device in.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFileError(errno.EINVAL, "not a regular file (%s)"
                                      % _mode_name(st.st_mode), path)
        if flags & getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


# -- opening files to write: never through a symlink ---------------------------------------------

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class SymlinkRefusedError(KafkalogError, OSError):
    """A file a command would write or lock is a symbolic link: it is never written through
    (a link could lead outside the log directory); the command stops, exit 2."""


def _refuse_symlink(path: StrPath, e: OSError) -> OSError:
    if e.errno == errno.ELOOP:
        return SymlinkRefusedError(errno.ELOOP, "is a symbolic link; kafkalog never writes "
                                   "through one", os.fspath(path))
    return e


def create_exclusive(path: StrPath, mode: int = 0o644) -> int:
    """A new file at ``path``, open for writing: O_CREAT|O_EXCL|O_NOFOLLOW, so neither a file
    already there nor a symlink planted at the name (dangling or not) is followed or written
    (FileExistsError instead)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode)


def create_replacing_stale(path: StrPath, mode: int = 0o644) -> int:
    """``create_exclusive`` at one of our own temporary names, after removing what an
    interrupted run left there: a stale temporary file, or a symlink planted at the name (the
    link itself is removed, never followed)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    return create_exclusive(path, mode)


@contextlib.contextmanager
def writing_temporary(path: StrPath) -> Iterator[BinaryIO]:
    """Our own temporary file ``path`` made anew (``create_replacing_stale``) and open to
    write, flushed and synced to disk (fsync) when the block ends; when the block or the flush
    fails (a full disk), the file is removed: nothing of ours is left behind. The caller
    renames it into place, as Kafka's CheckpointFile does with its ``.tmp`` file
    (Utils.atomicMoveWithFallback)."""
    fd = create_replacing_stale(path)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        try:
            os.unlink(path)
        except OSError:
            pass
        raise


def open_in_place(path: StrPath, flags: int) -> int:
    """Open the existing file ``path`` to change it in place (append, truncate, rewrite),
    refusing a symlink (SymlinkRefusedError): O_NOFOLLOW, no O_CREAT."""
    try:
        return os.open(path, flags | _NOFOLLOW | _CLOEXEC)
    except OSError as e:
        raise _refuse_symlink(path, e) from None


def open_for_append(path: StrPath) -> int:
    """``path`` open to append to: the existing file (never through a symlink:
    SymlinkRefusedError), or a new one made with O_CREAT|O_EXCL|O_NOFOLLOW."""
    try:
        return open_in_place(path, os.O_WRONLY | os.O_APPEND)
    except FileNotFoundError:
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | _NOFOLLOW
                       | _CLOEXEC, 0o644)


def open_lock_file(path: StrPath) -> int:
    """Open (creating it if missing) a lock file to take an fcntl lock on, refusing a symlink
    (SymlinkRefusedError): a dangling link would otherwise make us create a file wherever it
    points."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | _NOFOLLOW | _CLOEXEC, 0o644)
    except OSError as e:
        raise _refuse_symlink(path, e) from None


def printable_name(name: Union[str, bytes]) -> str:
    """A file name (str or bytes) safe to print on one line in any encoding: bytes that are not
    UTF-8 and control characters are shown as backslash escapes (``\\xff``), never raised."""
    if isinstance(name, str) and name.isprintable():
        return name  # the common case (a lone surrogate from a non-UTF-8 byte is not printable)
    raw = os.fsencode(name)
    text = raw.decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() or c == " " else
                   ("\\x%02x" % ord(c) if ord(c) < 0x100 else "\\u%04x" % ord(c)
                    if ord(c) < 0x10000 else "\\U%08x" % ord(c)) for c in text)


def os_error_text(path: Union[str, bytes], error: OSError) -> str:
    """``<path>: <why>`` for an OSError met at ``path``: the name printable, the reason short."""
    return "%s: %s" % (printable_name(path), error.strerror or error)


def _mode_name(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "mode %o" % stat.S_IFMT(mode)


# The largest index, transaction index or producer snapshot read: Kafka maps an index with an
# int length and reads a snapshot into one byte array, so none it writes or reads is larger.
MAX_AUX_BYTES = 2 ** 31 - 1


@contextlib.contextmanager
def open_sized(path: StrPath, limit: int = MAX_AUX_BYTES) -> Iterator[Tuple[BinaryIO, int]]:
    """The regular file ``path`` open (open_regular) with its size at open; one larger than
    ``limit`` is refused before anything is read (FileFormatError)."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise FileFormatError("%s: %d bytes, more than the %d any file of this kind holds"
                                  % (path, size, limit))
        yield f, size


def read_sized(path: StrPath, limit: int = MAX_AUX_BYTES) -> bytes:
    """The whole contents of the regular file ``path``, up to the size it has when opened
    (a file that grows meanwhile is read as it was; open_regular refuses devices and FIFOs,
    which have no size to stop at); one truncated while read is a FileChangedError. A file
    larger than ``limit`` is refused before it is read (FileFormatError); one that does not
    fit in the memory left is an OSError (ENOMEM), not a MemoryError."""
    with open_sized(path, limit) as (f, size):
        try:
            data = f.read(size)
        except MemoryError:
            raise OSError(errno.ENOMEM, "too large to read into the memory available (%d bytes)"
                          % size, path) from None
        if len(data) < size:
            # truncated between the fstat and the read: what was read is no file's contents
            raise file_changed(path, "changed size while being read (%d bytes at open, a "
                               "short read of %d)" % (size, len(data)))
        return data


def pread_exact(fd: int, position: int, size: int, path: StrPath) -> bytes:
    """``size`` bytes of the open file ``fd`` from ``position`` (pread, in pieces of at most
    16 MiB); a file that ends before them changed while being read (FileChangedError)."""
    parts = []
    done = 0
    while done < size:
        chunk = os.pread(fd, min(size - done, 16 << 20), position + done)
        if not chunk:
            raise file_changed(path, "changed size while being read (a short read at byte %d)"
                               % (position + done))
        parts.append(chunk)
        done += len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


class FileFormatError(InvalidDataError, ValueError):
    """A file whose contents are not what its kind requires (a corrupt snapshot, a malformed
    checkpoint...); the message says what and where."""


class ActiveSegments:
    """Which segment is active, for the many segments of one run: each directory is listed
    once (a partition may hold thousands of segments)."""

    def __init__(self) -> None:
        # directory -> base offset of its last segment, None (no segment), or False (unlisted)
        self._last: Dict[str, Union[int, None, bool]] = {}

    def __call__(self, log_path: str) -> bool:
        directory = os.path.dirname(log_path) or "."
        base = base_offset_from_name(log_path)
        if base is None:
            return False
        if directory not in self._last:
            self._last[directory] = self._last_base(directory)
        last = self._last[directory]
        if last is False:
            return False
        return last is None or base == last

    @staticmethod
    def _last_base(directory: str) -> Union[int, None, bool]:
        try:
            bases = names.live_log_bases(os.listdir(directory))
        except OSError:
            return False
        return bases[-1] if bases else None


def _file_order(name: str) -> tuple:
    """Segments by base offset (each: log, index, timeindex, txnindex, lifecycle suffix last),
    then producer snapshots by offset, then KRaft snapshots by end offset and epoch, then the
    named files (bootstrap.checkpoint among them), then unknown files."""
    kind = partition_file_kind(name)
    if kind in SEGMENT_KINDS:
        return (0, base_offset_from_name(name), SEGMENT_KINDS.index(kind), lifecycle_suffix(name),
                name)
    if kind == SNAPSHOT:
        return (1, base_offset_from_name(name), 0, lifecycle_suffix(name), name)
    snapshot_id = names.kraft_snapshot_id(name)
    if snapshot_id is not None:
        return (2, snapshot_id[0], snapshot_id[1], "", name)
    if kind is not None:
        return (3, 0, 0, "", name)
    return (4, 0, 0, "", name)


def _is_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


def _files_in(directory: str, entries: Iterable[str]) -> List[str]:
    """The entries of ``directory`` worth naming, in dump order: every entry with a Kafka
    file name whatever it is (a reader refuses what is not a regular file, with an error
    naming it), and every other entry but directories (named as unknown files). Hidden files
    (kafkalog's own lock files, the broker's .lock) are nobody's business here."""
    keep = [n for n in entries if not n.startswith(".") and (
        partition_file_kind(n) is not None or not _is_dir(os.path.join(directory, n)))]
    return [os.path.join(directory, n) for n in sorted(keep, key=_file_order)]


class Found:
    """One file a path stands for: ``kind`` (None: unknown), ``explicit`` (named on the
    command line, so judged by its suffix, rather than met in a directory), or ``error``, an
    OSError for a partition directory that could not be read (``path`` is that directory)."""

    __slots__ = ("path", "kind", "explicit", "error")

    def __init__(self, path: str, kind: Optional[str], explicit: bool = False,
                 error: Optional[OSError] = None) -> None:
        self.path = path
        self.kind = kind
        self.explicit = explicit
        self.error = error

    def __repr__(self) -> str:
        return "Found(%r, %r, explicit=%r, error=%r)" % (self.path, self.kind, self.explicit,
                                                        self.error)


def expand(path: str, kinds: Optional[Collection[str]] = None) -> List[Found]:
    """The files a path stands for, in dump order, as ``Found``, unknown kinds included
    (callers name them).

    A file stands for itself, its kind taken from its suffix. A partition directory stands for
    its files: each segment's files in offset order, then producer snapshots, then KRaft
    snapshots (the metadata log's ``<offset>-<epoch>.checkpoint``) in offset order, then
    leader-epoch-checkpoint and partition.metadata, kinds by Kafka's naming rules
    (``partition_file_kind``). A log directory stands for its own files (the offset checkpoints)
    and then every partition directory in it, in topic and partition-number order; a partition
    directory of it that cannot be read is one ``Found`` with ``error`` set, and the others
    follow. ``kinds``, when given, keeps only files of those kinds (and drops unknown ones).

    Raises OSError when ``path`` itself cannot be read, NoSegmentsError when it holds no Kafka
    file and no partition that could not be read.
    """
    if not os.path.isdir(path):
        if os.path.lexists(path) and not os.path.exists(path):
            os.stat(path)  # a dangling symlink or a loop: raise its own error
        if os.path.exists(path):
            return [Found(path, file_kind(path), explicit=True)]
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    entries = os.listdir(path)
    if names.marks_partition(entries):
        found = [Found(p, partition_file_kind(p)) for p in _files_in(path, entries)]
    else:
        own, subdirs, failed = [], [], {}
        for n in entries:
            if n.startswith("."):
                continue
            if partition_file_kind(n) is not None:
                own.append(n)  # a checkpoint of the log directory, whatever it is
                continue
            try:
                is_dir = stat.S_ISDIR(os.stat(os.path.join(path, n)).st_mode)
            except OSError as e:
                # A dangling symlink or a loop: named as an unreadable partition when it has a
                # partition's name, else as an unknown file.
                if names.looks_like_partition(n):
                    failed[n] = e
                    subdirs.append(n)
                else:
                    own.append(n)
                continue
            (subdirs if is_dir else own).append(n)
        found = [Found(p, partition_file_kind(p)) for p in _files_in(path, own)]
        for sub in sorted(subdirs, key=names.partition_sort_key):
            subpath = os.path.join(path, sub)
            try:
                if sub in failed:
                    raise failed[sub]
                subnames = os.listdir(subpath)
            except OSError as e:
                # A partition directory that cannot be read is named; any other directory
                # (lost+found at a mount's root) is none of ours.
                if names.looks_like_partition(sub):
                    found.append(Found(subpath, None, error=e))
                continue
            if names.marks_partition(subnames):
                found.extend(Found(p, partition_file_kind(p)) for p in _files_in(subpath, subnames))
    if kinds is not None:
        found = [f for f in found if f.error is not None or f.kind in kinds]
    if not any(f.kind or f.error for f in found):
        raise NoSegmentsError("%s: no Kafka log files in this directory or the partition "
                              "directories in it" % printable_name(path))
    return found


def expand_path(path: str, kinds: Optional[Collection[str]] = None) -> List[str]:
    """The paths ``expand`` finds (raising the error of the first partition directory that
    could not be read)."""
    found = expand(path, kinds)
    for f in found:
        if f.error is not None:
            raise f.error
    return [f.path for f in found]
