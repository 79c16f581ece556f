"""The `kafkalog` Spark data source: segments of a log directory as a DataFrame.

    from kafkalog_cli.spark import register
    register(spark)
    df = spark.read.format("kafkalog").load("/var/lib/kafka/data")

One input partition per segment; a segment larger than the split size is split further at batch
starts taken from its .index. The split size is ``maxBytesPerPartition`` when given, else chosen
from the data and the cores as Spark's file sources choose theirs (FilePartition.maxSplitBytes):
the total bytes over ``minPartitions`` (the export job passes Spark's defaultParallelism), at
least 4 MiB, at most 128 MiB, so that every core has a slice. Each task reads its part with
the library's one record iterator (log.read.SegmentReader, as `kafkalog dump` does) and yields
Arrow record batches. The schema follows Spark's own Kafka source (key, value, topic, partition,
offset, timestamp, timestampType, headers) plus where each record lives and what its batch says.

The bounds mean what they mean everywhere else (log.seek.Seek, `kafkalog dump`'s options):
``fromOffset``/``toOffset`` inclusive; ``fromTimestamp`` starts each partition at its first
record, in offset order, whose timestamp is at least it (offsets-for-times, as a consumer's
KafkaConsumer.offsetsForTimes and UnifiedLog.fetchOffsetByTimestamp have it: later records are
kept even where their timestamps go back), found on the driver; ``toTimestamp`` keeps the
records whose timestamp is at most it. A record without a timestamp (v0) is outside any time
bound.
"""

from __future__ import annotations

import array
import bisect
import itertools
import os
from dataclasses import dataclass
from typing import (TYPE_CHECKING, Any, Iterator, List, Mapping, NamedTuple, Optional,
                    Sequence, Set, Tuple, Union)

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..format.errors import CorruptRecordError, LimitExceededError
from ..format.records import NO_TIMESTAMP_TYPE, Batch, Records
from ..format.scan import InvalidBytes
from ..log import names
from ..log.files import FileFormatError, NoSegmentsError, printable_name
from ..log.logdir import partitions_of
from ..log.partition import Partition
from ..log.read import (CONTROL, NOT_DECODED, RECORDS, BatchProblem, BatchRead, BytesProblem,
                        SegmentReader, offset_for_time, to_say)
from ..log.seek import Seek
from ..log.segment import DEFAULT_MAX_MESSAGE_SIZE, LogFile, Segment

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
          "timestamp timestamp, timestampType int, "
          "headers array<struct<key: string, value: binary>>, segment string, "
          "batchPosition long, magic int, codec string, producerId long, "
          "isTransactional boolean, isControl boolean, isValid boolean")
DEFAULT_MAX_BYTES_PER_PARTITION = 128 * 1024 * 1024  # spark.sql.files.maxPartitionBytes
OPEN_COST_BYTES = 4 * 1024 * 1024  # spark.sql.files.openCostInBytes: a file's cost to open
ROWS_PER_ARROW_BATCH = 65536
BYTES_PER_ARROW_BATCH = 256 * 1024 * 1024  # well below the 2 GiB a binary column can hold

# The columns of a row that are constant per batch, in the order of _BATCH_FIELD_NAMES (None
# where a row stands for bytes that are no batch)
BatchFields = Tuple[str, int, str, int, Optional[int], Optional[str], Optional[int],
                    Optional[bool], Optional[bool], bool, Optional[int]]


def _bool(value: Any) -> bool:
    return str(value).lower() in ("1", "true", "yes")


def _int(value: Any) -> Optional[int]:
    return None if value is None or value == "" else int(value)


