"""The decoders of the coordinators' topics: `dump --offsets-decoder` (__consumer_offsets),
`--transaction-log-decoder` (__transaction_state), `--share-group-state-decoder`
(__share_group_state), as DumpLogSegments' OffsetsMessageParser, TransactionLog
.formatRecordKeyAndValue and ShareGroupStateMessageParser print them, and as JSON objects.

Keys and values are encoded here by hand from Kafka's message definitions (the copies in
tests/data/kafka-messages: OffsetCommitKey/Value, GroupMetadataKey/Value, TransactionLogKey/
Value, ShareSnapshotKey/Value; ConsumerProtocolSubscription/Assignment from clients/) with the
coordinators' framing (CoordinatorRecordSerde: int16 record type or version, then the struct),
every key and value version; the expected output is written from the values put in. Nothing here
encodes with kafkalog_cli's code.
"""

import base64
import json
import struct
import uuid

import pytest

import kafkagen as kg
from kafkagen import uvarint
from dumpcheck import dump, dump_subprocess, json_objects

from kafkalog_cli.format import coordinator, layouts

T0 = 1700000000000


# -- an encoder of Kafka's message layouts (non-flexible and flexible versions) -----------------

def i8(n):
    return struct.pack(">b", n)


def i16(n):
    return struct.pack(">h", n)


def i32(n):
    return struct.pack(">i", n)


def i64(n):
    return struct.pack(">q", n)


def string(s, flexible=False):
    if s is None:
        return uvarint(0) if flexible else i16(-1)
    b = s.encode("utf-8")
    return uvarint(len(b) + 1) + b if flexible else i16(len(b)) + b


def blob(b, flexible=False):
    if b is None:
        return uvarint(0) if flexible else i32(-1)
    return uvarint(len(b) + 1) + b if flexible else i32(len(b)) + b


def array(items, flexible=False):
    if items is None:
        return uvarint(0) if flexible else i32(-1)
    items = list(items)
    return (uvarint(len(items) + 1) if flexible else i32(len(items))) + b"".join(items)


def tagged(fields=()):
    """A tagged-field section: (tag, bytes) pairs in tag order."""
    return uvarint(len(fields)) + b"".join(uvarint(t) + uvarint(len(b)) + b for t, b in fields)


