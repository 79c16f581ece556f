"""`kafkalog dump` against an independent reader: every printed field is compared with what
kafka-python parses from the same bytes (files written by kafka-python through kafkagen)."""

import base64
import json
import os
import struct

import pytest
from crc32c import crc32c

import dumpcheck as dc
import kafkagen as kg
from dumpcheck import (batch_pairs, check_json_dump, check_kafka_dump, check_messages_dump, dump,
                       dump_subprocess, expected_nonconsecutive, kafka_python_read, pairs,
                       record_offsets)

pytestmark = pytest.mark.usefixtures("implementation")

MATRIX = [(m, c) for m in (0, 1) for c in kg.LEGACY_CODECS] + [(2, c) for c in kg.V2_CODECS]
IDS = ["v%d-%s" % mc for mc in MATRIX]


def nonconsecutive_stderr(path, data, kafka_format="4.2"):
    found = expected_nonconsecutive(record_offsets(data), kafka_format)
    if not found:
        return []
    return (["Non-consecutive offsets in %s" % os.path.abspath(path)]
            + ["  %d is followed by %d" % p for p in found])


@pytest.fixture(params=MATRIX, ids=IDS)
def segment(request, tmp_path):
    magic, codec = request.param
    base = 0 if magic < 2 else 1234
    data = kg.sample_segment(magic, codec, base)
    path = kg.write_segment(tmp_path, base, data)
    for kb in kafka_python_read(data):
        assert kb.crc_ok  # the generator wrote valid batches
    if codec != "none":
        # at least the data batches really are compressed with the codec asked for
        codecs = {kb.batch.compression_type for kb in kafka_python_read(data)}
        assert kg.CODECS[codec] in codecs
    return path, data, base, magic, codec


def test_batch_lines_only(segment):
    path, data, base, _, _ = segment
    res = dump(path)
    assert res.code == 0, res
    check_kafka_dump(res, path, data, base_offset=base)
    assert res.err == ""  # no deep iteration: no non-consecutive summary either


def test_deep_iteration(segment):
    path, data, base, _, _ = segment
    res = dump("--deep-iteration", path)
    assert res.code == 0, res
    check_kafka_dump(res, path, data, deep=True, base_offset=base)
    assert res.err_lines == nonconsecutive_stderr(path, data)
    assert res.err_lines, "the sample has offset gaps"


def test_print_data_log(segment):
    path, data, base, _, _ = segment
    res = dump("--print-data-log", path)
    assert res.code == 0, res
    check_kafka_dump(res, path, data, deep=True, print_data=True, base_offset=base)
    assert res.err_lines == nonconsecutive_stderr(path, data)


def test_kafka_format_43(segment):
    """The Java tool (4.3): legacy record lines lose the stray '}', non-consecutive offsets are
    compared with an initial -1 and listed in ascending order."""
    path, data, base, _, _ = segment
    res = dump("--print-data-log", "--kafka-format", "4.3", path)
    assert res.code == 0, res
    check_kafka_dump(res, path, data, deep=True, print_data=True, base_offset=base,
                     kafka_format="4.3")
    assert res.err_lines == nonconsecutive_stderr(path, data, "4.3")


def test_json(segment):
    path, data, _, _, _ = segment
    res = dump("--format", "json", "--print-data-log", "--key-decoder", "base64",
               "--value-decoder", "base64", path)
    assert res.code == 0, res
    check_json_dump(res, path, data)


def test_json_batches_only(segment):
    path, data, _, _, _ = segment
    res = dump("--format", "json", path)
    assert res.code == 0, res
    check_json_dump(res, path, data, deep=False)


def test_json_string_decoder(segment):
    """Default decoding in JSON: UTF-8 text when valid, {"base64": ...} otherwise (lossless)."""
    path, data, _, _, _ = segment
    res = dump("--format", "json", "--deep-iteration", path)
    assert res.code == 0, res
    records = [o for o in map(json.loads, res.lines) if o["type"] == "record"]
    expected = [r for kb in kafka_python_read(data) for r in kb.records
                if not (kb.batch.magic >= 2 and kb.batch.is_control_batch)]
    got = [o for o in records if "controlType" not in o]
    assert len(got) == len(expected)
    for o, r in zip(got, expected):
        assert o["offset"] == r.offset
        assert o["key"] == dc.lossless(r.key)
        assert o["value"] == dc.lossless(r.value)


def test_messages(segment):
    path, data, _, _, _ = segment
    res = dump("--format", "messages", path)
    assert res.code == 0, res
    n = check_messages_dump(res, data)
    assert n == len(res.lines)
    assert n == sum(len(kb.records) for kb in kafka_python_read(data))


