"""Schema Registry's wire framing of keys and values (Confluent's serializers).

A framed key or value is the magic byte 0, the schema id as a 4-byte big-endian int, then the
body: Avro's binary encoding of the value (KafkaAvroSerializer), JSON text
(KafkaJsonSchemaSerializer), or, for Protobuf (KafkaProtobufSerializer), the message indexes
followed by the message's own bytes. The message indexes locate the message type in its .proto
file: a zigzag varint count, then that many zigzag varints (Kafka's ByteUtils.writeVarint); the
common case, the first message type ``[0]``, is written as the single byte 0 (a count of 0).

Pure functions over bytes: nothing here reads files or prints.
"""

from __future__ import annotations

from typing import List, Mapping, Tuple, Union

from .errors import CorruptRecordError
from .varint import read_varint

MAGIC = 0
HEADER_SIZE = 5  # the magic byte and the 4-byte schema id

Bytes = Union[bytes, bytearray, memoryview]


class FramingError(CorruptRecordError):
    """Bytes that are not Schema Registry framing: a wrong magic byte, too short, or message
    indexes that do not decode."""


def split_frame(data: Bytes) -> Tuple[int, memoryview]:
    """``(schema id, body)`` of a framed key or value; FramingError if ``data`` is shorter than
    the 5-byte header or does not start with the magic byte 0."""
    view = memoryview(data)
    if len(view) < HEADER_SIZE:
        raise FramingError("%d bytes, shorter than the %d-byte header (magic byte, schema id)"
                           % (len(view), HEADER_SIZE))
    if view[0] != MAGIC:
        raise FramingError("magic byte %d, expected %d" % (view[0], MAGIC))
    return int.from_bytes(view[1:HEADER_SIZE], "big", signed=True), view[HEADER_SIZE:]


def read_message_indexes(body: Bytes) -> Tuple[List[int], int]:
    """The Protobuf message indexes at the start of ``body`` and where the message starts:
    ``([0], 1)`` for the single byte 0; FramingError for a negative count, a count larger than
    the bytes left could hold, or a varint that does not end."""
    view = memoryview(body)
    end = len(view)
    try:
        count, pos = read_varint(view, 0, end)
        if count == 0:
            return [0], pos
        if count < 0 or count > end - pos:
            raise FramingError("message index count %d does not fit the %d bytes that follow"
                               % (count, end - pos))
        indexes = []
        for _ in range(count):
            index, pos = read_varint(view, pos, end)
            indexes.append(index)
    except FramingError:
        raise
    except CorruptRecordError as e:
        raise FramingError("message indexes do not decode: %s" % e) from None
    return indexes, pos


# -- Avro bodies -------------------------------------------------------------------------------

class AvroBodyError(CorruptRecordError):
    """An Avro body that does not follow its writer schema's binary encoding."""


AVRO_MAX_DEPTH = 200
# Items of zero encoded size (null, empty records) cost nothing in the body: past this many
# beyond the body's length an array is refused rather than built.
AVRO_SPARE_ITEMS = 1 << 16
_FIXED_SIZES = {"null": 0, "boolean": 1, "float": 4, "double": 8}


class _AvroWalk:
    """One pass over an Avro body, as Avro's binary encoding lays it out, checking every length,
    block count, union branch and enum symbol against the bytes there are, without building
    the value (so that a reader can then build it within bounds)."""

    def __init__(self, named: Mapping[str, object], buf: memoryview) -> None:
        self.named = named
        self.buf = buf
        self.end = len(buf)
        self.items_left = self.end + AVRO_SPARE_ITEMS

    def long(self, pos: int) -> Tuple[int, int]:
        try:
            return read_varint(self.buf, pos, self.end, 10)
        except CorruptRecordError:
            raise AvroBodyError("a long runs past the end of the body or is longer than 10 "
                                "bytes (at byte %d)" % pos) from None

    def skip(self, schema: object, pos: int, depth: int) -> int:
        if depth > AVRO_MAX_DEPTH:
            raise AvroBodyError("the value nests deeper than %d levels" % AVRO_MAX_DEPTH)
        if isinstance(schema, list):
            branch, pos = self.long(pos)
            if not 0 <= branch < len(schema):
                raise AvroBodyError("union branch %d of %d" % (branch, len(schema)))
            return self.skip(schema[branch], pos, depth + 1)
        if isinstance(schema, str):
            if schema in self.named:
                return self.skip(self.named[schema], pos, depth + 1)
            kind, spec = schema, {}
        elif isinstance(schema, dict):
            kind, spec = schema["type"], schema
            if not isinstance(kind, str) or kind in self.named:  # {"type": <another schema>}
                return self.skip(kind, pos, depth + 1)
        else:
            raise AvroBodyError("not an Avro schema: %r" % (schema,))
        if kind in _FIXED_SIZES:
            return self.take(pos, _FIXED_SIZES[kind])
        if kind in ("int", "long"):
            return self.long(pos)[1]
        if kind in ("bytes", "string"):
            size, pos = self.long(pos)
            return self.take(pos, size)
        if kind == "fixed":
            return self.take(pos, spec["size"])
        if kind == "enum":
            symbol, pos = self.long(pos)
            if not 0 <= symbol < len(spec["symbols"]):
                raise AvroBodyError("enum symbol %d of %d" % (symbol, len(spec["symbols"])))
            return pos
        if kind in ("record", "error"):
            for field in spec["fields"]:
                pos = self.skip(field["type"], pos, depth + 1)
            return pos
        if kind == "array":
            return self.blocks(pos, depth, spec["items"], None)
        if kind == "map":
            return self.blocks(pos, depth, spec["values"], "string")
        raise AvroBodyError("unknown Avro type %r" % (kind,))

    def take(self, pos: int, size: int) -> int:
        if size < 0 or size > self.end - pos:
            raise AvroBodyError("a length of %d bytes at byte %d, past the end of the body"
                                % (size, pos))
        return pos + size

    def blocks(self, pos: int, depth: int, items: object, keys: object) -> int:
        while True:
            count, pos = self.long(pos)
            if count == 0:
                return pos
            if count < 0:  # a block that also gives its size in bytes
                count = -count
                size, pos = self.long(pos)
                self.take(pos, size)
            self.items_left -= count
            if self.items_left < 0:
                raise AvroBodyError("a block of %d items, more than the body can hold" % count)
            for _ in range(count):
                if keys is not None:
                    pos = self.skip(keys, pos, depth + 1)
                pos = self.skip(items, pos, depth + 1)


def avro_body_end(schema: object, named: Mapping[str, object], body: Bytes) -> int:
    """Where the Avro value at the start of ``body`` ends, for ``schema`` as fastavro parses it
    and its named types (``named``: full name -> schema); AvroBodyError if the bytes do not
    follow the schema's binary encoding (Avro specification, "Binary Encoding")."""
    return _AvroWalk(named, memoryview(body)).skip(schema, 0, 0)
