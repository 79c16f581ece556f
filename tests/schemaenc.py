"""Test-only encoder of Kafka's generated messages, straight from Kafka's ORIGINAL JSON
definitions (vendored under tests/data/kafka-messages/), and the JSON form Kafka's generated
converters (JsonConverterGenerator) write for them.

Independent of ``kafkalog_cli``: it neither imports it nor reads our transcription
(``kafkalog_cli/format/schemas/``). It follows Kafka's MessageDataGenerator write rules:
non-flexible versions use int16-length strings, int32-length bytes and arrays (-1 for null);
flexible versions use unsigned varint length+1 (0 for null) and end every struct with a
tagged-field section (count, then per field in tag order: tag, size, value).

Values are Python objects keyed by the field names of the definition file: ints, bools,
floats, str, bytes, uuids as 16 bytes, lists, dicts for structs, None for null. A field not
given takes its default.
"""

import base64
import json
import os
import random
import re
import struct

from kafkagen import uvarint

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "kafka-messages")
TOP = 0x7FFF

_FIXED = {"int8": ">b", "int16": ">h", "uint16": ">H", "int32": ">i", "uint32": ">I",
          "int64": ">q", "float64": ">d"}
_RANGES = {"int8": (-128, 127), "int16": (-32768, 32767), "uint16": (0, 65535),
           "int32": (-2 ** 31, 2 ** 31 - 1), "uint32": (0, 2 ** 32 - 1),
           "int64": (-2 ** 63, 2 ** 63 - 1)}
_SIMPLE = set(_FIXED) | {"bool", "string", "bytes", "records", "uuid"}


# -- reading Kafka's files ---------------------------------------------------------------------

def _drop_comments(text):
    # Kafka's files put // comments on lines of their own or after a value; no string in them
    # holds "//" except URLs, which sit inside quotes: cut a line at a // outside quotes.
    out = []
    for line in text.splitlines():
        quotes = 0
        cut = len(line)
        for i, ch in enumerate(line):
            if ch == '"' and (i == 0 or line[i - 1] != "\\"):
                quotes += 1
            elif ch == "/" and line[i:i + 2] == "//" and quotes % 2 == 0:
                cut = i
                break
        out.append(line[:cut])
    return "\n".join(out)


def load(path):
    with open(path, encoding="utf-8") as fh:
        return json.loads(_drop_comments(fh.read()))


def all_specs():
    """{message name: definition} for every vendored file, with the folder it came from."""
    specs = {}
    for folder in sorted(os.listdir(DATA)):
        full = os.path.join(DATA, folder)
        if not os.path.isdir(full):
            continue
        for name in sorted(os.listdir(full)):
            if name.endswith(".json"):
                spec = load(os.path.join(full, name))
                spec["_folder"] = folder
                specs[spec["name"]] = spec
    return specs


def versions(text):
    """(low, high) of a Kafka version string, or None for "none"/absent."""
    if text is None or text == "none":
        return None
    text = str(text)
    m = re.fullmatch(r"(\d+)\+", text)
    if m:
        return int(m.group(1)), TOP
    m = re.fullmatch(r"(\d+)-(\d+)", text)
    if m:
        return int(m.group(1)), int(m.group(2))
    return int(text), int(text)


def has(text, version):
    r = versions(text)
    return r is not None and r[0] <= version <= r[1]


def field_versions(field):
    """A field's versions; a field with taggedVersions only exists at those (Kafka's
    FieldSpec: "versions" defaults to "taggedVersions")."""
    return field.get("versions", field.get("taggedVersions"))


def flexible(spec, version):
    return has(spec.get("flexibleVersions"), version)


def _kind(field, common):
    """('array', element) / ('struct', fields) / (primitive, None)."""
    t = field["type"]
    if t.startswith("[]"):
        return "array", t[2:]
    if t in _SIMPLE:
        return t, None
    return "struct", field.get("fields") or common[t]


def _element_fields(field, elem, common):
    return field.get("fields") or common[elem]