def test_subprocess_print_data_log(tmp_path):
    """The real process (python -m kafkalog_cli) prints the same fields."""
    data = kg.sample_segment(2, "zstd", 7)
    path = kg.write_segment(tmp_path, 7, data)
    res = dump_subprocess("--print-data-log", path)
    assert res.code == 0, res
    check_kafka_dump(res, path, data, deep=True, print_data=True, base_offset=7)
    assert res.err_lines == nonconsecutive_stderr(path, data)


# -- worked examples: DumpLogSegments' exact lines for hand-checked ``LegacyRecord`` (v0, v1) and
# ``DefaultRecordBatch`` (v2) bytes ---------------------------------------------------------------

V0_MESSAGE1 = bytes.fromhex("0000000000000000" "00000016" "E97538BC" "00" "00" "FFFFFFFF"
                            "00000008" "6D65737361676531")
V1_KV = bytes.fromhex("0000000000000000" "00000018" "39268C33" "01" "00" "0000018BCFE56800"
                      "00000001" "6B" "00000001" "76")
V2_HELLO = bytes.fromhex("0000000000000000" "0000003D" "00000000" "02" "E641A44B" "0000"
                         "00000000" "0000018BCFE56800" "0000018BCFE56800" "FFFFFFFFFFFFFFFF"
                         "FFFF" "FFFFFFFF" "00000001" "16" "00" "00" "00" "01" "0A"
                         "68656C6C6F" "00")
NAME = "00000000000000000000.log"


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_vectors_are_what_kafka_python_writes():
    assert kg.legacy_entries(0, [kg.Rec(None, b"message1")]) == V0_MESSAGE1
    assert kg.legacy_entries(1, [kg.Rec(b"k", b"v", 1700000000000)]) == V1_KV
    assert kg.v2_batch([kg.Rec(None, b"hello", 1700000000000)]) == V2_HELLO


def test_exact_v0_message1(in_tmp):
    (in_tmp / NAME).write_bytes(V0_MESSAGE1)
    res = dump("--print-data-log", "--files", NAME)
    assert res.code == 0, res
    assert res.out == (
        "Dumping 00000000000000000000.log\n"
        "Log starting offset: 0\n"
        "offset: 0 position: 0 NoTimestampType: -1 size: 34 magic: 0 compresscodec: none "
        "crc: 3916773564 isvalid: true\n"
        "| offset: 0 NoTimestampType: -1 keySize: -1 valueSize: 8 isValid: true "
        "crc: 3916773564} payload: message1\n")
    assert res.err == ""


def test_exact_v0_message1_java_tool(in_tmp):
    (in_tmp / NAME).write_bytes(V0_MESSAGE1)
    res = dump("--print-data-log", "--kafka-format", "4.3", "--files", NAME)
    assert res.code == 0, res
    assert res.lines[3] == ("| offset: 0 NoTimestampType: -1 keySize: -1 valueSize: 8 "
                            "isValid: true crc: 3916773564 payload: message1")


def test_exact_v1_key_value(in_tmp):
    (in_tmp / NAME).write_bytes(V1_KV)
    res = dump("--print-data-log", "--files", NAME)
    assert res.code == 0, res
    assert res.lines[2:] == [
        "offset: 0 position: 0 CreateTime: 1700000000000 size: 36 magic: 1 compresscodec: none "
        "crc: 958827571 isvalid: true",
        "| offset: 0 CreateTime: 1700000000000 keySize: 1 valueSize: 1 isValid: true "
        "crc: 958827571} key: k payload: v"]


def test_exact_v2_hello(in_tmp):
    (in_tmp / NAME).write_bytes(V2_HELLO)
    res = dump("--print-data-log", "--files", NAME)
    assert res.code == 0, res
    assert res.out == (
        "Dumping 00000000000000000000.log\n"
        "Log starting offset: 0\n"
        "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
        "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000000 size: 73 "
        "magic: 2 compresscodec: none crc: 3863061579 isvalid: true\n"
        "| offset: 0 CreateTime: 1700000000000 keySize: -1 valueSize: 5 sequence: -1 "
        "headerKeys: [] payload: hello\n")


def test_exact_v2_hello_any_leader_epoch(in_tmp):
    """partitionLeaderEpoch is outside the CRC: patching it keeps isvalid true."""
    data = bytearray(V2_HELLO)
    struct.pack_into(">i", data, 12, 17)
    (in_tmp / NAME).write_bytes(bytes(data))
    res = dump("--files", NAME)
    assert res.code == 0, res
    assert "partitionLeaderEpoch: 17 " in res.lines[2]
    assert res.lines[2].endswith("crc: 3863061579 isvalid: true")


