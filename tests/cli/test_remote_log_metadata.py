"""`dump --remote-log-metadata-decoder`: the records of `__remote_log_metadata` (tiered storage)
as DumpLogSegments' RemoteMetadataLogMessageParser prints them, the toString of Kafka's
RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemotePartitionDeleteMetadata and
RemoteLogSegmentMetadataSnapshot.

Records are encoded with tests/schemaenc.py from Kafka's own definitions (the copies in
tests/data/kafka-messages/storage/) in RemoteLogMetadataSerde's frame, written into segments
with tests/kafkagen.py; the expected lines are written here from the values put in, following
the toString methods of Kafka's classes (storage-api), never from our decoder."""

import base64
import json
import subprocess
import sys

import pytest

import schemaenc
from dumpcheck import dump
from kafkagen import Rec, v2_batch, write_segment

SPECS = schemaenc.all_specs()
REMOTE = sorted(n for n, s in SPECS.items() if s["_folder"] == "storage")
SEGMENT_STATES = ["COPY_SEGMENT_STARTED", "COPY_SEGMENT_FINISHED", "DELETE_SEGMENT_STARTED",
                  "DELETE_SEGMENT_FINISHED"]
DELETE_STATES = ["DELETE_PARTITION_MARKED", "DELETE_PARTITION_STARTED",
                 "DELETE_PARTITION_FINISHED"]
TOPIC_ID = bytes(range(1, 17))
SEGMENT_ID = bytes(range(200, 216))
T0 = 1700000000000


def uuid_text(raw):
    """Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def tip(name, partition):
    return {"Name": name, "Id": TOPIC_ID, "Partition": partition}


def tip_text(name, partition):
    """TopicIdPartition.toString."""
    return "%s:%s-%d" % (uuid_text(TOPIC_ID), name, partition)


def segment_id_text(name, partition):
    return "RemoteLogSegmentId{topicIdPartition=%s, id=%s}" % (tip_text(name, partition),
                                                                uuid_text(SEGMENT_ID))


def custom_text(custom):
    return "Optional.empty" if custom is None else "Optional[CustomMetadata{%d bytes}]" % len(
        custom)


def epochs_text(pairs):
    # a HashMap filled in order (a repeated epoch keeps its last offset), printed as a TreeMap
    m = dict(pairs)
    return "{" + ", ".join("%d=%d" % (k, m[k]) for k in sorted(m)) + "}"


def segment_values(state=1, custom=b"\x00\x01\x02", start=100, end=199,
                   epochs=((3, 150), (2, 100))):
    return {"RemoteLogSegmentId": {"TopicIdPartition": tip("orders", 7), "Id": SEGMENT_ID},
            "StartOffset": start, "EndOffset": end, "BrokerId": 4, "MaxTimestampMs": T0 + 5,
            "EventTimestampMs": T0 + 9,
            "SegmentLeaderEpochs": [{"LeaderEpoch": e, "Offset": o} for e, o in epochs],
            "SegmentSizeInBytes": 1048576, "CustomMetadata": custom,
            "RemoteLogSegmentState": state}


def segment_text(v):
    return ("RemoteLogSegmentMetadata{remoteLogSegmentId=%s, startOffset=%d, endOffset=%d, "
            "brokerId=%d, maxTimestampMs=%d, eventTimestampMs=%d, segmentLeaderEpochs=%s, "
            "segmentSizeInBytes=%d, customMetadata=%s, state=%s}" % (
                segment_id_text("orders", 7), v["StartOffset"], v["EndOffset"], v["BrokerId"],
                v["MaxTimestampMs"], v["EventTimestampMs"],
                epochs_text((e["LeaderEpoch"], e["Offset"]) for e in v["SegmentLeaderEpochs"]),
                v["SegmentSizeInBytes"], custom_text(v["CustomMetadata"]),
                SEGMENT_STATES[v["RemoteLogSegmentState"]]))


def update_values(state=2, custom=None):
    return {"RemoteLogSegmentId": {"TopicIdPartition": tip("orders", 7), "Id": SEGMENT_ID},
            "BrokerId": 5, "EventTimestampMs": T0 + 20, "CustomMetadata": custom,
            "RemoteLogSegmentState": state}


def update_text(v):
    return ("RemoteLogSegmentMetadataUpdate{remoteLogSegmentId=%s, customMetadata=%s, "
            "state=%s, eventTimestampMs=%d, brokerId=%d}" % (
                segment_id_text("orders", 7), custom_text(v["CustomMetadata"]),
                SEGMENT_STATES[v["RemoteLogSegmentState"]], v["EventTimestampMs"],
                v["BrokerId"]))


def delete_values(state=0):
    return {"TopicIdPartition": tip("payments", 0), "BrokerId": 1, "EventTimestampMs": T0 + 30,
            "RemotePartitionDeleteState": state}


def delete_text(v):
    return ("RemotePartitionDeleteMetadata{topicPartition=%s, state=%s, eventTimestampMs=%d, "
            "brokerId=%d}" % (tip_text("payments", 0),
                              DELETE_STATES[v["RemotePartitionDeleteState"]],
                              v["EventTimestampMs"], v["BrokerId"]))


def snapshot_values(state=3, custom=b"x" * 300, epochs=((0, 0), (1, 10), (0, 5))):
    return {"SegmentId": SEGMENT_ID, "StartOffset": 0, "EndOffset": 99, "BrokerId": 2,
            "MaxTimestampMs": T0 + 1, "EventTimestampMs": T0 + 2,
            "SegmentLeaderEpochs": [{"LeaderEpoch": e, "Offset": o} for e, o in epochs],
            "SegmentSizeInBytes": 4096, "CustomMetadata": custom, "RemoteLogSegmentState": state}


def snapshot_text(v):
    return ("RemoteLogSegmentMetadataSnapshot{segmentId=%s, startOffset=%d, endOffset=%d, "
            "maxTimestampMs=%d, segmentLeaderEpochs=%s, segmentSizeInBytes=%d, "
            "customMetadata=%s, state=%s}" % (
                uuid_text(SEGMENT_ID), v["StartOffset"], v["EndOffset"], v["MaxTimestampMs"],
                epochs_text((e["LeaderEpoch"], e["Offset"]) for e in v["SegmentLeaderEpochs"]),
                v["SegmentSizeInBytes"], custom_text(v["CustomMetadata"]),
                SEGMENT_STATES[v["RemoteLogSegmentState"]]))


CASES = {
    "RemoteLogSegmentMetadataRecord": [(segment_values(), segment_text),
                                       (segment_values(state=0, custom=None, start=0, end=0,
                                                       epochs=((5, 0), (5, 0))), segment_text)],
    "RemoteLogSegmentMetadataUpdateRecord": [(update_values(), update_text),
                                             (update_values(3, b"abc"), update_text)],
    "RemotePartitionDeleteMetadataRecord": [(delete_values(s), delete_text) for s in (0, 1, 2)],
    "RemoteLogSegmentMetadataSnapshotRecord": [(snapshot_values(), snapshot_text),
                                               (snapshot_values(0, None, ((7, 1),)),
                                                snapshot_text)],
}


def frame(name, version, values):
    """RemoteLogMetadataSerde's frame (AbstractApiMessageSerde) then the message."""
    return schemaenc.metadata_frame(SPECS[name], version, values)


