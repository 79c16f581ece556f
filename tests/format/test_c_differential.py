"""The C fast paths against the Python code they mirror, in one process, input for input.

``_speedups.decode_v2`` must return what ``records._decode_v2_loop`` returns (the position
reached and every record field) or raise the same error class with the same message, leaving
the same complete records behind. ``_kafkatext``'s ``batch_lines``/``batch_line``/``record_lines``
must produce the bytes that render_kafka.KafkaWriter's Python code produces. The inputs are batches
built here from Kafka's published v2 layout (DefaultRecordBatch / DefaultRecord) at the edges
(offsets and timestamps next to the 64-bit limits, counts near 2^31, empty and maximal records,
every varint width, negative lengths, headers), then random bytes and mutations from hypothesis.
An end-to-end test checks that both builds print the same for a batch whose offsets overflow.

The C modules are those kafkalog_cli imports, or, when KAFKALOG_C_MODULE_DIR names a directory,
the ``_speedups*.so`` and ``_kafkatext*.so`` built there (``.ci/sanitize`` builds them with
AddressSanitizer and UndefinedBehaviorSanitizer and runs this file against them). Without a
module its tests are skipped with a message.
"""

import os
import struct
import sys

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cmodules
from kafkalog_cli.cli import render, render_kafka
from kafkalog_cli.format import records
from kafkalog_cli.format.errors import CorruptRecordError, LimitExceededError
from kafkalog_cli.format.scan import OFFSET_OVERFLOW, InvalidBytes, scan

# The C fast paths against the Python, on edge and random inputs: left out of the quick suite
# (pytest -m "not slow").
pytestmark = pytest.mark.slow

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
EXAMPLES = int(os.environ.get("KAFKALOG_DIFF_EXAMPLES", "300"))


speedups = cmodules.load("_speedups", "kafkalog_cli.format")
kafkatext = cmodules.load("_kafkatext", "kafkalog_cli.cli")
# Without a C module its tests are skipped with this message; the end-to-end test at the end
# runs whatever was built.
_MISSING = ("is not built (no compiler at install time, or none in KAFKALOG_C_MODULE_DIR): "
            "nothing to compare")
needs_speedups = pytest.mark.skipif(speedups is None, reason="_speedups " + _MISSING)
needs_kafkatext = pytest.mark.skipif(kafkatext is None, reason="_kafkatext " + _MISSING)
fuzz = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=list(HealthCheck))


# -- Kafka's v2 layout, written here ------------------------------------------------------------

def zigzag(value, bits):
    return ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)


def uvarint(raw, width=None):
    """Base-128 groups of ``raw``; ``width`` pads with continuation groups (a longer, still
    valid encoding, which Kafka's ByteUtils reads)."""
    out = bytearray()
    while True:
        group = raw & 0x7F
        raw >>= 7
        if raw or (width is not None and len(out) + 1 < width):
            out.append(group | 0x80)
        else:
            out.append(group)
            return bytes(out)


def varint(value, width=None):
    return uvarint(zigzag(value, 32), width)


def varlong(value, width=None):
    return uvarint(zigzag(value, 64), width)


def record(ts_delta=0, off_delta=0, key=b"k", value=b"v", headers=(), attrs=0, length=None,
           raw_key_size=None, raw_value_size=None, widths=None):
    """One DefaultRecord: length varint, attributes int8, timestampDelta varlong, offsetDelta
    varint, key, value (varint size, -1 for null), header count, headers."""
    w = widths or {}
    body = bytearray([attrs & 0xFF])
    body += varlong(ts_delta, w.get("ts"))
    body += varint(off_delta, w.get("off"))
    for data, raw, name in ((key, raw_key_size, "key"), (value, raw_value_size, "value")):
        if raw is not None:
            body += varint(raw, w.get(name))
            body += data or b""
        elif data is None:
            body += varint(-1, w.get(name))
        else:
            body += varint(len(data), w.get(name)) + data
    body += varint(len(headers), w.get("hdrs"))
    for hk, hv in headers:
        body += varint(len(hk)) + hk
        body += varint(-1) if hv is None else varint(len(hv)) + hv
    n = len(body) if length is None else length
    return varint(n, w.get("len")) + bytes(body)


def batch(base_offset, recs, count=None, last_delta=None, base_ts=0, max_ts=0, attrs=0,
          base_seq=-1, pid=-1, epoch=-1, ple=0, crc=None):
    """A DefaultRecordBatch of uncompressed records ``recs`` (bytes each)."""
    payload = b"".join(recs)
    count = len(recs) if count is None else count
    last_delta = max(count - 1, 0) if last_delta is None else last_delta
    after_crc = struct.pack(">hiqqqhii", attrs, last_delta, base_ts, max_ts, pid, epoch, base_seq,
                            count) + payload
    crc = crc32c(after_crc) if crc is None else crc
    size = 4 + 1 + 4 + len(after_crc)  # partitionLeaderEpoch, magic, crc, rest
    return struct.pack(">qiibI", base_offset, size, ple, 2, crc) + after_crc


# -- running both sides -------------------------------------------------------------------------

def _fields(recs):
    return (list(recs.offsets), list(recs.timestamps), list(recs.keys), list(recs.values),
            list(recs.headers))


def _outcome(call):
    recs = records.Records()
    recs.headers = []
    try:
        result = ("ok", call(recs))
    except Exception as e:  # the class and the text are what is compared
        result = (type(e), str(e))
    return result, _fields(recs)


def both_decoders(data, pos=0, n=None, done=0, total=None, base_offset=0, base_ts=0,
                  append_time=None, limit=1 << 30):
    n = (total if total is not None else 1) if n is None else n
    total = n if total is None else total
    args = (data, pos, n, done, total, base_offset, base_ts, append_time, limit)
    py = _outcome(lambda recs: records._decode_v2_loop(*args, recs))
    c = _outcome(lambda recs: speedups.decode_v2(*args, recs, CorruptRecordError,
                                                  LimitExceededError))
    return py, c


def same_decoding(data, **kw):
    py, c = both_decoders(data, **kw)
    assert c == py, (data[:200], kw)
    return py


# -- the decoder: edges -------------------------------------------------------------------------

@needs_speedups
@pytest.mark.parametrize("base_offset, deltas, overflows", [
    (INT64_MAX, [0], False),
    (INT64_MAX, [0, 1], True),                      # the reproduction: base 2^63-1, delta 1
    (INT64_MAX - 2, [0, 1, 2, 3], True),
    (INT64_MAX - 200, [199, 200], False),           # multi-byte deltas next to the limit
    (INT64_MAX - 200, [201], True),
    (INT64_MAX - INT32_MAX, [INT32_MAX], False),
    (INT64_MAX - INT32_MAX + 1, [INT32_MAX], True),
    (INT64_MIN, [0, -1], True),
    (INT64_MIN + 5, [-5], False),
    (INT64_MIN + 5, [-6], True),
    (INT64_MIN - INT32_MIN, [INT32_MIN], False),
    (0, [INT32_MAX, INT32_MIN], False),
])
def test_offsets_at_the_64_bit_limits(base_offset, deltas, overflows):
    data = b"".join(record(off_delta=d) for d in deltas)
    (result, fields) = same_decoding(data, total=len(deltas), base_offset=base_offset)
    if overflows:
        assert result[0] is CorruptRecordError
        assert result[1].startswith("record offset overflows a 64-bit long")
    else:
        assert result == ("ok", len(data))
        assert fields[0] == [base_offset + d for d in deltas]


@needs_speedups
@pytest.mark.parametrize("base_ts, deltas, append_time, overflows", [
    (INT64_MAX, [0, 1], None, True),
    (INT64_MAX, [0, 1], 5, False),                   # LogAppendTime: the deltas are not used
    (INT64_MAX - 10, [10, -INT64_MAX], None, False),
    (INT64_MIN, [-1], None, True),
    (INT64_MIN, [INT64_MAX], None, False),
    (-1, [INT64_MIN], None, True),
    (0, [INT64_MIN, INT64_MAX], None, False),
    (1, [INT64_MAX], None, True),
    (INT64_MIN + 63, [-63, -64], None, True),        # one-byte deltas next to the limit
])
def test_timestamps_at_the_64_bit_limits(base_ts, deltas, append_time, overflows):
    data = b"".join(record(ts_delta=d) for d in deltas)
    (result, fields) = same_decoding(data, total=len(deltas), base_ts=base_ts,
                                     append_time=append_time)
    if overflows:
        assert result[0] is CorruptRecordError
        assert result[1].startswith("record timestamp overflows a 64-bit long")
    else:
        assert result == ("ok", len(data))
        assert fields[1] == [append_time if append_time is not None else base_ts + d
                             for d in deltas]


