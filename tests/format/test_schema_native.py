"""The C walker of the layouts (format/_schemawalk.c) against the Python reader it mirrors
(format/schema.py's compiled text readers), input for input.

For every message and every version of our layouts: values drawn by the tests' independent
encoder (tests/schemaenc.py, from Kafka's own definitions), tagged fields absent, present,
mixed and written at their defaults, nulls, empty and long strings, control and non-ASCII
characters, malformed UTF-8: the C gives the very text and end position Python gives. Then
truncated, mutated and random bytes: where Python raises, the C says "not handled" (None),
and where Python reads a value, the C gives the same text; it never crashes (.ci/sanitize runs
this file against a build with AddressSanitizer and UndefinedBehaviorSanitizer). Last, the
dump: `kafkalog dump --cluster-metadata-decoder` prints the same bytes with and without
KAFKALOG_PURE_PYTHON=1, on a segment holding every metadata record type and version (with
records that do not decode) and on the real KRaft segment of tests/data.

The C module is kafkalog_cli's own, or, when KAFKALOG_C_MODULE_DIR names a directory, the
``_schemawalk*.so`` built there. Without it the tests comparing it are skipped with a message.
"""

import glob
import os
import random
import shutil
import struct
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import schemaenc
from cmodules import MODULE_DIR, load
from dumpcheck import REPO
from kafkagen import Rec, v2_batch, write_segment
from kafkalog_cli.cli import parsers, render, render_kafka
from kafkalog_cli.format import jackson, layouts, metadata_record, records, schema

REAL_SEGMENT = os.path.join(REPO, "tests", "data", "__cluster_metadata-0", "00000000000000000000.log")
EXAMPLES = int(os.environ.get("KAFKALOG_DIFF_EXAMPLES", "300"))
SPECS = schemaenc.all_specs()


def _earlier_specs():
    """The older releases' definitions vendored beside the others (kafka-<release>/<folder>/),
    under our name for their layouts: <Name>_<release with underscores>."""
    out = {}
    for path in glob.glob(os.path.join(schemaenc.DATA, "kafka-*", "*", "*.json")):
        release = os.path.basename(os.path.dirname(os.path.dirname(path)))[len("kafka-"):]
        spec = schemaenc.load(path)
        out["%s_%s" % (spec["name"], release.replace(".", "_"))] = spec
    return out


SPECS.update((name, spec) for name, spec in _earlier_specs().items() if name not in SPECS)


walker = load("_schemawalk", "kafkalog_cli.format")
kafkatext = load("_kafkatext", "kafkalog_cli.cli")
pytestmark = pytest.mark.skipif(
    walker is None, reason="_schemawalk is not built (no compiler at install time, or none in "
                           "KAFKALOG_C_MODULE_DIR): nothing to compare")
fuzz = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=list(HealthCheck))

LAYOUTS = [(m, v) for m in layouts.messages()
           for v in range(layouts.valid_versions(m)[0], layouts.valid_versions(m)[1] + 1)]

# strings that test the escaping and the UTF-8 handling
STRINGS = ["", "x" * 3000, "\x00\x01\x07\x1f\x7f\n\r\t\b\f\"\\/<>&'", "é€𝄞\u2028\ufffd\U0010ffff",
           "ascii only, with spaces"]
# bytes a string may hold that are not well-formed UTF-8, each 3 bytes long (they replace the
# 3-byte encoding of U+E000 in an encoded message): a surrogate, an overlong form, a code point
# past U+10FFFF, a truncated sequence, stray bytes, a surrogate's first two bytes (which Java
# replaces as one character)
BAD_UTF8 = [b"\xed\xa0\x80", b"\xe0\x80\xaf", b"\xf4\x90\x80", b"\xe2\x82A", b"\xff\xfe\x80",
            b"\xc0\xaf\x80", b"\x80\x80\x80", b"\xf0\x9f\x98", b"\xed\xb0A", b"A\xed\xbf"]
MARK = "\ue000"


