"""Every JSON text `dump` writes is strict JSON (RFC 8259): never NaN, Infinity or -Infinity.

A payload `1e999` is valid JSON whose value no float holds: Python's parser makes it inf, and
json.dumps would write `Infinity`. The json decoder keeps such a number as written; the literals
NaN/Infinity (not JSON) make a payload a plain string, as any non-JSON payload is. The segment is
written by kafka-python; the output is read back with a parser that refuses the non-JSON
literals and keeps numbers exact (Decimal).
"""

import json
from decimal import Decimal

import pytest

import kafkagen as kg
from dumpcheck import dump, dump_subprocess

pytestmark = pytest.mark.usefixtures("implementation")

PAYLOADS = [b"1e999", b"-1e999", b"NaN", b"Infinity", b"-Infinity", b"[1, NaN]",
            b'{"a": [1e400, 2.5, -1E+999], "b": "x"}', b"12", b'"text"', b"1.5e308",
            b"not json", b"[" * 5000 + b"]" * 5000]


def strict_loads(text):
    def refuse(name):
        raise ValueError("non-JSON literal %s in %r" % (name, text[:200]))
    return json.loads(text, parse_constant=refuse, parse_float=Decimal)


@pytest.fixture(scope="module")
def segment(tmp_path_factory):
    d = tmp_path_factory.mktemp("strict")
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(p[:100], p, kg.T0 + i, (("h", p),)) for i, p in enumerate(PAYLOADS)])
    return w.write(d)


@pytest.mark.parametrize("decoders", [["--value-decoder", "json"],
                                      ["--key-decoder", "json", "--value-decoder", "json"]])
def test_json_lines_are_strict_json(segment, decoders):
    res = dump("--format", "json", *decoders, segment)
    assert res.code == 0, res
    objs = [strict_loads(line) for line in res.out.splitlines()]
    recs = [o for o in objs if o["type"] == "record"]
    assert len(recs) == len(PAYLOADS)
    by_payload = dict(zip(PAYLOADS, recs))
    # valid JSON: embedded with its value exact, however large
    assert by_payload[b"1e999"]["valueDecoded"] == Decimal("1e999")
    assert by_payload[b"-1e999"]["headersDecoded"][0][1] == Decimal("-1e999")
    assert by_payload[b'{"a": [1e400, 2.5, -1E+999], "b": "x"}']["valueDecoded"] == {
        "a": [Decimal("1e400"), Decimal("2.5"), Decimal("-1E+999")], "b": "x"}
    assert by_payload[b"12"]["valueDecoded"] == 12
    assert by_payload[b'"text"']["valueDecoded"] == "text"
    assert by_payload[b"1.5e308"]["valueDecoded"] == Decimal("1.5e308")
    # not JSON: the text as a string
    for p in (b"NaN", b"Infinity", b"-Infinity", b"[1, NaN]", b"not json"):
        assert by_payload[p]["valueDecoded"] == p.decode()
    deep = by_payload[PAYLOADS[-1]]["valueDecoded"]
    assert deep == PAYLOADS[-1].decode() or isinstance(deep, list)


def test_text_formats_print_no_infinity(segment):
    """--value-decoder json in the line formats: a number is printed as written, never as
    Infinity; the payloads that are not JSON are printed as their own text."""
    for fmt in ("kafka", "messages"):
        res = dump("--format", fmt, "--value-decoder", "json", segment)
        assert res.code == 0, res
        payloads = [line.split(" payload: ", 1)[1] for line in res.out.splitlines()
                    if " payload: " in line]
        assert payloads[:7] == ["1e999", "-1e999", "NaN", "Infinity", "-Infinity", "[1, NaN]",
                                '{"a":[1e400,2.5,-1E+999],"b":"x"}']


def test_json_output_of_a_real_process(segment):
    res = dump_subprocess("--format", "json", "--value-decoder", "json", segment)
    assert res.code == 0, res
    for line in res.out.splitlines():
        strict_loads(line)
    assert '"valueDecoded":1e999' in res.out