@needs_speedups
@pytest.mark.parametrize("width", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("field", ["len", "off", "key", "value", "hdrs"])
def test_every_varint_width(field, width):
    rec = record(off_delta=3, key=b"kk", value=b"vvv", headers=[(b"h", b"x")],
                 widths={field: width})
    (result, fields) = same_decoding(rec, base_offset=10)
    assert result == ("ok", len(rec))
    assert fields[0] == [13] and fields[2] == [b"kk"] and fields[3] == [b"vvv"]


@needs_speedups
@pytest.mark.parametrize("width", [1, 2, 5, 9, 10])
def test_every_varlong_width(width):
    rec = record(ts_delta=-7, widths={"ts": width})
    assert same_decoding(rec, base_ts=100)[1][1] == [93]


@needs_speedups
@pytest.mark.parametrize("data, message", [
    (b"\x80\x80\x80\x80\x80\x00", "invalid record length varint"),       # 6 bytes
    (b"\x80\x80", "invalid record length varint"),                       # runs past the data
    (b"\x10\x00" + b"\xff" * 10 + b"\x01", "varint longer than 10 bytes"),
    (b"\x10\x00\x00" + b"\xff" * 5 + b"\x01", "varint longer than 5 bytes"),
    (b"\x08\x00\x00\x00\xff\xff\xff\xff\x7f", None),                      # key size past the data
])
def test_malformed_varints(data, message):
    (result, _) = same_decoding(data)
    assert result[0] is CorruptRecordError
    if message is not None:
        assert result[1] == message


@needs_speedups
def test_excess_high_bits_of_the_last_group_are_dropped():
    # offsetDelta 5 written in 5 groups whose last carries bits beyond 32: Kafka keeps the low 32
    rec = bytearray(record(off_delta=5, widths={"off": 5}))
    rec[7] |= 0x70  # length, attributes, timestampDelta, then offsetDelta at 3-7
    (result, fields) = same_decoding(bytes(rec))
    assert result[0] == "ok" and fields[0] == [5]


@needs_speedups
@pytest.mark.parametrize("kw, message", [
    ({"length": -1}, "invalid record size -1 with"),
    ({"length": 1000}, "invalid record size 1000 with"),
    ({"length": 3}, "invalid record size: expected 3 bytes, read"),
    ({"raw_key_size": -2, "key": b""}, None),                           # any negative: null
    ({"raw_value_size": 1000}, "record runs past the end of the batch data"),
    ({"headers": [(b"a", b"b")], "raw_key_size": 0}, "any"),              # "k" read as a size
])
def test_lengths(kw, message):
    rec = record(**kw)
    (result, fields) = same_decoding(rec)
    if message is None:
        assert result[0] == "ok"
    elif message != "any":
        assert result[0] is CorruptRecordError and result[1].startswith(message), result


@needs_speedups
@pytest.mark.parametrize("tail, message", [
    (varint(-1), "invalid number of record headers -1"),
    (varint(1000), "invalid number of record headers 1000"),
    (varint(1) + varint(-1), "invalid header key size -1"),
    (varint(1) + varint(50) + b"k", "invalid header key size 50"),
    (varint(1) + varint(1) + b"k" + varint(9), "invalid header value size 9"),
    (varint(1) + varint(1) + b"k" + varint(-7), None),                  # null value
    (varint(2) + varint(1) + b"\xff" + varint(0) + varint(0) + varint(1) + b"x", None),
])
def test_headers(tail, message):
    body = b"\x00" + varlong(0) + varint(0) + varint(-1) + varint(-1) + tail
    rec = varint(len(body)) + body
    (result, fields) = same_decoding(rec)
    if message is None:
        assert result[0] == "ok", result
    else:
        assert result == (CorruptRecordError, message)


@needs_speedups
def test_empty_and_maximal_records():
    empty = record(key=None, value=None)
    full = record(key=b"", value=b"x" * 1000)
    size = len(full) - 2  # the length varint of 1006 body bytes takes 2
    data = empty + full
    (result, fields) = same_decoding(data, total=2, limit=size)
    assert result == ("ok", len(data))
    assert fields[2] == [None, b""] and fields[3] == [None, b"x" * 1000]
    (result, fields) = same_decoding(data, total=2, limit=size - 1)
    assert result == (LimitExceededError,
                      "record of %d bytes exceeds the limit of %d bytes" % (size, size - 1))
    assert fields[0] == [0]  # the complete record before it stays


@needs_speedups
@pytest.mark.parametrize("total", [2, 1 << 16, INT32_MAX])
def test_counts_beyond_the_data(total):
    data = record() + record(off_delta=1)
    (result, fields) = same_decoding(data, total=total)
    if total == 2:
        assert result == ("ok", len(data))
    else:
        assert result == (CorruptRecordError,
                          "premature end of record data: 2 of %d records read" % total)
        assert len(fields[0]) == 2


@needs_speedups
def test_chunks_resume_where_the_last_stopped():
    recs = [record(ts_delta=i * 1000, off_delta=i, key=b"k%d" % i, headers=[(b"n", b"%d" % i)])
            for i in range(10)]
    data = b"".join(recs)
    pos = 0
    for done in range(0, 10, 3):
        n = min(3, 10 - done)
        (result, fields) = same_decoding(data, pos=pos, n=n, done=done, total=10, base_offset=7)
        assert result[0] == "ok" and fields[0] == [7 + i for i in range(done, done + n)]
        pos = result[1]
    assert pos == len(data)
    (result, _) = same_decoding(data, pos=pos, n=1, done=10, total=11)
    assert result == (CorruptRecordError, "premature end of record data: 10 of 11 records read")


@needs_speedups
def test_iter_v2_records_chunks_join_to_the_whole(monkeypatch):
    data = b"".join(record(ts_delta=i, off_delta=i, value=b"v%d" % i) for i in range(50))
    for module in (speedups, None):
        monkeypatch.setattr(records, "_speedups", module)
        for chunk in (1, 7, 50, 64):
            got = list(records.iter_v2_records(data, 50, 100, 5, None, 1 << 20, chunk))
            assert [len(r) for r in got] == [min(chunk, 50 - i) for i in range(0, 50, chunk)]
            assert [o for r in got for o in r.offsets] == list(range(100, 150))
    # damage: the complete records before it are yielded, then the error
    bad = data[:-1]
    for module in (speedups, None):
        monkeypatch.setattr(records, "_speedups", module)
        seen = []
        with pytest.raises(CorruptRecordError):
            for r in records.iter_v2_records(bad, 50, 0, 0, None, 1 << 20, 16):
                seen.extend(r.offsets)
        assert seen == list(range(49))


# -- the decoder: random bytes and mutations ----------------------------------------------------

_int64 = st.integers(INT64_MIN, INT64_MAX)
_edge64 = st.one_of(_int64, st.sampled_from([INT64_MIN, INT64_MIN + 1, -1, 0, INT64_MAX - 1,
                                              INT64_MAX, INT64_MAX - INT32_MAX]))


@st.composite
def record_streams(draw):
    """A valid stream of records, as a list of (bytes) records."""
    n = draw(st.integers(0, 6))
    out = []
    blob = st.one_of(st.none(), st.binary(max_size=40))
    for i in range(n):
        hdrs = draw(st.lists(st.tuples(st.binary(max_size=6), st.one_of(st.none(), st.binary(max_size=6))),
                             max_size=3))
        out.append(record(ts_delta=draw(st.one_of(st.integers(-300, 300), _int64)),
                          off_delta=draw(st.one_of(st.integers(-3, 300), st.integers(INT32_MIN, INT32_MAX))),
                          key=draw(blob), value=draw(blob), headers=hdrs,
                          attrs=draw(st.integers(0, 255))))
    return out


@needs_speedups
@fuzz
@given(data=st.binary(max_size=300), total=st.integers(0, 40), base_offset=_edge64,
       base_ts=_edge64, append=st.one_of(st.none(), _int64), limit=st.integers(0, 400))
def test_random_bytes(data, total, base_offset, base_ts, append, limit):
    same_decoding(data, total=total, base_offset=base_offset, base_ts=base_ts,
                  append_time=append, limit=limit)


@needs_speedups
@fuzz
@given(stream=record_streams(), base_offset=_edge64, base_ts=_edge64,
       cut=st.integers(0, 2000), flips=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 7)),
                                               max_size=3),
       insert=st.binary(max_size=4), extra=st.integers(-1, 2))
def test_mutated_record_streams(stream, base_offset, base_ts, cut, flips, insert, extra):
    data = bytearray(b"".join(stream))
    same_decoding(bytes(data), total=len(stream), base_offset=base_offset, base_ts=base_ts)
    for at, bit in flips:
        if data:
            data[at % len(data)] ^= 1 << bit
    if data:
        at = cut % (len(data) + 1)
        data[at:at] = insert
        same_decoding(bytes(data[:at] + data[at + len(insert):]) if extra < 0 else bytes(data),
                      total=max(0, len(stream) + extra), base_offset=base_offset,
                      base_ts=base_ts)
        same_decoding(bytes(data[:at]), total=len(stream), base_offset=base_offset)
    else:
        same_decoding(bytes(data), total=max(0, extra))


# -- the kafka text: batch lines ----------------------------------------------------------------

def _writer():
    w = render_kafka.KafkaWriter(None, None, render.DumpOptions())
    w._lines = []
    return w


def python_batch_lines(buf, pos, end, max_bytes, base):
    """What render's Python path prints for the run of batches _kafkatext.batch_lines takes:
    complete v2 batches with a correct CRC and a known codec, starting before pos + max_bytes."""
    w = _writer()
    stop = pos + max_bytes
    for item in scan(buf, pos, end):
        if (isinstance(item, InvalidBytes) or item.magic != 2 or not item.is_valid
                or item.codec > 4 or item.position >= stop):
            return w._lines, item.position
        item.position += base
        w._lines.append(w._batch_line(item))
        pos = item.position - base + item.size
    return w._lines, pos


def c_batch_lines(buf, pos, end, max_bytes, base):
    text, stopped = kafkatext.batch_lines(buf, pos, end, max_bytes, crc32c, base)
    return text.decode("utf-8").splitlines(), stopped


def same_batch_lines(buf, pos=0, end=None, max_bytes=1 << 40, base=0):
    end = len(buf) if end is None else end
    py = python_batch_lines(buf, pos, end, max_bytes, base)
    c = c_batch_lines(buf, pos, end, max_bytes, base)
    assert c == py
    for item in scan(buf, pos, end):
        if isinstance(item, records.Batch) and item.magic == 2 and item.codec <= 4:
            line = kafkatext.batch_line(buf, item.position, item.is_valid).decode()
            assert line == _writer()._batch_line(item) + "\n"
    return py


def sample_segment():
    chunks = [
        batch(0, [record(off_delta=i, ts_delta=i) for i in range(3)], base_ts=1000, max_ts=1002),
        batch(3, [record()], attrs=0x08 | 0x10 | 0x40, base_seq=INT32_MAX, pid=9, epoch=2,
              base_ts=77, max_ts=88, ple=5),
        batch(4, [record(off_delta=0)], count=2, last_delta=INT32_MAX, base_seq=5),
        batch(INT64_MAX - 1, [record(), record(off_delta=1)]),
        batch(INT64_MIN, [record()], attrs=0x20),
    ]
    return b"".join(chunks), chunks


@needs_kafkatext
def test_batch_lines_of_valid_batches():
    data, chunks = sample_segment()
    lines, stopped = same_batch_lines(data)
    assert len(lines) == 5 and stopped == len(data)
    same_batch_lines(data, base=10 ** 12)
    same_batch_lines(data, pos=len(chunks[0]), max_bytes=1)