def python_text(message, version, data, pos=0):
    """The Python reader's (text, end), or None when it raises."""
    try:
        return schema.compiled_text(message, version)(data, pos)
    except (schema.CorruptRecordError, IndexError, struct.error):
        return None


def c_text(message, version, data, pos=0):
    program = schema._program(message, version)
    assert program is not None, "%s v%d has no program" % (message, version)
    got = walker.walk(program, data, pos)
    return None if got is None else (got[0].decode("utf-8"), got[1])


def same(message, version, data, where=""):
    py = python_text(message, version, data)
    c = c_text(message, version, data)
    assert c == py, "%s v%d %s: C %r, Python %r (data %s)" % (message, version, where, c, py,
                                                               bytes(data).hex())
    return py


def _map_strings(value, fn):
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_strings(v, fn) for v in value]
    return value


def encodings(message, version, rounds=6):
    """Encoded messages for the layout: (description, bytes)."""
    spec = SPECS.get(message)
    if spec is None:
        return []
    out = []
    for seed in range(rounds):
        for tags in ("absent", "present", "mixed"):
            values = schemaenc.random_values(spec, version, random.Random(seed), tags)
            for write_default_tags in (False, True):
                out.append(("seed %d tags %s defaults written %s" % (seed, tags,
                                                                      write_default_tags),
                            schemaenc.encode(spec, version, values, write_default_tags)))
            for text in STRINGS:
                varied = _map_strings(values, lambda s, t=text: t)
                out.append(("strings %r" % text[:20],
                            schemaenc.encode(spec, version, varied, tags == "mixed")))
    return out


@pytest.mark.parametrize("message,version", LAYOUTS)
def test_every_layout_c_text_is_python_text(message, version):
    cases = encodings(message, version)
    if not cases:
        # a layout of an older release with no vendored definition (ShareSnapshotValue_4_0_2...):
        # only the bytes tests below reach it
        pytest.skip("no vendored Kafka definition of %s to encode with" % message)
    decoded = 0
    for where, data in cases:
        if same(message, version, data, where) is not None:
            decoded += 1
    assert decoded == len(cases), "the encoder's messages must all decode"


@pytest.mark.parametrize("message,version", LAYOUTS)
def test_malformed_utf8_replaced_as_python_does(message, version):
    spec = SPECS.get(message)
    if spec is None:
        pytest.skip("no vendored Kafka definition of %s to encode with" % message)
    values = schemaenc.random_values(spec, version, random.Random(3), "present")
    marked = _map_strings(values, lambda s: "a" + MARK + "b")
    data = schemaenc.encode(spec, version, marked)
    hole = MARK.encode("utf-8")
    if hole not in data:
        pytest.skip("%s v%d holds no string" % (message, version))
    for bad in BAD_UTF8:
        same(message, version, data.replace(hole, bad), "bytes %r" % bad)


@pytest.mark.parametrize("message,version", LAYOUTS)
def test_truncated_and_mutated_bytes(message, version):
    rng = random.Random(hash((message, version)) & 0xFFFF)
    cases = [data for _, data in encodings(message, version, rounds=1)]
    if not cases:
        cases = [bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 60))) for _ in range(20)]
    for data in cases[:6]:
        cuts = range(len(data)) if len(data) <= 300 else rng.sample(range(len(data)), 100)
        for cut in cuts:
            same(message, version, data[:cut], "cut at %d" % cut)
        for _ in range(40):
            mutated = bytearray(data)
            for _ in range(rng.randint(1, 3)):
                if mutated:
                    mutated[rng.randrange(len(mutated))] = rng.choice(
                        [0, 1, 0x7F, 0x80, 0xFF, rng.getrandbits(8)])
            same(message, version, bytes(mutated), "mutated")
        same(message, version, data + b"\x00\x01", "garbage after")
        same(message, version, b"\x00" * 3 + data, "garbage before")


@fuzz
@given(st.sampled_from(LAYOUTS), st.binary(max_size=200))
def test_random_bytes(layout, data):
    same(layout[0], layout[1], data, "random")


