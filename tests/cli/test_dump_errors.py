"""Corrupt segment files and bad command lines: exit codes, invalid-byte reports, no tracebacks."""

import json
import os
import re
import signal
import struct
import subprocess
import sys

import pytest

import kafkagen as kg
from dumpcheck import (REPO, assert_clean_exit2, batch_pairs, check_json_dump, check_kafka_dump,
                       dump, dump_subprocess, kafka_python_read, pairs)

pytestmark = pytest.mark.usefixtures("implementation")

FOUND = re.compile(r"^Found (\d+) invalid bytes at the end of (.+)$")
SKIPPED = re.compile(r"^Skipped (\d+) invalid bytes at position (\d+) of (.+)$")


def good_segment():
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(b"a%d" % i, b"x" * 50, kg.T0 + i) for i in range(3)])
    w.add_v2([kg.Rec(b"b", b"y" * 500, kg.T0)] * 4, "gzip")
    w.add_legacy(1, [kg.Rec(b"c", b"z" * 30, kg.T0)] * 2, "snappy")
    w.add_legacy(0, [kg.Rec(None, b"message1")])
    w.add_v2([kg.Rec(b"d", b"w", kg.T0)], producer_id=4, producer_epoch=0, base_sequence=0,
             transactional=True)
    w.add_control(kg.COMMIT, 4, 0, 1)
    return w


def accounted_bytes(lines):
    """Bytes covered by batch lines plus reported invalid bytes: must be the file size."""
    total = 0
    for line in lines:
        if line.startswith(("baseOffset: ", "offset: ")):
            total += int(dict(pairs(line))["size"])
        elif FOUND.match(line):
            total += int(FOUND.match(line).group(1))
        elif SKIPPED.match(line):
            total += int(SKIPPED.match(line).group(1))
    return total


# -- tails -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("drop", [1, 30, 60, "all-but-17", "all-but-12"])
def test_truncated_tail(tmp_path, drop):
    w = good_segment()
    data = w.data()
    last = len(w.chunks[-1])
    drop = {"all-but-17": last - 17, "all-but-12": last - 12}.get(drop, drop)
    cut = kg.truncated(data, drop)
    path = kg.write_segment(tmp_path, 0, cut)
    for flags in ([], ["--deep-iteration"], ["--print-data-log"]):
        res = dump(*flags, path)
        assert res.code == 1, res
        check_kafka_dump(res, path, cut, deep=bool(flags), print_data="--print-data-log" in flags,
                         trailing=last - drop)
        assert res.lines[-1] == "Found %d invalid bytes at the end of %s" % (
            last - drop, os.path.basename(path))
        assert "Traceback" not in res.err


def test_truncated_tail_json(tmp_path):
    w = good_segment()
    cut = kg.truncated(w.data(), 10)
    path = kg.write_segment(tmp_path, 0, cut)
    res = dump("--format", "json", "--print-data-log", "--key-decoder", "base64",
               "--value-decoder", "base64", path)
    assert res.code == 1, res
    check_json_dump(res, path, cut)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n", [5, 17, 37, 200])
def test_garbage_tail(tmp_path, seed, n):
    good = good_segment().data()
    data = kg.garbage_tail(good, n, seed)
    path = kg.write_segment(tmp_path, 0, data)
    res = dump("--deep-iteration", path)
    assert res.code == 1, res
    assert "Traceback" not in res.err
    # every valid batch is printed as kafka-python reads it, then the garbage is reported
    kbs = kafka_python_read(good)
    batch_lines = [line for line in res.lines if line.startswith(("baseOffset: ", "offset: "))]
    assert [pairs(line) for line in batch_lines[:len(kbs)]] == [batch_pairs(kb) for kb in kbs]
    assert accounted_bytes(res.lines) == len(data)
    if len(batch_lines) == len(kbs):
        assert res.lines[-1] == "Found %d invalid bytes at the end of %s" % (
            n, os.path.basename(path))


