"""`append --input-format lines` read from a stream goes through RecordAppender.append_lines
(records encoded a read at a time, format/encode.encode_lines or its C mirror, batches written a
run at a time): what it writes must be what the Record-per-line path writes for the same lines,
read back by kafka-python: the same batches (base offsets, record counts), the same records, the
same rolls, and indexes that verify-index accepts. Reads are cut at random places, so lines are
split across reads in every way."""

import io
import random

import pytest

import appendcheck as ac
from kafkalog_cli.log.segment_writer import RollPolicy
from kafkalog_cli.log.append_input import InputLines
from kafkalog_cli.log.append_types import AppendSettings
from kafkalog_cli.log.produce import append_records


class Pieces(io.RawIOBase):
    """A binary stream whose reads return at most a few bytes, cut at random."""

    def __init__(self, data, seed):
        self.data, self.pos, self.rng = data, 0, random.Random(seed)

    def read1(self, n=-1):
        k = min(n, self.rng.choice([1, 2, 7, 50, 4000]))
        out = self.data[self.pos:self.pos + k]
        self.pos += len(out)
        return out


def _values(seed, n):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = rng.random()
        if kind < 0.1:
            out.append(b"")
        elif kind < 0.2:
            out.append(b"c\rr")  # a lone CR stays (only "\r\n" is a newline with it)
        elif kind < 0.25:
            out.append(b"B" * rng.randint(5000, 20000))  # beyond --batch-bytes: alone
        else:
            out.append(("v%d-" % i).encode() + bytes(rng.randrange(256) for _ in range(
                rng.randint(0, 300))).replace(b"\n", b"."))
    return out


def _input(values, crlf_seed, final_newline):
    rng = random.Random(crlf_seed)
    data = b"".join(v + (b"\r\n" if rng.random() < 0.3 else b"\n") for v in values)
    if not final_newline:
        data = data[:-2] if data.endswith(b"\r\n") else data[:-1]
    return data


def _layout(directory):
    segs, recs = ac.check_partition(directory)
    batches = [(s.base, kb.batch.base_offset, len(kb.records), kb.batch.timestamp_type)
               for s in segs for kb in s.kbs]
    return batches, [(r.offset, r.key, r.value, r.headers) for r in recs]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("codec", ["none", "lz4"])
@pytest.mark.parametrize("settings", [
    dict(),
    dict(batch_bytes=4096, key=b"the-key"),
    dict(batch_records=3, timestamp_type="LogAppendTime", segment_bytes=9000),
    dict(batch_bytes=1, flush_messages=7, key=b""),
])
def test_stream_and_line_by_line_write_the_same(tmp_path, seed, codec, settings):
    settings = dict(settings)
    key = settings.pop("key", None)
    roll = RollPolicy(segment_bytes=settings.pop("segment_bytes", 1024 ** 3), index_interval=100)
    s = AppendSettings(codec=codec, roll=roll, **settings)
    values = _values(seed, 150) + [b"last"]  # (an empty last line without a newline is none)
    data = _input(values, seed, final_newline=seed != 2)
    fast = InputLines(Pieces(data, seed), "lines", key)
    assert fast.line_chunks() is not None  # the stream goes the fast way
    slow = InputLines(io.BytesIO(data).readlines(), "lines", key)
    assert slow.line_chunks() is None  # a list of lines goes record by record
    flushed = {}
    for name, items in (("fast", fast), ("slow", slow)):
        d = str(tmp_path / ("%s-0" % name))
        flushed[name] = []
        result = append_records(d, items, s, flushed[name].append)
        assert result.records == len(values) and result.stopped is None
    a, b = _layout(str(tmp_path / "fast-0")), _layout(str(tmp_path / "slow-0"))
    assert a == b
    assert [r[2] for r in a[1]] == values
    assert [r[1] for r in a[1]] == [key] * len(values)
    assert flushed["fast"] == flushed["slow"]


# -- jsonl: orjson for plain records, json for everything else ----------------------------------

JSONL_LINES = [
    b'{"key": "k", "value": "v"}',
    b'{"value": "only a value", "timestamp": 1700000000000}',
    b'{"key": null, "value": null}',
    b'{}',
    b'{"value": "\\u00e9\\u4e2d \\ud83d\\ude00 \xc3\xa9"}',
    b'{"value": "x", "value": "dup"}',
    b'   {"value": "spaces"}   ',
    b'',
    b'  \t ',
    b'{"value": 12345678901234567890123}',      # an integer beyond 64 bits: json text
    b'{"value": 1.5e300, "key": -0.0}',
    b'{"value": {"a": [1, 2.50, "\\u00e9"]}}',
    b'{"value": true}',
    b'{"value": "x", "timestamp": 9223372036854775807}',
    b'{"value": "x", "timestamp": -9223372036854775808}',
    b'{"value": "x", "headers": {"h": "v", "n": null}}',
    b'{"value": {"base64": "AAEC"}}',
    b'{"key": "p", "value": "x", "producerId": 7, "transactional": true}',
    b'{"key": "p", "value": "y", "producerId": 7}',
    b'{"control": "commit", "producerId": 7, "producerEpoch": 0}',
    b'{"value": "\\u0000\\u001f"}',
    b'\xef\xbb\xbf{"value": "after a BOM"}',
]