@pytest.mark.parametrize("tags,decodes", [
    (b"\x01\x00\x01\x05", True),                    # leaderRecoveryState 5
    (b"\x01\x00\x01\x00", True),                    # at its default: left out
    (b"\x01\x00\x02\x01\x00", False),              # a byte left over in the field
    (b"\x01\x00\x00", False),                        # a field shorter than its type
    (b"\x01\x09\x03abc", True),                      # an unknown tag: skipped
    (b"\x02\x00\x01\x05\x00\x01\x00", True),        # twice: the default does not undo 5
    (b"\x02\x00\x01\x00\x00\x01\x05", True),
    (b"\x01\x01\x01\x00", True),                    # eligibleLeaderReplicas null (default)
    (b"\x01\x01\x05\x02\x00\x00\x00\x07", True),    # [7]
    (b"\x02\x01\x01\x01\x00\x01\x03", True),        # [] and 3, in declaration order
    (b"\x01\x01\x05\x03\x00\x00\x00\x07", False),   # two items, bytes for one
    (b"\x8f\xff\xff\xff\x0f", False),                # a count of tags with no bytes
    (b"\x01\x00", False),                            # cut in the tag section
    (b"\x01\x80\x80\x80\x80\x80", False),            # a varint longer than 5 bytes
])
def test_tagged_fields_by_hand(tags, decodes):
    message = "PartitionRecord"
    hi = layouts.valid_versions(message)[1]
    values = schemaenc.random_values(SPECS[message], hi, random.Random(2), "absent")
    data = schemaenc.encode(SPECS[message], hi, values)
    assert data.endswith(b"\x00")  # the top struct's empty tag section
    got = same(message, hi, data[:-1] + tags)
    assert (got is not None) == decodes


# the program of a layout of one float64 field "v", not flexible
_DOUBLE_PROGRAM = b"\x00" + schema._program_struct(
    [{"name": "V", "type": "float64", "versions": [0, 32767], "nullable": None, "tagged": None,
      "tag": None, "default": 0.0}], 0)
_EDGE_DOUBLES = [0.0, -0.0, 1.0, -1.0, 0.001, 0.00099999, 1e7, 9999999.999, 1e-3 - 1e-19,
                 10000000.000000002, 1e16, 1e21, 1e22, 1.5e-5, 123.456, 5e-324, 2.2250738585072014e-308,
                 1.7976931348623157e308, float("nan"), float("inf"), float("-inf"), 0.1, 1 / 3,
                 100.0, 1234567.0, 0.5, -2.25, 1e10, 4.35, 2 ** 53 + 0.0]


def _same_double(x):
    data = struct.pack(">d", x)
    assert walker.walk(_DOUBLE_PROGRAM, data, 0) == (
        ('{"v":%s}' % jackson.java_double(x)).encode(), 8), x


def test_doubles_are_java_double_edges():
    for x in _EDGE_DOUBLES:
        _same_double(x)
        _same_double(-x)


@fuzz
@given(st.floats(allow_nan=True, allow_infinity=True) | st.integers(0, 2 ** 64 - 1).map(
    lambda bits: struct.unpack(">d", bits.to_bytes(8, "big"))[0]))
def test_doubles_are_java_double(x):
    _same_double(x)


def test_positions_inside_the_data():
    message = "TopicRecord"
    lo, hi = layouts.valid_versions(message)
    data = schemaenc.encode(SPECS[message], hi, {"Name": "t", "TopicId": bytes(range(16))})
    padded = b"\xff" * 5 + data
    assert c_text(message, hi, padded, 5) == python_text(message, hi, padded, 5)
    assert c_text(message, hi, padded, 5)[1] == len(padded)
    with pytest.raises(ValueError):
        walker.walk(schema._program(message, hi), data, len(data) + 1)
    with pytest.raises(ValueError):
        walker.walk(schema._program(message, hi), data, -1)


def test_garbled_programs_never_crash():
    """The program is ours, but a wrong one must not read outside itself either."""
    rng = random.Random(5)
    data = bytes(rng.getrandbits(8) for _ in range(300))
    for message, version in LAYOUTS[::7]:
        program = schema._program(message, version)
        for cut in range(len(program)):
            walker.walk(program[:cut], data, 0)
        for _ in range(30):
            garbled = bytearray(program)
            garbled[rng.randrange(len(garbled))] = rng.getrandbits(8)
            walker.walk(bytes(garbled), data, 0)


