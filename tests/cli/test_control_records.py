"""The raft control records (ControlRecordType 2-6: LeaderChangeMessage, SnapshotHeaderRecord,
SnapshotFooterRecord, KRaftVersionRecord, VotersRecord) in `kafkalog dump`: values written by
the tests' own encoder (tests/schemaenc.py, from Kafka's JSON definitions vendored under
tests/data/kafka-messages/clients/), at the version Kafka's ControlRecordUtils reads (0), and
compared with the JSON form Kafka's generated converters write (schemaenc.expected_json), in
the kafka text formats, the messages format and JSON Lines. A value that does not decode makes
the record invalid (exit 1), as Kafka's reader refuses it."""

import json
import os
import struct

import pytest

import schemaenc
from dumpcheck import dump, kafkalog
from kafkagen import ATTR_CONTROL, Rec, fix_v2_crc, v2_batch, write_segment

SPECS = schemaenc.all_specs()
DIR_A, DIR_B = bytes(range(16)), bytes([0xFB] * 16)

# (ControlRecordType id, message, values, label in kafka-dump-log's line)
CASES = [
    (2, "LeaderChangeMessage", {"Version": 0, "LeaderId": 3,
                                "Voters": [{"VoterId": 1}, {"VoterId": 2}, {"VoterId": 3}],
                                "GrantingVoters": [{"VoterId": 3}, {"VoterId": 1}]},
     "LeaderChange"),
    (3, "SnapshotHeaderRecord", {"Version": 0, "LastContainedLogTimestamp": 1700000000123},
     "SnapshotHeader"),
    (4, "SnapshotFooterRecord", {"Version": 0}, "SnapshotFooter"),
    (5, "KRaftVersionRecord", {"Version": 0, "KRaftVersion": 1}, "KRaftVersion"),
    (6, "VotersRecord", {"Version": 0, "Voters": [
        {"VoterId": 1, "VoterDirectoryId": DIR_A,
         "Endpoints": [{"Name": "CONTROLLER", "Host": "c1.example", "Port": 9093},
                       {"Name": "CONTROLLER_SSL", "Host": "c1.example", "Port": 65535}],
         "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1}},
        {"VoterId": 2, "VoterDirectoryId": DIR_B, "Endpoints": [],
         "KRaftVersionFeature": {"MinSupportedVersion": 1, "MaxSupportedVersion": 1}}]},
     "KRaftVoters"),
]
IDS = [c[1] for c in CASES]
NAMES = {2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION",
         6: "KRAFT_VOTERS"}


def control_segment(tmp_path, type_id, value):
    """A log segment of one KRaft control batch (one record, key = version 0 + type)."""
    batch = bytearray(v2_batch([Rec(struct.pack(">hh", 0, type_id), value)], base_offset=0))
    batch[22] |= ATTR_CONTROL
    fix_v2_crc(batch)
    return write_segment(str(tmp_path), 0, bytes(batch))


def _compact(obj):
    return json.dumps(obj, separators=(",", ":"))


def _record_lines(out):
    return [x for x in out.splitlines() if x.startswith(("| offset: 0 ", "offset: 0 "))]


@pytest.mark.parametrize("type_id,message,values,label", CASES, ids=IDS)
@pytest.mark.parametrize("kafka_format", ["3.x", "4.2", "4.3"])
def test_kafka_text(tmp_path, type_id, message, values, label, kafka_format):
    spec = SPECS[message]
    path = control_segment(tmp_path, type_id, schemaenc.encode(spec, 0, values))
    r = dump("--deep-iteration", "--kafka-format", kafka_format, path)
    assert r.code == 0, r.err
    [line] = _record_lines(r.out)
    expected = _compact(schemaenc.expected_json(spec, 0, values))
    if type_id == 2 and kafka_format == "3.x":
        # Kafka 3.x and 4.0 print a leader change by its type only; 4.1's Scala tool prints it
        # as JSON as the Java tool does (Kafka 4.2.1's DumpLogSegments:
        # tests/kafka_oracle/test_kafka_dump.py)
        assert line.endswith(" controlType: LEADER_CHANGE(2)"), line
    else:
        assert line.endswith(" %s%s %s" % (label, ":" if type_id == 2 else "", expected)), line


@pytest.mark.parametrize("type_id,message,values,label", CASES, ids=IDS)
def test_messages_format(tmp_path, type_id, message, values, label):
    spec = SPECS[message]
    path = control_segment(tmp_path, type_id, schemaenc.encode(spec, 0, values))
    r = dump("--format", "messages", path)
    assert r.code == 0, r.err
    [line] = _record_lines(r.out)
    # the default --kafka-format 4.2 prints a leader change as JSON, as Kafka 4.2.1 does
    assert line.endswith(" %s%s %s" % (label, ":" if type_id == 2 else "",
                                       _compact(schemaenc.expected_json(spec, 0, values)))), line


@pytest.mark.parametrize("type_id,message,values,label", CASES, ids=IDS)
def test_json_lines(tmp_path, type_id, message, values, label):
    spec = SPECS[message]
    path = control_segment(tmp_path, type_id, schemaenc.encode(spec, 0, values))
    r = dump("--format", "json", "--deep-iteration", path)
    assert r.code == 0, r.err
    [rec] = [json.loads(x) for x in r.out.splitlines() if '"type":"record"' in x]
    assert rec["controlType"] == NAMES[type_id] and rec["controlTypeId"] == type_id
    assert rec["data"] == schemaenc.expected_json(spec, 0, values)
    assert list(rec["data"]) == list(schemaenc.expected_json(spec, 0, values))


@pytest.mark.parametrize("type_id,message,values,label", CASES, ids=IDS)
def test_value_that_does_not_decode_is_invalid(tmp_path, type_id, message, values, label,
                                               implementation):
    """The record's line says INVALID, in both builds: the pure-Python writer once lost it
    (its warning flushed the pending lines into a new list, and the line went to the old)."""
    value = schemaenc.encode(SPECS[message], 0, values)
    path = control_segment(tmp_path, type_id, value[:-2])  # cut inside the message
    r = dump("--deep-iteration", path)
    assert r.code == 1, (r.out, r.err)
    assert "control record at offset 0: " in r.err
    [line] = _record_lines(r.out)
    assert line.endswith(" controlType: INVALID"), line
    r = dump("--format", "json", "--deep-iteration", path)
    assert r.code == 1
    [rec] = [json.loads(x) for x in r.out.splitlines() if '"type":"record"' in x]
    assert rec["controlError"] and "data" not in rec


def test_null_voters_array_is_invalid(tmp_path):
    # Voters is not nullable: Kafka's generated VotersRecord.read refuses a null array
    value = struct.pack(">h", 0) + b"\x00" + b"\x00"  # version, null compact array, no tags
    r = dump("--deep-iteration", control_segment(tmp_path, 6, value))
    assert r.code == 1, r.out
    assert "non-nullable field Voters was serialized as null" in r.err


@pytest.mark.parametrize("cut", [0, 2])
def test_recover_cuts_at_a_voters_record_that_does_not_decode(tmp_path, cut):
    """recover applies the readers' rule (LogLoader's recovery stops at the first invalid
    batch): a raft control value that does not decode ends the valid log (cut=2), a whole one
    does not (cut=0)."""
    spec = SPECS["VotersRecord"]
    value = schemaenc.encode(spec, 0, CASES[4][2])
    first = v2_batch([Rec(None, b"a" * 50)], base_offset=0)
    control = bytearray(v2_batch([Rec(struct.pack(">hh", 0, 6), value[:len(value) - cut])],
                                 base_offset=1))
    control[22] |= ATTR_CONTROL
    fix_v2_crc(control)
    last = v2_batch([Rec(None, b"b" * 50)], base_offset=2)
    part = tmp_path / "__cluster_metadata-0"
    path = write_segment(str(part), 0, first, bytes(control), last)
    res = kafkalog("recover", str(part))
    size = os.path.getsize(path)
    if cut:
        assert "control record at offset 1" in res.out + res.err, res
        assert size == len(first), res
    else:
        assert "control record" not in res.out + res.err, res
        assert size == len(first) + len(control) + len(last), res
