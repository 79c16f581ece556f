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
from kafkalog_cli.log.append import RollPolicy
from kafkalog_cli.log.append_input import InputLines
from kafkalog_cli.log.produce import AppendSettings, append_records


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