def default(field, common, version):
    """The field's default value as a Python value (FieldSpec rules)."""
    kind, extra = _kind(field, common)
    d = field.get("default")
    if d is not None and not isinstance(d, str):
        d = json.dumps(d)
    if d == "null":
        return None
    if kind in _RANGES:
        if not d:
            return 0
        return int(d, 16) if d.lower().startswith("0x") else int(d)
    if kind == "float64":
        return float(d) if d else 0.0
    if kind == "bool":
        return d == "true"
    if kind == "string":
        return d or ""
    if kind == "uuid":
        return base64.urlsafe_b64decode(d + "==") if d else bytes(16)
    if kind in ("bytes", "records"):
        return b""
    if kind == "array":
        return []
    return {f["name"]: default(f, common, version) for f in extra}


# -- writing -----------------------------------------------------------------------------------

def _length(n, flex, wide):
    if flex:
        return uvarint(0 if n is None else n + 1)
    return struct.pack(">i" if wide else ">h", -1 if n is None else n)


def _write_value(kind, extra, field, value, common, version, flex):
    if kind in _FIXED:
        return struct.pack(_FIXED[kind], value)
    if kind == "bool":
        return b"\x01" if value else b"\x00"
    if kind == "uuid":
        assert len(value) == 16
        return bytes(value)
    if kind == "string":
        if value is None:
            return _length(None, flex, False)
        raw = value.encode("utf-8")
        return _length(len(raw), flex, False) + raw
    if kind in ("bytes", "records"):
        if value is None:
            return _length(None, flex, True)
        return _length(len(value), flex, True) + bytes(value)
    if kind == "array":
        if value is None:
            return _length(None, flex, True)
        out = [_length(len(value), flex, True)]
        ekind, eextra = _kind({"type": extra, "fields": field.get("fields")}, common)
        for item in value:
            out.append(_write_value(ekind, eextra, field, item, common, version, flex))
        return b"".join(out)
    # a struct
    return write_struct(extra, value, common, version, flex)


def write_struct(fields, values, common, version, flex, write_default_tags=False):
    out = []
    tagged = []
    for f in fields:
        if not has(field_versions(f), version):
            continue
        kind, extra = _kind(f, common)
        value = values.get(f["name"], default(f, common, version))
        if has(f.get("taggedVersions"), version):
            if value != default(f, common, version) or write_default_tags:
                tagged.append((int(f["tag"]), _write_value(kind, extra, f, value, common, version,
                                                      flex)))
            continue
        if kind == "struct" and has(f.get("nullableVersions"), version):
            if value is None:
                out.append(b"\xff")
                continue
            out.append(b"\x01")
        out.append(_write_value(kind, extra, f, value, common, version, flex))
    if flex:
        out.append(uvarint(len(tagged)))
        for tag, body in sorted(tagged):
            out.append(uvarint(tag) + uvarint(len(body)) + body)
    return b"".join(out)


def encode(spec, version, values, write_default_tags=False):
    """The message ``spec`` at ``version`` with ``values``, as Kafka's generated write() does
    (``write_default_tags``: also write tagged fields holding their default, which Kafka's
    writer leaves out but a reader must accept)."""
    common = {s["name"]: s["fields"] for s in spec.get("commonStructs", [])}
    return write_struct(spec["fields"], values, common, version, flexible(spec, version),
                        write_default_tags)


def metadata_frame(spec, version, values):
    """A __cluster_metadata record value: MetadataRecordSerde's frame, then the message."""
    return uvarint(1) + uvarint(spec["apiKey"]) + uvarint(version) + encode(spec, version, values)


# -- the converter's JSON ------------------------------------------------------------------------

def _json_value(kind, extra, field, value, common, version):
    if value is None:
        return None
    if kind == "uuid":
        return base64.urlsafe_b64encode(bytes(value)).rstrip(b"=").decode()
    if kind in ("bytes", "records"):
        return base64.b64encode(bytes(value)).decode()
    if kind == "array":
        ekind, eextra = _kind({"type": extra, "fields": field.get("fields")}, common)
        return [_json_value(ekind, eextra, field, v, common, version) for v in value]
    if kind == "struct":
        return json_struct(extra, value, common, version)
    return value


