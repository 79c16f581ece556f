"""Key/value decoders (--key-decoder, --value-decoder) and timestamp rendering.

Each decoder has two faces: ``text(bytes) -> str`` for the line formats and
``json(bytes) -> JSON value`` for JSON Lines. Null stays None in both.
"""

from __future__ import annotations

import binascii
import datetime
import math
import os
import re
from typing import Any, Callable, Dict, List, NoReturn, Optional, Tuple, Union

from ..errors import UsageError
from ..format import confluent
from ..format.utf8 import ERRORS as JAVA_UTF8

DECODER_NAMES = ("string", "hex", "base64", "int", "long", "json", "confluent")


def _string(b: bytes, offset: Optional[int] = None) -> str:
    # as Java's new String(bytes, UTF_8)
    return b.decode("utf-8", JAVA_UTF8)


def _fixed_int(size: int, name: str) -> Tuple[Callable[..., str], Callable[..., Union[int, str]]]:
    def decode(b: Bytes) -> Optional[int]:
        if len(b) != size:
            return None
        return int.from_bytes(b, "big", signed=True)

    def text(b: Bytes, offset: Optional[int] = None) -> str:
        v = decode(b)
        if v is None:
            return "<not a %d-byte %s: %s>" % (size, name, binascii.hexlify(b).decode())
        return str(v)

    def as_json(b: Bytes, offset: Optional[int] = None) -> Union[int, str]:
        v = decode(b)
        return text(b) if v is None else v

    return text, as_json