def test_exact_commit_marker(in_tmp):
    """DumpLogSegments' exact lines for a COMMIT marker (``EndTransactionMarker``; producer 7,
    epoch 0, coordinator epoch 3) at
    offset 5, position 146, after two 73-byte batches."""
    first = V2_HELLO
    second = bytes(kg.set_v2_header(bytearray(V2_HELLO), base_offset=4))
    marker = kg.control_batch(kg.COMMIT, 5, 7, 0, 3, timestamp=1700000000123)
    assert len(marker) == 78
    crc = crc32c(marker[21:])
    assert crc == struct.unpack(">I", marker[17:21])[0]
    (in_tmp / NAME).write_bytes(first + second + marker)
    res = dump("--deep-iteration", "--files", NAME)
    assert res.code == 0, res
    assert res.lines[-2:] == [
        "baseOffset: 5 lastOffset: 5 count: 1 baseSequence: -1 lastSequence: -1 producerId: 7 "
        "producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: true "
        "deleteHorizonMs: OptionalLong.empty position: 146 CreateTime: 1700000000123 size: 78 "
        "magic: 2 compresscodec: none crc: %d isvalid: true" % crc,
        "| offset: 5 CreateTime: 1700000000123 keySize: 4 valueSize: 6 sequence: -1 "
        "headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 3"]
    # a control record never prints key/payload, even with --print-data-log
    res2 = dump("--print-data-log", "--files", NAME)
    assert res2.lines[-1] == res.lines[-1]


def test_abort_marker_and_unknown_control_type(in_tmp):
    abort = kg.control_batch(kg.ABORT, 0, 9, 4, 2147483647)
    unknown = kg.control_batch(99, 1, 9, 4, 0)
    (in_tmp / NAME).write_bytes(abort + unknown)
    res = dump("--deep-iteration", "--files", NAME)
    assert res.code == 0, res
    assert res.lines[3].endswith("headerKeys: [] endTxnMarker: ABORT coordinatorEpoch: 2147483647")
    assert res.lines[5].endswith("headerKeys: [] controlType: UNKNOWN(99)")


# -- single features, each against kafka-python -------------------------------------------------

def test_headers_with_null_values(tmp_path):
    recs = [kg.Rec(b"k", b"v", kg.T0, (("a", b"1"), ("b", None), ("c", b""), ("ключ", b"\xff")))]
    data = kg.v2_batch(recs, 3)
    path = kg.write_segment(tmp_path, 3, data)
    res = dump("--print-data-log", path)
    assert res.code == 0, res
    check_kafka_dump(res, path, data, deep=True, print_data=True, base_offset=3)
    assert "headerKeys: [a,b,c,ключ] key: k payload: v" in res.lines[3]
    res = dump("--format", "json", "--print-data-log", "--key-decoder", "base64",
               "--value-decoder", "base64", path)
    check_json_dump(res, path, data)


def test_empty_key_and_value_are_not_null(tmp_path):
    data = kg.v2_batch([kg.Rec(b"", b"", kg.T0), kg.Rec(None, None, kg.T0)])
    path = kg.write_segment(tmp_path, 0, data)
    res = dump("--print-data-log", path)
    assert res.code == 0, res
    check_kafka_dump(res, path, data, deep=True, print_data=True)
    assert res.lines[3].endswith("keySize: 0 valueSize: 0 sequence: -1 headerKeys: [] key:  payload: ")
    assert res.lines[4].endswith("keySize: -1 valueSize: -1 sequence: -1 headerKeys: []")


