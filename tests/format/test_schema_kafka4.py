"""Kafka 4.x's record types and versions: the layouts of kafkalog_cli/format/schemas/ come from
Kafka 4.3.1 (plus ShareGroupPartitionMetadata from 4.0.2), and every message of Kafka's own
definitions (tests/data/kafka-messages/) decodes at every version it has, field by field,
from bytes written by the tests' encoder (tests/schemaenc.py), which reads Kafka's files and
not our transcription. The records new in Kafka 4.x (ClearElrRecord, the consumer group
regular expressions, the streams group records, TransactionLogValue's KIP-890 tagged fields,
Kafka 4.1+'s coordinator-key files) are also checked with hand-written values and the JSON
Kafka's generated converters write for them, and through `kafkalog dump`.
"""

import json
import os
import random
import struct
import subprocess
import sys
import uuid

import pytest

import schemaenc
from dumpcheck import REPO
from kafkagen import Rec, v2_batch, write_segment
from kafkalog_cli.format import coordinator, layouts, metadata_record, schema

SPECS = schemaenc.all_specs()
T0 = 1700000000000


def _earlier_specs():
    """The older releases' coordinator values kept beside the newest (kafka-<release>/ of
    tests/data/kafka-messages/), by the name our layouts give them: <Name>_<release>."""
    specs = {}
    for top in sorted(os.listdir(schemaenc.DATA)):
        if not top.startswith("kafka-"):
            continue
        for folder in sorted(os.listdir(os.path.join(schemaenc.DATA, top))):
            for name in sorted(os.listdir(os.path.join(schemaenc.DATA, top, folder))):
                spec = schemaenc.load(os.path.join(schemaenc.DATA, top, folder, name))
                spec["_folder"] = folder
                specs["%s_%s" % (spec["name"], top[6:].replace(".", "_"))] = spec
    return specs


EARLIER = _earlier_specs()


def i16(n):
    return struct.pack(">h", n)


_check_fields = schemaenc.check_fields


def _every_version():
    for name, spec in sorted({**SPECS, **EARLIER}.items()):
        lo, hi = schemaenc.versions(spec["validVersions"])
        for version in range(lo, hi + 1):
            yield pytest.param(name, version, id="%s-v%d" % (name, version))


def test_the_layouts_hold_every_vendored_definition_and_record_type():
    """Our transcription has a layout for each of Kafka's files the tests hold, with the same
    version range, and each metadata apiKey and coordinator record type names its message."""
    assert sorted([*SPECS, *EARLIER]) == layouts.messages()
    assert EARLIER  # Kafka 4.0's share group values
    for name, spec in SPECS.items():
        assert layouts.valid_versions(name) == schemaenc.versions(spec["validVersions"]), name
        folder = spec["_folder"]
        if folder == "metadata":
            assert layouts.metadata_type(spec["apiKey"]) == (name, schemaenc.type_name(name))
        elif folder.endswith("-coordinator") and name.endswith("Key"):
            coordinator_name = folder.split("-")[0]
            if spec.get("type") == "coordinator-key":  # Kafka 4.1+: the record type is the apiKey
                types = [spec["apiKey"]]
            else:  # older files: each key version is a record type
                lo, hi = schemaenc.versions(spec["validVersions"])
                types = range(lo, hi + 1)
            for record_type in types:
                assert layouts.coordinator_messages(coordinator_name, record_type) == (
                    name, name[:-3] + "Value"), (name, record_type)


def test_earlier_values_are_listed_under_their_record_type():
    for name, spec in EARLIER.items():
        newest = SPECS[spec["name"]]
        coordinator_name = spec["_folder"].split("-")[0]
        types = [t for t in range(64)
                 if (layouts.coordinator_messages(coordinator_name, t) or ("", ""))[1]
                 == newest["name"]]
        assert types and all(name in layouts.coordinator_earlier_values(coordinator_name, t)
                             for t in types), name