@needs_kafkatext
@pytest.mark.parametrize("base_offset, last_delta", [(INT64_MAX, 1), (INT64_MAX - 5, 9),
                                                     (INT64_MIN, -1), (INT64_MIN + 3, INT32_MIN)])
def test_a_batch_whose_last_offset_overflows(base_offset, last_delta):
    good = batch(0, [record()])
    bad = batch(base_offset, [record()], last_delta=last_delta)
    data = good + bad + good
    lines, stopped = same_batch_lines(data)
    assert len(lines) == 1 and stopped == len(good)
    items = list(scan(data, 0, len(data)))
    assert isinstance(items[1], InvalidBytes) and items[1].kind == OFFSET_OVERFLOW
    with pytest.raises(ValueError):
        kafkatext.batch_line(data, len(good), True)


@needs_kafkatext
@pytest.mark.parametrize("args", [(-1, 10, 10), (0, 10, -1), (5, 3, 1 << 62), (0, 1 << 62, 1 << 62)])
def test_batch_lines_bounds(args):
    data, _ = sample_segment()
    pos, end, max_bytes = args
    if pos < 0 or max_bytes < 0:
        with pytest.raises(ValueError):
            kafkatext.batch_lines(data, pos, end, max_bytes, crc32c, 0)
    else:
        assert c_batch_lines(data, pos, end, max_bytes, 0) == python_batch_lines(
            data, pos, min(end, len(data)), max_bytes, 0)
    for pos in (-1, len(data), len(data) + 100, 1 << 62):
        with pytest.raises(ValueError):
            kafkatext.batch_line(data, pos, True)


@needs_kafkatext
@fuzz
@given(picks=st.lists(st.integers(0, 4), max_size=6), garbage=st.binary(max_size=80),
       flips=st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 7)), max_size=3),
       pos=st.integers(0, 500), max_bytes=st.integers(0, 5000), base=st.integers(0, 1 << 50),
       cut=st.integers(0, 4000))
def test_batch_lines_random(picks, garbage, flips, pos, max_bytes, base, cut):
    _, chunks = sample_segment()
    data = bytearray(b"".join(chunks[i] for i in picks) + garbage)
    for at, bit in flips:
        if data:
            data[at % len(data)] ^= 1 << bit
    data = bytes(data[:cut])
    same_batch_lines(data, min(pos, len(data)), len(data), max_bytes, base)


# -- the kafka text: record lines ---------------------------------------------------------------

def python_record_lines(recs, base_offset, base_seq, ts_type, print_data, monkeypatch):
    monkeypatch.setattr(render_kafka, "_kafkatext", None)
    w = _writer()
    w.opts.print_data = print_data
    b = records.Batch()
    b.base_offset, b.base_sequence, b.timestamp_type = base_offset, base_seq, ts_type
    w._v2_lines(b, recs)
    return ("\n".join(w._lines) + "\n" if w._lines else "").encode("utf-8", "replace")


def same_record_lines(recs, base_offset, base_seq, ts_type, print_data, monkeypatch):
    label = records.TIMESTAMP_TYPE_NAMES[ts_type]
    c = kafkatext.record_lines(recs.offsets, recs.timestamps, recs.keys, recs.values, recs.headers,
                               base_offset, base_seq, label, print_data)
    with monkeypatch.context() as m:
        py = python_record_lines(recs, base_offset, base_seq, ts_type, print_data, m)
    assert c == py
    return c


@needs_kafkatext
@pytest.mark.parametrize("print_data", [False, True])
def test_record_lines_of_decoded_records(print_data, monkeypatch):
    data = b"".join([
        record(key=b"\xff\xfeok", value="h\u00e9llo \u2603 \U0001F600".encode(), headers=[(b"a", b"1"), (b"\xc3", None)]),
        record(off_delta=1, key=None, value=None),
        record(off_delta=7, key=b"", value=b"\xed\xa0\x80 surrogate \xf4\x90\x80\x80"),
        record(off_delta=8, key=b"\xed\xbfA", value=b"two \xed\xa0 bytes \xed\xa0"),
        record(off_delta=INT32_MAX, value=b"x" * 300),
    ])
    recs = records.Records()
    recs.headers = []
    records._decode_v2_loop(data, 0, 5, 0, 5, 5, 1000, None, 1 << 20, recs)
    for base_seq in (-1, 0, INT32_MAX - 3, INT32_MAX, INT32_MIN):
        for ts_type in (records.CREATE_TIME, records.LOG_APPEND_TIME):
            same_record_lines(recs, 5, base_seq, ts_type, print_data, monkeypatch)


_header_keys = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=5)


@needs_kafkatext
@fuzz
@given(rows=st.lists(st.tuples(_int64, _int64, st.one_of(st.none(), st.binary(max_size=12)),
                               st.one_of(st.none(), st.binary(max_size=12)),
                               st.lists(st.tuples(_header_keys, st.one_of(st.none(), st.binary(max_size=3))),
                                        max_size=2)), max_size=5),
       base_offset=_edge64, base_seq=st.one_of(st.sampled_from([-1, 0, INT32_MAX]), _int64),
       print_data=st.booleans())
def test_record_lines_random(rows, base_offset, base_seq, print_data):
    recs = records.Records()
    recs.headers = []
    for off, ts, k, v, h in rows:
        recs.offsets.append(off)
        recs.timestamps.append(ts)
        recs.keys.append(k)
        recs.values.append(v)
        recs.headers.append(tuple(h))
    with pytest.MonkeyPatch.context() as m:
        same_record_lines(recs, base_offset, base_seq, records.CREATE_TIME, print_data, m)


# -- the kafka text: runs of batches with their records (deep_lines) ---------------------------

def _compressed_batch(base_offset, recs, codec, **kw):
    """batch() with its records compressed by ``codec`` (1 gzip, 3 lz4, 4 zstd) as Kafka's
    producers frame them."""
    import gzip

    import lz4.frame
    import zstandard
    payload = b"".join(recs)
    compress = {1: gzip.compress,
                3: lambda d: lz4.frame.compress(d, block_linked=False),
                4: lambda d: zstandard.ZstdCompressor().compress(d)}[codec]
    plain = batch(base_offset, recs, **kw)
    attrs = struct.unpack_from(">h", plain, 21)[0] | codec
    after_crc = struct.pack(">h", attrs) + plain[23:61] + compress(payload)
    size = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", base_offset, size, struct.unpack_from(">i", plain, 12)[0], 2,
                       crc32c(after_crc)) + after_crc


def _deep_dump(path, native, chunk, kafka_format, print_data):
    """(stdout bytes, stderr text, invalid) of `dump --deep-iteration` of ``path`` in-process:
    the C renderer ``native`` (None: the Python code), its reused buffer ``chunk`` bytes."""
    import io

    from kafkalog_cli.log.read import SegmentReader
    from kafkalog_cli.log.segment import LogFile
    with pytest.MonkeyPatch.context() as m:
        m.setattr(render_kafka, "_kafkatext", native)
        m.setattr(render_kafka, "FAST_CHUNK", chunk)
        out, err = io.BytesIO(), io.StringIO()
        w = render_kafka.KafkaWriter(out, err, render.DumpOptions(
            deep=True, print_data=print_data, kafka_format=kafka_format))
        with LogFile(path, max_message_size=400) as log:
            reader = SegmentReader(log, None, records=True, fast=w.fast_path(),
                                   fast_records=w.fast_records_path())
            w.segment(reader)
        w.finish()
    return out.getvalue(), err.getvalue(), reader.invalid


_kinds = st.sampled_from(["data", "data", "data", "gap", "back", "control", "crc", "append",
                          "lz4", "zstd", "gzip", "count0", "big", "corrupt", "long"])
_rows = st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=6)),
                           st.one_of(st.none(), st.binary(max_size=8),
                                     st.sampled_from([b"\xff\xfe", "\u00e9\u2603".encode()])),
                           st.lists(st.tuples(st.sampled_from([b"h", b"\xc3", b"k2"]),
                                              st.one_of(st.none(), st.binary(max_size=2))),
                                    max_size=2)),
                 min_size=1, max_size=4)


@needs_kafkatext
@fuzz
@given(specs=st.lists(st.tuples(_kinds, _rows, st.integers(0, 3)), max_size=8),
       start=st.sampled_from([0, 7, 1 << 40]), flips=st.lists(st.integers(0, 1 << 16), max_size=2),
       cut=st.integers(0, 40), chunk=st.sampled_from([90, 200, 1000, 1 << 20]),
       kafka_format=st.sampled_from(["4.2", "4.3"]), print_data=st.booleans())
def test_deep_lines_print_what_the_python_code_prints(tmp_path_factory, specs, start, flips, cut,
                                                      chunk, kafka_format, print_data):
    """A segment of plain, compressed, control, damaged and out-of-order batches, dumped with
    --deep-iteration: the C runs (deep_lines, which stops before anything it does not take)
    and the Python code print the same text, warnings and exit status, whatever the size of
    the buffer the runs read the file into."""
    parts, offset = [], start
    for kind, rows, skip in specs:
        recs = [record(off_delta=i, ts_delta=i * 3, key=k, value=v, headers=h)
                for i, (k, v, h) in enumerate(rows)]
        base = offset + (skip if kind == "gap" else 0)
        if kind == "back":
            base = max(0, offset - 2)
        kw = dict(base_ts=1000, max_ts=1000 + 3 * len(recs), base_seq=skip - 1)
        if kind in ("lz4", "zstd", "gzip"):
            part = _compressed_batch(base, recs, {"gzip": 1, "lz4": 3, "zstd": 4}[kind], **kw)
        elif kind == "control":
            part = batch(base, [record(key=b"\x00\x00\x00\x01", value=b"\x00\x00\x00\x00\x00\x05")],
                         attrs=0x30, **kw)
        elif kind == "crc":
            part = batch(base, recs, crc=1, **kw)
        elif kind == "append":
            part = batch(base, recs, attrs=0x08, **kw)
        elif kind == "count0":
            part = batch(base, recs, count=0, **kw)
        elif kind == "big":
            part = batch(base, recs + [record(off_delta=len(recs), value=b"v" * 500)], **kw)
        elif kind == "corrupt":
            part = batch(base, recs + [b"\x06\x00\x00"], **kw)
        elif kind == "long":
            part = batch(base, recs, count=len(recs) - 1, **kw)
        else:
            part = batch(base, recs, **kw)
        parts.append(part)
        offset = base + max(len(recs), 1)
    data = bytearray(b"".join(parts))
    for at in flips:
        if data:
            data[at % len(data)] ^= 0x10
    data = bytes(data[:len(data) - cut] if cut < 30 else data)
    path = tmp_path_factory.mktemp("deep") / ("%020d.log" % start)
    path.write_bytes(data)
    py = _deep_dump(str(path), None, chunk, kafka_format, print_data)
    c = _deep_dump(str(path), kafkatext, chunk, kafka_format, print_data)
    assert c == py