class RawNumber:
    """A JSON number whose value no float holds (``1e999``), kept as the text it was written
    with: embedding it as a float would give ``Infinity``, which is not JSON."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _reject_constant(name: str) -> NoReturn:
    raise ValueError("%s is not JSON" % name)


def _parse_float(text: str) -> Union[float, RawNumber]:
    value = float(text)
    return value if math.isfinite(value) else RawNumber(text)


def _strict_loads(b: Union[str, bytes, bytearray]) -> Any:
    """Parse ``b`` as strict JSON (RFC 8259): NaN, Infinity and -Infinity are refused, as JSON
    has no such literals; numbers too large for a float are kept as written (RawNumber)."""
    import json  # here, not at start-up: only a json decoder or a JSON output needs it
    return json.loads(b, parse_constant=_reject_constant, parse_float=_parse_float)


class StrictEncoder:
    """``encode(obj) -> str``: strict JSON only (no NaN or Infinity: ValueError), with each
    RawNumber written as its own text."""

    def __init__(self, **options: Any) -> None:
        self._token = "\x00kafkalog-raw-%s-" % os.urandom(8).hex()
        self._raws: List[str] = []
        self._options = options
        self._encode: Callable[[Any], str] = self._first_encode

    def _first_encode(self, obj: Any) -> str:
        import json  # here, not at start-up (a module-level encoder): only JSON written needs it
        self._encode = json.JSONEncoder(allow_nan=False, default=self._default,
                                        **self._options).encode
        return self._encode(obj)

    def _default(self, obj: Any) -> str:
        if isinstance(obj, RawNumber):
            self._raws.append(obj.text)
            return "%s%d" % (self._token, len(self._raws) - 1)
        raise TypeError("%s is not JSON serializable" % type(obj).__name__)

    def encode(self, obj: Any) -> str:
        try:
            text = self._encode(obj)
        finally:
            raws, self._raws = self._raws, []
        if raws:
            import json
        for i, raw in enumerate(raws):
            text = text.replace(json.dumps("%s%d" % (self._token, i)), raw, 1)
        return text


_compact = StrictEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _json_value(b: bytes, offset: Optional[int] = None) -> Any:
    """The payload parsed as strict JSON, to embed in JSON output; text that is not strict JSON
    (or nests too deep to parse) is embedded as a string, as the string decoder gives it."""
    try:
        return _strict_loads(b)
    except (ValueError, RecursionError):
        return _string(b)


def _json_text(b: bytes, offset: Optional[int] = None) -> str:
    try:
        return _compact(_strict_loads(b))
    except (ValueError, RecursionError):
        return _string(b)


class JsonDecoder:
    """``--key-decoder json`` or ``--value-decoder json`` (``side``: "key" or "value") for one
    run: as ``_json_text``/``_json_value``, a payload that is not strict JSON shows as text,
    as the string decoder shows it, and is counted with its offset, so that the run can say so
    once at its end (``note``): keys, values and (under the value decoder) header values
    apart."""

    def __init__(self, side: str) -> None:
        self.side = side
        # "key", "value", "header value" -> [count, lowest offset, highest offset]
        self.misses: Dict[str, list] = {}

    def _miss(self, what: str, offset: Optional[int]) -> None:
        m = self.misses.get(what)
        if m is None:
            self.misses[what] = [1, offset, offset]
            return
        m[0] += 1
        if offset is not None:
            m[1] = offset if m[1] is None else min(m[1], offset)
            m[2] = offset if m[2] is None else max(m[2], offset)

    def text(self, b: bytes, offset: Optional[int] = None) -> str:
        try:
            return _compact(_strict_loads(b))
        except (ValueError, RecursionError):
            self._miss(self.side, offset)
            return _string(b)

    def _value(self, b: bytes, offset: Optional[int], what: str) -> Any:
        try:
            return _strict_loads(b)
        except (ValueError, RecursionError):
            self._miss(what, offset)
            return _string(b)

    def json(self, b: bytes, offset: Optional[int] = None) -> Any:
        return self._value(b, offset, self.side)

    def header_json(self, b: bytes, offset: Optional[int] = None) -> Any:
        return self._value(b, offset, "header value")


def fallback_note(*decoders_: Any) -> Optional[str]:
    """The line a run under ``--key-decoder json``/``--value-decoder json`` ends with when some
    payloads were not JSON (None: every one was, or no decoder is a JsonDecoder), e.g. ``note:
    2 keys (offsets 4..9) and 1 value (offset 7) were not valid JSON; shown as text``."""
    parts = []
    for d in decoders_:
        if not isinstance(d, JsonDecoder):
            continue
        for what in ("key", "value", "header value"):
            m = d.misses.get(what)
            if m is None:
                continue
            count, low, high = m
            text = "%d %s%s" % (count, what, "" if count == 1 else "s")
            if low is not None:
                text += " (offset %d)" % low if low == high else " (offsets %d..%d)" % (low, high)
            parts.append(text)
    if not parts:
        return None
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    verb = "was" if len(parts) == 1 and parts[0].startswith("1 ") else "were"
    return "note: %s %s not valid JSON; shown as text" % (listed, verb)


def tracked(decoder: Any, side: str) -> Any:
    """The decoder a run uses for ``side`` ("key", "value"): ``json`` becomes a JsonDecoder of
    its own, which counts what it shows as text (``fallback_note``); any other is as given."""
    return JsonDecoder(side) if decoder == "json" else decoder


def _b64(b: Bytes, offset: Optional[int] = None) -> str:
    return binascii.b2a_base64(b, newline=False).decode("ascii")  # base64.b64encode's own


def _hex(b: Bytes, offset: Optional[int] = None) -> str:
    return b.hex()


_int_text, _int_json = _fixed_int(4, "int")
_long_text, _long_json = _fixed_int(8, "long")

# -- Schema Registry framing (--key-decoder/--value-decoder confluent) -----------------------

Bytes = Union[bytes, bytearray, memoryview]

AVRO, PROTOBUF, JSON_SCHEMA = "avro", "protobuf", "json"
# A schema file's kind by its extension, as Schema Registry's schemaType names them.
_SCHEMA_KINDS = {".avsc": AVRO, ".proto": PROTOBUF, ".json": JSON_SCHEMA}
_SCHEMA_FILE = re.compile(r"^(-?[0-9]+)(\.avsc|\.proto|\.json)$")


class Schema:
    """A writer schema from a file: ``kind`` (avro, protobuf, json), ``path``, and for Avro the
    schema parsed by fastavro. Protobuf and JSON schemas are not read: their kind says how the
    body is framed (message indexes first) or written (JSON text)."""

    __slots__ = ("kind", "path", "parsed", "named")

    def __init__(self, kind: str, path: str, parsed: Any = None,
                 named: Optional[Dict[str, Any]] = None) -> None:
        self.kind = kind
        self.path = path
        self.parsed = parsed
        self.named = named  # Avro: the schema's named types, full name -> schema


def load_schema(path: str) -> Schema:
    """The schema in ``path``: ``.proto`` Protobuf, ``.json`` JSON Schema, anything else
    (``.avsc``) Avro, parsed by fastavro (imported only here: a dump without schemas never
    loads it). UsageError for a file that cannot be read or an Avro schema that is not valid."""
    kind = _SCHEMA_KINDS.get(os.path.splitext(path)[1].lower(), AVRO)
    if kind != AVRO:
        if not os.path.isfile(path):
            raise UsageError("%s: not a schema file" % path)
        return Schema(kind, path)
    try:
        import fastavro
    except ImportError:
        raise UsageError("%s: decoding Avro needs fastavro (pip install fastavro)"
                         % path) from None
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as e:
        raise UsageError("%s: %s" % (path, e.strerror or e)) from None
    try:
        # each file its own namespace of named types: ids are often versions of one record
        named: Dict[str, Any] = {}
        import json
        parsed = fastavro.parse_schema(json.loads(text), named_schemas=named)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
        # fastavro's SchemaParseError is a ValueError; a malformed document can raise the others
        raise UsageError("%s: not a valid Avro schema: %s" % (path, e)) from None
    return Schema(AVRO, path, parsed, named)


def load_schema_dir(directory: str) -> Dict[int, Schema]:
    """``{schema id: Schema}`` for the ``<id>.avsc``, ``<id>.proto`` and ``<id>.json`` files of
    ``directory`` (other names are ignored); UsageError if it cannot be listed, or holds two
    files for one id."""
    try:
        entries = sorted(os.listdir(directory))
    except OSError as e:
        raise UsageError("%s: %s" % (directory, e.strerror or e)) from None
    schemas = {}
    for name in entries:
        m = _SCHEMA_FILE.match(name.lower())
        if m is None:
            continue
        schema_id = int(m.group(1))
        if schema_id in schemas:
            raise UsageError("%s: two schema files for id %d" % (directory, schema_id))
        schemas[schema_id] = load_schema(os.path.join(directory, name))
    return schemas


def avro_json(value: Any) -> Any:
    """A value read by fastavro as strict JSON: bytes and fixed as base64, decimals as exact
    numbers, dates, times and timestamps as ISO-8601 text, uuids as text, and the floats JSON
    has no literal for as the strings "NaN", "Infinity", "-Infinity" (as Java's Double.toString
    spells them). Unions take their branch's value, unwrapped."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: avro_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [avro_json(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return _b64(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if type(value).__name__ == "Decimal":
        return RawNumber(str(value)) if value.is_finite() else str(value)
    return str(value)  # uuid.UUID and anything else fastavro's logical types give


