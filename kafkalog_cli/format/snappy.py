"""Snappy compression as Google's C++ snappy 1.1.10 writes it (snappy-java's native library,
which Kafka's producers and log cleaner use): the same hash table, match search and skipping
(``CompressFragment``), the same literal and copy encodings (``EmitLiteral``, ``EmitCopy``),
so the bytes are equal to snappy-java's, not only readable by it. Decompression needs no such
care: cramjam reads any valid stream."""

from __future__ import annotations

from typing import Callable, List, Optional

from .speedups import speedups

_BLOCK = 1 << 16          # kBlockSize: the input is compressed a fragment at a time
_MAX_TABLE = 1 << 14      # kMaxHashTableSize
_MIN_TABLE = 1 << 8       # kMinHashTableSize
_MARGIN = 15              # kInputMarginBytes
_MAGIC = 0x1E35A7BD


def _table_size(n: int) -> int:
    """CalculateTableSize."""
    if n > _MAX_TABLE:
        return _MAX_TABLE
    if n < _MIN_TABLE:
        return _MIN_TABLE
    return 2 << ((n - 1).bit_length() - 1)


def _literal(out: bytearray, data: bytes, start: int, end: int) -> None:
    """EmitLiteral."""
    n = end - start - 1
    if n < 60:
        out.append(n << 2)
    else:
        count = ((n.bit_length() - 1) >> 3) + 1
        out.append((59 + count) << 2)
        out += n.to_bytes(count, "little")
    out += data[start:end]


def _copy_at_most_64(out: bytearray, offset: int, length: int) -> None:
    """EmitCopyAtMost64."""
    if length < 12 and offset < 2048:
        out.append(1 | ((length - 4) << 2) | ((offset >> 8) << 5))
        out.append(offset & 0xFF)
    else:
        out.append(2 | ((length - 1) << 2))
        out += offset.to_bytes(2, "little")


def _copy(out: bytearray, offset: int, length: int) -> None:
    """EmitCopy."""
    if length >= 12:
        while length >= 68:
            _copy_at_most_64(out, offset, 64)
            length -= 64
        if length > 64:
            _copy_at_most_64(out, offset, 60)
            length -= 60
    _copy_at_most_64(out, offset, length)


def _match_length(data: bytes, s1: int, s2: int, limit: int) -> int:
    """FindMatchLength: how many bytes from ``s2`` (up to ``limit``) equal those from
    ``s1``."""
    n = 0
    while s2 + n + 8 <= limit and data[s1 + n:s1 + n + 8] == data[s2 + n:s2 + n + 8]:
        n += 8
    while s2 + n < limit and data[s1 + n] == data[s2 + n]:
        n += 1
    return n


def _fragment(out: bytearray, data: bytes) -> None:
    """CompressFragment of ``data`` (at most 64 KiB)."""
    n = len(data)
    size = _table_size(n)
    table: List[int] = [0] * size
    shift_mask = 2 * (size - 1)

    def load(p: int) -> int:
        return int.from_bytes(data[p:p + 4], "little")

    def slot(v: int) -> int:
        return ((((v * _MAGIC) & 0xFFFFFFFF) >> 17) & shift_mask) >> 1

    ip = 0
    if n >= _MARGIN:
        limit = n - _MARGIN
        while True:
            next_emit = ip
            ip += 1
            skip = 32
            candidate = -1
            if limit - ip >= 16:
                for i in range(16):
                    dword = load(ip + i)
                    e = slot(dword)
                    c = table[e]
                    table[e] = ip + i
                    if load(c) == dword:
                        candidate = c
                        _literal(out, data, next_emit, ip + i)
                        ip += i
                        break
                else:
                    ip += 16
                    skip += 16
            if candidate < 0:
                while True:
                    dword = load(ip)
                    e = slot(dword)
                    step = skip >> 5
                    skip += step
                    next_ip = ip + step
                    if next_ip > limit:
                        if next_emit < n:
                            _literal(out, data, next_emit, n)
                        return
                    c = table[e]
                    table[e] = ip
                    if dword == load(c):
                        candidate = c
                        break
                    ip = next_ip
                _literal(out, data, next_emit, ip)
            while True:
                matched = 4 + _match_length(data, candidate + 4, ip + 4, n)
                _copy(out, ip - candidate, matched)
                ip += matched
                if ip >= limit:
                    if ip < n:
                        _literal(out, data, ip, n)
                    return
                table[slot(load(ip - 1))] = ip - 1
                dword = load(ip)
                e = slot(dword)
                candidate = table[e]
                table[e] = ip
                if dword != load(candidate):
                    break
    if ip < n:
        _literal(out, data, ip, n)


def compress_raw(data: bytes) -> bytes:
    """snappy::RawCompress: the uncompressed length (a varint), then each 64 KiB fragment.
    ``_speedups.snappy_compress_raw`` is its C mirror."""
    if _c_compress is not None:
        return _c_compress(data)
    return compress_raw_python(data)


def compress_raw_python(data: bytes) -> bytes:
    out = bytearray()
    n = len(data)
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            break
    for start in range(0, len(data), _BLOCK):
        _fragment(out, data[start:start + _BLOCK])
    return bytes(out)


# the C mirror (format/speedups.py)
_c_compress: Optional[Callable[[bytes], bytes]] = (
    None if speedups is None else speedups.snappy_compress_raw)


__all__ = ["compress_raw", "compress_raw_python"]