def java_uuid(u):
    """Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(u).decode("ascii").rstrip("=")


# -- __consumer_offsets -----------------------------------------------------------------------

def offset_commit_key(record_type, group, topic, partition):
    """OffsetCommitKey (versions 0-1; the key's version is its record type)."""
    return i16(record_type) + string(group) + string(topic) + i32(partition)


def offset_commit_value(version, offset, metadata, commit_ts, leader_epoch=-1, expire_ts=-1):
    """OffsetCommitValue v0-v4 (flexible from 4): offset, leaderEpoch (3+), metadata,
    commitTimestamp, expireTimestamp (1 only)."""
    flex = version >= 4
    out = i16(version) + i64(offset)
    if version >= 3:
        out += i32(leader_epoch)
    out += string(metadata, flex) + i64(commit_ts)
    if version == 1:
        out += i64(expire_ts)
    if flex:
        out += tagged()
    return out


def expected_offset_commit_value(version, offset, metadata, commit_ts, leader_epoch=-1,
                                 expire_ts=-1):
    data = {"offset": offset}
    if version >= 3:
        data["leaderEpoch"] = leader_epoch
    data["metadata"] = metadata
    data["commitTimestamp"] = commit_ts
    if version == 1:
        data["expireTimestamp"] = expire_ts
    return {"version": str(version), "data": data}


def subscription(version, topics, user_data=None, owned=(), generation=-1, rack=None):
    """ConsumerProtocolSubscription v0-3 (never flexible), with its int16 version first."""
    out = i16(version) + array(string(t) for t in topics) + blob(user_data)
    if version >= 1:
        out += array(string(t) + array(i32(p) for p in ps) for t, ps in owned)
    if version >= 2:
        out += i32(generation)
    if version >= 3:
        out += string(rack)
    return out


def assignment(version, partitions, user_data=None):
    """ConsumerProtocolAssignment v0-3, with its int16 version first."""
    return (i16(version) + array(string(t) + array(i32(p) for p in ps) for t, ps in partitions)
            + blob(user_data))


MEMBER = dict(member_id="consumer-1-abc", instance_id="static-1", client_id="consumer-1",
              client_host="/10.0.0.7", rebalance_timeout=300000, session_timeout=45000)


def group_metadata_value(version, protocol_type, members, generation=5, protocol="range",
                         leader="consumer-1-abc", state_ts=T0):
    """GroupMetadataValue v0-v4 (flexible from 4); members as (subscription, assignment)."""
    flex = version >= 4
    out = i16(version) + string(protocol_type, flex) + i32(generation) + string(protocol, flex)
    out += string(leader, flex)
    if version >= 2:
        out += i64(state_ts)
    body = []
    for sub, assign in members:
        m = string(MEMBER["member_id"], flex)
        if version >= 3:
            m += string(MEMBER["instance_id"], flex)
        m += string(MEMBER["client_id"], flex) + string(MEMBER["client_host"], flex)
        if version >= 1:
            m += i32(MEMBER["rebalance_timeout"])
        m += i32(MEMBER["session_timeout"]) + blob(sub, flex) + blob(assign, flex)
        if flex:
            m += tagged()
        body.append(m)
    out += array(body, flex)
    if flex:
        out += tagged()
    return out


def expected_member(version, sub, assign):
    m = {"memberId": MEMBER["member_id"]}
    if version >= 3:
        m["groupInstanceId"] = MEMBER["instance_id"]
    m["clientId"] = MEMBER["client_id"]
    m["clientHost"] = MEMBER["client_host"]
    if version >= 1:
        m["rebalanceTimeout"] = MEMBER["rebalance_timeout"]
    m["sessionTimeout"] = MEMBER["session_timeout"]
    m["subscription"] = sub
    m["assignment"] = assign
    return m


def expected_group_value(version, protocol_type, members, generation=5, protocol="range",
                         leader="consumer-1-abc", state_ts=T0):
    data = {"protocolType": protocol_type, "generation": generation, "protocol": protocol,
            "leader": leader}
    if version >= 2:
        data["currentStateTimestamp"] = state_ts
    data["members"] = [expected_member(version, s, a) for s, a in members]
    return {"version": str(version), "data": data}


def b64(b):
    return base64.b64encode(b).decode("ascii")


def parse_json(decoded):
    assert decoded is not None and not decoded.error, decoded
    assert json.loads(decoded.text) == decoded.json  # the text is the same object, compact
    assert ": " not in decoded.text.replace('": "', "")  # compact (Jackson) separators
    return decoded.json


@pytest.mark.parametrize("record_type,version", [(0, 0), (1, 0), (1, 1), (1, 2), (1, 3), (1, 4)])
def test_offset_commit_every_key_and_value_version(record_type, version):
    """Record type 0 (Kafka 0.8.2's key version 0, LegacyOffsetCommitKey/Value since Kafka 4.1)
    holds value version 0; type 1 every OffsetCommitValue version."""
    key = offset_commit_key(record_type, "my-group", "orders", 7)
    args = (version, 123456789012, "meta ✓", T0, 9, T0 + 86400000)
    k, v = coordinator.parse_offsets(key, offset_commit_value(*args), 42)
    assert parse_json(k) == {"type": str(record_type),
                             "data": {"group": "my-group", "topic": "orders", "partition": 7}}
    assert parse_json(v) == expected_offset_commit_value(*args)


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_legacy_offset_commit_type_has_only_value_version_0(version):
    """Kafka 4.1+ (CoordinatorRecordType LEGACY_OFFSET_COMMIT): record type 0's value is
    LegacyOffsetCommitValue, version 0 only; a later version is Kafka's per-record error."""
    key = offset_commit_key(0, "my-group", "orders", 7)
    args = (version, 123456789012, "meta", T0, 9, T0 + 86400000)
    k, v = coordinator.parse_offsets(key, offset_commit_value(*args), 42)
    assert v is None and k.error
    assert k.text.startswith("Error at offset 42, skipping. Could not read record with version "
                             "%d from value's buffer" % version), k.text


def test_offset_commit_tombstone():
    k, v = coordinator.parse_offsets(offset_commit_key(1, "g", "t", 0), None, 3)
    assert json.loads(k.text)["data"] == {"group": "g", "topic": "t", "partition": 0}
    assert (v.text, v.json, v.error) == ("<DELETE>", "<DELETE>", False)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("sub_version", [0, 1, 2, 3])
def test_group_metadata_every_version_consumer_protocol_expanded(version, sub_version):
    sub = subscription(sub_version, ["orders", "payments"], b"\x01\x02",
                       owned=[("orders", [0, 2])], generation=4, rack="rack-a")
    assign = assignment(min(sub_version, 3), [("orders", [0, 1]), ("payments", [3])], None)
    key = i16(2) + string("my-group")
    k, v = coordinator.parse_offsets(key, group_metadata_value(version, "consumer",
                                                               [(sub, assign)]), 5)
    assert parse_json(k) == {"type": "2", "data": {"group": "my-group"}}
    exp_sub = {"topics": ["orders", "payments"], "userData": b64(b"\x01\x02")}
    if sub_version >= 1:
        exp_sub["ownedPartitions"] = [{"topic": "orders", "partitions": [0, 2]}]
    if sub_version >= 2:
        exp_sub["generationId"] = 4
    if sub_version >= 3:
        exp_sub["rackId"] = "rack-a"
    exp_assign = {"assignedPartitions": [{"topic": "orders", "partitions": [0, 1]},
                                         {"topic": "payments", "partitions": [3]}],
                  "userData": None}
    assert parse_json(v) == expected_group_value(version, "consumer", [(exp_sub, exp_assign)])


def test_group_metadata_other_protocol_type_keeps_bytes():
    """Subscriptions are expanded only for protocolType "consumer" (a Connect group's are
    not consumer-protocol bytes)."""
    sub = subscription(0, ["orders"])
    assign = assignment(0, [("orders", [0])])
    k, v = coordinator.parse_offsets(i16(2) + string("connect-cluster"),
                                     group_metadata_value(3, "connect", [(sub, assign)]), 5)
    assert parse_json(v) == expected_group_value(3, "connect", [(b64(sub), b64(assign))])


def test_group_metadata_consumer_bytes_that_do_not_decode_stay_bytes():
    sub = b"\x00\x00\x00\x00\x00\x05ab"  # an array of 5 topics, cut short
    assign = i16(9) + b"\x00"  # a version the consumer protocol does not have
    _, v = coordinator.parse_offsets(i16(2) + string("g"),
                                     group_metadata_value(4, "consumer", [(sub, assign)]), 5)
    assert parse_json(v) == expected_group_value(4, "consumer", [(b64(sub), b64(assign))])


def test_new_coordinator_record_types_by_type_id():
    """The consumer-group records of the new coordinator: ConsumerGroupMetadataKey (type 3,
    GroupId), ConsumerGroupMetadataValue v0 (flexible: Epoch int32, tagged fields)."""
    key = i16(3) + string("cg", flexible=False)
    value = i16(0) + i32(17) + tagged()
    k, v = coordinator.parse_offsets(key, value, 8)
    assert parse_json(k) == {"type": "3", "data": {"groupId": "cg"}}
    assert parse_json(v) == {"version": "0", "data": {"epoch": 17}}


def test_unknown_record_type_and_errors():
    k, v = coordinator.parse_offsets(i16(99) + b"xx", b"\x00\x00", 77)
    assert (k.text, k.error, v) == ("Unknown record type 99 at offset 77, skipping.", True, None)
    k, v = coordinator.parse_offsets(offset_commit_key(1, "g", "t", 0)[:6], None, 78)
    assert k.error and v is None
    assert k.text.startswith("Error at offset 78, skipping. Could not read record with version 1 "
                             "from key's buffer due to: ")
    k, v = coordinator.parse_offsets(offset_commit_key(1, "g", "t", 0), b"\x00", 79)
    assert k.text == "Error at offset 79, skipping. Could not read version from value's buffer."
    k, v = coordinator.parse_offsets(offset_commit_key(1, "g", "t", 0), i16(9) + b"\x00" * 30, 80)
    assert k.error and "version 9" in k.text and v is None
    k, v = coordinator.parse_offsets(None, b"\x00", 81)
    assert k.error and "offset 81" in k.text and "missing key" in k.text and v is None


# -- __transaction_state ----------------------------------------------------------------------

def txn_value(version, producer_id, epoch, timeout, status, partitions, last_update, start,
              previous=-1, nxt=-1, client_version=0):
    """TransactionLogValue v0-v1 (flexible from 1, with tagged PreviousProducerId (0),
    NextProducerId (1), ClientTransactionVersion (2) written only when not the default)."""
    flex = version >= 1
    parts = None if partitions is None else [string(t, flex) + array((i32(p) for p in ps), flex)
                                             + (tagged() if flex else b"")
                                             for t, ps in partitions]
    out = (i16(version) + i64(producer_id) + i16(epoch) + i32(timeout) + i8(status)
           + array(parts, flex) + i64(last_update) + i64(start))
    if flex:
        fields = [(tag, b) for tag, b, default in ((0, i64(previous), previous == -1),
                                                   (1, i64(nxt), nxt == -1),
                                                   (2, i16(client_version), client_version == 0))
                  if not default]
        out += tagged(fields)
    return out


STATES = ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
          "Dead", "PrepareEpochFence"]


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("status", range(8))
def test_transaction_log_every_version_and_state(version, status):
    key = i16(0) + string("txn-app-1")
    value = txn_value(version, 4001, 3, 60000, status, [("orders", [0, 2]), ("audit", [1])],
                      T0 + 5, T0, previous=4000 if version else -1, client_version=2 * version)
    k, v = coordinator.parse_transaction_log(key, value, 10)
    assert k.text == "transaction_metadata::transactionalId=txn-app-1"
    assert k.json == {"version": 0, "transactionalId": "txn-app-1"}
    # in the order of Kafka's Scala mutable.HashSet[TopicPartition] (TransactionMetadata's
    # topicPartitions: the order Scala 2.13 itself iterates these three in), not the record's
    parts = "" if STATES[status] == "Empty" else "audit-1,orders-0,orders-2"
    assert v.text == ("producerId:4001,producerEpoch:3,state=%s,partitions=[%s],"
                      "txnLastUpdateTimestamp=%d,txnTimeoutMs=60000" % (STATES[status], parts,
                                                                        T0 + 5))
    assert v.json["state"] == STATES[status]
    assert v.json["partitions"] == (parts.split(",") if parts else [])
    data = v.json["data"]
    assert (data["producerId"], data["producerEpoch"], data["transactionTimeoutMs"],
            data["transactionStatus"], data["transactionStartTimestampMs"]) == (
        4001, 3, 60000, status, T0)
    if version:
        # tagged fields only when they differ from their default
        assert data["previousProducerId"] == 4000 and data["clientTransactionVersion"] == 2
        assert "nextProducerId" not in data
    else:
        assert "previousProducerId" not in data