class Confluent:
    """The ``confluent`` decoder: Schema Registry framing, with the writer schemas known.

    ``fixed`` is the schema of every key (or value) whatever its id (--key-schema,
    --value-schema); ``by_id`` the schemas of a --schema-dir (``where`` names it). With neither,
    a body that is JSON text shows as JSON, any other as its bytes. A key or value that does not
    decode is said in its place (text ``<...: hex of the bytes>``, JSON an object with
    ``error``); the dump goes on.
    """

    def __init__(self, fixed: Optional[Schema] = None, by_id: Optional[Dict[int, Schema]] = None,
                 where: Optional[str] = None) -> None:
        self.fixed = fixed
        self.by_id = by_id
        self.where = where

    def decode(self, b: Bytes, show_bytes: Callable[[Bytes], str] = _b64) -> Dict[str, Any]:
        """The key or value as a JSON object: ``schemaId``, ``format`` (avro, json, protobuf,
        or bytes when no schema says), ``messageIndexes`` for Protobuf, and ``body`` (decoded,
        or its bytes through ``show_bytes``, base64 by default); or ``error`` and ``bytes`` (the
        whole key or value) when it does not decode, with ``schemaId`` when the header was
        read."""
        try:
            schema_id, body = confluent.split_frame(b)
        except confluent.FramingError as e:
            return {"error": "not Schema Registry framing: %s" % e, "bytes": show_bytes(b)}
        out: Dict[str, Any] = {"schemaId": schema_id}
        schema = self.fixed
        if schema is None and self.by_id is not None:
            schema = self.by_id.get(schema_id)
            if schema is None:
                out["error"] = "unknown schema id: no %d.avsc, %d.proto or %d.json in %s" % (
                    schema_id, schema_id, schema_id, self.where)
                out["bytes"] = show_bytes(b)
                return out
        kind = schema.kind if schema is not None else None
        try:
            if schema is not None and kind == AVRO:
                out["format"] = AVRO
                out["body"] = _avro_body(schema, body)
            elif kind == PROTOBUF:
                indexes, start = confluent.read_message_indexes(body)
                out["format"] = PROTOBUF
                out["messageIndexes"] = indexes
                out["body"] = show_bytes(body[start:])
            elif kind == JSON_SCHEMA or (kind is None and _looks_json(body)):
                out["format"] = JSON_SCHEMA
                out["body"] = _strict_loads(body.tobytes())
            else:
                out["format"] = "bytes"
                out["body"] = show_bytes(body)
        except (ValueError, RecursionError) as e:
            # FramingError (bad message indexes) is a ValueError too
            out = {"schemaId": schema_id, "error": str(e), "bytes": show_bytes(b)}
        return out

    def json(self, b: Bytes, offset: Optional[int] = None) -> Dict[str, Any]:
        return self.decode(b)

    def text(self, b: Bytes, offset: Optional[int] = None) -> str:
        """One line: ``schemaId: <id> avro: <JSON>`` (or ``json: <JSON>``, ``messageIndexes:
        [..] protobuf: <hex>``, ``bytes: <hex>``); ``<why: hex of the bytes>`` when it does not
        decode."""
        d = self.decode(b, _hex)
        error = d.get("error")
        if error is not None:
            if "schemaId" in d:
                error = "schemaId: %d %s" % (d["schemaId"], error)
            return "<%s: %s>" % (error, d["bytes"])
        head = "schemaId: %d " % d["schemaId"]
        fmt = d["format"]
        if fmt == PROTOBUF:
            return "%smessageIndexes: [%s] protobuf: %s" % (
                head, ",".join(map(str, d["messageIndexes"])), d["body"])
        if fmt == "bytes":
            return "%sbytes: %s" % (head, d["body"])
        try:
            return "%s%s: %s" % (head, fmt, _compact(d["body"]))
        except RecursionError:
            return "<schemaId: %d %s body nests too deep to print: %s>" % (
                d["schemaId"], fmt, _hex(b))