def json_struct(fields, values, common, version):
    out = {}
    for f in fields:
        if not has(field_versions(f), version):
            continue
        kind, extra = _kind(f, common)
        dflt = default(f, common, version)
        value = values.get(f["name"], dflt)
        name = f["name"][0].lower() + f["name"][1:]
        if has(f.get("taggedVersions"), version):
            if value != dflt:
                out[name] = _json_value(kind, extra, f, value, common, version)
            continue
        out[name] = _json_value(kind, extra, f, value, common, version)
    return out  # in declaration order, as JsonConverterGenerator writes the fields


def expected_json(spec, version, values):
    common = {s["name"]: s["fields"] for s in spec.get("commonStructs", [])}
    return json_struct(spec["fields"], values, common, version)


def check_fields(expected, got, where):
    """Assert a decoded value equals the converter's JSON ``expected``, field by field and in
    the converter's order (declaration order), so that a failure names the field."""
    assert list(got) == list(expected), "%s: fields %s, expected %s" % (
        where, list(got), list(expected))
    for key, want in expected.items():
        have = got[key]
        if isinstance(want, dict) and isinstance(have, dict):
            check_fields(want, have, "%s.%s" % (where, key))
        elif isinstance(want, list) and isinstance(have, list) and want and isinstance(
                want[0], dict):
            assert len(have) == len(want), "%s.%s: length" % (where, key)
            for i, (w, h) in enumerate(zip(want, have)):
                check_fields(w, h, "%s.%s[%d]" % (where, key, i))
        else:
            assert have == want, "%s.%s: %r, expected %r" % (where, key, have, want)


def type_name(name):
    """MetadataRecordType's enum name: PartitionChangeRecord -> PARTITION_CHANGE_RECORD."""
    return "_".join(w.upper() for w in re.findall(r"[A-Z][a-z0-9]*", name))


# -- random values -------------------------------------------------------------------------------

def _random_value(kind, extra, field, common, version, rng, tags):
    if kind in _RANGES:
        lo, hi = _RANGES[kind]
        return rng.choice([lo, hi, 0, -1 if lo < 0 else 1, rng.randint(lo, hi)])
    if kind == "float64":
        return rng.choice([0.5, -2.25, 1e10])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "uuid":
        return bytes(rng.getrandbits(8) for _ in range(16))
    if kind == "string":
        return "".join(rng.choice("abcXYZ019-_.é€𝄞\"\\") for _ in range(rng.randint(0, 12)))
    if kind in ("bytes", "records"):
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 9)))
    if kind == "array":
        ekind, eextra = _kind({"type": extra, "fields": field.get("fields")}, common)
        return [_random_value(ekind, eextra, field, common, version, rng, tags)
                for _ in range(rng.randint(0, 3))]
    return random_struct(extra, common, version, rng, tags)


def random_struct(fields, common, version, rng, tags):
    """Random values for ``fields``; ``tags`` is "absent" (tagged fields left at their default),
    "present" (set to other values) or "mixed"."""
    values = {}
    for f in fields:
        if not has(field_versions(f), version):
            continue
        kind, extra = _kind(f, common)
        if has(f.get("taggedVersions"), version):
            if tags == "absent" or (tags == "mixed" and rng.random() < 0.5):
                continue
            dflt = default(f, common, version)
            for _ in range(20):
                v = _random_value(kind, extra, f, common, version, rng, tags)
                if v != dflt:
                    break
            values[f["name"]] = v
            continue
        if has(f.get("nullableVersions"), version) and rng.random() < 0.25:
            values[f["name"]] = None
            continue
        values[f["name"]] = _random_value(kind, extra, f, common, version, rng, tags)
    return values


def random_values(spec, version, rng=None, tags="mixed"):
    rng = rng or random.Random(0)
    common = {s["name"]: s["fields"] for s in spec.get("commonStructs", [])}
    return random_struct(spec["fields"], common, version, rng, tags)