def test_transaction_log_tombstone_unknown_key_and_errors():
    k, v = coordinator.parse_transaction_log(i16(0) + string("t"), None, 1)
    assert (k.text, v.text) == ("transaction_metadata::transactionalId=t", "<DELETE>")
    k, v = coordinator.parse_transaction_log(i16(5) + string("t"), b"\x00\x00", 2)
    assert (k.text, v) == ("unknown::version=5", None)
    k, v = coordinator.parse_transaction_log(i16(0) + string("t"),
                                             txn_value(0, 1, 0, 1, 12, [], 0, 0), 3)
    assert k.error and k.text.startswith("Error at offset 3, skipping. ") and v is None
    k, v = coordinator.parse_transaction_log(i16(0) + string("t"), i16(7) + b"\x00" * 40, 4)
    assert (k.text, k.error, v) == ("Error at offset 4, skipping. Unknown version 7 from the "
                                    "transaction log message value", True, None)


# -- __share_group_state ----------------------------------------------------------------------

def test_share_snapshot_key_and_tombstone():
    topic = uuid.UUID("1b4e28ba-2fa1-11d2-883f-0016d3cca427").bytes
    key = i16(0) + string("sg") + topic + i32(4)
    k, v = coordinator.parse_share_group_state(key, None, 9)
    assert parse_json(k) == {"type": "0", "data": {"groupId": "sg", "topicId": java_uuid(topic),
                                                   "partition": 4}}
    assert v.text == "<DELETE>"
    k, v = coordinator.parse_share_group_state(i16(7), None, 10)
    assert k.text == "Unknown record type 7 at offset 10, skipping." and v is None


