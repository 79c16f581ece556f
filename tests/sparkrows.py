"""Rows the Spark tests expect, from kafka-python's reading of the segments (never from
kafkalog_cli's), and the rows of what Spark wrote (Arrow tables, part files), shaped alike for
comparison."""

import glob
import os

import pyarrow as pa

import kafkagen as kg


def topic_partition(directory):
    topic, _, number = os.path.basename(directory).rpartition("-")
    return topic, int(number)


def kafka_python_batches(data):
    """(KBatch, records) of every entry kafka-python reads; the records of a batch that fails
    its CRC are not decoded (None)."""
    return [(kb, list(kb.batch) if kb.crc_ok else None)
            for kb in kg.kafka_python_read(data, deep=False)]


def kafka_python_rows(log_path, include_control=False):
    """The rows of one segment, one per record of its valid batches, as kafka-python parses
    the file."""
    topic, partition = topic_partition(os.path.dirname(log_path))
    with open(log_path, "rb") as f:
        data = f.read()
    out = []
    for kb, records in kafka_python_batches(data):
        b = kb.batch
        v2 = b.magic >= 2
        control = v2 and b.is_control_batch
        if (control and not include_control) or records is None:
            continue
        for r in records:
            out.append({
                "key": r.key, "value": r.value, "topic": topic, "partition": partition,
                "offset": r.offset, "timestamp": r.timestamp,  # None for v0
                "timestampType": -1 if r.timestamp_type is None else r.timestamp_type,
                "headers": [(k, v) for k, v in r.headers] if v2 else [],
                "segment": os.path.basename(log_path), "batchPosition": kb.position,
                "magic": b.magic, "codec": kg.CODEC_NAMES[b.compression_type],
                "producerId": b.producer_id if v2 else -1,
                "isTransactional": bool(v2 and b.is_transactional), "isControl": control,
                "isValid": True})
    return out


def logs_under(root):
    return sorted(glob.glob(os.path.join(str(root), "*", "*.log")))


def kafka_python_dir_rows(root, include_control=False):
    return [r for log in logs_under(root) for r in kafka_python_rows(log, include_control)]


def by_segment(rows):
    """{(topic, partition, segment): [rows in the order given]}."""
    out = {}
    for r in rows:
        out.setdefault((r["topic"], r["partition"], r["segment"]), []).append(r)
    return out


def order(rows):
    return sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"],
                                       r["batchPosition"]))



# -- what Spark wrote ------------------------------------------------------------------------------

def arrow_rows(table, **constants):
    """A table written by Spark as row dicts like ``collect``'s (timestamp in ms)."""
    i = table.schema.get_field_index("timestamp")
    ms = table.column(i).cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())
    table = table.set_column(i, "timestamp", ms)
    rows = []
    for r in table.to_pylist():
        r["headers"] = [(h["key"], h["value"]) for h in r["headers"]]
        r.update(constants)
        rows.append(r)
    return rows


def part_files(out, ext):
    files = sorted(glob.glob(os.path.join(str(out), "**", "part-*" + ext), recursive=True))
    assert files, "no part files under %s" % out
    return files
