"""Decompression of Kafka's four codecs, every call bounded by a size limit.

Framing follows what Kafka's Java clients write and read:
- gzip: RFC 1952, concatenated members accepted, bytes after the last member ignored;
- snappy: snappy-java's "xerial" stream (16-byte header, then [int32 length][raw block]...) or,
  when the header is absent, one raw snappy block;
- lz4: the LZ4 frame subset of Kafka's Lz4BlockInputStream, including the wrong header
  checksum that magic-0 messages carry (not checked for magic 0, as Kafka does);
- zstd: streaming frames without a content size (zstd-jni's output).

Bounds: no codec is asked for more than the limit allows, and none is trusted to allocate what a
header claims: each reads its output in steps (gzip 1 MiB per call, an LZ4 block, 64 KiB of
zstd), a snappy length preamble and a zstd content size are checked against the limit before
anything is inflated, and a zstd frame may ask for a window no larger than zstd's default
decoder limit, which is what the broker's zstd-jni accepts (128 MiB: the decoder reserves the
window, but touches only what it writes, so resident memory stays about the output). Output
beyond a few MiB is gathered in one anonymous mapping that grows in place, so that inflating N
bytes holds about N bytes, not the pieces plus their join.
"""

from __future__ import annotations

import importlib
import mmap
import struct
import threading
from types import ModuleType
from typing import Dict, List, Optional, Tuple, Union

from .errors import CorruptRecordError, LimitExceededError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_MAGIC_INT = struct.unpack(">i", _XERIAL_MAGIC[:4])[0]
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK_SIZES = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}
_ZSTD_READ = 1 << 16
# ZSTD_WINDOWLOG_LIMIT_DEFAULT: the largest window zstd-jni (and so a Kafka consumer or broker)
# decodes; a producer at level 22 writes 128 MiB windows.
_ZSTD_MAX_WINDOW = 1 << 27
# no content size (or an error) in the header
_ZSTD_UNKNOWN_SIZES = (0, (1 << 64) - 1, (1 << 64) - 2)
_GZIP_STEP = 1 << 20  # most output one gzip call returns
_GZIP_MAX_FEED = 1 << 20  # input fed to zlib per call; the first member is fed this much at once,
_GZIP_FIRST_FEED = 1 << 10  # later members this much first, doubling: what zlib copies of the
# input left at each member's end (unused_data) stays small, however many members follow
_JOIN_MAX = 4 << 20  # outputs up to this size are joined from their pieces

Bytes = Union[bytes, bytearray, memoryview]
# Inflated bytes: bytes, or for a large output the anonymous mapping that holds it (slicing it
# gives bytes, as for bytes).
Inflated = Union[bytes, mmap.mmap]


_LIBS: Dict[str, ModuleType] = {}


def _lib(name: str) -> ModuleType:
    """Import a codec library on first use: most runs need one codec or none, and start-up
    time matters to a command run from cron and shell loops. Kept once imported (a batch
    costs a dictionary look-up, not an import)."""
    module = _LIBS.get(name)
    if module is None:
        module = _LIBS[name] = importlib.import_module(name)
    return module


def _gzip_lib() -> ModuleType:
    try:  # ISA-L inflates gzip about twice as fast as zlib; zlib is the fallback.
        return _lib("isal.isal_zlib")
    except ImportError:  # pragma: no cover - isal is a declared dependency
        return _lib("zlib")


def codec_name(codec_id: int) -> str:
    if 0 <= codec_id < len(CODEC_NAMES):
        return CODEC_NAMES[codec_id]
    return "unknown(%d)" % codec_id


def _too_big(limit: int) -> LimitExceededError:
    return LimitExceededError(
        "decompressed size exceeds the limit of %d bytes (see --max-message-size)" % limit)