@pytest.mark.parametrize("n", [1, 17, 18, 4096])
def test_zero_filled_tail(tmp_path, n):
    good = good_segment().data()
    data = kg.zero_tail(good, n)
    path = kg.write_segment(tmp_path, 0, data)
    res = dump("--deep-iteration", path)
    assert res.code == 1, res
    check_kafka_dump(res, path, data, deep=True, trailing=n)
    assert res.lines[-1] == "Found %d invalid bytes at the end of %s" % (n, os.path.basename(path))
    res = dump("--format", "json", path)
    assert res.code == 1
    inv = json.loads(res.lines[-2])
    assert json.loads(res.lines[-1])["invalidBytes"] == n
    assert (inv["type"], inv["position"], inv["size"]) == ("invalidBytes", len(good), n)


def test_zero_filled_tail_with_skip_invalid(tmp_path):
    good = good_segment().data()
    data = kg.zero_tail(good, 4096)
    path = kg.write_segment(tmp_path, 0, data)
    res = dump("--skip-invalid", path)
    assert res.code == 1, res
    assert res.lines[-1] == "Found 4096 invalid bytes at the end of %s" % os.path.basename(path)


# -- inside a batch --------------------------------------------------------------------------------

def _batch_span(w, index):
    start = sum(len(c) for c in w.chunks[:index])
    return start, start + len(w.chunks[index])


@pytest.mark.parametrize("index, offset_in_batch", [
    (0, 70), (0, 21), (0, 40),   # v2: record data, attributes, timestamp (all CRC-covered)
    (1, 80),                     # v2 gzip: compressed data
    (2, 40),                     # v1 snappy wrapper
    (3, 30),                     # v0 message value
    (5, 65),                     # control batch record
])
def test_flipped_bit_is_a_crc_mismatch(tmp_path, index, offset_in_batch):
    w = good_segment()
    start, end = _batch_span(w, index)
    assert start + offset_in_batch < end
    data = kg.flip_bit(w.data(), start + offset_in_batch, bit=3)
    path = kg.write_segment(tmp_path, 0, data)
    kbs = kafka_python_read(data, deep=False)
    assert [kb.crc_ok for kb in kbs] == [i != index for i in range(len(kbs))]
    res = dump(path)
    assert res.code == 1, res
    check_kafka_dump(res, path, data)  # field by field, isvalid false on the flipped batch only
    assert [line.endswith("isvalid: false") for line in res.lines[2:]] == [
        i == index for i in range(len(kbs))]
    res = dump("--print-data-log", path)  # records of a damaged batch may not decode: no crash
    assert res.code == 1, res
    assert "Traceback" not in res.err
    res = dump("--format", "json", path)
    objs = [json.loads(line) for line in res.lines]
    assert [o["isValid"] for o in objs[:-1]] == [i != index for i in range(len(kbs))]
    assert objs[-1]["type"] == "summary" and objs[-1]["invalidBatches"] == 1


def test_flipped_bit_in_uncompressed_records_is_printed_as_read(tmp_path):
    """A flipped value byte: kafka-python reads the changed record; so must the dump."""
    w = good_segment()
    data = kg.flip_bit(w.data(), 100, bit=0)  # inside the first batch's values
    path = kg.write_segment(tmp_path, 0, data)
    res = dump("--print-data-log", path)
    assert res.code == 1, res
    check_kafka_dump(res, path, data, deep=True, print_data=True)
    assert "isvalid: false" in res.lines[2]


def test_flipped_bit_in_offset_field_is_not_a_crc_error(tmp_path):
    """baseOffset is outside the CRC: a changed offset keeps isvalid true. The next batch's
    offsets then go back (below 18), which the broker's recovery does not accept: exit 1, the
    batch named on stderr once, as recover would cut there."""
    w = good_segment()
    data = kg.flip_bit(w.data(), 7, bit=4)  # first batch's baseOffset becomes 16
    path = kg.write_segment(tmp_path, 0, data)
    res = dump("--deep-iteration", path)
    assert res.code == 1, res
    check_kafka_dump(res, path, data, deep=True)
    assert res.lines[2].startswith("baseOffset: 16 lastOffset: 18 ")
    # every later batch (offsets 3-11) is below 18, and follows the one before: the first
    # batch is out of place, named once
    back = [line for line in res.err_lines if "out of place" in line]
    first = kg.split_entries(data)[0]  # the second batch starts after it, offsets 3-6
    assert back == ["kafkalog: %s: the batch at position 0: offsets 16-18 above those of the "
                    "batch after it (offsets 3-6): 1 batch, %d bytes (offsets 16-18) out of "
                    "place; offsets resume at position %d" % (path, len(first), len(first))
                    ], res.err
    # batch-level, through the C fast path where it is built: the same verdict
    res = dump(path)
    assert res.code == 1, res
    assert [line for line in res.err_lines if "out of place" in line] == back, res.err


