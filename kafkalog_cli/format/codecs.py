"""Decompression of Kafka's four codecs, every call bounded by a size limit.

Framing follows what Kafka's Java clients write and read:
- gzip: RFC 1952, concatenated members accepted, bytes after the last member ignored;
- snappy: snappy-java's "xerial" stream (16-byte header, then [int32 length][raw block]...) or,
  when the header is absent, one raw snappy block;
- lz4: the LZ4 frame subset of Kafka's Lz4BlockInputStream, including the wrong header
  checksum that magic-0 messages carry (not checked for magic 0, as Kafka does);
- zstd: streaming frames without a content size (zstd-jni's output).
"""

import importlib
import struct

from .errors import CorruptRecordError, LimitExceededError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_MAGIC_INT = struct.unpack(">i", _XERIAL_MAGIC[:4])[0]
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK_SIZES = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}
_ZSTD_READ = 1 << 16


def _lib(name):
    """Import a codec library on first use: most runs need one codec or none, and start-up
    time matters to a command run from cron and shell loops."""
    return importlib.import_module(name)


def _gzip_lib():
    try:  # ISA-L inflates gzip about twice as fast as zlib; zlib is the fallback.
        return _lib("isal.isal_zlib")
    except ImportError:  # pragma: no cover - isal is a declared dependency
        return _lib("zlib")


def codec_name(codec_id):
    if 0 <= codec_id < len(CODEC_NAMES):
        return CODEC_NAMES[codec_id]
    return "unknown(%d)" % codec_id


def _too_big(limit):
    return LimitExceededError(
        "decompressed size exceeds the limit of %d bytes (see --max-message-size)" % limit)