@needs_kafkatext
def test_deep_lines_takes_plain_and_compressed_batches():
    """The run takes every batch of a clean segment, compressed ones too, and stops before a
    control batch, a batch whose CRC fails and one whose offsets go back."""
    good = [batch(0, [record(key=b"a", value=b"b")]),
            _compressed_batch(1, [record(), record(off_delta=1)], 4),
            _compressed_batch(3, [record(value=b"\xff")], 3)]
    data = b"".join(good)

    def run(buf, prev_last=-1, last=None, inflate=None):
        inflate = inflate or (lambda codec, d: codecs.Inflater().inflate(codec, d, 1 << 20, 2))
        return kafkatext.deep_lines(buf, 0, len(buf), len(buf), crc32c, 0, prev_last,
                                    INT64_MAX, last, 1 << 20, True, inflate,
                                    CorruptRecordError, 1 << 20, 100)

    from kafkalog_cli.format import codecs
    text, pos, prev_last, last = run(data)
    assert (pos, prev_last, last) == (len(data), 3, 3)
    assert text.decode().count("| offset: ") == 4 and "payload: \ufffd" in text.decode()
    for stopper in (batch(4, [record()], attrs=0x20), batch(4, [record()], crc=7),
                    batch(2, [record()])):
        text, pos, _, _ = run(data + stopper)
        assert pos == len(data)
    assert run(data, last=5)[1] == 0  # the record offsets do not follow the last one printed

    def broken(codec, d):
        raise CorruptRecordError("no")
    assert run(good[1], inflate=broken)[:2] == (b"", 0)


# -- end to end: both builds print the same, and call an overflow invalid -----------------------

def test_dump_of_an_overflowing_batch_is_the_same_in_both_builds(tmp_path):
    """The reproduction: a batch at base offset 2^63-1 (the CRC does not cover it) between two
    good ones. Both builds print the same text and exit 1, naming the overflow."""
    import subprocess
    data = (batch(INT64_MAX, [record(off_delta=i) for i in range(10)])
            + batch(52, [record(off_delta=i) for i in range(3)]))
    path = tmp_path / "00000000000000000042.log"
    path.write_bytes(data)
    outs = []
    for pure in ("", "1"):
        env = dict(os.environ, KAFKALOG_PURE_PYTHON=pure)
        if not pure:
            env.pop("KAFKALOG_PURE_PYTHON")
        for flags in ([], ["--deep-iteration", "--skip-invalid"]):
            res = subprocess.run([sys.executable, "-m", "kafkalog_cli", "dump", *flags, str(path)],
                                 capture_output=True, text=True, env=env, timeout=60)
            assert res.returncode == 1, res
            assert "last offset overflows a 64-bit long: baseOffset 9223372036854775807 + " \
                   "lastOffsetDelta 9" in res.stderr
            assert "Traceback" not in res.stderr
            assert "-9223372036854775" not in res.stdout + res.stderr
            assert "9223372036854775808" not in res.stdout
            outs.append((res.stdout, res.stderr))
    assert outs[0] == outs[2] and outs[1] == outs[3]
    assert "baseOffset: 52 lastOffset: 54" in outs[1][0]


def test_a_legacy_inner_offset_that_overflows_is_invalid(tmp_path):
    """A v1 gzip wrapper at offset 2^63-1 whose inner relative offsets are 0, 5, 1 (the last
    is 1, so the base is 2^63-2): the inner message at relative 5 would be past 2^63-1. The
    records are invalid data (exit 1, said), never a number past the long range."""
    import gzip
    import subprocess

    import kafkagen as kg
    inner = bytearray(kg.legacy_entries(1, [kg.Rec(b"k", b"v%d" % i, kg.T0) for i in range(3)]))
    entries = kg.split_entries(bytes(inner))
    pos = 0
    for entry, rel in zip(entries, (0, 5, 1)):
        struct.pack_into(">q", inner, pos, rel)  # the CRC does not cover the offset
        pos += len(entry)
    wrapper = kg.legacy_wrapper(1, inner, INT64_MAX, "gzip", lambda b: gzip.compress(b, mtime=0),
                                timestamp=kg.T0)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(wrapper)
    res = subprocess.run([sys.executable, "-m", "kafkalog_cli", "dump", "--deep-iteration",
                          str(path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1, res
    assert "overflows a 64-bit long" in res.stderr and "Traceback" not in res.stderr
    assert str(1 << 63) not in res.stdout


@needs_kafkatext
def test_batch_lines_stop_where_offsets_go_back():
    """Given the highest last offset so far, the C run stops before a batch whose last offset
    is not above it (dump's Python loop reports that batch), and hands back the new highest;
    without it, offsets are not compared (the two-item answer)."""
    chunks = [batch(10, [record()]), batch(11, [record()]), batch(5, [record()]),
              batch(12, [record()])]
    data = b"".join(chunks)
    n = len(data)
    text, stopped, last = kafkatext.batch_lines(data, 0, n, n, crc32c, 0, None)
    assert stopped == len(chunks[0]) + len(chunks[1]) and last == 11
    assert text.decode().splitlines() == python_batch_lines(data[:stopped], 0, stopped, n, 0)[0]
    text, stopped, last = kafkatext.batch_lines(data, 0, n, n, crc32c, 0, 10)
    assert (text, stopped, last) == (b"", 0, 10)
    text, stopped, last = kafkatext.batch_lines(data, stopped + len(chunks[0]) + len(chunks[1])
                                                + len(chunks[2]), n, n, crc32c, 0, 11)
    assert stopped == n and last == 12
    text, stopped = kafkatext.batch_lines(data, 0, n, n, crc32c, 0)
    assert stopped == n


# -- encode_lines: the records area of `append --input-format lines` ----------------------------

def both_line_encoders(*args):
    from kafkalog_cli.format.encode import encode_lines as py_encode_lines
    outcomes = []
    for fn in (py_encode_lines, speedups.encode_lines):
        try:
            outcomes.append(("ok", fn(*args)))
        except Exception as e:  # the class and the text are what is compared
            outcomes.append((type(e), str(e)))
    assert outcomes[1] == outcomes[0], args
    return outcomes[0]


@needs_speedups
@pytest.mark.parametrize("data", [b"", b"\n", b"\r\n", b"\r", b"a\r", b"a\rb\n", b"\n\n\r\n",
                                  b"one\ntwo\r\nthree", b"x" * 200 + b"\n" + b"y" * 16400 + b"\n"])
@pytest.mark.parametrize("key", [None, b"", b"k" * 130])
@pytest.mark.parametrize("ts_delta, count", [(0, 0), (-1, 5), (INT64_MAX, INT32_MAX),
                                             (INT64_MIN, 127), (63, 128)])
@pytest.mark.parametrize("batch_records, batch_bytes", [(1000000, 16384), (1, 16384), (2, 30),
                                                        (3, 1)])
def test_encode_lines_edges(data, key, ts_delta, count, batch_records, batch_bytes):
    result = both_line_encoders(data, 0, len(data), key, ts_delta, count, 0, batch_records,
                                batch_bytes)
    assert result[0] == "ok"


@needs_speedups
@pytest.mark.parametrize("pos, end", [(-1, 3), (2, 1), (0, 99)])
def test_encode_lines_positions_outside_the_data(pos, end):
    assert both_line_encoders(b"abc\n", pos, end, None, 0, 0, 0, 10, 100)[0] is ValueError


@needs_speedups
@fuzz
@given(lines=st.lists(st.binary(max_size=40), max_size=12), tail=st.binary(max_size=5),
       key=st.one_of(st.none(), st.binary(max_size=140)), pos=st.integers(0, 30),
       ts_delta=_int64,
       count=st.integers(0, INT32_MAX), pending=st.integers(0, 200),
       batch_records=st.integers(1, 20), batch_bytes=st.integers(1, 400))
def test_encode_lines_random(lines, tail, key, pos, ts_delta, count, pending, batch_records,
                             batch_bytes):
    data = b"\n".join(lines) + tail
    pos = min(pos, len(data))
    while True:  # batch after batch, as RecordAppender.append_lines calls it
        result = both_line_encoders(data, pos, len(data), key, ts_delta, count, pending,
                                    batch_records, batch_bytes)
        _, pos, taken, pending, full = result[1]
        count += taken
        if full:
            count = pending = 0
        elif pos == len(data):
            return


# -- encode_records: the records area of encode.Record objects ----------------------------------

_header_pairs = st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=8))),
                         max_size=3)


def _a_record(key, value, ts, headers, headers_as):
    from kafkalog_cli.format.encode import Record
    return Record(key, value, ts, headers_as(headers))


@needs_speedups
@fuzz
@given(rows=st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=200)),
                               st.one_of(st.none(), st.binary(max_size=300)), _int64,
                               _header_pairs), min_size=1, max_size=8),
       headers_as=st.sampled_from([tuple, list, lambda h: [list(p) for p in h]]))
def test_encode_records_random(rows, headers_as):
    from kafkalog_cli.format.encode import encode_v2_records
    recs = [_a_record(*row, headers_as=headers_as) for row in rows]
    base = recs[0].timestamp
    c = speedups.encode_records(recs, base)
    try:
        py = encode_v2_records(recs, base)
    except UnicodeEncodeError:
        assert c is None  # a header key with a lone surrogate: the Python's error is raised
        return
    if c is None:
        # left to the Python: a header pair that is not a tuple, or a delta past 64 bits
        assert (any(type(p) is not tuple for r in recs for p in r.headers)
                or any(not INT64_MIN <= r.timestamp - base <= INT64_MAX for r in recs))
    else:
        assert c == py


