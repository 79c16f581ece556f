"""`append --input-format jsonl` read from a stream goes through RecordAppender.append_jsonl (the
plain records of a read encoded into the batch being gathered at once, log/append_input.
encode_jsonl or its C mirror, every other line read into its item): it must write what the
item-by-item reading of the same stream writes (InputLines' iteration, a RecordRun of the plain
records of a read at a time, each added by RecordAppender.add), to the byte: every file of the
partition, the same outcome (records, offsets, the line and text of the error that stopped the
input, the records dropped with it, or the same exception) and the same flush reports.

The lines mix plain records (with and without timestamps, some at the 64-bit limits, some too
large for --max-message-bytes), blank lines, records that are not plain (headers, JSON values,
base64), producers' records, transaction markers and bad lines; the settings include batches
refused as too large when written, LogAppendTime, lz4, flushes and rolls. Reads are cut at
random places, and the clock moves at every reading of it (both ways read it the same number of
times, in the same order)."""

import io
import random

import pytest

import appendcheck as ac
from kafkalog_cli.log import append as append_module
from kafkalog_cli.log.append_input import InputLines
from kafkalog_cli.log.append_types import AppendSettings
from kafkalog_cli.log.produce import append_records
from kafkalog_cli.log.segment_writer import RollPolicy

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


class Pieces(io.RawIOBase):
    """A binary stream whose reads return at most a few bytes, cut at random."""

    def __init__(self, data, seed):
        self.data, self.pos, self.rng = data, 0, random.Random(seed)

    def read1(self, n=-1):
        k = min(n, self.rng.choice([1, 3, 50, 700, 4000, 1 << 20]))
        out = self.data[self.pos:self.pos + k]
        self.pos += len(out)
        return out


class ItemByItem(InputLines):
    """InputLines whose stream is read by iteration (RecordRuns), as before append_jsonl."""

    def jsonl_stream(self):
        return False


class Clock:
    """time for log/append.now_ms: one ms later at every reading."""

    def __init__(self):
        self.now = 1700000000.0

    def time(self):
        self.now += 0.001
        return self.now


def _line(rng):
    """A line that stops nothing (a producer's record or marker may still be refused)."""
    roll = rng.random()
    if roll < 0.6:
        obj = '{"key": "k%d", "value": "%s"}' % (rng.randrange(100), "v" * rng.randrange(300))
        if rng.random() < 0.3:
            obj = obj[:-1] + ', "timestamp": %d}' % rng.choice(
                [1700000000000 + rng.randrange(-5000, 5000), 0, -1, INT64_MIN, INT64_MAX])
        if rng.random() < 0.1:
            obj = '{"value": "\\u00e9\\ud83d\\ude00 %s", "key": null}' % ("x" * rng.randrange(40))
        return obj.encode()
    if roll < 0.7:
        return rng.choice([b"", b"   ", b"\t"])
    if roll < 0.85:
        return rng.choice([b'{"value": "h", "headers": {"a": "1", "b": null}}',
                           b'{"value": {"n": [1, 2.5]}, "key": 17}',
                           b'{"value": {"base64": "AAEC"}, "timestamp": 5}',
                           b'{"value": "x", "value": 3}', b'{"k\\u0065y": "escaped"}'])
    if roll < 0.95:
        pid = rng.choice([3, 4])  # 3 transactional, 4 idempotent
        fields = '"value": "p", "producerId": %d' % pid
        if pid == 3:
            fields += ', "transactional": true'
        if rng.random() < 0.004:
            fields += ', "sequence": %d' % rng.randrange(3)
        return ("{%s}" % fields).encode()
    return ('{"control": "%s", "producerId": 3}' % rng.choice(["commit", "abort"])).encode()


def _bad_line(rng, big):
    """A line that stops the input: no JSON, no record, or a record too large."""
    return rng.choice([b'{"value": ', b'{"val": "typo"}', b'{"value": "\\ud800"}', b"[1]",
                       b'{"value": "x", "timestamp": 1.5}', b'{"value": "' + b"B" * big + b'"}',
                       b'{"value": "' + b"B" * big + b'", "headers": {}}'])