@pytest.mark.parametrize("raw, text", [
    (b"\xff", "\ufffd"),
    (b"ok\xc3(", "ok\ufffd("),
    (b"\xe2\x82", "\ufffd"),                  # truncated 3-byte sequence: one replacement
    (b"\xc0\xaf", "\ufffd\ufffd"),            # overlong encoding
    (b"\xed\xa0\x80", "\ufffd"),            # UTF-16 surrogate: one, as Java (Python: three)
    (b"\xed\xbfA", "\ufffdA"),              # a surrogate's two bytes: one, as Java
    (b"a\xf0\x9f\x99", "a\ufffd"),            # truncated 4-byte sequence
    ("🙂".encode(), "🙂"),
    (b"\xf4\x90\x80\x80", "\ufffd" * 4),     # above U+10FFFF
    (b"\xe0\x80\x80", "\ufffd" * 3),         # overlong 3-byte
    (b"\xf0\x80\x80\x80", "\ufffd" * 4),     # overlong 4-byte
    (b"x\xc2", "x\ufffd"),                   # lead byte at the end
    (b"\xe1\x80a", "\ufffda"),               # truncated, then ASCII
    (b"\x80\xbf", "\ufffd\ufffd"),           # lone continuation bytes
    (b"\x00\x7f\x1b", "\x00\x7f\x1b"),       # control characters are printed raw
    (b"\xef\xbf\xbf\xf4\x8f\xbf\xbf", "\uffff\U0010ffff"),  # valid edge code points
    (b"\xef\xbb\xbfbom", "\ufeffbom"),         # a BOM is kept
], ids=["ff", "c3", "e282", "overlong", "surrogate", "surrogate-2", "f09f99", "emoji", "f4-90", "e0-80",
        "f0-80", "c2-end", "e1-80-a", "cont", "controls", "edges", "bom"])
def test_malformed_utf8_is_replaced(tmp_path, raw, text):
    """Java's new String(bytes, UTF_8): each malformed part becomes one U+FFFD (the parts as
    tests/kafka_oracle/test_java_utf8.py checks them against Java itself)."""
    data = kg.v2_batch([kg.Rec(raw, raw, kg.T0)])
    path = kg.write_segment(tmp_path, 0, data)
    res = dump("--print-data-log", path)
    assert res.code == 0, res
    assert res.lines[3].endswith("headerKeys: [] key: %s payload: %s" % (text, text))
    res = dump("--format", "json", "--print-data-log", path)
    rec = [o for o in map(json.loads, res.lines) if o["type"] == "record"][0]
    # JSON is lossless: malformed UTF-8 comes out as base64, valid UTF-8 as its text
    try:
        expected = raw.decode("utf-8")
    except UnicodeDecodeError:
        expected = {"base64": base64.b64encode(raw).decode("ascii")}
    assert (rec["key"], rec["value"]) == (expected, expected)


def test_binary_payload_with_newlines_is_printed_raw(tmp_path):
    value = b"line1\nline2\r\n\x00\x01end"
    data = kg.v2_batch([kg.Rec(None, value, kg.T0)])
    path = kg.write_segment(tmp_path, 0, data)
    res = dump("--print-data-log", path)
    assert res.code == 0, res
    assert res.out.endswith(" payload: line1\nline2\r\n\x00\x01end\n")
    res = dump("--format", "json", "--print-data-log", "--key-decoder", "base64",
               "--value-decoder", "base64", path)
    check_json_dump(res, path, data)


@pytest.mark.parametrize("magic, codec", [(2, "none"), (2, "gzip"), (2, "lz4"), (1, "none"),
                                          (1, "snappy")])
def test_one_mebibyte_record(tmp_path, magic, codec):
    if codec == "none":
        value = kg.random_bytes(1 << 20, seed=11)
    else:
        value = (b"0123456789abcdef" * 64 + kg.random_bytes(64, seed=12)) * 1000
        value = value[:1 << 20]
    assert len(value) == 1 << 20
    recs = [kg.Rec(b"big", value, kg.T0), kg.Rec(b"small", b"x", kg.T0 + 1)]
    if magic == 2:
        data = kg.v2_batch(recs, 0, codec)
    else:
        data = kg.legacy_entries(magic, recs, 0, codec)
    path = kg.write_segment(tmp_path, 0, data)
    res = dump("--format", "json", "--print-data-log", "--key-decoder", "base64",
               "--value-decoder", "base64", path)
    assert res.code == 0, res
    check_json_dump(res, path, data)
    res = dump("--deep-iteration", path)
    assert res.code == 0, res
    check_kafka_dump(res, path, data, deep=True)
    assert " valueSize: 1048576 " in res.out


def test_sequence_wraps_past_int_max(tmp_path):
    data = kg.v2_batch([kg.Rec(b"k%d" % i, b"v", kg.T0) for i in range(4)], 0,
                       producer_id=5, producer_epoch=1, base_sequence=2147483646)
    path = kg.write_segment(tmp_path, 0, data)
    res = dump("--deep-iteration", path)
    assert res.code == 0, res
    check_kafka_dump(res, path, data, deep=True)
    assert "baseSequence: 2147483646 lastSequence: 1 " in res.lines[2]
    assert [pairs(" ".join(line.split(" ")[1:]))[4][1] for line in res.lines[3:]] == [
        "2147483646", "2147483647", "0", "1"]


