"""`kafkalog dump` options, each checked against kafka-python's reading of the bytes."""

import base64
import json
import os
import shutil
import struct

import pytest

import kafkagen as kg
from dumpcheck import (batch_pairs, check_kafka_dump, dump, expected_nonconsecutive,
                       kafka_file_lines_check, kafka_python_read, lossless, pairs, record_meta_pairs,
                       record_offsets, split_record_line)

pytestmark = pytest.mark.usefixtures("implementation")


def _three_segments(partition_dir):
    """A partition with three segments (bases 0, 42, 100), .log files only."""
    segs = []
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(b"a%d" % i, b"v%d" % i, kg.T0 + i) for i in range(20)])
    w.add_v2([kg.Rec(b"b%d" % i, b"w%d" % i, kg.T0 + i) for i in range(22)])
    segs.append((0, w.data()))
    w = kg.SegmentWriter(42)
    w.add_legacy(1, [kg.Rec(b"c%d" % i, b"x" * 50, kg.T0 + i) for i in range(58)], "gzip")
    segs.append((42, w.data()))
    w = kg.SegmentWriter(100)
    w.add_v2([kg.Rec(None, b"y" * 80, kg.T0)] * 5, "zstd")
    segs.append((100, w.data()))
    # written in a scrambled order on purpose
    paths = {}
    for base, data in (segs[2], segs[0], segs[1]):
        paths[base] = kg.write_segment(partition_dir, base, data)
    return [(paths[b], d, b) for b, d in segs]


# -- which files ---------------------------------------------------------------------------------

def test_files_option_comma_separated_in_given_order(tmp_path):
    a = kg.sample_segment(2, "gzip", 0)
    b = kg.sample_segment(1, "lz4", 500)
    pa = kg.write_segment(tmp_path / "a", 0, a)
    pb = kg.write_segment(tmp_path / "b", 500, b)
    res = dump("--deep-iteration", "--files", "%s,%s" % (pb, pa))
    assert res.code == 0, res
    i = kafka_file_lines_check(res.lines, 0, pb, b, deep=True, base_offset=500)
    i = kafka_file_lines_check(res.lines, i, pa, a, deep=True, base_offset=0)
    assert i == len(res.lines)
    # one summary per file (both samples have gaps), in the order of DumpLogSegments' map of
    # them (a Scala mutable.HashMap in the default 4.2, one put per pair: not the file order;
    # tests/kafka_oracle/test_kafka_dump.py holds the order to Kafka's)
    from kafkalog_cli.cli.render import map_order
    pairs = {}
    for line in res.err_lines:
        if line.startswith("Non-consecutive offsets in "):
            current = line[len("Non-consecutive offsets in "):]
            pairs[current] = 0
        elif line.startswith("  "):
            pairs[current] += 1
    calls = [p for p in (os.path.abspath(pb), os.path.abspath(pa)) for _ in range(pairs[p])]
    assert list(pairs) == map_order(calls, java=False)
    assert set(pairs) == {os.path.abspath(pb), os.path.abspath(pa)}


def test_files_option_repeated_and_positional(tmp_path):
    a = kg.v2_batch([kg.Rec(b"k", b"v", kg.T0)], 0)
    b = kg.v2_batch([kg.Rec(b"k", b"v", kg.T0)], 9)
    pa = kg.write_segment(tmp_path, 0, a)
    pb = kg.write_segment(tmp_path, 9, b)
    res = dump("--files", pa, "--files", pb)
    assert res.code == 0, res
    assert [line for line in res.lines if line.startswith("Dumping")] == [
        "Dumping %s" % pa, "Dumping %s" % pb]
    res = dump(pb, pa)
    assert [line for line in res.lines if line.startswith("Dumping")] == [
        "Dumping %s" % pb, "Dumping %s" % pa]


def test_partition_directory_in_offset_order(tmp_path):
    part = tmp_path / "orders-0"
    segs = _three_segments(part)
    res = dump("--deep-iteration", part)
    assert res.code == 0, res
    i = 0
    for path, data, base in segs:
        i = kafka_file_lines_check(res.lines, i, path, data, deep=True, base_offset=base)
    assert i == len(res.lines)
    assert res.err == ""  # 0..41, 42..99, 100..104: consecutive within each file


