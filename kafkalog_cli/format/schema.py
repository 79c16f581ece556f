"""One reader for every record Kafka describes in its message definitions.

Kafka generates a class per message from JSON definitions (the KRaft metadata records, the
group, transaction and share coordinators' records, the raft control records). We keep those
layouts as data in ``format/schemas/`` (one JSON file per message, written by
``tools/refresh_schemas.py``; ``index.json`` says which Kafka commit they come from) and walk
them here, as the generated ``read(Readable, short version)`` methods do
(MessageDataGenerator), giving the value in the form Kafka's generated JSON converters write
(JsonConverterGenerator). Pure functions over bytes; no files beyond the package's own
schema data, no printing.

API (stable):

``decode(message, version, data, pos=0) -> (value, end)``
    Read one ``message`` (a name such as ``"PartitionRecord"``) at ``version`` from ``data``
    (bytes, bytearray or memoryview) starting at ``pos``; ``end`` is the position after it.
    ``value`` is a dict in the JSON converter's form: field names as in the definition with
    the first letter lower-cased; fields absent at ``version`` omitted; tagged fields only
    when they differ from their default; uuids as ``Uuid.toString`` (URL-safe base64, no
    padding); bytes and records as base64; structs as dicts; arrays as lists; null as None.
    Raises ``CorruptRecordError`` (message like Kafka's) on bytes that do not decode, a
    version outside ``validVersions``, or an unknown message.
``decode_metadata_record(data) -> (type_name, version, value)``
    A KRaft metadata record value as MetadataRecordSerde frames it (AbstractApiMessageSerde:
    unsigned varint frame version 1, unsigned varint apiKey, unsigned varint version, the
    message, nothing after it). ``type_name`` is MetadataRecordType's name
    (``"TOPIC_RECORD"``). Errors carry AbstractApiMessageSerde's texts; for a message that
    does not decode that is ``Failed to deserialize record with type <apiKey>``, with the
    reason as the exception's ``__cause__``.
``metadata_type(api_key) -> (message, type_name)``
    MetadataRecordType.fromId; ``CorruptRecordError`` for an unknown id.
``decode_metadata_record_text(data) -> (type_name, version, text)``
    The same for KRaft's records, with ``json_text(value)`` instead of the value, written
    while reading (the dump's fast path).
``metadata_record_texts(values) -> list[bytes | None]``
    For a list of KRaft record values, ``METADATA_RECORD_TEXT % (type_name, version, text)``
    of each as UTF-8 bytes, from the C walker (``_schemawalk.c``, which walks a compact program
    compiled here from the same layout: ``_program``); None for a record it does not take
    (``decode_metadata_record_text`` says what those hold). All None without the C build or
    under ``KAFKALOG_PURE_PYTHON=1``.
``remote_log_metadata_type(api_key) -> (message, type_name)``
    The same for the records of ``__remote_log_metadata`` (the storage module's generated
    MetadataRecordType, which RemoteLogMetadataSerde frames as above); pass it as
    ``decode_metadata_record(data, types=remote_log_metadata_type)``.
``coordinator_messages(coordinator, record_type) -> (key_message, value_message) | None``
    ``coordinator`` is ``"group"`` (``__consumer_offsets``), ``"transaction"``
    (``__transaction_state``) or ``"share"`` (``__share_group_state``); ``record_type`` is the
    int16 that starts a key (the key's version in Kafka's older files, the record type in
    newer ones). None when unknown. ``coordinator_earlier_values(coordinator, record_type)``:
    the older value layouts of that type the newest cannot read, to try when it fails.
``control_message(control_type) -> (message, type_name) | None``
    The raft control records by ControlRecordType id (2 leader change, 3 snapshot header,
    4 snapshot footer, 5 kraft version, 6 voters).
``valid_versions(message) -> (lowest, highest)``, ``messages() -> list[str]``,
``source() -> dict`` (the Kafka commit/release the layouts come from),
``json_text(value) -> str`` (compact JSON as Jackson's ``JsonNode.toString`` writes it, for a
decoded value or a dict holding decoded values one level down; float64 fields as Java's
``Double.toString``, which ``java_double(x) -> str`` gives alone).
"""

from __future__ import annotations

import binascii
import functools
import json
import os
import struct
from importlib import resources
from typing import Any, Callable

from .errors import CorruptRecordError
from .utf8 import ERRORS as JAVA_UTF8

# The optional C walker of the layouts (built from _schemawalk.c, when a compiler is there);
# KAFKALOG_PURE_PYTHON=1 leaves it out, so tests can check both.
_schemawalk: Any = None
if not os.environ.get("KAFKALOG_PURE_PYTHON"):
    try:
        from . import _schemawalk
    except ImportError:  # pragma: no cover - depends on the build
        _schemawalk = None