def test_log_append_time_and_delete_horizon(tmp_path):
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(b"a", b"1", kg.T0), kg.Rec(b"b", b"2", kg.T0 + 5)],
             log_append_time=kg.T0 + 999)
    w.add_v2([kg.Rec(b"c", b"3", kg.T0 + 7)], delete_horizon_ms=kg.T0 + 86400000)
    path = w.write(tmp_path)
    res = dump("--deep-iteration", path)
    assert res.code == 0, res
    check_kafka_dump(res, path, w.data(), deep=True)
    assert " LogAppendTime: %d " % (kg.T0 + 999) in res.lines[2]
    # every record of a LogAppendTime batch carries the batch's maxTimestamp
    assert res.lines[3].startswith("| offset: 0 LogAppendTime: %d " % (kg.T0 + 999))
    assert res.lines[4].startswith("| offset: 1 LogAppendTime: %d " % (kg.T0 + 999))
    assert " deleteHorizonMs: OptionalLong[%d] " % (kg.T0 + 86400000) in res.lines[5]


def test_legacy_v1_log_append_time_wrapper(tmp_path):
    data = kg.legacy_entries(1, [kg.Rec(b"a", b"x" * 100, kg.T0), kg.Rec(b"b", b"y" * 100, kg.T0 + 5)],
                             40, "gzip", log_append_time=kg.T0 + 777)
    path = kg.write_segment(tmp_path, 40, data)
    res = dump("--print-data-log", path)
    assert res.code == 0, res
    check_kafka_dump(res, path, data, deep=True, print_data=True, base_offset=40)
    assert res.lines[3].startswith("| offset: 40 LogAppendTime: %d " % (kg.T0 + 777))
    assert res.lines[4].startswith("| offset: 41 LogAppendTime: %d " % (kg.T0 + 777))


def test_batch_lines_match_kafka_python_for_many_small_batches(tmp_path):
    """Positions are cumulative sizes over many batches of all three formats in one file."""
    w = kg.SegmentWriter(100)
    for i in range(30):
        if i % 3 == 0:
            w.add_legacy(0, [kg.Rec(None, b"m%d" % i)])
        elif i % 3 == 1:
            w.add_legacy(1, [kg.Rec(b"k", b"m%d" % i, kg.T0 + i)])
        else:
            w.add_v2([kg.Rec(b"k", b"m%d" % i, kg.T0 + i)] * (i % 4 + 1))
    path = w.write(tmp_path)
    res = dump("--deep-iteration", path)
    assert res.code == 0, res
    check_kafka_dump(res, path, w.data(), deep=True, base_offset=100)
    assert res.err == ""  # offsets are consecutive across batches


def test_batch_pairs_helper_detects_a_difference():
    """The comparison is not a tautology: a changed field is noticed."""
    kb = kafka_python_read(V2_HELLO)[0]
    line = ("baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 "
            "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false "
            "isControl: false deleteHorizonMs: OptionalLong.empty position: 0 "
            "CreateTime: 1700000000000 size: 73 magic: 2 compresscodec: none crc: 3863061579 "
            "isvalid: true")
    assert pairs(line) == batch_pairs(kb)
    assert pairs(line.replace("count: 1", "count: 2")) != batch_pairs(kb)
    assert pairs(line.replace("isvalid: true", "isvalid: false")) != batch_pairs(kb)


# -- large files: batch lines across the reader's chunk boundaries (8 MiB) ---------------------------

@pytest.fixture(scope="module")
def large_segment(tmp_path_factory):
    """~27 MiB: batches of uneven sizes so that 8, 16 and 24 MiB fall inside batches, a 9 MiB
    batch (larger than one chunk), a legacy entry and a CRC-damaged batch past 8 MiB, and a
    truncated tail."""
    w = kg.SegmentWriter(1000)
    rnd = kg.random.Random(99)
    i = 0
    while sum(len(c) for c in w.chunks) < (17 << 20):
        n = rnd.randrange(50_000, 700_000)
        w.add_v2([kg.Rec(b"k%d" % i, rnd.randbytes(n), kg.T0 + i)])
        i += 1
        if i == 20:
            w.add_legacy(1, [kg.Rec(b"legacy", rnd.randbytes(1000), kg.T0)])
    w.add_v2([kg.Rec(b"nine", rnd.randbytes(9 << 20), kg.T0)])
    for j in range(3):
        w.add_v2([kg.Rec(b"tail%d" % j, rnd.randbytes(300_000), kg.T0)], "gzip",
                 expect_compressed=False)
    data = bytearray(w.data())
    # damage a batch just after the 8 MiB boundary (a value byte, inside the CRC)
    starts = [sum(len(c) for c in w.chunks[:k]) for k in range(len(w.chunks))]
    victim = next(s for s in starts if s > (8 << 20))
    data[victim + 200] ^= 0x40
    data = bytes(data[:-1000])  # truncated tail
    path = kg.write_segment(tmp_path_factory.mktemp("large"), 1000, data)
    return path, data, victim