class _Output:
    """Inflated bytes gathered under a limit (LimitExceededError past it).

    Small outputs are kept as pieces and joined at the end. Past _JOIN_MAX bytes the pieces move
    into an anonymous mapping, written in place from then on and grown with mremap (no copy):
    the output is then held once, plus the piece being added, never twice. ``result()`` is
    bytes or, for a large output, the mmap itself (slicing it gives bytes, as for bytes).
    """

    __slots__ = ("limit", "total", "pieces", "map")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self.pieces: List[bytes] = []
        self.map: Optional[mmap.mmap] = None

    def room(self) -> int:
        return self.limit - self.total

    def add(self, piece: bytes) -> None:
        n = len(piece)
        if n > self.limit - self.total:
            raise _too_big(self.limit)
        if self.map is not None:
            self._reserve(self.map, n)
            self.map[self.total:self.total + n] = piece
            self.total += n
            return
        self.pieces.append(piece)
        self.total += n
        if self.total > _JOIN_MAX and hasattr(mmap.mmap, "resize"):
            self._spill()

    def reserve_view(self, n: int) -> memoryview:
        """A writable view of the next ``n`` bytes of the output (in the mapping), which then
        count as written; for codecs that inflate into a buffer."""
        if n > self.limit - self.total:
            raise _too_big(self.limit)
        m = self.map if self.map is not None else self._spill(n)
        self._reserve(m, n)
        start = self.total
        self.total += n
        return memoryview(m)[start:start + n]

    def _spill(self, extra: int = 0) -> mmap.mmap:
        size = min(self.limit, max(2 * (self.total + extra), 4 * _JOIN_MAX))
        try:
            m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        except (OSError, ValueError, OverflowError):
            m = mmap.mmap(-1, size)
        pos = 0
        pieces = self.pieces
        pieces.reverse()
        while pieces:  # each piece is let go as soon as it is copied
            piece = pieces.pop()
            m[pos:pos + len(piece)] = piece
            pos += len(piece)
            del piece
        self.map = m
        return m

    def _reserve(self, m: mmap.mmap, n: int) -> None:
        need = self.total + n
        if need > len(m):
            m.resize(min(self.limit, max(need, 2 * len(m))))

    def result(self) -> Inflated:
        if self.map is None:
            pieces = self.pieces
            if len(pieces) == 1:
                return pieces[0]
            return b"".join(pieces)
        try:
            self.map.resize(self.total)
            return self.map
        except (OSError, SystemError, ValueError, TypeError):  # pragma: no cover - no mremap
            return self.map[:self.total]


# -- xxHash32, needed only for the 2..10 bytes of an LZ4 frame descriptor ----------------------
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: Bytes, seed: int = 0) -> int:
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

def inflate_gzip(data: Bytes, limit: int) -> Inflated:
    zlib_module = _gzip_lib()
    view = memoryview(data)
    end = len(view)
    out = _Output(limit)
    pos = 0
    feed = _GZIP_MAX_FEED  # the first member (usually the only one) is fed in large steps
    while True:
        d = zlib_module.decompressobj(31)
        chunk = None
        while True:
            if not chunk:
                chunk = view[pos:pos + feed]
                pos += len(chunk)
                feed = min(2 * feed, _GZIP_MAX_FEED)
            want = min(_GZIP_STEP, out.room() + 1)
            try:
                piece = d.decompress(chunk, want)
            except Exception as e:  # zlib.error / isal error
                raise CorruptRecordError("corrupt gzip stream: %s" % e) from None
            out.add(piece)
            if d.eof:
                break
            chunk = d.unconsumed_tail
            if not chunk and len(piece) < want and pos >= end:
                raise CorruptRecordError("corrupt gzip stream: premature end of stream")
        # What follows the member: fed to zlib but not used by it (at most one feed's worth).
        pos -= len(d.unused_data)
        feed = _GZIP_FIRST_FEED  # further members: small steps, so little is copied per member
        # Java's GZIPInputStream goes on into a following member and ignores anything else.
        if end - pos < 10 or view[pos:pos + 3] != b"\x1f\x8b\x08":
            break
    return out.result()


# -- snappy ----------------------------------------------------------------------------------

def _snappy_raw_length(block: bytes) -> int:
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


def _xerial_chunks(data: bytes) -> List[Tuple[int, int]]:
    """(start, end) of each raw block of a xerial stream."""
    chunks = []
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
        chunks.append((pos, pos + n))
        pos += n
    return chunks


