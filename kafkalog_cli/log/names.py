"""Every file name of a partition and a log directory, made and parsed in one place
(Kafka's LogFileUtils, UnifiedLog's file suffixes and LogDirFailureChannel's checkpoint names).

Names only: nothing here touches the file system.
"""

from __future__ import annotations

import os
from typing import Iterable, List, Optional, Tuple

LOG, INDEX, TIMEINDEX, TXNINDEX, SNAPSHOT = "log", "index", "timeindex", "txnindex", "snapshot"
OFFSET_CHECKPOINT, LEADER_EPOCHS, PARTITION_METADATA = (
    "offset-checkpoint", "leader-epoch-checkpoint", "partition-metadata")
SEGMENT_KINDS = (LOG, INDEX, TIMEINDEX, TXNINDEX)  # in the order a segment's files are shown
OFFSET_KINDS = SEGMENT_KINDS + (SNAPSHOT,)  # the kinds named by an offset

# Suffixes the broker appends to a segment's files while deleting, cleaning or swapping them
# (LogFileUtils.DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX).
DELETED, CLEANED, SWAP = ".deleted", ".cleaned", ".swap"
LIFECYCLE_SUFFIXES = (DELETED, CLEANED, SWAP)

# The log directory's offset checkpoints (LogManager's and ReplicaManager's file names).
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"  # the high watermarks
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
OFFSET_CHECKPOINT_NAMES = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                           REPLICATION_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT)
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"
# KRaft snapshots of the metadata log (Snapshots.SUFFIX, BootstrapDirectory's file): record
# batches like a segment, named by the snapshot's end offset and epoch.
KRAFT_SNAPSHOT = "checkpoint"
BOOTSTRAP_SNAPSHOT = "bootstrap.checkpoint"
EPOCH_DIGITS = 10  # Snapshots.filenameFromSnapshotId: the epoch, zero-padded to 10 digits
# KRaft's other files in the metadata log's partition directory: the quorum state
# (FileQuorumStateStore.DEFAULT_FILE_NAME, written first as "<name>.tmp") and a snapshot being
# written (Snapshots.PARTIAL_SUFFIX, ".checkpoint.part"; a deleted one ends with ".deleted").
QUORUM_STATE = "quorum-state"
KRAFT_STATE_FILES = (QUORUM_STATE, QUORUM_STATE + ".tmp")
KRAFT_PARTIAL_SUFFIX = ".part"
# The log directory's clean-shutdown marker (LogLoader.CLEAN_SHUTDOWN_FILE): present, the
# broker skips the recovery of unflushed segments at its next start.
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"  # the log directory's lock (LogManager.LOCK_FILE_NAME)
QUARANTINE = "kafkalog-quarantine"  # where recover keeps what it sets aside, in each partition
# kafkalog's own names: a run folder's manifest and restore record, a run folder being purged
# (``.<run>.purging``), the suffix of every temporary file it writes before renaming it into
# place, the partition's append lock and retain's intent file.
QUARANTINE_MANIFEST = "manifest.json"
QUARANTINE_RESTORED = "restored.json"
QUARANTINE_PURGING = ".purging"
TMP_SUFFIX = ".kafkalog-tmp"
APPEND_LOCK = ".kafkalog-append.lock"
RETAIN_INTENT = ".kafkalog-retain-intent"
COMPACT_INTENT = ".kafkalog-compact-intent"

_NAMED_KINDS = {LEADER_EPOCH_CHECKPOINT: LEADER_EPOCHS, PARTITION_METADATA_FILE: PARTITION_METADATA,
                BOOTSTRAP_SNAPSHOT: KRAFT_SNAPSHOT}
_NAMED_KINDS.update((n, OFFSET_CHECKPOINT) for n in OFFSET_CHECKPOINT_NAMES)

OFFSET_DIGITS = 20  # LogFileUtils.filenamePrefixFromOffset: the offset, zero-padded to 20 digits


