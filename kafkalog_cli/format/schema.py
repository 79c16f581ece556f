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
``remote_log_metadata_type(api_key) -> (message, type_name)``
    The same for the records of ``__remote_log_metadata`` (the storage module's generated
    MetadataRecordType, which RemoteLogMetadataSerde frames as above); pass it as
    ``decode_metadata_record(data, types=remote_log_metadata_type)``.
``coordinator_messages(coordinator, record_type) -> (key_message, value_message) | None``
    ``coordinator`` is ``"group"`` (``__consumer_offsets``), ``"transaction"``
    (``__transaction_state``) or ``"share"`` (``__share_group_state``); ``record_type`` is the
    int16 that starts a key (the key's version in Kafka's older files, the record type in
    newer ones). None when unknown.
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

import base64
import functools
import json
import struct
from importlib import resources
from typing import Any, Callable

from .errors import CorruptRecordError

__all__ = [
    "decode", "decode_metadata_record", "metadata_type", "remote_log_metadata_type",
    "coordinator_messages",
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


def control_message(control_type: int) -> tuple[str, str] | None:
    entry = _index()["raftControl"].get(str(control_type))
    if entry is None:
        return None
    return entry["message"], entry["type"]


# -- primitives -------------------------------------------------------------------------------

_I8, _I16, _U16 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">H")
_I32, _U32, _I64 = struct.Struct(">i"), struct.Struct(">I"), struct.Struct(">q")
_F64 = struct.Struct(">d")


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


def _fixed(st: struct.Struct) -> Reader:
    size, unpack = st.size, st.unpack_from

    def read(data: bytes, pos: int) -> tuple[Any, int]:
        if pos + size > len(data):
            raise _underflow()
        return unpack(data, pos)[0], pos + size
    return read


def _underflow() -> CorruptRecordError:
    return CorruptRecordError("java.nio.BufferUnderflowException")


def _bool(data: bytes, pos: int) -> tuple[Any, int]:
    if pos >= len(data):
        raise _underflow()
    return data[pos] != 0, pos + 1


def _uuid(data: bytes, pos: int) -> tuple[Any, int]:
    if pos + 16 > len(data):
        raise _underflow()
    return base64.urlsafe_b64encode(data[pos:pos + 16]).decode("ascii")[:22], pos + 16


def _length(flexible: bool, long: bool) -> Reader:
    """The length of a string (int16), bytes or array (int32), or compact (uvarint - 1)."""
    if flexible:
        def compact(data: bytes, pos: int) -> tuple[int, int]:
            n, pos = _uvarint(data, pos)
            return n - 1, pos
        return compact
    return _fixed(_I32 if long else _I16)


def _string(name: str, flexible: bool, nullable: bool) -> Reader:
    length = _length(flexible, False)

    def read(data: bytes, pos: int) -> tuple[Any, int]:
        n, pos = length(data, pos)
        if n < 0:
            if nullable:
                return None, pos
            raise CorruptRecordError("non-nullable field %s was serialized as null" % name)
        if n > 0x7FFF:
            raise CorruptRecordError("string field %s had invalid length %d" % (name, n))
        end = pos + n
        if end > len(data):
            raise CorruptRecordError("Error reading string of length %d, only %d bytes "
                                     "available" % (n, len(data) - pos))
        try:
            return bytes(data[pos:end]).decode("utf-8"), end
        except UnicodeDecodeError:
            return bytes(data[pos:end]).decode("utf-8", "replace"), end
    return read


def _bytes(name: str, flexible: bool, nullable: bool) -> Reader:
    length = _length(flexible, True)

    def read(data: bytes, pos: int) -> tuple[Any, int]:
        n, pos = length(data, pos)
        if n < 0:
            if nullable:
                return None, pos
            raise CorruptRecordError("non-nullable field %s was serialized as null" % name)
        end = pos + n
        if end > len(data):
            raise _underflow()
        return base64.b64encode(data[pos:end]).decode("ascii"), end
    return read


def _array(name: str, flexible: bool, nullable: bool, item: Reader) -> Reader:
    length = _length(flexible, True)

    def read(data: bytes, pos: int) -> tuple[Any, int]:
        n, pos = length(data, pos)
        if n < 0:
            if nullable:
                return None, pos
            raise CorruptRecordError("non-nullable field %s was serialized as null" % name)
        if n > len(data) - pos:
            raise CorruptRecordError("Tried to allocate a collection of size %d, but there "
                                     "are only %d bytes remaining." % (n, len(data) - pos))
        out = []
        for _ in range(n):
            v, pos = item(data, pos)
            out.append(v)
        return out, pos
    return read


