"""What an append takes and gives: its settings (AppendSettings), the items of its input (a
plain Record, a producer's ProducedRecord, a RecordRun of plain records, a transaction Marker),
its result (AppendResult) and the error a bad input raises (InputError). ``produce.
append_records`` does the appending."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Union

from ..errors import KafkalogError, UsageError
from ..format import codecs
from ..format.encode import Record
from ..format.records import CREATE_TIME, LOG_APPEND_TIME, TIMESTAMP_TYPE_NAMES
from .segment_writer import RollPolicy

SEQUENCE_MODULUS = 2 ** 31  # a producer's sequence numbers wrap to 0 past Integer.MAX_VALUE
INT16_MAX = 2 ** 15 - 1
TIMESTAMP_TYPES = {TIMESTAMP_TYPE_NAMES[t]: t for t in (CREATE_TIME, LOG_APPEND_TIME)}


# LogConfig's max.message.bytes default: 1 MiB plus a log entry's offset and size fields.
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024 + 12
# A v2 batch's header (DefaultRecordBatch.RECORD_BATCH_OVERHEAD): a batch of one record is at
# least this much larger than the record.
V2_BATCH_OVERHEAD = 61


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
    records (a topic's flush.messages; None: once, at the end); the producer of plain Records:
    an idempotent or transactional producer's ``producer_id``, ``producer_epoch`` (-1: the
    producer's current epoch in the partition, 0 for a new one), ``base_sequence`` (-1: the
    producer's next sequence, 0 for a new producer or epoch); ``leader_epoch``, the partition
    leader epoch every v2 batch carries (None: the latest epoch of the leader-epoch-checkpoint,
    else 0); when segments roll (``roll``). Contradicting settings raise errors.UsageError."""

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
    leader_epoch: Optional[int] = None
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES

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
        if self.producer_id < 0 and (self.producer_epoch >= 0 or self.base_sequence >= 0):
            raise UsageError("--producer-epoch and --base-sequence need --producer-id")
        if not -1 <= self.producer_epoch <= INT16_MAX:
            raise UsageError("--producer-epoch must be from 0 to %d" % INT16_MAX)
        if not -1 <= self.base_sequence < SEQUENCE_MODULUS:
            raise UsageError("--base-sequence must be from 0 to %d" % (SEQUENCE_MODULUS - 1))
        if self.max_message_bytes < V2_BATCH_OVERHEAD + 1:
            raise UsageError("--max-message-bytes must be at least %d" % (V2_BATCH_OVERHEAD + 1))
        if self.leader_epoch is not None and not 0 <= self.leader_epoch < SEQUENCE_MODULUS:
            raise UsageError("--leader-epoch must be from 0 to %d" % (SEQUENCE_MODULUS - 1))

    @property
    def codec_id(self) -> int:
        return codecs.CODEC_NAMES.index(self.codec)

    @property
    def timestamp_type_id(self) -> int:
        return TIMESTAMP_TYPES[self.timestamp_type]


@dataclass(frozen=True)
class ProducedRecord:
    """A record from an idempotent or transactional producer: ``producer_epoch`` None is the
    producer's current epoch in the partition (0 for a new one), ``sequence`` None its next
    sequence. Records of one producer, epoch and transactional flag share batches; a record
    whose sequence is not the next one is refused (ProducerAppendInfo's checks for a client's
    append)."""

    record: Record
    producer_id: int
    producer_epoch: Optional[int] = None
    sequence: Optional[int] = None
    transactional: bool = False


@dataclass(frozen=True)
class Marker:
    """A transaction marker as a transaction coordinator writes one (WriteTxnMarkers): COMMIT
    (``commit``) or ABORT of ``producer_id``'s open transaction, at ``producer_epoch`` (None:
    the producer's current epoch), with ``coordinator_epoch``, at ``timestamp`` (None: now)."""

    commit: bool
    producer_id: int
    producer_epoch: Optional[int] = None
    coordinator_epoch: int = 0
    timestamp: Optional[int] = None


class RecordRun(List[Record]):
    """Plain Records given at once (each as a Record given alone): InputLines gives the
    records of consecutive JSON lines so, a read at a time; ``lines`` holds the line number of
    each, for the errors of a producer's checks."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: List[int] = []


# What append_records takes: a plain Record (from the settings' producer, if any), a record
# of a given producer, a run of plain Records, or a transaction marker
Item = Union[Record, ProducedRecord, Marker, RecordRun]


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