@needs_speedups
@pytest.mark.parametrize("row", [
    (b"k", b"v", INT64_MAX, ()), (None, None, INT64_MIN, ()), (b"", b"", 0, (("\u00e9", None),)),
    (b"k" * 64, b"v" * 8192, 1700000000000, (("h", b"x" * 130), ("", b""))),
])
@pytest.mark.parametrize("base", [0, INT64_MIN, INT64_MAX, 1700000000000])
def test_encode_records_edges(row, base):
    from kafkalog_cli.format.encode import encode_v2_records
    recs = [_a_record(*row, headers_as=tuple) for _ in range(3)]
    c = speedups.encode_records(recs, base)
    if INT64_MIN <= row[2] - base <= INT64_MAX:
        assert c == encode_v2_records(recs, base)
    else:
        assert c is None


@needs_speedups
@pytest.mark.parametrize("odd", [dict(key="str"), dict(value=bytearray(b"x")), dict(timestamp=1.0),
                                 dict(timestamp=2 ** 64), dict(headers=(("\ud800", b""),)),
                                 dict(headers=((b"k", b""),))])
def test_encode_records_leaves_what_is_not_plain_to_python(odd):
    from kafkalog_cli.format.encode import Record
    fields = dict(key=b"k", value=b"v", timestamp=5, headers=())
    fields.update(odd)
    assert speedups.encode_records([Record(**fields)], 0) is None


# -- v2_records_ok: do a batch's uncompressed records decode? -----------------------------------

def both_records_checks(data, count, base_offset=0, base_ts=0, lat=False, limit=1 << 20,
                        start=0, end=None):
    from kafkalog_cli.format import scan as scan_module
    end = len(data) if end is None else end
    args = (data, start, end, count, base_offset, base_ts, lat, limit)
    outcomes = []
    for fn in (scan_module.v2_records_ok_python, speedups.v2_records_ok):
        try:
            outcomes.append(("ok", fn(*args)))
        except Exception as e:  # the class and the text are what is compared
            outcomes.append((type(e), str(e)))
    assert outcomes[1] == outcomes[0], (data[:100], args[1:])
    return outcomes[0]


@needs_speedups
@pytest.mark.parametrize("recs, count, kw", [
    ([record()], 1, {}),
    ([record(), record(off_delta=1)], 2, {}),
    ([record()], 2, {}),                                   # fewer records than the count
    ([record(), record()], 1, {}),                         # bytes left after the count
    ([], 0, {}), ([record()], 0, {}), ([], -1, {}), ([record()], -1, {}),
    ([record(value=b"x" * 100)], 1, dict(limit=50)),       # past the limit
    ([record(key=None, value=None)], 1, {}),
    ([record(headers=((b"h", b"v"), (b"\xff", None)))], 1, {}),
    ([record(length=3)], 1, {}), ([record(length=200)], 1, {}),
    ([record(raw_key_size=-5)], 1, {}), ([record(raw_value_size=90)], 1, {}),
    ([record(ts_delta=1)], 1, dict(base_ts=INT64_MAX)),    # timestamp overflow
    ([record(ts_delta=1)], 1, dict(base_ts=INT64_MAX, lat=True)),  # LogAppendTime: no check
    ([record(off_delta=1)], 1, dict(base_offset=INT64_MAX)),
    ([record(widths=dict(len=5, ts=10, off=5, key=5, value=5, hdrs=5))], 1, {}),
    ([record(widths=dict(ts=11))], 1, {}), ([record(widths=dict(off=6))], 1, {}),
    ([record()], 1, dict(start=2)), ([record()], 1, dict(start=5, end=3)),
    ([record()], 1, dict(end=1 << 20)),
])
def test_v2_records_ok_edges(recs, count, kw):
    both_records_checks(b"".join(recs), count, **kw)


@needs_speedups
@fuzz
@given(picks=st.lists(st.integers(0, 4), max_size=6), flips=st.lists(
    st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=3),
    cut=st.integers(0, 8), extra=st.integers(-2, 2), lat=st.booleans(),
    base=st.sampled_from([0, INT64_MAX - 3, INT64_MIN + 3]))
def test_v2_records_ok_random(picks, flips, cut, extra, lat, base):
    shapes = [record(), record(key=None, value=b"v" * 130), record(headers=((b"k", None),)),
              record(ts_delta=-3, off_delta=2), record(value=b"")]
    data = bytearray(b"".join(shapes[p] for p in picks))
    for at, byte in flips:
        if data:
            data[at % len(data)] = byte
    data = bytes(data[:max(0, len(data) - cut)])
    both_records_checks(data, len(picks) + extra, base_offset=base, base_ts=base, lat=lat,
                        limit=100)


# -- plain_record: append's plain JSON-lines records --------------------------------------------

def both_plain_records(obj, now=77):
    from kafkalog_cli.format.encode import Record
    from kafkalog_cli.log.append_input import _plain_from_object

    def fields(rec):
        return None if rec is None else (type(rec), rec.key, rec.value, rec.timestamp,
                                         rec.headers)
    py = fields(_plain_from_object(obj, now, Record))
    c = fields(speedups.plain_record(obj, now, Record))
    assert c == py, obj
    return py


@needs_speedups
@pytest.mark.parametrize("obj", [
    {}, {"key": "k", "value": "v"}, {"value": None, "key": None, "timestamp": None},
    {"value": "\u00e9\U0001F600"}, {"value": "x", "timestamp": INT64_MAX},
    {"value": "x", "timestamp": INT64_MIN}, {"value": "x", "timestamp": INT64_MAX + 1},
    {"value": "x", "timestamp": INT64_MIN - 1}, {"value": "x", "timestamp": True},
    {"value": "x", "timestamp": 1.0}, {"value": 1}, {"key": b"bytes"}, {"value": ["x"]},
    {"value": "\ud800"}, {"key": "a\udfff"}, {"val": "x"}, {"value": "x", "headers": {}},
    {1: "x"}, [], None, "string", 5,
])
def test_plain_record_edges(obj):
    both_plain_records(obj)


class _StrKey(str):
    pass


@needs_speedups
def test_plain_record_subclasses():
    assert both_plain_records({_StrKey("value"): "x"}) is not None  # a key equal to "value"
    assert both_plain_records({"value": _StrKey("x")}) is None
    assert both_plain_records(type("D", (dict,), {})(value="x")) is None


_json_scalars = st.one_of(st.none(), st.booleans(), st.integers(INT64_MIN - 2, INT64_MAX + 2),
                          st.floats(allow_nan=False), st.text(max_size=8))


@needs_speedups
@fuzz
@given(obj=st.dictionaries(st.sampled_from(["key", "value", "timestamp", "headers", "k"]),
                           _json_scalars, max_size=4), now=_int64)
def test_plain_record_random(obj, now):
    both_plain_records(obj, now)


# -- encode_jsonl: the records area of `append --input-format jsonl` ----------------------------

def both_jsonl_encoders(*args):
    """``args`` to append_input.encode_jsonl and to its C mirror, with the same ``plain``
    (append_input._plain_record): the same outcome, or the same error."""
    from kafkalog_cli.log.append_input import _plain_record, encode_jsonl as py_encode_jsonl
    outcomes = []
    for fn in (py_encode_jsonl, speedups.encode_jsonl):
        try:
            outcomes.append(("ok", fn(*args, _plain_record)))
        except Exception as e:  # the class and the text are what is compared
            outcomes.append((type(e), str(e)))
    assert outcomes[1] == outcomes[0], args
    return outcomes[0]


def jsonl_batches(data, now=1700000000000, count=0, pending=0, base_ts=0, max_ts=0,
                  batch_records=1000000, batch_bytes=16384, record_limit=1 << 20):
    """Both encoders over the whole of ``data``, batch after batch as RecordAppender.append_jsonl
    calls them, a line neither takes passed over: the outcomes."""
    pos, results = 0, []
    while pos < len(data):
        result = both_jsonl_encoders(data, pos, len(data), now, base_ts, count, pending, max_ts,
                                     batch_records, batch_bytes, record_limit)
        if result[0] != "ok":
            return results + [result]
        area, pos, lines, taken, base_ts, pending, max_ts, full = result[1]
        results.append(result[1])
        count += taken
        if full:
            count = pending = 0
        elif pos < len(data):  # a line it leaves to the caller
            nl = data.find(b"\n", pos)
            pos = len(data) if nl < 0 else nl + 1
    return results


