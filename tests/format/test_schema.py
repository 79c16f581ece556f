"""format/schema.py against an independent encoder (tests/schemaenc.py) written from Kafka's
own message definitions (tests/data/kafka-messages/), and `dump --cluster-metadata-decoder`
on a real KRaft segment and on segments written here."""

import base64
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import time

import pytest

import schemaenc
from dumpcheck import REPO
from kafkagen import ATTR_CONTROL, Rec, fix_v2_crc, v2_batch, write_segment
from kafkalog_cli.format import jackson, layouts, metadata_record, schema
from kafkalog_cli.format.errors import CorruptRecordError

REAL_SEGMENT = os.path.join(REPO, "tests", "data", "__cluster_metadata-0", "00000000000000000000.log")

SPECS = schemaenc.all_specs()
METADATA = sorted(n for n, s in SPECS.items() if s["_folder"] == "metadata")
CASES = []
for _name, _spec in sorted(SPECS.items()):
    _lo, _hi = schemaenc.versions(_spec["validVersions"])
    for _v in sorted({_lo, _hi}):
        CASES.append((_name, _v))


_check_fields = schemaenc.check_fields


def test_every_vendored_definition_is_transcribed():
    # besides them: older releases' values the newest cannot read (tests/format/test_schema_kafka4.py)
    earlier = {m for c in ("group", "share", "transaction") for t in range(64)
               for m in layouts.coordinator_earlier_values(c, t)}
    assert sorted(SPECS) == [m for m in layouts.messages() if m not in earlier]
    for name, spec in SPECS.items():
        assert layouts.valid_versions(name) == schemaenc.versions(spec["validVersions"])


@pytest.mark.parametrize("name,version", CASES)
@pytest.mark.parametrize("tags", ["absent", "present", "mixed"])
def test_decode_matches_independent_encoder(name, version, tags):
    spec = SPECS[name]
    for seed in range(4):
        values = schemaenc.random_values(spec, version, random.Random(seed), tags)
        data = schemaenc.encode(spec, version, values)
        prefix = b"\x07\x07"
        value, end = schema.decode(name, version, memoryview(prefix + data), len(prefix))
        assert end == len(prefix) + len(data)
        _check_fields(schemaenc.expected_json(spec, version, values), value,
                      "%s v%d" % (name, version))


@pytest.mark.parametrize("name,version", [c for c in CASES if schemaenc.flexible(
    SPECS[c[0]], c[1])])
def test_tagged_fields_written_at_their_default_are_left_out(name, version):
    spec = SPECS[name]
    values = schemaenc.random_values(spec, version, random.Random(3), "absent")
    data = schemaenc.encode(spec, version, values, write_default_tags=True)
    value, end = schema.decode(name, version, data)
    assert end == len(data)
    assert value == schemaenc.expected_json(spec, version, values)


def test_tagged_field_present_and_absent_by_hand():
    # PartitionRecord v2: LeaderRecoveryState (tag 0), EligibleLeaderReplicas (tag 1)
    spec = SPECS["PartitionRecord"]
    base = {"PartitionId": 4, "TopicId": bytes(range(16)), "Replicas": [1, 2], "Isr": [1],
            "RemovingReplicas": [], "AddingReplicas": [], "Leader": 1, "LeaderEpoch": 7,
            "PartitionEpoch": 9, "Directories": [bytes(16), bytes(16)]}
    absent = schema.decode("PartitionRecord", 2, schemaenc.encode(spec, 2, base))[0]
    assert "leaderRecoveryState" not in absent and "eligibleLeaderReplicas" not in absent
    assert absent["topicId"] == "AAECAwQFBgcICQoLDA0ODw"
    present = schema.decode("PartitionRecord", 2, schemaenc.encode(
        spec, 2, dict(base, LeaderRecoveryState=1, EligibleLeaderReplicas=[2])))[0]
    assert present["leaderRecoveryState"] == 1 and present["eligibleLeaderReplicas"] == [2]
    # tagged fields where the definition declares them (JsonConverterGenerator's order)
    assert list(present) == ["partitionId", "topicId", "replicas", "isr", "removingReplicas",
                             "addingReplicas", "leader", "leaderRecoveryState", "leaderEpoch",
                             "partitionEpoch", "directories", "eligibleLeaderReplicas"]