@pytest.mark.parametrize("name,version", list(_every_version()))
@pytest.mark.parametrize("tags", ["absent", "present"])
def test_every_message_at_every_version(name, version, tags):
    """Old versions keep decoding after a refresh (a newer layout only adds versions and
    fields), and new ones decode: each version, tagged fields present and absent."""
    spec = SPECS.get(name) or EARLIER[name]
    values = schemaenc.random_values(spec, version, random.Random("%s-%d" % (name, version)),
                                     tags)
    data = schemaenc.encode(spec, version, values)
    got, end = schema.decode(name, version, data, 0)
    assert end == len(data)
    _check_fields(schemaenc.expected_json(spec, version, values), got, name)


def test_clear_elr_record():
    """ClearElrRecord (apiKey 28, KIP-966's ELR cleared for a topic, or all topics)."""
    spec = SPECS["ClearElrRecord"]
    frame = schemaenc.metadata_frame(spec, 0, {"TopicName": "orders"})
    assert metadata_record.decode_metadata_record(frame) == (
        "CLEAR_ELR_RECORD", 0, {"topicName": "orders"})
    frame = schemaenc.metadata_frame(spec, 0, {})
    assert metadata_record.decode_metadata_record(frame) == (
        "CLEAR_ELR_RECORD", 0, {"topicName": ""})


def _offsets(record_type, key_values, value_version, value_values):
    key_spec, value_spec = (SPECS[m] for m in layouts.coordinator_messages("group", record_type))
    key = i16(record_type) + schemaenc.encode(key_spec, 0, key_values)
    value = i16(value_version) + schemaenc.encode(value_spec, value_version, value_values)
    k, v = coordinator.parse_offsets(key, value, 0)
    assert not k.error and not v.error, (k, v)
    return k.json, v.json


def test_consumer_group_regular_expression():
    """Record type 16 (KIP-848's regular-expression subscriptions, Kafka 4.0+)."""
    k, v = _offsets(16, {"GroupId": "g", "RegularExpression": "orders-.*"}, 0,
                    {"Topics": ["orders-eu", "orders-us"], "Version": 42, "Timestamp": T0})
    assert k == {"type": "16", "data": {"groupId": "g", "regularExpression": "orders-.*"}}
    assert v == {"version": "0", "data": {"topics": ["orders-eu", "orders-us"], "version": 42,
                                          "timestamp": T0}}


def test_streams_group_topology():
    """Record type 23 (KIP-1071's streams groups, Kafka 4.1+), nested structs and the common
    structs TopicInfo and TopicConfig."""
    changelog = {"Name": "app-store-changelog", "Partitions": 4, "ReplicationFactor": 3,
                 "TopicConfigs": [{"key": "cleanup.policy", "value": "compact"}]}
    sub = {"SubtopologyId": "0", "SourceTopics": ["in"], "SourceTopicRegex": ["in-.*"],
           "StateChangelogTopics": [changelog], "RepartitionSinkTopics": ["rep"],
           "RepartitionSourceTopics": [], "CopartitionGroups": [
               {"SourceTopics": [0], "SourceTopicRegex": [], "RepartitionSourceTopics": [1, 2]}]}
    k, v = _offsets(23, {"GroupId": "app"}, 0, {"Epoch": 5, "Subtopologies": [sub]})
    assert k == {"type": "23", "data": {"groupId": "app"}}
    want = {"epoch": 5, "subtopologies": [{
        "subtopologyId": "0", "sourceTopics": ["in"], "sourceTopicRegex": ["in-.*"],
        "stateChangelogTopics": [{"name": "app-store-changelog", "partitions": 4,
                                  "replicationFactor": 3, "topicConfigs": [
                                      {"key": "cleanup.policy", "value": "compact"}]}],
        "repartitionSinkTopics": ["rep"], "repartitionSourceTopics": [],
        "copartitionGroups": [{"sourceTopics": [0], "sourceTopicRegex": [],
                               "repartitionSourceTopics": [1, 2]}]}]}
    assert v["version"] == "0"
    _check_fields(want, v["data"], "StreamsGroupTopologyValue")