# Lines at the edges of what orjson reads, and of the shape the C reads by itself
JSONL_EDGE_LINES = [
    b'{"key": "k", "value": "v"}', b'{"value":"v","key":"k","timestamp":1}', b'{}', b' { } ',
    b'{"key":null,"value":null,"timestamp":null}', b'{"timestamp": -0}', b'{"timestamp":0}',
    b'{"timestamp": 9223372036854775807}', b'{"timestamp": -9223372036854775808}',
    b'{"timestamp": 9223372036854775808}', b'{"timestamp": -9223372036854775809}',
    b'{"timestamp": 18446744073709551615}', b'{"timestamp": 99999999999999999999}',
    b'{"timestamp": 01}', b'{"timestamp": -}', b'{"timestamp": 1.0}', b'{"timestamp": 1e3}',
    b'{"timestamp": 1E3}', b'{"timestamp": 1e400}', b'{"timestamp": "1"}', b'{"timestamp": true}',
    b'{"value": "\\u00e9\\u4e2d \\ud83d\\ude00 \xc3\xa9 \\uD83D\\uDE00 \\u0000\\u001f"}',
    b'{"value": "\\"\\\\\\/\\b\\f\\n\\r\\t"}', b'{"value": "\\ud800"}', b'{"value": "\\udc00"}',
    b'{"value": "\\ud800\\u0041"}', b'{"value": "\\ud800\\udbff"}', b'{"value": "\\ud800x"}',
    b'{"value": "\\u00"}', b'{"value": "\\u00g0"}', b'{"value": "\\x"}', b'{"value": "\\',
    b'{"value": "a\x01b"}', b'{"value": "a\x1fb"}', b'{"value": "a\x7fb"}', b'{"value": "\x80"}',
    b'{"value": "\xc0\x80"}', b'{"value": "\xc2\x80"}', b'{"value": "\xdf\xbf"}',
    b'{"value": "\xe0\x9f\xbf"}', b'{"value": "\xe0\xa0\x80"}', b'{"value": "\xed\x9f\xbf"}',
    b'{"value": "\xed\xa0\x80"}', b'{"value": "\xef\xbf\xbf"}', b'{"value": "\xf0\x8f\xbf\xbf"}',
    b'{"value": "\xf0\x90\x80\x80"}', b'{"value": "\xf4\x8f\xbf\xbf"}',
    b'{"value": "\xf4\x90\x80\x80"}', b'{"value": "\xf5\x80\x80\x80"}', b'{"value": "\xe2\x82"}',
    b'{"value": "x", "value": "dup"}', b'{"value": 1, "value": "dup"}',
    b'{"key": "a", "key": null}', b'{"timestamp": 5, "timestamp": null}',
    b'{"value": null, "value": "b"}', b'{"timestamp": null, "timestamp": 5}',
    b'{"value": [1, {"a": 1e400}], "value": "dup"}', b'{"timestamp": 1.5, "timestamp": 5}',
    b'{"k\\u0065y": "escaped name"}', b'{"key": "k", "headers": {"h": "v"}}', b'{"val": "x"}',
    b'{"\xff": 1}', b'{"ke\x01y": 1}', b'{"key": "k",}', b'{,}', b'{"key" "k"}', b'{"key": nul}',
    b'{"key": nullx}', b'{"key": null null}', b'{"key": "a"} x', b'{"key": "a"}\x00',
    b'{"key": "a"}\x0c', b'{"key": "a"}\r', b'\t{"key": "a"}\t', b'\xef\xbb\xbf{"key": "a"}',
    b'[1, 2]', b'"string"', b'5', b'null', b'', b' ', b'\r', b'\x0b\x0c', b'\x1c', b'{',
    b'{"key"', b'{"key":', b'{"key": "open', b'{"value": true}', b'{"value": 12}',
    b'{"value": {"base64": "AAEC"}}', b'{"control": "commit", "producerId": 7}',
    b'{"key": "p", "value": "x", "producerId": 7, "transactional": true}',
    b'{"value": "' + b"x" * 5000 + b'"}', b'{"value": "' + b"\\u00e9" * 700 + b'"}',
] + [
    # each byte the C looks at itself at every place within the 8 bytes it reads at once
    b'{"value": "' + b"a" * at + special + b"b" * 20 + b'"}'
    for special in [b"\x00", b"\x01", b"\x1f", b"\x7f", b"\x80", b"\xc3\xa9", b"\xed\xa0\x80",
                    b"\\n", b"\\u00e9", b'\\"', b"\\", b'"', b"\xff"]
    for at in range(9)
]


@needs_speedups
@pytest.mark.parametrize("line", JSONL_EDGE_LINES)
@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b""])
def test_encode_jsonl_edges(line, newline):
    data = b'{"value": "before"}\n' + line + newline + b'{"key": "after"}'
    jsonl_batches(data)
    jsonl_batches(line + newline)
    jsonl_batches(line + newline, count=3, pending=100, base_ts=5, max_ts=9)


@needs_speedups
@pytest.mark.parametrize("kw", [
    dict(batch_records=1), dict(batch_records=2), dict(batch_bytes=1), dict(batch_bytes=60),
    dict(record_limit=30), dict(record_limit=21), dict(count=5, pending=16380),
    dict(base_ts=INT64_MAX, count=1, max_ts=INT64_MAX), dict(base_ts=INT64_MIN, count=1),
    dict(now=INT64_MIN), dict(now=INT64_MAX), dict(count=INT32_MAX, pending=1),
])
def test_encode_jsonl_batches(kw):
    lines = [b'{"key": "k%d", "value": "%s"}' % (i, b"v" * (i * 7 % 40)) for i in range(20)]
    lines[5] = b'{"value": "x", "timestamp": %d}' % INT64_MIN
    lines[6] = b'{"value": "y", "timestamp": %d}' % INT64_MAX
    lines[9] = b'   '
    lines[12] = b'{"value": "x", "headers": [["h", "v"]]}'
    jsonl_batches(b"\n".join(lines), **kw)


@needs_speedups
@pytest.mark.parametrize("pos, end", [(-1, 3), (2, 1), (0, 99)])
def test_encode_jsonl_positions_outside_the_data(pos, end):
    assert both_jsonl_encoders(b"{}\n", pos, end, 0, 0, 0, 0, 0, 10, 100, 100)[0] is ValueError


@needs_speedups
def test_encode_jsonl_reads_the_usual_lines_itself():
    """Lines of the usual shape are read by the C without asking ``plain`` (orjson)."""
    def plain(line, now):
        raise AssertionError("asked about %r" % line)
    data = (b'{"key": "k1", "value": "alpha beta"}\n{"value":null}\r\n\n'
            b'{"value": "\\u00e9\\ud83d\\ude00\xc3\xa9\\n", "timestamp": -5, "key": null}\n'
            b'{"headers": {}}')
    area, pos, lines, taken = speedups.encode_jsonl(data, 0, len(data), 7, 0, 0, 0, 0, 100,
                                                    16384, 1000, plain)[:4]
    assert (lines, taken) == (4, 3) and data[pos:] == b'{"headers": {}}'


def _json_text(rng, text):
    """``text`` as a JSON string, each character written as it is, as an escape it has or as
    \\u escapes (in either case), at random."""
    out = ['"']
    short = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
             "\t": "\\t", "/": "\\/"}
    for ch in text:
        roll = rng.random()
        cp = ord(ch)
        if roll < 0.3 or ch in '"\\' or cp < 0x20 or 0xD800 <= cp <= 0xDFFF:
            if ch in short and roll < 0.15:
                out.append(short[ch])
            elif cp > 0xFFFF:
                cp -= 0x10000
                units = (0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF))
                out.append("".join(("\\u%04x" if rng.random() < 0.5 else "\\u%04X") % u
                                   for u in units))
            else:
                out.append(("\\u%04x" if rng.random() < 0.5 else "\\u%04X") % cp)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out).encode("utf-8", "surrogatepass")


_jsonl_texts = st.text(st.characters(blacklist_categories=()), max_size=12) | st.sampled_from(
    ["", "alpha beta", "\u00e9", "\U0001F600", "\x00", "\ud800", "\udfff", "\ud83d\ude00"])
_jsonl_values = st.one_of(
    st.none(), st.booleans(), _jsonl_texts, st.integers(INT64_MIN - 2, INT64_MAX + 2),
    st.sampled_from(["1.5", "-0", "1e3", "-0.0", "01", "[]", "{}", '[1, {"a": "b"}]', "1e400",
                     '{"base64": "AAEC"}']))
_jsonl_names = st.sampled_from(["key", "value", "timestamp", "key", "value", "timestamp",
                                "headers", "k\\u0065y", "Key", "producerId", "control"])


@st.composite
def _jsonl_line(draw):
    import random
    rng = random.Random(draw(st.integers(0, 1 << 30)))
    members = draw(st.lists(st.tuples(_jsonl_names, _jsonl_values), max_size=4))

    def ws():
        return rng.choice(["", "", "", " ", "\t", "\r", "  "])
    parts = []
    for name, value in members:
        if value is None:
            text = "null"
        elif isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int):
            text = str(value)
        elif name in ("key", "value") or rng.random() < 0.2:
            parts.append(ws() + '"' + name + '"' + ws() + ":" + ws())
            parts.append(_json_text(rng, value).decode("utf-8", "surrogatepass"))
            parts.append(ws())
            continue
        else:
            text = value
        parts.append(ws() + '"' + name + '"' + ws() + ":" + ws() + text + ws())
    line = (ws() + "{" + ",".join(parts) + "}" + ws()).encode("utf-8", "surrogatepass")
    # now and then a byte changed, cut or added where orjson and the C reader must agree
    for _ in range(draw(st.integers(0, 2)) if rng.random() < 0.3 else 0):
        at = rng.randrange(len(line) + 1)
        what = rng.choice([b"", b"\x00", b"\x01", b"\xff", b"\xc3", b"\xed\xa0\x80", b",", b"}",
                           b'"', b"\\", b"\\u", b"0", b"-", b"e", b".", b" ", b"\x0c"])
        line = line[:at] + what + line[at + rng.randint(0, 2):]
    return line.replace(b"\n", b"\\n")


@needs_speedups
@fuzz
@given(lines=st.lists(_jsonl_line() | st.sampled_from([b"", b"  ", b"\r"]), max_size=8),
       crlf=st.booleans(), now=_int64, base_ts=_int64, count=st.integers(0, 3),
       pending=st.integers(0, 200), batch_records=st.integers(1, 6),
       batch_bytes=st.integers(1, 400), record_limit=st.integers(1, 200))
def test_encode_jsonl_random(lines, crlf, now, base_ts, count, pending, batch_records,
                             batch_bytes, record_limit):
    data = (b"\r\n" if crlf else b"\n").join(lines)
    jsonl_batches(data, now=now, count=count, pending=pending if count else 0,
                  base_ts=base_ts, max_ts=base_ts, batch_records=batch_records,
                  batch_bytes=batch_bytes, record_limit=record_limit)


# -- snappy compression: _speedups.snappy_compress_raw against format/snappy.py ---------------

def _snappy_inputs():
    import random
    rng = random.Random(11)
    sizes = [0, 1, 4, 14, 15, 16, 17, 30, 31, 32, 33, 255, 256, 257, 4096, 16383, 16384,
             16385, 65535, 65536, 65537, 140000]
    for n in sizes:
        yield rng.randbytes(n)
        yield bytes(n)
        yield bytes(rng.choice(b"ab") for _ in range(n))
        yield (b"kafka record %d, " * 12000)[:n]


@needs_speedups
def test_snappy_edges():
    from kafkalog_cli.format.snappy import compress_raw_python
    for data in _snappy_inputs():
        assert speedups.snappy_compress_raw(data) == compress_raw_python(data), len(data)