def test_large_file_batch_lines(large_segment):
    path, data, victim = large_segment
    res = dump(path)
    assert res.code == 1, res
    check_kafka_dump(res, path, data, base_offset=1000)
    bad = [line for line in res.lines if line.endswith("isvalid: false")]
    assert len(bad) == 1 and " position: %d " % victim in bad[0]


@pytest.mark.parametrize("cut", [8 << 20, (8 << 20) + 1, 16 << 20, 20 << 20])
def test_large_file_max_bytes(large_segment, cut):
    path, data, _ = large_segment
    res = dump("--max-bytes", cut, path)
    assert not any(line.startswith("Found ") for line in res.lines)
    kbs = [kb for kb in kafka_python_read(data, deep=False) if kb.position + kb.size <= cut]
    assert [pairs(line) for line in res.lines[2:]] == [batch_pairs(kb) for kb in kbs]


# -- codec ids that cannot be read -----------------------------------------------------------------

@pytest.mark.parametrize("codec_id", [5, 6, 7])
@pytest.mark.parametrize("flags", [[], ["--deep-iteration"], ["--format", "json"]])
def test_unknown_codec_id_is_invalid(tmp_path, codec_id, flags):
    """Kafka fails on a codec id above 4; the dump reports the batch and exits 1."""
    before = kg.v2_batch([kg.Rec(b"a", b"1", kg.T0)], 0)
    odd = bytearray(kg.v2_batch([kg.Rec(b"b", b"2", kg.T0)], 1))
    odd[22] = (odd[22] & 0xF8) | codec_id
    kg.fix_v2_crc(odd)
    after = kg.v2_batch([kg.Rec(b"c", b"3", kg.T0)], 2)
    data = before + bytes(odd) + after
    path = kg.write_segment(tmp_path, 0, data)
    res = dump(*flags, path)
    assert res.code == 1, res
    assert "Traceback" not in res.err
    assert "unknown compression type id %d" % codec_id in res.err
    kbs = kafka_python_read(data, deep=False)
    assert kbs[1].crc_ok and kbs[1].batch.compression_type == codec_id
    if "json" in flags:
        objs = [json.loads(line) for line in res.lines]
        assert [o["type"] for o in objs if o["type"] == "batch"] == ["batch"] * 3
        assert objs[1]["position"] == len(before) and objs[1]["isValid"] is True
        return
    batch_lines = [line for line in res.lines if line.startswith("baseOffset")]
    assert len(batch_lines) == 3
    assert pairs(batch_lines[0]) == batch_pairs(kbs[0])
    assert pairs(batch_lines[2]) == batch_pairs(kbs[2])
    got = pairs(batch_lines[1])
    expected = batch_pairs(kbs[1])
    assert [p for p in got if p[0] != "compresscodec"] == [
        p for p in expected if p[0] != "compresscodec"]


def test_zstd_in_a_legacy_message_is_invalid(tmp_path):
    entry = bytearray(kg.legacy_entries(1, [kg.Rec(b"c", b"3", kg.T0)], 0))
    entry[17] |= 4  # zstd: not allowed below magic 2
    kg.fix_legacy_crc(entry)
    after = kg.legacy_entries(1, [kg.Rec(b"d", b"4", kg.T0)], 1)
    path = kg.write_segment(tmp_path, 0, bytes(entry) + after)
    for flags in ([], ["--deep-iteration"]):
        res = dump(*flags, path)
        assert res.code == 1, res
        assert "zstd" in res.err and "Traceback" not in res.err
        assert len([line for line in res.lines if line.startswith("offset: ")]) == 2


