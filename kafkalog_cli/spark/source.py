"""The `kafkalog` Spark data source: segments of a log directory as a DataFrame.

    from kafkalog_cli.spark import register
    register(spark)
    df = spark.read.format("kafkalog").load("/var/lib/kafka/data")

One input partition per segment; a segment larger than ``maxBytesPerPartition`` (128 MiB by
default) is split further at batch starts taken from its .index. Each task decodes its part with
the same core as `kafkalog dump` and yields Arrow record batches. The schema follows Spark's own
Kafka source (key, value, topic, partition, offset, timestamp, timestampType, headers) plus where
each record lives and what its batch says.
"""

import array
import itertools
import os

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..format.records import NO_TIMESTAMP_TYPE, Batch, Records, held_back
from ..format.errors import CorruptRecordError
from ..log.files import FileFormatError, expand_path
from ..log import names
from ..log.names import file_kind
from ..log.index import OffsetIndex
from ..log.seek import Seek
from ..log.segment import DEFAULT_MAX_MESSAGE_SIZE, LogFile

SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
          "timestamp timestamp, timestampType int, "
          "headers array<struct<key: string, value: binary>>, segment string, "
          "batchPosition long, magic int, codec string, producerId long, "
          "isTransactional boolean, isControl boolean, isValid boolean")
DEFAULT_MAX_BYTES_PER_PARTITION = 128 * 1024 * 1024
ROWS_PER_ARROW_BATCH = 65536
_NO_RECORDS = Records()  # a batch of no records (never changed)
_NO_RECORDS.headers = []
BYTES_PER_ARROW_BATCH = 256 * 1024 * 1024  # well below the 2 GiB a binary column can hold


def _bool(value):
    return str(value).lower() in ("1", "true", "yes")


def _int(value):
    return None if value is None or value == "" else int(value)


def topic_partition(log_path):
    """(topic, partition) from the directory name ``topic-N``, else (directory name, -1)."""
    name = os.path.basename(os.path.dirname(os.path.abspath(log_path)))
    topic, _, number = name.rpartition("-")
    return (topic, int(number)) if topic and number.isdigit() else (name, -1)


class SegmentSlice(InputPartition):
    """Bytes [start, end) of one segment: every batch starting there is this task's."""

    def __init__(self, path, start, end):
        super().__init__((path, start, end))
        self.path = path
        self.start = start
        self.end = end


def segment_slices(path, topics=None, max_bytes=DEFAULT_MAX_BYTES_PER_PARTITION):
    """The input partitions of a log directory, partition directory or segment file."""
    logs = [p for p in expand_path(path, kinds=(names.LOG,))
            if file_kind(p) == names.LOG and not names.lifecycle_suffix(p)]
    if topics:
        logs = [p for p in logs if topic_partition(p)[0] in topics]
    out = []
    for log in logs:
        size = os.path.getsize(log)
        cuts = [0]
        if size > max_bytes:
            index_path = names.sibling(log, names.INDEX)
            try:
                index = OffsetIndex(index_path) if os.path.isfile(index_path) else None
            except (OSError, FileFormatError):
                index = None
            if index is not None and not index.sanity_problems():
                for _, position in index.entries:
                    if 0 < position < size and position - cuts[-1] >= max_bytes:
                        cuts.append(position)
        cuts.append(size)
        out.extend(SegmentSlice(log, a, b) for a, b in zip(cuts, cuts[1:]) if b > a or size == 0)
    return out


class Bounds:
    """fromOffset/toOffset/fromTimestamp/toTimestamp: a filter on records; the indexes only
    move a task's start past what cannot match."""

    def __init__(self, options):
        self.from_offset = _int(options.get("fromoffset"))
        self.to_offset = _int(options.get("tooffset"))
        self.from_ts = _int(options.get("fromtimestamp"))
        self.to_ts = _int(options.get("totimestamp"))

    @property
    def any(self):
        return any(v is not None for v in (self.from_offset, self.to_offset, self.from_ts, self.to_ts))

    def keep(self, offset, ts):
        """Inside the bounds? A record without a timestamp (v0) is outside any time bound,
        as a filter on the (null) timestamp column would have it."""
        return ((self.from_offset is None or offset >= self.from_offset)
                and (self.to_offset is None or offset <= self.to_offset)
                and (self.from_ts is None or ts >= self.from_ts)
                and (self.to_ts is None or 0 <= ts <= self.to_ts))