@pytest.mark.parametrize("magic", [3, 56, 127])
def test_unknown_magic_outside_the_crc_is_invalid(tmp_path, magic):
    """The magic byte lies outside the v2 CRC: a batch whose magic became 3 or more keeps
    isvalid true and prints as Kafka's tool prints it (FileLogInputStream reads it as v2), but
    the rule that recover applies calls it invalid (it cuts there, "unknown magic"): dump
    says so on stderr and exits 1, in both builds and at batch level too: dump and recover
    agree."""
    w = good_segment()
    data = bytearray(w.data())
    data[16] = magic                     # the first batch's magic
    path = kg.write_segment(tmp_path, 0, bytes(data))
    for args in (["--deep-iteration"], []):
        res = dump(*args, path)
        assert res.code == 1, res
        assert "magic: %d " % magic in res.lines[2] and "isvalid: true" in res.lines[2], res.out
        assert [line for line in res.err_lines if "unknown magic" in line] == [
            "kafkalog: %s: records of the batch at position 0 (offset 0) cannot be read: "
            "unknown magic %d" % (path, magic)], res.err


def test_inner_legacy_crc_mismatch_is_reported_per_record(tmp_path):
    """An inner message of a compressed wrapper with a bad CRC: the wrapper is valid, the record
    says isValid: false (inner CRCs are not checked by Kafka's reader, but printed)."""
    import gzip
    import struct
    import zlib
    inner = bytearray(kg.legacy_entries(1, [kg.Rec(b"k", b"v" * 20, kg.T0)] * 2))
    inner[30] ^= 0xFF  # inside the first inner message, after its CRC
    value = gzip.compress(bytes(inner), mtime=0)
    body = struct.pack(">bbqii", 1, 1, kg.T0, -1, len(value)) + value
    entry = bytearray(struct.pack(">qiI", 1, len(body) + 4, 0) + body)
    kg.fix_legacy_crc(entry)
    path = kg.write_segment(tmp_path, 0, bytes(entry))
    kb = kafka_python_read(bytes(entry))[0]
    assert kb.crc_ok and [r.validate_crc() for r in kb.records] == [False, True]
    res = dump("--deep-iteration", path)
    check_kafka_dump(res, path, bytes(entry), deep=True)
    assert "isValid: false" in res.lines[3] and "isValid: true" in res.lines[4]
    assert zlib.crc32(bytes(entry[16:])) == struct.unpack(">I", entry[12:16])[0]


# -- size fields -----------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [0x7FFFFFF0, 2 ** 31 - 1, 1 << 30])
@pytest.mark.parametrize("index", [0, 2, 5])
def test_size_field_past_end_of_file(tmp_path, size, index):
    w = good_segment()
    start, _ = _batch_span(w, index)
    data = kg.set_size_field(w.data(), start, size)
    path = kg.write_segment(tmp_path, 0, data)
    res = dump("--deep-iteration", path)
    assert res.code == 1, res
    assert "Traceback" not in res.err
    prefix = data[:start]
    kbs = kafka_python_read(prefix)
    batch_lines = [line for line in res.lines if line.startswith(("baseOffset: ", "offset: "))]
    assert [pairs(line) for line in batch_lines] == [batch_pairs(kb) for kb in kbs]
    assert res.lines[-1] == "Found %d invalid bytes at the end of %s" % (
        len(data) - start, os.path.basename(path))
    # with --skip-invalid the batches after the damaged one are found again
    res = dump("--skip-invalid", path)
    assert res.code == 1, res
    assert accounted_bytes(res.lines) == len(data)
    n_after = len(w.chunks) - index - 1
    assert len([line for line in res.lines
                if line.startswith(("baseOffset: ", "offset: "))]) == index + n_after


