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

from typing import List, Tuple, Union

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
