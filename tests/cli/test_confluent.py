"""`dump --key-decoder/--value-decoder confluent`: Schema Registry framing (magic byte 0, 4-byte
big-endian schema id, then the body), Avro bodies through fastavro, Protobuf message indexes,
JSON bodies.

The framed bytes are built here from Confluent's published wire format (AbstractKafkaSchemaSerDe,
KafkaProtobufSerializer's MessageIndexes: zigzag varints as Kafka's ByteUtils writes them, the
single byte 0 for ``[0]``); Avro bodies come from fastavro's writer; the records are written into
segments by kafka-python (tests/kafkagen.py). Nothing here encodes with kafkalog_cli's code.
"""

import base64
import io
import json
import os
import struct
import subprocess
import sys

import fastavro
import pytest

import kafkagen as kg
from kafkagen import varint
from dumpcheck import REPO, assert_clean_exit2, dump

pytestmark = pytest.mark.usefixtures("implementation")

USER_V1 = {"type": "record", "name": "User", "namespace": "test",
           "fields": [{"name": "id", "type": "long"},
                      {"name": "name", "type": "string"},
                      {"name": "email", "type": ["null", "string"], "default": None},
                      {"name": "avatar", "type": "bytes"},
                      {"name": "score", "type": "double"},
                      {"name": "tags", "type": {"type": "array", "items": "string"}}]}
# the same record name at another version, as Schema Registry keeps them under new ids
USER_V2 = {"type": "record", "name": "User", "namespace": "test",
           "fields": [{"name": "id", "type": "int"},
                      {"name": "active", "type": "boolean"},
                      {"name": "attrs", "type": {"type": "map", "values": "long"}}]}
KEY_SCHEMA = {"type": "record", "name": "Key", "fields": [{"name": "tenant", "type": "string"}]}


def message_indexes(indexes):
    """MessageIndexes.toByteArray: [0] as the single byte 0, else a count and each index."""
    if indexes == [0]:
        return b"\x00"
    return varint(len(indexes)) + b"".join(varint(i) for i in indexes)


def frame(schema_id, body):
    return b"\x00" + struct.pack(">i", schema_id) + body


def avro(schema, value):
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


def write_schema(path, schema):
    with open(path, "w") as f:
        json.dump(schema, f)
    return str(path)


def segment(tmp_path, values, keys=None, headers=()):
    w = kg.SegmentWriter(0)
    keys = keys or [None] * len(values)
    w.add_v2([kg.Rec(k, v, kg.T0 + i, headers) for i, (k, v) in enumerate(zip(keys, values))])
    return w.write(str(tmp_path / "t-0"))


def payloads(res):
    """The text after ``payload: `` on each record line of a kafka-format dump."""
    return [line.split(" payload: ", 1)[1] for line in res.lines if line.startswith("| offset:")]


def json_records(res):
    return [obj for obj in map(json.loads, res.lines) if obj["type"] == "record"]


def b64(b):
    return base64.b64encode(b).decode()


def user1(i):
    return {"id": 10 ** 12 + i, "name": "user-é-%d" % i, "email": None if i % 2 else "u%d@x" % i,
            "avatar": bytes([i, 0, 255]), "score": i / 4, "tags": ["a", "b%d" % i]}


def as_json(user):
    """What the decoded body must be: Avro's values, bytes as base64."""
    return {**user, "avatar": b64(user["avatar"])}


# -- Avro with --value-schema -----------------------------------------------------------------------

def test_value_schema_decodes_avro_text_and_json(tmp_path):
    schema = write_schema(tmp_path / "user.avsc", USER_V1)
    users = [user1(i) for i in range(5)]
    seg = segment(tmp_path, [frame(7, avro(USER_V1, u)) for u in users])

    res = dump("--value-schema", schema, seg)
    assert res.code == 0, res
    got = payloads(res)
    assert len(got) == 5
    for line, user in zip(got, users):
        head, body = line.split(" avro: ", 1)
        assert head == "schemaId: 7"
        assert json.loads(body) == as_json(user)

    res = dump("--value-schema", schema, "--format", "json", seg)
    assert res.code == 0, res
    recs = json_records(res)
    assert [r["valueDecoded"] for r in recs] == [
        {"schemaId": 7, "format": "avro", "body": as_json(u)} for u in users]