# -- through dump -------------------------------------------------------------------------------

def offsets_segment(tmp_path):
    records = [
        kg.Rec(offset_commit_key(1, "g1", "orders", 0), offset_commit_value(3, 100, "", T0, 2)),
        kg.Rec(offset_commit_key(1, "g1", "orders", 0), None),
        kg.Rec(i16(42) + b"??", b"\x00\x01"),
        kg.Rec(i16(2) + string("g1"), group_metadata_value(
            4, "consumer", [(subscription(1, ["orders"]), assignment(1, [("orders", [0])]))])),
    ]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(kg.v2_batch(records))
    return str(path)


def test_dump_offsets_decoder_text(tmp_path):
    path = offsets_segment(tmp_path)
    res = dump("--offsets-decoder", path)
    assert res.code == 0, res
    lines = [line for line in res.lines if line.startswith("| ")]
    assert len(lines) == 4
    tail = [line.split(" headerKeys: [] ", 1)[1] for line in lines]
    assert tail[0] == ('key: {"type":"1","data":{"group":"g1","topic":"orders","partition":0}} '
                       'payload: {"version":"3","data":{"offset":100,"leaderEpoch":2,'
                       '"metadata":"","commitTimestamp":%d}}' % T0)
    assert tail[1].endswith(" payload: <DELETE>")
    assert tail[2] == "key: Unknown record type 42 at offset 2, skipping."
    member = json.loads(tail[3].split(" payload: ", 1)[1])["data"]["members"][0]
    assert member["subscription"] == {"topics": ["orders"], "userData": None,
                                      "ownedPartitions": []}
    assert member["assignment"] == {"assignedPartitions": [{"topic": "orders",
                                                            "partitions": [0]}],
                                    "userData": None}


