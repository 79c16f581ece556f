"""Which partitions a mutating command's PATH arguments stand for, grouped by log directory
(each log directory's .lock is taken once for all its partitions)."""

import os
import stat

import click

from ..log import files
from ..log.recover import QUARANTINE


def _is_partition(directory):
    # A folder holding recover's quarantine is a partition directory, even when nothing else
    # is left in it (recover set aside everything it held).
    return os.path.isdir(os.path.join(directory, QUARANTINE)) or any(
        files.partition_file_kind(n) not in (None, files.OFFSET_CHECKPOINT)
        for n in os.listdir(directory))


def partitions_of(path, errors=None):
    """The partition directories a path stands for: a .log file's directory, a partition
    directory, or every partition directory of a log directory. A directory of a log directory
    that has a partition's name but cannot be read is added to ``errors`` as (path, OSError),
    and the others are still found."""
    if os.path.isfile(path):
        if files.file_kind(path) != files.LOG:
            raise click.UsageError("%s: not a segment (.log) file or a directory"
                                   % files.printable_name(path))
        return [os.path.dirname(os.path.abspath(path))]
    if not os.path.isdir(path):
        # its own error: no such file, a loop, no permission on the way, not a regular file
        files.open_regular(path).close()
        raise FileNotFoundError(2, "No such file or directory", path)
    if _is_partition(path):
        return [os.path.abspath(path)]
    found = []
    failed = False
    for n in sorted(os.listdir(path)):
        sub = os.path.join(os.path.abspath(path), n)
        if n == QUARANTINE or n.startswith("."):
            continue
        try:
            if not stat.S_ISDIR(os.stat(sub).st_mode) or not _is_partition(sub):
                continue
        except OSError as e:
            # a partition that cannot be read (no permission, a dangling symlink or a loop):
            # named, the others still handled; other names (lost+found) are none of ours
            if files.looks_like_partition(n):
                failed = True
                if errors is not None:
                    errors.append((sub, e))
            continue
        found.append(sub)
    if not found and not failed:
        raise FileNotFoundError(2, "no partition directories in it", path)
    return found


def partitions_by_log_dir(paths):
    """({log dir: [partition dir, ...]}, whether every path could be read); errors are told
    on stderr as they are met."""
    groups = {}
    ok = True
    for path in paths:
        errors = []
        try:
            for partition in partitions_of(path, errors):
                groups.setdefault(os.path.dirname(partition), []).append(partition)
        except OSError as e:
            errors.append((path, e))
        for where, e in errors:
            click.echo("kafkalog: " + files.os_error_text(where, e), err=True)
            ok = False
    return {d: list(dict.fromkeys(ps)) for d, ps in groups.items()}, ok