def offset_stem(offset: int) -> str:
    """The name every file of the segment (or snapshot) at ``offset`` starts with."""
    return "%0*d" % (OFFSET_DIGITS, offset)


def offset_name(offset: int, kind: str, suffix: str = "") -> str:
    """``00000000000000000042.log`` for (42, LOG); ``suffix`` is a lifecycle suffix or ''."""
    return "%s.%s%s" % (offset_stem(offset), kind, suffix)


def lifecycle_suffix(name: str) -> str:
    """'.deleted', '.cleaned', '.swap' when the name ends with one, else ''."""
    for suffix in LIFECYCLE_SUFFIXES:
        if name.endswith(suffix):
            return suffix
    return ""


def without_lifecycle_suffix(name: str) -> str:
    """The name without its lifecycle suffix (``X.log.swap`` -> ``X.log``): the name the file
    had before, or takes once swapped in."""
    return name[:len(name) - len(lifecycle_suffix(name))]


def file_kind(name: str) -> Optional[str]:
    """The kind of a file by its suffix alone (one of the constants above), or None.

    For a file named explicitly (``dump X``): its name need not be a base offset
    (``--base-offset`` gives one). Files met in a directory are judged by
    ``partition_file_kind``, which follows Kafka's naming rules exactly.
    """
    name = os.path.basename(name)
    if name in _NAMED_KINDS:
        return _NAMED_KINDS[name]
    stem, dot, ext = name[:len(name) - len(lifecycle_suffix(name))].rpartition(".")
    if dot and stem and (ext in OFFSET_KINDS or ext == KRAFT_SNAPSHOT):
        return ext
    return None


def partition_file_kind(name: str) -> Optional[str]:
    """The kind of a file met in a partition or log directory, or None when its name is not
    one Kafka gives: exactly ``<20 digits>.<kind>`` with an optional ``.deleted``, ``.cleaned``
    or ``.swap`` (LogFileUtils names segment files and producer snapshots by the offset in 20
    digits), a live KRaft snapshot ``<20 digits>-<10 digits>.checkpoint`` (Snapshots), or one
    of the fixed names (checkpoints, ``bootstrap.checkpoint``).

    ``abc.log``, ``00000000000000000000.log.log``, ``-1.log``, a name in other scripts' digits
    or ``1000.log`` are unknown files: a broker never reads their bytes (LogLoader takes the
    offset from ``1000.log`` but opens ``00000000000000001000.log``), and nobody should read,
    move or rebuild them as segments.
    """
    name = os.path.basename(name)
    if name in _NAMED_KINDS:
        return _NAMED_KINDS[name]
    if kraft_snapshot_id(name) is not None:
        return KRAFT_SNAPSHOT
    stem, dot, rest = name.partition(".")
    if not (dot and len(stem) == OFFSET_DIGITS and stem.isascii() and stem.isdigit()):
        return None
    ext = rest[:len(rest) - len(lifecycle_suffix(rest))]
    return ext if ext in OFFSET_KINDS else None


def kraft_snapshot_name(end_offset: int, epoch: int) -> str:
    """``<end offset in 20 digits>-<epoch in 10 digits>.checkpoint``: the name of the KRaft
    snapshot holding the metadata up to ``end_offset`` (exclusive) at ``epoch``
    (Snapshots.filenameFromSnapshotId)."""
    return "%s-%0*d.%s" % (offset_stem(end_offset), EPOCH_DIGITS, epoch, KRAFT_SNAPSHOT)


def kraft_snapshot_id(name: str) -> Optional[Tuple[int, int]]:
    """(end offset, epoch) of a KRaft snapshot's name (Snapshots.parse), exactly
    ``<20 digits>-<10 digits>.checkpoint``, or None for any other name (``bootstrap.checkpoint``
    included: it is named by no offset)."""
    name = os.path.basename(name)
    stem, dot, ext = name.partition(".")
    offset, dash, epoch = stem.partition("-")
    if not (dot and dash and ext == KRAFT_SNAPSHOT and len(offset) == OFFSET_DIGITS
            and len(epoch) == EPOCH_DIGITS and stem.replace("-", "", 1).isascii()
            and offset.isdigit() and epoch.isdigit()):
        return None
    return int(offset), int(epoch)