@pytest.mark.parametrize("name", METADATA)
def test_metadata_frame_every_type_lowest_and_highest(name):
    spec = SPECS[name]
    lo, hi = schemaenc.versions(spec["validVersions"])
    for version in sorted({lo, hi}):
        values = schemaenc.random_values(spec, version, random.Random(version), "present")
        type_name, got_version, value = metadata_record.decode_metadata_record(
            schemaenc.metadata_frame(spec, version, values))
        assert type_name == schemaenc.type_name(name)
        assert got_version == version
        _check_fields(schemaenc.expected_json(spec, version, values), value, name)
    assert layouts.metadata_type(spec["apiKey"]) == (name, schemaenc.type_name(name))


def test_lookups():
    assert layouts.coordinator_messages("group", 1) == ("OffsetCommitKey", "OffsetCommitValue")
    assert layouts.coordinator_messages("group", 2) == ("GroupMetadataKey", "GroupMetadataValue")
    assert layouts.coordinator_messages("transaction", 0) == ("TransactionLogKey",
                                                             "TransactionLogValue")
    assert layouts.coordinator_messages("share", 1) == ("ShareUpdateKey", "ShareUpdateValue")
    assert layouts.coordinator_messages("group", 999) is None
    assert layouts.control_message(2) == ("LeaderChangeMessage", "LEADER_CHANGE")
    assert layouts.control_message(6) == ("VotersRecord", "KRAFT_VOTERS")
    assert layouts.control_message(0) is None
    assert layouts.source()["commit"] == "26b251a451ce941d3d7a55e6487bcb7f16b5ad48"  # 4.3.1
    assert layouts.source()["version"] == "4.3.1"


def _frame(api_key, version, body):
    return schemaenc.uvarint(1) + schemaenc.uvarint(api_key) + schemaenc.uvarint(version) + body


@pytest.mark.parametrize("data,message", [
    (b"", "Error while reading frame version"),
    (b"\x00\x02\x00", "with frame version 0"),
    (b"\x02\x02\x00", "unknown frame version 2(only frame version 1 is supported)"),
    (b"\x01\xff\xff\x03\x00", "Value for type was too large."),
    (b"\x01\x7f\x00", "Unknown metadata id 127"),
    (b"\x01\x02\x09\x00", "Failed to deserialize record with type 2"),
])
def test_metadata_frame_errors(data, message):
    with pytest.raises(CorruptRecordError) as e:
        metadata_record.decode_metadata_record(data)
    assert message in str(e.value)


def test_truncated_and_garbage_records_are_errors():
    spec = SPECS["TopicRecord"]
    good = schemaenc.metadata_frame(spec, 0, {"Name": "orders", "TopicId": bytes(16)})
    for cut in range(len(good)):
        with pytest.raises(CorruptRecordError):
            metadata_record.decode_metadata_record(good[:cut])
    with pytest.raises(CorruptRecordError, match="Found 2 byte\\(s\\) of garbage after 2"):
        metadata_record.decode_metadata_record(good + b"\x00\x00")
    # an array count far beyond the bytes left: refused before anything is allocated
    huge = _frame(3, 0, b"\x00\x00\x00\x01" + bytes(16) + schemaenc.uvarint(2 ** 31))
    with pytest.raises(CorruptRecordError, match="Failed to deserialize record with type 3$") as e:
        metadata_record.decode_metadata_record(huge)
    assert "Tried to allocate a collection" in str(e.value.__cause__)
    with pytest.raises(CorruptRecordError, match="non-nullable field Name"):
        schema.decode("TopicRecord", 0, b"\x00" + bytes(16) + b"\x00")
    with pytest.raises(CorruptRecordError, match="Can't read version 5 of OffsetCommitValue"):
        schema.decode("OffsetCommitValue", 5, b"")