def inflate_snappy(data: Bytes, limit: int) -> Inflated:
    data = bytes(data)  # cramjam reads bytes faster than a memoryview
    if len(data) < 16 or data[:8] != _XERIAL_MAGIC:
        if not data:
            raise CorruptRecordError("corrupt snappy stream: empty input")
        chunks = [(0, len(data))]
    else:
        chunks = _xerial_chunks(data)
    # Every block states its length up front: the whole output is known (and refused when
    # over the limit) before anything is inflated.
    lengths = [_snappy_raw_length(data[a:min(b, a + 5)]) for a, b in chunks]
    total = sum(lengths)
    if total > limit:
        raise _too_big(limit)
    snappy = _lib("cramjam").snappy
    if len(chunks) == 1 and total <= _JOIN_MAX:
        try:
            return bytes(snappy.decompress_raw(data if chunks[0][0] == 0 else
                                               data[chunks[0][0]:chunks[0][1]]))
        except Exception as e:
            raise CorruptRecordError("corrupt snappy block: %s" % e) from None
    out = _Output(limit)
    large = total > _JOIN_MAX
    for (a, b), n in zip(chunks, lengths):
        try:
            if large:  # inflated in place, into the output's mapping
                target = out.reserve_view(n)
                got = snappy.decompress_raw_into(data[a:b], target)
                target.release()
                if got != n:
                    raise CorruptRecordError("corrupt snappy block: %d bytes, not %d" % (got, n))
            else:
                out.add(bytes(snappy.decompress_raw(data[a:b])))
        except CorruptRecordError:
            raise
        except Exception as e:
            raise CorruptRecordError("corrupt snappy block: %s" % e) from None
    return out.result()


# -- lz4 -------------------------------------------------------------------------------------

def inflate_lz4(data: Bytes, limit: int, magic: int = 2) -> Inflated:
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
    if magic > 0 and data[hc_pos] != _lz4_header_checksum(data[4:hc_pos]):
        raise CorruptRecordError("corrupt lz4 stream: stream frame descriptor corrupted")
    pos = hc_pos + 1
    # One block, then the EndMark: Kafka's batches of up to a block's size (the common case)
    # are inflated without gathering pieces.
    if pos + 4 <= end:
        (size,) = struct.unpack_from("<I", data, pos)
        after = pos + 4 + (size & 0x7FFFFFFF) + (4 if has_block_checksum else 0)
        if (0 < size & 0x7FFFFFFF <= max_block and after + 4 <= end
                and data[after:after + 4] == b"\x00\x00\x00\x00"):
            piece = _lz4_block(data[pos + 4:pos + 4 + (size & 0x7FFFFFFF)],
                               size & 0x80000000, max_block)
            if len(piece) > limit:
                raise _too_big(limit)
            return piece
    out = _Output(limit)
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
            raise CorruptRecordError("corrupt lz4 stream: block of %d bytes exceeds the maximum"
                                     % size)
        if pos + size > end:
            raise CorruptRecordError("corrupt lz4 stream: stream ended prematurely")
        block = data[pos:pos + size]
        pos += size + (4 if has_block_checksum else 0)
        out.add(_lz4_block(block, stored, max_block))
    return out.result()


def _lz4_block(block: bytes, stored: int, max_block: int) -> bytes:
    """An LZ4 frame's data block: as it is when stored uncompressed (the size's high bit),
    else inflated (at most ``max_block`` bytes)."""
    if stored:
        return block
    try:
        return _lib("lz4.block").decompress(block, uncompressed_size=max_block)
    except Exception as e:
        raise CorruptRecordError("corrupt lz4 block: %s" % e) from None


_LZ4_HC: Dict[bytes, int] = {}


def _lz4_header_checksum(descriptor: Bytes) -> int:
    """The header checksum byte an LZ4 frame descriptor (FLG, BD and an optional content size)
    must carry: the second byte of its xxHash32. Frames of one producer repeat a few
    descriptors: each is hashed once (a few hundred kept)."""
    key = bytes(descriptor)
    hc = _LZ4_HC.get(key)
    if hc is None:
        if len(_LZ4_HC) >= 256:
            _LZ4_HC.clear()
        hc = _LZ4_HC[key] = (xxh32(key) >> 8) & 0xFF
    return hc


# -- zstd ------------------------------------------------------------------------------------