def all_versions(name):
    lo, hi = schemaenc.versions(SPECS[name]["validVersions"])
    return sorted({lo, hi})


def records():
    """(value bytes, expected payload text, expected JSON object) for every record type at its
    lowest and highest version."""
    out = []
    for name in REMOTE:
        for version in all_versions(name):
            for values, text in CASES[name]:
                obj = {"type": schemaenc.type_name(name), "version": version,
                       "data": schemaenc.expected_json(SPECS[name], version, values)}
                out.append((frame(name, version, values), text(values), obj))
    return out


def payloads(stdout):
    return [line.split(" payload: ", 1)[1] for line in stdout.splitlines()
            if " payload: " in line]


def test_every_record_type_is_covered():
    # the vendored definitions are the four record types RemoteLogMetadataSerde reads
    assert REMOTE == sorted(CASES)


@pytest.mark.parametrize("fmt", ["kafka", "messages"])
def test_every_record_type_printed_as_kafka_objects(tmp_path, fmt):
    recs = records()
    path = write_segment(str(tmp_path), 0, v2_batch([Rec(None, v) for v, _, _ in recs]))
    # the option implies --print-data-log
    r = dump("--remote-log-metadata-decoder", "--format", fmt, path)
    assert r.code == 0, r
    assert payloads(r.out) == [text for _, text, _ in recs]
    # no key: the parser returns none
    assert " key: " not in r.out


def test_json_embeds_the_decoded_record(tmp_path):
    recs = records()
    path = write_segment(str(tmp_path), 0, v2_batch([Rec(None, v) for v, _, _ in recs]))
    r = dump("--remote-log-metadata-decoder", "--format", "json", path)
    assert r.code == 0, r
    rows = [json.loads(x) for x in r.out.splitlines() if '"type":"record"' in x]
    assert [row["valueDecoded"] for row in rows] == [obj for _, _, obj in recs]