def test_dump_offsets_decoder_json_embeds_objects(tmp_path):
    path = offsets_segment(tmp_path)
    res = dump("--offsets-decoder", "--format", "json", path)
    assert res.code == 0, res
    recs = [o for o in json_objects(res) if o["type"] == "record"]
    assert recs[0]["keyDecoded"] == {"type": "1", "data": {"group": "g1", "topic": "orders",
                                                           "partition": 0}}
    assert recs[0]["valueDecoded"]["data"]["offset"] == 100
    assert recs[1]["valueDecoded"] == "<DELETE>"
    assert recs[2]["keyError"] == "Unknown record type 42 at offset 2, skipping."
    assert "valueDecoded" not in recs[2]
    assert isinstance(recs[3]["valueDecoded"]["data"]["members"][0]["subscription"], dict)


def test_dump_transaction_log_decoder_and_precedence(tmp_path):
    records = [kg.Rec(i16(0) + string("app"), txn_value(1, 7, 0, 900, 1, [("t", [3])], T0, T0)),
               kg.Rec(i16(0) + string("app"), None)]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(kg.v2_batch(records))
    # the text form is 3.x and 4.0's (from 4.1 the transaction log is JSON too: Kafka 4.1.1's
    # DumpLogSegments prints it so)
    res = dump_subprocess("--transaction-log-decoder", "--kafka-format", "4.0", str(path))
    assert res.code == 0, res
    lines = [line for line in res.lines if line.startswith("| ")]
    assert lines[0].endswith(" key: transaction_metadata::transactionalId=app payload: "
                             "producerId:7,producerEpoch:0,state=Ongoing,partitions=[t-3],"
                             "txnLastUpdateTimestamp=%d,txnTimeoutMs=900" % T0)
    assert lines[1].endswith(" key: transaction_metadata::transactionalId=app payload: <DELETE>")
    # --offsets-decoder comes first in Kafka's precedence: these keys are its errors then
    res = dump("--transaction-log-decoder", "--offsets-decoder", str(path))
    assert res.code == 0, res
    lines = [line for line in res.lines if line.startswith("| ")]
    assert (" key: Error at offset 0, skipping. Could not read record with version 0 from key's "
            "buffer due to: ") in lines[0]
    assert " payload: " not in lines[0]