class _Zstd:
    """One decompression context, reused for every batch (2-3x faster than a new one each
    time)."""

    def __init__(self) -> None:
        self._zstandard = _lib("zstandard")
        self._dctx = self._zstandard.ZstdDecompressor(max_window_size=_ZSTD_MAX_WINDOW)

    def inflate(self, data: Bytes, limit: int) -> Inflated:
        zstandard = self._zstandard
        # A frame's window is memory the decoder reserves before any output: what zstd-jni
        # accepts is accepted (only the part written to becomes resident), no more.
        try:
            params = zstandard.get_frame_parameters(data)
        except zstandard.ZstdError:
            params = None  # not a frame: the decoder says how
        if params is not None and not params.dict_id:  # (Kafka writes no dictionary frames)
            if params.content_size not in _ZSTD_UNKNOWN_SIZES and params.content_size > limit:
                raise _too_big(limit)
            if params.window_size > _ZSTD_MAX_WINDOW:
                raise _too_big(limit)
            size = params.content_size
            if size not in _ZSTD_UNKNOWN_SIZES and size <= _JOIN_MAX:
                # One frame that states its size (what most producers other than Kafka's own
                # Java client write): inflated in one call; anything else the stream below
                # reads (and says what is wrong).
                try:
                    whole = self._dctx.decompress(data, allow_extra_data=False)
                except zstandard.ZstdError:
                    whole = None
                # (a frame decoded whole, nothing after it: _zstd_frames_problem has nothing
                # to find)
                if whole is not None and len(whole) == size:
                    return whole
        out = _Output(limit)
        try:
            reader = self._dctx.stream_reader(data, read_across_frames=True)
            while True:
                piece = reader.read(min(_ZSTD_READ, out.room() + 1))
                if not piece:
                    break
                out.add(piece)
        except zstandard.ZstdError as e:
            if "too much memory" in str(e):  # a later frame's window
                raise _too_big(limit) from None
            raise CorruptRecordError("corrupt zstd stream: %s" % e) from None
        if not out.total:
            if len(data) < 4 or bytes(data[:4]) != b"\x28\xb5\x2f\xfd":
                raise CorruptRecordError("corrupt zstd stream: not a zstd frame")
        problem = _zstd_frames_problem(data)
        if problem is not None:
            raise CorruptRecordError("corrupt zstd stream: %s" % problem)
        return out.result()


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_FCS_SIZES = (0, 2, 4, 8)
_ZSTD_DICT_ID_SIZES = (0, 1, 2, 4)


def _zstd_frames_problem(data: Bytes) -> Optional[str]:
    """Why ``data`` is not a run of whole zstd frames (RFC 8878), or None.

    The decoder stops quietly where its input ends, even inside a frame; zstd-jni, which Kafka
    reads with, fails on a source that ends before its frame does ("truncated source"). Walks
    the frame headers and block headers only (the decoder has checked the rest).
    """
    pos = 0
    end = len(data)
    while pos < end:
        if end - pos < 4:
            return "%d stray bytes after the last frame" % (end - pos)
        magic = int.from_bytes(data[pos:pos + 4], "little")
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # a skippable frame
            if end - pos < 8:
                return "truncated skippable frame"
            pos += 8 + int.from_bytes(data[pos + 4:pos + 8], "little")
            if pos > end:
                return "truncated skippable frame"
            continue
        if 0xFD2FB522 <= magic <= 0xFD2FB527:
            return None  # a pre-1.0 frame, whose layout differs: left to the decoder
        if magic != _ZSTD_MAGIC:
            return "bytes after the last frame are not a frame"
        if end - pos < 5:
            return "truncated frame header"
        fhd = data[pos + 4]
        single = fhd & 0x20
        fcs = _ZSTD_FCS_SIZES[fhd >> 6] or (1 if single else 0)
        pos += 5 + (0 if single else 1) + _ZSTD_DICT_ID_SIZES[fhd & 3] + fcs
        while True:
            if end - pos < 3:
                return "truncated frame (it ends before its last block)"
            header = int.from_bytes(data[pos:pos + 3], "little")
            kind = (header >> 1) & 3
            pos += 3 + (1 if kind == 1 else header >> 3)
            if pos > end:
                return "truncated block"
            if header & 1:
                break
        if fhd & 4:
            pos += 4
            if pos > end:
                return "truncated content checksum"
    return None


# One zstd context per thread, shared by every Inflater: a context keeps the window of the
# largest frame it has read (up to _ZSTD_MAX_WINDOW), which one reader of a file holds once
# however many Inflaters it uses.
_ZSTD_CONTEXTS = threading.local()


class Inflater:
    """Decompresses record data for any codec, within a byte limit per call."""

    def inflate(self, codec: int, data: Bytes, limit: int, magic: int = 2) -> Inflated:
        if codec == GZIP:
            return inflate_gzip(data, limit)
        if codec == SNAPPY:
            return inflate_snappy(data, limit)
        if codec == LZ4:
            return inflate_lz4(data, limit, magic)
        if codec == ZSTD:
            if magic < 2:
                raise CorruptRecordError("zstd is not allowed for message format v%d" % magic)
            zstd = getattr(_ZSTD_CONTEXTS, "zstd", None)
            if zstd is None:
                zstd = _ZSTD_CONTEXTS.zstd = _Zstd()
            return zstd.inflate(data, limit)
        raise CorruptRecordError("unknown compression type id %d" % codec)
