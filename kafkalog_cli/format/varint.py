"""Kafka's varints: protobuf base-128 groups, zigzag-encoded (ByteUtils.readVarint/readVarlong).

The record decoder inlines the one-byte case; these functions take the rest.
"""

from __future__ import annotations

from typing import Tuple, Union

from .errors import CorruptRecordError

Bytes = Union[bytes, bytearray, memoryview]


def read_varint(buf: Bytes, pos: int, end: int, max_bytes: int = 5) -> Tuple[int, int]:
    """Decode a zigzag varint at ``pos``; return (value, next position).

    An int32 varint may use 5 bytes and a varlong 10, as Kafka allows; a longer one, or one that
    runs past ``end``, is an error. Excess high bits of the last group are dropped like Kafka does.
    """
    raw = 0
    shift = 0
    for i in range(max_bytes):
        if pos >= end:
            raise CorruptRecordError("varint runs past the end of the record data")
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            if max_bytes == 5:
                raw &= 0xFFFFFFFF
            else:
                raw &= 0xFFFFFFFFFFFFFFFF
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise CorruptRecordError("varint longer than %d bytes" % max_bytes)


def read_varlong(buf: Bytes, pos: int, end: int) -> Tuple[int, int]:
    return read_varint(buf, pos, end, 10)


def read_uvarint(buf: Bytes, pos: int, end: int) -> Tuple[int, int]:
    """An unsigned varint (no zigzag), as used by Kafka's flexible message versions."""
    raw = 0
    shift = 0
    for _ in range(5):
        if pos >= end:
            raise CorruptRecordError("varint runs past the end of the data")
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return raw, pos
        shift += 7
    raise CorruptRecordError("unsigned varint longer than 5 bytes")


def encode_varint(value: int) -> bytes:
    """Zigzag-encode ``value`` (int32 or int64 range) as bytes."""
    raw = (value << 1) ^ (value >> 63)
    raw &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)