def test_non_finite_doubles_are_strings_in_strict_json(tmp_path):
    schema = write_schema(tmp_path / "user.avsc", USER_V1)
    values = [float("nan"), float("inf"), float("-inf")]
    seg = segment(tmp_path, [frame(1, avro(USER_V1, {**user1(0), "score": v})) for v in values])
    res = dump("--value-schema", schema, "--format", "json", seg)
    assert res.code == 0, res
    assert "NaN" not in res.out.replace('"NaN"', "")
    assert [r["valueDecoded"]["body"]["score"] for r in json_records(res)] == [
        "NaN", "Infinity", "-Infinity"]


def test_key_schema_and_value_schema_together(tmp_path):
    kschema = write_schema(tmp_path / "key.avsc", KEY_SCHEMA)
    vschema = write_schema(tmp_path / "user.avsc", USER_V1)
    keys = [frame(3, avro(KEY_SCHEMA, {"tenant": "t%d" % i})) for i in range(3)]
    seg = segment(tmp_path, [frame(4, avro(USER_V1, user1(i))) for i in range(3)], keys=keys)
    res = dump("--key-schema", kschema, "--value-schema", vschema, "--format", "json", seg)
    assert res.code == 0, res
    recs = json_records(res)
    assert [r["keyDecoded"] for r in recs] == [
        {"schemaId": 3, "format": "avro", "body": {"tenant": "t%d" % i}} for i in range(3)]
    assert [r["valueDecoded"]["body"] for r in recs] == [as_json(user1(i)) for i in range(3)]


# -- --schema-dir ----------------------------------------------------------------------------------

def test_schema_dir_several_ids_and_kinds(tmp_path):
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    write_schema(schemas / "1.avsc", USER_V1)
    write_schema(schemas / "2.avsc", USER_V2)
    (schemas / "3.proto").write_text('syntax = "proto3"; message A {} message B {}\n')
    write_schema(schemas / "4.json", {"type": "object"})
    (schemas / "README.txt").write_text("not a schema")
    v2 = {"id": -5, "active": True, "attrs": {"x": 1, "y": -(2 ** 40)}}
    proto_body = b"\x08\x96\x01"  # field 1 varint 150
    values = [frame(1, avro(USER_V1, user1(1))),
              frame(2, avro(USER_V2, v2)),
              frame(3, message_indexes([0]) + proto_body),
              frame(3, message_indexes([1, 0, 300]) + proto_body),
              frame(4, b'{"a": [1, 2.5, "x"]}'),
              frame(9, avro(USER_V2, v2)),          # no schema for id 9
              frame(2, avro(USER_V2, v2))]          # the dump goes on after it
    seg = segment(tmp_path, values)

    res = dump("--value-decoder", "confluent", "--schema-dir", schemas, "--format", "json", seg)
    assert res.code == 0, res
    got = [r["valueDecoded"] for r in json_records(res)]
    assert got[0] == {"schemaId": 1, "format": "avro", "body": as_json(user1(1))}
    assert got[1] == {"schemaId": 2, "format": "avro", "body": v2}
    assert got[2] == {"schemaId": 3, "format": "protobuf", "messageIndexes": [0],
                      "body": b64(proto_body)}
    assert got[3] == {"schemaId": 3, "format": "protobuf", "messageIndexes": [1, 0, 300],
                      "body": b64(proto_body)}
    assert got[4] == {"schemaId": 4, "format": "json", "body": {"a": [1, 2.5, "x"]}}
    assert got[5]["schemaId"] == 9 and "unknown schema id" in got[5]["error"]
    assert "9.avsc" in got[5]["error"] and got[5]["bytes"] == b64(values[5])
    assert got[6] == got[1]

    res = dump("--value-decoder", "confluent", "--schema-dir", schemas, seg)
    assert res.code == 0, res
    text = payloads(res)
    head, body = text[1].split(" avro: ")
    assert head == "schemaId: 2" and json.loads(body) == v2
    assert text[2] == "schemaId: 3 messageIndexes: [0] protobuf: %s" % proto_body.hex()
    assert text[3] == "schemaId: 3 messageIndexes: [1,0,300] protobuf: %s" % proto_body.hex()
    assert text[4] == 'schemaId: 4 json: {"a":[1,2.5,"x"]}'
    assert text[5].startswith("<schemaId: 9 unknown schema id: ")
    assert text[5].endswith(": %s>" % values[5].hex())
    assert text[6] == text[1]