__all__ = [
    "decode", "decode_metadata_record", "decode_metadata_record_text", "metadata_type",
    "metadata_record_texts", "METADATA_RECORD_TEXT", "remote_log_metadata_type",
    "coordinator_messages", "coordinator_earlier_values",
    "control_message", "valid_versions", "messages", "source", "json_text", "java_double",
]

# A compiled reader: (data, pos) -> (value, end).
Reader = Callable[[bytes, int], "tuple[Any, int]"]


# -- the schema data --------------------------------------------------------------------------

def _load(name: str) -> Any:
    try:
        text = resources.files(__package__ + ".schemas").joinpath(name + ".json").read_text(
            encoding="utf-8")
    except (FileNotFoundError, OSError):
        return None
    return json.loads(text)


@functools.lru_cache(maxsize=None)
def _index() -> dict[str, Any]:
    idx = _load("index")
    if idx is None:
        raise RuntimeError("kafkalog_cli/format/schemas/index.json is missing")
    return dict(idx)


@functools.lru_cache(maxsize=None)
def _spec(message: str) -> dict[str, Any]:
    spec = _load(message) if message.isidentifier() else None
    if spec is None:
        raise CorruptRecordError("Unknown message %s" % message)
    return dict(spec)


def messages() -> list[str]:
    """Every message name we hold a layout for."""
    files = resources.files(__package__ + ".schemas").iterdir()
    return sorted(f.name[:-5] for f in files if f.name.endswith(".json") and f.name != "index.json")


def source() -> dict[str, str]:
    """Where the layouts come from: repository, commit, version, release."""
    return dict(_index()["source"])


def valid_versions(message: str) -> tuple[int, int]:
    lo, hi = _spec(message)["validVersions"]
    return lo, hi


def _record_type(table: str, api_key: int) -> tuple[str, str]:
    # a generated MetadataRecordType.fromId (MetadataRecordTypeGenerator), of one module
    entry = _index().get(table, {}).get(str(api_key))
    if entry is None:
        raise CorruptRecordError(
            "org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id %d"
            % api_key)
    return entry["message"], entry["type"]


def metadata_type(api_key: int) -> tuple[str, str]:
    """MetadataRecordType.fromId: (message name, enum name)."""
    return _record_type("metadata", api_key)


def remote_log_metadata_type(api_key: int) -> tuple[str, str]:
    """The storage module's MetadataRecordType.fromId (the __remote_log_metadata records)."""
    return _record_type("remoteLogMetadata", api_key)


def coordinator_messages(coordinator: str, record_type: int) -> tuple[str, str] | None:
    entry = _index()["coordinators"].get(coordinator, {}).get(str(record_type))
    if entry is None:
        return None
    return entry["key"], entry["value"]


def coordinator_earlier_values(coordinator: str, record_type: int) -> tuple[str, ...]:
    """Older layouts of a record type's value that the newest cannot read (index.json's
    ``earlierValues``: Kafka 4.0's early-access share group records, which 4.1 changed at the
    same version), as messages of their own."""
    entry = _index()["coordinators"].get(coordinator, {}).get(str(record_type)) or {}
    return tuple(entry.get("earlierValues", ()))


def control_message(control_type: int) -> tuple[str, str] | None:
    entry = _index()["raftControl"].get(str(control_type))
    if entry is None:
        return None
    return entry["message"], entry["type"]


# -- primitives -------------------------------------------------------------------------------

_I8, _I16, _I32 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i")


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    """ByteUtils.readUnsignedVarint: at most 5 bytes."""
    b = data[pos]
    if b < 0x80:
        return b, pos + 1
    value = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value & 0xFFFFFFFF, pos
        shift += 7
        if shift > 28:
            raise CorruptRecordError("Varint is too long, the most significant bit in the "
                                     "5th byte is set")


def _underflow() -> CorruptRecordError:
    return CorruptRecordError("java.nio.BufferUnderflowException")


def _null_field(name: str) -> CorruptRecordError:
    return CorruptRecordError("non-nullable field %s was serialized as null" % name)


def _too_long(name: str, n: int) -> CorruptRecordError:
    return CorruptRecordError("string field %s had invalid length %d" % (name, n))


def _short_string(n: int, available: int) -> CorruptRecordError:
    return CorruptRecordError("Error reading string of length %d, only %d bytes available"
                              % (n, available))


def _too_many(n: int, available: int) -> CorruptRecordError:
    return CorruptRecordError("Tried to allocate a collection of size %d, but there are only "
                              "%d bytes remaining." % (n, available))


def _left_over(tag: int, size: int) -> CorruptRecordError:
    return CorruptRecordError("Tagged field %d has %d byte(s) left over" % (tag, size))