class _Columns:
    """The rows being built, column by column (whole batches at a time, no per-row Python
    objects), turned into an Arrow record batch."""

    def __init__(self):
        self.keys, self.values, self.offsets, self.timestamps = [], [], [], []
        self.header_counts, self.header_keys, self.header_values = [], [], []
        self.runs = []  # (row count, per-batch fields): the columns that are constant per batch
        self.rows = 0
        self.data_bytes = 0

    def __len__(self):
        return self.rows

    @staticmethod
    def batch_fields(topic, partition, segment, b, valid):
        return (topic, partition, segment, b.position, b.magic, b.codec_name, b.producer_id,
                b.is_transactional, b.is_control, valid,
                b.timestamp_type if b.timestamp_type != NO_TIMESTAMP_TYPE else -1)

    def add_records(self, fields, recs, keep):
        if keep is not None:
            wanted = [i for i, (off, ts) in enumerate(zip(recs.offsets, recs.timestamps))
                      if keep(off, ts)]
            if len(wanted) != len(recs):
                recs = recs.select(wanted)
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

    def add_invalid(self, fields, offset):
        self.keys.append(None)
        self.values.append(None)
        self.offsets.append(offset)
        self.timestamps.append(-1)
        self.header_counts.append(0)
        self.runs.append((1, fields))
        self.rows += 1

    def to_arrow(self, schema):
        import pyarrow as pa
        import pyarrow.compute as pc
        ts = pa.array(self.timestamps, pa.int64())
        ts = pc.if_else(pc.less(ts, 0), None, ts).cast(pa.timestamp("ms", tz="UTC")).cast(
            schema.field("timestamp").type)
        header_offsets = pa.array([0] + list(_accumulate(self.header_counts)), pa.int32())
        headers = pa.ListArray.from_arrays(header_offsets, pa.StructArray.from_arrays(
            [pa.array(self.header_keys, pa.string()), pa.array(self.header_values, pa.binary())],
            names=["key", "value"]))
        per_batch = list(zip(*(fields for _, fields in self.runs)))
        counts = [n for n, _ in self.runs]
        indices = pa.array([i for i, n in enumerate(counts) for _ in range(n)], pa.int32())
        constant = {name: pa.array(values, schema.field(name).type).take(indices)
                    for name, values in zip(_BATCH_FIELD_NAMES, per_batch)}
        columns = {"key": _binary_array(self.keys), "value": _binary_array(self.values),
                   "offset": pa.array(self.offsets, pa.int64()), "timestamp": ts, "headers": headers}
        columns.update(constant)
        return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)


def _binary_array(values):
    """An Arrow binary array of bytes-or-None values, built from one joined buffer and its
    offsets: several times faster than pa.array() on a list of bytes objects."""
    import pyarrow as pa
    bitmap = None
    if None in values:
        bitmap = pa.array([v is not None for v in values], pa.bool_()).buffers()[1]
        values = [b"" if v is None else v for v in values]
    offsets = array.array("i", [0])
    offsets.extend(itertools.accumulate(map(len, values)))
    return pa.Array.from_buffers(pa.binary(), len(values),
                                 [bitmap, pa.py_buffer(offsets), pa.py_buffer(b"".join(values))])


_BATCH_FIELD_NAMES = ("topic", "partition", "segment", "batchPosition", "magic", "codec",
                      "producerId", "isTransactional", "isControl", "isValid", "timestampType")


def _accumulate(counts):
    total = 0
    for c in counts:
        total += c
        yield total


def _arrow_schema():
    import pyarrow as pa
    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                      ("partition", pa.int32()), ("offset", pa.int64()),
                      ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
                      ("headers", pa.list_(header)), ("segment", pa.string()),
                      ("batchPosition", pa.int64()), ("magic", pa.int32()), ("codec", pa.string()),
                      ("producerId", pa.int64()), ("isTransactional", pa.bool_()),
                      ("isControl", pa.bool_()), ("isValid", pa.bool_())])


