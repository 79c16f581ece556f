"""A log directory (one of a broker's log.dirs, Kafka's LogManager view of it): its partition
directories and its offset checkpoint files, and which partitions a path given by a user
stands for."""

from __future__ import annotations

import errno
import os
import stat
from typing import TYPE_CHECKING, Collection, Dict, List, Optional, Sequence, Set, Tuple, Union

from ..errors import UsageError, api_errors
from . import checkpoints, names
from .files import FileFormatError, open_regular, printable_name, read_sized
from .indexbuild import fsync_dir, write_new
from .lock import LogDirLock
from .partition import Partition, is_partition_dir
from .segment import DEFAULT_MAX_MESSAGE_SIZE

if TYPE_CHECKING:
    from .describe import Description
    from .recover_run import LogDirRecovery
    from .retain import Policy, RetentionPlan


Key = Tuple[str, int]
Entries = Dict[Key, int]


class LogDir:
    """The log directory ``path``. Creating one reads nothing. Its offset checkpoints are
    read once each, an entry at a time, keeping the entries of the partitions it holds
    (``partitions()``, ``partition()``, ``holding()``: a checkpoint of a million partitions
    costs only theirs), and kept while the file stays the one read (its inode, size and
    modification time: the broker and kafkalog replace a checkpoint by renaming a new file
    over it); asked for a partition it did not hold, it reads the file again."""

    __slots__ = ("path", "_checkpoints", "_keys")

    def __init__(self, path: str) -> None:
        self.path = path
        # name: (the file's identity when read, the keys kept (None: all), its entries or
        # the error reading it raised)
        self._checkpoints: Dict[str, Tuple[Tuple[int, int, int], Optional[Set[Key]],
                                           Union[Entries, OSError, FileFormatError]]] = {}
        self._keys: Set[Key] = set()  # the partitions it holds, whose entries it keeps

    @api_errors('path')
    def partitions(self) -> List[Partition]:
        """Its partition directories, in topic and partition-number order. A directory that
        cannot be listed is left out."""
        found = partitions_of(self.path)
        return [self.holding(p) for p in sorted(found, key=names.partition_sort_key)]

    @api_errors('path')
    def partition(self, topic: str, number: int) -> Partition:
        """The partition ``<topic>-<number>`` of this log directory (it may not exist)."""
        return self.holding(os.path.join(self.path, "%s-%d" % (topic, number)))

    @api_errors('path')
    def holding(self, directory: str) -> Partition:
        """The partition of ``directory`` (in this log directory), its checkpoint entries
        read with those of the others this LogDir holds."""
        topic, number = names.topic_partition(directory)
        if topic is not None and number is not None:
            self._keys.add((topic, number))
        return Partition(directory, self)

    @api_errors('path')
    def offset_checkpoint(self, name: str, keys: Optional[Collection[Key]] = None
                          ) -> Entries:
        """{(topic, partition): offset} of the offset checkpoint ``name`` (one of
        names.OFFSET_CHECKPOINT_NAMES; of two lines for one partition the last, as the
        broker's OffsetCheckpointFile.read keeps it), only of ``keys`` when given (the file is
        read an entry at a time: a large one costs only the entries kept), or {} when the file
        is absent. A file that cannot be read raises OSError or FileFormatError."""
        entries = self._entries(name, False, None if keys is None else set(keys))
        if keys is None:
            return dict(entries)
        return {key: entries[key] for key in keys if key in entries}

    @api_errors('path')
    def checkpointed(self, name: str, topic: str, number: int) -> Optional[int]:
        """The entry of partition ``topic``-``number`` in the offset checkpoint ``name``, or
        None when there is no such file (or it is no regular file) or no entry. A file that
        cannot be read raises OSError or FileFormatError."""
        return self._entries(name, True, {(topic, number)}).get((topic, number))

    def _entries(self, name: str, regular_only: bool, wanted: Optional[Set[Key]]) -> Entries:
        path = os.path.join(self.path, name)
        try:
            st = os.stat(path)
        except OSError:
            return {}
        if regular_only and not stat.S_ISREG(st.st_mode):
            return {}
        identity = (st.st_ino, st.st_size, st.st_mtime_ns)
        held = self._checkpoints.get(name)
        if held is None or held[0] != identity or (
                held[1] is not None and (wanted is None or not wanted <= held[1])):
            keys = None if wanted is None else wanted | self._keys
            try:
                read: Union[Entries, OSError, FileFormatError] = \
                    checkpoints.offset_checkpoint_entries(path, keys)
            except (OSError, FileFormatError) as e:
                read = e
            held = self._checkpoints[name] = (identity, keys, read)
        if isinstance(held[2], (OSError, FileFormatError)):
            raise held[2]
        return held[2]

    def lock(self, create: bool = True) -> LogDirLock:
        return LogDirLock(self.path, create)

    # -- the operations over its partitions -----------------------------------------------------

    @api_errors('path')
    def describe(self, check_crc: bool = False,
                 max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> "Description":
        """Every partition described (Partition.describe), with the checkpoint files' findings
        and the partitions that could not be read (``errors``)."""
        from .describe import describe
        return describe(self.path, max_message_size, check_crc)

    @api_errors('path')
    def recover(self, partitions: Optional[Sequence[Partition]] = None, dry_run: bool = False,
                full: bool = False, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
                ) -> "LogDirRecovery":
        """The broker's recovery of ``partitions`` (default: every one) as LogManager loads
        them, under the lock: ``results`` holds each partition's PartitionResult (its plan,
        carried out unless ``dry_run``, or the error that stopped it); the recovery points
        and the clean-shutdown marker are in the other fields. Raises LockHeld when a broker
        holds the lock (not in a dry run)."""
        from .recover_run import LogDirRecovery
        chosen = self.partitions() if partitions is None else partitions
        recovery = LogDirRecovery(self.path, [p.directory for p in chosen],
                                  max_message_size=max_message_size, dry_run=dry_run, full=full)
        return recovery.run_all()

    @api_errors('path')
    def retain(self, policy: "Policy", partitions: Optional[Sequence[Partition]] = None,
               dry_run: bool = False, delete_delay_ms: int = 60000) -> "List[RetentionPlan]":
        """Retention by ``policy`` of ``partitions`` (default: every one), under the lock:
        each partition's plan, carried out unless ``dry_run``."""
        from .retain import LogDirRetention
        chosen = self.partitions() if partitions is None else partitions
        return list(LogDirRetention(self.path, [p.directory for p in chosen], policy, dry_run,
                                    delete_delay_ms).run())

    def __repr__(self) -> str:
        return "LogDir(%r)" % self.path


def partitions_of(path: str, errors: Optional[List[Tuple[str, OSError]]] = None) -> List[str]:
    """The partition directories (absolute paths) a path stands for: a .log file's directory, a
    partition directory, or every partition directory of a log directory in topic and
    partition order. A directory of a log directory that has a partition's name but cannot be
    read is added to ``errors`` as (path, OSError), and the others are still found.

    Raises UsageError for a file that is not a segment's .log, OSError for a path that cannot
    be read or holds no partition."""
    if os.path.isfile(path):
        if names.file_kind(path) != names.LOG:
            raise UsageError("%s: not a segment (.log) file or a directory" % printable_name(path))
        return [os.path.dirname(os.path.abspath(path))]
    if not os.path.isdir(path):
        # its own error: no such file, a loop, no permission on the way, not a regular file
        open_regular(path).close()
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    if is_partition_dir(path):
        return [os.path.abspath(path)]
    found = []
    failed = False
    for n in sorted(os.listdir(path)):
        sub = os.path.join(os.path.abspath(path), n)
        if n == names.QUARANTINE or n.startswith("."):
            continue
        try:
            if not stat.S_ISDIR(os.stat(sub).st_mode) or not is_partition_dir(sub):
                continue
        except OSError as e:
            # a partition that cannot be read (no permission, a dangling symlink or a loop):
            # named, the others still handled; other names (lost+found) are none of ours
            if names.looks_like_partition(n):
                failed = True
                if errors is not None:
                    errors.append((sub, e))
            continue
        found.append(sub)
    if not found and not failed:
        raise FileNotFoundError(errno.ENOENT, "no partition directories in it", path)
    return found


class CleanShutdownMarker:
    """The log directory's ``.kafka_cleanshutdown``, lifted while a run changes a partition.

    A broker deletes it when it starts loading the directory and writes it at a clean
    shutdown (LogManager); while it is there, the next load trusts every segment without
    recovering any. So a run about to change a partition lifts it first (its bytes kept in
    memory, the removal flushed), and ``restore`` puts the same bytes back once everything the
    run wrote is flushed. A run killed in between leaves no marker: the broker, or `recover`,
    then recovers from the recovery point, as after any unclean shutdown."""

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.path = os.path.join(log_dir, names.CLEAN_SHUTDOWN_FILE)
        self.saved: Optional[bytes] = None

    def present(self) -> bool:
        return os.path.isfile(self.path)

    def lift(self) -> bool:
        """Remove the marker, if there and not lifted yet; True when this call removed it."""
        if self.saved is not None or not self.present():
            return False
        self.saved = read_sized(self.path, MAX_MARKER_BYTES)
        os.unlink(self.path)
        fsync_dir(self.log_dir)
        return True

    def restore(self) -> bool:
        """Write the lifted marker back (never over a file); True when it did."""
        if self.saved is None:
            return False
        write_new(self.path, self.saved)
        self.saved = None
        return True


MAX_MARKER_BYTES = 1 << 20  # a marker holds a broker epoch in a line of JSON