def test_log_directory_topics_then_partition_numbers(tmp_path):
    order = ["events-0", "orders-0", "orders-2", "orders-10"]
    for name in reversed(order):
        kg.write_segment(tmp_path / name, 0, kg.v2_batch([kg.Rec(b"k", name.encode(), kg.T0)]))
    (tmp_path / "recovery-point-offset-checkpoint").write_bytes(b"0\n0\n")
    (tmp_path / "meta.properties").write_bytes(b"version=1\n")
    res = dump(tmp_path)
    assert res.code == 0, res
    assert [line for line in res.lines if line.startswith("Dumping")] == [
        "Dumping %s" % os.path.join(str(tmp_path), "recovery-point-offset-checkpoint")] + [
        "Dumping %s" % os.path.join(str(tmp_path), name, "00000000000000000000.log")
        for name in order]
    assert res.err_lines == ["Ignoring unknown file %s" % os.path.join(str(tmp_path), "meta.properties")]


# -- how much ------------------------------------------------------------------------------------

@pytest.fixture
def five_batches(tmp_path):
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(b"a", b"1" * 100, kg.T0)] * 3)
    w.add_legacy(1, [kg.Rec(b"b", b"2" * 100, kg.T0)] * 2, "gzip")
    w.add_v2([kg.Rec(b"c", b"3" * 300, kg.T0)] * 2, "snappy")
    w.add_legacy(0, [kg.Rec(b"d", b"4")])
    w.add_v2([kg.Rec(b"e", b"5", kg.T0)])
    return w.write(tmp_path), w.data(), [len(c) for c in w.chunks]


@pytest.mark.parametrize("k", [0, 1, 2, 3, 4, 5])
def test_max_bytes_sum_of_k_batches_prints_k_batch_lines(five_batches, k):
    path, data, sizes = five_batches
    res = dump("--max-bytes", sum(sizes[:k]), path)
    assert res.code == 0, res
    assert res.lines[:2] == ["Dumping %s" % path, "Log starting offset: 0"]
    assert len(res.lines) == 2 + k
    kbs = kafka_python_read(data, deep=False)
    for line, kb in zip(res.lines[2:], kbs[:k]):
        assert pairs(line) == batch_pairs(kb)
    assert not any(line.startswith("Found ") for line in res.lines)


@pytest.mark.parametrize("extra", [1, 17, 18, 40])
def test_max_bytes_inside_a_batch_prints_no_trailing_line(five_batches, extra):
    path, _, sizes = five_batches
    res = dump("--max-bytes", sum(sizes[:2]) + extra, path)
    assert res.code == 0, res
    assert len(res.lines) == 4
    assert not any(line.startswith("Found ") for line in res.lines)


def test_max_bytes_suppresses_trailing_line_of_truncated_file(five_batches, tmp_path):
    _, data, sizes = five_batches
    cut = kg.truncated(data, 5)
    path = kg.write_segment(tmp_path / "cut", 0, cut)
    res = dump("--max-bytes", 2147483646, path)
    assert len(res.lines) == 2 + 4
    assert not any(line.startswith("Found ") for line in res.lines)
    # --max-bytes equal to Kafka's default is the default: the line is printed
    res = dump("--max-bytes", 2147483647, path)
    assert res.code == 1
    assert res.lines[-1] == "Found %d invalid bytes at the end of %s" % (
        sizes[-1] - 5, os.path.basename(path))


# -- record lines ---------------------------------------------------------------------------------

def _skip_metadata_sample(tmp_path):
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(b"k1", b"v1", kg.T0), kg.Rec(None, b"v2", kg.T0), kg.Rec(b"k3", None, kg.T0),
              kg.Rec(None, None, kg.T0)], producer_id=3, producer_epoch=0, base_sequence=0,
             transactional=True)
    w.add_control(kg.COMMIT, 3, 0, 1)
    w.add_legacy(0, [kg.Rec(b"k5", b"v5"), kg.Rec(None, b"v6")])
    w.add_legacy(1, [kg.Rec(b"k7", b"v7" * 50, kg.T0), kg.Rec(None, b"v8" * 50, kg.T0)], "gzip")
    return w.write(tmp_path), w.data()


def _record_lines(res):
    return [line for line in res.lines[2:]
            if not line.startswith(("baseOffset: ", "offset: "))]


