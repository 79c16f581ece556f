"""`dump` of KRaft snapshot files: ``<20-digit end offset>-<10-digit epoch>.checkpoint`` and
``bootstrap.checkpoint`` (Snapshots.java, BootstrapDirectory), record batches like a segment,
dumped with the header line DumpLogSegments.dumpLog prints for them; a metadata log directory
expands to its snapshots in offset order.

The files are written here: v2 batches by kafka-python (tests/kafkagen.py), the snapshot's
control records (SnapshotHeaderRecord, SnapshotFooterRecord: ControlRecordType 3 and 4) and a
metadata record frame (MetadataRecordSerde: frame version, api key, version) encoded by hand
from Kafka's published layouts. Nothing here encodes with kafkalog_cli's code.
"""

import json
import os
import struct

import pytest
from kafka.record.memory_records import MemoryRecordsBuilder

import kafkagen as kg
from kafkagen import uvarint
from dumpcheck import batch_pairs, dump, dump_subprocess, json_objects, pairs

pytestmark = pytest.mark.usefixtures("implementation")

T0 = 1700000000000
SNAPSHOT_HEADER, SNAPSHOT_FOOTER = 3, 4


def compact_string(s):
    b = s.encode("utf-8")
    return uvarint(len(b) + 1) + b


def control_batch(type_id, value, base_offset, epoch=0, timestamp=T0):
    """A KRaft control batch as RecordsSnapshotWriter writes one: not transactional, no
    producer, one record with key = version int16 0 + type int16 (ControlRecordType)."""
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 31, offset=0,
                                   transactional=False, producer_id=-1, producer_epoch=-1,
                                   base_sequence=-1)
    builder.append(timestamp, struct.pack(">hh", 0, type_id), value, [])
    builder.close()
    buf = bytearray(builder.buffer())
    buf[22] |= kg.ATTR_CONTROL
    kg.fix_v2_crc(buf)
    kg.set_v2_header(buf, base_offset=base_offset, partition_leader_epoch=epoch)
    return bytes(buf)


def header_value(last_contained_ts):
    """SnapshotHeaderRecord v0 (flexible): Version int16, LastContainedLogTimestamp int64, no
    tagged fields."""
    return struct.pack(">hq", 0, last_contained_ts) + uvarint(0)


def footer_value():
    """SnapshotFooterRecord v0 (flexible): Version int16, no tagged fields."""
    return struct.pack(">h", 0) + uvarint(0)


def feature_level_record(name, level):
    """A metadata record as MetadataRecordSerde frames it: frame version 1, api key 12
    (FeatureLevelRecord), version 0; then Name compact string, FeatureLevel int16, no tagged
    fields."""
    return uvarint(1) + uvarint(12) + uvarint(0) + compact_string(name) + struct.pack(
        ">h", level) + uvarint(0)


def snapshot_bytes(records, epoch=3, last_ts=T0 - 5):
    """A whole snapshot: header control batch at offset 0, one batch of ``records`` (metadata
    frames, no keys), footer control batch."""
    data = control_batch(SNAPSHOT_HEADER, header_value(last_ts), 0, epoch)
    data += kg.v2_batch([kg.Rec(None, r, T0 + i) for i, r in enumerate(records)], base_offset=1,
                        partition_leader_epoch=epoch)
    data += control_batch(SNAPSHOT_FOOTER, footer_value(), 1 + len(records), epoch)
    return data


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


RECORDS = [feature_level_record("metadata.version", 8),
           feature_level_record("kraft.version", 1)]


def expected_record_lines(data, last_ts=T0 - 5):
    """The deep-iteration record lines of ``snapshot_bytes(RECORDS)``, from kafka-python's
    reading and the layouts above."""
    lines = []
    for kb in kg.kafka_python_read(data):
        for r in kb.records:
            head = ("| offset: %d CreateTime: %d keySize: %d valueSize: %d sequence: -1 "
                    "headerKeys: []" % (r.offset, r.timestamp, -1 if r.key is None else len(r.key),
                                        len(r.value)))
            if kb.batch.is_control_batch:
                type_id = struct.unpack(">hh", r.key)[1]
                if type_id == SNAPSHOT_HEADER:
                    head += ' SnapshotHeader {"version":0,"lastContainedLogTimestamp":%d}' % last_ts
                else:
                    head += ' SnapshotFooter {"version":0}'
            lines.append(head)
    return lines


