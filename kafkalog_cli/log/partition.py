"""A partition directory (Kafka's UnifiedLog over its LocalLog): its segments in offset order,
its producer snapshots and leader epochs, and the lock of the log directory it lives in."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable, Iterator, List, Optional, Tuple, Union

from ..errors import api_errors
from . import checkpoints, names
from .lock import LogDirLock
from .segment import DEFAULT_MAX_MESSAGE_SIZE, Segment

if TYPE_CHECKING:
    from .compact import CompactionResult
    from .append import RollResult
    from .cleaner import CleanerStatus
    from .topic_config import TopicConfig
    from .logdir import LogDir
    from .describe import PartitionDescription
    from .append_types import AppendResult, AppendSettings, Item
    from .read import Record
    from .recover_plan import PartitionPlan
    from .retain import Policy, RetentionPlan
    from .transactions import Item as TransactionItem
    from .verify import FileReport, TargetError, UnknownFile


class Partition:
    """The partition held by ``directory`` (``<topic>-<n>``). Creating one reads nothing;
    every method lists or reads the directory as it is when called. ``parent``: the LogDir
    that lists it (its checkpoints read once for all its partitions); by default one of its
    own, made when first needed."""

    __slots__ = ("directory", "_parent")

    def __init__(self, directory: str, parent: "Optional[LogDir]" = None) -> None:
        self.directory = directory
        self._parent = parent

    @property
    def name(self) -> str:
        return os.path.basename(os.path.normpath(self.directory))

    @property
    def topic(self) -> Optional[str]:
        """The topic named by the directory, or None when its name is not ``<topic>-<n>``."""
        return names.topic_partition(self.directory)[0]

    @property
    def number(self) -> Optional[int]:
        """The partition number named by the directory, or None."""
        return names.topic_partition(self.directory)[1]

    @property
    def log_dir(self) -> str:
        """The log directory holding this partition (where its .lock and checkpoints are)."""
        return os.path.dirname(os.path.abspath(self.directory))

    @property
    def parent(self) -> "LogDir":
        """The LogDir of ``log_dir``, where the partition's checkpoint entries are read."""
        if self._parent is None:
            from .logdir import LogDir
            self._parent = LogDir(self.log_dir)
        return self._parent

    @api_errors('directory')
    def checkpointed(self, file_name: str) -> Optional[int]:
        """The partition's entry in its log directory's offset checkpoint ``file_name``
        (``names.RECOVERY_POINT_CHECKPOINT``, ``LOG_START_OFFSET_CHECKPOINT``,
        ``HIGH_WATERMARK_CHECKPOINT``, ``CLEANER_OFFSET_CHECKPOINT``): the last line naming it,
        as the broker reads the file into a map (OffsetCheckpointFile.read); None when there is
        no such file or no entry, or when the directory's name is no partition's. A file that
        cannot be read raises OSError or FileFormatError."""
        topic, number = self.topic, self.number
        if topic is None or number is None:
            return None
        return self.parent.checkpointed(file_name, topic, number)

    @api_errors('directory')
    def segments(self) -> List[Segment]:
        """The live segments (every ``<20 digits>.log``, no lifecycle suffix), oldest first."""
        return [Segment(self.directory, base)
                for base in names.live_log_bases(os.listdir(self.directory))]

    @api_errors('directory')
    def active_segment(self) -> Optional[Segment]:
        """The last segment, the one a broker appends to; None when there is none."""
        segments = self.segments()
        return segments[-1] if segments else None

    @api_errors('directory')
    def snapshot_paths(self) -> List[Tuple[int, str]]:
        """(offset, path) of every producer snapshot (``<20 digits>.snapshot``), oldest first."""
        found = []
        for n in os.listdir(self.directory):
            offset = names.base_offset_from_name(n)
            if (offset is not None and names.partition_file_kind(n) == names.SNAPSHOT
                    and not names.lifecycle_suffix(n)):
                found.append((offset, os.path.join(self.directory, n)))
        return sorted(found)

    @api_errors('directory')
    def leader_epochs(self) -> List[Tuple[int, int]]:
        """(epoch, start offset) of the leader-epoch-checkpoint, or [] when there is none."""
        path = os.path.join(self.directory, names.LEADER_EPOCH_CHECKPOINT)
        if not os.path.exists(path):
            return []
        return list(checkpoints.read_leader_epochs(path))

    @api_errors('directory')
    def records(self, from_offset: Optional[int] = None, to_offset: Optional[int] = None,
                from_timestamp: Optional[int] = None, to_timestamp: Optional[int] = None,
                include_control: bool = False,
                max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> "Iterator[Record]":
        """The partition's records in offset order, as log.read.Record objects, within the
        bounds (the meaning of `kafkalog dump`'s --from-offset, --to-offset, --from-timestamp,
        --to-timestamp). Raises InvalidDataError at the first invalid data met."""
        from .read import read_records
        return read_records(self.segments(), from_offset, to_offset, from_timestamp,
                            to_timestamp, include_control, max_message_size)

    @api_errors('directory')
    def offset_for_time(self, timestamp: int) -> Optional[int]:
        """The offset of the first record whose timestamp is at least ``timestamp``
        (offsets-for-times), or None."""
        from .read import offset_for_time
        return offset_for_time(self.segments(), timestamp)

    def lock(self, create: bool = True) -> LogDirLock:
        """The lock of the log directory that really holds this partition (symlinks
        resolved), as a broker takes it (use as a context manager)."""
        return LogDirLock(self.log_dir, create, partitions=[self.directory])

    # -- the operations: each plans, then (unless a dry run) carries the plan out --------------

    @api_errors('directory')
    def describe(self, check_crc: bool = False,
                 max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> "PartitionDescription":
        """What the partition holds (`kafkalog describe`): offsets, records, time ranges,
        segments, indexes, checkpoints, leader epochs, producer snapshots, and the findings
        among them. Reads only batch headers unless ``check_crc``."""
        from .describe import describe_partition
        return describe_partition(self.directory, max_message_size=max_message_size,
                                  check_crc=check_crc)

    @api_errors('directory')
    def cleaner_status(self, config: "Optional[TopicConfig]" = None, now: Optional[int] = None,
                       high_watermark: Optional[int] = None) -> "CleanerStatus":
        """The log cleaner's view of the partition (`kafkalog cleaner`): where its next
        cleaning pass would start and stop and why, its dirty ratio, whether the cleaner would
        choose it, what a pass would find (keys, records it would remove, tombstones waiting)
        and what would stop it. ``config``: the topic's settings (default: read from the log
        directory's ``__cluster_metadata-0``, else Kafka's defaults); ``now``: epoch ms
        (default: the wall clock). Reads only."""
        from .cleaner import cleaner_status
        return cleaner_status(self, config, now, high_watermark)

    @api_errors('directory')
    def compact(self, config: "Optional[TopicConfig]" = None, now: Optional[int] = None,
                dry_run: bool = False, high_watermark: Optional[int] = None
                ) -> "CompactionResult":
        """One pass of the log cleaner (`kafkalog compact`) under the log directory's lock:
        carried out unless ``dry_run``. Raises LockHeld when a broker holds the lock (not in a
        dry run), CompactError where the broker's cleaner would fail (nothing changed)."""
        from .compact import compact_partition
        with LogDirLock.for_run(self.log_dir, [self.directory], dry_run):
            return compact_partition(self, config, now, dry_run, high_watermark)

    @api_errors('directory')
    def verify(self, sanity_only: bool = False, max_message_size: Optional[int] = None
               ) -> "Iterator[Union[FileReport, TargetError, UnknownFile]]":
        """The check of every index file against the segments (`kafkalog verify-index`): a
        FileReport per index file, in order, the leader epochs' last."""
        from .verify import verify_target
        return verify_target(self.directory, sanity_only, max_message_size)

    @api_errors('directory')
    def transactions(self, now: Optional[int] = None,
                     hanging_after_ms: Optional[int] = None,
                     max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                     age_from: str = "now") -> "Iterator[TransactionItem]":
        """The partition's transactions (`kafkalog transactions`): each Transaction, then the
        PartitionSummary; a Note for invalid data passed over. Open transactions are aged
        against ``now`` (epoch ms; None: the wall clock), or with ``age_from``
        "newest-timestamp" against the partition's newest batch timestamp."""
        from .transactions import DEFAULT_HANGING_AFTER_MS, partition_transactions
        return partition_transactions(
            self.directory, now,
            DEFAULT_HANGING_AFTER_MS if hanging_after_ms is None else hanging_after_ms,
            max_message_size, age_from)

    @api_errors('directory')
    def recover(self, dry_run: bool = False, full: bool = False,
                max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> "PartitionPlan":
        """The broker's recovery of this partition (`kafkalog recover`), under its log
        directory's lock: the plan, carried out unless ``dry_run``. The log directory's
        recovery point entry and clean-shutdown marker are read and written as LogManager
        does (LogDir.recover, for this partition alone). Raises LockHeld when a broker holds
        the lock (not in a dry run), RecoveryStopped or another OSError when the partition
        cannot be recovered."""
        from .logdir import LogDir
        result = LogDir(self.log_dir).recover([self], dry_run, full, max_message_size)
        (only,) = result.results
        if only.error is not None:
            raise only.error
        assert only.plan is not None
        return only.plan

    @api_errors('directory')
    def retain(self, policy: "Policy", dry_run: bool = False,
               delete_delay_ms: int = 60000) -> "RetentionPlan":
        """Retention by ``policy`` (`kafkalog retain`), under the log directory's lock: the
        plan, carried out unless ``dry_run``. Raises LockHeld when a broker holds the lock
        (not in a dry run)."""
        from .retain import LogDirRetention
        (plan,) = LogDirRetention(self.log_dir, [self.directory], policy, dry_run,
                                  delete_delay_ms).run()
        return plan

    @api_errors('directory')
    def roll(self, if_bytes: Optional[int] = None, if_older: Optional[int] = None,
             now: Optional[int] = None) -> "RollResult":
        """Seal the active segment and start an empty one at the next offset (`kafkalog
        roll`), as UnifiedLog.roll, unless it is empty or a condition is not met."""
        from .append import roll_partition
        return roll_partition(self.directory, if_bytes, if_older, now)

    @api_errors('directory')
    def append(self, records: "Iterable[Item]", settings: "Optional[AppendSettings]" = None
               ) -> "AppendResult":
        """Append ``records`` (format.encode.Record, ProducedRecord, Marker) as producers and a
        broker would (`kafkalog append`): offsets from the log end, segments rolled, indexes,
        snapshots and leader epochs kept. The directory is created when absent."""
        from .produce import append_records
        return append_records(self.directory, records, settings)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Partition) and os.path.abspath(other.directory) == \
            os.path.abspath(self.directory)

    def __hash__(self) -> int:
        return hash(os.path.abspath(self.directory))

    def __repr__(self) -> str:
        return "Partition(%r)" % self.directory


def is_partition_dir(directory: str) -> bool:
    """Does ``directory`` hold a partition (names.marks_partition)? OSError when it cannot be
    listed."""
    return names.marks_partition(os.listdir(directory))