def test_empty_batch_left_by_compaction(tmp_path):
    """count 0 with lastOffsetDelta 5 and producer state kept (the empty batch
    ``MemoryRecords.filterTo`` retains, ``DefaultRecordBatch.writeEmptyHeader``)."""
    full = bytearray(kg.v2_batch([kg.Rec(b"a", b"1", kg.T0)] * 6, 10, producer_id=3,
                                 producer_epoch=1, base_sequence=100))
    empty = bytearray(full[:61])
    struct.pack_into(">i", empty, 8, 49)
    struct.pack_into(">i", empty, 57, 0)
    kg.fix_v2_crc(empty)
    data = bytes(empty) + kg.v2_batch([kg.Rec(b"b", b"2", kg.T0)], 16)
    path = kg.write_segment(tmp_path, 10, data)
    for flags in ([], ["--print-data-log"]):
        res = dump(*flags, path)
        assert res.code == 0, res
        check_kafka_dump(res, path, data, deep=bool(flags), print_data=bool(flags),
                         base_offset=10)
    assert res.lines[2].startswith("baseOffset: 10 lastOffset: 15 count: 0 baseSequence: 100 "
                                   "lastSequence: 105 ")
    res = dump("--format", "json", "--print-data-log", "--key-decoder", "base64",
               "--value-decoder", "base64", path)
    check_json_dump(res, path, data)


def test_legacy_wrapper_with_offset_zero(tmp_path):
    """A v1 wrapper as kafka-python (and some librdkafka versions) send it: wrapper offset 0 and
    timestamp 0, inner relative offsets 0..n-1 taken as they are
    (``AbstractLegacyRecordBatch.DeepRecordsIterator``)."""
    from kafka.record.memory_records import MemoryRecordsBuilder
    for codec in (1, 2, 3):
        b = MemoryRecordsBuilder(1, codec, 1 << 30, offset=0)
        for i in range(3):
            b.append(kg.T0 + i, b"k%d" % i, b"v" * 100)
        b.close()
        data = bytes(b.buffer())
        path = kg.write_segment(tmp_path / str(codec), 0, data)
        res = dump("--print-data-log", path)
        assert res.code == 0, res
        check_kafka_dump(res, path, data, deep=True, print_data=True)
        assert [line.split(" ")[2] for line in res.lines[3:]] == ["0", "1", "2"]


def test_extreme_field_values(tmp_path):
    """int64/int32/int16 limits and negative timestamps, printed exactly as kafka-python reads
    them (the C renderer formats these itself)."""
    w = kg.SegmentWriter(2 ** 62)
    w.add_v2([kg.Rec(b"neg", b"1", -1), kg.Rec(b"neg2", b"2", -1_000_000),
              kg.Rec(None, None, -(2 ** 40))], partition_leader_epoch=-1,
             producer_id=2 ** 63 - 1, producer_epoch=32767, base_sequence=2 ** 31 - 1)
    w.add_v2([kg.Rec(b"max", b"3", 0)], log_append_time=2 ** 63 - 1,
             partition_leader_epoch=2 ** 31 - 1)
    w.add_v2([kg.Rec(b"dh", b"4", 5)], delete_horizon_ms=-(2 ** 63), producer_id=-(2 ** 63),
             producer_epoch=-32768, base_sequence=0)
    many = tuple(("h%03d" % i, None if i % 2 else b"x" * i) for i in range(300))
    w.add_v2([kg.Rec(b"k" * 70000, b"v" * 70000, kg.T0, many)])
    data = w.data()
    path = w.write(tmp_path)
    for flags, deep, pd in (([], False, False), (["--deep-iteration"], True, False),
                            (["--print-data-log"], True, True)):
        res = dump(*flags, path)
        assert res.code == 0, res
        check_kafka_dump(res, path, data, deep=deep, print_data=pd, base_offset=2 ** 62)
    assert " producerId: 9223372036854775807 producerEpoch: 32767 partitionLeaderEpoch: -1 " \
        in res.lines[2]
    assert " deleteHorizonMs: OptionalLong[-9223372036854775808] " in res.out
    res = dump("--format", "json", "--print-data-log", "--key-decoder", "base64",
               "--value-decoder", "base64", path)
    check_json_dump(res, path, data)
    res = dump("--format", "messages", path)
    assert check_messages_dump(res, data) == len(res.lines)


def test_offsets_are_tracked_per_file(tmp_path):
    """Two files that each start at 0: no 'Non-consecutive' pair across the file boundary."""
    a = kg.v2_batch([kg.Rec(b"a", b"1", kg.T0)] * 5, 0)
    pa = kg.write_segment(tmp_path / "a", 0, a)
    pb = kg.write_segment(tmp_path / "b", 0, a)
    for fmt in ("4.2", "4.3"):
        res = dump("--deep-iteration", "--kafka-format", fmt, "--files", "%s,%s" % (pa, pb))
        assert res.code == 0, res
        assert res.err == ""