def test_snapshot_file_header_and_batches(tmp_path):
    data = snapshot_bytes(RECORDS)
    path = write(tmp_path / "00000000000000000042-0000000007.checkpoint", data)
    res = dump("--deep-iteration", path)
    assert res.code == 0, res
    assert res.err == ""
    lines = res.lines
    assert lines[0] == "Dumping %s" % path
    assert lines[1] == "Snapshot end offset: 42, epoch: 7"
    kbs = kg.kafka_python_read(data)
    assert len(kbs) == 3
    records = iter(expected_record_lines(data))
    i = 2
    for kb in kbs:
        assert pairs(lines[i]) == batch_pairs(kb)
        i += 1
        for _ in kb.records:
            assert lines[i] == next(records)
            i += 1
    assert i == len(lines)


def test_bootstrap_snapshot_header(tmp_path):
    path = write(tmp_path / "bootstrap.checkpoint", snapshot_bytes(RECORDS[:1]))
    res = dump(path)
    assert res.code == 0, res
    assert res.lines[:2] == ["Dumping %s" % path, "KRaft bootstrap snapshot"]
    assert [pairs(line) for line in res.lines[2:]] == [
        batch_pairs(kb) for kb in kg.kafka_python_read(snapshot_bytes(RECORDS[:1]))]


def test_snapshot_records_numbered_from_zero_are_valid(tmp_path):
    """A snapshot's batches start at offset 0 whatever its end offset (RecordsSnapshotWriter):
    no 'offset below the base' complaint, exit 0, in a real process too."""
    path = write(tmp_path / "00000000000000500000-0000000002.checkpoint", snapshot_bytes(RECORDS))
    res = dump_subprocess("--print-data-log", path)
    assert res.code == 0, res
    assert res.err == "", res
    assert res.lines[1] == "Snapshot end offset: 500000, epoch: 2"


def test_corrupt_snapshot_is_invalid(tmp_path):
    data = bytearray(snapshot_bytes(RECORDS))
    data[-3] ^= 0x10  # inside the footer batch: its CRC fails
    path = write(tmp_path / "00000000000000000004-0000000001.checkpoint", data)
    res = dump(path)
    assert res.code == 1, res
    assert res.lines[-1].endswith("isvalid: false")


def test_metadata_log_dir_expands_to_snapshots_in_offset_order(tmp_path):
    part = tmp_path / "__cluster_metadata-0"
    part.mkdir()
    segment = kg.v2_batch([kg.Rec(None, RECORDS[0])]) + kg.v2_batch(
        [kg.Rec(None, RECORDS[1])], base_offset=1)
    write(part / "00000000000000000000.log", segment)
    # written out of order: the dump goes by end offset, then epoch
    names = ["00000000000000001000-0000000002.checkpoint",
             "00000000000000000020-0000000001.checkpoint",
             "00000000000000000020-0000000000.checkpoint"]
    for n in names:
        write(part / n, snapshot_bytes(RECORDS))
    write(part / "42-7.checkpoint", snapshot_bytes(RECORDS))  # not a name Kafka gives
    write(part / "quorum-state", b'{"leaderId":1}')
    write(tmp_path / "bootstrap.checkpoint", snapshot_bytes(RECORDS[:1]))
    res = dump(str(part))
    assert res.code == 0, res
    dumped = [line[len("Dumping "):] for line in res.lines if line.startswith("Dumping ")]
    assert dumped == [str(part / n) for n in ["00000000000000000000.log",
                                             "00000000000000000020-0000000000.checkpoint",
                                             "00000000000000000020-0000000001.checkpoint",
                                             "00000000000000001000-0000000002.checkpoint"]]
    assert sorted(res.err_lines) == sorted("Ignoring unknown file %s" % (part / n)
                                           for n in ["42-7.checkpoint", "quorum-state"])
    headers = [res.lines[i + 1] for i, line in enumerate(res.lines) if line.startswith("Dumping ")]
    assert headers == ["Log starting offset: 0", "Snapshot end offset: 20, epoch: 0",
                       "Snapshot end offset: 20, epoch: 1", "Snapshot end offset: 1000, epoch: 2"]
    # the log directory holding it: bootstrap.checkpoint (a file of the log directory) first
    res = dump(str(tmp_path))
    assert res.code == 0, res
    dumped = [line[len("Dumping "):] for line in res.lines if line.startswith("Dumping ")]
    assert dumped[0] == str(tmp_path / "bootstrap.checkpoint")
    assert dumped[1:] == [str(part / "00000000000000000000.log")] + [
        str(part / n) for n in sorted(names)]