def test_value_schema_wins_over_schema_dir_for_values(tmp_path):
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    write_schema(schemas / "3.avsc", KEY_SCHEMA)
    vschema = write_schema(tmp_path / "v2.avsc", USER_V2)
    v2 = {"id": 1, "active": False, "attrs": {}}
    seg = segment(tmp_path, [frame(77, avro(USER_V2, v2))],
                  keys=[frame(3, avro(KEY_SCHEMA, {"tenant": "k"}))])
    res = dump("--key-decoder", "confluent", "--value-schema", vschema, "--schema-dir", schemas,
               "--format", "json", seg)
    assert res.code == 0, res
    (rec,) = json_records(res)
    assert rec["keyDecoded"] == {"schemaId": 3, "format": "avro", "body": {"tenant": "k"}}
    assert rec["valueDecoded"] == {"schemaId": 77, "format": "avro", "body": v2}


# -- Protobuf message indexes without a schema directory ------------------------------------------

@pytest.mark.parametrize("indexes", [[0], [1], [2, 5], [0, 0], [63, 64, 8191, 8192, 2 ** 31 - 1]])
def test_protobuf_message_indexes(tmp_path, indexes):
    proto = write_schema(tmp_path / "m.proto", {})
    body = bytes(range(1, 12))
    seg = segment(tmp_path, [frame(12, message_indexes(indexes) + body)])
    res = dump("--value-schema", proto, "--format", "json", seg)
    assert res.code == 0, res
    (rec,) = json_records(res)
    assert rec["valueDecoded"] == {"schemaId": 12, "format": "protobuf", "messageIndexes": indexes,
                              "body": b64(body)}
    res = dump("--value-schema", proto, "--format", "messages", seg)
    assert res.code == 0, res
    assert res.lines[0].endswith(" payload: schemaId: 12 messageIndexes: [%s] protobuf: %s"
                                 % (",".join(map(str, indexes)), body.hex()))


def test_protobuf_message_indexes_that_do_not_decode(tmp_path):
    proto = write_schema(tmp_path / "m.proto", {})
    values = [frame(5, varint(100) + b"\x02"),       # 100 indexes, 1 byte follows
              frame(5, varint(-1) + b"\x02\x02"),     # a negative count
              frame(5, b"\x04\x02\x80"),                     # the last varint does not end
              frame(5, b""),                                 # nothing after the header
              frame(5, message_indexes([0]) + b"ok")]
    seg = segment(tmp_path, values)
    res = dump("--value-schema", proto, "--format", "json", seg)
    assert res.code == 0, res
    got = [r["valueDecoded"] for r in json_records(res)]
    for bad, value in zip(got[:4], values):
        assert bad["schemaId"] == 5 and bad["error"] and bad["bytes"] == b64(value), bad
        assert "format" not in bad
    assert got[4] == {"schemaId": 5, "format": "protobuf", "messageIndexes": [0],
                      "body": b64(b"ok")}


# -- without schemas -----------------------------------------------------------------------------