def test_non_flexible_versions_and_nulls():
    # OffsetCommitValue v1 (int16 strings, expireTimestamp only at v1), v3 (leaderEpoch), v4
    spec = SPECS["OffsetCommitValue"]
    for version in range(5):
        values = {"Offset": 42, "LeaderEpoch": 5, "Metadata": "m\u00e9ta",
                  "CommitTimestamp": 1700000000000, "ExpireTimestamp": 1800000000000}
        value, end = schema.decode("OffsetCommitValue", version,
                                   schemaenc.encode(spec, version, values))
        assert value == schemaenc.expected_json(spec, version, values)
        assert ("expireTimestamp" in value) == (version == 1)
        assert ("leaderEpoch" in value) == (version >= 3)


# -- dump --cluster-metadata-decoder ------------------------------------------------------------

def _dump(*args):
    return subprocess.run([sys.executable, "-m", "kafkalog_cli", "dump", *args],
                          capture_output=True, text=True, timeout=120)


def test_real_segment_decodes_without_error(tmp_path):
    path = shutil.copy(REAL_SEGMENT, tmp_path / "00000000000000000000.log")
    r = _dump("--cluster-metadata-decoder", str(path))
    assert r.returncode == 0, r.stderr
    payloads = [line.split(" payload: ", 1)[1] for line in r.stdout.splitlines()
                if line.startswith("| offset:")]
    assert len(payloads) == 4
    assert not any(p.startswith("Error at") for p in payloads)
    objs = [json.loads(p) for p in payloads]
    assert [o["type"] for o in objs] == ["FEATURE_LEVEL_RECORD", "TOPIC_RECORD",
                                         "PARTITION_RECORD", "PARTITION_RECORD"]
    assert objs[0] == {"type": "FEATURE_LEVEL_RECORD", "version": 0,
                       "data": {"name": "metadata.version", "featureLevel": 20}}
    assert objs[1]["data"]["name"] == "saz"
    assert objs[2]["data"]["topicId"] == objs[1]["data"]["topicId"]
    assert objs[3]["data"]["partitionId"] == 1 and objs[3]["data"]["isr"] == [1]
    # JSON Lines: the decoded record embedded as an object
    r = _dump("--cluster-metadata-decoder", "--format", "json", str(path))
    recs = [json.loads(x) for x in r.stdout.splitlines() if '"type":"record"' in x]
    assert [x["valueDecoded"] for x in recs] == objs


@pytest.mark.parametrize("fmt", ["kafka", "messages", "json"])
def test_dump_goes_on_after_a_record_that_does_not_decode(tmp_path, fmt):
    spec = SPECS["TopicRecord"]
    good = schemaenc.metadata_frame(spec, 0, {"Name": "a", "TopicId": bytes(16)})
    other = schemaenc.metadata_frame(SPECS["RemoveTopicRecord"], 0, {"TopicId": bytes(16)})
    recs = [Rec(None, good), Rec(b"some-key", b"\x01\x7f\x00"), Rec(None, good[:-3]),
            Rec(None, other), Rec(b"k", None)]
    path = write_segment(str(tmp_path), 5, v2_batch(recs, base_offset=5))
    r = _dump("--cluster-metadata-decoder", "--format", fmt, path)
    assert r.returncode == 0, r.stderr
    if fmt == "json":
        rows = [json.loads(x) for x in r.stdout.splitlines() if '"type":"record"' in x]
        assert rows[0]["valueDecoded"]["type"] == "TOPIC_RECORD"
        assert rows[1]["valueError"].startswith("Error at 6, skipping. ")
        assert "Unknown metadata id 127" in rows[1]["valueError"]
        assert rows[2]["valueError"] == ("Error at 7, skipping. Failed to deserialize record "
                                           "with type 2")
        assert rows[2]["valueErrorCause"]
        assert rows[4]["valueError"] == "Error at 9, skipping. Error while reading frame version"
        assert rows[3]["valueDecoded"]["type"] == "REMOVE_TOPIC_RECORD"
        return
    lines = [x for x in r.stdout.splitlines() if "payload" in x]
    assert len(lines) == 5
    assert lines[0].endswith(' payload: {"type":"TOPIC_RECORD","version":0,"data":{"name":"a",'
                             '"topicId":"AAAAAAAAAAAAAAAAAAAAAA"}}')
    # no key printed: Kafka's metadata parser returns none
    assert " key: " not in lines[1]
    assert " payload: Error at 6, skipping. " in lines[1]
    assert lines[2].endswith(" payload: Error at 7, skipping. Failed to deserialize record with "
                             "type 2")
    # a null value: Kafka's serde fails on its first read
    assert lines[4].endswith(" payload: Error at 9, skipping. Error while reading frame version")
    assert lines[3].endswith(' payload: {"type":"REMOVE_TOPIC_RECORD","version":0,'
                             '"data":{"topicId":"AAAAAAAAAAAAAAAAAAAAAA"}}')