class Options:
    """The data source's options, parsed once (names in any case: Spark hands them over in
    lower case)."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        o = {k.lower(): v for k, v in options.items()}
        self.path = o.get("path")
        self.include_control = _bool(o.get("includecontrol", "false"))
        self.include_invalid = _bool(o.get("includeinvalid", "false"))
        self.from_offset = _int(o.get("fromoffset"))
        self.to_offset = _int(o.get("tooffset"))
        self.from_timestamp = _int(o.get("fromtimestamp"))
        self.to_timestamp = _int(o.get("totimestamp"))
        self.topics = [t for t in str(o.get("topics") or "").split(",") if t]
        self.max_bytes = _int(o.get("maxbytesperpartition"))
        self.min_partitions = _int(o.get("minpartitions"))
        self.max_message_size = int(o.get("maxmessagesize", DEFAULT_MAX_MESSAGE_SIZE))
        self.compacted = _bool(o.get("compacted", "false"))


class PartitionLogs(NamedTuple):
    """The segment files of one partition to read: ``logs``, .log paths in offset order."""
    topic: str
    partition: int
    logs: List[str]


def partition_key(directory: str) -> Tuple[str, int]:
    """(topic, partition) of the rows read from ``directory``: from its name ``<topic>-<n>``,
    else (the directory's name, -1)."""
    directory = os.path.abspath(directory)
    topic, number = names.topic_partition(directory)
    if topic is None or number is None:
        return os.path.basename(directory), -1
    return topic, number


def partition_logs(path: str, topics: Sequence[str] = ()) -> List[PartitionLogs]:
    """The partitions under ``path`` and their live segments (Partition.segments): a segment
    file stands for itself alone, a partition directory for its segments, a log directory for
    those of every partition in it (topic and partition-number order). ``topics``: only these.

    Raises OSError for a path (or a partition directory in it) that cannot be read, UsageError
    for a file that is not a .log, NoSegmentsError when no segment is found."""
    errors: List[Tuple[str, OSError]] = []
    directories = partitions_of(path, errors)
    if errors:
        raise errors[0][1]
    if os.path.isdir(path):
        found = [PartitionLogs(*partition_key(d), [s.log_path for s in Partition(d).segments()])
                 for d in sorted(directories, key=names.partition_sort_key)]
        if not any(p.logs for p in found):
            raise NoSegmentsError("%s: no Kafka log files in this directory or the partition "
                                  "directories in it" % printable_name(path))
    else:
        # a segment file named on its own (its name need not be an offset); one being deleted,
        # cleaned or swapped holds no live records
        found = [PartitionLogs(*partition_key(directories[0]),
                               [] if names.lifecycle_suffix(path) else [path])]
    return [p for p in found if not topics or p.topic in topics]


@dataclass
class SegmentSlice(InputPartition):
    """Bytes [start, end) of one segment of partition (``topic``, ``partition``): every batch
    starting there is this task's. ``from_offset``: the partition's first wanted offset (the
    fromOffset and fromTimestamp bounds, resolved on the driver), or None."""

    path: str
    start: int
    end: int
    topic: str = ""
    partition: int = -1
    from_offset: Optional[int] = None


@dataclass
class CompactedPartition(InputPartition):
    """All the segments (``logs``, in offset order) of partition (``topic``, ``partition``),
    read as if compacted by one task: ``from_offset`` as for SegmentSlice."""

    logs: List[str]
    topic: str = ""
    partition: int = -1
    from_offset: Optional[int] = None

    @property
    def path(self) -> str:
        return os.path.dirname(self.logs[0])


# what one task reads
Piece = Union[SegmentSlice, CompactedPartition]


def read_piece(piece: Piece, options: Options,
               problems: Optional[List["Problem"]] = None) -> Iterator[Any]:
    """read_slice or read_compacted, as ``piece`` is."""
    if isinstance(piece, CompactedPartition):
        return read_compacted(piece, options)
    return read_slice(piece, options, problems)


def _cuts(log: str, max_bytes: int) -> List[int]:
    """Where to split the segment file ``log``: [0, batch starts..., size], into as many slices
    of about equal size as it takes for none to be much over ``max_bytes``: each cut is the
    batch start of a sane .index (OffsetIndex.sanityCheck) nearest to its even share. Without
    such an index the segment is one slice."""
    size = os.path.getsize(log)
    cuts = [0]
    if size > max_bytes:
        segment = Segment.at(log)
        try:
            index = segment.offset_index() if os.path.isfile(segment.index_path) else None
        except (OSError, FileFormatError):
            index = None
        if index is not None and not index.sanity_problems():
            starts = sorted({p for _, p in index.entries if 0 < p < size})
            pieces = -(-size // max_bytes)
            for i in range(1, pieces):
                share = size * i // pieces
                at = bisect.bisect_left(starts, share)
                near = min(starts[max(at - 1, 0):at + 1], key=lambda p: abs(p - share),
                           default=None)
                if near is not None and near > cuts[-1]:
                    cuts.append(near)
    cuts.append(size)
    return cuts


def split_bytes(sizes: Sequence[int], parallelism: Optional[int]) -> int:
    """The size of a slice when none is given (maxBytesPerPartition): the bytes of the
    segments ``sizes`` (each also costing OPEN_COST_BYTES, as opening a file does) spread over
    ``parallelism`` cores, between OPEN_COST_BYTES and DEFAULT_MAX_BYTES_PER_PARTITION, as
    Spark's FilePartition.maxSplitBytes has it for its file sources."""
    if not parallelism or parallelism < 1:
        return DEFAULT_MAX_BYTES_PER_PARTITION
    per_core = (sum(sizes) + OPEN_COST_BYTES * len(sizes)) // parallelism
    return min(DEFAULT_MAX_BYTES_PER_PARTITION, max(OPEN_COST_BYTES, per_core))


def slices(path: str, options: Options) -> "List[Piece]":
    """The input partitions of a log directory, partition directory or segment file, with the
    first wanted offset of each partition: ``fromTimestamp`` is looked up here, once per
    partition, as offsets-for-times (log.read.offset_for_time, from ``fromOffset`` on); a
    partition with no record at or after it gives no slice. The segments are cut every
    ``maxBytesPerPartition`` bytes or more, else every split_bytes (``minPartitions``). With
    ``compacted``, each partition is one input partition (CompactedPartition)."""
    out: List[Piece] = []
    parts = partition_logs(path, options.topics)
    max_bytes = options.max_bytes
    if max_bytes is None:
        max_bytes = split_bytes([os.path.getsize(log) for p in parts for log in p.logs],
                                options.min_partitions)
    for part in parts:
        from_offset = options.from_offset
        if options.from_timestamp is not None:
            from_offset = offset_for_time([Segment.at(p) for p in part.logs],
                                          options.from_timestamp, options.max_message_size,
                                          from_offset=options.from_offset)
            if from_offset is None:
                continue
        if options.compacted:
            if part.logs:
                out.append(CompactedPartition(part.logs, part.topic, part.partition,
                                              from_offset))
            continue
        for log in part.logs:
            cuts = _cuts(log, max_bytes)
            out.extend(SegmentSlice(log, a, b, part.topic, part.partition, from_offset)
                       for a, b in zip(cuts, cuts[1:]) if b > a or cuts[-1] == 0)
    return out


class _Columns:
    """The rows being built, column by column (whole batches at a time, no per-row Python
    objects), turned into an Arrow record batch."""

    def __init__(self) -> None:
        self.keys: List[Optional[bytes]] = []
        self.values: List[Optional[bytes]] = []
        self.offsets: List[Optional[int]] = []
        self.timestamps: List[int] = []
        self.header_counts: List[int] = []
        self.header_keys: List[str] = []
        self.header_values: List[Optional[bytes]] = []
        # (row count, per-batch fields): the columns that are constant per batch
        self.runs: List[Tuple[int, BatchFields]] = []
        self.rows = 0
        self.data_bytes = 0

    def __len__(self) -> int:
        return self.rows

    @staticmethod
    def batch_fields(topic: str, partition: int, segment: str, b: Batch,
                     valid: bool) -> BatchFields:
        return (topic, partition, segment, b.position, b.magic, b.codec_name, b.producer_id,
                b.is_transactional, b.is_control, valid,
                b.timestamp_type if b.timestamp_type != NO_TIMESTAMP_TYPE else -1)

    def add_records(self, fields: BatchFields, recs: Records) -> None:
        n = len(recs)
        if not n:
            return
        self.keys.extend(recs.keys)
        self.values.extend(recs.values)
        self.offsets.extend(recs.offsets)
        self.timestamps.extend(recs.timestamps)
        if recs.headers is None or not any(recs.headers):
            self.header_counts.extend([0] * n)
        else:
            for hdrs in recs.headers:
                self.header_counts.append(len(hdrs))
                for hk, hv in hdrs:
                    self.header_keys.append(hk)
                    self.header_values.append(hv)
        self.runs.append((n, fields))
        self.rows += n
        self.data_bytes += sum(map(len, filter(None, recs.values)))

    def add_invalid(self, fields: BatchFields, offset: Optional[int]) -> None:
        self.keys.append(None)
        self.values.append(None)
        self.offsets.append(offset)
        self.timestamps.append(-1)
        self.header_counts.append(0)
        self.runs.append((1, fields))
        self.rows += 1

    def to_arrow(self, schema: pa.Schema) -> pa.RecordBatch:
        import pyarrow as pa
        timestamps: Sequence[Optional[int]] = self.timestamps
        if self.timestamps and min(self.timestamps) < 0:  # no timestamp (-1): a null
            timestamps = [t if t >= 0 else None for t in self.timestamps]
        ts = arrow_array(timestamps, pa.int64()).view(pa.timestamp("ms", tz="UTC")).cast(
            schema.field("timestamp").type)
        header_offsets = array.array("i", [0])
        header_offsets.extend(itertools.accumulate(self.header_counts))
        headers = pa.ListArray.from_arrays(
            arrow_array(header_offsets, pa.int32()), pa.StructArray.from_arrays(
                [arrow_array(self.header_keys, pa.string()), _binary_array(self.header_values)],
                names=["key", "value"]))
        per_batch = list(zip(*(fields for _, fields in self.runs)))
        indices = array.array("i", itertools.chain.from_iterable(
            itertools.repeat(i, n) for i, (n, _) in enumerate(self.runs)))
        take = arrow_array(indices, pa.int32())
        constant = {name: arrow_array(values, schema.field(name).type).take(take)
                    for name, values in zip(_BATCH_FIELD_NAMES, per_batch)}
        columns = {"key": _binary_array(self.keys), "value": _binary_array(self.values),
                   "offset": arrow_array(self.offsets, pa.int64()), "timestamp": ts,
                   "headers": headers}
        columns.update(constant)
        return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)


# Arrow arrays are built here from buffers (array.array, bytes), never by pa.array() on a
# Python sequence: pa.array() asks of each sequence whether it is a pandas object, which imports
# pandas (0.2 s in every Python worker, for nothing) wherever pandas is installed.
_ARRAY_CODES = {"int32": "i", "int64": "q"}


def arrow_array(values: Sequence[Any], arrow_type: pa.DataType) -> pa.Array:
    """An Arrow array of ``arrow_type`` (string, bool, int32 or int64) holding ``values``
    (None: a null)."""
    import pyarrow as pa
    if arrow_type == pa.string():
        return _binary_array([None if v is None else v.encode("utf-8")
                              for v in values]).view(pa.string())
    validity = None if isinstance(values, array.array) else _validity(values)
    if validity is not None:
        values = [0 if v is None else v for v in values]
    if arrow_type == pa.bool_():
        data = _bool_array(values).buffers()[1]
    else:
        code = _ARRAY_CODES[str(arrow_type)]
        if not (isinstance(values, array.array) and values.typecode == code):
            values = array.array(code, values)
        data = pa.py_buffer(values)
    return pa.Array.from_buffers(arrow_type, len(values), [validity, data])


def _validity(values: Sequence[Any]) -> Optional[pa.Buffer]:
    """The validity bitmap of ``values`` (a bit a value, 0 for None), or None without a None."""
    if None not in values:
        return None
    return _bool_array([v is not None for v in values]).buffers()[1]


def _bool_array(flags: Sequence[Any]) -> pa.Array:
    """An Arrow bool array of the truth of each of ``flags`` (none of them None)."""
    import pyarrow as pa
    return pa.Array.from_buffers(pa.uint8(), len(flags), [None, pa.py_buffer(bytes(
        map(bool, flags)))]).cast(pa.bool_())


def _binary_array(values: Sequence[Optional[bytes]]) -> pa.Array:
    """An Arrow binary array of bytes-or-None values, built from one joined buffer and its
    offsets: several times faster than pa.array() on a list of bytes objects."""
    import pyarrow as pa
    bitmap = _validity(values)
    data = [b"" if v is None else v for v in values]
    offsets = array.array("i", [0])
    offsets.extend(itertools.accumulate(map(len, data)))
    return pa.Array.from_buffers(pa.binary(), len(data),
                                 [bitmap, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])


_BATCH_FIELD_NAMES = ("topic", "partition", "segment", "batchPosition", "magic", "codec",
                      "producerId", "isTransactional", "isControl", "isValid", "timestampType")


def _arrow_schema() -> pa.Schema:
    import pyarrow as pa
    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                      ("partition", pa.int32()), ("offset", pa.int64()),
                      ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
                      ("headers", pa.list_(header)), ("segment", pa.string()),
                      ("batchPosition", pa.int64()), ("magic", pa.int32()), ("codec", pa.string()),
                      ("producerId", pa.int64()), ("isTransactional", pa.bool_()),
                      ("isControl", pa.bool_()), ("isValid", pa.bool_())])