@pytest.mark.parametrize("kafka_format", ["4.2", "4.3"])
def test_skip_record_metadata_print_data_log(tmp_path, kafka_format):
    path, data = _skip_metadata_sample(tmp_path)
    res = dump("--print-data-log", "--skip-record-metadata", "--kafka-format", kafka_format, path)
    assert res.code == 0, res
    java = kafka_format >= "4.3"
    expected = []
    for kb in kafka_python_read(data):
        for r in kb.records:
            if kb.batch.magic >= 2 and kb.batch.is_control_batch:
                expected.append("")
                continue
            line, prefix = "", "| "
            if r.key is not None:
                line += prefix + "key: " + r.key.decode()
                prefix = " "
            if r.value is not None:
                line += (prefix if java else " ") + "payload: " + r.value.decode()
            expected.append(line)
    assert _record_lines(res) == expected
    # spot checks of DumpLogSegments' record lines (Scala dumpLog, and the Java tool of 4.3+)
    assert "| key: k1 payload: v1" in expected
    assert (" payload: v2" if not java else "| payload: v2") in expected
    assert "| key: k3" in expected


def test_skip_record_metadata_without_print_gives_empty_lines(tmp_path):
    path, data = _skip_metadata_sample(tmp_path)
    res = dump("--deep-iteration", "--skip-record-metadata", path)
    assert res.code == 0, res
    n = sum(len(kb.records) for kb in kafka_python_read(data))
    assert _record_lines(res) == [""] * n


def test_deep_iteration_without_print_has_no_key_or_payload(tmp_path):
    path, data = _skip_metadata_sample(tmp_path)
    res = dump("--deep-iteration", path)
    assert res.code == 0, res
    check_kafka_dump(res, path, data, deep=True)
    assert " key: " not in res.out and " payload: " not in res.out


# -- decoders ------------------------------------------------------------------------------------

@pytest.fixture
def typed_segment(tmp_path):
    recs = [kg.Rec(struct.pack(">i", -7 * i), struct.pack(">q", 2 ** 40 + i), kg.T0,
                   (("h", struct.pack(">q", -i)),)) for i in range(5)]
    data = kg.v2_batch(recs, 0, "gzip", expect_compressed=False)
    return kg.write_segment(tmp_path, 0, data), data


def _tails(res, n_meta=6):
    return [split_record_line(line, n_meta)[1] for line in res.lines if line.startswith("| ")]


def test_int_and_long_decoders(typed_segment):
    path, data = typed_segment
    res = dump("--key-decoder", "int", "--value-decoder", "long", path)  # implies printing
    assert res.code == 0, res
    expected = ["key: %d payload: %d" % (struct.unpack(">i", r.key)[0],
                                          struct.unpack(">q", r.value)[0])
                for kb in kafka_python_read(data) for r in kb.records]
    assert _tails(res) == expected
    assert expected[1] == "key: -7 payload: 1099511627777"


def test_int_decoder_on_wrong_size_does_not_crash(typed_segment):
    path, data = typed_segment
    res = dump("--key-decoder", "long", "--value-decoder", "int", path)
    assert res.code == 0, res
    tails = _tails(res)
    recs = [r for kb in kafka_python_read(data) for r in kb.records]
    assert len(tails) == len(recs) == 5
    # 4-byte keys are not longs, 8-byte values are not ints: the bytes are shown, not guessed
    for t, r in zip(tails, recs):
        key_part, value_part = t.split(" payload: ")
        assert r.key.hex() in key_part
        assert r.value.hex() in value_part


def test_hex_and_base64_decoders(typed_segment):
    path, data = typed_segment
    res = dump("--key-decoder", "hex", "--value-decoder", "base64", path)
    assert res.code == 0, res
    expected = ["key: %s payload: %s" % (r.key.hex(), base64.b64encode(r.value).decode())
                for kb in kafka_python_read(data) for r in kb.records]
    assert _tails(res) == expected


def test_decoders_in_json(typed_segment):
    path, data = typed_segment
    res = dump("--format", "json", "--key-decoder", "int", "--value-decoder", "long", path)
    assert res.code == 0, res
    recs = [json.loads(line) for line in res.lines if '"type":"record"' in line]
    exp = [r for kb in kafka_python_read(data) for r in kb.records]
    assert [(o["keyDecoded"], o["valueDecoded"], o["headersDecoded"]) for o in recs] == [
        (struct.unpack(">i", r.key)[0], struct.unpack(">q", r.value)[0],
         [["h", struct.unpack(">q", r.headers[0][1])[0]]]) for r in exp]
    # the bytes themselves, lossless (binary: base64)
    assert [o["value"] for o in recs] == [lossless(r.value) for r in exp]