# -- compiling a layout at one version --------------------------------------------------------
#
# Each (message, version) layout becomes, at first use, Python source written from the layout
# data (one function per struct, reading its fields in order as MessageDataGenerator's read()
# does: runs of fixed-size fields with one struct.unpack_from, compact lengths inline) and
# compiled once. A short read raises IndexError or struct.error, which decode() reports as
# Kafka's BufferUnderflowException.

# fixed-size types: struct format character and size ("?" reads a byte as != 0, readByte's bool)
_FIXED = {"int8": ("b", 1), "int16": ("h", 2), "uint16": ("H", 2), "int32": ("i", 4),
          "uint32": ("I", 4), "int64": ("q", 8), "float64": ("d", 8), "bool": ("?", 1)}


_INTEGERS = ("int8", "int16", "uint16", "int32", "uint32", "int64")


def _within(rng: list[int] | None, version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


def _json_name(name: str) -> str:
    return name[:1].lower() + name[1:]


def _default_json(field: dict[str, Any], version: int) -> Any:
    """The JSON converter's form of a field's default (what a new object holds)."""
    if field["type"] == "struct" and field["default"] is not None:
        return {_json_name(f["name"]): _default_json(f, version) for f in field["fields"]
                if _within(f["versions"], version) and not _within(f["tagged"], version)}
    return field["default"]


def _fields_at(fields: list[dict[str, Any]], version: int
               ) -> list[tuple[dict[str, Any], str, bool, bool]]:
    """The fields of a struct at ``version`` in declaration order: (field, JSON name, nullable,
    tagged). A field declared with taggedVersions only exists at those versions (FieldSpec); a
    tagged struct is never written as null (its int8 marker is not read)."""
    out = []
    for f in fields:
        if not _within(f["versions"] or f["tagged"], version):
            continue
        nullable = _within(f["nullable"], version)
        tagged = _within(f["tagged"], version)
        if tagged and f["type"] == "struct":
            nullable = False
        out.append((f, _json_name(f["name"]), nullable, tagged))
    return out


def _flexible(spec: dict[str, Any], version: int) -> bool:
    return spec["flexibleVersions"] is not None and version >= spec["flexibleVersions"]


class _Gen:
    """Writes the source of the reading functions of one layout at one version."""

    def __init__(self, version: int, flexible: bool, text: bool = False) -> None:
        self.version = version
        self.flexible = flexible
        # text: the functions return the value's JSON text (as json_text writes it) instead
        # of the value; a struct with tagged fields falls back to its value's reader
        self.text = text
        self.ns: dict[str, Any] = {
            "_uvarint": _uvarint, "_underflow": _underflow, "_null_field": _null_field,
            "_too_long": _too_long, "_short_string": _short_string, "_too_many": _too_many,
            "_left_over": _left_over, "_unpack": struct.unpack_from, "_b64": binascii.b2a_base64,
            "_JAVA_UTF8": JAVA_UTF8,
            "_URLSAFE": bytes.maketrans(b"+/", b"-_"), "_I8": _I8.unpack_from,
            "_I16": _I16.unpack_from, "_I32": _I32.unpack_from, "_tags": _tags,
            "_tags_text": _tags_text,
            "_BOOL": ("false", "true"), "_jd": java_double, "_esc": _ESCAPE,
            "_compact_json": _compact_json, "_java_json": _java_json,
        }
        self.sources: list[str] = []
        self.tables: list[dict[int, Any]] = []  # the tagged fields' tables, by reader name
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return "%s%d" % (prefix, self.count)

    def const(self, value: Any) -> str:
        key = self.name("_c")
        self.ns[key] = value
        return key

    def length(self, long: bool, out: list[str], ind: str) -> None:
        """Reads a length into n: compact (uvarint - 1), int16 (strings) or int32."""
        if self.flexible:
            out += [ind + "n = data[pos]",
                    ind + "if n < 0x80:",
                    ind + "    n -= 1",
                    ind + "    pos += 1",
                    ind + "else:",
                    ind + "    n, pos = _uvarint(data, pos)",
                    ind + "    n -= 1"]
        else:
            out += [ind + "n, = %s(data, pos)" % ("_I32" if long else "_I16"),
                    ind + "pos += %d" % (4 if long else 2)]

    def null(self, name: str, nullable: bool, var: str, out: list[str], ind: str) -> str:
        """Handles n < 0; returns the indent of the code for n >= 0."""
        out.append(ind + "if n < 0:")
        if nullable:
            out.append(ind + "    %s = None" % var)
        else:
            out.append(ind + "    raise _null_field(%r)" % name)
        out.append(ind + "else:")
        return ind + "    "

    def field(self, f: dict[str, Any], t: str, nullable: bool, var: str, out: list[str],
              ind: str) -> None:
        """Code reading one value of type t into var, advancing pos."""
        name = f["name"]
        if t in _FIXED:
            code, size = _FIXED[t]
            out += [ind + "%s, = _unpack('>%s', data, pos)" % (var, code),
                    ind + "pos += %d" % size]
        elif t == "uuid":
            out += [ind + "if pos + 16 > len(data):",
                    ind + "    raise _underflow()",
                    ind + "%s = _b64(data[pos:pos + 16], newline=False).translate(_URLSAFE)"
                    ".decode('ascii')[:22]" % var,
                    ind + "pos += 16"]
        elif t == "string":
            self.length(False, out, ind)
            body = self.null(name, nullable, var, out, ind)
            out += [body + "if n > 0x7FFF:",
                    body + "    raise _too_long(%r, n)" % name,
                    body + "end = pos + n",
                    body + "if end > len(data):",
                    body + "    raise _short_string(n, len(data) - pos)",
                    # as Java's String decodes it (ByteBufferAccessor.readString)
                    body + "%s = data[pos:end].decode('utf-8', _JAVA_UTF8)" % var,
                    body + "pos = end"]
        elif t in ("bytes", "records"):
            self.length(True, out, ind)
            body = self.null(name, nullable, var, out, ind)
            out += [body + "end = pos + n",
                    body + "if end > len(data):",
                    body + "    raise _underflow()",
                    body + "%s = _b64(data[pos:end], newline=False).decode('ascii')" % var,
                    body + "pos = end"]
        elif t == "array":
            self.length(True, out, ind)
            body = self.null(name, nullable, var, out, ind)
            out += [body + "if n > len(data) - pos:",
                    body + "    raise _too_many(n, len(data) - pos)"]
            item = f["item"]
            if item in _FIXED:
                code, size = _FIXED[item]
                # text mode renders the tuple as it is
                read = "_unpack('>%%d%s' %% n, data, pos)" % code
                out += [body + "%s = %s" % (var, read if self.text else "list(%s)" % read),
                        body + "pos += %d * n" % size]
            elif item == "uuid":
                out += [body + "if pos + 16 * n > len(data):",
                        body + "    raise _underflow()",
                        body + "%s = [_b64(data[p:p + 16], newline=False).translate(_URLSAFE)"
                               ".decode('ascii')[:22] for p in range(pos, pos + 16 * n, 16)]"
                        % var,
                        body + "pos += 16 * n"]
            else:
                reader = self.reader(f, item)
                out += [body + "%s = []" % var,
                        body + "for _ in range(n):",
                        body + "    v, pos = %s(data, pos)" % reader,
                        body + "    %s.append(v)" % var]
        elif t == "struct":
            reader = self.struct(f["fields"])
            if nullable:
                out += [ind + "n, = _I8(data, pos)",
                        ind + "pos += 1",
                        ind + "if n < 0:",
                        ind + "    %s = None" % var,
                        ind + "else:",
                        ind + "    %s, pos = %s(data, pos)" % (var, reader)]
            else:
                out.append(ind + "%s, pos = %s(data, pos)" % (var, reader))
        else:
            raise CorruptRecordError("unknown field type %s" % t)

    def render(self, f: dict[str, Any], t: str, nullable: bool, var: str) -> str:
        """An expression giving the JSON text of var, a value of type t read by field()
        (in text mode: structs and the items of arrays of them already text)."""
        if t in _INTEGERS:
            expr = "'%%d' %% %s" % var
        elif t == "bool":
            expr = "_BOOL[%s]" % var
        elif t == "float64":
            expr = "_jd(%s)" % var
        elif t in ("uuid", "bytes", "records"):
            expr = "'\"' + %s + '\"'" % var  # base64: nothing to escape
        elif t == "string":
            expr = "_esc(%s)" % var
        elif t == "array":
            item = f["item"]
            if item in _INTEGERS:
                items = "map(str, %s)" % var
            elif item == "bool":
                items = "map(_BOOL.__getitem__, %s)" % var
            elif item == "float64":
                items = "map(_jd, %s)" % var
            elif item == "uuid":
                items = "['\"%%s\"' %% u for u in %s]" % var
            else:
                items = var
            expr = "'[' + ','.join(%s) + ']'" % items
        else:
            expr = var
        return "('null' if %s is None else %s)" % (var, expr) if nullable else expr

    def reader(self, f: dict[str, Any], t: str, nullable: bool = False) -> str:
        """The name of a function (data, pos) -> (value, end) reading one value of type t."""
        if t == "struct" and not nullable:
            return self.struct(f["fields"])
        fn = self.name("_f")
        out = ["def %s(data, pos):" % fn]
        self.field(f, t, nullable, "value", out, "    ")
        if self.text:
            out.append("    value = " + self.render(f, t, nullable, "value"))
        out.append("    return value, pos")
        self.sources.append("\n".join(out))
        return fn

    def struct(self, fields: list[dict[str, Any]]) -> str:
        version = self.version
        fn = self.name("_s")
        out = ["def %s(data, pos):" % fn]
        keys: list[tuple[str, str]] = []  # (JSON name, variable) of the untagged fields
        # in text mode, their JSON text's expressions (and how the template takes them)
        texts: list[tuple[str, str]] = []
        tagged: dict[int, tuple[str, str, Any]] = {}  # tag: (JSON name, reader, default)
        order: list[str] = []  # JSON names in declaration order, tagged fields among the others
        run: list[tuple[str, str]] = []  # pending fixed-size fields: (variable, format char)

        def flush() -> None:
            if not run:
                return
            fmt = ">" + "".join(c for _, c in run)
            targets = "".join(v + ", " for v, _ in run)
            out.append("    %s= _unpack(%r, data, pos)" % (targets, fmt))
            out.append("    pos += %d" % struct.calcsize(fmt))
            run.clear()

        for f, key, nullable, is_tagged in _fields_at(fields, version):
            order.append(key)
            if is_tagged:
                # read as values (compared with their defaults), in text mode too
                text, self.text = self.text, False
                reader = self.reader(f, f["type"], nullable)
                self.text = text
                tagged[f["tag"]] = (key, reader, _default_json(f, version))
                continue
            var = "v%d" % len(keys)
            keys.append((key, var))
            if not nullable and f["type"] in _INTEGERS:
                texts.append(("%d", var))
            else:
                texts.append(("%s", self.render(f, f["type"], nullable, var)))
            if f["type"] in _FIXED:
                run.append((var, _FIXED[f["type"]][0]))
                continue
            flush()
            self.field(f, f["type"], nullable, var, out, "    ")
        flush()
        if self.text:
            if self.flexible:
                table = dict(tagged)
                self.tables.append(table)
                out += ["    if data[pos]:  # tagged fields",
                        "        return _tags_text(data, pos, {%s}, %s, %s, %s)" % (
                            ", ".join("%r: %s" % (key, t if spec == "%s" else "'%d' % " + t)
                                      for (key, _), (spec, t) in zip(keys, texts)),
                            self.const(table), self.const(order),
                            "_java_json" if _has_double(fields) else "_compact_json"),
                        "    pos += 1"]
            template = "{%s}" % ",".join('"%s":%s' % (key, spec)
                                         for (key, _), (spec, _) in zip(keys, texts))
            out.append("    return %r %% (%s), pos" % (template,
                                                       "".join(t + ", " for _, t in texts)))
            self.sources.append("\n".join(out))
            return fn
        out.append("    out = {%s}" % ", ".join("%r: %s" % kv for kv in keys))
        if self.flexible:
            table: dict[int, Any] = dict(tagged)
            self.tables.append(table)
            out += ["    n = data[pos]",
                    "    if n < 0x80:",
                    "        pos += 1",
                    "    else:",
                    "        n, pos = _uvarint(data, pos)",
                    "    if n:",
                    "        out, pos = _tags(data, pos, n, out, %s, %s)"
                    % (self.const(table), self.const(order))]
        out.append("    return out, pos")
        self.sources.append("\n".join(out))
        return fn


def _tag_values(data: bytes, pos: int, count: int, tagged: dict[int, tuple[str, Reader, Any]]
                ) -> tuple[dict[str, Any], int]:
    """The tagged fields of a flexible struct (count of them, already read) that differ from
    their defaults: {JSON name: value}, and the position after them."""
    found: dict[str, Any] = {}
    for _ in range(count):
        tag, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        end = pos + size
        if end > len(data):
            raise _underflow()
        entry = tagged.get(tag)
        if entry is not None:
            # read from a copy of the field's own bytes: copies add up to the record's size
            # however many tagged fields it holds
            value, used = entry[1](data[pos:end], 0)
            if used != size:
                raise _left_over(tag, size - used)
            if value != entry[2]:
                found[entry[0]] = value
        pos = end
    return found, pos


def _tags(data: bytes, pos: int, count: int, out: dict[str, Any],
          tagged: dict[int, tuple[str, Reader, Any]], order: list[str]
          ) -> tuple[dict[str, Any], int]:
    """The value of a flexible struct with its tagged fields (count of them, already read)."""
    found, pos = _tag_values(data, pos, count, tagged)
    if found:
        # The converter writes every field in declaration order (JsonConverterGenerator)
        found.update(out)
        out = {key: found[key] for key in order if key in found}
    return out, pos


def _tags_text(data: bytes, pos: int, texts: dict[str, str],
               tagged: dict[int, tuple[str, Reader, Any]], order: list[str],
               dump: Callable[[Any], str]) -> tuple[str, int]:
    """_tags in text mode: texts holds the untagged fields' JSON texts; the tagged ones found
    are written by dump (json_text's writer for the layout)."""
    count, pos = _uvarint(data, pos)
    found, pos = _tag_values(data, pos, count, tagged)
    for key, value in found.items():
        texts[key] = dump(value)
    return "{%s}" % ",".join('"%s":%s' % (key, texts[key]) for key in order if key in texts), pos


def _compile_layout(fields: list[dict[str, Any]], version: int, flexible: bool,
                    text: bool = False) -> Reader:
    gen = _Gen(version, flexible, text)
    top = gen.struct(fields)
    code = compile("\n\n".join(gen.sources), "<kafkalog layout>", "exec")
    exec(code, gen.ns)
    for table in gen.tables:  # reader names become the compiled functions
        for tag, (key, name, default) in table.items():
            table[tag] = (key, gen.ns[name], default)
    reader: Reader = gen.ns[top]
    return reader


class _WithDoubles(dict):  # type: ignore[type-arg]
    """The value of a message whose layout holds float64 fields: json_text writes its doubles
    as Java does."""


def _has_double(fields: list[dict[str, Any]]) -> bool:
    return any(f["type"] == "float64" or f.get("item") == "float64"
               or _has_double(f.get("fields") or []) for f in fields)


@functools.lru_cache(maxsize=None)
def _compiled(message: str, version: int) -> Reader:
    spec = _spec(message)
    lo, hi = spec["validVersions"]
    if not lo <= version <= hi:
        raise CorruptRecordError("Can't read version %d of %s" % (version, message))
    reader = _compile_layout(spec["fields"], version, _flexible(spec, version))
    if not _has_double(spec["fields"]):
        return reader

    def marked(data: bytes, pos: int) -> tuple[Any, int]:
        value, end = reader(data, pos)
        return _WithDoubles(value), end
    return marked


@functools.lru_cache(maxsize=None)
def _compiled_text(message: str, version: int) -> Reader:
    """_compiled's twin giving the value's JSON text, as json_text writes it."""
    spec = _spec(message)
    return _compile_layout(spec["fields"], version, _flexible(spec, version), text=True)


# -- the same layouts as programs for the C walker (_schemawalk.c) ------------------------------
#
# One (message, version) layout, selected by the same rules as the Python reader's (_fields_at),
# as bytes the C walks: the flexible flag, then the top struct. A struct: u16 field count, u16
# tagged count (little-endian), then per untagged field [u8 slot (declaration index)][u8 key
# length][key: "name":][node], then per tagged field [u32 tag][u8 slot][u8 key length][key]
# [u16 default length][the default's JSON text][node]. A node: [u8 op][u8 1 if nullable]; an
# array adds [u32 size][item node], a struct [u32 size][struct]. A tagged field is written when
# its text differs from its default's, which is when its value differs (json_text is one-to-one
# on the values a layout holds).

_OPS = {"int8": 1, "int16": 2, "uint16": 3, "int32": 4, "uint32": 5, "int64": 6, "bool": 7,
        "float64": 8, "uuid": 9, "string": 10, "bytes": 11, "records": 11, "array": 12,
        "struct": 13}
_MAX_SLOTS = 64  # fields of one struct the C keeps track of (Kafka's largest has 13)


def _program_node(f: dict[str, Any], t: str, nullable: bool, version: int) -> bytes:
    head = bytes((_OPS[t], 1 if nullable else 0))
    if t == "array":
        body = _program_node(f, f["item"], False, version)
    elif t == "struct":
        body = _program_struct(f["fields"], version)
    else:
        return head
    return head + struct.pack("<I", len(body)) + body


def _program_struct(fields: list[dict[str, Any]], version: int) -> bytes:
    present = _fields_at(fields, version)
    if len(present) > _MAX_SLOTS:
        raise ValueError("too many fields for the C walker")
    untagged, tagged = [], []
    for slot, (f, key, nullable, is_tagged) in enumerate(present):
        name = ('"%s":' % key).encode()
        node = _program_node(f, f["type"], nullable, version)
        if is_tagged:
            default = _compact_json(_default_json(f, version)).encode()
            tagged.append(struct.pack("<IBB", f["tag"], slot, len(name)) + name
                          + struct.pack("<H", len(default)) + default + node)
        else:
            untagged.append(struct.pack("<BB", slot, len(name)) + name + node)
    return struct.pack("<HH", len(present), len(tagged)) + b"".join(untagged + tagged)


@functools.lru_cache(maxsize=None)
def _program(message: str, version: int) -> bytes | None:
    """The C walker's program for ``message`` at ``version`` (None: one it cannot walk)."""
    spec = _spec(message)
    try:
        return bytes((_flexible(spec, version),)) + _program_struct(spec["fields"], version)
    except (KeyError, ValueError, struct.error):
        return None


def decode(message: str, version: int, data: Any, pos: int = 0) -> tuple[dict[str, Any], int]:
    """Read ``message`` at ``version`` from ``data[pos:]``: (value, end). See the module doc."""
    reader = _compiled(message, version)
    if not isinstance(data, bytes):
        data = bytes(data)
    try:
        value, end = reader(data, pos)
    except CorruptRecordError:
        raise
    except (IndexError, struct.error):
        raise _underflow() from None
    return value, end


# (apiKey << 8 | version) -> (reader, type name), for frames whose three varints are one byte
# each (every record Kafka writes today): the lookups done once per record type and version.
_METADATA_FAST: dict[int, tuple[Reader, str]] = {}


def decode_metadata_record(data: Any, types: Callable[[int], tuple[str, str]] = metadata_type
                           ) -> tuple[str, int, dict[str, Any]]:
    """A KRaft metadata record value (MetadataRecordSerde): (type name, version, value).
    ``types`` maps the frame's apiKey to (message, type name): ``metadata_type`` (KRaft) or
    ``remote_log_metadata_type`` (RemoteLogMetadataSerde, the same frame)."""
    if not isinstance(data, bytes):
        data = bytes(data)
    kraft = types is metadata_type
    if kraft and len(data) >= 3 and data[0] == 1 and data[1] < 0x80 and data[2] < 0x80:
        fast = _METADATA_FAST.get(data[1] << 8 | data[2])
        if fast is not None:
            try:
                value, end = fast[0](data, 3)
            except (CorruptRecordError, IndexError, struct.error):
                pass  # the full path below says why, in Kafka's words
            else:
                if end == len(data):
                    return fast[1], data[2], value
    pos = 0

    def unsigned_short(entity: str) -> int:
        nonlocal pos
        try:
            value, pos = _uvarint(data, pos)
        except (IndexError, CorruptRecordError):
            raise CorruptRecordError("Error while reading " + entity) from None
        if value > 0x7FFF:
            raise CorruptRecordError("Value for %s was too large." % entity)
        return value

    frame = unsigned_short("frame version")
    if frame == 0:
        raise CorruptRecordError(
            "Could not deserialize metadata record with frame version 0. Note that upgrades "
            "from the preview release of KRaft in 2.8 to newer versions are not supported.")
    if frame != 1:
        raise CorruptRecordError("Could not deserialize metadata record due to unknown frame "
                                 "version %d(only frame version 1 is supported)" % frame)
    api_key = unsigned_short("type")
    version = unsigned_short("version")
    message, type_name = types(api_key)
    try:
        value, end = decode(message, version, data, pos)
    except CorruptRecordError as e:
        # Kafka's text is only this (MetadataParseException's own message); why is kept as
        # the exception's cause
        raise CorruptRecordError("Failed to deserialize record with type %d" % api_key) from e
    if end < len(data):
        raise CorruptRecordError("Found %d byte(s) of garbage after %d" % (len(data) - end,
                                                                           api_key))
    if kraft and pos == 3:
        _METADATA_FAST[api_key << 8 | version] = (_compiled(message, version), type_name)
    return type_name, version, value


# the same as _METADATA_FAST for decode_metadata_record_text without the C walker:
# (text reader, type name)
_METADATA_TEXT_FAST: dict[int, tuple[Reader, str]] = {}
# and with it (decode_metadata_record_text, metadata_record_texts): (METADATA_RECORD_TEXT's
# text before the data, program, type name), added as records of each type and version are met
_METADATA_PROGRAMS: dict[int, tuple[bytes, bytes, str]] = {}

# The JSON text of {"type": type name, "version": version, "data": value} (a KRaft record as
# ClusterMetadataLogMessageParser prints it), with the data's JSON text
METADATA_RECORD_TEXT = '{"type":"%s","version":%d,"data":%s}'


def metadata_record_texts(values: list[Any]) -> list[bytes | None]:
    """For each KRaft record value of a list (bytes or None), METADATA_RECORD_TEXT of it as
    UTF-8 bytes, from the C walker; None where it does not take the record (not built, a type
    and version not met yet by decode_metadata_record_text, bytes that do not decode): that
    function says what those hold."""
    if _schemawalk is None:
        return [None] * len(values)
    texts: list[bytes | None] = _schemawalk.metadata_texts(values, _METADATA_PROGRAMS)
    return texts


def decode_metadata_record_text(data: Any) -> tuple[str, int, str]:
    """decode_metadata_record (KRaft's types) giving ``json_text(value)`` for the value,
    written while reading (the dump's path); the same errors."""
    if not isinstance(data, bytes):
        data = bytes(data)
    short = len(data) >= 3 and data[0] == 1 and data[1] < 0x80 and data[2] < 0x80
    if short and _schemawalk is not None:
        entry = _METADATA_PROGRAMS.get(data[1] << 8 | data[2]) or _metadata_program(data[1],
                                                                                   data[2])
        if entry is not None:
            got = _schemawalk.walk(entry[1], data, 3)
            if got is not None and got[1] == len(data):
                return entry[2], data[2], got[0].decode("utf-8")
    elif short:
        fast = _METADATA_TEXT_FAST.get(data[1] << 8 | data[2])
        if fast is not None:
            try:
                text, end = fast[0](data, 3)
            except (CorruptRecordError, IndexError, struct.error):
                pass  # decode_metadata_record says why, in Kafka's words
            else:
                if end == len(data):
                    return fast[1], data[2], text
    # a record neither fast path takes (the first of its type and version without the C
    # walker, or one that does not decode): the full path, with Kafka's error texts
    type_name, version, value = decode_metadata_record(data)
    if short and _schemawalk is None:
        _METADATA_TEXT_FAST[data[1] << 8 | version] = (
            _compiled_text(metadata_type(data[1])[0], version), type_name)
    return type_name, version, json_text(value)


def _metadata_program(api_key: int, version: int) -> tuple[bytes, bytes, str] | None:
    """The C walker's entry for a KRaft record type and version, kept in _METADATA_PROGRAMS;
    None for an unknown type or version or a layout it cannot walk."""
    try:
        message, type_name = metadata_type(api_key)
        lo, hi = valid_versions(message)
    except CorruptRecordError:
        return None
    program = _program(message, version) if lo <= version <= hi else None
    if program is None:
        return None
    before_data = METADATA_RECORD_TEXT.rsplit("%s", 1)[0]
    entry = ((before_data % (type_name, version)).encode(), program, type_name)
    _METADATA_PROGRAMS[api_key << 8 | version] = entry
    return entry


_ESCAPE: Callable[[str], str] = json.encoder.encode_basestring  # type: ignore[attr-defined]
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_compact_json: Callable[[Any], str] = _ENCODER.encode
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
if _c_make_encoder is not None:
    # the C encoder JSONEncoder.encode builds on every call, built once (no circular check:
    # decoded values are trees)
    _c_encode = _c_make_encoder(None, _ENCODER.default, json.encoder.encode_basestring, None,
                                ":", ",", False, False, True)

    def _compact_json(value: Any) -> str:
        return "".join(_c_encode(value, 0))


def json_text(value: Any) -> str:
    """Compact JSON, as Jackson's JsonNode.toString writes a converter's output (doubles as
    Java's Double.toString: ``1.048576E7``, not ``10485760.0``), for a decoded value or an
    object holding decoded values."""
    kind = type(value)
    if kind is _WithDoubles:
        return _java_json(value)
    if kind is dict:
        for v in value.values():
            if type(v) is _WithDoubles:
                return _java_json(value)
    return _compact_json(value)


def _java_json(value: Any) -> str:
    if isinstance(value, dict):
        return "{%s}" % ",".join("%s:%s" % (_compact_json(k), _java_json(v))
                                 for k, v in value.items())
    if isinstance(value, list):
        return "[%s]" % ",".join(_java_json(v) for v in value)
    if isinstance(value, float):
        return java_double(value)
    return _compact_json(value)


def java_double(x: float) -> str:
    """Java's Double.toString, as Jackson writes a DoubleNode; NaN and the infinities as
    strings (Jackson's WRITE_NAN_AS_STRINGS, on by default)."""
    if x != x:
        return '"NaN"'
    if x in (float("inf"), float("-inf")):
        return '"Infinity"' if x > 0 else '"-Infinity"'
    if x == 0:
        return "-0.0" if str(x).startswith("-") else "0.0"
    sign = "-" if x < 0 else ""
    # the shortest digits that read back as x (repr's), and the decimal exponent
    mantissa, _, exp_text = ("%r" % abs(x)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    exponent = int(exp_text or 0) + len(whole) - 1  # of the first digit
    if whole == "0":
        lead = len(frac) - len(frac.lstrip("0"))
        exponent = int(exp_text or 0) - lead - 1
    digits = digits.rstrip("0") or "0"
    if 1e-3 <= abs(x) < 1e7:
        if exponent >= 0:
            ints = digits[:exponent + 1].ljust(exponent + 1, "0")
            fraction = digits[exponent + 1:] or "0"
        else:
            ints = "0"
            fraction = "0" * (-exponent - 1) + digits
        return "%s%s.%s" % (sign, ints, fraction)
    return "%s%s.%sE%d" % (sign, digits[0], digits[1:] or "0", exponent)