# -- every record type of every coordinator, through tests/schemaenc.py -------------------------

def _coordinator_cases():
    import schemaenc
    specs = schemaenc.all_specs()
    for folder, coordinator_name in (("group-coordinator", "group"),
                                     ("share-coordinator", "share"),
                                     ("transaction-coordinator", "transaction")):
        for name, key_spec in sorted(specs.items()):
            if key_spec["_folder"] != folder or not name.endswith("Key"):
                continue
            value_spec = specs.get(name[:-3] + "Value")
            if value_spec is None:
                continue
            lo, hi = schemaenc.versions(key_spec["validVersions"])
            vlo, vhi = schemaenc.versions(value_spec["validVersions"])
            if key_spec.get("type") == "coordinator-key":
                # Kafka 4.1+: the record type is the file's apiKey, the key's layout version 0
                types = [(key_spec["apiKey"], lo)]
            else:  # older files: the key's version is the record type
                types = [(t, t) for t in range(lo, hi + 1)]
            for record_type, key_version in types:
                for version in sorted({vlo, vhi}):
                    yield pytest.param(coordinator_name, key_spec, record_type, key_version,
                                       value_spec, version,
                                       id="%s-%d-%s-%d" % (name, record_type,
                                                           value_spec["name"], version))


def test_coordinator_cases_cover_every_record_type_once():
    """Every record type of the vendored definitions (Kafka's CoordinatorRecordType ids) is
    walked, and no two key files claim the same type of one coordinator."""
    seen = {}
    for case in _coordinator_cases():
        coordinator_name, key_spec, record_type = case.values[:3]
        assert seen.setdefault((coordinator_name, record_type), key_spec["name"]) == \
            key_spec["name"]
    for (coordinator_name, record_type), key_name in seen.items():
        assert layouts.coordinator_messages(coordinator_name, record_type)[0] == key_name


@pytest.mark.parametrize("coordinator_name,key_spec,record_type,key_version,value_spec,version",
                         list(_coordinator_cases()))
def test_every_coordinator_record_type_and_value_version(coordinator_name, key_spec, record_type,
                                                         key_version, value_spec, version):
    """Keys (the int16 record type, then the key struct at that version) and values (int16
    version, then the struct) of every record type the group, share and transaction
    coordinators define, at the lowest and highest value version, decoded field by field."""
    import random

    import schemaenc
    rng = random.Random("%s-%d-%d" % (key_spec["name"], record_type, version))
    key_values = schemaenc.random_values(key_spec, key_version, rng)
    value_values = schemaenc.random_values(value_spec, version, rng)
    if coordinator_name == "transaction":
        value_values["TransactionStatus"] = rng.randrange(len(STATES))
    key = i16(record_type) + schemaenc.encode(key_spec, key_version, key_values)
    value = i16(version) + schemaenc.encode(value_spec, version, value_values)
    if coordinator_name == "transaction":
        k, v = coordinator.parse_transaction_log(key, value, 0)
        assert not k.error and not v.error, (k, v)
        assert k.json == {"version": record_type, "transactionalId": schemaenc.expected_json(
            key_spec, key_version, key_values)["transactionalId"]}
        assert v.json["data"] == schemaenc.expected_json(value_spec, version, value_values)
        assert v.json["state"] == STATES[value_values["TransactionStatus"]]
        return
    parse = coordinator.parse_offsets if coordinator_name == "group" else \
        coordinator.parse_share_group_state
    k, v = parse(key, value, 0)
    assert parse_json(k) == {"type": str(record_type),
                             "data": schemaenc.expected_json(key_spec, key_version, key_values)}
    label = "version" if coordinator_name == "group" else "type"
    assert parse_json(v) == {label: str(version),
                             "data": schemaenc.expected_json(value_spec, version, value_values)}