def test_json_decoder(tmp_path):
    recs = [kg.Rec(b'{"id": 1}', b'{"a": [1, 2, {"b": null}], "s": "\\u00e9"}', kg.T0),
            kg.Rec(b"plain", b"not json {", kg.T0)]
    data = kg.v2_batch(recs)
    path = kg.write_segment(tmp_path, 0, data)
    res = dump("--key-decoder", "json", "--value-decoder", "json", path)
    assert res.code == 0, res
    assert _tails(res) == ['key: {"id":1} payload: {"a":[1,2,{"b":null}],"s":"é"}',
                           "key: plain payload: not json {"]
    res = dump("--format", "json", "--value-decoder", "json", path)
    recs = [json.loads(line) for line in res.lines if '"type":"record"' in line]
    assert recs[0]["valueDecoded"] == {"a": [1, 2, {"b": None}], "s": "é"}
    assert recs[1]["valueDecoded"] == "not json {"
    assert recs[0]["value"] == '{"a": [1, 2, {"b": null}], "s": "\\u00e9"}'


def test_kafka_decoder_class_names(typed_segment):
    path, data = typed_segment
    res = dump("--key-decoder-class", "kafka.serializer.IntegerDecoder",
               "--value-decoder-class", "org.apache.kafka.tools.api.LongDecoder", path)
    assert res.code == 0, res
    assert _tails(res)[1] == "key: -7 payload: 1099511627777"


# -- base offset ---------------------------------------------------------------------------------

def test_base_offset_of_renamed_file(tmp_path):
    data = kg.sample_segment(2, "none", 42)
    original = kg.write_segment(tmp_path, 42, data)
    renamed = str(tmp_path / "segment-copy.log")
    shutil.copy(original, renamed)
    res = dump("--print-data-log", renamed)
    assert res.code == 0, res
    check_kafka_dump(res, renamed, data, deep=True, print_data=True, base_offset=42)
    assert any("base offset" in line for line in res.err_lines)  # taken from the first batch
    res = dump("--base-offset", "40", renamed)
    assert res.code == 0, res
    check_kafka_dump(res, renamed, data, base_offset=40)
    assert res.err == ""


@pytest.mark.parametrize("suffix", [".log.deleted", ".log.cleaned", ".log.swap"])
def test_base_offset_from_other_segment_names(tmp_path, suffix):
    data = kg.v2_batch([kg.Rec(b"k", b"v", kg.T0)], 77)
    path = kg.write_segment(tmp_path, 77, data, name="%020d%s" % (77, suffix))
    res = dump(path)
    assert res.code == 0, res
    check_kafka_dump(res, path, data, base_offset=77)


# -- non-consecutive offsets ------------------------------------------------------------------

def _gappy(tmp_path, base=0):
    w = kg.SegmentWriter(base)
    w.add_v2([kg.Rec(b"a", b"1", kg.T0)] * 3)
    w.add_v2([kg.Rec(b"b", b"2", kg.T0)] * 4, offset_deltas=[0, 1, 5, 6])
    w.add_legacy(1, [kg.Rec(b"c", b"3", kg.T0)] * 2, gap=3)
    w.add_v2([kg.Rec(b"d", b"4", kg.T0)], gap=100)
    return w.write(tmp_path), w.data()


def test_non_consecutive_offsets_summary(tmp_path):
    path, data = _gappy(tmp_path)
    offsets = record_offsets(data)
    assert offsets == [0, 1, 2, 3, 4, 8, 9, 13, 14, 115]
    res = dump("--deep-iteration", path)
    assert res.code == 0, res
    # Scala tool: reverse order of discovery
    assert res.err_lines == ["Non-consecutive offsets in %s" % os.path.abspath(path),
                             "  14 is followed by 115", "  9 is followed by 13",
                             "  4 is followed by 8"]
    assert expected_nonconsecutive(offsets) == [(14, 115), (9, 13), (4, 8)]


def test_non_consecutive_offsets_java_tool(tmp_path):
    path, data = _gappy(tmp_path, base=10)
    res = dump("--deep-iteration", "--kafka-format", "4.3", path)
    assert res.code == 0, res
    # Java tool: compared with an initial -1, ascending order
    assert res.err_lines == ["Non-consecutive offsets in %s" % os.path.abspath(path),
                             "  -1 is followed by 10", "  14 is followed by 18",
                             "  19 is followed by 23", "  24 is followed by 125"]


def test_non_consecutive_offsets_need_deep_iteration(tmp_path):
    path, _ = _gappy(tmp_path)
    res = dump(path)
    assert res.code == 0, res
    assert res.err == ""


def test_non_consecutive_offsets_relative_path_is_made_absolute(tmp_path, monkeypatch):
    path, _ = _gappy(tmp_path)
    monkeypatch.chdir(tmp_path)
    name = os.path.basename(path)
    res = dump("--deep-iteration", name)
    assert res.lines[0] == "Dumping %s" % name  # as given on the command line
    assert res.err_lines[0] == "Non-consecutive offsets in %s" % os.path.join(str(tmp_path), name)


