"""`--key-decoder json` / `--value-decoder json` show a payload that is not JSON as its text and
say so: one note line on stderr at the end of the run, keys, values and header values counted
apart with their offsets; the exit status stays 0.

The segment is written by kafka-python (``kafkagen``); which payloads are JSON is said by the
test itself (the ``JSON`` flags), not worked out with the decoder's parser.
"""

import json

import pytest

import kafkagen as kg
from dumpcheck import dump, dump_subprocess

pytestmark = pytest.mark.usefixtures("implementation")

# (key, key is JSON, value, value is JSON, header value or None, header value is JSON)
ROWS = [
    (b'{"id": 1}', True, b'{"a": [1, 2]}', True, b"7", True),
    (b"plain", False, b"not json {", False, b"x y", False),
    (b"2", True, b"NaN", False, None, None),               # NaN: no JSON literal
    (None, None, b"[1]", True, None, None),
    (b'"k"', True, b"\xff\xfe", False, b"true", True),     # not UTF-8: not JSON either
    (b"k2", False, None, None, b"{", False),
    (b"[]", True, b'{"b": null}', True, None, None),
]
FIRST = 40  # the segment's base offset: offsets in the note are the records' own


def _recs(rows):
    return [kg.Rec(k, v, kg.T0 + i, (("h", h),) if h is not None else ())
            for i, (k, _, v, _, h, _) in enumerate(rows)]


@pytest.fixture(scope="module")
def segment(tmp_path_factory):
    d = tmp_path_factory.mktemp("jsonnote")
    w = kg.SegmentWriter(FIRST)
    w.add_v2(_recs(ROWS[:4]))
    w.add_v2(_recs(ROWS[4:]), codec="gzip", expect_compressed=False)
    return w.write(d)


def expected_misses(which):
    """{"key"|"value"|"header value": offsets not JSON}, from the flags of ROWS."""
    col = {"key": 1, "value": 3, "header value": 5}[which]
    return [FIRST + i for i, row in enumerate(ROWS) if row[col] is False]


def phrase(which):
    offs = expected_misses(which)
    rng = "offset %d" % offs[0] if len(offs) == 1 else "offsets %d..%d" % (offs[0], offs[-1])
    return "%d %s%s (%s)" % (len(offs), which, "" if len(offs) == 1 else "s", rng)


@pytest.mark.parametrize("fmt", ["kafka", "messages", "json"])
def test_both_decoders_one_note(segment, fmt):
    res = dump("--format", fmt, "--key-decoder", "json", "--value-decoder", "json", segment)
    assert res.code == 0, res
    # header values are decoded (under the value decoder) only in the JSON Lines
    parts = [phrase("key"), phrase("value")] + ([phrase("header value")] if fmt == "json" else [])
    listed = ", ".join(parts[:-1]) + " and " + parts[-1]
    assert res.err_lines == ["kafkalog: note: %s were not valid JSON; shown as text" % listed], res
    # the output itself is as it was: a payload that is not JSON shown as its text
    if fmt == "json":
        recs = [json.loads(line) for line in res.out.splitlines() if '"type":"record"' in line]
        assert [r["offset"] for r in recs] == list(range(FIRST, FIRST + len(ROWS)))
        for r, (k, kj, v, vj, h, hj) in zip(recs, ROWS):
            if kj is False:
                assert r["keyDecoded"] == k.decode()
            if vj is False:
                assert r["valueDecoded"] == v.decode("utf-8", "replace")
            if hj is False:
                assert r["headersDecoded"] == [["h", h.decode()]]
            if vj:
                assert r["valueDecoded"] == json.loads(v)
    else:
        assert " payload: not json {" in res.out and " key: plain" in res.out


def test_value_decoder_only_counts_values(segment):
    res = dump("--value-decoder", "json", segment)
    assert res.code == 0, res
    assert res.err_lines == ["kafkalog: note: %s were not valid JSON; shown as text"
                             % phrase("value")], res


def test_one_miss_is_singular(tmp_path):
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(None, b"1", kg.T0), kg.Rec(None, b"oops", kg.T0), kg.Rec(None, b"{}", kg.T0)])
    res = dump("--value-decoder", "json", w.write(str(tmp_path)))
    assert res.code == 0, res
    assert res.err_lines == ["kafkalog: note: 1 value (offset 1) was not valid JSON; shown as "
                             "text"], res


def test_every_payload_json_no_note(tmp_path):
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(b"1", b'{"a": 1}', kg.T0, (("h", b"[]"),)), kg.Rec(None, b"null", kg.T0)])
    path = w.write(str(tmp_path))
    for fmt in ("kafka", "messages", "json"):
        res = dump("--format", fmt, "--key-decoder", "json", "--value-decoder", "json", path)
        assert res.code == 0 and res.err == "", res


def test_other_decoders_say_nothing(segment):
    res = dump("--key-decoder", "string", "--value-decoder", "hex", segment)
    assert res.code == 0 and res.err == "", res


def test_a_real_process_on_a_pipe(segment):
    res = dump_subprocess("--format", "json", "--value-decoder", "json", segment)
    assert res.code == 0, res
    assert res.err_lines == ["kafkalog: note: %s and %s were not valid JSON; shown as text"
                             % (phrase("value"), phrase("header value"))], res
    assert all(json.loads(line) for line in res.out.splitlines())