@needs_speedups
@fuzz
@given(st.lists(st.sampled_from([b"k1", b"value-", b"x" * 40, b"\x00", b"abcabcab", b"\xff"]),
                max_size=400), st.binary(max_size=300))
def test_snappy_random(parts, noise):
    from kafkalog_cli.format.snappy import compress_raw_python
    data = b"".join(parts) + noise
    assert speedups.snappy_compress_raw(data) == compress_raw_python(data)


# -- the log cleaner's offset map: _speedups.OffsetMap against log/offset_map.py --------------

@needs_speedups
@fuzz
@given(st.integers(min_value=1, max_value=70),
       st.lists(st.tuples(st.booleans(), st.integers(min_value=0, max_value=90),
                          st.integers(min_value=0, max_value=INT64_MAX - 1)), max_size=300))
def test_offset_map(max_slots, operations):
    import hashlib
    from kafkalog_cli.log.offset_map import OffsetMap
    c, py = speedups.OffsetMap(max_slots), OffsetMap(max_slots)
    for put, key, offset in operations:
        digest = hashlib.md5(b"%d" % key).digest()
        if put:
            outcomes = []
            for m in (c, py):
                try:
                    m.put(digest, offset)
                    outcomes.append(None)
                except OverflowError as e:
                    outcomes.append(str(e))
            assert outcomes[0] == outcomes[1]
        else:
            assert c.get(digest) == py.get(digest)
        assert len(c) == len(py)


@needs_speedups
def test_offset_map_refuses_what_the_python_refuses():
    from kafkalog_cli.log.offset_map import OffsetMap
    for m in (speedups.OffsetMap(4), OffsetMap(4)):
        with pytest.raises(ValueError):
            m.put(b"short", 1)
        with pytest.raises(ValueError):
            m.put(b"x" * 16, -1)
        with pytest.raises(ValueError):
            m.get(b"y" * 17)
    with pytest.raises(ValueError):
        speedups.OffsetMap(0)
    with pytest.raises(ValueError):
        OffsetMap(0)


# -- recover_run: LogSegment.recover's batch loop, its common case ------------------------------
#
# _speedups.recover_run against log/recovery_scan.py's recover_run_python, run for run: the
# position reached, the last offset, whether it stopped short, and everything it leaves in the
# SegmentScan (the valid prefix, its offsets and records, the producers' positions, the index
# builder's state and packed entries). Then end to end: scan_segment with the C run, with the
# Python run and with no run at all (every batch through the general path, as before the run
# existed) must find the same valid prefix, the same first problem, the same index files, the
# same producer state and leader epochs, over crafted damage and random mutations; and the
# producer state rebuild reading the producers' batches at the positions the scan found must
# read what it reads walking every header.

import gzip  # noqa: E402

from kafkalog_cli.log import recovery_scan  # noqa: E402
from kafkalog_cli.log.indexbuild import IndexBuilder  # noqa: E402
from kafkalog_cli.log.leader_epochs import LeaderEpochCache  # noqa: E402
from kafkalog_cli.log.producer_state import ProducerState, producer_batches  # noqa: E402
from kafkalog_cli.log.segment import Segment  # noqa: E402

TXN, CONTROL, LAT, GZIP = 0x10, 0x20, 0x08, 0x01


def _scan_state(scan):
    b = scan.builder
    return dict(valid_end=scan.valid_end, last_offset=scan.last_offset,
                first_offset=scan.first_offset, records=scan.records,
                producers=list(scan.producer_positions), offset_index=bytes(b.offset_index),
                time_index=bytes(b.time_index), offset_overflow=list(b.offset_overflow),
                time_overflow=list(b.time_overflow), valid_bytes=b.valid_bytes,
                last_index_entry=b.last_index_entry, max_ts=b.max_ts,
                max_ts_offset=b.max_ts_offset, last_time_ts=b.last_time_ts)


def _new_scan(base, interval, start=None):
    scan = recovery_scan.SegmentScan(IndexBuilder(base, interval))
    for name, value in (start or {}).items():
        setattr(scan.builder if hasattr(scan.builder, name) else scan, name, value)
    return scan


def both_runs(data, pos=0, end=None, at=0, base=0, interval=4096, prev_last=None,
              limit=1 << 20, epoch_limit=INT32_MAX, start=None, crc=crc32c):
    end = len(data) if end is None else end
    outcomes = []
    for fn in (recovery_scan.recover_run_python, speedups.recover_run):
        scan = _new_scan(base, interval, start)
        try:
            out = ("ok", fn(bytearray(data), pos, end, at, scan, prev_last, limit, epoch_limit,
                            crc))
        except Exception as e:  # the class and the text are what is compared
            out = (type(e), str(e))
        outcomes.append((out, _scan_state(scan)))
    assert outcomes[1] == outcomes[0], (bytes(data[:120]), pos, end, at, base, prev_last)
    return outcomes[0]


def chain(specs, base=0, gap=0):
    """Consecutive batches from ``base``: each spec a dict of ``batch`` arguments plus
    ``n`` (records, default 2); offsets follow on (``gap`` more between batches)."""
    out, offset = bytearray(), base
    for i, spec in enumerate(specs):
        spec = dict(spec)
        n = spec.pop("n", 2)
        recs = [record(ts_delta=k, off_delta=k, value=b"v%d" % i) for k in range(n)]
        spec.setdefault("max_ts", 1000 + 10 * i + n)
        spec.setdefault("base_ts", 1000 + 10 * i)
        first = spec.pop("base_offset", offset)
        if spec.pop("gzip", False):
            out += batch(first, [gzip.compress(b"".join(recs))], count=n,
                         attrs=spec.pop("attrs", 0) | GZIP, **spec)
        else:
            out += batch(first, recs, **spec)
        offset = first + max(n, 1) + gap
    return bytes(out)


PLAIN = [{}, {"n": 1}, {"n": 3, "pid": 5, "epoch": 0, "base_seq": 0}, {"n": 0},
         {"attrs": LAT}, {"ple": 2}]


def _damaged(kind):
    """A chain of plain batches with one kind of damage."""
    data = bytearray(chain(PLAIN))
    second = len(batch(0, [record(ts_delta=k, off_delta=k, value=b"v0") for k in range(2)]))
    if kind == "bad crc":
        data[second + 70] ^= 0x40
    elif kind == "bad stored crc":
        data[second + 17] ^= 1
    elif kind == "torn header":
        data = data[:second + 30]
    elif kind == "bad magic":
        data[second + 16] = 3
    elif kind == "legacy magic":
        data[second + 16] = 1
    elif kind == "offsets out of order":
        data = bytearray(chain([{}, {"base_offset": 0}, {}]))
    elif kind == "truncated batch":
        data = data[:len(data) - 5]
    elif kind == "garbage tail":
        data += bytes(range(7, 250, 3)) * 3
    elif kind == "zero tail":
        data += bytes(100)
    elif kind == "size below header":
        struct.pack_into(">i", data, second + 8, 20)
    elif kind == "size past end":
        struct.pack_into(">i", data, second + 8, 1 << 30)
    elif kind == "negative count":
        data = bytearray(chain([{}, {"count": -1}]))
    elif kind == "count above records":
        data = bytearray(chain([{}, {"count": 3}]))
    elif kind == "last offset overflows":
        data = bytearray(chain([{}, {"base_offset": INT64_MAX - 1, "n": 3}]))
    elif kind == "offset beyond the segment":
        data = bytearray(chain([{}, {"base_offset": 1 << 33}]))
    elif kind == "last offset at the segment's reach":
        data = bytearray(chain([{}, {"base_offset": (1 << 31) - 2}, {"n": 1}]))
    elif kind == "last offset just past the segment's reach":
        data = bytearray(chain([{}, {"base_offset": (1 << 31) - 1}]))
    elif kind == "size one below a v2 header":
        # 60 bytes, a count of 0 read into the next batch's first byte, the CRC of the 39
        # bytes after it right: short of a v2 batch all the same
        fake = bytearray(60)
        struct.pack_into(">qii", fake, 0, 0, 48, 0)
        fake[16] = 2
        struct.pack_into(">I", fake, 17, crc32c(bytes(fake[21:])))
        data = fake + chain(PLAIN, base=1)
    elif kind == "compressed":
        data = bytearray(chain([{}, {"gzip": True, "n": 3}, {}]))
    elif kind == "control":
        data = bytearray(chain([{"attrs": TXN, "pid": 9, "epoch": 1, "base_seq": 0},
                                {"attrs": TXN | CONTROL, "pid": 9, "epoch": 1, "n": 0}, {}]))
    return bytes(data)


DAMAGE = ["none", "bad crc", "bad stored crc", "torn header", "bad magic", "legacy magic",
          "offsets out of order", "truncated batch", "garbage tail", "zero tail",
          "size below header", "size past end", "negative count", "count above records",
          "last offset overflows", "offset beyond the segment",
          "last offset at the segment's reach", "last offset just past the segment's reach",
          "size one below a v2 header", "compressed", "control"]


@needs_speedups
@pytest.mark.parametrize("kind", DAMAGE)
@pytest.mark.parametrize("kw", [
    {}, dict(interval=0), dict(interval=-1), dict(interval=1 << 70), dict(interval=-(1 << 70)),
    dict(prev_last=0), dict(prev_last=-5), dict(prev_last=1 << 70), dict(prev_last=-(1 << 70)),
    dict(epoch_limit=-1), dict(epoch_limit=1), dict(base=2), dict(base=3), dict(base=1 << 70),
    dict(base=-(1 << 70)), dict(at=1 << 40, interval=0), dict(limit=3), dict(end=200),
    dict(pos=5), dict(start=dict(valid_bytes=INT32_MAX - 150, last_index_entry=0), interval=0),
    dict(start=dict(valid_bytes=INT32_MAX, last_index_entry=0), interval=0),
    dict(start=dict(valid_bytes=INT32_MAX + 1, last_index_entry=0), interval=0),
    dict(start=dict(max_ts=5000, max_ts_offset=1 << 40, valid_bytes=5000), base=0, interval=0),
    dict(start=dict(max_ts=5000, max_ts_offset=1 << 31, valid_bytes=5000), interval=0),
    dict(start=dict(max_ts=5000, max_ts_offset=(1 << 31) - 1, valid_bytes=5000), interval=0),
    dict(start=dict(offset_overflow=[(0, 1 << 40)], valid_bytes=4097)),
    dict(start=dict(first_offset=77, last_offset=-1, records=10 ** 30, valid_end=3)),
])
def test_recover_run_on_damage(kind, kw):
    both_runs(_damaged(kind), **kw)


