"""`kafkalog append`: what it writes is checked through independent readers only: kafka-python
(``kafkagen.kafka_python_read``) for batches and records, ``indexgen`` and the broker simulation in
``appendcheck`` for index files, ``kafkalog verify-index`` on every result.

The contract: stdin records (``lines`` or ``jsonl``) are grouped into batches
(``--batch-records``, ``--batch-bytes``), get offsets from the partition's next offset, are written
to the active segment with the broker's index maintenance (LogSegment.append), rolling as the
broker does (LogSegment.shouldRoll, UnifiedLog.roll; the roll tests are in test_roll.py). Errors: exit 2 with one stderr line.
"""

import os
import re
import struct
import subprocess
import sys
import threading

import pytest

import appendcheck as ac
import indexgen as ig
import kafkagen as kg
from appendcheck import append, assert_clean_exit2, check_partition, ok, roll

T0 = kg.T0
CODECS = list(kg.V2_CODECS)


def part_dir(tmp_path, name="orders-0"):
    return tmp_path / "logs" / name


def compressible(i, n=120):
    return ("value-%05d|" % i) + "abcdefgh" * (n // 8)


# -- lines -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("key", [None, "fixed-key-ü"])
def test_roundtrip_lines(tmp_path, codec, key):
    d = part_dir(tmp_path)
    values = [compressible(i) for i in range(95)]
    args = ["--input-format", "lines", "--codec", codec, "--batch-records", "10"]
    if key is not None:
        args += ["--key", key]
    before = ac.now_ms()
    res = ok(append(d, *args, input=ac.lines_input(values)))
    after = ac.now_ms()
    ac.assert_text_range(res, 0, 94)
    assert os.path.isfile(d / "00000000000000000000.log")
    segs, recs = check_partition(d)
    assert [r.offset for r in recs] == list(range(95))
    assert [r.value for r in recs] == [v.encode() for v in values]
    assert [r.key for r in recs] == [None if key is None else key.encode("utf-8")] * 95
    assert all(r.headers == [] for r in recs)
    for r in recs:
        assert before <= r.timestamp <= after, (r.timestamp, before, after)
    for s in segs:
        for kb in s.kbs:
            b = kb.batch
            assert b.magic == 2
            assert b.compression_type == kg.CODECS[codec], "batch at %d" % kb.position
            assert b.timestamp_type == 0
            assert kb.crc_ok
            assert 1 <= len(kb.records) <= 10
            assert b.max_timestamp == max(r.timestamp for r in kb.records)
            assert b.producer_id == -1 and b.base_sequence == -1 and not b.is_transactional
            assert not b.is_control_batch


def test_lines_default_output_is_one_text_line_per_run(tmp_path):
    d = part_dir(tmp_path)
    res = ok(append(d, input=ac.lines_input(["a", "b", "c"])))
    ac.assert_text_range(res, 0, 2)
    res = ok(append(d, input=ac.lines_input(["d", "e"])))
    ac.assert_text_range(res, 3, 4)
    _, recs = check_partition(d)
    assert [r.value for r in recs] == [b"a", b"b", b"c", b"d", b"e"]


def test_lines_crlf_and_missing_final_newline(tmp_path):
    d = part_dir(tmp_path)
    data = b"one\r\ntwo\nthree\r\nlast-without-newline"
    ok(append(d, "--input-format", "lines", input=data))
    _, recs = check_partition(d)
    assert [r.value for r in recs] == [b"one", b"two", b"three", b"last-without-newline"]
    assert all(r.key is None for r in recs)


def test_lines_keep_inner_whitespace_and_lone_cr(tmp_path):
    d = part_dir(tmp_path)
    data = b"  lead and trail  \nmid\rcr\n\ttab\t\n"
    ok(append(d, input=data))
    _, recs = check_partition(d)
    assert [r.value for r in recs] == [b"  lead and trail  ", b"mid\rcr", b"\ttab\t"]


def test_lines_empty_line_is_an_empty_value(tmp_path):
    # "one value per line": an empty line is a record with an empty (not null) value
    d = part_dir(tmp_path)
    ok(append(d, input=b"a\n\nb\n"))
    _, recs = check_partition(d)
    assert [r.value for r in recs] == [b"a", b"", b"b"]


def test_lines_binary_bytes_pass_through(tmp_path):
    d = part_dir(tmp_path)
    vals = [kg.binary(i, 50) for i in range(5)]
    ok(append(d, input=b"".join(v + b"\n" for v in vals)))
    _, recs = check_partition(d)
    assert [r.value for r in recs] == vals


# -- jsonl -------------------------------------------------------------------------------------------

def rich_records(n, t0=T0, compress=True):
    """(jsonl objects, expected (key, value, headers, timestamp or None for 'now'))."""
    objs, exp = [], []
    for i in range(n):
        pad = "xyzxyzxyz" * 12 if compress else ""
        ts = t0 + 3 * i if i % 5 != 4 else t0 - 100 + i
        kind = i % 8
        o = {"timestamp": ts}
        if kind == 0:                       # missing key, unicode value
            val = "naïve café – ключ %d %s" % (i, pad)
            o["value"] = val
            e = (None, val.encode("utf-8"), [])
        elif kind == 1:                     # string key, binary value
            raw = kg.binary(i, 30) + pad.encode()
            o.update(key="k-%d" % i, value=ac.b64obj(raw))
            e = (b"k-%d" % i, raw, [])
        elif kind == 2:                     # binary key, tombstone, header pairs with a null value
            kb_ = kg.binary(100 + i, 12)
            o.update(key=ac.b64obj(kb_), value=None,
                     headers=[["trace", "t-%d" % i], ["nullh", None]])
            e = (kb_, None, [("trace", b"t-%d" % i), ("nullh", None)])
        elif kind == 3:                     # headers as an object, binary header value
            hb = kg.binary(200 + i, 9)
            o.update(key="k-%d" % i, value="v-%d %s" % (i, pad),
                     headers={"a": "x", "n": None, "bin": ac.b64obj(hb), "ünï": "ключ"})
            e = (b"k-%d" % i, ("v-%d %s" % (i, pad)).encode(),
                 [("a", b"x"), ("n", None), ("bin", hb), ("ünï", "ключ".encode())])
        elif kind == 4:                     # duplicate header keys keep their order
            o.update(key="dup", value="d-%d %s" % (i, pad),
                     headers=[["k", "1"], ["k", "2"], ["j", ""]])
            e = (b"dup", ("d-%d %s" % (i, pad)).encode(), [("k", b"1"), ("k", b"2"), ("j", b"")])
        elif kind == 5:                     # explicit null key, empty strings
            o.update(key=None, value="")
            e = (None, b"", [])
        elif kind == 6:                     # empty key, empty headers
            o.update(key="", value="e-%d %s" % (i, pad), headers={})
            e = (b"", ("e-%d %s" % (i, pad)).encode(), [])
        else:                               # no timestamp: now
            del o["timestamp"]
            o.update(key="now-%d" % i, value="n-%d %s" % (i, pad))
            e = (b"now-%d" % i, ("n-%d %s" % (i, pad)).encode(), [])
            objs.append(o)
            exp.append(e + (None,))
            continue
        objs.append(o)
        exp.append(e + (ts,))
    return objs, exp


def check_rich(recs, exp, before, after, first_offset=0):
    assert len(recs) == len(exp)
    for i, (r, (k, v, h, ts)) in enumerate(zip(recs, exp)):
        assert r.offset == first_offset + i
        assert (r.key, r.value, r.headers) == (k, v, h), "record %d" % i
        if ts is None:
            assert before <= r.timestamp <= after, "record %d: %r" % (i, r.timestamp)
        else:
            assert r.timestamp == ts, "record %d" % i


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_jsonl(tmp_path, codec):
    d = part_dir(tmp_path)
    objs, exp = rich_records(64)
    before = ac.now_ms()
    res = ok(append(d, "--input-format", "jsonl", "--codec", codec, "--batch-records", "9",
                    "--format", "json", input=ac.jsonl_input(objs)))
    after = ac.now_ms()
    last = ac.appended_obj(res)
    assert (last["firstOffset"], last["lastOffset"], last["records"]) == (0, 63, 64)
    segs, recs = check_partition(d)
    check_rich(recs, exp, before, after)
    for s in segs:
        for kb in s.kbs:
            b = kb.batch
            assert b.compression_type == kg.CODECS[codec]
            assert kb.crc_ok
            assert b.max_timestamp == max(r.timestamp for r in kb.records)
            # as Java's MemoryRecordsBuilder: baseTimestamp is the first record's (deltas may be < 0)
            assert b.first_timestamp == kb.records[0].timestamp
            assert len(kb.records) <= 9


def test_jsonl_unicode_escapes_and_surrogates(tmp_path):
    d = part_dir(tmp_path)
    data = (b'{"key": "\\u00e9\\ud83d\\ude42", "value": "tab\\tnl\\nquote\\"", "timestamp": 5}\n'
            b'{"value": "\\u0000nul"}\n')
    ok(append(d, "--input-format", "jsonl", input=data))
    _, recs = check_partition(d)
    assert recs[0].key == "é🙂".encode("utf-8")
    assert recs[0].value == b'tab\tnl\nquote"'
    assert recs[0].timestamp == 5
    assert recs[1].key is None and recs[1].value == b"\x00nul"


def test_jsonl_crlf_lines(tmp_path):
    d = part_dir(tmp_path)
    data = b'{"value": "a", "timestamp": 1}\r\n{"value": "b", "timestamp": 2}\r\n'
    ok(append(d, "--input-format", "jsonl", input=data))
    _, recs = check_partition(d)
    assert [(r.value, r.timestamp) for r in recs] == [(b"a", 1), (b"b", 2)]


# -- legacy formats, timestamp types, producer fields -----------------------------------------------

@pytest.mark.parametrize("magic,codec", [(m, c) for m in (0, 1) for c in kg.LEGACY_CODECS])
def test_roundtrip_legacy(tmp_path, magic, codec):
    d = part_dir(tmp_path)
    objs = [{"key": "k-%d" % i if i % 3 else None, "value": compressible(i), "timestamp": T0 + i}
            for i in range(40)]
    objs[7]["value"] = None
    ok(append(d, "--input-format", "jsonl", "--magic", magic, "--codec", codec,
              "--batch-records", "6", input=ac.jsonl_input(objs)))
    segs, recs = check_partition(d)
    assert [r.offset for r in recs] == list(range(40))
    for o, r in zip(objs, recs):
        assert r.key == (None if o["key"] is None else o["key"].encode())
        assert r.value == (None if o["value"] is None else o["value"].encode())
        assert r.timestamp == (None if magic == 0 else o["timestamp"])
    for s in segs:
        for kb in s.kbs:
            b = kb.batch
            assert b.magic == magic
            assert b.compression_type == kg.CODECS[codec]
            assert kb.crc_ok
            for r in kb.records:
                assert r.validate_crc()
            if codec != "none":
                # wrapper offset = last inner offset (as LogValidator sets it)
                assert b.base_offset == kb.records[-1].offset
                assert len(kb.records) <= 6
                if magic == 1:
                    assert b._timestamp == max(r.timestamp for r in kb.records)
            else:
                assert len(kb.records) == 1


# What Kafka's compression streams put at the start of the compressed bytes (GZIPOutputStream,
# SnappyOutputStream's xerial framing, KafkaLZ4BlockOutputStream)
FRAME_START = {
    "gzip": bytes.fromhex("1f8b08"),
    "snappy": b"\x82SNAPPY\x00" + bytes.fromhex("0000000100000001"),   # xerial framing
    "lz4": bytes.fromhex("04224d18604082"),   # FLG 0x60, BD 0x40, correct header checksum
    "zstd": bytes.fromhex("28b52ffd"),
}
LZ4_MAGIC0_FRAME_START = bytes.fromhex("04224d1860401a")  # Kafka's magic-0 header checksum bug


def compressed_area(entry, magic):
    """The compressed bytes of one v2 batch or legacy wrapper entry."""
    if magic == 2:
        return entry[61:]
    at = 12 + 4 + 2 + (8 if magic == 1 else 0)
    (klen,) = struct.unpack_from(">i", entry, at)
    at += 4 + max(klen, 0)
    return entry[at + 4:]


def check_framing(tmp_path, magic, codec, want):
    d = part_dir(tmp_path)
    ok(append(d, "--magic", magic, "--codec", codec, input=ac.lines_input([compressible(i)
                                                                          for i in range(30)])))
    data = (d / "00000000000000000000.log").read_bytes()
    for entry in kg.split_entries(data):
        area = compressed_area(entry, magic)
        assert area.startswith(want), area[:16].hex()


@pytest.mark.parametrize("magic,codec", [(2, c) for c in FRAME_START] +
                         [(1, c) for c in ("gzip", "snappy", "lz4")] +
                         [(0, c) for c in ("gzip", "snappy")])
def test_compressed_framing_as_kafka_writes_it(tmp_path, magic, codec):
    check_framing(tmp_path, magic, codec, FRAME_START[codec])


def test_magic0_lz4_header_checksum_as_kafka_writes_it(tmp_path):
    check_framing(tmp_path, 0, "lz4", LZ4_MAGIC0_FRAME_START)


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_refuses_zstd(tmp_path, magic):
    d = part_dir(tmp_path)
    res = append(d, "--magic", magic, "--codec", "zstd", input=b"a\n")
    assert res.code == 2, res
    assert "Traceback" not in res.err
    segs = ac.read_partition(d) if os.path.isdir(d) else []
    assert all(not s.data for s in segs)


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_log_append_time_v2(tmp_path, codec):
    d = part_dir(tmp_path)
    objs = [{"value": compressible(i), "timestamp": T0 + i} for i in range(30)]
    before = ac.now_ms()
    ok(append(d, "--input-format", "jsonl", "--timestamp-type", "LogAppendTime", "--codec", codec,
              "--batch-records", "7", input=ac.jsonl_input(objs)))
    after = ac.now_ms()
    segs, recs = check_partition(d)
    for s in segs:
        for kb in s.kbs:
            b = kb.batch
            assert b.timestamp_type == 1 and b.attributes & kg.ATTR_LOG_APPEND_TIME
            assert before <= b.max_timestamp <= after
            assert b.compression_type == kg.CODECS[codec]
            assert kb.crc_ok
    assert [r.value for r in recs] == [o["value"].encode() for o in objs]


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_log_append_time_v1(tmp_path, codec):
    d = part_dir(tmp_path)
    objs = [{"value": compressible(i), "timestamp": T0 + i} for i in range(12)]
    before = ac.now_ms()
    ok(append(d, "--input-format", "jsonl", "--timestamp-type", "LogAppendTime", "--magic", "1",
              "--codec", codec, "--batch-records", "5", input=ac.jsonl_input(objs)))
    after = ac.now_ms()
    segs, recs = check_partition(d)
    for s in segs:
        for kb in s.kbs:
            b = kb.batch
            assert b.magic == 1 and b.timestamp_type == 1
            assert before <= b._timestamp <= after
            assert kb.crc_ok
            for r in kb.records:
                assert before <= r.timestamp <= after
    assert [r.value for r in recs] == [o["value"].encode() for o in objs]


def test_idempotent_producer_fields(tmp_path):
    d = part_dir(tmp_path)
    ok(append(d, "--producer-id", "4242", "--producer-epoch", "3", "--base-sequence", "10",
              "--batch-records", "4", input=ac.lines_input(["v%d" % i for i in range(10)])))
    segs, recs = check_partition(d)
    batches = [kb.batch for s in segs for kb in s.kbs]
    assert [len(kb.records) for s in segs for kb in s.kbs] == [4, 4, 2]
    seq = 10
    for b in batches:
        assert (b.producer_id, b.producer_epoch) == (4242, 3)
        assert b.base_sequence == seq, "each batch continues the sequence"
        assert not b.is_transactional and not b.is_control_batch
        seq += b.last_offset_delta + 1


def test_transactional_batches(tmp_path):
    d = part_dir(tmp_path)
    ok(append(d, "--producer-id", "77", "--producer-epoch", "0", "--base-sequence", "0",
              "--transactional", "--batch-records", "3",
              input=ac.lines_input(["t%d" % i for i in range(7)])))
    segs, recs = check_partition(d)
    kbs = [kb for s in segs for kb in s.kbs]
    data_batches = [kb.batch for kb in kbs if not kb.batch.is_control_batch]
    assert sum(b.last_offset_delta + 1 for b in data_batches) == 7
    for b in data_batches:
        assert b.is_transactional and b.producer_id == 77 and b.producer_epoch == 0
    # a closing marker, if the tool writes one, is a COMMIT of the same producer
    for kb in kbs:
        if kb.batch.is_control_batch:
            assert kb.batch.producer_id == 77
            assert kb.records[0].type == kg.COMMIT
    assert [r.value for r in recs if not r.batch.is_control_batch] == [
        b"t%d" % i for i in range(7)]


def test_sequence_wraps_past_int32_max(tmp_path):
    d = part_dir(tmp_path)
    ok(append(d, "--producer-id", "9", "--producer-epoch", "1", "--base-sequence", "2147483645",
              "--batch-records", "2", input=ac.lines_input(["s%d" % i for i in range(6)])))
    segs, _ = check_partition(d)
    assert [kb.batch.base_sequence for s in segs for kb in s.kbs] == [2147483645, 2147483647, 1]


def test_producer_id_alone_is_refused_or_completed(tmp_path):
    d = part_dir(tmp_path)
    res = append(d, "--producer-id", "5", input=b"a\n")
    if res.code == 2:
        assert_clean_exit2(res)
        return
    assert res.code == 0, res
    segs, _ = check_partition(d)
    b = segs[0].kbs[0].batch
    assert b.producer_id == 5 and b.base_sequence >= 0 and b.producer_epoch >= 0


def test_transactional_without_producer_id_is_refused(tmp_path):
    d = part_dir(tmp_path)
    res = append(d, "--transactional", input=b"a\n")
    if res.code == 2:  # a usage error, in click's words: the reason on the last line
        assert "Traceback" not in res.err
        assert "--producer-id" in res.err_lines[-1], res.err
        return
    segs, _ = check_partition(d)
    b = segs[0].kbs[0].batch
    assert not b.is_transactional or b.producer_id >= 0


# -- batching ----------------------------------------------------------------------------------------

def test_batch_records_groups_exactly(tmp_path):
    d = part_dir(tmp_path)
    ok(append(d, "--batch-records", "7", input=ac.lines_input(["r%d" % i for i in range(50)])))
    segs, _ = check_partition(d)
    assert [len(kb.records) for s in segs for kb in s.kbs] == [7] * 7 + [1]


def test_batch_bytes_limit(tmp_path):
    d = part_dir(tmp_path)
    vals = ["%04d" % i + "x" * 996 for i in range(40)]
    ok(append(d, "--batch-bytes", "4096", input=ac.lines_input(vals)))
    segs, recs = check_partition(d)
    kbs = [kb for s in segs for kb in s.kbs]
    assert [r.value for r in recs] == [v.encode() for v in vals]
    for kb in kbs[:-1]:
        # about 4096 bytes of records: 3 or 4 records of ~1010 bytes, never far beyond
        assert 3 <= len(kb.records) <= 5, [len(k.records) for k in kbs]
        assert kb.size <= 4096 + 1100


def test_default_batch_bytes_is_16k(tmp_path):
    d = part_dir(tmp_path)
    vals = ["%04d" % i + "y" * 996 for i in range(64)]
    ok(append(d, input=ac.lines_input(vals)))
    segs, _ = check_partition(d)
    kbs = [kb for s in segs for kb in s.kbs]
    assert len(kbs) >= 4
    for kb in kbs[:-1]:
        assert 14 <= len(kb.records) <= 18, [len(k.records) for k in kbs]


def test_record_larger_than_batch_bytes_goes_alone(tmp_path):
    d = part_dir(tmp_path)
    vals = ["small-%d" % i for i in range(3)] + ["B" * 9000] + ["small-%d" % i for i in range(3, 6)]
    ok(append(d, "--batch-bytes", "4096", input=ac.lines_input(vals)))
    segs, recs = check_partition(d)
    assert [r.value for r in recs] == [v.encode() for v in vals]
    big = [kb for s in segs for kb in s.kbs if any(r.value == b"B" * 9000 for r in kb.records)]
    assert len(big) == 1 and len(big[0].records) == 1


# -- output ------------------------------------------------------------------------------------------

def test_json_output_and_flush_reports(tmp_path):
    d = part_dir(tmp_path)
    res = ok(append(d, "--format", "json", "--flush-messages", "200", "--batch-records", "50",
                    input=ac.lines_input(["f%d" % i for i in range(1000)])))
    objs = ac.json_lines(res)
    last = objs[-1]
    assert last["type"] == "summary" and last["command"] == "append"
    assert (last["firstOffset"], last["lastOffset"], last["records"]) == (0, 999, 1000)
    flushed = [o["lastOffset"] for o in objs if o.get("type") == "flushed"]
    # the broker's rule: flush once LEO - recovery point >= flush.messages, checked after each batch
    assert flushed[:4] == [199, 399, 599, 799], flushed
    assert flushed == sorted(set(flushed))
    assert all(x <= 999 for x in flushed)
    check_partition(d)


def test_text_flush_reports(tmp_path):
    d = part_dir(tmp_path)
    res = ok(append(d, "--flush-messages", "100", "--batch-records", "25",
                    input=ac.lines_input(["f%d" % i for i in range(300)])))
    lines = [line for line in res.lines if line.strip()]
    assert len(lines) >= 3, res
    for x in (99, 199):
        assert any(str(x) in line for line in lines[:-1]), res
    ac.assert_text_range(res, 0, 299)


def test_json_output_continuing_offsets(tmp_path):
    d = part_dir(tmp_path)
    ok(append(d, input=ac.lines_input(["a"] * 5)))
    res = ok(append(d, "--format", "json", input=ac.lines_input(["b"] * 3)))
    last = ac.appended_obj(res)
    assert (last["firstOffset"], last["lastOffset"], last["records"]) == (5, 7, 3)


def test_empty_input_appends_nothing(tmp_path):
    d = part_dir(tmp_path)
    ok(append(d, input=ac.lines_input(["a", "b"])))
    before = ac.file_bytes(d)
    res = append(d, input=b"")
    assert res.code == 0, res
    after = ac.file_bytes(d)
    assert after["00000000000000000000.log"] == before["00000000000000000000.log"]
    check_partition(d)


# -- appending to what kafka-python wrote ------------------------------------------------------------

def kafka_python_partition(directory, preallocate_active):
    segments = []
    base = 0
    for i in range(3):
        data, nxt = ig.busy_segment(base, n_batches=20 + 5 * i, t0=T0 + 100000 * i,
                                    txn_at=3 + i, backwards_every=6 if i == 0 else 0, seed=i)
        segments.append((base, data))
        base = nxt
    return ig.write_partition(directory, segments, preallocate_active=preallocate_active), base


@pytest.mark.parametrize("preallocate", [False, True], ids=["trimmed", "preallocated"])
@pytest.mark.parametrize("fmt", ["lines", "jsonl"])
def test_append_to_kafka_python_partition(tmp_path, preallocate, fmt):
    d = part_dir(tmp_path)
    segs, leo = kafka_python_partition(d, preallocate)
    before = ac.file_bytes(d)
    active = os.path.basename(segs[-1].paths["log"])
    n = 300
    if fmt == "lines":
        inp = ac.lines_input(["new-%04d-" % i + "z" * 200 for i in range(n)])
    else:
        inp = ac.jsonl_input([{"key": "nk%d" % i, "value": "new-%04d-" % i + "z" * 200,
                               "headers": {"h": "%d" % i}} for i in range(n)])
    res = ok(append(d, "--input-format", fmt, "--format", "json", "--batch-records", "4",
                    input=inp))
    last = ac.appended_obj(res)
    assert (last["firstOffset"], last["lastOffset"], last["records"]) == (leo, leo + n - 1, n)
    after = ac.file_bytes(d)
    # sealed segments untouched, byte for byte (logs and indexes)
    for s in segs[:-1]:
        for path in s.paths.values():
            name = os.path.basename(path)
            assert after[name] == before[name], name
    # the active segment's old bytes unchanged, new batches after them
    old = before[active]
    assert after[active][:len(old)] == old
    got_segs, recs = check_partition(d)
    assert [s.base for s in got_segs] == [s.base_offset for s in segs]
    new = [r for r in recs if r.offset >= leo]
    assert [r.offset for r in new] == list(range(leo, leo + n))
    assert [r.value for r in new] == [("new-%04d-" % i + "z" * 200).encode() for i in range(n)]
    # old records are still the same
    old_recs = [r for r in recs if r.offset < leo]
    exp_old = [(r.offset, r.value) for s in segs for kb in kg.kafka_python_read(s.data)
               for r in kb.records]
    assert [(r.offset, r.value) for r in old_recs] == exp_old
    # index entries: the old ones kept, new ones by the append rule (LogSegment.append) for this run
    check_resumed_indexes(d, got_segs[-1], segs[-1].data)


@pytest.mark.parametrize("magic,codec", [(0, "none"), (1, "gzip"), (2, "zstd"), (2, "none")])
def test_append_after_kafka_python_sample_segment(tmp_path, magic, codec):
    """kafkagen's sample segments (gaps, transactions, LogAppendTime, legacy wrappers whose
    offset is the last inner offset): the next offset is the last offset + 1."""
    d = part_dir(tmp_path)
    data = kg.sample_segment(magic, codec, base_offset=50)
    ig.write_partition(d, [(50, data)])
    leo = max(r.offset for kb in kg.kafka_python_read(data) for r in kb.records) + 1
    res = ok(append(d, "--format", "json", input=ac.lines_input(["after-%d" % i
                                                                 for i in range(7)])))
    assert (ac.appended_obj(res)["firstOffset"], ac.appended_obj(res)["lastOffset"]) == (
        leo, leo + 6)
    segs, recs = check_partition(d, first_offset=None, gaps=True)
    assert (d / "00000000000000000050.log").read_bytes()[:len(data)] == data
    assert [(r.offset, r.value) for r in recs if r.offset >= leo] == [
        (leo + i, b"after-%d" % i) for i in range(7)]


# -- the default leader epoch: the cache's latest, or the log's last, whichever is higher -----------

def epoch_partition(directory, epochs_per_segment, empty_active=False):
    """Segments of one-record v2 batches whose partition leader epochs are
    ``epochs_per_segment`` (a list per segment), written with their indexes and no
    leader-epoch-checkpoint (a broker's partition loaded after a clean shutdown has an empty
    cache: CheckpointFile creates the file empty, LogLoader recovers no segment).
    ``empty_active``: an empty segment follows (a roll before the next write)."""
    segments, base = [], 0
    for i, epochs in enumerate(epochs_per_segment):
        w = kg.SegmentWriter(base)
        for j, epoch in enumerate(epochs):
            w.add_v2([kg.Rec(b"k", b"v-%d-%d" % (i, j), T0 + 10 * (i + j))],
                     partition_leader_epoch=epoch)
        segments.append((base, w.data()))
        base = w.next_offset
    if empty_active:
        segments.append((base, b""))
    ig.write_partition(directory, segments)
    return base


def batch_epochs(directory):
    return [(kb.batch.base_offset, getattr(kb.batch, "leader_epoch", None))
            for s in ac.read_partition(directory) for kb in s.kbs]


@pytest.mark.parametrize("empty_active", [False, True], ids=["active", "empty-active"])
def test_default_leader_epoch_is_the_logs_last_without_a_checkpoint(tmp_path, empty_active):
    """No checkpoint, batches of epochs 1 then 3: the new batches carry 3 (not 0, which would go
    backwards), and the cache gets epoch 3 at the first new batch (UnifiedLog.append), the
    earlier batches left before it as a broker's cache that started after them leaves them. An
    empty last segment sends the look-up to the segment before it."""
    d = part_dir(tmp_path)
    leo = epoch_partition(d, [[1, 1, 1], [1, 3, 3]], empty_active)
    ok(append(d, input=ac.lines_input(["a", "b"])))
    assert batch_epochs(d) == [(0, 1), (1, 1), (2, 1), (3, 1), (4, 3), (5, 3), (leo, 3)]
    with open(d / "leader-epoch-checkpoint") as f:
        assert f.read() == ig.leader_epoch_checkpoint([(3, leo)])
    check_partition(d, first_offset=None)  # verify-index exits 0


def test_default_leader_epoch_is_the_higher_of_cache_and_log(tmp_path):
    """The checkpoint lags the log (epoch 1 at 0; the log goes on in epoch 2): 2. The checkpoint
    ahead of the log (epoch 5, a leader elected that has not written yet): 5."""
    d = part_dir(tmp_path)
    leo = epoch_partition(d, [[1, 2]])
    (d / "leader-epoch-checkpoint").write_text(ig.leader_epoch_checkpoint([(1, 0)]))
    ok(append(d, input=ac.lines_input(["a"])))
    assert batch_epochs(d)[-1] == (leo, 2)
    d2 = part_dir(tmp_path, "orders-1")
    leo = epoch_partition(d2, [[1, 2]])
    (d2 / "leader-epoch-checkpoint").write_text(ig.leader_epoch_checkpoint([(1, 0), (5, 2)]))
    ok(append(d2, input=ac.lines_input(["a"])))
    assert batch_epochs(d2)[-1] == (leo, 5)


def test_default_leader_epoch_skips_legacy_batches(tmp_path):
    """The last batch is a v1 message (no epoch): the last v2 batch before it gives the epoch."""
    d = part_dir(tmp_path)
    ok(append(d, "--leader-epoch", "4", input=ac.lines_input(["a"])))
    ok(append(d, "--magic", "1", input=ac.lines_input(["b"])))
    ok(append(d, input=ac.lines_input(["c"])))
    assert [e for _, e in batch_epochs(d)] == [4, None, 4]


@pytest.mark.parametrize("empty_active", [False, True], ids=["active", "empty-active"])
def test_leader_epoch_below_the_logs_last_is_refused(tmp_path, empty_active):
    """--leader-epoch below the epoch of the log's last batch is refused as one below the
    cache's latest is (exit 2, one line, nothing written): a leader's epoch only grows."""
    d = part_dir(tmp_path)
    epoch_partition(d, [[1, 3]], empty_active)
    before = ac.file_bytes(d)
    res = append(d, "--leader-epoch", "2", input=b"x\n")
    assert_clean_exit2(res)
    assert "leader epoch 2 is below epoch 3 of the batch at offset 1" in res.err, res.err
    assert ac.file_bytes(d) == before
    ok(append(d, "--leader-epoch", "3", input=b"x\n"))
    check_partition(d, first_offset=None)


def check_resumed_indexes(directory, seg, old_data, interval=ac.DEFAULT_INTERVAL):
    """The active segment ``seg`` was written up to ``len(old_data)`` by kafka-python/indexgen
    (indexes with the final time entry) and then by one append run."""
    old_idx = ig.build_indexes(old_data, interval=interval)  # what indexgen wrote
    assert_resumed_indexes(seg, old_data, old_idx, interval)


def assert_resumed_indexes(seg, old_data, old_idx, interval=ac.DEFAULT_INTERVAL):
    """Its index entries are the old ones (``old_idx``) plus the broker's live rule (LogSegment.append) for
    the new batches, counting index.interval.bytes either from where the run opened the segment
    (as a restarted broker does) or continuing from the last entry; the contract allows both."""
    old_batches = ig.read_log(old_data)
    new_batches = [b for b in seg.batches if b.position >= len(old_data)]
    assert len(old_batches) + len(new_batches) == len(seg.batches)
    got = ac.segment_indexes(seg)
    candidates = []
    for model in ("reset", "continue"):
        start = ac.SimSeg(seg.base)
        start.offset_entries = list(old_idx.offset_entries)
        start.time_entries = list(old_idx.time_entries)
        start.batches, start.positions = list(old_batches), [b.position for b in old_batches]
        start.size = len(old_data)
        start.t0 = old_batches[0].max_timestamp if old_batches else None
        for b in old_batches:
            if b.max_timestamp > start.max_ts:
                start.max_ts, start.offset_of_max = b.max_timestamp, b.last_offset
        if model == "continue":
            last_pos = start.offset_entries[-1][1] if start.offset_entries else 0
            start.bytes_since = start.size - last_pos
        sim = ac.simulate(new_batches, ac.Config(interval=interval), start=start)
        assert len(sim) == 1
        candidates.append((sim[0].offset_entries, sim[0].time_entries))
    assert (got.offset_entries, got.time_entries) in candidates, (got, candidates)


def test_missing_active_offset_index_is_rebuilt(tmp_path):
    d = part_dir(tmp_path)
    data, nxt = ig.busy_segment(0, n_batches=30, seed=1)
    segs = ig.write_partition(d, [(0, data)])
    os.remove(segs[0].paths["index"])
    ok(roll(d))
    got, _ = check_partition(d)
    ac.assert_sealed_like_indexgen(got[0])


def test_append_after_crash_with_index_past_log_end(tmp_path):
    d = part_dir(tmp_path)
    data, nxt = ig.busy_segment(0, n_batches=30, seed=1)
    segs = ig.write_partition(d, [(0, data)])
    exp = ig.build_indexes(data)
    # the entry of a batch that was lost with the writer's buffer: offset nxt + 3 at a position
    # beyond the log's end
    ig.write_file(segs[0].paths["index"], ig.encode_offset_index(
        exp.offset_entries + [(nxt + 3, len(data) + 400)], 0))
    res = append(d, "--batch-records", "1", input=ac.lines_input(["n" * 300] * 40))
    if res.code == 2:
        assert_clean_exit2(res, stdout_allowed=True)
        assert ac.file_bytes(d)["00000000000000000000.log"] == data
        return
    assert res.code == 0, res
    check_partition(d)


# -- index maintenance -------------------------------------------------------------------------------

@pytest.mark.parametrize("interval", [4096, 1000, 0, 20000])
@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_live_index_one_run(tmp_path, interval, codec):
    """One run, one batch per append call: the active segment's entries are indexgen's
    (LogSegment.recover's rule) without the final time-index entry."""
    d = part_dir(tmp_path)
    vals = ["%05d" % i + "q" * (300 + (i * 37) % 500) for i in range(400)]
    ok(append(d, "--batch-records", "3", "--codec", codec, "--index-interval-bytes", interval,
              input=ac.lines_input(vals)))
    segs, _ = check_partition(d)
    assert len(segs) == 1
    seg = segs[0]
    exp = ig.build_indexes(seg.data, interval=interval, final_time_entry=False)
    got = ac.segment_indexes(seg)
    assert got.offset_entries == exp.offset_entries
    assert got.time_entries == exp.time_entries
    if interval < 20000:
        assert len(got.offset_entries) >= 3
    sim = ac.simulate(seg.batches, ac.Config(interval=interval))
    ac.assert_layout(d, sim)


def test_live_index_non_monotonic_timestamps(tmp_path):
    d = part_dir(tmp_path)
    objs = []
    for i in range(300):
        ts = T0 + 1000 * i
        if i % 4 == 3:
            ts -= 5500          # back in time
        objs.append({"key": "k%d" % i, "value": "w" * 700, "timestamp": ts})
    ok(append(d, "--input-format", "jsonl", "--batch-records", "2", input=ac.jsonl_input(objs)))
    segs, _ = check_partition(d)
    seg = segs[0]
    exp = ig.build_indexes(seg.data, final_time_entry=False)
    got = ac.segment_indexes(seg)
    assert got == exp
    assert len(got.time_entries) >= 5


def test_index_after_several_runs(tmp_path):
    """Each run resumes the active segment: verify-index passes; entries only grow."""
    d = part_dir(tmp_path)
    prev = ig.Indexes([], [])
    n = 0
    for run in range(6):
        old = ac.read_partition(d)[0].data if os.path.isdir(d) else b""
        vals = ["run%d-%04d-" % (run, i) + "p" * 400 for i in range(60)]
        ok(append(d, "--batch-records", "2", input=ac.lines_input(vals)))
        n += 60
        segs, recs = check_partition(d)
        assert len(recs) == n
        seg = segs[0]
        got = ac.segment_indexes(seg)
        assert got.offset_entries[:len(prev.offset_entries)] == prev.offset_entries
        assert got.time_entries[:len(prev.time_entries)] == prev.time_entries
        if old:
            assert_resumed_indexes(seg, old, prev)
        prev = got


# -- invalid input -----------------------------------------------------------------------------------

BAD_LINES = {
    "bad-json": b'{"value": "x"',
    "not-an-object": b'["value", "x"]',
    "unknown-field": b'{"key": "a", "val": "x"}',
    "value-nan": b'{"value": NaN}',
    "timestamp-string": b'{"value": "x", "timestamp": "yesterday"}',
    "timestamp-float": b'{"value": "x", "timestamp": 1.5}',
    "headers-string": b'{"value": "x", "headers": "h"}',
    "header-value-number": b'{"value": "x", "headers": {"h": 1}}',
    "header-pair-short": b'{"value": "x", "headers": [["h"]]}',
    "bad-base64": b'{"value": {"base64": "!!!not base64!!!"}}',
    "invalid-utf8": b'{"value": "\xff\xfe"}',
}


@pytest.mark.parametrize("kind", sorted(BAD_LINES))
def test_invalid_jsonl_line_in_the_middle(tmp_path, kind):
    """Lines 1-36 fine, line 37 bad, batches of 10: offsets 1000-1029 (three complete batches)
    stay; nothing of the batch holding line 37 (lines 31-40) is written; exit 2; the message
    names line 37 and the offset the partition now ends at."""
    d = part_dir(tmp_path)
    # start the partition at offset 1000 so that offsets and line numbers differ
    w = kg.SegmentWriter(1000)
    w.add_v2([kg.Rec(None, b"seed", T0)])
    ig.write_partition(d, [(1000, w.data())])
    lines = [b'{"value": "ok-%d", "timestamp": %d}' % (i, T0 + i) for i in range(1, 50)]
    lines[36] = BAD_LINES[kind]
    res = append(d, "--input-format", "jsonl", "--batch-records", "10",
                 input=b"\n".join(lines) + b"\n")
    assert_clean_exit2(res, stdout_allowed=True)
    msg = res.err_lines[0]
    assert "37" in msg, msg
    # the offset the partition now goes up to: last written 1030 (or next 1031)
    assert "1030" in msg or "1031" in msg, msg
    _, recs = check_partition(d, first_offset=1000)
    assert [r.value for r in recs] == [b"seed"] + [b"ok-%d" % i for i in range(1, 31)]


@pytest.mark.parametrize("batch_records,bad_line", [(10, 31), (1, 3)])
def test_invalid_line_right_after_a_complete_batch(tmp_path, batch_records, bad_line):
    """The records before the bad line fill whole batches: all of them stay."""
    d = part_dir(tmp_path)
    lines = [b'{"value": "ok-%d"}' % i for i in range(1, bad_line + 10)]
    lines[bad_line - 1] = b"garbage"
    res = append(d, "--input-format", "jsonl", "--batch-records", batch_records,
                 input=b"\n".join(lines) + b"\n")
    assert_clean_exit2(res, stdout_allowed=True)
    assert str(bad_line) in res.err_lines[0]
    _, recs = check_partition(d)
    assert [r.value for r in recs] == [b"ok-%d" % i for i in range(1, bad_line)]


@pytest.mark.parametrize("ts", [2**63, -(2**63) - 1, 10**30])
def test_timestamp_out_of_int64_is_an_input_error(tmp_path, ts):
    d = part_dir(tmp_path)
    ok(append(d, input=b"before\n"))
    data = b'{"value": "a"}\n{"value": "x", "timestamp": %d}\n' % ts
    res = append(d, "--input-format", "jsonl", "--batch-records", "1", input=data)
    assert_clean_exit2(res, stdout_allowed=True)
    assert "2" in res.err_lines[0]
    _, recs = check_partition(d)
    assert recs[0].value == b"before"


def test_int64_edge_timestamps_are_fine(tmp_path):
    d = part_dir(tmp_path)
    data = (b'{"value": "a", "timestamp": 0}\n'
            b'{"value": "b", "timestamp": 9223372036854775807}\n')
    ok(append(d, "--input-format", "jsonl", input=data))
    _, recs = check_partition(d)
    assert [r.timestamp for r in recs] == [0, 2**63 - 1]


def test_invalid_first_line_writes_nothing(tmp_path):
    d = part_dir(tmp_path)
    ok(append(d, input=b"x\n"))
    before = ac.file_bytes(d)
    res = append(d, "--input-format", "jsonl", input=b'{"value": }\n{"value": "y"}\n')
    assert_clean_exit2(res, stdout_allowed=True)
    assert "1" in res.err_lines[0]
    after = ac.file_bytes(d)
    assert after["00000000000000000000.log"] == before["00000000000000000000.log"]
    check_partition(d)


def test_invalid_line_after_flushes(tmp_path):
    """With --flush-messages the complete batches before the bad one are all kept, and every
    reported flush is in the partition."""
    d = part_dir(tmp_path)
    lines = [b'{"value": "v%d"}' % i for i in range(500)]
    lines[437] = b"garbage"
    res = append(d, "--input-format", "jsonl", "--batch-records", "20", "--flush-messages", "100",
                 "--format", "json", input=b"\n".join(lines) + b"\n")
    assert res.code == 2, res
    assert "438" in res.err_lines[-1]
    flushed = [o["lastOffset"] for o in ac.json_lines(res) if o.get("type") == "flushed"]
    _, recs = check_partition(d)
    # batches of 20: lines 1-420 complete; the batch of lines 421-440 holds the bad line
    assert [r.value for r in recs] == [b"v%d" % i for i in range(420)]
    assert flushed and max(flushed) <= 419


def test_append_leaves_the_recovery_point_checkpoint_alone(tmp_path):
    """append does not maintain recovery-point-offset-checkpoint (the broker's recovery point
    moves with its flushes): the file comes out byte for byte as it went in, never advanced over
    unflushed data."""
    d = part_dir(tmp_path)
    ok(append(d, input=ac.lines_input(["a"] * 3)))
    cp = d.parent / "recovery-point-offset-checkpoint"
    cp.write_text(ig.offset_checkpoint([("orders", 0, 3), ("other", 7, 11)]))
    before = cp.read_bytes()
    ok(append(d, "--format", "json", "--flush-messages", "5", "--batch-records", "5",
              input=ac.lines_input(["b"] * 12)))
    assert cp.read_bytes() == before
    _, recs = check_partition(d)
    assert len(recs) == 15


# -- locks and directories ---------------------------------------------------------------------------

def test_refuses_when_broker_holds_lock(tmp_path):
    d = part_dir(tmp_path)
    ok(append(d, input=b"first\n"))
    before = ac.file_bytes(d)
    with ac.lock_held(d.parent):
        res = append(d, input=b"second\n")
        assert_clean_exit2(res)
    assert ac.file_bytes(d)["00000000000000000000.log"] == before["00000000000000000000.log"]
    # released: works again
    ok(append(d, input=b"third\n"))
    _, recs = check_partition(d)
    assert [r.value for r in recs] == [b"first", b"third"]


def test_refuses_new_partition_when_broker_holds_lock(tmp_path):
    d = part_dir(tmp_path)
    with ac.lock_held(d.parent):
        res = append(d, input=b"x\n")
        assert_clean_exit2(res)
    segs = ac.read_partition(d) if os.path.isdir(d) else []
    assert all(not s.data for s in segs)


def test_stale_lock_file_is_fine(tmp_path):
    d = part_dir(tmp_path)
    os.makedirs(d)
    (d.parent / ".lock").write_bytes(b"")
    ok(append(d, input=b"x\n"))
    check_partition(d)


def test_parent_is_a_file(tmp_path):
    (tmp_path / "afile").write_bytes(b"not a directory")
    res = append(tmp_path / "afile" / "orders-0", input=b"x\n")
    assert_clean_exit2(res)


def test_dir_is_a_file(tmp_path):
    # rejected by click's argument check: a usage error (exit 2, "Error: ..." naming the path)
    (tmp_path / "orders-0").write_bytes(b"not a directory")
    res = append(tmp_path / "orders-0", input=b"x\n")
    assert res.code == 2, res
    assert "Traceback" not in res.err
    assert "orders-0" in res.err_lines[-1], res.err
    assert (tmp_path / "orders-0").read_bytes() == b"not a directory"


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_unwritable_dir(tmp_path):
    d = part_dir(tmp_path)
    ok(append(d, input=b"x\n"))
    os.chmod(d, 0o555)
    for n in os.listdir(d):
        if os.path.isfile(d / n):
            os.chmod(d / n, 0o444)
    try:
        res = append(d, input=b"y\n")
        assert_clean_exit2(res)
    finally:
        os.chmod(d, 0o755)


@pytest.mark.parametrize("path", ["/proc/kafkalog-test-nope/orders-0", "/sys/orders-0"])
def test_uncreatable_or_unwritable_place(path):
    """Places even root cannot write (procfs, sysfs): a clean one-line error."""
    if not os.path.isdir(os.path.dirname(path)) and not path.startswith("/proc/"):
        pytest.skip("no %s here" % os.path.dirname(path))
    res = append(path, input=b"x\n")
    assert_clean_exit2(res)


def test_unwritable_segment_file_as_root_via_directory_segment(tmp_path):
    """Root can write anywhere; make the active segment's name a directory instead."""
    d = part_dir(tmp_path)
    os.makedirs(d / "00000000000000000000.log")
    res = append(d, input=b"y\n")
    assert res.code == 2, res
    assert "Traceback" not in res.err


def test_bad_option_values(tmp_path):
    d = part_dir(tmp_path)
    for args in (["--magic", "3"], ["--codec", "brotli"], ["--input-format", "csv"],
                 ["--timestamp-type", "Now"], ["--batch-records", "0"]):
        res = append(d, *args, input=b"x\n")
        assert res.code == 2, (args, res)
        assert "Traceback" not in res.err


@pytest.mark.slow
def test_concurrent_appenders_never_interleave(tmp_path):
    d = part_dir(tmp_path)
    ok(append(d, input=b"seed\n"))
    n = 30000
    inputs = {w: ac.lines_input(["%s-%06d" % (w, i) for i in range(n)]) for w in "AB"}
    procs = {w: subprocess.Popen([sys.executable, "-m", "kafkalog_cli", "append", str(d),
                                  "--batch-records", "5"],
                                 cwd=ac.REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE) for w in "AB"}
    results = {}

    def feed(w):
        out, err = procs[w].communicate(inputs[w], timeout=120)
        results[w] = (procs[w].returncode, out.decode(), err.decode())

    threads = [threading.Thread(target=feed, args=(w,)) for w in "AB"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = {w: results[w][0] for w in "AB"}
    assert 0 in codes.values(), results
    for w in "AB":
        code, out, err = results[w]
        assert "Traceback" not in err, err
        assert code in (0, 2), results[w]
        if code == 2:
            assert len(err.strip().split("\n")) == 1, err
    _, recs = check_partition(d)
    values = [r.value for r in recs]
    assert values[0] == b"seed"
    # each writer's records form one contiguous, ordered block (or are absent if it failed)
    pos = 1
    blocks = []
    while pos < len(values):
        w = values[pos][:1].decode()
        blocks.append(w)
        expected = [("%s-%06d" % (w, i)).encode() for i in range(n)]
        assert values[pos:pos + n] == expected, "writer %s interleaved at offset %d" % (w, pos)
        pos += n
    assert sorted(blocks) == sorted(w for w in "AB" if codes[w] == 0)


# -- durability: a flush is reported only after the fsync ------------------------------------------------

def test_flush_reported_after_fsync(tmp_path, monkeypatch):
    """In-process run with os.fsync/os.fdatasync recorded: every "flushed" report comes after an
    fsync of the segment file that covered the reported offset's batch."""
    d = part_dir(tmp_path)
    events = []
    real_fsync, real_fdatasync = os.fsync, os.fdatasync

    def stdout_reports():
        try:
            sys.stdout.flush()
            buf = sys.stdout.buffer
            val = buf.getvalue() if hasattr(buf, "getvalue") else None
        except Exception:
            val = None
        return val

    def record(fd):
        try:
            path = os.readlink("/proc/self/fd/%d" % fd)
            size = os.fstat(fd).st_size
        except OSError:
            path, size = None, None
        events.append((path, size, stdout_reports()))

    def fsync(fd):
        real_fsync(fd)
        record(fd)

    def fdatasync(fd):
        real_fdatasync(fd)
        record(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    res = ok(append(d, "--format", "json", "--flush-messages", "100", "--batch-records", "10",
                    input=ac.lines_input(["d%04d" % i for i in range(500)])))
    flushed = [o["lastOffset"] for o in ac.json_lines(res) if o.get("type") == "flushed"]
    assert flushed, res
    segs, _ = check_partition(d)
    log_path = os.path.realpath(segs[0].path)
    end_of = {}
    for b in segs[0].batches:
        end_of[b.last_offset] = b.position + b.size
    log_syncs = [e for e in events if e[0] and os.path.realpath(e[0]) == log_path]
    assert log_syncs, events
    if all(e[2] is None for e in log_syncs):
        pytest.skip("cannot see stdout at fsync time in this click version")
    for x in flushed:
        # the report of flush X is not in stdout yet when the fsync covering X's batch happens
        needed = end_of[x]
        pattern = re.compile(rb'"lastOffset":\s*%d\b' % x)
        covering = [i for i, e in enumerate(events) if e in log_syncs and e[1] >= needed]
        assert covering, "no fsync of the log covered offset %d" % x
        for e in events[:covering[0] + 1]:
            assert e[2] is None or not pattern.search(e[2]), (
                "flush of %d reported before its fsync" % x)


# -- the library API: append_records from Python ------------------------------------------------------

def test_append_records_from_python(tmp_path):
    """``append_records`` used directly: the batches, offsets, producer fields and flush
    callbacks it promises, read back with kafka-python; a second call continues the offsets."""
    from kafkalog_cli.format.encode import Record
    from kafkalog_cli.log.segment_writer import RollPolicy
    from kafkalog_cli.log.append_types import AppendSettings
    from kafkalog_cli.log.produce import append_records
    d = part_dir(tmp_path)
    recs = [Record(b"k%d" % i, compressible(i).encode(), T0 + i, (("h", b"x%d" % i), ("n", None)))
            for i in range(10)]
    flushed = []
    res = append_records(str(d), recs, AppendSettings(batch_records=3, flush_messages=4,
                                                      codec="gzip", producer_id=7),
                         on_flush=flushed.append)
    assert (res.records, res.first_offset, res.last_offset, res.log_end_offset) == (10, 0, 9, 10)
    assert res.stopped is None and res.dropped == 0
    # an fsync once 4 or more records are unflushed after a batch: after offsets 0-5, then 6-9
    assert flushed == [5, 9]
    segs, got = check_partition(d)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in got] == [
        (i, b"k%d" % i, compressible(i).encode(), T0 + i) for i in range(10)]
    assert [r.headers for r in got] == [[("h", b"x%d" % i), ("n", None)] for i in range(10)]
    batches = [kb.batch for s in segs for kb in s.kbs]
    assert [b.base_sequence for b in batches] == [0, 3, 6, 9]
    assert all(b.producer_id == 7 and b.producer_epoch == 0 and not b.is_transactional
               and b.compression_type == kg.CODECS["gzip"] for b in batches)

    more = [Record(None, b"m%d" % i, T0 + 100 + i) for i in range(3)]
    res = append_records(str(d), more, AppendSettings(batch_records=1, roll=RollPolicy(1)))
    assert (res.records, res.first_offset, res.last_offset, res.log_end_offset) == (3, 10, 12, 13)
    segs, got = check_partition(d)
    assert [s.base for s in segs] == [0, 10, 11, 12]  # segment.bytes 1: a segment a batch
    assert [(r.offset, r.value) for r in got[10:]] == [(10 + i, b"m%d" % i) for i in range(3)]


def test_append_records_stops_at_an_input_error(tmp_path):
    """An InputError raised by the records iterable stops the run: the batches written before it
    stay (and are flushed), the records of the batch being gathered are dropped."""
    from kafkalog_cli.format.encode import Record
    from kafkalog_cli.log.append_types import AppendSettings, InputError
    from kafkalog_cli.log.produce import append_records
    d = part_dir(tmp_path)

    def records():
        for i in range(7):
            yield Record(None, b"r%d" % i, T0 + i)
        raise InputError("no record here", line=8)

    flushed = []
    res = append_records(str(d), records(), AppendSettings(batch_records=5), flushed.append)
    assert isinstance(res.stopped, InputError) and res.stopped.line == 8
    assert str(res.stopped) == "no record here" and res.stopped.exit_code == 2
    assert (res.records, res.first_offset, res.last_offset, res.dropped,
            res.log_end_offset) == (5, 0, 4, 2, 5)
    assert flushed == [4]
    _, got = check_partition(d)
    assert [(r.offset, r.value) for r in got] == [(i, b"r%d" % i) for i in range(5)]


def test_append_records_refuses_a_held_log_dir_and_bad_settings(tmp_path):
    from kafkalog_cli.errors import UsageError
    from kafkalog_cli.format.encode import Record
    from kafkalog_cli.log.lock import LockHeld
    from kafkalog_cli.log.append_types import AppendSettings
    from kafkalog_cli.log.produce import append_records
    d = part_dir(tmp_path)
    with ac.lock_held(d.parent):
        with pytest.raises(LockHeld):
            append_records(str(d), [Record(None, b"x", T0)])
    assert not d.exists()
    for bad in ({"magic": 1, "codec": "zstd"}, {"transactional": True}, {"base_sequence": 3},
                {"codec": "brotli"}):
        with pytest.raises(UsageError):
            AppendSettings(**bad)
    # without an epoch or a sequence: the producer's current epoch and next sequence (-1)
    s = AppendSettings(producer_id=3)
    assert (s.producer_epoch, s.base_sequence) == (-1, -1)
    for bad in ({"producer_id": 3, "producer_epoch": 40000}, {"leader_epoch": -2},
                {"producer_id": 3, "base_sequence": 2 ** 31}):
        with pytest.raises(UsageError):
            AppendSettings(**bad)


# -- a kill part-way: the indexes already match the log ---------------------------------------------------

def _wait_for_stable_size(path, minimum, timeout=60.0):
    """Wait until ``path`` holds at least ``minimum`` bytes and has not grown for a while."""
    import time
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        size = os.path.getsize(path) if os.path.exists(path) else -1
        if size != last:
            last, since = size, time.monotonic()
        elif size >= minimum and time.monotonic() - since > 0.5:
            return size
        time.sleep(0.05)
    raise AssertionError("%s: %d bytes after %.0fs" % (path, last, timeout))


def test_sigkill_part_way_leaves_indexes_of_what_is_written(tmp_path):
    """A big append killed part-way (here while it waits for more input,
    with hundreds of KB written). Before any recovery, the active segment's .index and
    .timeindex hold the entries of every batch in the log, as the broker's rebuild makes them
    (LogSegment.recover's rule equals LogSegment.append's within one run), none past the log;
    after `recover` the .index is still that."""
    d = part_dir(tmp_path)
    p = subprocess.Popen([sys.executable, "-m", "kafkalog_cli", "append", str(d)], cwd=ac.REPO,
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        p.stdin.write(ac.lines_input([compressible(i, 200) for i in range(3000)]))
        p.stdin.flush()
        _wait_for_stable_size(d / "00000000000000000000.log", 400000)
    finally:
        p.kill()
        p.wait(timeout=30)
        p.stdin.close()
    seen = ac.assert_indexes_within_log(d)
    [(base, (entries, time_entries, whole))] = seen.items()
    with open(d / "00000000000000000000.log", "rb") as f:
        data = f.read()
    assert sum(kb.size for kb in whole) == len(data)
    rebuilt = ig.build_indexes(data, final_time_entry=False)
    assert len(rebuilt.offset_entries) > 20
    assert entries == rebuilt.offset_entries
    assert time_entries == rebuilt.time_entries
    res = ac.kafkalog_in("recover", str(d))
    assert res.code in (0, 1), res
    assert ac.read_index(str(d / "00000000000000000000.index"), 0, "index") == \
        rebuilt.offset_entries


# -- safe input: typos are errors, JSON values are written as their JSON text --------------------

@pytest.mark.parametrize("line,value", [
    (b'{"value": 5}', b"5"),
    (b'{"value": -1.5e3}', b"-1500.0"),
    (b'{"value": true}', b"true"),
    (rb'{"value": {"a": [1, "b\u00e9"], "c": null}}', '{"a":[1,"b\u00e9"],"c":null}'.encode()),
    (b'{"value": [1, 2]}', b"[1,2]"),
    (b'{"value": {"base64": 12}}', b'{"base64":12}'),
    (b'{"value": {"base64": "aGk=", "x": 1}}', b'{"base64":"aGk=","x":1}'),
])
def test_a_json_value_is_written_as_its_compact_json_text(tmp_path, line, value):
    d = part_dir(tmp_path)
    ok(append(d, "--input-format", "jsonl", input=line + b"\n"))
    _, recs = check_partition(d)
    assert [r.value for r in recs] == [value]


def test_a_json_key_is_written_as_its_json_text(tmp_path):
    d = part_dir(tmp_path)
    ok(append(d, "--input-format", "jsonl", input=b'{"key": [1], "value": "x"}\n'))
    _, recs = check_partition(d)
    assert [(r.key, r.value) for r in recs] == [(b"[1]", b"x")]


def test_an_unknown_field_is_an_error_naming_it_and_its_line(tmp_path):
    d = part_dir(tmp_path)
    res = append(d, "--input-format", "jsonl",
                 input=b'{"key": "a", "value": "x"}\n{"key": "a", "val": "y"}\n')
    assert_clean_exit2(res, stdout_allowed=True)
    assert "line 2" in res.err_lines[0] and '"val"' in res.err_lines[0], res.err
    assert "--ignore-unknown-fields" in res.err_lines[0], res.err
    _, recs = check_partition(d) if os.path.exists(os.path.join(d, "00000000000000000000.log")) \
        else (None, [])
    assert [r.value for r in recs] == []   # the bad line's batch holds line 1 too


def test_unknown_fields_ignored_when_asked(tmp_path):
    d = part_dir(tmp_path)
    ok(append(d, "--input-format", "jsonl", "--ignore-unknown-fields",
              input=b'{"key": "a", "value": "x", "offset": 7, "topic": "t"}\n'
                    b'{"control": "commit", "producerId": 5, "note": 1}\n'))
    _, recs = check_partition(d)
    assert recs[0].value == b"x" and len(recs) == 2   # the record and the COMMIT marker


def test_an_unknown_field_on_a_control_line_is_an_error(tmp_path):
    d = part_dir(tmp_path)
    res = append(d, "--input-format", "jsonl",
                 input=b'{"control": "commit", "producerId": 5, "coordEpoch": 1}\n')
    assert_clean_exit2(res, stdout_allowed=True)
    assert '"coordEpoch"' in res.err_lines[0], res.err


@pytest.mark.parametrize("name", ["logdir", "orders", "orders-", "orders-x", "-0"])
def test_a_directory_not_named_as_a_partition_is_refused(tmp_path, name):
    d = str(tmp_path / name)
    res = append(d, input=b"x\n")
    assert res.code == 2, res
    assert len(res.err_lines) == 1 and "not a partition directory" in res.err, res.err
    assert not os.path.exists(d) or not os.listdir(d)


def test_force_writes_to_any_directory(tmp_path):
    d = str(tmp_path / "anywhere")
    ok(append(d, "--force", input=b"x\n"))
    _, recs = check_partition(d)
    assert [r.value for r in recs] == [b"x"]


@pytest.mark.parametrize("n,text", [(1, "appended 1 record at offset 0 to "),
                                    (2, "appended 2 records at offsets 0-1 to ")])
def test_the_report_counts_in_english(tmp_path, n, text):
    d = part_dir(tmp_path)
    res = append(d, input=b"x\n" * n)
    ok(res)
    assert res.out.splitlines()[-1].startswith(text), res.out


def test_snapshot_at_the_log_end_for_a_clean_load_without_one(tmp_path):
    """An append to a partition with no producer snapshot, in a log directory marked cleanly
    shut down, leaves one at the log end: a broker's load of a clean log directory without any
    snapshot skips the producer state rebuild (UnifiedLog.rebuildProducerState) and would forget
    the producers appended (tests/kafka_oracle/test_kafka_append.py shows the broker taking a resend as new).
    A partition with a snapshot already, or a log directory without the marker, gets none."""
    from kafkalog_cli.log.snapshot import parse_snapshot

    def run(logdir, marker):
        logdir.mkdir()
        if marker:
            (logdir / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":3}')
        d = logdir / "t-0"
        line = b'{"key": "k", "value": "v", "producerId": 42, "producerEpoch": 1}\n'
        ok(append(d, "--input-format", "jsonl", input=line * 3))
        return d, sorted(n for n in os.listdir(d) if n.endswith(".snapshot"))

    d, snaps = run(tmp_path / "clean", True)
    assert snaps == ["%020d.snapshot" % 3]
    [entry] = parse_snapshot((d / snaps[0]).read_bytes())
    assert (entry.producer_id, entry.epoch, entry.last_sequence) == (42, 1, 2)
    assert (tmp_path / "clean" / ".kafka_cleanshutdown").exists()
    # a second run finds that snapshot: the load replays the log after it, no new one
    ok(append(d, "--input-format", "jsonl",
              input=b'{"key": "k", "value": "v", "producerId": 42, "producerEpoch": 1}\n'))
    assert sorted(n for n in os.listdir(d) if n.endswith(".snapshot")) == snaps
    assert run(tmp_path / "crashed", False)[1] == []
