"""Which partitions a mutating command's PATH arguments stand for, grouped by log directory
(each log directory's .lock is taken once for all its partitions)."""

import os

import click

from ..log import files
from ..log.recover import QUARANTINE


def _is_partition(directory):
    # A folder holding recover's quarantine is a partition directory, even when nothing else
    # is left in it (recover set aside everything it held).
    return os.path.isdir(os.path.join(directory, QUARANTINE)) or any(
        files.file_kind(n) is not None and files.file_kind(n) != files.OFFSET_CHECKPOINT
        for n in os.listdir(directory) if os.path.isfile(os.path.join(directory, n)))


def partitions_of(path):
    """The partition directories a path stands for: a .log file's directory, a partition
    directory, or every partition directory of a log directory."""
    if os.path.isfile(path):
        if files.file_kind(path) != files.LOG:
            raise click.UsageError("%s: not a segment (.log) file or a directory" % path)
        return [os.path.dirname(os.path.abspath(path))]
    if not os.path.isdir(path):
        raise FileNotFoundError(2, "No such file or directory", path)
    if _is_partition(path):
        return [os.path.abspath(path)]
    found = [os.path.join(os.path.abspath(path), n) for n in sorted(os.listdir(path))
             if n != QUARANTINE and os.path.isdir(os.path.join(path, n))
             and _is_partition(os.path.join(path, n))]
    if not found:
        raise FileNotFoundError(2, "no partition directories in it", path)
    return found


def partitions_by_log_dir(paths):
    """({log dir: [partition dir, ...]}, whether every path could be read); errors are told
    on stderr as they are met."""
    groups = {}
    ok = True
    for path in paths:
        try:
            for partition in partitions_of(path):
                groups.setdefault(os.path.dirname(partition), []).append(partition)
        except OSError as e:
            click.echo("kafkalog: %s: %s" % (path, e.strerror or e), err=True)
            ok = False
    return {d: list(dict.fromkeys(ps)) for d, ps in groups.items()}, ok