@pytest.mark.parametrize("size", [-1, 0, 13, -2 ** 31])
def test_size_field_below_minimum(tmp_path, size):
    w = good_segment()
    start, _ = _batch_span(w, 1)
    data = kg.set_size_field(w.data(), start, size)
    path = kg.write_segment(tmp_path, 0, data)
    res = dump(path)
    assert res.code == 1, res
    assert "Traceback" not in res.err
    assert res.lines[-1] == "Found %d invalid bytes at the end of %s" % (
        len(data) - start, os.path.basename(path))


# -- whole files -------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("n", [10, 18, 100, 1000, 5000])
def test_random_bytes_file(tmp_path, seed, n):
    data = kg.random_bytes(n, seed)
    path = kg.write_segment(tmp_path, 0, data)
    for flags in ([], ["--print-data-log"], ["--skip-invalid", "--deep-iteration"]):
        res = dump(*flags, path)
        assert res.code == 1, (flags, res)
        assert "Traceback" not in res.err
        assert accounted_bytes(res.lines) == n
    res = dump("--format", "json", "--deep-iteration", "--skip-invalid", path)
    assert res.code == 1
    for line in res.lines:
        json.loads(line)


def test_empty_file(tmp_path):
    path = kg.write_segment(tmp_path, 0, b"")
    res = dump("--print-data-log", path)
    assert res.code == 0, res
    assert res.lines == ["Dumping %s" % path, "Log starting offset: 0"]
    assert res.err == ""
    res = dump("--format", "json", path)
    assert res.code == 0 and [json.loads(line)["type"] for line in res.lines] == ["summary"]


@pytest.mark.slow
def test_bit_flips_never_crash(tmp_path):
    """Flip one bit at many positions of a file holding every format and codec: the dump never
    raises, and every byte is accounted for by batch lines and invalid-byte reports."""
    w = kg.SegmentWriter(0)
    for magic, codec in [(2, "none"), (2, "gzip"), (2, "snappy"), (2, "lz4"), (2, "zstd"),
                         (1, "gzip"), (1, "lz4"), (0, "snappy"), (0, "lz4"), (0, "none")]:
        recs = [kg.Rec(b"k%d" % i, kg.filler(i, 4), kg.T0 + i,
                       (("h", b"v"),) if magic == 2 else ()) for i in range(3)]
        if magic == 2:
            w.add_v2(recs, codec)
        else:
            w.add_legacy(magic, recs, codec)
    good = w.data()
    rnd = kg.random.Random(2024)
    positions = sorted(rnd.sample(range(len(good)), 120))
    for pos in positions:
        data = kg.flip_bit(good, pos, rnd.randrange(8))
        path = kg.write_segment(tmp_path, 0, data)
        for flags in (["--print-data-log"], ["--print-data-log", "--skip-invalid"],
                      ["--format", "json", "--deep-iteration"]):
            res = dump(*flags, path)  # raises if the CLI raised
            assert res.code in (0, 1), (pos, flags, res)
            assert "Traceback" not in res.err
            if "json" not in flags:
                assert accounted_bytes(res.lines) == len(data), (pos, flags)
        if res.code == 0:
            # only bytes outside every CRC may change without notice: offset, size is excluded
            # (it would move the next batch), leader epoch / magic of v2 batches
            kbs = kafka_python_read(data, deep=False)
            assert all(kb.crc_ok for kb in kbs), pos