def is_kraft_state_file(name: str) -> bool:
    """A file KRaft keeps beside the metadata log that is no segment nor a snapshot to read:
    ``quorum-state`` (and its ``.tmp``), or a snapshot being written
    (``<20 digits>-<10 digits>.checkpoint.part``)."""
    name = os.path.basename(name)
    if name in KRAFT_STATE_FILES:
        return True
    return (name.endswith(KRAFT_PARTIAL_SUFFIX)
            and kraft_snapshot_id(name[:-len(KRAFT_PARTIAL_SUFFIX)]) is not None)


def base_offset_from_name(name: str) -> Optional[int]:
    """The offset a segment file's name starts with (``00000000000000000042.log`` -> 42), or
    None (LogFileUtils.offsetFromFileName)."""
    stem = os.path.basename(name).split(".", 1)[0]
    if stem.isdigit() and stem.isascii():
        return int(stem)
    return None


def sibling(path: str, kind: str) -> str:
    """The file of kind ``kind`` of the same segment as ``path`` (``X.index`` -> ``X.log``),
    with the same lifecycle suffix (``X.index.swap`` -> ``X.log.swap``)."""
    directory, name = os.path.split(path)
    return os.path.join(directory, "%s.%s%s" % (name.split(".", 1)[0], kind,
                                                lifecycle_suffix(name)))


def is_live_log(name: str) -> bool:
    """A segment's .log by Kafka's naming rules, not being deleted, cleaned or swapped."""
    return partition_file_kind(name) == LOG and not lifecycle_suffix(name)


def live_log_bases(entries: Iterable[str]) -> List[int]:
    """The base offsets of the live segments (``is_live_log``) among a directory's entries,
    in increasing order."""
    bases = [base_offset_from_name(n) for n in entries if is_live_log(n)]
    return sorted(b for b in bases if b is not None)  # is_live_log has checked the digits


def looks_like_partition(name: str) -> bool:
    """A directory name of the form a broker gives a partition: ``<topic>-<n>``, or one being
    deleted, moved or awaiting removal (``<topic>-<n>.<uuid>-delete``, ``-future``, ``-stray``)."""
    topic, _, tail = name.rpartition("-")
    return bool(topic) and ((tail.isascii() and tail.isdigit())
                            or tail in ("delete", "future", "stray"))


def topic_partition(directory: str) -> Tuple[Optional[str], Optional[int]]:
    """(topic, partition number) from a partition directory's name ``<topic>-<n>``
    (UnifiedLog.parseTopicPartitionName), or (None, None) for any other name."""
    name = os.path.basename(os.path.normpath(directory))
    topic, _, number = name.rpartition("-")
    if topic and number.isascii() and number.isdigit():
        return topic, int(number)
    return None, None


def partition_sort_key(name: str) -> tuple:
    """Partition directories in topic, then partition-number order."""
    topic, number = topic_partition(name)
    if topic is not None:
        return (topic, number, name)
    return (name, -1, name)


# Files whose presence makes a directory a partition directory (a log directory holds only
# offset checkpoints and partition directories).
PARTITION_MARKS = SEGMENT_KINDS + (SNAPSHOT, LEADER_EPOCHS, PARTITION_METADATA)


def marks_partition(names: Iterable[str]) -> bool:
    """Do these entries make their directory a partition directory? A Kafka file of a
    partition does, and so does recover's quarantine folder (left even when recover set aside
    everything the partition held)."""
    return any(n == QUARANTINE or partition_file_kind(n) in PARTITION_MARKS for n in names)