# -- resynchronisation ----------------------------------------------------------------------------

def _parts():
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(b"a%d" % i, b"x" * 40, kg.T0 + i) for i in range(3)])
    w.add_v2([kg.Rec(b"b%d" % i, b"y" * 400, kg.T0 + i) for i in range(4)], "lz4")
    w.add_legacy(1, [kg.Rec(b"c", b"z", kg.T0)])
    w.add_v2([kg.Rec(b"d", b"w", kg.T0)])
    return w.chunks


@pytest.mark.parametrize("junk", [kg.random_bytes(333, seed=3), bytes(100),
                                  kg.random_bytes(40, seed=5) + bytes(60)],
                         ids=["random", "zeros", "mixed"])
def test_skip_invalid_resynchronises_after_garbage_in_the_middle(tmp_path, junk):
    c = _parts()
    head, tail = c[0], b"".join(c[1:])
    data = head + junk + tail
    path = kg.write_segment(tmp_path, 0, data)
    name = os.path.basename(path)

    res = dump("--skip-invalid", "--deep-iteration", path)
    assert res.code == 1, res
    lines = res.lines
    kb_head = kafka_python_read(head)
    kb_tail = kafka_python_read(tail)
    assert lines[:2] == ["Dumping %s" % path, "Log starting offset: 0"]
    i = 2
    for kb, shift in [(k, 0) for k in kb_head] + [(k, len(head) + len(junk)) for k in kb_tail]:
        if i < len(lines) and lines[i].startswith("Skipped "):
            assert lines[i] == "Skipped %d invalid bytes at position %d of %s" % (
                len(junk), len(head), name)
            i += 1
        kb = kb._replace(position=kb.position + shift)
        assert pairs(lines[i]) == batch_pairs(kb)
        i += 1
        for r in kb.records:
            exp = record_meta_pairs(kb, r)
            assert split_record_line(lines[i], len(exp))[0] == exp
            i += 1
    assert i == len(lines)
    assert sum(line.startswith("Skipped ") for line in lines) == 1

    # without --skip-invalid the dump stops at the garbage and counts the rest as trailing
    res = dump(path)
    assert res.code == 1, res
    assert len([line for line in res.lines if line.startswith("baseOffset")]) == 1
    assert res.lines[-1] == "Found %d invalid bytes at the end of %s" % (
        len(data) - len(head), name)


def test_skip_invalid_json_reports_invalid_bytes_object(tmp_path):
    c = _parts()
    junk = kg.random_bytes(123, seed=9)
    data = c[0] + junk + b"".join(c[1:])
    path = kg.write_segment(tmp_path, 0, data)
    res = dump("--skip-invalid", "--format", "json", path)
    assert res.code == 1, res
    objs = [json.loads(line) for line in res.lines]
    assert [o["type"] for o in objs] == ["batch", "invalidBytes", "batch", "batch", "batch",
                                         "summary"]
    inv = objs[1]
    assert (inv["file"], inv["position"], inv["size"]) == (path, len(c[0]), len(junk))
    assert [o["position"] for o in objs if o["type"] == "batch"] == [
        0, len(c[0]) + len(junk), len(c[0]) + len(junk) + len(c[1]),
        len(c[0]) + len(junk) + len(c[1]) + len(c[2])]


def test_skip_invalid_on_valid_file_changes_nothing(tmp_path):
    data = kg.sample_segment(2, "snappy", 0)
    path = kg.write_segment(tmp_path, 0, data)
    a = dump("--deep-iteration", path)
    b = dump("--deep-iteration", "--skip-invalid", path)
    assert a.code == b.code == 0
    assert a.out == b.out
    check_kafka_dump(b, path, data, deep=True)


def test_timestamps_iso_keeps_the_epoch_value(tmp_path):
    data = kg.v2_batch([kg.Rec(b"k", b"v", 1700000000000)], 0)
    path = kg.write_segment(tmp_path, 0, data)
    res = dump("--deep-iteration", "--timestamps", "iso", path)
    assert res.code == 0, res
    assert " CreateTime: 1700000000000 (2023-11-14T22:13:20.000Z) " in res.lines[2]
    assert res.lines[3].startswith(
        "| offset: 0 CreateTime: 1700000000000 (2023-11-14T22:13:20.000Z) keySize: 1 valueSize: 1")