def bad_records():
    """(value, expected payload after "Error at offset <o>, skipping. ")."""
    seg = "RemoteLogSegmentMetadataRecord"
    upd = "RemoteLogSegmentMetadataUpdateRecord"
    good = frame(seg, 0, segment_values())
    return [
        # an apiKey the storage module's MetadataRecordType does not know
        (b"\x01\x09\x00", "org.apache.kafka.common.errors.UnsupportedVersionException: "
                          "Unknown metadata id 9"),
        (good[:-4], "Failed to deserialize record with type 0"),
        (good + b"\x00\x00", "Found 2 byte(s) of garbage after 0"),
        (b"\x02" + good[1:], "Could not deserialize metadata record due to unknown frame "
                             "version 2(only frame version 1 is supported)"),
        (b"", "Error while reading frame version"),
        # the objects' constructors
        (frame(seg, 0, segment_values(start=-1)),
         "Unexpected start offset = -1. StartOffset for a remote segment cannot be negative"),
        (frame(seg, 0, segment_values(start=10, end=9)),
         "Unexpected end offset = 9. EndOffset for a remote segment cannot be less than "
         "startOffset = 10"),
        (frame(seg, 0, segment_values(epochs=())), "segmentLeaderEpochs can not be null or empty"),
        (frame(seg, 0, segment_values(state=4)), "state can not be null"),
        (frame(upd, 0, update_values(state=-1)), "state can not be null"),
        # Objects.requireNonNull(state) without a message
        (frame("RemotePartitionDeleteMetadataRecord", 0, delete_values(3)), "null"),
        (frame("RemoteLogSegmentMetadataSnapshotRecord", 0, snapshot_values(state=9, epochs=())),
         "state can not be null"),
        (frame("RemoteLogSegmentMetadataSnapshotRecord", 0, snapshot_values(epochs=())),
         "segmentLeaderEpochs can not be null or empty"),
    ]


@pytest.mark.parametrize("fmt", ["kafka", "json"])
def test_a_record_that_does_not_decode_is_an_error_line_and_the_dump_goes_on(tmp_path, fmt):
    bad = bad_records()
    good = frame("RemotePartitionDeleteMetadataRecord", 0, delete_values(1))
    values = []
    for value, _ in bad:
        values += [value, good]
    values.append(None)  # a null value: record.value.remaining throws
    base = 40
    path = write_segment(str(tmp_path), base, v2_batch([Rec(b"k", v) for v in values],
                                                       base_offset=base))
    r = dump("--remote-log-metadata-decoder", "--format", fmt, path)
    assert r.code == 0, r
    want = []
    for i, (_, why) in enumerate(bad):
        want.append("Error at offset %d, skipping. %s" % (base + 2 * i, why))
        want.append(delete_text(delete_values(1)))
    null_text = ("Error at offset %d, skipping. Cannot invoke \"java.nio.ByteBuffer.remaining()\" "
                 "because the return value of \"org.apache.kafka.common.record.Record.value()\" "
                 "is null" % (base + len(values) - 1))
    want.append(null_text)
    if fmt == "json":
        rows = [json.loads(x) for x in r.out.splitlines() if '"type":"record"' in x]
        got = [row.get("valueError") or row["valueDecoded"] for row in rows]
        for g, w in zip(got, want):
            if isinstance(g, dict):
                assert g["type"] == "REMOTE_PARTITION_DELETE_METADATA_RECORD"
                assert g["data"]["remotePartitionDeleteState"] == 1
            else:
                assert g == w
        assert len(got) == len(want)
        # the reason Kafka's "Failed to deserialize" leaves out is kept aside
        assert rows[2]["valueErrorCause"]
        return
    assert payloads(r.out) == want
    assert " key: " not in r.out


@pytest.mark.parametrize("others, wins", [
    (["--share-group-state-decoder"], "remote"),
    (["--cluster-metadata-decoder"], "cluster"),
    (["--transaction-log-decoder"], "transaction"),
])
def test_kafka_precedence_between_decoders(tmp_path, others, wins):
    value = frame("RemotePartitionDeleteMetadataRecord", 0, delete_values(2))
    path = write_segment(str(tmp_path), 0, v2_batch([Rec(None, value)]))
    r = dump(*others, "--remote-log-metadata-decoder", path)
    assert r.code == 0, r
    if wins == "remote":
        assert payloads(r.out) == [delete_text(delete_values(2))]
        return
    assert "RemotePartitionDeleteMetadata{" not in r.out
    if wins == "cluster":
        # apiKey 2 read as KRaft's (TopicRecord), which these bytes are not
        [payload] = payloads(r.out)
        assert payload.startswith("Error at 0, skipping. ")


def test_real_process(tmp_path):
    values, texts = [], []
    for value, text, _ in records():
        values.append(value)
        texts.append(text)
    path = write_segment(str(tmp_path), 0, v2_batch([Rec(None, v) for v in values]))
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", "dump",
                        "--remote-log-metadata-decoder", path],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert payloads(p.stdout) == texts
