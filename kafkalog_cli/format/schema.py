"""One reader for every record Kafka describes in its message definitions.

Kafka generates a class per message from JSON definitions (the KRaft metadata records, the
group, transaction and share coordinators' records, the raft control records). We hold those
layouts as data (``format/layouts.py`` reads ``format/schemas/``) and compile each (message,
version) layout here into a function that reads it, as the generated ``read(Readable, short
version)`` methods do (MessageDataGenerator), giving the value in the form Kafka's generated
JSON converters write (JsonConverterGenerator; its text: ``format/jackson.py``). The framings
on top: ``format/metadata_record.py`` (KRaft, MetadataRecordSerde), ``format/coordinator.py``,
``format/remote_log_metadata.py``, ``format/control.py``. Pure functions over bytes, no
printing.

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
``compiled(message, version) -> reader``, ``compiled_text(message, version) -> reader``
    The compiled reader of a layout, ``(data, pos) -> (value, end)`` (``compiled_text``: the
    value's JSON text, as ``jackson.json_text`` writes it, instead of the value); a short read
    raises IndexError or struct.error. ``_program(message, version)``: the same layout as a
    program for the C walker (``_schemawalk.c``).
``uvarint(data, pos) -> (value, end)``
    ByteUtils.readUnsignedVarint.
"""

from __future__ import annotations

import binascii
import functools
import struct
from typing import Any, Callable

from .errors import CorruptRecordError
from .jackson import ESCAPE, WithDoubles, compact_json, java_double, java_json
from .layouts import default_json, fields_at, flexible, has_double, spec
from .utf8 import ERRORS as JAVA_UTF8

__all__ = ["decode", "compiled", "compiled_text", "uvarint", "Reader"]

# A compiled reader: (data, pos) -> (value, end).
Reader = Callable[[bytes, int], "tuple[Any, int]"]


# -- primitives -------------------------------------------------------------------------------

_I8, _I16, _I32 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i")


def uvarint(data: bytes, pos: int) -> tuple[int, int]:
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



class _Gen:
    """Writes the source of the reading functions of one layout at one version."""

    def __init__(self, version: int, flexible: bool, text: bool = False) -> None:
        self.version = version
        self.flexible = flexible
        # text: the functions return the value's JSON text (as json_text writes it) instead
        # of the value; a struct with tagged fields falls back to its value's reader
        self.text = text
        self.ns: dict[str, Any] = {
            "_uvarint": uvarint, "_underflow": _underflow, "_null_field": _null_field,
            "_too_long": _too_long, "_short_string": _short_string, "_too_many": _too_many,
            "_left_over": _left_over, "_unpack": struct.unpack_from, "_b64": binascii.b2a_base64,
            "_JAVA_UTF8": JAVA_UTF8,
            "_URLSAFE": bytes.maketrans(b"+/", b"-_"), "_I8": _I8.unpack_from,
            "_I16": _I16.unpack_from, "_I32": _I32.unpack_from, "_tags": _tags,
            "_tags_text": _tags_text,
            "_BOOL": ("false", "true"), "_jd": java_double, "_esc": ESCAPE,
            "_compact_json": compact_json, "_java_json": java_json,
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

        for f, key, nullable, is_tagged in fields_at(fields, version):
            order.append(key)
            if is_tagged:
                # read as values (compared with their defaults), in text mode too
                text, self.text = self.text, False
                reader = self.reader(f, f["type"], nullable)
                self.text = text
                tagged[f["tag"]] = (key, reader, default_json(f, version))
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
                table: dict[int, Any] = dict(tagged)
                self.tables.append(table)
                out += ["    if data[pos]:  # tagged fields",
                        "        return _tags_text(data, pos, {%s}, %s, %s, %s)" % (
                            ", ".join("%r: %s" % (key, t if spec == "%s" else "'%d' % " + t)
                                      for (key, _), (spec, t) in zip(keys, texts)),
                            self.const(table), self.const(order),
                            "_java_json" if has_double(fields) else "_compact_json"),
                        "    pos += 1"]
            template = "{%s}" % ",".join('"%s":%s' % (key, spec)
                                         for (key, _), (spec, _) in zip(keys, texts))
            out.append("    return %r %% (%s), pos" % (template,
                                                       "".join(t + ", " for _, t in texts)))
            self.sources.append("\n".join(out))
            return fn
        out.append("    out = {%s}" % ", ".join("%r: %s" % kv for kv in keys))
        if self.flexible:
            table = dict(tagged)
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
        tag, pos = uvarint(data, pos)
        size, pos = uvarint(data, pos)
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
    count, pos = uvarint(data, pos)
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




@functools.lru_cache(maxsize=None)
def compiled(message: str, version: int) -> Reader:
    layout = spec(message)
    lo, hi = layout["validVersions"]
    if not lo <= version <= hi:
        raise CorruptRecordError("Can't read version %d of %s" % (version, message))
    reader = _compile_layout(layout["fields"], version, flexible(layout, version))
    if not has_double(layout["fields"]):
        return reader

    def marked(data: bytes, pos: int) -> tuple[Any, int]:
        value, end = reader(data, pos)
        return WithDoubles(value), end
    return marked


@functools.lru_cache(maxsize=None)
def compiled_text(message: str, version: int) -> Reader:
    """compiled's twin giving the value's JSON text, as jackson.json_text writes it."""
    layout = spec(message)
    return _compile_layout(layout["fields"], version, flexible(layout, version), text=True)


# -- the same layouts as programs for the C walker (_schemawalk.c) ------------------------------
#
# One (message, version) layout, selected by the same rules as the Python reader's (fields_at),
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
    present = fields_at(fields, version)
    if len(present) > _MAX_SLOTS:
        raise ValueError("too many fields for the C walker")
    untagged, tagged = [], []
    for slot, (f, key, nullable, is_tagged) in enumerate(present):
        name = ('"%s":' % key).encode()
        node = _program_node(f, f["type"], nullable, version)
        if is_tagged:
            default = compact_json(default_json(f, version)).encode()
            tagged.append(struct.pack("<IBB", f["tag"], slot, len(name)) + name
                          + struct.pack("<H", len(default)) + default + node)
        else:
            untagged.append(struct.pack("<BB", slot, len(name)) + name + node)
    return struct.pack("<HH", len(present), len(tagged)) + b"".join(untagged + tagged)


@functools.lru_cache(maxsize=None)
def _program(message: str, version: int) -> bytes | None:
    """The C walker's program for ``message`` at ``version`` (None: one it cannot walk)."""
    layout = spec(message)
    try:
        return bytes((flexible(layout, version),)) + _program_struct(layout["fields"], version)
    except (KeyError, ValueError, struct.error):
        return None


def decode(message: str, version: int, data: Any, pos: int = 0) -> tuple[dict[str, Any], int]:
    """Read ``message`` at ``version`` from ``data[pos:]``: (value, end). See the module doc."""
    reader = compiled(message, version)
    if not isinstance(data, bytes):
        data = bytes(data)
    try:
        value, end = reader(data, pos)
    except CorruptRecordError:
        raise
    except (IndexError, struct.error):
        raise _underflow() from None
    return value, end