@pytest.mark.parametrize("record_type", sorted(
    {int(t) for t in range(64) if (layouts.coordinator_messages("group", t) or ("",))[0]
     .startswith("StreamsGroup")}))
def test_every_streams_group_record_type(record_type):
    """Each StreamsGroup* record type (17, 19-23 in Kafka 4.3) names its messages and decodes
    with every field set."""
    key_name, value_name = layouts.coordinator_messages("group", record_type)
    assert SPECS[key_name]["apiKey"] == record_type == SPECS[value_name]["apiKey"]
    rng = random.Random(record_type)
    value_spec = SPECS[value_name]
    lo, hi = schemaenc.versions(value_spec["validVersions"])
    key_values = schemaenc.random_values(SPECS[key_name], 0, rng)
    value_values = schemaenc.random_values(value_spec, hi, rng, "present")
    k, v = _offsets(record_type, key_values, hi, value_values)
    assert k["data"] == schemaenc.expected_json(SPECS[key_name], 0, key_values)
    _check_fields(schemaenc.expected_json(value_spec, hi, value_values), v["data"], value_name)


def test_offset_commit_value_v4_flexible():
    """OffsetCommitValue v4 (Kafka 3.7+, the first flexible version), under record type 1."""
    k, v = _offsets(1, {"group": "g", "topic": "t", "partition": 3}, 4,
                    {"offset": 10, "leaderEpoch": 2, "metadata": "m", "commitTimestamp": T0})
    assert k == {"type": "1", "data": {"group": "g", "topic": "t", "partition": 3}}
    assert v == {"version": "4", "data": {"offset": 10, "leaderEpoch": 2, "metadata": "m",
                                          "commitTimestamp": T0}}


def test_transaction_log_value_newest_with_every_tagged_field():
    """TransactionLogValue v1 with KIP-890's tagged fields (PreviousProducerId, NextProducerId,
    NextProducerEpoch, ClientTransactionVersion) set: each decoded, in declaration order."""
    spec = SPECS["TransactionLogValue"]
    assert schemaenc.versions(spec["validVersions"])[1] == 1
    values = {"ProducerId": 7, "PreviousProducerId": 6, "NextProducerId": 8, "ProducerEpoch": 2,
              "NextProducerEpoch": 0, "TransactionTimeoutMs": 60000, "TransactionStatus": 1,
              "TransactionPartitions": [{"Topic": "t", "PartitionIds": [0, 3]}],
              "TransactionLastUpdateTimestampMs": T0, "TransactionStartTimestampMs": T0 - 5,
              "ClientTransactionVersion": 2}
    key = i16(0) + schemaenc.encode(SPECS["TransactionLogKey"], 0, {"TransactionalId": "app"})
    value = i16(1) + schemaenc.encode(spec, 1, values)
    k, v = coordinator.parse_transaction_log(key, value, 0)
    assert not k.error and not v.error, (k, v)
    assert k.json == {"version": 0, "transactionalId": "app"}
    want = {"producerId": 7, "previousProducerId": 6, "nextProducerId": 8, "producerEpoch": 2,
            "nextProducerEpoch": 0, "transactionTimeoutMs": 60000, "transactionStatus": 1,
            "transactionPartitions": [{"topic": "t", "partitionIds": [0, 3]}],
            "transactionLastUpdateTimestampMs": T0, "transactionStartTimestampMs": T0 - 5,
            "clientTransactionVersion": 2}
    _check_fields(want, v.json["data"], "TransactionLogValue")
    # partitions in the order of the Scala mutable.HashSet[TopicPartition] the 3.x/4.0 tool
    # prints (format/jvmhash.py, held to the JVM's by tests/kafka_oracle/test_jvm_hash_orders.py)
    assert (v.json["state"], v.json["partitions"]) == ("Ongoing", ["t-3", "t-0"])
    # the tagged fields at their defaults are left out, as the converter does
    values.update(PreviousProducerId=-1, NextProducerId=-1, NextProducerEpoch=-1,
                  ClientTransactionVersion=0)
    _, v = coordinator.parse_transaction_log(key, i16(1) + schemaenc.encode(spec, 1, values), 0)
    tagged = ("previousProducerId", "nextProducerId", "nextProducerEpoch",
              "clientTransactionVersion")
    assert list(v.json["data"]) == [f for f in want if f not in tagged]