SETTINGS = [
    dict(),
    dict(batch_records=3),
    dict(batch_bytes=700, codec="lz4"),
    dict(batch_bytes=3000, max_message_bytes=2000),  # batches refused when written
    dict(batch_bytes=1, timestamp_type="LogAppendTime", flush_messages=5),
    dict(batch_records=7, segment_bytes=3000, flush_messages=13),
    dict(max_message_bytes=400, batch_bytes=5000, codec="lz4"),
]


def _run(tmp_path, name, items, settings):
    d = str(tmp_path / ("%s-0" % name))
    flushed = []
    try:
        result = append_records(d, items, settings, flushed.append)
    except Exception as e:  # the same failure either way
        outcome = ("raised", type(e), str(e).replace(d, "D"))
    else:
        stopped = result.stopped
        outcome = (result.records, result.first_offset, result.log_end_offset, result.dropped,
                   None if stopped is None else (stopped.line, str(stopped)))
    return outcome, flushed, ac.tree_hash(d)


@pytest.mark.parametrize("seed", range(15))
@pytest.mark.parametrize("settings", SETTINGS)
def test_append_jsonl_writes_what_item_by_item_writes(tmp_path, monkeypatch, seed, settings):
    rng = random.Random("%d %r" % (seed, sorted(settings.items())))
    settings = dict(settings)
    roll = RollPolicy(segment_bytes=settings.pop("segment_bytes", 1024 ** 3), index_interval=300)
    s = AppendSettings(roll=roll, **settings)
    lines = [_line(rng) for _ in range(rng.choice([30, 150, 400]))]
    if seed % 3:
        big = s.max_message_bytes - 50 + rng.randrange(20)  # just over the limit, or under
        lines.insert(rng.randrange(len(lines)), _bad_line(rng, big))
    data = b"".join(line + rng.choice([b"\n", b"\n", b"\r\n"]) for line in lines)
    if rng.random() < 0.3:
        data = data.rstrip(b"\r\n")
    outcomes = []
    for name, cls in (("fast", InputLines), ("items", ItemByItem)):
        monkeypatch.setattr(append_module, "time", Clock())
        items = cls(Pieces(data, seed), "jsonl", max_message_bytes=s.max_message_bytes)
        assert items.jsonl_stream() is (cls is InputLines)
        outcomes.append(_run(tmp_path, name, items, s))
    assert outcomes[0] == outcomes[1]


PLAIN = b'{"value": "%s"}' % (b"x" * 300)  # 321 bytes (Record.size_estimate)
FAR = b'{"value": "%s", "timestamp": %d}' % (b"x" * 300, INT64_MIN)  # 64 bits past the others
HEADERS = b'{"value": "h", "headers": {}}'


@pytest.mark.parametrize("lines, batch_bytes, line, dropped", [
    # 4 records fit, the 5th is for the next batch: the batch is refused as that one comes
    ([PLAIN] * 6 + [b"", HEADERS] + [PLAIN] * 3, 1500, 7, 4),  # the run ends before HEADERS
    ([PLAIN] * 9 + [b""], 1500, 10, 4),                         # ... at the last line read
    # the batch is full with FAR (encoded by the Python) and refused then: the same run
    ([PLAIN] * 4 + [FAR] + [PLAIN] * 2 + [HEADERS], 5 * 321, 7, 5),
])
def test_the_error_of_a_batch_refused_names_the_last_line_of_its_run(tmp_path, lines,
                                                                     batch_bytes, line, dropped):
    """A batch refused as it is written (larger than --max-message-bytes) while plain records
    are taken stops the input at the last line of their run, where the item-by-item reading
    stood: the line before the next line that is no plain record, or the last line read."""
    data = b"\n".join(lines) + b"\n"
    s = AppendSettings(batch_bytes=batch_bytes, max_message_bytes=1000)
    for name, cls in (("fast", InputLines), ("items", ItemByItem)):
        result = append_records(str(tmp_path / ("%s-0" % name)),
                                cls(io.BytesIO(data), "jsonl", max_message_bytes=1000), s)
        assert result.records == 0 and result.stopped.line == line, (name, result)
        assert result.dropped == dropped and "a batch of" in str(result.stopped)