def test_raft_control_records_still_printed_by_name(tmp_path):
    # a raft control batch (LeaderChangeMessage, ControlRecordType 2) between metadata batches
    leader = schemaenc.encode(SPECS["LeaderChangeMessage"], 0, {
        "Version": 0, "LeaderId": 1, "Voters": [{"VoterId": 1}], "GrantingVoters": [{"VoterId": 1}]})
    control = bytearray(v2_batch([Rec(struct.pack(">hh", 0, 2), leader)], base_offset=0))
    control[22] |= ATTR_CONTROL
    fix_v2_crc(control)
    noop = v2_batch([Rec(None, schemaenc.metadata_frame(SPECS["NoOpRecord"], 0, {}))],
                    base_offset=1)
    path = write_segment(str(tmp_path), 0, bytes(control), noop)
    r = _dump("--cluster-metadata-decoder", path)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stdout.splitlines() if x.startswith("| offset:")]
    # as JSON from Kafka 4.1 (the default --kafka-format 4.2: Kafka 4.2.1's DumpLogSegments
    # prints it so), by type in 3.x and 4.0
    assert (' LeaderChange: {"version":0,"leaderId":1,' in lines[0]
            and "payload" not in lines[0]), lines[0]
    r = _dump("--cluster-metadata-decoder", "--kafka-format", "4.0", path)
    lines = [x for x in r.stdout.splitlines() if x.startswith("| offset:")]
    assert " controlType: LEADER_CHANGE(2)" in lines[0] and "payload" not in lines[0]
    assert lines[1].endswith(' payload: {"type":"NO_OP_RECORD","version":0,"data":{}}')


def test_uuid_text_is_kafkas():
    # Uuid.toString: URL-safe base64 without padding
    raw = bytes([0xFB] * 16)
    value, _ = schema.decode("TopicRecord", 0, schemaenc.encode(SPECS["TopicRecord"], 0,
                                                                 {"Name": "t", "TopicId": raw}))
    assert value["topicId"] == base64.urlsafe_b64encode(raw).decode().rstrip("=")
    assert "-" in value["topicId"] or "_" in value["topicId"]


