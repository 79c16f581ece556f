"""dump --format json writes the record objects of data records shown with the string decoders as
text directly (render_json.JsonWriter._plain_records), not through the JSON encoder: the bytes must be
those the encoder writes for the objects the README's vocabulary gives (the same keys in the same
order, strings escaped as json escapes them, bytes that are not UTF-8 as base64), for v2 records
and legacy messages, valid or not, with any key, value and header bytes."""

import io
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog_cli import jsonvocab
from kafkalog_cli.cli import render, render_json
from kafkalog_cli.format import records, validity


def _encoded(b, recs, topic, partition, path):
    """The record objects as JsonWriter built them before _plain_records, through the encoder."""
    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
    lines = []
    for i, off in enumerate(recs.offsets):
        k, v = recs.keys[i], recs.values[i]
        valid, crc = validity.record_validity(b, recs, i)
        seq = -1 if b.magic < 2 else records.record_sequence(b.base_sequence, off - b.base_offset)
        obj = {"type": "record", "topic": topic, "partition": partition, "file": path,
               "offset": off, "position": b.position, "timestamp": recs.timestamps[i],
               "timestampType": b.timestamp_type_name, "keySize": -1 if k is None else len(k),
               "valueSize": -1 if v is None else len(v), "key": jsonvocab.bytes_json(k),
               "value": jsonvocab.bytes_json(v)}
        hdrs = recs.headers[i] if recs.headers is not None else ()
        obj["headers"] = jsonvocab.headers_json(hdrs)
        obj["sequence"] = seq
        obj["isValid"] = valid
        obj["crc"] = crc
        lines.append(encode(obj))
    return lines


def _written(b, recs, path):
    w = render_json.JsonWriter(io.BytesIO(), io.StringIO(), render.DumpOptions(deep=True))
    w.begin_file(path, 0)
    w._lines = []
    w.records(b, recs)
    return w, w._lines


_bytes = st.one_of(st.none(), st.binary(max_size=8),
                   st.text(max_size=6).map(lambda t: t.encode("utf-8", "surrogatepass")),
                   st.sampled_from([b'"\\/\x00\x1f\x7f\n\t\r\b\f', "\u2028\u00e9\U0001F600".encode(),
                                    b"\xed\xa0\x80", b"\xc3"]))
_header_keys = st.one_of(st.text(max_size=4), st.sampled_from(['"', "\\", "\x01", "\ufffd"]))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(rows=st.lists(st.tuples(st.integers(-(1 << 63), (1 << 63) - 1),
                               st.integers(-(1 << 63), (1 << 63) - 1), _bytes, _bytes,
                               st.lists(st.tuples(_header_keys, _bytes), max_size=3),
                               st.booleans(), st.integers(0, (1 << 32) - 1)),
                     min_size=1, max_size=4),
       magic=st.sampled_from([0, 1, 2]), valid=st.booleans(),
       base_seq=st.sampled_from([-1, 0, 5, (1 << 31) - 1]), ts_type=st.sampled_from([0, 1, -1]),
       path=st.sampled_from(["orders-3/00000000000000000000.log", 'we"ird\\dir/x.log',
                             "t\u00e9-0/00000000000000000007.log"]))
def test_plain_record_objects_are_the_encoders_bytes(rows, magic, valid, base_seq, ts_type, path):
    b = records.Batch()
    b.position, b.magic, b.base_offset, b.base_sequence = 12345, magic, rows[0][0], base_seq
    b.timestamp_type, b.crc, b.computed_crc, b.is_control = ts_type, 77, 77 if valid else 78, False
    recs = records.Records()
    if magic >= 2:
        recs.headers = []
    else:
        recs.crcs, recs.valids = [], []
    for off, ts, k, v, h, ok, crc in rows:
        recs.offsets.append(off)
        recs.timestamps.append(ts)
        recs.keys.append(k)
        recs.values.append(v)
        if magic >= 2:
            recs.headers.append(tuple((hk, hv) for hk, hv in h))
        else:
            recs.valids.append(ok)
            recs.crcs.append(crc)
    w, lines = _written(b, recs, path)
    assert lines == _encoded(b, recs, w._topic, w._partition, path)
    assert w._counts["records"] == len(rows)
