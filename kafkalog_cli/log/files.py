"""File kinds of a partition directory, and expanding directories to the files in them."""

import errno
import os

# Segment data files: the live .log and the names the broker gives it while deleting,
# cleaning or swapping it in.
LOG_SUFFIXES = (".log", ".log.deleted", ".log.cleaned", ".log.swap")


class NoSegmentsError(OSError):
    """A directory holds no segment files."""


def file_kind(name):
    """'log' for a segment data file, else None (a kind this version cannot read)."""
    for suffix in LOG_SUFFIXES:
        if name.endswith(suffix):
            return "log"
    return None


def base_offset_from_name(name):
    """The offset a segment file's name starts with (``00000000000000000042.log`` -> 42), or None."""
    stem = os.path.basename(name).split(".", 1)[0]
    if stem.isdigit() and stem.isascii():
        return int(stem)
    return None


def _segment_sort_key(name):
    base = base_offset_from_name(name)
    return (base is None, base if base is not None else 0, name)


def _partition_sort_key(name):
    topic, _, part = name.rpartition("-")
    if topic and part.isdigit():
        return (topic, int(part), name)
    return (name, -1, name)


def _segments_in(directory):
    names = [n for n in os.listdir(directory)
             if file_kind(n) and os.path.isfile(os.path.join(directory, n))]
    return [os.path.join(directory, n) for n in sorted(names, key=_segment_sort_key)]


def expand_path(path):
    """The segment files a path stands for, in dump order.

    A file stands for itself. A partition directory stands for its segments in offset order; a
    log directory (partition directories inside) for every partition's segments, partitions in
    topic then partition-number order.
    """
    if os.path.isdir(path):
        found = _segments_in(path)
        if found:
            return found
        subdirs = sorted((n for n in os.listdir(path) if os.path.isdir(os.path.join(path, n))),
                         key=_partition_sort_key)
        for sub in subdirs:
            found.extend(_segments_in(os.path.join(path, sub)))
        if not found:
            raise NoSegmentsError("%s: no segment files (*.log) in this directory or the "
                                  "partition directories in it" % path)
        return found
    if os.path.exists(path):
        return [path]
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