def test_refresh_tool_reproduces_the_transcription(tmp_path):
    """tools/refresh_schemas.py over a work tree made of the vendored Kafka files writes the
    layouts we ship, byte for byte (so format/schemas/ is Kafka's files, transcribed)."""
    tree = tmp_path / "kafka"
    folders = {"metadata": "metadata/src/main/resources/common/metadata",
               "clients": "clients/src/main/resources/common/message",
               "storage": "storage/src/main/resources/message"}
    earlier = []  # kafka-<release>/: the older releases' values kept (--earlier)

    def make_tree(root, data):
        for folder in os.listdir(data):
            src = os.path.join(data, folder)
            if folder.startswith("kafka-"):
                earlier.append(make_tree(tmp_path / folder, src))
            elif os.path.isdir(src):
                dest = root / folders.get(folder, folder + "/src/main/resources/common/message")
                shutil.copytree(src, dest)
        root.mkdir(exist_ok=True)
        (root / "gradle.properties").write_text("version=%s\n" % (
            data.rsplit("kafka-", 1)[1] if root != tree else "4.3.1"))
        return str(root)

    make_tree(tree, schemaenc.DATA)
    out = tmp_path / "out"
    tool = os.path.join(REPO, "tools", "refresh_schemas.py")
    args = [a for e in earlier for a in ("--earlier", e)]
    r = subprocess.run([sys.executable, tool, "--kafka", str(tree), "--out", str(out), *args],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    shipped = os.path.join(os.path.dirname(layouts.__file__), "schemas")
    names = sorted(n for n in os.listdir(shipped) if n.endswith(".json"))
    assert sorted(os.listdir(out)) == names
    for name in names:
        with open(os.path.join(shipped, name), encoding="utf-8") as a, \
                open(out / name, encoding="utf-8") as b:
            if name == "index.json":
                want, got = json.load(a), json.load(b)
                want.pop("source")
                got.pop("source")
                assert got == want
            else:
                assert b.read() == a.read(), name


def test_mangled_records_raise_only_corrupt_record_error():
    """Bytes flipped, cut or inserted in real encodings: a value or CorruptRecordError, never
    another exception."""
    rng = random.Random(11)
    for name in METADATA:
        spec = SPECS[name]
        lo, hi = schemaenc.versions(spec["validVersions"])
        for version in sorted({lo, hi}):
            good = schemaenc.metadata_frame(spec, version, schemaenc.random_values(
                spec, version, random.Random(version), "present"))
            for _ in range(150):
                data = bytearray(good)
                for _ in range(rng.randint(1, 3)):
                    i = rng.randrange(len(data))
                    choice = rng.random()
                    if choice < 0.6:
                        data[i] = rng.randrange(256)
                    elif choice < 0.8:
                        del data[i:]
                        data.append(rng.randrange(256))
                    else:
                        data[i:i] = bytes([rng.choice((0x7F, 0xFF, 0x80, 0x00))])
                try:
                    metadata_record.decode_metadata_record(bytes(data))
                except CorruptRecordError:
                    pass


def test_many_tagged_fields_cost_linear_time():
    # 1M repetitions of a known tag (PartitionRecord v2, tag 0: LeaderRecoveryState, int8):
    # read in time proportional to the record, not to its square
    body = schemaenc.encode(SPECS["PartitionRecord"], 2, {})
    assert body.endswith(b"\x00")  # no tagged field: a count of 0, replaced below
    body = body[:-1]
    n = 1_000_000
    tags = schemaenc.uvarint(n) + b"\x00\x01\x01" * n
    start = time.monotonic()
    value, _ = schema.decode("PartitionRecord", 2, body + tags)
    assert value["leaderRecoveryState"] == 1
    assert time.monotonic() - start < 10  # about 0.1 s; copying the record per field: hours


@pytest.mark.parametrize("x,java", [
    (1.0, "1.0"), (100.0, "100.0"), (9999999.0, "9999999.0"), (1e7, "1.0E7"),
    (10485760.0, "1.048576E7"), (12345678.9, "1.23456789E7"), (0.001, "0.001"),
    (0.0001, "1.0E-4"), (1.5e-10, "1.5E-10"), (-2.25, "-2.25"), (0.1, "0.1"), (0.0, "0.0"),
    (-0.0, "-0.0"), (1e21, "1.0E21"), (123.456, "123.456"), (float("nan"), '"NaN"'),
])
def test_doubles_written_as_java_does(x, java):
    # Double.toString's published examples and rules: decimal in [1e-3, 1e7), else d.dddE<n>
    assert jackson.java_double(x) == java


def test_quota_value_in_the_dump_is_javas_double(tmp_path):
    spec = SPECS["ClientQuotaRecord"]
    values = {"Entity": [{"EntityType": "user", "EntityName": "alice"}],
              "Key": "producer_byte_rate", "Value": 10485760.0, "Remove": False}
    path = write_segment(str(tmp_path), 0, v2_batch([Rec(None, schemaenc.metadata_frame(
        spec, 0, values))]))
    r = _dump("--cluster-metadata-decoder", path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[3].endswith(
        ' payload: {"type":"CLIENT_QUOTA_RECORD","version":0,"data":{"entity":[{"entityType":'
        '"user","entityName":"alice"}],"key":"producer_byte_rate","value":1.048576E7,'
        '"remove":false}}')