# -- xxHash32, needed only for the 2..10 bytes of an LZ4 frame descriptor ----------------------
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data, seed=0):
    """xxHash32 of ``data``; pure Python, meant for short inputs."""
    data = bytes(data)
    n = len(data)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while i + 16 <= n:
            a, b, c, d = struct.unpack_from("<4I", data, i)
            v1 = (_rotl((v1 + a * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + b * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + c * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + d * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h = (_rotl((h + k * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# -- gzip ------------------------------------------------------------------------------------

def inflate_gzip(data, limit):
    out = []
    total = 0
    data = bytes(data)
    zlib_module = _gzip_lib()
    while True:
        d = zlib_module.decompressobj(31)
        chunk = data
        while True:
            try:
                piece = d.decompress(chunk, limit + 1 - total)
            except Exception as e:  # zlib.error / isal error
                raise CorruptRecordError("corrupt gzip stream: %s" % e) from None
            total += len(piece)
            if total > limit:
                raise _too_big(limit)
            out.append(piece)
            if d.eof:
                break
            chunk = d.unconsumed_tail
            if not chunk:
                raise CorruptRecordError("corrupt gzip stream: premature end of stream")
        rest = d.unused_data
        # Java's GZIPInputStream goes on into a following member and ignores anything else.
        if len(rest) < 10 or rest[:3] != b"\x1f\x8b\x08":
            break
        data = rest
    return b"".join(out)


# -- snappy ----------------------------------------------------------------------------------

def _snappy_raw_length(block):
    """The uncompressed length stored in a raw snappy block's varint preamble."""
    result = 0
    shift = 0
    for i in range(min(5, len(block))):
        b = block[i]
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result
        shift += 7
    raise CorruptRecordError("corrupt snappy block: bad length preamble")


def _snappy_block(block, limit):
    if _snappy_raw_length(block) > limit:
        raise _too_big(limit)
    try:
        return bytes(_lib("cramjam").snappy.decompress_raw(block))
    except Exception as e:
        raise CorruptRecordError("corrupt snappy block: %s" % e) from None


def inflate_snappy(data, limit):
    data = bytes(data)
    if len(data) < 16 or data[:8] != _XERIAL_MAGIC:
        if not data:
            raise CorruptRecordError("corrupt snappy stream: empty input")
        return _snappy_block(data, limit)
    out = []
    total = 0
    pos = 16
    end = len(data)
    while end - pos >= 4:
        (n,) = struct.unpack_from(">i", data, pos)
        if n == _XERIAL_MAGIC_INT:  # a concatenated stream: skip its 16-byte header
            pos += 16
            continue
        pos += 4
        if n < 0 or n > 512 << 20:
            raise CorruptRecordError("corrupt snappy stream: chunk length %d" % n)
        if pos + n > end:
            raise CorruptRecordError("corrupt snappy stream: chunk of %d bytes truncated" % n)
        piece = _snappy_block(data[pos:pos + n], limit - total)
        total += len(piece)
        out.append(piece)
        pos += n
    return b"".join(out)


# -- lz4 -------------------------------------------------------------------------------------

def inflate_lz4(data, limit, magic=2):
    data = bytes(data)
    end = len(data)
    if end < 7 or data[:4] != _LZ4_MAGIC:
        raise CorruptRecordError("corrupt lz4 stream: not an LZ4 frame")
    flg = data[4]
    bd = data[5]
    if flg >> 6 != 1:
        raise CorruptRecordError("corrupt lz4 stream: unsupported frame version")
    if flg & 0x03:
        raise CorruptRecordError("corrupt lz4 stream: reserved or dictionary-id bits set")
    if not flg & 0x20:
        raise CorruptRecordError("corrupt lz4 stream: linked blocks are not supported")
    if bd & 0x8F or (bd >> 4) & 7 not in _LZ4_BLOCK_SIZES:
        raise CorruptRecordError("corrupt lz4 stream: bad block descriptor")
    max_block = _LZ4_BLOCK_SIZES[(bd >> 4) & 7]
    has_block_checksum = bool(flg & 0x10)
    hc_pos = 6 + (8 if flg & 0x08 else 0)
    if hc_pos >= end:
        raise CorruptRecordError("corrupt lz4 stream: stream ended prematurely")
    # Kafka's magic-0 writers hashed the magic bytes too; Kafka skips the check for them.
    if magic > 0 and data[hc_pos] != (xxh32(data[4:hc_pos]) >> 8) & 0xFF:
        raise CorruptRecordError("corrupt lz4 stream: stream frame descriptor corrupted")
    pos = hc_pos + 1
    out = []
    total = 0
    while True:
        if pos + 4 > end:
            raise CorruptRecordError("corrupt lz4 stream: stream ended prematurely")
        (size,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if size == 0:
            break  # EndMark; a content checksum, if any, is not verified (as in Kafka)
        stored = size & 0x80000000
        size &= 0x7FFFFFFF
        if size > max_block:
            raise CorruptRecordError("corrupt lz4 stream: block of %d bytes exceeds the maximum" % size)
        if pos + size > end:
            raise CorruptRecordError("corrupt lz4 stream: stream ended prematurely")
        block = data[pos:pos + size]
        pos += size + (4 if has_block_checksum else 0)
        if stored:
            piece = block
        else:
            try:
                piece = _lib("lz4.block").decompress(block, uncompressed_size=max_block)
            except Exception as e:
                raise CorruptRecordError("corrupt lz4 block: %s" % e) from None
        total += len(piece)
        if total > limit:
            raise _too_big(limit)
        out.append(piece)
    return b"".join(out)


# -- zstd ------------------------------------------------------------------------------------

class _Zstd:
    """One decompression context, reused for every batch (2-3x faster than a new one)."""

    def __init__(self):
        self._zstandard = _lib("zstandard")
        self._dctx = self._zstandard.ZstdDecompressor()

    def inflate(self, data, limit):
        zstandard = self._zstandard
        out = []
        total = 0
        try:
            reader = self._dctx.stream_reader(data, read_across_frames=True)
            while True:
                piece = reader.read(_ZSTD_READ)
                if not piece:
                    break
                total += len(piece)
                if total > limit:
                    raise _too_big(limit)
                out.append(piece)
        except zstandard.ZstdError as e:
            raise CorruptRecordError("corrupt zstd stream: %s" % e) from None
        if not out:
            if len(data) < 4 or bytes(data[:4]) != b"\x28\xb5\x2f\xfd":
                raise CorruptRecordError("corrupt zstd stream: not a zstd frame")
        return out[0] if len(out) == 1 else b"".join(out)


class Inflater:
    """Decompresses record data for any codec, within a byte limit per call."""

    def __init__(self):
        self._zstd = None

    def inflate(self, codec, data, limit, magic=2):
        if codec == GZIP:
            return inflate_gzip(data, limit)
        if codec == SNAPPY:
            return inflate_snappy(data, limit)
        if codec == LZ4:
            return inflate_lz4(data, limit, magic)
        if codec == ZSTD:
            if magic < 2:
                raise CorruptRecordError("zstd is not allowed for message format v%d" % magic)
            if self._zstd is None:
                self._zstd = _Zstd()
            return self._zstd.inflate(data, limit)
        raise CorruptRecordError("unknown compression type id %d" % codec)
