"""Appending records to a partition as a producer and a broker would together: records are
grouped into batches as a producer's RecordAccumulator groups them (batch.size, and a record
count), each batch is given the next offsets (UnifiedLog.append assigns them from the log end
offset), the producer's sequence numbers and, for LogAppendTime, the broker's clock, then
encoded in the message format asked for and written by PartitionWriter.

The one entry point is ``append_records``; nothing here prints: flushes are reported through a
callback and the outcome is returned.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Iterable, List, Optional, Tuple

from ..errors import KafkalogError, UsageError
from ..format import codecs
from ..format.encode import Record, encode_legacy, encode_v2_batch
from ..format.records import CREATE_TIME, LOG_APPEND_TIME, TIMESTAMP_TYPE_NAMES
from .append import PartitionWriter, RollPolicy, now_ms
from .partition import Partition

SEQUENCE_MODULUS = 2 ** 31  # a producer's sequence numbers wrap to 0 past Integer.MAX_VALUE
TIMESTAMP_TYPES = {TIMESTAMP_TYPE_NAMES[t]: t for t in (CREATE_TIME, LOG_APPEND_TIME)}


class InputError(KafkalogError, ValueError):
    """A record the caller's input could not make (exit code 2). Raised while ``records`` is
    iterated, it stops ``append_records`` cleanly: what came before its batch stays written.
    ``line`` is where in the input it was met, when the caller knows (None otherwise)."""

    def __init__(self, message: str, line: Optional[int] = None) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class AppendSettings:
    """How records become batches: at most ``batch_records`` records and about
    ``batch_bytes`` bytes of records a batch (a producer's batch.size), ``codec`` (one of
    codecs.CODEC_NAMES), message format ``magic`` (2, or 0/1 for fixtures of old formats),
    ``timestamp_type`` ('CreateTime' or 'LogAppendTime'); an fsync every ``flush_messages``
    records (a topic's flush.messages; None: once, at the end); an idempotent or transactional
    producer's ``producer_id``, ``producer_epoch``, ``base_sequence`` (-1: none; with a
    producer id they default to a new producer's 0); when segments roll (``roll``).
    Contradicting settings raise errors.UsageError."""

    batch_records: int = 1000000
    batch_bytes: int = 16384
    codec: str = "none"
    magic: int = 2
    timestamp_type: str = "CreateTime"
    flush_messages: Optional[int] = None
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    transactional: bool = False
    roll: RollPolicy = field(default_factory=RollPolicy)

    def __post_init__(self) -> None:
        if self.codec not in codecs.CODEC_NAMES:
            raise UsageError("unknown codec %r (one of %s)" % (self.codec,
                                                               ", ".join(codecs.CODEC_NAMES)))
        if self.timestamp_type not in TIMESTAMP_TYPES:
            raise UsageError("timestamp type must be CreateTime or LogAppendTime")
        if self.magic not in (0, 1, 2):
            raise UsageError("magic must be 0, 1 or 2")
        if self.magic < 2 and (self.codec == "zstd" or self.transactional
                               or self.producer_id >= 0):
            raise UsageError("zstd, producer ids and transactions need --magic 2")
        if self.transactional and self.producer_id < 0:
            raise UsageError("--transactional needs --producer-id")
        if self.producer_id >= 0:
            # an idempotent producer's batches carry an epoch and sequences: a new producer's
            object.__setattr__(self, "producer_epoch", max(self.producer_epoch, 0))
            object.__setattr__(self, "base_sequence", max(self.base_sequence, 0))
        elif self.producer_epoch >= 0 or self.base_sequence >= 0:
            raise UsageError("--producer-epoch and --base-sequence need --producer-id")

    @property
    def codec_id(self) -> int:
        return codecs.CODEC_NAMES.index(self.codec)

    @property
    def timestamp_type_id(self) -> int:
        return TIMESTAMP_TYPES[self.timestamp_type]


@dataclass(frozen=True)
class AppendResult:
    """What ``append_records`` wrote: ``records`` records at ``first_offset``..``last_offset``
    (both None when none), and where the partition ends (``log_end_offset``, the next offset).
    ``stopped`` is the InputError that ended the input early, or None; the records of its batch
    read before it (``dropped``) were not written."""

    directory: str
    records: int
    first_offset: Optional[int]
    log_end_offset: int
    stopped: Optional[InputError] = None
    dropped: int = 0

    @property
    def last_offset(self) -> Optional[int]:
        return None if self.first_offset is None else self.first_offset + self.records - 1


# (encoded bytes, last offset, max timestamp) of one log entry
Entry = Tuple[bytes, int, int]


def encode_entries(records: List[Record], base_offset: int, settings: AppendSettings,
                   sequence: int, append_time: Optional[int]) -> List[Entry]:
    """The log entries of one batch of ``records`` at ``base_offset``: one v2 batch
    (DefaultRecordBatch); for magic 0/1, one wrapper message of them all when compressed, else
    a message each (LegacyRecord: uncompressed messages are entries of their own).
    ``append_time``: the broker's time for LogAppendTime, else None."""
    codec, magic, ts_type = settings.codec_id, settings.magic, settings.timestamp_type_id

    def max_ts(batch: List[Record]) -> int:
        if magic == 0:
            return -1  # magic 0 has no timestamps
        return append_time if append_time is not None else max(r.timestamp for r in batch)

    last = base_offset + len(records) - 1
    if magic == 2:
        return [(encode_v2_batch(records, base_offset, codec, ts_type, append_time,
                                 settings.producer_id, settings.producer_epoch, sequence,
                                 settings.transactional), last, max_ts(records))]
    if codec == codecs.NONE:
        return [(encode_legacy([r], base_offset + i, magic, codec, ts_type, append_time),
                 base_offset + i, max_ts([r])) for i, r in enumerate(records)]
    return [(encode_legacy(records, base_offset, magic, codec, ts_type, append_time), last,
             max_ts(records))]


class RecordAppender:
    """Groups records into batches, encodes them and writes them with a PartitionWriter, and
    fsyncs as ``settings.flush_messages`` says, calling ``on_flush(last offset)`` after each
    fsync that made new records durable."""

    def __init__(self, writer: PartitionWriter, settings: AppendSettings,
                 on_flush: Optional[Callable[[int], None]] = None) -> None:
        self.writer = writer
        self.settings = settings
        self.on_flush = on_flush
        self.pending: List[Record] = []
        self.pending_bytes = 0
        self.sequence = settings.base_sequence  # of the next batch
        self.first: Optional[int] = None
        self.count = 0
        self.unflushed = 0

    def add(self, record: Record) -> None:
        size = record.size_estimate()
        s = self.settings
        if self.pending and self.pending_bytes + size > s.batch_bytes:
            self.write_pending()  # this record would overflow the batch: it opens the next
        self.pending.append(record)
        self.pending_bytes += size
        if len(self.pending) >= s.batch_records or self.pending_bytes >= s.batch_bytes:
            self.write_pending()  # full: written now, so that bad input later cannot drop it

    def write_pending(self) -> None:
        if not self.pending:
            return
        base, n = self.writer.next_offset, len(self.pending)
        append_time = now_ms() if self.settings.timestamp_type_id == LOG_APPEND_TIME else None
        for data, last_offset, ts in encode_entries(self.pending, base, self.settings,
                                                    self.sequence, append_time):
            self.writer.append(data, last_offset, ts)
        if self.sequence >= 0:
            self.sequence = (self.sequence + n) % SEQUENCE_MODULUS
        if self.first is None:
            self.first = base
        self.count += n
        self.unflushed += n
        self.pending, self.pending_bytes = [], 0
        if self.settings.flush_messages and self.unflushed >= self.settings.flush_messages:
            self.flush()

    def drop_pending(self) -> int:
        """Forget the batch being gathered; how many records it held."""
        dropped = len(self.pending)
        self.pending, self.pending_bytes = [], 0
        return dropped

    def flush(self) -> None:
        self.writer.flush()
        if self.unflushed and self.on_flush is not None:
            self.on_flush(self.writer.next_offset - 1)
        self.unflushed = 0

    def append_all(self, records: Iterable[Record]) -> Tuple[Optional[InputError], int]:
        """Append every record, then write the last batch and flush. An InputError raised by
        ``records`` ends the input there: the batch being gathered is dropped and what was
        written is flushed. Returns (that error or None, the records dropped)."""
        try:
            for record in records:
                self.add(record)
        except InputError as e:
            dropped = self.drop_pending()
            self.flush()
            return e, dropped
        self.write_pending()
        self.flush()
        return None, 0


def append_records(directory: str, records: Iterable[Record],
                   settings: Optional[AppendSettings] = None,
                   on_flush: Optional[Callable[[int], None]] = None) -> AppendResult:
    """Append ``records`` (format.encode.Record) to the partition ``directory``, created with
    its log directory when absent, as a producer and broker would: offsets continue from the
    log end offset, segments roll and indexes are kept as a broker does (PartitionWriter).

    Takes the log directory's lock for the whole run (LockHeld when a broker holds it) and the
    partition's own (AppendError when another kafkalog writes it); AppendError when the active
    segment is damaged (recover first); OSError. ``on_flush(last offset)`` is called after each
    fsync that made records durable. An InputError raised by ``records`` stops the run: see
    AppendResult.stopped."""
    settings = settings or AppendSettings()
    partition = Partition(directory)
    os.makedirs(partition.log_dir, exist_ok=True)
    with partition.lock(), PartitionWriter(directory, settings.roll) as writer:
        appender = RecordAppender(writer, settings, on_flush)
        stopped, dropped = appender.append_all(records)
        return AppendResult(directory, appender.count, appender.first, writer.next_offset,
                            stopped, dropped)
