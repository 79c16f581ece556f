"""The log cleaner's view of a partition, read only: where the broker's next cleaning pass would
start and stop and why it stops there (LogCleanerManager.cleanableOffsets), how dirty the log
is and whether the cleaner would choose it (calculateCleanableBytes, LogToClean,
maxCompactionDelay), and what the pass would find (Cleaner.buildOffsetMap's offset map over the
dirty range, then Cleaner.shouldRetainRecord over the log up to where the map reaches): distinct
keys, records it would remove, tombstones still waiting for their delete horizon, and what would
stop it (bytes that hold no batch, records that cannot be read, an offset overflow).

The offset map is SkimpyOffsetMap's: an entry per distinct MD5 of a key, at most
``slots * load factor`` entries, ``slots`` the dedupe buffer (per cleaner thread) over 24 bytes;
a full map ends the pass early, at the offset it reached."""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Set, Tuple, Union

from ..errors import InvalidDataError, KafkalogError
from . import names
from .files import FileFormatError
from .offset_map import OffsetMap, new_offset_map
from .findings import INVALID_BYTES, OFFSET_ORDER, UNREADABLE, UNREADABLE_RECORDS, Finding
from .partition import Partition
from .read import BatchProblem, BatchRead, BytesProblem, segment_events, to_say
from .report import Report, field, report
from .segment import Segment
from .topic_config import ClusterConfigs, TopicConfig, cluster_configs, topic_config

if TYPE_CHECKING:
    from .verify import TargetError

# where the cleanable range ends, and why (the smallest of these bounds)
ACTIVE_SEGMENT = "active segment"
LAST_STABLE_OFFSET = "last stable offset"
MIN_COMPACTION_LAG = "min.compaction.lag.ms"
# why the cleaner does not start at its checkpointed offset
NO_CHECKPOINT = "no entry in cleaner-offset-checkpoint"
BELOW_LOG_START = "the checkpointed offset is below the log start offset"
PAST_LOG_END = "the checkpointed offset is past the log end offset"

ENTRY_BYTES = 24  # an offset map slot: an MD5 hash and an 8-byte offset
INT32_MAX = (1 << 31) - 1


@report
class CleanerStatus(Report):
    """The cleaner's view of the partition in ``directory`` at ``now_ms``. Offsets are
    Kafka offsets, sizes bytes, times ms since the epoch; None where the partition has no
    segment. ``first_uncleanable_offset`` is rounded down to a segment's base offset, as
    calculateCleanableBytes rounds it; ``stopped_by`` names the bounds that set it.
    ``would_clean``: the broker's cleaner would choose the partition now (its dirty ratio above
    min.cleanable.dirty.ratio, or compaction ``overdue`` by max.compaction.lag.ms).
    ``pass_end_offset``: the first offset the pass would leave dirty (its new checkpoint).
    ``problems``: what would make the broker's cleaner fail on the partition (mark it
    uncleanable) or abort its pass."""

    directory: str
    topic: Optional[str]
    partition: Optional[int]
    config: TopicConfig
    now_ms: int
    log_start_offset: Optional[int] = None
    log_end_offset: Optional[int] = None
    checkpointed_cleaner_offset: Optional[int] = None
    first_dirty_offset: Optional[int] = None
    first_dirty_reset: Optional[str] = None
    first_uncleanable_offset: Optional[int] = None
    stopped_by: List[str] = field(default_factory=list)
    high_watermark: Optional[int] = None
    high_watermark_source: str = ""
    last_stable_offset: Optional[int] = None
    open_transactions: int = 0
    clean_bytes: int = 0
    cleanable_bytes: int = 0
    dirty_ratio: float = 0.0
    max_compaction_delay_ms: int = 0
    overdue: bool = False
    would_clean: bool = False
    dirty_records: int = 0
    dirty_keys: int = 0
    offset_map_capacity: int = 0
    offset_map_full_at: Optional[int] = None
    pass_end_offset: Optional[int] = None
    records_removable: int = 0
    keyless_records: int = 0
    tombstones_waiting: int = 0
    next_tombstone_expiry_ms: Optional[int] = None
    problems: List[Finding] = field(default_factory=list)

    @property
    def compacted(self) -> bool:
        return self.config.compacted