class Problem(NamedTuple):
    """Invalid data met by a task, as `kafkalog scan` counts it (log.summary): a batch
    (``size`` None: its CRC fails, its records cannot be read or its offsets are out of place)
    or ``size`` bytes that are no batch, at ``position`` of the segment; ``text`` says which and
    why in scan's words ("batch at P: ...", "N bytes at P: ...")."""
    position: int
    size: Optional[int]
    text: str


def read_slice(part: SegmentSlice, options: Options,
               problems: Optional[List[Problem]] = None) -> Iterator[Any]:
    """Arrow record batches of the rows of one input partition (as ``slices`` made it): the
    records of its valid batches within the bounds and, with includeInvalid, a row for each
    batch whose CRC fails or whose records cannot be read, and one for bytes that are no batch
    (the rest of the slice is then not read). Each invalid batch or stretch of bytes is also
    appended to ``problems`` when given (whether or not it becomes a row)."""
    schema = _arrow_schema()
    bounds = (part.from_offset, options.to_offset, None, options.to_timestamp)
    seek = Seek(*bounds) if bounds != (None,) * 4 else None
    topic, partition = part.topic, part.partition
    segment = os.path.basename(part.path)
    include_invalid = options.include_invalid
    said: Set[int] = set()  # the positions of the batches already in problems

    def problem(batch: Batch, message: str) -> None:
        if problems is not None and batch.position not in said:
            said.add(batch.position)
            problems.append(Problem(batch.position, None, "batch at %d: %s"
                                    % (batch.position, message)))

    cols = _Columns()
    fields: Optional[BatchFields] = None
    with LogFile(part.path, options.max_message_size) as log:
        reader = SegmentReader(log, seek=seek, records=True, start=part.start, stop=part.end,
                               valid_only=True, skip_control=not options.include_control)
        for event in reader:
            if isinstance(event, BatchRead):
                batch = event.batch
                if event.records is not None:
                    if event.first or fields is None:
                        fields = cols.batch_fields(topic, partition, segment, batch, True)
                    cols.add_records(fields, event.records)
                    if (len(cols) >= ROWS_PER_ARROW_BATCH
                            or cols.data_bytes >= BYTES_PER_ARROW_BATCH):
                        yield cols.to_arrow(schema)
                        cols = _Columns()
                elif not batch.is_valid:
                    # its CRC fails: its records are not rows (scan names what is wrong
                    # with them, if anything, rather than the CRC)
                    if problems is not None:
                        problem(batch, _crc_problem(log, batch))
                    if include_invalid:
                        cols.add_invalid(cols.batch_fields(topic, partition, segment, batch,
                                                           False), batch.base_offset)
            elif isinstance(event, BatchProblem):
                # records that cannot be read (the rows before the damage were given); a batch
                # out of place (MISPLACED) is read as it is; a malformed control record
                # (CONTROL) is a row as the others; batches out of place are said once a
                # stretch (MISPLACED_STRETCH)
                if to_say(event) and event.kind != CONTROL:
                    problem(event.batch, event.message)
                if event.kind in (RECORDS, NOT_DECODED) and include_invalid:
                    cols.add_invalid(cols.batch_fields(topic, partition, segment, event.batch,
                                                       False), event.batch.base_offset)
            elif isinstance(event, BytesProblem):
                item = event.item
                if problems is not None and event.counted:
                    # not resynchronised: the bytes up to the slice's end are not read
                    size = min(item.position + item.size, part.end) - item.position
                    problems.append(Problem(item.position, size, "%d bytes at %d: %s"
                                            % (size, item.position, item.reason)))
                if include_invalid:
                    cols.add_invalid(_invalid_fields(topic, partition, segment, item), None)
                break  # the rest of the slice is not batches
    if len(cols):
        yield cols.to_arrow(schema)