# -- KRaft frames, a batch at a time ----------------------------------------------------------

METADATA = sorted(n for n, s in SPECS.items() if s.get("_folder") == "metadata")


def _programs():
    """apiKey << 8 | version -> (the text before the data, program), built here for every
    metadata layout (schema registers them as records decode)."""
    out = {}
    for name in METADATA:
        api_key = SPECS[name]["apiKey"]
        type_name = schemaenc.type_name(name)
        lo, hi = layouts.valid_versions(name)
        for v in range(lo, hi + 1):
            prefix = '{"type":"%s","version":%d,"data":' % (type_name, v)
            out[api_key << 8 | v] = (prefix.encode(), schema._program(name, v))
    return out


def _python_payload(value):
    try:
        type_name, version, text = metadata_record.decode_metadata_record_text(value)
    except schema.CorruptRecordError:
        return None
    return (metadata_record.METADATA_RECORD_TEXT % (type_name, version, text)).encode()


def _metadata_values():
    values = []
    for name in METADATA:
        spec = SPECS[name]
        lo, hi = layouts.valid_versions(name)
        for v in range(lo, hi + 1):
            for seed in range(3):
                body = schemaenc.metadata_frame(
                    spec, v, schemaenc.random_values(spec, v, random.Random(seed), "mixed"))
                values += [body, body[:-1], body + b"\x00", b"\x01" + body[1:3] + b"\xff"]
    return values + [None, b"", b"\x01", b"\x01\x00", b"\x00\x00\x00", b"\x01\x7f\x7f\x00",
                     b"\x01\x80\x01\x00\x00"]


def test_metadata_texts_are_the_python_payloads():
    values = _metadata_values()
    got = walker.metadata_texts(values, _programs())
    assert len(got) == len(values)
    for value, text in zip(values, got):
        # every record Python decodes, the C takes, with the same text; those it does not
        # take are errors, which Python writes
        assert text == (None if value is None else _python_payload(value)), value
    assert sum(text is not None for text in got) > len(values) // 5
    assert walker.metadata_texts([], {}) == []
    assert walker.metadata_texts([b"\x01\x03\x00"], {}) == [None]
    assert walker.metadata_texts([b"\x01\x03\x00", 5], {3 << 8: "not a tuple"}) == [None, None]


def test_schema_registers_programs_as_records_decode():
    if metadata_record._schemawalk is None:
        pytest.skip("kafkalog_cli's own _schemawalk is not built or KAFKALOG_PURE_PYTHON is set")
    spec = SPECS["PartitionRecord"]
    lo, hi = layouts.valid_versions("PartitionRecord")
    value = schemaenc.metadata_frame(spec, hi, schemaenc.random_values(spec, hi,
                                                                      random.Random(1)))
    metadata_record.decode_metadata_record_text(value)  # the first of its type and version: Python
    assert metadata_record.metadata_record_texts([value, None]) == [_python_payload(value), None]