def test_confluent_without_schema_shows_id_and_body(tmp_path):
    avro_body = avro(USER_V1, user1(3))
    values = [frame(21, avro_body), frame(22, b'{"k": {"n": null}}'), frame(-1, b"")]
    seg = segment(tmp_path, values, keys=[b"plain", b"k2", None])
    res = dump("--value-decoder", "confluent", seg)
    assert res.code == 0, res
    assert payloads(res) == ["schemaId: 21 bytes: %s" % avro_body.hex(),
                             'schemaId: 22 json: {"k":{"n":null}}',
                             "schemaId: -1 bytes: "]
    assert " key: plain payload: schemaId: 21 " in res.lines[3]
    res = dump("--value-decoder", "confluent", "--format", "json", seg)
    assert [r["valueDecoded"] for r in json_records(res)] == [
        {"schemaId": 21, "format": "bytes", "body": b64(avro_body)},
        {"schemaId": 22, "format": "json", "body": {"k": {"n": None}}},
        {"schemaId": -1, "format": "bytes", "body": ""}]


def test_header_values_stay_strings(tmp_path):
    seg = segment(tmp_path, [frame(1, b"\x02")], headers=(("trace", b"abc"), ("none", None)))
    res = dump("--value-decoder", "confluent", "--format", "json", seg)
    assert res.code == 0, res
    (rec,) = json_records(res)
    assert rec["headersDecoded"] == [["trace", "abc"], ["none", None]]
    assert rec["headers"] == [["trace", "abc"], ["none", None]]


# -- per-record errors ---------------------------------------------------------------------------

def test_bad_records_are_said_in_their_line_and_the_dump_goes_on(tmp_path):
    schema = write_schema(tmp_path / "user.avsc", USER_V1)
    good = frame(7, avro(USER_V1, user1(2)))
    values = [b"\x01" + good[1:],             # wrong magic byte
              b"\x00\x00\x07",                # shorter than the header
              b"",                            # empty
              good[:-4],                      # the Avro body is cut short
              good + b"\x00\x00",             # bytes left after the Avro value
              frame(7, b"\x02\xff\xff\xff\xff\x0f"),  # a long, then a string length past the end
              b'{"json": "not framed"}',      # a plain JSON value
              good]
    seg = segment(tmp_path, values)

    res = dump("--value-schema", schema, seg)
    assert res.code == 0, res            # the files are valid: only the payloads do not decode
    assert res.err == ""
    text = payloads(res)
    assert len(text) == len(values)
    assert text[0] == "<not Schema Registry framing: magic byte 1, expected 0: %s>" % values[0].hex()
    assert text[1].startswith("<not Schema Registry framing: 3 bytes, shorter than the 5-byte")
    assert text[1].endswith(": 000007>")
    assert " valueSize: 0 " in res.lines[5] and text[2].endswith("header (magic byte, schema id): >")
    for i in (3, 4, 5):
        assert text[i].startswith("<schemaId: 7 Avro body does not decode with %s: " % schema), i
        assert text[i].endswith(": %s>" % values[i].hex())
        assert "0x" not in text[i]  # no Python object names
    assert "2 bytes left after the value" in text[4]
    assert text[6].startswith("<not Schema Registry framing: magic byte 123, expected 0: ")
    head, body = text[7].split(" avro: ")
    assert head == "schemaId: 7" and json.loads(body) == as_json(user1(2))

    res = dump("--value-schema", schema, "--format", "json", seg)
    assert res.code == 0, res
    got = [r["valueDecoded"] for r in json_records(res)]
    for obj, value in zip(got[:7], values):
        assert set(obj) <= {"schemaId", "error", "bytes"} and obj["error"], obj
        assert obj["bytes"] == b64(value)
    assert [("schemaId" in obj) for obj in got[:7]] == [False, False, False, True, True, True,
                                                         False]
    assert got[7] == {"schemaId": 7, "format": "avro", "body": as_json(user1(2))}


