"""File kinds of a partition and log directory, and expanding directories to the files in them."""

import errno
import os
import stat

# Suffixes the broker appends to a segment's files while deleting, cleaning or swapping them.
LIFECYCLE_SUFFIXES = (".deleted", ".cleaned", ".swap")

LOG, INDEX, TIMEINDEX, TXNINDEX, SNAPSHOT = "log", "index", "timeindex", "txnindex", "snapshot"
OFFSET_CHECKPOINT, LEADER_EPOCHS, PARTITION_METADATA = (
    "offset-checkpoint", "leader-epoch-checkpoint", "partition-metadata")
SEGMENT_KINDS = (LOG, INDEX, TIMEINDEX, TXNINDEX)  # in the order a segment's files are shown

OFFSET_CHECKPOINT_NAMES = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                           "replication-offset-checkpoint", "cleaner-offset-checkpoint")
_NAMED_KINDS = {"leader-epoch-checkpoint": LEADER_EPOCHS, "partition.metadata": PARTITION_METADATA}
_NAMED_KINDS.update((n, OFFSET_CHECKPOINT) for n in OFFSET_CHECKPOINT_NAMES)


class NoSegmentsError(OSError):
    """A directory holds no Kafka log files."""


class NotRegularFileError(OSError):
    """A path that is not a regular file (a FIFO, a device, a directory, a socket, or a symlink
    to one): readers refuse it rather than block on it or read it without end."""


def open_regular(path):
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


def printable_name(name):
    """A file name (str or bytes) safe to print on one line in any encoding: bytes that are not
    UTF-8 and control characters are shown as backslash escapes (``\\xff``), never raised."""
    raw = os.fsencode(name)
    text = raw.decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() or c == " " else
                   ("\\x%02x" % ord(c) if ord(c) < 0x100 else "\\u%04x" % ord(c)
                    if ord(c) < 0x10000 else "\\U%08x" % ord(c)) for c in text)


def _mode_name(mode):
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "mode %o" % stat.S_IFMT(mode)


def read_regular(path, limit):
    """The whole contents of the regular file ``path``, refusing one larger than ``limit``
    bytes (auxiliary files are small; /dev/zero and friends are refused by open_regular)."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise FileFormatError("%s: %d bytes, more than the %d this kind of file may hold"
                                  % (path, size, limit))
        data = f.read(limit + 1)
    if len(data) > limit:
        raise FileFormatError("%s: grew past %d bytes while being read" % (path, limit))
    return data


class FileFormatError(ValueError):
    """A file whose contents are not what its kind requires (a corrupt snapshot, a malformed
    checkpoint...); the message says what and where."""


def lifecycle_suffix(name):
    """'.deleted', '.cleaned', '.swap' when the name ends with one, else ''."""
    for suffix in LIFECYCLE_SUFFIXES:
        if name.endswith(suffix):
            return suffix
    return ""


def file_kind(name):
    """The kind of a file by its name (one of the constants above), or None when unknown."""
    name = os.path.basename(name)
    if name in _NAMED_KINDS:
        return _NAMED_KINDS[name]
    stem, dot, ext = name[:len(name) - len(lifecycle_suffix(name))].rpartition(".")
    if dot and stem and ext in (LOG, INDEX, TIMEINDEX, TXNINDEX, SNAPSHOT):
        return ext
    return None


def base_offset_from_name(name):
    """The offset a segment file's name starts with (``00000000000000000042.log`` -> 42), or None."""
    stem = os.path.basename(name).split(".", 1)[0]
    if stem.isdigit() and stem.isascii():
        return int(stem)
    return None


def segment_file(path, kind):
    """The file of kind ``kind`` of the same segment as ``path`` (``X.index`` -> ``X.log``),
    with the same lifecycle suffix (``X.index.swap`` -> ``X.log.swap``)."""
    directory, name = os.path.split(path)
    return os.path.join(directory, "%s.%s%s" % (name.split(".", 1)[0], kind, lifecycle_suffix(name)))


def is_active_segment(log_path):
    """Is this the partition's last segment, the one a broker keeps open and pre-allocated?"""
    directory = os.path.dirname(log_path) or "."
    base = base_offset_from_name(log_path)
    if base is None or not os.path.isdir(directory):
        return False
    bases = [base_offset_from_name(n) for n in os.listdir(directory)
             if file_kind(n) == LOG and not lifecycle_suffix(n)]
    return base == max((b for b in bases if b is not None), default=base)


def _file_order(name):
    """Segments by base offset (each: log, index, timeindex, txnindex, lifecycle suffix last),
    then producer snapshots by offset, then the named files, then unknown files."""
    kind = file_kind(name)
    base = base_offset_from_name(name)
    if kind in SEGMENT_KINDS:
        return (0, base, SEGMENT_KINDS.index(kind), lifecycle_suffix(name), name)
    if kind == SNAPSHOT:
        return (1, base, 0, lifecycle_suffix(name), name)
    if kind is not None:
        return (2, 0, 0, "", name)
    return (3, 0, 0, "", name)


def _partition_sort_key(name):
    topic, _, part = name.rpartition("-")
    if topic and part.isdigit():
        return (topic, int(part), name)
    return (name, -1, name)


def _is_partition_dir(directory):
    return any(file_kind(n) in SEGMENT_KINDS + (SNAPSHOT, LEADER_EPOCHS, PARTITION_METADATA)
               for n in os.listdir(directory))


def _files_in(directory):
    # hidden files (kafkalog's own lock files) are nobody's business here
    names = [n for n in os.listdir(directory)
             if not n.startswith(".") and os.path.isfile(os.path.join(directory, n))]
    return [os.path.join(directory, n) for n in sorted(names, key=_file_order)]


def expand_path(path, kinds=None):
    """The files a path stands for, in dump order, unknown kinds included (callers name them).

    A file stands for itself. A partition directory stands for its files: each segment's files
    in offset order, then producer snapshots, then leader-epoch-checkpoint and
    partition.metadata. A log directory stands for its own files (the offset checkpoints) and
    then every partition directory in it, in topic and partition-number order. ``kinds``, when
    given, keeps only files of those kinds (and drops unknown ones).
    """
    if os.path.isdir(path):
        if _is_partition_dir(path):
            found = _files_in(path)
        else:
            found = _files_in(path)
            subdirs = sorted((n for n in os.listdir(path) if os.path.isdir(os.path.join(path, n))),
                             key=_partition_sort_key)
            for sub in subdirs:
                subpath = os.path.join(path, sub)
                if _is_partition_dir(subpath):
                    found.extend(_files_in(subpath))
        if kinds is not None:
            found = [f for f in found if file_kind(f) in kinds]
        if not any(file_kind(f) for f in found):
            raise NoSegmentsError("%s: no Kafka log files in this directory or the partition "
                                  "directories in it" % path)
        return found
    if os.path.exists(path):
        return [path]
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
