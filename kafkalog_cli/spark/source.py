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

import os

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..format.records import NO_TIMESTAMP_TYPE, Batch
from ..format.errors import CorruptRecordError
from ..log import files
from ..log.files import FileFormatError, expand_path, file_kind
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
    logs = [p for p in expand_path(path, kinds=(files.LOG,))
            if file_kind(p) == files.LOG and not files.lifecycle_suffix(p)]
    if topics:
        logs = [p for p in logs if topic_partition(p)[0] in topics]
    out = []
    for log in logs:
        size = os.path.getsize(log)
        cuts = [0]
        if size > max_bytes:
            index_path = files.segment_file(log, files.INDEX)
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
        return ((self.from_offset is None or offset >= self.from_offset)
                and (self.to_offset is None or offset <= self.to_offset)
                and (self.from_ts is None or ts >= self.from_ts)
                and (self.to_ts is None or ts <= self.to_ts))


class _Columns:
    """Column lists of the rows being built, turned into an Arrow record batch."""

    NAMES = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
             "headers", "segment", "batchPosition", "magic", "codec", "producerId",
             "isTransactional", "isControl", "isValid")

    def __init__(self):
        self.cols = {n: [] for n in self.NAMES}

    def __len__(self):
        return len(self.cols["offset"])

    def batch_fields(self, topic, partition, segment, b, valid):
        return {"topic": topic, "partition": partition, "segment": segment,
                "batchPosition": b.position, "magic": b.magic, "codec": b.codec_name,
                "producerId": b.producer_id, "isTransactional": b.is_transactional,
                "isControl": b.is_control, "isValid": valid,
                "timestampType": b.timestamp_type if b.timestamp_type != NO_TIMESTAMP_TYPE else -1}

    def add_records(self, fields, recs, keep):
        c = self.cols
        n = 0
        headers = recs.headers
        for i, (off, ts, k, v) in enumerate(zip(recs.offsets, recs.timestamps, recs.keys, recs.values)):
            if keep is not None and not keep(off, ts):
                continue
            c["key"].append(k)
            c["value"].append(v)
            c["offset"].append(off)
            c["timestamp"].append(ts * 1000 if ts >= 0 else None)
            c["headers"].append([{"key": hk, "value": hv} for hk, hv in headers[i]]
                                if headers is not None else [])
            n += 1
        for name, value in fields.items():
            c[name].extend([value] * n)

    def add_invalid(self, fields, offset):
        c = self.cols
        for name in ("key", "value", "timestamp"):
            c[name].append(None)
        c["offset"].append(offset)
        c["headers"].append([])
        for name, value in fields.items():
            c[name].append(value)

    def to_arrow(self, schema):
        import pyarrow as pa
        arrays = [pa.array(self.cols[f.name], type=f.type) for f in schema]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


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
            if bounds.to_offset is not None and item.base_offset > bounds.to_offset:
                break
            if item.is_control and not include_control:
                continue
            try:
                recs = log.records(item) if item.is_valid else None
            except CorruptRecordError:
                recs = None
            if recs is None:
                if include_invalid:
                    cols.add_invalid(cols.batch_fields(topic, partition, segment, item, False),
                                     item.base_offset)
                continue
            cols.add_records(cols.batch_fields(topic, partition, segment, item, True), recs, keep)
            if len(cols) >= ROWS_PER_ARROW_BATCH:
                yield cols.to_arrow(schema)
                cols = _Columns()
    if len(cols):
        yield cols.to_arrow(schema)


def _invalid_fields(topic, partition, segment, item):
    return {"topic": topic, "partition": partition, "segment": segment,
            "batchPosition": item.position, "magic": None, "codec": None, "producerId": None,
            "isTransactional": None, "isControl": None, "isValid": False, "timestampType": None}


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