def test_explicit_checkpoint_with_another_name_is_dumped(tmp_path):
    """Named on the command line, a .checkpoint is dumped as a snapshot whatever its name
    (Kafka's tool dispatches on the suffix); the header says the name holds no id."""
    data = snapshot_bytes(RECORDS)
    path = write(tmp_path / "copy.checkpoint", data)
    res = dump(path)
    assert res.code == 0, res
    assert res.lines[1].startswith("Snapshot end offset: unknown")
    assert len(res.lines) == 2 + len(kg.kafka_python_read(data))


def test_snapshot_json_lines(tmp_path):
    data = snapshot_bytes(RECORDS)
    path = write(tmp_path / "00000000000000000003-0000000001.checkpoint", data)
    res = dump("--format", "json", "--deep-iteration", path)
    assert res.code == 0, res
    objs = json_objects(res)
    controls = [o for o in objs if o["type"] == "record" and "controlType" in o]
    assert [(o["controlType"], o["data"]) for o in controls] == [
        ("SNAPSHOT_HEADER", {"version": 0, "lastContainedLogTimestamp": T0 - 5}),
        ("SNAPSHOT_FOOTER", {"version": 0})]
    assert [o["offset"] for o in objs if o["type"] == "record"] == [0, 1, 2, 3]
    assert json.dumps(objs)  # strict JSON throughout
    assert os.path.exists(path)


def test_snapshot_payloads_decoded_as_metadata_records_by_default(tmp_path):
    """With --print-data-log and no decoder chosen, a snapshot's records are shown as the
    metadata decoder shows them ({"type","version","data"}) in --format messages and json; a
    segment beside it is not. --format kafka prints the payloads as DumpLogSegments does, as
    text (every release does: tests/kafka_oracle/test_kafka_dump.py)."""
    data = snapshot_bytes(RECORDS)
    path = write(tmp_path / "00000000000000000003-0000000001.checkpoint", data)
    res = dump("--print-data-log", path)
    assert res.code == 0, res
    payloads = [line.split(" payload: ", 1)[1] for line in res.lines if " payload: " in line]
    assert payloads == [r.decode("utf-8", "replace") for r in RECORDS]
    res = dump("--format", "messages", "--print-data-log", path)
    assert res.code == 0, res
    payloads = [line.split(" payload: ", 1)[1] for line in res.lines if " payload: " in line]
    assert [json.loads(p) for p in payloads] == [
        {"type": "FEATURE_LEVEL_RECORD", "version": 0,
         "data": {"name": "metadata.version", "featureLevel": 8}},
        {"type": "FEATURE_LEVEL_RECORD", "version": 0,
         "data": {"name": "kraft.version", "featureLevel": 1}}]
    assert all(" key: " not in line for line in res.lines)
    res = dump("--format", "json", "--print-data-log", path)
    decoded = [o["valueDecoded"] for o in json_objects(res) if "valueDecoded" in o]
    assert [d["data"]["featureLevel"] for d in decoded] == [8, 1]
    # a decoder chosen applies instead
    res = dump("--value-decoder", "hex", path)
    payloads = [line.split(" payload: ", 1)[1] for line in res.lines if " payload: " in line]
    assert payloads == [r.hex() for r in RECORDS]
    # a segment is not decoded unless asked
    seg = write(tmp_path / "00000000000000000000.log", kg.v2_batch([kg.Rec(None, RECORDS[0])]))
    res = dump("--print-data-log", seg)
    assert res.lines[-1].endswith(" payload: " + RECORDS[0].decode("utf-8", "replace"))


def test_retain_leaves_kraft_snapshots_pending_deletion(tmp_path):
    """retain purges the segment files a broker left as .deleted; a KRaft snapshot pending
    deletion (<offset>-<epoch>.checkpoint.deleted) is the metadata log's, and stays."""
    from kafkalog_cli.log import retain
    snap = tmp_path / "00000000000000000020-0000000001.checkpoint.deleted"
    write(snap, snapshot_bytes(RECORDS))
    seg = tmp_path / "00000000000000000000.log.deleted"
    write(seg, kg.v2_batch([kg.Rec(None, RECORDS[0])]))
    assert retain.purge_deleted(str(tmp_path), 0, 0) == [seg.name]
    assert snap.exists()