# -- decompression bombs -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    d = tmp_path_factory.mktemp("bombs")
    out = {}
    zeros = bytes(50 << 20)
    out["v2-gzip"] = kg.write_segment(d / "v2-gzip", 0,
                                      kg.v2_batch([kg.Rec(None, zeros, kg.T0)], 0, "gzip"))
    out["v1-gzip"] = kg.write_segment(d / "v1-gzip", 0,
                                      kg.legacy_entries(1, [kg.Rec(None, zeros, kg.T0)], 0, "gzip"))
    small = bytes(8 << 20)
    for codec in ("snappy", "lz4", "zstd"):
        out["v2-" + codec] = kg.write_segment(
            d / ("v2-" + codec), 0, kg.v2_batch([kg.Rec(None, small, kg.T0)], 0, codec))
    out["v0-lz4"] = kg.write_segment(d / "v0-lz4", 0,
                                     kg.legacy_entries(0, [kg.Rec(None, small)], 0, "lz4"))
    return out


@pytest.mark.parametrize("name", ["v2-gzip", "v1-gzip", "v2-snappy", "v2-lz4", "v2-zstd",
                                  "v0-lz4"])
def test_decompression_bomb_is_refused(bombs, name):
    """A batch inflating past the bound is not inflated. Its CRC holds and the broker keeps it
    (recover keeps it too), so it is a valid batch whose records are not shown: exit 0, and a
    line on stderr says which offsets were not decoded and how to raise the bound."""
    path = bombs[name]
    assert os.path.getsize(path) < 1 << 20  # small on disk, huge inflated
    res = dump("--deep-iteration", "--max-message-size", "1024", path)
    assert res.code == 0, res
    assert "Traceback" not in res.err
    assert len(res.lines) == 3  # header, batch line, no record line
    assert res.lines[2].endswith("isvalid: true")
    assert len(res.err_lines) == 1, res.err
    assert re.search(r"records of the batch at position 0 \(offsets \d+-\d+\) not decoded: "
                     r"they inflate past 16384 bytes \(raise --max-message-size\)$",
                     res.err_lines[0]), res.err
    # without record iteration nothing is inflated: a valid batch, exit 0
    res = dump("--max-message-size", "1024", path)
    assert res.code == 0, res


def test_decompression_bomb_json(bombs):
    res = dump("--format", "json", "--deep-iteration", "--max-message-size", "1024",
               bombs["v2-gzip"])
    assert res.code == 0, res
    objs = [json.loads(line) for line in res.lines]
    assert [o["type"] for o in objs] == ["batch", "recordsNotDecoded", "summary"]
    assert objs[1]["inflateLimit"] == 16 * 1024
    assert (objs[1]["baseOffset"], objs[1]["lastOffset"]) == (0, 0)


def test_decompression_bomb_subprocess_memory(bombs):
    """A real process refuses the 50 MiB gzip bomb without inflating it: its peak resident size
    (VmHWM, which execve resets) stays far below 50 MiB more than an idle interpreter's."""
    if not os.path.exists("/proc/self/status"):
        pytest.skip("needs /proc")
    code = ("import runpy, sys; sys.argv = ['kafkalog', 'dump', '--deep-iteration', "
            "'--max-message-size', '1024', %r]\n"
            "try:\n    runpy.run_module('kafkalog_cli', run_name='__main__')\n"
            "except SystemExit as e:\n    rc = e.code\n"
            "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
            "print('HWM', hwm.split()[1], file=sys.stderr)\n"
            "sys.exit(rc)\n") % bombs["v2-gzip"]
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, timeout=60)
    assert p.returncode == 0, p
    hwm_kb = int(re.search(rb"HWM (\d+)", p.stderr).group(1))
    assert hwm_kb < 45 * 1024, hwm_kb


# -- command-line and path errors: exit 2 ---------------------------------------------------------

def test_missing_path(tmp_path):
    res = dump(tmp_path / "nope.log")
    assert_clean_exit2(res)
    assert "nope.log" in res.err


def test_missing_path_message_names_the_path_once(tmp_path):
    p = str(tmp_path / "nope.log")
    res = dump(p)
    assert res.err_lines == ["kafkalog: %s: No such file or directory" % p]


def test_empty_directory(tmp_path):
    res = dump(tmp_path)
    assert_clean_exit2(res)