def test_share_coordinator_newest_snapshot():
    """ShareSnapshotValue as Kafka 4.2+ writes it (int32 SnapshotEpoch, create and write
    timestamps, the tagged DeliveryCompleteCount), under the share coordinator's type 0."""
    key_spec, value_spec = SPECS["ShareSnapshotKey"], SPECS["ShareSnapshotValue"]
    topic = uuid.UUID(int=9).bytes
    key = i16(0) + schemaenc.encode(key_spec, 0, {"GroupId": "sg", "TopicId": topic,
                                                  "Partition": 1})
    values = {"SnapshotEpoch": 70000, "StateEpoch": 2, "LeaderEpoch": 3, "StartOffset": 4,
              "DeliveryCompleteCount": 5, "CreateTimestamp": T0, "WriteTimestamp": T0 + 1,
              "StateBatches": [{"FirstOffset": 4, "LastOffset": 9, "DeliveryState": 2,
                                "DeliveryCount": 1}]}
    k, v = coordinator.parse_share_group_state(key, i16(0) + schemaenc.encode(value_spec, 0,
                                                                              values), 0)
    assert not k.error and not v.error, (k, v)
    assert k.json["type"] == "0"
    _check_fields(schemaenc.expected_json(value_spec, 0, values), v.json["data"],
                  "ShareSnapshotValue")
    assert v.json["data"]["snapshotEpoch"] == 70000  # an int32 since Kafka 4.1
    assert v.json["data"]["deliveryCompleteCount"] == 5


def test_dump_offsets_decoder_names_kafka4_record_types(tmp_path):
    """`kafkalog dump --offsets-decoder` over a segment of Kafka 4.x group coordinator records:
    the regular expression (16), streams group metadata (17) and topology (23) records decode,
    a type no definition has (18, never released) is Kafka's per-record error."""
    def rec(record_type, key_values, value_values):
        key_name, value_name = layouts.coordinator_messages("group", record_type)
        return Rec(i16(record_type) + schemaenc.encode(SPECS[key_name], 0, key_values),
                   i16(0) + schemaenc.encode(SPECS[value_name], 0, value_values))
    records = [
        rec(16, {"GroupId": "g", "RegularExpression": "a.*"},
            {"Topics": ["ab"], "Version": 1, "Timestamp": T0}),
        rec(17, {"GroupId": "app"}, schemaenc.random_values(SPECS["StreamsGroupMetadataValue"],
                                                             0, random.Random(1))),
        rec(23, {"GroupId": "app"}, {"Epoch": 1, "Subtopologies": []}),
        Rec(i16(18) + b"\x00\x03app", b"\x00\x00"),
    ]
    path = write_segment(str(tmp_path), 0, v2_batch(records))
    r = subprocess.run([sys.executable, "-m", "kafkalog_cli", "dump", "--offsets-decoder",
                        "--format", "json", path], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in r.stdout.splitlines() if '"type":"record"' in x]
    assert recs[0]["keyDecoded"] == {"type": "16", "data": {"groupId": "g",
                                                            "regularExpression": "a.*"}}
    assert recs[0]["valueDecoded"]["data"] == {"topics": ["ab"], "version": 1,
                                                 "timestamp": T0}
    assert recs[1]["keyDecoded"] == {"type": "17", "data": {"groupId": "app"}}
    assert recs[1]["valueDecoded"]["version"] == "0"
    assert recs[2]["valueDecoded"] == {"version": "0", "data": {"epoch": 1,
                                                                  "subtopologies": []}}
    assert recs[3]["keyError"] == "Unknown record type 18 at offset 3, skipping."