def read_compacted(part: CompactedPartition, options: Options) -> Iterator[Any]:
    """Arrow record batches of the rows of one partition as if the log cleaner had cleaned all
    of it and every tombstone's delete horizon had passed: of each key, its last record, unless
    that is a tombstone; keyless records, control batches and the records of aborted
    transactions left out (Cleaner.buildOffsetMap's map over the whole log, then
    shouldRetainRecord). The bounds apply to the rows, not to the map. Valid batches only."""
    import hashlib

    from ..log.cleaner import _aborted_ranges, _in_aborted
    schema = _arrow_schema()
    directory = os.path.dirname(os.path.abspath(part.logs[0]))
    aborted, _ = _aborted_ranges(Partition(directory), 0)
    md5 = hashlib.md5

    def data_records(log: LogFile, seek: Optional[Seek]) -> Iterator[BatchRead]:
        reader = SegmentReader(log, seek=seek, records=True, valid_only=True, skip_control=True)
        for event in reader:
            if isinstance(event, BatchRead) and event.records is not None:
                batch = event.batch
                if not (batch.is_transactional
                        and _in_aborted(aborted, batch.producer_id, batch.base_offset)):
                    yield event

    latest = {}
    for path in part.logs:
        with LogFile(path, options.max_message_size) as log:
            for event in data_records(log, None):
                recs = event.records
                assert recs is not None
                for offset, key in zip(recs.offsets, recs.keys):
                    if key is not None:
                        latest[md5(key).digest()] = offset
    bounds = (part.from_offset, options.to_offset, None, options.to_timestamp)
    seek = Seek(*bounds) if bounds != (None,) * 4 else None
    cols = _Columns()
    for path in part.logs:
        segment = os.path.basename(path)
        with LogFile(path, options.max_message_size) as log:
            for event in data_records(log, seek):
                recs = event.records
                assert recs is not None
                keep = [i for i, (offset, key, value) in enumerate(
                    zip(recs.offsets, recs.keys, recs.values))
                    if key is not None and value is not None
                    and latest.get(md5(key).digest()) == offset]
                if keep:
                    fields = cols.batch_fields(part.topic, part.partition, segment, event.batch,
                                               True)
                    cols.add_records(fields, recs.select(keep))
                    if (len(cols) >= ROWS_PER_ARROW_BATCH
                            or cols.data_bytes >= BYTES_PER_ARROW_BATCH):
                        yield cols.to_arrow(schema)
                        cols = _Columns()
    if len(cols):
        yield cols.to_arrow(schema)