@needs_speedups
@pytest.mark.parametrize("specs", [
    [dict(max_ts=5)] * 4, [dict(max_ts=-1)] * 3, [dict(max_ts=9), dict(max_ts=3), dict(max_ts=9)],
    [dict(max_ts=INT64_MAX), dict(max_ts=INT64_MIN)], [dict(ple=-1), dict(ple=0), dict(ple=-4)],
    [dict(ple=2), dict(ple=1), dict(ple=3)], [dict(n=0, max_ts=7)] * 3,
    [dict(pid=0), dict(pid=-2), dict(pid=INT64_MAX)],
])
@pytest.mark.parametrize("kw", [dict(interval=0), dict(interval=-1), dict(interval=70),
                                dict(epoch_limit=-3), dict(epoch_limit=1), dict(epoch_limit=-1),
                                dict(start=dict(last_time_ts=5, max_ts=5, max_ts_offset=0))])
def test_recover_run_timestamps_epochs_producers(specs, kw):
    both_runs(chain(specs), **kw)


@needs_speedups
def test_recover_run_positions_outside_the_data():
    data = chain(PLAIN)
    for pos, end in ((-1, 10), (5, 3), (0, len(data) + 1)):
        assert both_runs(data, pos=pos, end=end)[0][0] is ValueError


@needs_speedups
def test_recover_run_crc_function_failing_and_odd():
    data = chain(PLAIN)
    third = chain(PLAIN[:3])
    third_crc_bytes = third[len(chain(PLAIN[:2])) + 21:]

    def failing(view):
        if bytes(view) == third_crc_bytes:  # the third batch's
            raise RuntimeError("no crc")
        return crc32c(view)

    outcome, state = both_runs(data, crc=failing)
    assert outcome == (RuntimeError, "no crc") and state["records"] == 3
    both_runs(data, crc=lambda view: float(crc32c(view)))  # equal as Python compares it
    both_runs(data, crc=lambda view: -1)
    both_runs(data, crc=lambda view: 1 << 80)


@needs_speedups
def test_recover_run_takes_a_whole_plain_chain():
    data = chain(PLAIN * 3)
    (out, state) = both_runs(data, interval=0)
    assert out == ("ok", (len(data), state["last_offset"], True))
    assert state["records"] == 3 * sum(s.get("n", 2) for s in PLAIN)
    assert len(state["producers"]) == 3


@st.composite
def batch_specs(draw):
    return dict(n=draw(st.integers(0, 3)),
                attrs=draw(st.sampled_from([0, 0, 0, LAT, TXN, CONTROL, GZIP, 0x80, 0x100])),
                pid=draw(st.sampled_from([-1, -1, 4, 9])),
                ple=draw(st.sampled_from([-1, 0, 0, 1, 3])),
                max_ts=draw(st.sampled_from([-1, 0, 5, 1000, 2000, INT64_MAX])))


@needs_speedups
@fuzz
@given(specs=st.lists(batch_specs(), min_size=1, max_size=7),
       flips=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), max_size=2),
       cut=st.integers(0, 40), tail=st.binary(max_size=80), gap=st.sampled_from([0, 0, 0, -3, 2]),
       base=st.sampled_from([0, 2, 1 << 31]), interval=st.integers(-1, 200),
       prev_last=st.sampled_from([None, -1, 0, 4]), epoch_limit=st.integers(-3, 3),
       pos=st.integers(0, 10), end_cut=st.integers(0, 30))
def test_recover_run_random(specs, flips, cut, tail, gap, base, interval, prev_last, epoch_limit,
                            pos, end_cut):
    data = bytearray(chain(specs, base, gap))
    for at, byte in flips:
        data[at % len(data)] = byte
    data = bytes(data[:max(0, len(data) - cut)]) + tail
    both_runs(data, pos=min(pos, len(data)), end=max(min(pos, len(data)), len(data) - end_cut),
              base=base, interval=interval, prev_last=prev_last, epoch_limit=epoch_limit,
              limit=60)


# -- scan_segment end to end: C run, Python run, no run -----------------------------------------

def _no_run(buf, pos, end, at, scan, prev_last, limit, epoch_limit, crc):
    return pos, prev_last, False  # every batch through the general path


def _segment_outcome(directory, base, chunk, run, monkeypatch, epochs=()):
    monkeypatch.setattr(recovery_scan, "recover_run", run)
    monkeypatch.setattr(recovery_scan, "RUN_CHUNK", chunk)
    monkeypatch.setattr(recovery_scan, "RUN_MAX_BATCH", 400)
    state = ProducerState()
    cache = LeaderEpochCache(list(epochs))
    try:
        scan = Segment(str(directory), base).recover_scan(None, state, 64, 1000, cache)
    except Exception as e:  # the class and the text are what is compared
        return type(e), str(e)
    b = scan.builder
    return dict(_scan_state(scan), first_bad=scan.first_bad, reason=scan.reason,
                bad_offset=scan.bad_offset, overflow=scan.overflow, aborted=scan.aborted,
                unchecked=scan.unchecked, index=b.offset_index_bytes(),
                timeindex=b.time_index_bytes(), producer_state=state.snapshot_bytes(),
                open_txns=dict(state.txns.open), end_offset=state.end_offset,
                epochs=list(cache.entries))


def same_segment_scans(tmp_path, data, monkeypatch, base=0, epochs=()):
    directory = tmp_path / "seg"
    directory.mkdir(exist_ok=True)
    for f in directory.iterdir():
        f.unlink()
    (directory / ("%020d.log" % base)).write_bytes(data)
    runs = [("none", _no_run), ("python", recovery_scan.recover_run_python)]
    if speedups is not None:
        runs.append(("c", speedups.recover_run))
    outcomes = {}
    for name, run in runs:
        for chunk in ((1 << 20, 97, 300) if name != "none" else (1 << 20,)):
            outcomes[name, chunk] = _segment_outcome(directory, base, chunk, run, monkeypatch,
                                                     epochs)
    first = outcomes["none", 1 << 20]
    for key, got in outcomes.items():
        assert got == first, (key, data[:100])
    # the producer state rebuild, reading the producers' batches where the scan found them
    if isinstance(first, dict):
        seg = Segment(str(directory), base)
        with seg.open() as log:
            for start, stop in ((0, None), (base + 2, None), (0, base + 5)):
                for cut in (None, first["valid_end"]):
                    if cut is None and first["first_bad"] is not None:
                        continue  # (recovery cuts such a segment: the rebuild reads up to it)
                    walked = _read_all(producer_batches(log, start, stop, cut))
                    known = _read_all(producer_batches(log, start, stop, cut,
                                                       first["producers"]))
                    assert known == walked
    return first


def _read_all(batches):
    out = []
    try:
        for b, marker in batches:
            out.append((b.position, b.size, b.base_offset, b.last_offset, marker))
    except Exception as e:  # the class and the text are what is compared
        out.append((type(e), str(e)))
    return out


TXN_CHAIN = [{"attrs": TXN, "pid": 9, "epoch": 1, "base_seq": 0},
             {"pid": 4, "epoch": 0, "base_seq": 0},
             {"attrs": TXN, "pid": 9, "epoch": 1, "base_seq": 2},
             {"attrs": TXN | CONTROL, "pid": 9, "epoch": 1, "n": 0},
             {}, {"gzip": True, "n": 3}, {"ple": 4}, {"pid": 4, "epoch": 0, "base_seq": 2}]


def _abort_marker(base_offset, pid=9):
    rec = record(key=b"\x00\x00\x00\x00", value=b"\x00\x00\x00\x00\x00\x05")
    return batch(base_offset, [rec], attrs=TXN | CONTROL, pid=pid, epoch=1)


@pytest.mark.parametrize("kind", DAMAGE)
def test_scan_segment_the_same_with_and_without_runs(tmp_path, monkeypatch, kind):
    same_segment_scans(tmp_path, _damaged(kind), monkeypatch)
    same_segment_scans(tmp_path, _damaged(kind), monkeypatch, epochs=[(0, 0)])


def test_scan_segment_transactions_the_same_with_and_without_runs(tmp_path, monkeypatch):
    data = chain(TXN_CHAIN[:3]) + _abort_marker(6) + chain(TXN_CHAIN[4:], base=7)
    out = same_segment_scans(tmp_path, data, monkeypatch)
    assert out["aborted"] and out["first_bad"] is None and out["producers"]
    big = chain([{"n": 3}, {"n": 40}, {"n": 2}], base=100)  # a batch larger than the chunk
    out = same_segment_scans(tmp_path, big + b"\x00" * 30, monkeypatch, base=100)
    assert out["valid_end"] == len(big)


@fuzz
@given(specs=st.lists(batch_specs(), min_size=1, max_size=8),
       flips=st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 255)), max_size=2),
       cut=st.integers(0, 30), tail=st.binary(max_size=60), gap=st.integers(-2, 1),
       markers=st.lists(st.integers(0, 8), max_size=2))
def test_scan_segment_random_the_same_with_and_without_runs(tmp_path_factory, specs, flips, cut,
                                                           tail, gap, markers):
    pieces = []
    offset = 0
    for i, spec in enumerate(specs):
        if i in markers:
            pieces.append(_abort_marker(offset))
            offset += 1
        piece = chain([spec], offset, gap)
        pieces.append(piece)
        offset += max(spec["n"], 1) + gap
    data = bytearray(b"".join(pieces))
    for at, byte in flips:
        data[at % len(data)] = byte
    data = bytes(data[:max(0, len(data) - cut)]) + tail
    with pytest.MonkeyPatch.context() as monkeypatch:
        same_segment_scans(tmp_path_factory.mktemp("scan"), data, monkeypatch)