def _looks_json(body: memoryview) -> bool:
    """Whether a body with no schema is JSON text (KafkaJsonSchemaSerializer): an object or an
    array that parses as strict JSON. Avro and Protobuf bodies practically never do."""
    first = bytes(body[:1]).lstrip()
    if first not in (b"{", b"["):
        return False
    try:
        _strict_loads(body.tobytes())
    except (ValueError, RecursionError):
        return False
    return True


def _avro_body(schema: Schema, body: memoryview) -> Any:
    """``body`` read by fastavro with its writer schema, as JSON; ValueError when it does not
    decode or bytes are left after the value. The body is first walked against the schema
    (format.confluent.avro_body_end), so that no length or block count read from it makes
    fastavro allocate more than the body can hold."""
    import io

    import fastavro

    try:
        end = confluent.avro_body_end(schema.parsed, schema.named or {}, body)
    except confluent.AvroBodyError as e:
        raise ValueError("Avro body does not decode with %s: %s" % (schema.path, e)) from None
    if end != len(body):
        raise ValueError("Avro body does not decode with %s: %d bytes left after the value"
                         % (schema.path, len(body) - end))
    try:
        value = fastavro.schemaless_reader(io.BytesIO(body), schema.parsed)
    except Exception as e:  # noqa: BLE001 - fastavro fails on bad bytes with many error types
        # (text that is not UTF-8, for one); its messages may name the stream object
        reason = re.sub(r" from <[^>]*>", "", str(e)) or type(e).__name__
        raise ValueError("Avro body does not decode with %s: %s" % (schema.path, reason)) from None
    return avro_json(value)


def confluent_decoder(schema_file: Optional[str] = None, schema_dir: Optional[str] = None,
                      dir_schemas: Optional[Dict[int, Schema]] = None) -> Confluent:
    """The ``confluent`` decoder for keys or for values: with ``schema_file`` (its schema for
    every id), or the schemas of ``schema_dir`` (``dir_schemas``, loaded once for both sides),
    or neither. UsageError if the schema file cannot be used."""
    fixed = load_schema(schema_file) if schema_file is not None else None
    return Confluent(fixed, dir_schemas, schema_dir)


_plain_confluent = Confluent()
# A decoder as the writers take it: a name of DECODER_NAMES, a Confluent with its schemas, or
# a run's JsonDecoder. Each function of one takes the bytes and, optionally, the record's offset.
Decoder = Union[str, Confluent, JsonDecoder]

TEXT = {"string": _string, "hex": _hex, "base64": _b64, "int": _int_text, "long": _long_text,
        "json": _json_text, "confluent": _plain_confluent.text}
JSON = {"string": _string, "hex": _hex, "base64": _b64, "int": _int_json, "long": _long_json,
        "json": _json_value, "confluent": _plain_confluent.json}


def text_function(decoder: Decoder) -> Callable[[bytes, int], str]:
    """``(bytes, offset) -> str`` of a decoder: a name of DECODER_NAMES, or a Confluent decoder."""
    return decoder.text if isinstance(decoder, (Confluent, JsonDecoder)) else TEXT[decoder]


def json_function(decoder: Decoder) -> Callable[[bytes, int], Any]:
    """``(bytes, offset) -> JSON value`` of a decoder: a name of DECODER_NAMES, or a Confluent
    decoder."""
    return decoder.json if isinstance(decoder, (Confluent, JsonDecoder)) else JSON[decoder]


def header_json_function(decoder: Decoder) -> Callable[[bytes, int], Any]:
    """How header values show in JSON under the value decoder ``decoder``: as it does, except
    that Schema Registry frames only keys and values, so headers under ``confluent`` show as
    strings."""
    if isinstance(decoder, Confluent) or decoder == "confluent":
        return JSON["string"]
    if isinstance(decoder, JsonDecoder):
        return decoder.header_json
    return JSON[decoder]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def iso_time(ms: int) -> Optional[str]:
    """Epoch milliseconds as an ISO-8601 UTC time, or None for -1 and out-of-range values."""
    if ms < 0:
        return None
    try:
        t = _EPOCH + datetime.timedelta(milliseconds=ms)
    except OverflowError:
        return None
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)