_PRIMITIVES: dict[str, Reader] = {
    "int8": _fixed(_I8), "int16": _fixed(_I16), "uint16": _fixed(_U16),
    "int32": _fixed(_I32), "uint32": _fixed(_U32), "int64": _fixed(_I64),
    "float64": _fixed(_F64), "bool": _bool, "uuid": _uuid,
}


# -- compiling a layout at one version --------------------------------------------------------

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


def _field_reader(field: dict[str, Any], version: int, flexible: bool) -> Reader:
    t, name = field["type"], field["name"]
    nullable = _within(field["nullable"], version)
    if t in _PRIMITIVES:
        return _PRIMITIVES[t]
    if t == "string":
        return _string(name, flexible, nullable)
    if t in ("bytes", "records"):
        return _bytes(name, flexible, nullable)
    if t == "array":
        item_t = field["item"]
        if item_t == "struct":
            item = _struct(field["fields"], version, flexible)
        elif item_t == "string":
            item = _string(name, flexible, False)
        elif item_t in ("bytes", "records"):
            item = _bytes(name, flexible, False)
        else:
            item = _PRIMITIVES[item_t]
        return _array(name, flexible, nullable, item)
    if t == "struct":
        body = _struct(field["fields"], version, flexible)
        if not nullable or _within(field["tagged"], version):
            return body

        def nullable_struct(data: bytes, pos: int) -> tuple[Any, int]:
            present, pos = _PRIMITIVES["int8"](data, pos)
            if present < 0:
                return None, pos
            return body(data, pos)
        return nullable_struct
    raise CorruptRecordError("unknown field type %s" % t)


def _struct(fields: list[dict[str, Any]], version: int, flexible: bool) -> Reader:
    plain: list[tuple[str, Reader]] = []
    tagged: dict[int, tuple[str, Reader, Any]] = {}
    order: list[str] = []  # JSON names in declaration order, tagged fields among the others
    for f in fields:
        # a field declared with taggedVersions only exists at those versions (FieldSpec)
        if not _within(f["versions"] or f["tagged"], version):
            continue
        reader = _field_reader(f, version, flexible)
        order.append(_json_name(f["name"]))
        if _within(f["tagged"], version):
            tagged[f["tag"]] = (_json_name(f["name"]), reader, _default_json(f, version))
        else:
            plain.append((_json_name(f["name"]), reader))
    plain_t = tuple(plain)

    if not flexible:
        def read(data: bytes, pos: int) -> tuple[Any, int]:
            out: dict[str, Any] = {}
            for key, reader in plain_t:
                out[key], pos = reader(data, pos)
            return out, pos
        return read

    def read_flexible(data: bytes, pos: int) -> tuple[Any, int]:
        out: dict[str, Any] = {}
        for key, reader in plain_t:
            out[key], pos = reader(data, pos)
        count, pos = _uvarint(data, pos)
        if count:
            found: dict[str, Any] = {}
            for _ in range(count):
                tag, pos = _uvarint(data, pos)
                size, pos = _uvarint(data, pos)
                end = pos + size
                if end > len(data):
                    raise _underflow()
                entry = tagged.get(tag)
                if entry is not None:
                    # read from a copy of the field's own bytes: copies add up to the
                    # record's size however many tagged fields it holds
                    value, used = entry[1](data[pos:end], 0)
                    if used != size:
                        raise CorruptRecordError("Tagged field %d has %d byte(s) left over"
                                                 % (tag, size - used))
                    if value != entry[2]:
                        found[entry[0]] = value
                pos = end
            if found:
                # The converter writes every field in declaration order (JsonConverterGenerator)
                found.update(out)
                out = {key: found[key] for key in order if key in found}
        return out, pos
    return read_flexible


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
    flexible = spec["flexibleVersions"] is not None and version >= spec["flexibleVersions"]
    reader = _struct(spec["fields"], version, flexible)
    if not _has_double(spec["fields"]):
        return reader

    def marked(data: bytes, pos: int) -> tuple[Any, int]:
        value, end = reader(data, pos)
        return _WithDoubles(value), end
    return marked


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


_compact_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def json_text(value: Any) -> str:
    """Compact JSON, as Jackson's JsonNode.toString writes a converter's output (doubles as
    Java's Double.toString: ``1.048576E7``, not ``10485760.0``), for a decoded value or an
    object holding decoded values."""
    if isinstance(value, _WithDoubles) or (type(value) is dict and any(
            isinstance(v, _WithDoubles) for v in value.values())):
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