BAD_JSONL_LINES = [
    b'{"value": "x", "timestamp": 9223372036854775808}',
    b'{"value": "x", "timestamp": 1.5}',
    b'{"value": NaN}',
    b'{"value": "\\ud800"}',                  # a lone surrogate: json reads it, UTF-8 cannot hold it
    b'{"value": ',
    b'[1, 2]',
    b'{"val": "typo"}',
    b'{"value": "x", "timestamp": true}',
    b'\xff{"value": "x"}',
]


def _jsonl_run(tmp_path, name, items, settings):
    d = str(tmp_path / ("%s-0" % name))
    try:
        result = append_records(d, items, settings)
    except Exception as e:  # the same failure either way
        return ("raised", type(e), str(e))
    stopped = result.stopped
    outcome = (result.records, result.first_offset, result.log_end_offset, result.dropped,
               None if stopped is None else (stopped.line, str(stopped)))
    return outcome, (_layout(d) if result.records else None)


@pytest.mark.parametrize("bad", [None] + BAD_JSONL_LINES)
@pytest.mark.parametrize("seed", [1, 2])
def test_jsonl_stream_and_line_by_line_read_the_same(tmp_path, bad, seed):
    rng = random.Random(seed)
    lines = [rng.choice(JSONL_LINES) for _ in range(60)]
    if bad is not None:
        lines.insert(rng.randrange(20, 50), bad)
    data = b"".join(line + rng.choice([b"\n", b"\r\n"]) for line in lines)
    s = AppendSettings(batch_records=4, roll=RollPolicy(index_interval=100))
    fast = _jsonl_run(tmp_path, "fast", InputLines(Pieces(data, seed), "jsonl"), s)
    slow = _jsonl_run(tmp_path, "slow", InputLines(io.BytesIO(data).readlines(), "jsonl"), s)
    assert fast == slow
    if fast[0] != "raised" and bad is not None:
        assert fast[0][4] is not None  # the bad line stopped it


@pytest.mark.parametrize("line", JSONL_LINES + BAD_JSONL_LINES)
def test_plain_records_read_by_orjson_as_json_reads_them(line):
    """A line orjson takes as a plain record makes the Record json makes of it."""
    from kafkalog_cli.log import append_input
    plain = append_input._plain_record(line, now=123)
    if plain is None:
        return
    general = append_input._parse_object(line, False)
    assert (plain.key, plain.value, plain.headers) == (general.key, general.value,
                                                       general.headers)
    if b"timestamp" in line:
        assert plain.timestamp == general.timestamp


@pytest.mark.parametrize("line", [b'{"value": "\\ud800"}', b'{"key": "a\\udfff"}',
                                  b'{"value": {"x": "\\ud800"}}',
                                  b'{"value": "x", "headers": {"\\ud800": "v"}}',
                                  b'{"value": "x", "headers": {"h": "\\udc00"}}'])
def test_a_lone_surrogate_is_an_input_error(tmp_path, line):
    """json reads "\\ud800" as a lone surrogate, which UTF-8 cannot hold: the line is refused
    with its line number (it was a traceback)."""
    data = b'{"value": "fine"}\n' + line + b"\n"
    result = append_records(str(tmp_path / "t-0"), InputLines(io.BytesIO(data), "jsonl"),
                            AppendSettings(batch_records=1))
    assert result.records == 1 and result.stopped is not None
    assert result.stopped.line == 2 and "lone surrogate" in str(result.stopped)


def test_a_producers_check_names_the_line_of_its_record(tmp_path):
    """Plain records written as the settings' producer: a record its checks refuse (an epoch
    below the producer's current one) is named by its own line, not the last of its run."""
    lines = [b'{"value": "a"}', b'{"value": "b"}',
             b'{"value": "c", "producerId": 5, "producerEpoch": 3}',
             b'{"value": "d"}', b'', b'{"value": "e"}', b'{"value": "f"}']
    data = b"\n".join(lines) + b"\n"
    s = AppendSettings(producer_id=5, producer_epoch=0, batch_records=1)
    fast = _jsonl_run(tmp_path, "fast", InputLines(Pieces(data, 1), "jsonl"), s)
    slow = _jsonl_run(tmp_path, "slow", InputLines(io.BytesIO(data).readlines(), "jsonl"), s)
    assert fast == slow
    assert fast[0][0] == 3 and fast[0][4][0] == 4, fast