def test_directory_without_kafka_files(tmp_path):
    (tmp_path / "t-0").mkdir()
    (tmp_path / "t-0" / "notes.txt").write_bytes(b"hello\n")
    (tmp_path / "meta.properties").write_bytes(b"version=1\n")
    res = dump(tmp_path)
    assert_clean_exit2(res)
    res = dump(tmp_path / "t-0")
    assert_clean_exit2(res)


@pytest.mark.parametrize("name", ["00000000000000000000.log.bak", "notes.txt", "meta.properties",
                                  "00000000000000000000.indexx"])
def test_unknown_file_kind(tmp_path, name):
    p = tmp_path / name
    p.write_bytes(bytes(64))
    res = dump(p)
    assert_clean_exit2(res)
    assert name in res.err


def test_bad_target_does_not_stop_the_others(tmp_path):
    data = kg.v2_batch([kg.Rec(b"k", b"v", kg.T0)])
    good = kg.write_segment(tmp_path, 0, data)
    res = dump(tmp_path / "missing.log", good)
    assert res.code == 2
    check_kafka_dump(res, good, data)
    assert len(res.err_lines) == 1 and "Traceback" not in res.err


def test_no_arguments_is_a_usage_error():
    res = dump()
    assert res.code == 2
    assert "Traceback" not in res.err
    assert res.out == ""