def test_errors_in_messages_format_and_exit_status(tmp_path):
    seg = segment(tmp_path, [b"\x05abcdef", frame(1, b"\x00")])
    res = dump("--value-decoder", "confluent", "--format", "messages", seg)
    assert res.code == 0, res
    assert res.lines[0].endswith(" payload: <not Schema Registry framing: magic byte 5, expected "
                                 "0: 05616263646566>")
    assert res.lines[1].endswith(" payload: schemaId: 1 bytes: 00")


# -- options ----------------------------------------------------------------------------------------

def test_schema_options_usage_errors(tmp_path):
    seg = segment(tmp_path, [frame(1, b"")])
    good = write_schema(tmp_path / "ok.avsc", KEY_SCHEMA)
    bad = tmp_path / "bad.avsc"
    bad.write_text('{"type": "record", "name": "X", "fields": [{"name": "a", "type": "nope"}]}')
    notjson = tmp_path / "notjson.avsc"
    notjson.write_text("{")
    dup = tmp_path / "dup"
    dup.mkdir()
    write_schema(dup / "1.avsc", KEY_SCHEMA)
    write_schema(dup / "1.json", {})
    for args in (["--value-schema", good, "--value-decoder", "hex"],
                 ["--schema-dir", tmp_path],
                 ["--value-schema", bad],
                 ["--value-schema", notjson],
                 ["--key-schema", tmp_path / "missing.avsc"],
                 ["--value-decoder", "confluent", "--schema-dir", tmp_path / "missing"],
                 ["--value-decoder", "confluent", "--schema-dir", dup]):
        res = dump(*args, seg)
        assert res.code == 2, (args, res)
        assert "Traceback" not in res.err
    for args in (["--value-schema", bad], ["--value-schema", notjson],
                 ["--key-schema", tmp_path / "missing.avsc"],
                 ["--value-decoder", "confluent", "--schema-dir", dup]):
        res = dump(*args, seg)
        assert_clean_exit2(res)
        assert res.err.startswith("kafkalog: ")


def test_fastavro_is_imported_only_for_an_avro_schema(tmp_path):
    """Start-up: a dump without schema options, even with the confluent decoder, never imports
    fastavro; one with an .avsc does."""
    schema = write_schema(tmp_path / "k.avsc", KEY_SCHEMA)
    seg = segment(tmp_path, [frame(1, avro(KEY_SCHEMA, {"tenant": "x"}))])
    code = ("import sys, runpy; sys.argv = ['kafkalog', 'dump'] + sys.argv[1:]\n"
            "try:\n    runpy.run_module('kafkalog_cli', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print('fastavro' in sys.modules)\n")
    for args, expected in ((["--value-decoder", "confluent", seg], "False"),
                           (["--value-schema", schema, seg], "True")):
        p = subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=REPO,
                           capture_output=True, text=True, timeout=60,
                           env={**os.environ, "PYTHONPATH": REPO})
        assert p.returncode == 0, p.stderr
        assert p.stdout.splitlines()[-1] == expected, p.stdout


# -- hostile and unusual Avro bodies ---------------------------------------------------------------

EVERYTHING = {"type": "record", "name": "All", "fields": [
    {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
    {"name": "e2", "type": "Color"},
    {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
    {"name": "m", "type": {"type": "map", "values": ["null", "float", "Color"]}},
    {"name": "nested", "type": ["null", "All"]},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9,
                             "scale": 3}},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "flag", "type": "boolean"}]}