def offset_map_slots(config: TopicConfig) -> int:
    """SkimpyOffsetMap's slots: the dedupe buffer a cleaner thread gets, over 24 bytes."""
    memory = min(config.integer("log.cleaner.dedupe.buffer.size")
                 // max(config.integer("log.cleaner.threads"), 1), INT32_MAX)
    return max(memory // ENTRY_BYTES, 1)


def offset_map_capacity(config: TopicConfig) -> int:
    """How many keys the cleaner's offset map takes before it is full (its slots times the
    load factor)."""
    return int(offset_map_slots(config) * config.number("log.cleaner.io.buffer.load.factor"))


def _segments_overlapping(segments: List[Segment], start: int, end: int) -> List[Segment]:
    """UnifiedLog.logSegments(from, to): the segment holding ``start`` (the last whose base
    offset is at or below it; from the first when there is none) and each after it whose base
    offset is below ``end``; none when ``start`` is ``end``."""
    if start >= end:
        return []
    bases = [s.base_offset or 0 for s in segments]
    floor = max([i for i, base in enumerate(bases) if base <= start], default=0)
    return [s for i, s in enumerate(segments) if i >= floor and bases[i] < end]


def _non_active_from(segments: List[Segment], offset: int) -> List[Segment]:
    """LogSegments.nonActiveLogSegmentsFrom: the segments from the one holding ``offset`` up
    to the active one (excluded); none when ``offset`` is past the active segment's base."""
    active = segments[-1]
    if offset > (active.base_offset or 0):
        return []
    return [s for s in _segments_overlapping(segments, offset, active.base_offset or 0)
            if s is not active]


def _first_batch_max_timestamp(segment: Segment) -> Optional[int]:
    for batch in segment.batches():
        return batch.max_timestamp
    return None


def _aborted_ranges(partition: Partition, now: int) -> Tuple[Dict[int, List[Tuple[int, int]]],
                                                             List[int]]:
    """{producer id: [(first offset, marker offset)]} of the aborted transactions, and the
    first offsets of the open ones."""
    from .transactions import ABORT, Transaction
    aborted: Dict[int, List[Tuple[int, int]]] = {}
    open_firsts: List[int] = []
    for item in partition.transactions(now=now):
        if not isinstance(item, Transaction) or item.first_offset is None:
            continue
        if item.marker is None:
            open_firsts.append(item.first_offset)
        elif item.marker == ABORT and item.end_offset is not None:
            aborted.setdefault(item.producer_id, []).append((item.first_offset, item.end_offset))
    return aborted, open_firsts


def _in_aborted(aborted: Dict[int, List[Tuple[int, int]]], producer_id: int,
                offset: int) -> bool:
    return any(first <= offset <= end for first, end in aborted.get(producer_id, ()))


def _key_hash(key: bytes) -> bytes:
    return hashlib.md5(key).digest()


def cleaner_status(partition: Partition, config: Optional[TopicConfig] = None,
                   now: Optional[int] = None, high_watermark: Optional[int] = None,
                   simulate: bool = True) -> CleanerStatus:
    """The cleaner's view of ``partition`` at ``now`` (epoch ms; default: the wall clock).
    ``config``: the topic's settings (default: from the log directory's metadata partition,
    else Kafka's defaults); ``high_watermark``: used instead of the one in
    replication-offset-checkpoint; ``simulate``: False leaves out what a pass would find (the
    offset map and the records it would remove: compact makes the pass itself). Raises OSError
    when the partition cannot be read."""
    return status_and_aborted(partition, config, now, high_watermark, simulate)[0]


def status_and_aborted(partition: Partition, config: Optional[TopicConfig] = None,
                       now: Optional[int] = None, high_watermark: Optional[int] = None,
                       simulate: bool = True
                       ) -> Tuple[CleanerStatus, Dict[int, List[Tuple[int, int]]]]:
    """cleaner_status, and the aborted transactions it read on the way ({producer id: [(first
    offset, marker offset)]}), for a pass that needs them too."""
    import time
    now_ms = int(time.time() * 1000) if now is None else now
    if config is None:
        try:
            configs = cluster_configs(partition.log_dir)
        except (InvalidDataError, OSError):
            configs = None
        config = topic_config(partition.topic, configs)
    status = CleanerStatus(partition.directory, partition.topic, partition.number, config,
                           now_ms)
    segments = partition.segments()
    if not segments:
        return status, {}
    active = segments[-1]
    log_end = active.next_offset()
    first_base = segments[0].base_offset or 0
    checkpointed_start = _entry(status, partition, names.LOG_START_OFFSET_CHECKPOINT)
    log_start = first_base if checkpointed_start is None else max(checkpointed_start, first_base)
    status.log_start_offset, status.log_end_offset = log_start, log_end

    # the last stable offset: below the first open transaction and the high watermark
    hw = high_watermark
    status.high_watermark_source = "given"
    if hw is None:
        hw = _entry(status, partition, names.REPLICATION_OFFSET_CHECKPOINT)
        status.high_watermark_source = names.REPLICATION_OFFSET_CHECKPOINT
    if hw is None:
        hw, status.high_watermark_source = log_end, "log end offset (no checkpointed entry)"
    hw = min(max(hw, log_start), log_end)
    aborted, open_firsts = _aborted_ranges(partition, now_ms)
    status.high_watermark = hw
    status.open_transactions = len(open_firsts)
    lso = min([hw] + open_firsts)
    status.last_stable_offset = lso

    # LogCleanerManager.cleanableOffsets
    checkpoint = _entry(status, partition, names.CLEANER_OFFSET_CHECKPOINT)
    status.checkpointed_cleaner_offset = checkpoint
    first_dirty = log_start if checkpoint is None else checkpoint
    if checkpoint is None:
        status.first_dirty_reset = NO_CHECKPOINT
    elif checkpoint < log_start:
        first_dirty, status.first_dirty_reset = log_start, BELOW_LOG_START
    elif checkpoint > log_end:
        first_dirty, status.first_dirty_reset = log_start, PAST_LOG_END
    status.first_dirty_offset = first_dirty
    bounds: List[Tuple[int, str]] = [(lso, LAST_STABLE_OFFSET),
                                     (active.base_offset or 0, ACTIVE_SEGMENT)]
    min_lag = max(config.integer("min.compaction.lag.ms"), 0)
    if min_lag > 0:
        for segment in _non_active_from(segments, first_dirty):
            if segment.largest_timestamp()[0] > now_ms - min_lag:
                bounds.append((segment.base_offset or 0, MIN_COMPACTION_LAG))
                break
    lowest = min(b for b, _ in bounds)
    status.stopped_by = [why for b, why in bounds if b == lowest]
    uncleanable = max(first_dirty, lowest)

    # LogCleanerManager.calculateCleanableBytes, LogToClean
    rest = _non_active_from(segments, uncleanable)
    first_uncleanable = (rest[0] if rest else active).base_offset or 0
    status.first_uncleanable_offset = first_uncleanable
    status.cleanable_bytes = sum(s.size() for s in _segments_overlapping(
        segments, min(first_dirty, first_uncleanable), first_uncleanable))
    status.clean_bytes = sum(s.size() for s in segments if (s.base_offset or 0) < first_dirty)
    total = status.clean_bytes + status.cleanable_bytes
    status.dirty_ratio = status.cleanable_bytes / total if total else 0.0

    # LogCleanerManager.maxCompactionDelay
    firsts = [t for s in _non_active_from(segments, first_dirty)
              for t in [_first_batch_max_timestamp(s)] if t is not None and t > 0]
    max_lag = max(config.integer("max.compaction.lag.ms"), 0)
    clean_until = now_ms - max_lag
    if firsts and min(firsts) < clean_until:
        status.max_compaction_delay_ms = clean_until - min(firsts)
    status.overdue = status.max_compaction_delay_ms > 0 and status.cleanable_bytes > 0
    ratio = config.number("min.cleanable.dirty.ratio")
    status.would_clean = config.compacted and total > 0 and (
        status.overdue or status.dirty_ratio > ratio)

    if simulate:
        _simulate_pass(status, segments, first_dirty, first_uncleanable, aborted)
    return status, aborted


def _entry(status: CleanerStatus, partition: Partition, name: str) -> Optional[int]:
    try:
        return partition.checkpointed(name)
    except (OSError, FileFormatError) as e:
        status.problems.append(Finding(UNREADABLE, "not read: %s" % e,
                                       os.path.join(partition.log_dir, name)))
        return None


def build_offset_map(status: CleanerStatus, segments: List[Segment], start: int, end: int,
                     aborted: Dict[int, List[Tuple[int, int]]]
                     ) -> Tuple[OffsetMap, Optional[int]]:
    """Cleaner.buildOffsetMap over [start, end): {MD5 of a key: its last offset} of the keyed
    records from ``start`` on, outside control batches and aborted transactions, at most
    ``offset_map_capacity`` keys (a full map stops there, ``status.offset_map_full_at``), and
    the map's latest offset (None when the range holds no segment). Counts the dirty records
    and keys in ``status``; what would stop the cleaner goes to ``status.problems``."""
    capacity = offset_map_capacity(status.config)
    status.offset_map_capacity = capacity
    keys = new_offset_map(max(offset_map_slots(status.config), capacity + 1))
    latest = -1
    problems: Set[Tuple[str, int]] = set()
    dirty = _segments_overlapping(segments, start, end) if start < end else []
    bases = [s.base_offset or 0 for s in dirty]
    full = False
    for segment, next_start in zip(dirty, bases[1:] + [end]):
        for event in _batches(status, segment, problems):
            batch = event.batch
            if not batch.is_control and not (batch.is_transactional and _in_aborted(
                    aborted, batch.producer_id, batch.base_offset)) and event.records is not None:
                for offset, key in zip(event.records.offsets, event.records.keys):
                    if key is not None and offset >= start:
                        status.dirty_records += 1
                        h = _key_hash(key)
                        if len(keys) >= capacity and keys.get(h) < 0:
                            status.offset_map_full_at = offset
                            full = True
                            break
                        keys.put(h, offset)
                        latest = offset
                    elif offset >= start:
                        status.dirty_records += 1
            if full:
                break
            if batch.last_offset >= start:
                latest = batch.last_offset
        if full:
            break
        latest = next_start - 1
    status.dirty_keys = len(keys)
    return keys, (latest if dirty else None)


def _simulate_pass(status: CleanerStatus, segments: List[Segment], start: int, end: int,
                   aborted: Dict[int, List[Tuple[int, int]]]) -> None:
    """Cleaner.buildOffsetMap over [start, end), then shouldRetainRecord over the segments
    below where the map reaches: the counts of ``status``."""
    config = status.config
    keys, reached = build_offset_map(status, segments, start, end, aborted)
    if reached is None:
        return
    latest = reached
    problems: Set[Tuple[str, int]] = {(f.kind, f.fields.get("position", -1))
                                      for f in status.problems}
    status.pass_end_offset = latest + 1

    # Cleaner.doClean: the legacy delete horizon, then each record below the map's reach
    below = [s for s in segments if (s.base_offset or 0) < start]
    retention = config.integer("delete.retention.ms")
    legacy_horizon = (int(os.path.getmtime(below[-1].log_path) * 1000) - retention
                      if below else 0)
    now = status.now_ms
    for segment in [s for s in segments if (s.base_offset or 0) <= latest]:
        keep_legacy_deletes = int(os.path.getmtime(segment.log_path) * 1000) > legacy_horizon
        for event in _batches(status, segment, problems):
            batch, records = event.batch, event.records
            if batch.is_control or records is None:
                continue
            if batch.is_transactional and _in_aborted(aborted, batch.producer_id,
                                                      batch.base_offset):
                status.records_removable += sum(1 for o in records.offsets if o <= latest)
                continue
            horizon = batch.delete_horizon_ms if batch.magic >= 2 else None
            for offset, key, value in zip(records.offsets, records.keys, records.values):
                if offset > latest:
                    continue
                if key is None:
                    status.records_removable += 1
                    status.keyless_records += 1
                    continue
                if offset < keys.get(_key_hash(key)):
                    status.records_removable += 1
                    continue
                if value is not None:
                    continue
                if batch.magic >= 2:
                    keep = horizon is None or now < horizon
                    expiry = now + retention if horizon is None else horizon
                else:
                    keep, expiry = keep_legacy_deletes, legacy_horizon + retention
                if keep:
                    status.tombstones_waiting += 1
                    if status.next_tombstone_expiry_ms is None \
                            or expiry < status.next_tombstone_expiry_ms:
                        status.next_tombstone_expiry_ms = expiry
                else:
                    status.records_removable += 1
        if segment.overflows():
            key2 = ("overflow", segment.base_offset or 0)
            if key2 not in problems:
                problems.add(key2)
                status.problems.append(Finding(
                    OFFSET_ORDER, "%s holds offsets beyond its base offset's 32-bit reach: the "
                    "cleaner splits the segment and starts its pass again"
                    % os.path.basename(segment.log_path), segment.log_path,
                    baseOffset=segment.base_offset))


def _batches(status: CleanerStatus, segment: Segment,
             seen: Set[Tuple[str, int]]) -> Iterator[BatchRead]:
    """The batches of ``segment`` with their records, up to the first bytes that hold no
    batch; what would stop the cleaner said in ``status.problems``."""
    for _, event in segment_events([segment], records=True, valid_only=False):
        if isinstance(event, BatchRead):
            yield event
            continue
        _problem(status, segment, event, seen)
        if isinstance(event, BytesProblem):
            return


def _problem(status: CleanerStatus, segment: Segment, event: object,
             seen: Set[Tuple[str, int]]) -> None:
    """One finding per place for what would stop the cleaner (the walk passes each twice)."""
    stops = "the cleaner fails there and marks the partition uncleanable"
    if isinstance(event, BytesProblem):
        item = event.item
        kind, position, fields = INVALID_BYTES, item.position, {"position": item.position}
        message = "%d bytes at position %d hold no batch (%s): %s" % (
            item.size, item.position, item.reason, stops)
    elif isinstance(event, BatchProblem) and to_say(event):
        batch = event.batch
        kind, position = UNREADABLE_RECORDS, batch.position
        fields = {"position": batch.position, "baseOffset": batch.base_offset}
        message = "batch at position %d (offset %d): %s: %s" % (
            batch.position, batch.base_offset, event.message, stops)
    else:
        return
    if (kind, position) not in seen:
        seen.add((kind, position))
        status.problems.append(Finding(kind, message, segment.log_path, **fields))


def cleaner_statuses(path: str, given: Optional[Dict[str, object]] = None,
                     now: Optional[int] = None, high_watermark: Optional[int] = None
                     ) -> "Iterator[Union[CleanerStatus, TargetError]]":
    """cleaner_status of every partition ``path`` stands for (a .log file's partition, a
    partition directory, every partition of a log directory), each with its topic's settings
    (``given`` first, by Kafka's names; then the log directory's metadata partition; then
    Kafka's defaults), and a TargetError for what cannot be read (the others are still read).
    Raises UsageError for a file that is not a segment."""
    from .logdir import LogDir
    from .verify import TargetError, partition_targets
    log_dirs: Dict[str, LogDir] = {}
    targets = list(partition_targets(path))
    partitions: Dict[str, Partition] = {}
    for directory in targets:  # every partition held before a checkpoint is read: one read each
        if isinstance(directory, str):
            log_dir = os.path.dirname(os.path.abspath(directory))
            if log_dir not in log_dirs:
                log_dirs[log_dir] = LogDir(log_dir)
            partitions[directory] = log_dirs[log_dir].holding(directory)
    read_configs: Dict[str, Optional[ClusterConfigs]] = {}
    for directory in targets:
        if isinstance(directory, TargetError):
            yield directory
            continue
        try:
            partition = partitions[directory]
            log_dir = partition.log_dir
            if log_dir not in read_configs:
                read_configs[log_dir] = cluster_configs(log_dir)
            configs = read_configs[log_dir]
            yield cleaner_status(partition, topic_config(partition.topic, configs, given),
                                 now, high_watermark)
        except (OSError, KafkalogError) as e:
            yield TargetError(directory, e)


__all__ = ["CleanerStatus", "cleaner_status", "cleaner_statuses", "offset_map_capacity",
           "ACTIVE_SEGMENT", "LAST_STABLE_OFFSET", "MIN_COMPACTION_LAG", "NO_CHECKPOINT",
           "BELOW_LOG_START", "PAST_LOG_END"]