def test_unreadable_file(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads files regardless of their mode")
    p = kg.write_segment(tmp_path, 0, kg.v2_batch([kg.Rec(b"k", b"v", kg.T0)]))
    os.chmod(p, 0)
    res = dump(p)
    assert res.code == 2 and "Traceback" not in res.err


# -- the real process --------------------------------------------------------------------------------

def test_subprocess_exit_codes(tmp_path):
    good = good_segment().data()
    ok = kg.write_segment(tmp_path / "ok", 0, good)
    bad = kg.write_segment(tmp_path / "bad", 0, kg.zero_tail(good))
    res = dump_subprocess(ok)
    assert res.code == 0, res
    check_kafka_dump(res, ok, good)
    res = dump_subprocess(bad)
    assert res.code == 1, res
    assert res.lines[-1] == "Found 4096 invalid bytes at the end of 00000000000000000000.log"
    res = dump_subprocess(tmp_path / "missing")
    assert_clean_exit2(res)
    res = dump_subprocess(tmp_path / "ok")  # a partition directory
    assert res.code == 0
    assert res.lines[0] == "Dumping %s" % ok


def test_subprocess_closed_pipe_is_quiet(tmp_path):
    """`kafkalog dump ... | head -1`: no traceback when the reader goes away."""
    w = kg.SegmentWriter(0)
    for i in range(40):
        w.add_v2([kg.Rec(b"k", kg.random_bytes(4000, i), kg.T0)] * 10)
    path = w.write(tmp_path)
    p = subprocess.Popen([sys.executable, "-m", "kafkalog_cli", "dump", "--print-data-log", path],
                         cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read()
    rc = p.wait(timeout=60)
    assert b"Traceback" not in err, err
    assert rc in (-signal.SIGPIPE, 1, 0, 141), rc


# -- structure errors inside valid-CRC batches (``InvalidRecordException`` from
# ``DefaultRecordBatch``/``DefaultRecord``, ``ControlRecordType``, ``EndTransactionMarker``) -------

def _with_count(count, n_records=2):
    b = bytearray(kg.v2_batch([kg.Rec(b"a", b"1", kg.T0)] * n_records))
    struct.pack_into(">i", b, 57, count)
    return bytes(kg.fix_v2_crc(b))


@pytest.mark.parametrize("count, reason", [(3, "premature"), (1, "remain"), (-1, "count")])
def test_record_count_disagreeing_with_records(tmp_path, count, reason):
    data = _with_count(count) + kg.v2_batch([kg.Rec(b"z", b"9", kg.T0)], 2)
    path = kg.write_segment(tmp_path, 0, data)
    res = dump("--deep-iteration", path)
    assert res.code == 1, res
    assert "Traceback" not in res.err and reason in res.err
    batch_lines = [line for line in res.lines if line.startswith("baseOffset")]
    assert len(batch_lines) == 2 and "count: %d " % count in batch_lines[0]
    assert batch_lines[0].endswith("isvalid: true")  # the CRC is fine; the contents are not
    assert res.lines[-1].startswith("| offset: 2 ")   # the next batch is still dumped
    # without deep iteration nothing looks at the records: Kafka prints the line and goes on
    res = dump(path)
    assert res.code == 0, res


def _control(key, value, offset):
    """A control batch whose single record has the given raw key and value."""
    from kafka.record.memory_records import MemoryRecordsBuilder
    b = MemoryRecordsBuilder(2, 0, 1 << 30, transactional=True, producer_id=5, producer_epoch=0,
                             base_sequence=0)
    b.append(kg.T0, key, value, [])
    b.close()
    buf = bytearray(b.buffer())
    buf[22] |= kg.ATTR_CONTROL
    struct.pack_into(">i", buf, 53, -1)
    kg.fix_v2_crc(buf)
    return bytes(kg.set_v2_header(buf, offset, 0))


MALFORMED_CONTROL = {
    "key-3-bytes": (b"\x00\x00\x01", struct.pack(">hi", 0, 1)),
    "key-version-negative": (struct.pack(">hh", -1, 1), struct.pack(">hi", 0, 1)),
    "marker-value-3-bytes": (struct.pack(">hh", 0, 1), b"\x00\x00\x00"),
    "marker-version-negative": (struct.pack(">hh", 0, 0), struct.pack(">hi", -2, 1)),
    "key-null": (None, struct.pack(">hi", 0, 1)),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_CONTROL))
def test_malformed_control_record_does_not_crash(tmp_path, case):
    key, value = MALFORMED_CONTROL[case]
    data = _control(key, value, 0) + kg.control_batch(kg.COMMIT, 1, 5, 0, 2)
    path = kg.write_segment(tmp_path, 0, data)
    for flags in (["--deep-iteration"], ["--print-data-log"], ["--format", "json", "--deep-iteration"],
                  ["--format", "messages"]):
        res = dump(*flags, path)
        assert res.code in (0, 1), res
        assert "Traceback" not in res.err
        if "json" in flags:
            rec = [json.loads(line) for line in res.lines if '"type":"record"' in line][0]
            assert rec.get("controlError"), rec
        else:
            assert res.err.strip(), "the malformed control record is explained on stderr"
    res = dump("--deep-iteration", path)
    assert res.lines[-1].endswith("endTxnMarker: COMMIT coordinatorEpoch: 2")


@pytest.mark.parametrize("case", sorted(MALFORMED_CONTROL))
def test_malformed_control_record_exits_1(tmp_path, case):
    key, value = MALFORMED_CONTROL[case]
    path = kg.write_segment(tmp_path, 0, _control(key, value, 0))
    res = dump("--deep-iteration", path)
    assert res.code == 1, res


@pytest.mark.parametrize("deep", [False, True])
@pytest.mark.parametrize("case", ["below-the-name", "beyond-reach"])
def test_batch_out_of_its_segment_is_invalid(tmp_path, case, deep):
    """A batch whose last offset lies below the segment's base offset (its name), or more than
    2^31-1 above it, cannot be indexed by the broker, and recover cuts there: dump calls it
    invalid too (exit 1, named on stderr), through the C batch run and the record path alike."""
    if case == "below-the-name":
        base, bases = 100, [0, 3]
    else:
        base, bases = 0, [0, 2 ** 31 + 5]
    data = b"".join(kg.v2_batch([kg.Rec(b"k", b"v", kg.T0)] * 3, b) for b in bases)
    path = kg.write_segment(tmp_path, base, data)
    res = dump(*(["--deep-iteration"] if deep else []), path)
    assert res.code == 1, res
    assert "Traceback" not in res.err
    assert any("does not fit a segment based at %d" % base in line
               for line in res.err_lines), res.err
    # every batch is still printed, as Kafka's tool prints it
    assert len([line for line in res.lines if line.startswith("baseOffset")]) == 2, res.out