def read_slice(part, options):
    """Arrow record batches of the records of one input partition."""
    schema = _arrow_schema()
    include_control = _bool(options.get("includecontrol", "false"))
    include_invalid = _bool(options.get("includeinvalid", "false"))
    max_message_size = int(options.get("maxmessagesize", DEFAULT_MAX_MESSAGE_SIZE))
    bounds = Bounds(options)
    keep = bounds.keep if bounds.any else None
    topic, partition = topic_partition(part.path)
    segment = os.path.basename(part.path)
    cols = _Columns()
    with LogFile(part.path, max_message_size) as log:
        start = part.start
        if bounds.any and part.start == 0:
            seek = Seek(bounds.from_offset, None, bounds.from_ts, None)
            start = seek.start_position(log)[0]
        for item in log.entries(start, log.size):
            if item.position >= part.end:
                break
            if not isinstance(item, Batch):
                if include_invalid:
                    cols.add_invalid(_invalid_fields(topic, partition, segment, item), None)
                break  # the rest of the segment is not batches
            if item.is_control and not include_control:
                continue
            # Records a chunk at a time (a batch may hold millions); a chunk is used once the
            # next one decoded, so that a batch damaged in its first chunk is one invalid row.
            chunks = held_back(log.iter_records(item)) if item.is_valid else None
            try:
                recs = None if chunks is None else next(chunks, _NO_RECORDS)
            except CorruptRecordError:
                recs = None
            if bounds.to_offset is not None:
                # a legacy compressed wrapper's offset is its last inner one: use its first
                first = recs.offsets[0] if recs is not None and len(recs) else item.base_offset
                if first > bounds.to_offset:
                    break
            if recs is None:
                if include_invalid:
                    cols.add_invalid(cols.batch_fields(topic, partition, segment, item, False),
                                     item.base_offset)
                continue
            fields = cols.batch_fields(topic, partition, segment, item, True)
            while recs is not None:
                cols.add_records(fields, recs, keep)
                if len(cols) >= ROWS_PER_ARROW_BATCH or cols.data_bytes >= BYTES_PER_ARROW_BATCH:
                    yield cols.to_arrow(schema)
                    cols = _Columns()
                try:
                    recs = next(chunks, None)
                except CorruptRecordError:
                    recs = None  # damage after the first chunk: the rows before it, then a mark
                    if include_invalid:
                        cols.add_invalid(cols.batch_fields(topic, partition, segment, item, False),
                                         item.base_offset)
    if len(cols):
        yield cols.to_arrow(schema)


def _invalid_fields(topic, partition, segment, item):
    """The per-batch fields of a row standing for invalid bytes (no batch to speak of)."""
    return (topic, partition, segment, item.position, None, None, None, None, None, False, None)


class KafkalogReader(DataSourceReader):
    def __init__(self, options):
        # Spark hands options over with their names in lower case
        self.options = {k.lower(): v for k, v in options.items()}

    def partitions(self):
        path = self.options.get("path")
        topics = [t for t in self.options.get("topics", "").split(",") if t]
        max_bytes = int(self.options.get("maxbytesperpartition", DEFAULT_MAX_BYTES_PER_PARTITION))
        return segment_slices(path, topics, max_bytes) or [SegmentSlice("", 0, 0)]

    def read(self, partition):
        if not partition.path:
            return iter(())
        return read_slice(partition, self.options)


class KafkalogDataSource(DataSource):
    """spark.read.format("kafkalog").load(path): options includeControl, includeInvalid,
    fromOffset, toOffset, fromTimestamp, toTimestamp, topics, maxBytesPerPartition,
    maxMessageSize."""

    @classmethod
    def name(cls):
        return "kafkalog"

    def schema(self):
        return SCHEMA

    def reader(self, schema):
        if not self.options.get("path"):
            raise ValueError("kafkalog: load(path) needs a log directory, partition directory "
                             "or segment file")
        return KafkalogReader(self.options)