@pytest.mark.skipif(kafkatext is None, reason="_kafkatext is not built: nothing to compare")
@pytest.mark.parametrize("base_seq", [-1, 0, 2 ** 31 - 3])
def test_record_lines_with_payloads_are_the_python_parser_lines(base_seq):
    """_kafkatext.record_lines given the walker's payloads (and Python's for the records it
    does not take) against render's Python loop over the parser's text face."""
    values = _metadata_values()
    recs = records.Records()
    recs.offsets = [1000 + 3 * i for i in range(len(values))]
    recs.timestamps = [1700000000000 - i for i in range(len(values))]
    recs.keys = [None if i % 3 else b"k%d" % i for i in range(len(values))]
    recs.values = values
    recs.headers = [(("h\u00e9", b"1"), ("x", None)) if i % 5 == 0 else () for i in
                    range(len(values))]
    payloads = walker.metadata_texts(values, _programs())
    for i, text in enumerate(payloads):
        if text is None:
            payloads[i] = parsers.cluster_metadata_text(recs.offsets[i], None, values[i])[
                1].encode("utf-8")
    c = kafkatext.record_lines(recs.offsets, recs.timestamps, recs.keys, recs.values,
                               recs.headers, 1000, base_seq, "CreateTime", True, payloads)

    opts = render.DumpOptions(print_data=True, parser=parsers.PARSERS["cluster-metadata"])
    w = render_kafka.KafkaWriter(None, None, opts)
    w._c_parser_records = None  # render's Python loop
    w._lines = []
    b = records.Batch()
    b.base_offset, b.base_sequence, b.timestamp_type = 1000, base_seq, records.CREATE_TIME
    w._parser_lines(b, recs)
    assert c.decode("utf-8").splitlines() == w._lines
    with pytest.raises((TypeError, ValueError)):
        kafkatext.record_lines(recs.offsets, recs.timestamps, recs.keys, recs.values,
                               recs.headers, 1000, base_seq, "CreateTime", True, payloads[1:])
    with pytest.raises(TypeError):
        kafkatext.record_lines(recs.offsets, recs.timestamps, recs.keys, recs.values,
                               recs.headers, 1000, base_seq, "CreateTime", True,
                               ["text"] * len(values))


# -- the dump, with and without the C ---------------------------------------------------------

def _segment_of_every_type(directory):
    records = []
    for name in METADATA:
        spec = SPECS[name]
        lo, hi = layouts.valid_versions(name)
        for v in range(lo, hi + 1):
            for seed, tags in enumerate(("absent", "present", "mixed")):
                values = schemaenc.random_values(spec, v, random.Random(seed), tags)
                values = _map_strings(values, lambda s, i=seed: s + STRINGS[2 + i])
                records.append(schemaenc.metadata_frame(spec, v, values))
    good = len(records)
    records += [None, b"", b"\x01\x03", b"\x02\x03\x00", b"\x01\x03\x00\x00",
                records[0][:-2], records[-1] + b"\x07"]
    batches = []
    for i in range(0, len(records), 50):
        batches.append(v2_batch([Rec(None, r) for r in records[i:i + 50]], base_offset=i))
    return write_segment(str(directory), 0, *batches), good


def _dump(path, pure, fmt="kafka"):
    env = dict(os.environ)
    env.pop("KAFKALOG_PURE_PYTHON", None)
    if pure:
        env["KAFKALOG_PURE_PYTHON"] = "1"
    done = subprocess.run([sys.executable, "-m", "kafkalog_cli", "dump", "--format", fmt,
                           "--cluster-metadata-decoder", str(path)],
                          capture_output=True, env=env, check=False)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.skipif(MODULE_DIR is not None, reason="the dump runs kafkalog_cli's own build")
@pytest.mark.parametrize("fmt", ["kafka", "messages"])
def test_dump_is_the_same_with_and_without_the_c(tmp_path, fmt):
    """kafka: record lines by batch (metadata_record_texts, _kafkatext.record_lines); messages:
    a record at a time (decode_metadata_record_text)."""
    path, good = _segment_of_every_type(tmp_path / "__cluster_metadata-0")
    c = _dump(path, pure=False, fmt=fmt)
    py = _dump(path, pure=True, fmt=fmt)
    assert c == py
    assert c[0] == 0
    lines = c[1].decode().splitlines()
    assert sum('payload: {"type":"' in line for line in lines) == good
    assert sum("skipping." in line for line in lines) == 7


@pytest.mark.skipif(MODULE_DIR is not None, reason="the dump runs kafkalog_cli's own build")
def test_dump_of_the_real_segment_is_the_same_with_and_without_the_c(tmp_path):
    os.makedirs(tmp_path / "__cluster_metadata-0")
    path = shutil.copy(REAL_SEGMENT, tmp_path / "__cluster_metadata-0")
    c = _dump(path, pure=False)
    assert c == _dump(path, pure=True)
    assert c[0] == 0 and b"skipping" not in c[1] and b' payload: {"type":"' in c[1]