def _crc_problem(log: LogFile, batch: Batch) -> str:
    """What `kafkalog scan` says of a batch whose CRC fails: why its records cannot be read,
    else "CRC mismatch" (log.summary)."""
    try:
        for _ in log.iter_records(batch):
            pass
    except LimitExceededError:
        pass  # valid as far as the records go: not decoded
    except CorruptRecordError as e:
        return str(e)
    return "CRC mismatch"


def _invalid_fields(topic: str, partition: int, segment: str,
                    item: InvalidBytes) -> BatchFields:
    """The per-batch fields of a row standing for invalid bytes (no batch to speak of)."""
    return (topic, partition, segment, item.position, None, None, None, None, None, False, None)


class KafkalogReader(DataSourceReader):
    def __init__(self, options: Mapping[str, Any]) -> None:
        self.options = Options(options)

    def partitions(self) -> "List[Piece]":
        return slices(self.options.path or "", self.options) or [SegmentSlice("", 0, 0)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if isinstance(partition, CompactedPartition):
            return read_compacted(partition, self.options)
        if not isinstance(partition, SegmentSlice) or not partition.path:
            return iter(())
        return read_slice(partition, self.options)


class KafkalogDataSource(DataSource):
    """spark.read.format("kafkalog").load(path), path a log directory, partition directory or
    segment file. Options:

    - includeControl (false): the records of control batches (transaction markers) too;
    - includeInvalid (false): a row with isValid=false for each batch whose CRC fails or whose
      records cannot be read, and for bytes that are no batch;
    - fromOffset, toOffset: only the records in these offsets (inclusive);
    - fromTimestamp: in each partition, start at the first record (in offset order, from
      fromOffset on) whose timestamp is at least it, as offsets-for-times does; later records
      are kept whatever their timestamps;
    - toTimestamp: only the records whose timestamp is at most it;
    - topics: only these topics (comma-separated);
    - maxBytesPerPartition: larger segments are split at batch starts of their .index (by
      default: the total bytes over minPartitions, between 4 MiB and 128 MiB);
    - minPartitions: the cores to make slices for (none: segments split every 128 MiB);
    - maxMessageSize (5 MiB): the largest record read;
    - compacted (false): each partition read as if the log cleaner had cleaned all of it and
      every tombstone's delete horizon had passed: of each key its last record, unless a
      tombstone; no keyless record, no record of an aborted transaction, no control record,
      valid batches only (one task per partition).
    """

    @classmethod
    def name(cls) -> str:
        return "kafkalog"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> KafkalogReader:
        if not self.options.get("path"):
            raise ValueError("kafkalog: load(path) needs a log directory, partition directory "
                             "or segment file")
        return KafkalogReader(self.options)