def test_max_bytes_applies_to_each_file(tmp_path):
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(b"a", b"1", kg.T0)])
    w.add_v2([kg.Rec(b"b", b"2", kg.T0)])
    pa = w.write(tmp_path / "a")
    pb = w.write(tmp_path / "b")
    res = dump("--max-bytes", len(w.chunks[0]), pa, pb)
    assert res.code == 0, res
    assert [line.split(" ")[0] for line in res.lines] == ["Dumping", "Log", "baseOffset:"] * 2


# -- framings written by other producers (streams Kafka's ``GzipCompression``,
# ``SnappyCompression``, ``KafkaLZ4BlockInputStream`` and ``ZstdCompression`` read), read by
# kafka-python too ---------------------------------------------------------------------------------

def _gzip_two_members(data):
    import gzip
    half = len(data) // 2
    return gzip.compress(data[:half], mtime=0) + gzip.compress(data[half:], mtime=0)


def _snappy_raw(data):
    import snappy
    return snappy.compress(data)


def _snappy_xerial_small_blocks(data):
    from kafka.codec import snappy_encode
    return snappy_encode(data, xerial_compatible=True, xerial_blocksize=1000)


def _lz4_checksums(data):
    import lz4.frame
    return lz4.frame.compress(data, block_linked=False, content_checksum=True,
                              block_checksum=True, store_size=False)


def _lz4_256k_blocks(data):
    import lz4.frame
    return lz4.frame.compress(data, block_linked=False, block_size=lz4.frame.BLOCKSIZE_MAX256KB)


def _zstd_two_frames(data):
    import zstandard
    half = len(data) // 2
    c = zstandard.ZstdCompressor(write_content_size=False)
    return c.compress(data[:half]) + c.compress(data[half:])


OTHER_WRITERS = {
    "gzip-two-members": ("gzip", _gzip_two_members),
    "snappy-raw-block": ("snappy", _snappy_raw),
    "snappy-xerial-1000": ("snappy", _snappy_xerial_small_blocks),
    "lz4-checksums": ("lz4", _lz4_checksums),
    "lz4-256k-blocks": ("lz4", _lz4_256k_blocks),
    "zstd-two-frames": ("zstd", _zstd_two_frames),
}


@pytest.mark.parametrize("writer", sorted(OTHER_WRITERS))
def test_v2_batches_compressed_by_other_writers(tmp_path, writer):
    codec, compress = OTHER_WRITERS[writer]
    recs = [kg.Rec(b"k%d" % i, kg.filler(i, 40) + kg.binary(i, 30), kg.T0 + i,
                   (("h", b"%d" % i),)) for i in range(30)]
    plain = kg.v2_batch(recs, 77)
    data = kg.recompress_v2(plain, codec, compress) + kg.v2_batch(recs[:2], 107, codec)
    path = kg.write_segment(tmp_path, 77, data)
    kbs = kafka_python_read(data)
    assert kbs[0].crc_ok and kbs[0].batch.compression_type == kg.CODECS[codec]
    assert [r.value for r in kbs[0].records] == [r.value for r in recs]
    res = dump("--print-data-log", path)
    assert res.code == 0, res
    check_kafka_dump(res, path, data, deep=True, print_data=True, base_offset=77)
    res = dump("--format", "json", "--print-data-log", "--key-decoder", "base64",
               "--value-decoder", "base64", path)
    check_json_dump(res, path, data)


@pytest.mark.parametrize("writer", ["gzip-two-members", "snappy-raw-block", "lz4-checksums"])
@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_wrappers_compressed_by_other_writers(tmp_path, writer, magic):
    codec, compress = OTHER_WRITERS[writer]
    recs = [kg.Rec(b"k%d" % i, kg.filler(i, 10), kg.T0 + i) for i in range(6)]
    if magic == 1:
        inner = kg.legacy_entries(1, recs, 0)           # relative offsets 0..5
        data = kg.legacy_wrapper(1, inner, 25, codec, compress, timestamp=kg.T0 + 5)
    else:
        if writer == "lz4-checksums":
            pytest.skip("kafka-python reads magic-0 LZ4 only with Kafka's header quirk")
        inner = kg.legacy_entries(0, recs, 20)          # absolute offsets 20..25
        data = kg.legacy_wrapper(0, inner, 25, codec, compress)
    path = kg.write_segment(tmp_path, 20, data)
    kbs = kafka_python_read(data)
    assert [r.offset for r in kbs[0].records] == list(range(20, 26))
    res = dump("--print-data-log", path)
    assert res.code == 0, res
    check_kafka_dump(res, path, data, deep=True, print_data=True, base_offset=20)