def test_kafka_43_java_tool_forms(tmp_path):
    """Kafka 4.3's Java DumpLogSegments (CoordinatorRecordMessageParser) prints the transaction
    log as JSON like the offsets, the share group state value's version as "version", and
    "using the specified decoder" when a key is missing."""
    txn = txn_value(1, 7, 0, 900, 1, [("t", [3])], T0, T0)
    k, v = coordinator.parse_transaction_log_java(i16(0) + string("app"), txn, 0)
    assert parse_json(k) == {"type": "0", "data": {"transactionalId": "app"}}
    assert parse_json(v)["version"] == "1"
    assert parse_json(v)["data"]["producerId"] == 7
    topic = uuid.UUID(int=5).bytes
    # ShareSnapshotValue v0 (flexible) as Kafka 4.1+ writes it: SnapshotEpoch, StateEpoch,
    # LeaderEpoch int32, StartOffset, CreateTimestamp, WriteTimestamp int64, StateBatches (none)
    share_value = (i16(0) + i32(1) + i32(2) + i32(3) + i64(4) + i64(T0) + i64(T0 + 1)
                   + array([], flexible=True) + tagged())
    k, v = coordinator.parse_share_group_state_java(i16(0) + string("sg") + topic + i32(4),
                                                    share_value, 1)
    assert parse_json(v) == {"version": "0", "data": {"snapshotEpoch": 1, "stateEpoch": 2,
                                                      "leaderEpoch": 3, "startOffset": 4,
                                                      "createTimestamp": T0,
                                                      "writeTimestamp": T0 + 1,
                                                      "stateBatches": []}}
    _, v = coordinator.parse_share_group_state(i16(0) + string("sg") + topic + i32(4),
                                               share_value, 1)
    assert parse_json(v)["type"] == "0"  # the Scala tool's label
    k, v = coordinator.parse_offsets_java(None, None, 2)
    assert k.text == ("Failed to decode message at offset 2 using the specified decoder "
                      "(message had a missing key)")
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(kg.v2_batch([kg.Rec(i16(0) + string("app"), txn)]))
    lines = dump("--transaction-log-decoder", "--kafka-format", "4.3", str(path)).lines
    assert lines[-1].endswith(' key: {"type":"0","data":{"transactionalId":"app"}} payload: '
                              '{"version":"1","data":{"producerId":7,"producerEpoch":0,'
                              '"transactionTimeoutMs":900,"transactionStatus":1,'
                              '"transactionPartitions":[{"topic":"t","partitionIds":[3]}],'
                              '"transactionLastUpdateTimestampMs":%d,'
                              '"transactionStartTimestampMs":%d}}' % (T0, T0))


def test_dump_offsets_decoder_messages_format_and_skip_metadata(tmp_path):
    path = offsets_segment(tmp_path)
    res = dump("--offsets-decoder", "--format", "messages", path)
    assert res.code == 0, res
    assert len(res.lines) == 4
    assert res.lines[0].endswith(' key: {"type":"1","data":{"group":"g1","topic":"orders",'
                                 '"partition":0}} payload: {"version":"3","data":{"offset":100,'
                                 '"leaderEpoch":2,"metadata":"","commitTimestamp":%d}}' % T0)
    assert res.lines[1].endswith(" payload: <DELETE>")
    assert res.lines[2].endswith(" key: Unknown record type 42 at offset 2, skipping.")
    res = dump("--offsets-decoder", "--skip-record-metadata", path)
    records = [line for line in res.lines[2:] if not line.startswith("baseOffset: ")]
    assert records[2] == "| key: Unknown record type 42 at offset 2, skipping."
    assert records[1].startswith('| key: {"type":"1"') and records[1].endswith(
        " payload: <DELETE>")