@pytest.mark.parametrize("name", sorted(EARLIER))
@pytest.mark.parametrize("tags", ["absent", "present"])
def test_kafka_40_share_group_records_still_decode(name, tags):
    """Kafka 4.0's early-access share group records (ShareSnapshotValue with a uint16 epoch and
    no timestamps...), which 4.1 changed at the same version 0: the newest layout fails on them,
    and the 4.0 layout kept beside it reads them, field by field, as Kafka 4.0 wrote them."""
    spec = EARLIER[name]
    coordinator_name = spec["_folder"].split("-")[0]
    record_type = next(t for t in range(64) if name in layouts.coordinator_earlier_values(
        coordinator_name, t))
    key_name = layouts.coordinator_messages(coordinator_name, record_type)[0]
    rng = random.Random(name)
    key_values = schemaenc.random_values(SPECS[key_name], 0, rng)
    values = schemaenc.random_values(spec, 0, rng, tags)
    key = i16(record_type) + schemaenc.encode(SPECS[key_name], 0, key_values)
    value = i16(0) + schemaenc.encode(spec, 0, values)
    parse = coordinator.parse_offsets if coordinator_name == "group" else \
        coordinator.parse_share_group_state
    k, v = parse(key, value, 0)
    assert not k.error and not v.error, (k, v)
    _check_fields(schemaenc.expected_json(spec, 0, values), v.json["data"], name)
    # the same record as Kafka 4.3 writes it is read with the newest layout
    newest = SPECS[spec["name"]]
    values = schemaenc.random_values(newest, 0, rng, tags)
    k, v = parse(key, i16(0) + schemaenc.encode(newest, 0, values), 0)
    _check_fields(schemaenc.expected_json(newest, 0, values), v.json["data"], spec["name"])


def _refresh_tool():
    import importlib.util
    path = os.path.join(REPO, "tools", "refresh_schemas.py")
    spec = importlib.util.spec_from_file_location("refresh_schemas", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


def test_refresh_tool_compares_layouts_version_by_version():
    """--earlier keeps an older value only when the newest reads some version of it
    differently: a field retyped or an untagged field added at the same version, not a tagged
    field added (an unknown tag is skipped) nor a later version."""
    tool, _ = _refresh_tool()
    for name, spec in EARLIER.items():
        old, new = tool.convert(spec), tool.convert(SPECS[spec["name"]])
        assert not tool.compatible(old, new), name
        assert tool.compatible(new, new)
    base = {"name": "X", "validVersions": "0", "flexibleVersions": "0+", "fields": [
        {"name": "A", "type": "int32", "versions": "0+"}]}
    grown = dict(base, validVersions="0-1", fields=base["fields"] + [
        {"name": "B", "type": "int64", "versions": "1+"},
        {"name": "C", "type": "string", "versions": "0+", "taggedVersions": "0+", "tag": 0}])
    assert tool.compatible(tool.convert(base), tool.convert(grown))
    retyped = dict(base, fields=[{"name": "A", "type": "int64", "versions": "0+"}])
    assert not tool.compatible(tool.convert(base), tool.convert(retyped))
    added = dict(base, fields=base["fields"] + [{"name": "B", "type": "int8", "versions": "0+"}])
    assert not tool.compatible(tool.convert(base), tool.convert(added))


def test_refresh_tool_refuses_two_messages_for_one_record_type(tmp_path):
    """Each metadata apiKey names one message: a removed file kept (or a stray one) that
    claims a taken apiKey stops the tool, instead of one silently replacing the other."""
    _, tool = _refresh_tool()
    folder = tmp_path / "kafka" / "metadata/src/main/resources/common/metadata"
    folder.mkdir(parents=True)
    for name in ("TopicRecord", "OtherTopicRecord"):
        (folder / (name + ".json")).write_text(json.dumps({
            "apiKey": 2, "type": "metadata", "name": name, "validVersions": "0",
            "flexibleVersions": "0+", "fields": []}))
    (tmp_path / "kafka" / "gradle.properties").write_text("version=9.9.9\n")
    r = subprocess.run([sys.executable, tool, "--kafka", str(tmp_path / "kafka"), "--out",
                        str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "apiKey 2 is claimed by both" in r.stderr