def test_every_avro_type_and_logical_types(tmp_path):
    import datetime
    import decimal
    import uuid
    schema = write_schema(tmp_path / "all.avsc", EVERYTHING)
    inner = {"e": "GREEN", "e2": "RED", "fx": b"\x00\x01\x02\x03", "m": {}, "nested": None,
             "dec": decimal.Decimal("-12.345"), "ts": 1700000000123,
             "u": "1b4e28ba-2fa1-11d2-883f-0016d3cca427", "flag": False}
    outer = {**inner, "m": {"a": None, "b": 1.5, "c": "RED"}, "nested": inner, "flag": True}
    seg = segment(tmp_path, [frame(1, avro(EVERYTHING, outer))])
    res = dump("--value-schema", schema, "--format", "json", seg)
    assert res.code == 0, res
    (rec,) = json_records(res)
    body = rec["valueDecoded"]["body"]
    assert body["e"] == "GREEN" and body["e2"] == "RED" and body["flag"] is True
    assert body["fx"] == b64(b"\x00\x01\x02\x03")
    assert body["m"] == {"a": None, "b": 1.5, "c": "RED"}
    assert body["dec"] == -12.345 and '"dec":-12.345' in res.out  # an exact number
    ts = datetime.datetime.fromtimestamp(1700000000.123, datetime.timezone.utc)
    assert datetime.datetime.fromisoformat(body["ts"]) == ts
    assert uuid.UUID(body["u"]) == uuid.UUID(inner["u"])
    assert body["nested"]["nested"] is None and body["nested"]["e2"] == "RED"


def test_array_blocks_with_byte_sizes(tmp_path):
    """A block with a negative count gives its size in bytes next (Avro specification)."""
    sch = {"type": "array", "items": "long"}
    schema = write_schema(tmp_path / "a.avsc", sch)
    items = varint(1) + varint(-300)
    body = varint(-2) + varint(len(items)) + items + varint(1) + varint(7) + b"\x00"
    seg = segment(tmp_path, [frame(1, body)])
    res = dump("--value-schema", schema, "--format", "json", seg)
    assert res.code == 0, res
    assert json_records(res)[0]["valueDecoded"]["body"] == [1, -300, 7]


@pytest.mark.parametrize("sch,body", [
    ({"type": "array", "items": "null"}, varint(2 ** 40) + b"\x00"),
    ({"type": "array", "items": {"type": "record", "name": "E", "fields": []}},
     varint(2 ** 62) + b"\x00"),
    ({"type": "map", "values": "null"}, varint(2 ** 40) + b"\x00"),
    ("string", varint(2 ** 40) + b"ab"),
    ("bytes", varint(-5) + b"ab"),
    (["null", "long"], varint(2)),
    ({"type": "enum", "name": "C", "symbols": ["A"]}, varint(1)),
    ("long", b"\xff" * 11),
    ({"type": "record", "name": "L", "fields": [{"name": "n", "type": ["null", "L"]}]},
     b"\x02" * 100000 + b"\x00"),
    ("string", varint(2) + b"\xff\xfe"),   # not UTF-8
])
def test_hostile_avro_bodies_are_per_record_errors(tmp_path, sch, body):
    schema = write_schema(tmp_path / "h.avsc", sch)
    seg = segment(tmp_path, [frame(1, body), frame(1, avro(sch, None) if sch == ["null", "long"]
                                                 else b"")])
    res = dump("--value-schema", schema, "--format", "json", seg)
    assert res.code == 0, res
    first = json_records(res)[0]["valueDecoded"]
    assert first["schemaId"] == 1 and "Avro body does not decode" in first["error"], first
    assert first["bytes"] == b64(frame(1, body))


def test_json_schema_body_that_is_not_json(tmp_path):
    schema = write_schema(tmp_path / "s.json", {"type": "object"})
    values = [frame(8, b'{"a": '), frame(8, b"\xff\xfe"), frame(8, b"NaN"), frame(8, b"[1e999]")]
    seg = segment(tmp_path, values)
    res = dump("--value-schema", schema, "--format", "json", seg)
    assert res.code == 0, res
    got = [r["valueDecoded"] for r in json_records(res)]
    for obj, value in zip(got[:3], values):
        assert obj["schemaId"] == 8 and obj["error"] and obj["bytes"] == b64(value), obj
    # a number no float holds, written as it was (strict JSON has no Infinity)
    assert '"valueDecoded":{"schemaId":8,"format":"json","body":[1e999]}' in res.out
    res = dump("--value-schema", schema, seg)
    assert payloads(res)[3] == "schemaId: 8 json: [1e999]"
