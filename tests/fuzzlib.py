"""Shared pieces of the fuzz harness (tests/format/test_fuzz_format.py,
tests/log/test_fuzz_aux_files.py, tests/cli/test_fuzz.py and fuzz/run.py).

* Seeds: real files to mutate. Segments of every message format and codec written by
  kafka-python (``kafkagen``), nested compression and decompression bombs compressed here with
  the codec libraries themselves, the indexes ``indexgen`` builds (the broker's rules over
  kafka-python's reading), and the shipped fixtures.
* Mutators: a mutation is a list of ``(op, a, b)`` triples of plain integers, so that hypothesis
  can draw and shrink them and a plain random loop can draw them too; ``apply_ops`` turns seed
  bytes into mutated bytes. ``mutate_tree`` does the same to a partition directory (file names,
  symlinks, FIFOs, copies under a lifecycle suffix).
* Invariant checks: the in-process readers may raise only the documented exception classes;
  the CLI may exit only 0, 1 or 2, without a traceback, within a time and address-space bound;
  read-only commands change no byte; ``recover`` loses no byte (everything it took out of the
  partition is in its quarantine, verbatim) and a second ``recover`` finds nothing to do.

The generators here never import ``kafkalog_cli``; only the checks call it (it is what is
under test).
"""

import gzip
import hashlib
import json
import os
import random
import re
import resource
import shutil
import stat
import struct
import subprocess
import sys
import time
import zlib

from crc32c import crc32c

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import kafkagen as kg  # noqa: E402

REPO = os.path.dirname(HERE)
FIXTURES = os.path.join(REPO, "fixtures", "logdir")

EXTREME_INT32 = (0, -1, 2 ** 31 - 1, -2 ** 31, 1, 13, 14, 48, 49, 61)
EXTREME_INT64 = (0, -1, 2 ** 63 - 1, 2 ** 63 - 2, -2 ** 63, 2 ** 31 - 1, 2 ** 31, -2 ** 31 - 1)
# Offsets inside an entry (from its first byte) of int32 length-like fields:
#   8 size; 23 v2 lastOffsetDelta; 57 v2 records count; 53 v2 baseSequence; 12 v2 leader epoch;
#   18/22 a v0 message's key and value lengths (with a null key); 26/30 the same for v1.
LENGTH_FIELDS = (8, 23, 57, 53, 12, 18, 22, 26, 30)
INT64_FIELDS = (0, 27, 35, 43)  # v2 baseOffset, baseTimestamp, maxTimestamp, producerId

OPS = ("flip", "truncate", "splice", "length", "int32", "int64", "offset", "varint", "insert",
       "delete", "overwrite", "zero", "dup", "inner", "fixcrc")


# -- entries, CRCs and codecs, from Kafka's layouts (independent of kafkalog_cli) ---------------

def entry_starts(data):
    """Positions of the entries of ``data``, following size fields while they fit."""
    starts = []
    pos = 0
    n = len(data)
    while pos + 17 <= n:
        (size,) = struct.unpack_from(">i", data, pos + 8)
        starts.append(pos)
        if size < 0 or pos + 12 + size > n:
            break
        pos += 12 + size
    return starts


def fix_crcs(data):
    """Every complete entry's CRC recomputed (CRC-32C from byte 21 for v2, CRC-32 from byte 16
    for legacy messages), so that mutations reach past the CRC check."""
    b = bytearray(data)
    for pos in entry_starts(b):
        (size,) = struct.unpack_from(">i", b, pos + 8)
        end = pos + 12 + size
        if size < 0 or end > len(b):
            break
        magic = b[pos + 16]
        if magic == 2 and size >= 49:
            struct.pack_into(">I", b, pos + 17, crc32c(bytes(b[pos + 21:end])))
        elif magic in (0, 1) and size >= 4:
            struct.pack_into(">I", b, pos + 12, zlib.crc32(bytes(b[pos + 16:end])) & 0xFFFFFFFF)
    return bytes(b)


_XERIAL = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)


def compress(codec, data, magic=2):
    """``data`` compressed in the framing Kafka's Java clients write, with the codec libraries
    directly (not kafkalog_cli's encoder)."""
    if codec == 1:
        return gzip.compress(data, compresslevel=1, mtime=0)
    if codec == 2:
        import cramjam
        out = [_XERIAL]
        for i in range(0, len(data), 32 * 1024):
            block = bytes(cramjam.snappy.compress_raw(data[i:i + 32 * 1024]))
            out += [struct.pack(">i", len(block)), block]
        return b"".join(out)
    if codec == 3:
        import lz4.frame
        out = lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
                                 content_checksum=False, store_size=False)
        if magic == 0:  # magic-0 writers hashed the frame magic into the header checksum
            out = out[:6] + bytes([(kg_xxh32(out[:6]) >> 8) & 0xFF]) + out[7:]
        return out
    if codec == 4:
        import zstandard
        return zstandard.ZstdCompressor(level=1).compress(data)
    return data


def kg_xxh32(data):
    import xxhash
    return xxhash.xxh32(bytes(data)).intdigest()


def decompress(codec, data):
    """The inverse of ``compress`` (None when the bytes do not decompress)."""
    try:
        if codec == 1:
            return gzip.decompress(data)
        if codec == 2:
            import cramjam
            if data[:8] != _XERIAL[:8]:
                return bytes(cramjam.snappy.decompress_raw(data))
            out, pos = [], 16
            while pos + 4 <= len(data):
                (n,) = struct.unpack_from(">i", data, pos)
                out.append(bytes(cramjam.snappy.decompress_raw(data[pos + 4:pos + 4 + n])))
                pos += 4 + n
            return b"".join(out)
        if codec == 3:
            import lz4.block
            # independent blocks (what Kafka writes): read the frame by hand, bounded
            flg = data[4]
            pos = 7 + (8 if flg & 0x08 else 0)
            out = []
            while pos + 4 <= len(data):
                (size,) = struct.unpack_from("<I", data, pos)
                pos += 4
                if size == 0:
                    break
                raw = size & 0x7FFFFFFF
                block = data[pos:pos + raw]
                out.append(block if size & 0x80000000 else
                           lz4.block.decompress(block, uncompressed_size=4 << 20))
                pos += raw + (4 if flg & 0x10 else 0)
            return b"".join(out)
        if codec == 4:
            import zstandard
            return zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True).read(64 << 20)
    except Exception:
        return None
    return None


def _rebuild_v2(entry, body):
    out = bytearray(entry[:61]) + body
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def _legacy_value_at(entry):
    """(position of the value length field, value) of a legacy message, or None."""
    magic = entry[16]
    kpos = 18 + (8 if magic == 1 else 0)
    if len(entry) < kpos + 8:
        return None
    (klen,) = struct.unpack_from(">i", entry, kpos)
    vpos = kpos + 4 + max(klen, 0)
    if vpos + 4 > len(entry):
        return None
    (vlen,) = struct.unpack_from(">i", entry, vpos)
    if vlen < 0 or vpos + 4 + vlen > len(entry):
        return None
    return vpos, bytes(entry[vpos + 4:vpos + 4 + vlen])


def legacy_lengths_problem(entry, depth=0):
    """Why the legacy message ``entry`` (offset, size, then the message), or one inside its
    compressed value, has a key or value length that runs past the message's end, or None.
    Java's LegacyRecord slices a key or value by its length field and fails on one that does
    not fit (kafka-python slices short silently). Inner messages are walked as Kafka's
    DataLogInputStream walks them: a truncated last one ends the set."""
    magic = entry[16]
    kpos = 18 + (8 if magic == 1 else 0)
    end = len(entry)
    if end < kpos + 8:
        return "message of %d bytes has no room for its key and value lengths" % end
    (klen,) = struct.unpack_from(">i", entry, kpos)
    vpos = kpos + 4 + max(klen, 0)
    if vpos + 4 > end:
        return "key of %d bytes runs past its message" % klen
    (vlen,) = struct.unpack_from(">i", entry, vpos)
    if vpos + 4 + max(vlen, 0) > end:
        return "value of %d bytes runs past its message" % vlen
    codec = entry[17] & 0x07
    if not codec or vlen < 0 or depth > 0:
        return None
    inner = decompress(codec, bytes(entry[vpos + 4:vpos + 4 + vlen]))
    if inner is None:
        return None  # kafka-python's verdict on the payload stands
    pos = whole = 0
    while pos + 12 <= len(inner):
        (size,) = struct.unpack_from(">i", inner, pos + 8)
        if size < 14:
            return "inner message size %d below the smallest message" % size
        if pos + 12 + size > len(inner):
            break
        problem = legacy_lengths_problem(inner[pos:pos + 12 + size], depth + 1)
        if problem is not None:
            return "inner message at %d: %s" % (pos, problem)
        pos += 12 + size
        whole += 1
    if not whole:
        # AbstractLegacyRecordBatch.DeepRecordsIterator: "no inner records"
        return "compressed wrapper holds no whole inner message"
    return None


def _rebuild_legacy(entry, vpos, value):
    out = bytearray(entry[:vpos]) + struct.pack(">i", len(value)) + value
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">I", out, 12, zlib.crc32(bytes(out[16:])) & 0xFFFFFFFF)
    return bytes(out)


def mutate_inside(data, a, b):
    """Mutate the records area of one entry *under* its compression: decompress it, apply a
    byte mutation, compress it again, fix the size and the CRC. Reaches the record decoders of
    compressed batches and legacy wrappers' inner messages, which byte flips of the compressed
    bytes rarely do."""
    starts = entry_starts(data)
    if not starts:
        return data
    pos = starts[a % len(starts)]
    (size,) = struct.unpack_from(">i", data, pos + 8)
    end = pos + 12 + size
    if size < 0 or end > len(data):
        return data
    entry = data[pos:end]
    if len(entry) < 18:
        return data
    magic = entry[16]
    inner_op = OPS[b % 13]  # a plain byte mutation (not inner, fixcrc)
    ia, ib = (b >> 4) & 0xFFFFF, (b >> 24) & 0xFFFFFF
    if magic == 2 and len(entry) >= 61:
        codec = entry[22] & 7
        body = entry[61:]
        raw = decompress(codec, body) if codec else body
        if raw is None:
            return data
        raw = apply_op(raw, inner_op, ia, ib)
        new = _rebuild_v2(entry, compress(codec, raw) if codec else raw)
    elif magic in (0, 1):
        codec = entry[17] & 7
        found = _legacy_value_at(entry)
        if found is None:
            return data
        vpos, value = found
        raw = decompress(codec, value) if codec else value
        if raw is None:
            return data
        raw = apply_op(raw, inner_op, ia, ib)
        new = _rebuild_legacy(entry, vpos, compress(codec, raw, magic) if codec else raw)
    else:
        return data
    return data[:pos] + new + data[end:]


# -- byte mutations ------------------------------------------------------------------------------

def _noise(seed, n):
    return random.Random(seed).randbytes(n)


VARINTS = ([kg.varint(v) for v in (-1, 0, 2 ** 31 - 1, -2 ** 31, 2 ** 63 - 1, -2 ** 63,
                                         2 ** 20, -2)]
           + [b"\xff" * 5, b"\xff" * 10 + b"\x01", b"\x80" * 11, b"\xff\xff\xff\xff\x0f"])


def apply_op(data, op, a, b, other=b""):
    """``data`` after one mutation; ``a`` and ``b`` are any non-negative integers (positions and
    choices are taken modulo what fits)."""
    n = len(data)
    if op == "truncate":
        return data[:a % (n + 1)]
    if op == "splice":
        src = other or data
        return data[:a % (n + 1)] + src[b % (len(src) + 1):]
    if op == "insert":
        at = a % (n + 1)
        return data[:at] + _noise(b, 1 + b % 64) + data[at:]
    if op == "inner":
        return mutate_inside(data, a, b)
    if op == "fixcrc":
        return fix_crcs(data)
    if n == 0:
        return data
    if op == "flip":
        buf = bytearray(data)
        buf[a % n] ^= 1 << (b % 8)
        return bytes(buf)
    if op == "delete":
        at = a % n
        return data[:at] + data[at + 1 + b % 256:]
    if op == "overwrite":
        at = a % n
        chunk = _noise(b, 1 + b % 32)[:n - at]
        return data[:at] + chunk + data[at + len(chunk):]
    if op == "zero":
        at = a % n
        k = min(1 + b % 4096, n - at)
        return data[:at] + bytes(k) + data[at + k:]
    if op == "dup":
        at = a % n
        chunk = data[at:at + 1 + b % 512]
        to = b % (n + 1)
        return data[:to] + chunk + data[to:]
    if op in ("length", "offset"):
        starts = entry_starts(data)
        if not starts:
            return data
        start = starts[a % len(starts)]
        if op == "length":
            field = LENGTH_FIELDS[b % len(LENGTH_FIELDS)]
            value = EXTREME_INT32[(b // len(LENGTH_FIELDS)) % len(EXTREME_INT32)]
            if start + field + 4 > n:
                return data
            return data[:start + field] + struct.pack(">i", value) + data[start + field + 4:]
        field = INT64_FIELDS[b % len(INT64_FIELDS)]
        value = EXTREME_INT64[(b // len(INT64_FIELDS)) % len(EXTREME_INT64)]
        if start + field + 8 > n:
            return data
        return data[:start + field] + struct.pack(">q", value) + data[start + field + 8:]
    if op == "int32":
        at = a % n
        chunk = struct.pack(">i", EXTREME_INT32[b % len(EXTREME_INT32)])[:n - at]
        return data[:at] + chunk + data[at + len(chunk):]
    if op == "int64":
        at = a % n
        chunk = struct.pack(">q", EXTREME_INT64[b % len(EXTREME_INT64)])[:n - at]
        return data[:at] + chunk + data[at + len(chunk):]
    if op == "varint":
        at = a % n
        chunk = VARINTS[b % len(VARINTS)][:n - at]
        return data[:at] + chunk + data[at + len(chunk):]
    raise ValueError("unknown op %r" % op)


def apply_ops(data, ops, other=b""):
    for op, a, b in ops:
        data = apply_op(data, op, a, b, other)
    return data


def random_ops(rng, max_ops=4):
    """A random mutation (what fuzz/run.py's plain loop draws)."""
    return [(rng.choice(OPS), rng.getrandbits(32), rng.getrandbits(32))
            for _ in range(rng.randint(1, max_ops))]


def describe_ops(ops):
    return ", ".join("%s(%d,%d)" % t for t in ops)


# -- seeds -----------------------------------------------------------------------------------------

def _big_record_batch_v2(codec, value_size):
    """One v2 batch holding one record of ``value_size`` zero bytes, compressed with ``codec``
    here (kafka-python writes the uncompressed batch; the records area is recompressed)."""
    plain = kg.v2_batch([kg.Rec(b"bomb", bytes(value_size), kg.T0)], 0, "none")
    if codec == 0:
        return plain
    return kg.recompress_v2(plain, codec, lambda raw: compress(codec, raw))


def big_record_v2(codec, value_size):
    """The same as _big_record_batch_v2, encoded here from Kafka's layout (no copy through
    kafka-python: fast for a payload of a hundred MiB)."""
    value = bytes(value_size)
    body = (b"\x00\x00\x00" + kg.varint(4) + b"bomb" + kg.varint(value_size) + value
            + b"\x00")
    area = kg.varint(len(body)) + body
    area = compress(codec, area) if codec else area
    header = struct.pack(">qiibIHiqqqhii", 0, 49 + len(area), 0, 2, 0, codec, 0,
                         kg.T0, kg.T0, -1, -1, -1, 1)
    return _rebuild_v2(header, area)


def _big_record_legacy(magic, codec, value_size):
    inner = kg.legacy_entries(magic, [kg.Rec(b"bomb", bytes(value_size), kg.T0)],
                              codec="none", offsets=[0])
    return kg.legacy_wrapper(magic, inner, 0, codec, lambda raw: compress(codec, raw, magic),
                             timestamp=kg.T0)


def many_records_v2(codec, count, base_offset=0):
    """One v2 batch of ``count`` empty records (a 7-byte record each), encoded here from
    Kafka's layout: the records-per-byte extreme (the 'many records' memory case)."""
    out = bytearray()
    for i in range(count):
        body = b"\x00\x00" + kg.varint(i) + b"\x01\x00\x00"  # attrs, ts, delta, key -1, value "", 0 headers
        out += kg.varint(len(body)) + body
    area = compress(codec, bytes(out)) if codec else bytes(out)
    header = struct.pack(">qiibIHiqqqhii", base_offset, 49 + len(area), 0, 2, 0, codec, count - 1,
                         kg.T0, kg.T0, -1, -1, -1, count)
    return _rebuild_v2(header, area)


def large_batch_v2(codec, count=1200, value_size=4096):
    """One v2 batch of ``count`` records of ``value_size`` bytes (about 4.8 MiB inflated with
    the defaults: more than the codecs gather by joining pieces), encoded here."""
    out = bytearray()
    for i in range(count):
        value = (b"value-%06d|" % i) * (value_size // 12)
        body = (b"\x00" + kg.varint(i) + kg.varint(i) + kg.varint(8)
                + b"key-%04d" % (i % 10000) + kg.varint(len(value)) + value
                + kg.varint(1) + kg.varint(1) + b"h" + kg.varint(-1))
        out += kg.varint(len(body)) + body
    area = compress(codec, bytes(out)) if codec else bytes(out)
    header = struct.pack(">qiibIHiqqqhii", 0, 49 + len(area), 0, 2, 0, codec, count - 1,
                         kg.T0, kg.T0 + count - 1, -1, -1, -1, count)
    return _rebuild_v2(header, area)


def large_legacy(magic, codec, count=1200, value_size=4096):
    """A legacy wrapper holding ``count`` inner messages of ``value_size`` bytes."""
    inner = kg.legacy_entries(magic, [kg.Rec(b"k%d" % i, (b"value-%06d|" % i) * (value_size // 12),
                                             kg.T0 + i) for i in range(count)],
                              codec="none", offsets=list(range(count)))
    return kg.legacy_wrapper(magic, inner, count - 1, codec,
                             lambda raw: compress(codec, raw, magic), timestamp=kg.T0 + count - 1)


def _records_area(count=1200, value_size=4096):
    out = bytearray()
    for i in range(count):
        value = (b"value-%06d|" % i) * (value_size // 12)
        body = (b"\x00" + kg.varint(i) + kg.varint(i) + kg.varint(8)
                + b"key-%04d" % (i % 10000) + kg.varint(len(value)) + value
                + kg.varint(1) + kg.varint(1) + b"h" + kg.varint(-1))
        out += kg.varint(len(body)) + body
    return bytes(out)


def framed_batch_v2(codec, count=1200):
    """A large v2 batch whose records area is compressed in several pieces as writers other
    than Kafka's may frame it: gzip members, zstd frames (one with its content size declared),
    xerial snappy streams concatenated, one LZ4 frame of 4 MiB blocks."""
    area = _records_area(count)
    third = len(area) // 3
    pieces = [area[:third], area[third:2 * third], area[2 * third:]]
    if codec == 1:
        body = b"".join(gzip.compress(p, compresslevel=1, mtime=0) for p in pieces)
    elif codec == 2:
        body = b"".join(compress(2, p) for p in pieces)
    elif codec == 3:
        import lz4.frame
        body = lz4.frame.compress(area, block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_linked=False,
                                  content_checksum=False, store_size=False)
    else:
        import zstandard
        body = (zstandard.ZstdCompressor(level=1, write_content_size=True).compress(pieces[0])
                + b"".join(zstandard.ZstdCompressor(level=1).compress(p) for p in pieces[1:]))
    header = struct.pack(">qiibIHiqqqhii", 0, 49 + len(body), 0, 2, 0, codec, count - 1,
                         kg.T0, kg.T0 + count - 1, -1, -1, -1, count)
    return _rebuild_v2(header, body)


def large_seeds():
    """{name: bytes}: a large valid batch per codec (v2), the same framed in pieces, and a large
    legacy wrapper per codec."""
    out = {}
    for codec in (1, 2, 3, 4):
        out["framed-v2-%s" % kg.CODEC_NAMES[codec]] = framed_batch_v2(codec)
    for codec in (1, 2, 3, 4):
        out["large-v2-%s" % kg.CODEC_NAMES[codec]] = large_batch_v2(codec)
        if codec != 4:
            out["large-v1-%s" % kg.CODEC_NAMES[codec]] = large_legacy(1, codec)
    return out


def nested_legacy(magic, outer, inner_codec):
    """A legacy wrapper whose only inner message is itself a compressed wrapper: Kafka forbids
    it (inner messages must not be compressed)."""
    inner = kg.legacy_entries(magic, [kg.Rec(b"n-%d" % i, kg.filler(i), kg.T0 + i) for i in range(3)],
                              codec=inner_codec, offsets=[0, 1, 2])
    return kg.legacy_wrapper(magic, inner, 2, outer, lambda raw: compress(outer, raw, magic),
                             timestamp=kg.T0)


def nested_v2(outer, inner):
    """A v2 batch whose records area is compressed twice."""
    plain = kg.v2_batch([kg.Rec(b"k%d" % i, kg.filler(i), kg.T0 + i) for i in range(4)], 0, "none")
    return kg.recompress_v2(plain, outer, lambda raw: compress(outer, compress(inner, raw)))


def kraft_control_batches():
    """v2 control batches of every KRaft control type (values from the message schemas:
    version int16 then the fields, tagged fields 0), and ABORT/COMMIT markers."""
    out = []
    values = {
        2: struct.pack(">hi", 0, 1) + b"\x02" + struct.pack(">i", 1) + b"\x00" + b"\x02"
           + struct.pack(">i", 1) + b"\x00\x00",                                  # LEADER_CHANGE
        3: struct.pack(">hq", 0, kg.T0) + b"\x00",                                 # SNAPSHOT_HEADER
        4: struct.pack(">h", 0) + b"\x00",                                         # SNAPSHOT_FOOTER
        5: struct.pack(">hh", 0, 1) + b"\x00",                                     # KRAFT_VERSION
        6: struct.pack(">h", 0) + b"\x02" + struct.pack(">i", 1) + bytes(16) + b"\x02"
           + b"\x05CTRL" + b"\x0alocalhost" + struct.pack(">H", 9093) + b"\x00"
           + struct.pack(">hh", 0, 1) + b"\x00\x00" + b"\x00",                   # KRAFT_VOTERS
    }
    for i, (t, v) in enumerate(sorted(values.items())):
        b = bytearray(kg.v2_batch([kg.Rec(struct.pack(">hh", 0, t), v, kg.T0)], i, "none"))
        b[22] |= kg.ATTR_CONTROL
        out.append(bytes(kg.fix_v2_crc(b)))
    out.append(kg.control_batch(kg.ABORT, 10, 5, 0, 1))
    out.append(kg.control_batch(kg.COMMIT, 11, 5, 0, 1))
    return b"".join(out)


def log_seeds(bomb_size=2 << 20):
    """{name: segment bytes}: every message format and codec, control batches, nested
    compression and a decompression bomb per codec (``bomb_size`` zero bytes in one record)."""
    seeds = {}
    for codec in kg.V2_CODECS:
        seeds["v2-%s" % codec] = kg.sample_segment(2, codec)
    for magic in (0, 1):
        for codec in kg.LEGACY_CODECS:
            seeds["v%d-%s" % (magic, codec)] = kg.sample_segment(magic, codec)
    seeds["control"] = kraft_control_batches()
    for magic in (0, 1):
        seeds["nested-v%d" % magic] = nested_legacy(magic, 1, 2) + nested_legacy(magic, 3, 1)
    seeds["nested-v2"] = nested_v2(4, 1) + nested_v2(1, 3)
    for codec in (1, 2, 3, 4):
        name = kg.CODEC_NAMES[codec]
        seeds["bomb-v2-%s" % name] = _big_record_batch_v2(codec, bomb_size)
        if codec != 4:
            seeds["bomb-v1-%s" % name] = _big_record_legacy(1, codec, bomb_size)
    seeds["many-records-zstd"] = many_records_v2(4, 20000)
    return seeds


GENERATED_VARIANTS = tuple("v2-%s" % c for c in kg.V2_CODECS) + tuple(
    "v%d-%s" % (m, c) for m in (0, 1) for c in kg.LEGACY_CODECS) + ("control", "nested")


def generated_partition(dest, variant):
    """A partition of two segments written by kafka-python (the first of the given format and
    codec, KRaft control batches, or nested compression; the second a busy v2 segment) with
    broker-built indexes (indexgen)."""
    import indexgen as ig
    if variant.startswith("v2-"):
        first = kg.sample_segment(2, variant[3:])
    elif variant.startswith("v1-") or variant.startswith("v0-"):
        first = kg.sample_segment(int(variant[1]), variant[3:])
    elif variant == "control":
        first = kraft_control_batches()
    elif variant == "nested":
        first = nested_legacy(1, 1, 2) + nested_legacy(0, 3, 1)
    else:
        raise ValueError(variant)
    nxt = 1000  # past every seed's offsets
    # a new leader epoch for the second segment, above the first's (sample_segment writes epoch
    # 3, the KRaft batches 0): epochs never go back in a broker's log
    second = with_leader_epoch(ig.busy_segment(nxt, n_batches=8)[0], SECOND_SEGMENT_EPOCH)
    if variant == "nested":
        # kafka-python refuses to read double compression: no indexes for it (recover builds them)
        kg.write_segment(dest, 0, first)
        ig.write_partition(dest, [(nxt, second)])
    else:
        ig.write_partition(dest, [(0, first), (nxt, second)])
    return dest


SECOND_SEGMENT_EPOCH = 4


def with_leader_epoch(data, epoch):
    """``data`` (complete v2 batches) with every batch's partition leader epoch set to
    ``epoch`` (a header field outside the CRC)."""
    out = []
    for entry in kg.split_entries(data):
        assert entry[16] == 2, "not a v2 batch"
        out.append(bytes(kg.set_v2_header(bytearray(entry), partition_leader_epoch=epoch)))
    return b"".join(out)


def fixture_files(kinds=None):
    """{relative path: bytes} of every file of the shipped fixtures."""
    out = {}
    for root, _, names in os.walk(FIXTURES):
        for n in sorted(names):
            p = os.path.join(root, n)
            rel = os.path.relpath(p, FIXTURES)
            with open(p, "rb") as f:
                out[rel] = f.read()
    return out


def aux_seeds():
    """{(kind, name): bytes} for each auxiliary file kind, from the fixtures and indexgen."""
    import indexgen as ig
    from_kind = {"index": "index", "timeindex": "timeindex", "txnindex": "txnindex",
                 "snapshot": "snapshot", "leader-epoch-checkpoint": "leader-epoch-checkpoint",
                 "partition.metadata": "partition.metadata"}
    seeds = {}
    for rel, data in fixture_files().items():
        name = os.path.basename(rel)
        kind = None
        for suffix, k in from_kind.items():
            if name.endswith(suffix):
                kind = k
        if name.endswith("offset-checkpoint"):
            kind = "offset-checkpoint"
        if kind is not None:
            seeds[(kind, rel)] = data
    seg, _ = ig.busy_segment(0, n_batches=30, txn_at=5)
    idx = ig.build_indexes(seg)
    seeds[("index", "busy")] = ig.encode_offset_index(idx.offset_entries, 0)
    seeds[("timeindex", "busy")] = ig.encode_time_index(idx.time_entries, 0)
    seeds[("index", "prealloc")] = ig.preallocated_offset_index(seeds[("index", "busy")])[:64 << 10]
    txns = ig.aborted_txns(ig.read_log(seg))
    seeds[("txnindex", "busy")] = ig.encode_txn_index(txns)
    seeds[("snapshot", "entries")] = ig.encode_snapshot(
        [ig.SnapshotEntry(7000 + i, 1, 5 + i, 100 + i, 2, kg.T0, 3, -1) for i in range(3)])
    return seeds


def busy_log():
    import indexgen as ig
    seg, _ = ig.busy_segment(0, n_batches=30, txn_at=5)
    return seg


# -- budgets of the test suite's fuzz tests ----------------------------------------------------------

# KAFKALOG_FUZZ_EXAMPLES scales every budget (default 1; 10 for a longer run).
SCALE = float(os.environ.get("KAFKALOG_FUZZ_EXAMPLES", "1"))
SECONDS = 5.0  # one in-process input, however hostile


def budget(n):
    return max(1, int(n * SCALE))


def fuzz_settings(n, shrink=True):
    """hypothesis settings of an in-process fuzz test of ``n`` examples (scaled): derandomized,
    no example database, no deadline (``timed`` bounds each input instead)."""
    from hypothesis import HealthCheck, Phase, settings
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])
    return settings(max_examples=budget(n), deadline=None, derandomize=True, database=None,
                    phases=phases, suppress_health_check=list(HealthCheck))


def ops_strategy():
    """hypothesis strategy of a mutation: 1 to 4 ``(op, a, b)`` triples for ``apply_ops``."""
    from hypothesis import strategies as st
    return st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 2 ** 32 - 1),
                              st.integers(0, 2 ** 32 - 1)), min_size=1, max_size=4)


def timed(fn, *args, **kw):
    """``fn(*args, **kw)``, failing when it takes SECONDS or more."""
    t0 = time.monotonic()
    out = fn(*args, **kw)
    took = time.monotonic() - t0
    assert took < SECONDS, "took %.1fs" % took
    return out


# -- in-process invariant: only the documented exceptions -------------------------------------------

def allowed_exceptions():
    from kafkalog_cli.format.errors import CorruptRecordError
    from kafkalog_cli.log.files import FileFormatError
    return (CorruptRecordError, FileFormatError, OSError)


def read_log_bytes(buf, max_message_size=64 << 10, batch_limit=1 << 20, resync=False):
    """Everything the format layer reads from segment bytes: the scan, every batch's records,
    control records. Raises AssertionError when an invariant does not hold; returns the number
    of entries seen. Only CorruptRecordError may come out of a decoder (caught here)."""
    from kafkalog_cli.format import control, scan as fscan
    from kafkalog_cli.format.codecs import Inflater
    from kafkalog_cli.format.errors import CorruptRecordError, LimitExceededError
    from kafkalog_cli.format.records import Batch, decode_records
    inflater = Inflater()
    end = len(buf)
    pos = 0
    n = 0
    for item in fscan.scan(buf, 0, end, resync):
        n += 1
        assert item.position == pos, ("entries do not tile the data", item.position, pos)
        assert item.size > 0 and item.position + item.size <= end, ("entry past the end",
                                                                    item.position, item.size, end)
        pos = item.position + item.size
        if not isinstance(item, Batch):
            continue
        (item.codec_problem, item.codec_name, item.timestamp_type_name, item.last_sequence,
         item.delete_horizon_ms, item.is_valid)
        try:
            recs = decode_records(buf, item, inflater, max_message_size, batch_limit)
        except LimitExceededError:
            continue
        except CorruptRecordError as e:
            assert str(e), "an error without a message"
            continue
        k = len(recs.offsets)
        assert len(recs.timestamps) == k and len(recs.keys) == k and len(recs.values) == k
        if item.magic >= 2:
            assert k == item.count, ("records decoded differ from the header's count", k, item.count)
        total = sum(len(x) for x in recs.keys if x is not None) + sum(
            len(x) for x in recs.values if x is not None)
        assert total <= max(batch_limit, item.size), ("records larger than the batch limit", total)
        if item.is_control:
            for key, value in zip(recs.keys, recs.values):
                try:
                    t = control.control_type(key)
                    if t in (control.ABORT, control.COMMIT):
                        control.end_txn_marker(value)
                    else:
                        control.kraft_control_json(t, value)
                except CorruptRecordError:
                    pass
    assert pos == end, ("entries stop short of the end", pos, end)
    return n


def _decode_outcome(buf, batch, max_message_size, batch_limit):
    from kafkalog_cli.format.codecs import Inflater
    from kafkalog_cli.format.errors import CorruptRecordError
    from kafkalog_cli.format.records import decode_records
    try:
        recs = decode_records(buf, batch, Inflater(), max_message_size, batch_limit)
    except CorruptRecordError as e:
        return (type(e).__name__,)
    return ("ok", list(recs.offsets), list(recs.timestamps),
            [None if k is None else bytes(k) for k in recs.keys],
            [None if v is None else bytes(v) for v in recs.values],
            None if recs.headers is None else [tuple((k, None if v is None else bytes(v))
                                                     for k, v in h) for h in recs.headers])


def compare_implementations(buf, max_message_size=16 << 10, batch_limit=64 << 10):
    """Decode every batch of ``buf`` with the C decoder and with the pure-Python one: the same
    records, or the same error class. Raises AssertionError on a difference; does nothing when
    the C decoder is not built."""
    import kafkalog_cli.format.records as records
    from kafkalog_cli.format.records import Batch
    from kafkalog_cli.format.scan import scan
    if records._speedups is None:
        return
    for item in scan(buf, 0, len(buf)):
        if not isinstance(item, Batch):
            continue
        c = _decode_outcome(buf, item, max_message_size, batch_limit)
        py = with_pure_python(_decode_outcome, buf, item, max_message_size, batch_limit)
        assert c == py, ("C and Python decoders differ at position %d: C %r, Python %r"
                         % (item.position, c[:1] if c[0] != "ok" else "records",
                            py[:1] if py[0] != "ok" else "records"))


# Why kafka-python could not walk an input (exception name -> count), for the tests' report.
COMPARE_FAILURES = {}


def compare_with_kafka_python(buf, max_message_size=5 << 20, batch_limit=80 << 20):
    """kafka-python's reading of ``buf`` (an independent implementation) against kafkalog's:
    every entry kafka-python reads is a batch kafkalog reads at the same position and size,
    with the same offsets and CRC verdict; where both decode a batch's records, the same
    offsets, keys and values. Raises AssertionError on a difference. Returns how many
    entries were compared (0: kafka-python could not walk the bytes, nothing was compared)."""
    from kafkalog_cli.format.codecs import Inflater
    from kafkalog_cli.format.errors import CorruptRecordError
    from kafkalog_cli.format.records import Batch, decode_records
    from kafkalog_cli.format.scan import scan
    try:
        theirs = kg.kafka_python_read(bytes(buf), deep=False)
    except Exception as e:
        COMPARE_FAILURES[type(e).__name__] = COMPARE_FAILURES.get(type(e).__name__, 0) + 1
        return 0  # kafka-python cannot walk it: nothing to compare
    ours = {item.position: item for item in scan(buf, 0, len(buf)) if isinstance(item, Batch)}
    inflater = Inflater()
    compared = 0
    # Where kafka-python's walk ends (the first entry it cannot read, or the end): kafkalog
    # reads no batch there either (what follows may be found again by a resync, not by a walk).
    end = (theirs[-1].position + theirs[-1].size) if theirs else 0
    if all(kb.size >= 26 for kb in theirs):
        assert end >= len(buf) or end not in ours, (
            "kafka-python's walk ends at %d, where kafkalog reads a batch" % end)
        compared += 1
    for kb in theirs:
        compared += 1
        if kb.size < 26:
            break  # kafka-python follows a negative size field; Kafka (and kafkalog) stop there
        b = ours.get(kb.position)
        k = kb.batch
        if b is None and getattr(k, "magic", 2) >= 2 and not (
                -2 ** 63 <= k.base_offset + k.last_offset_delta < 2 ** 63):
            break  # kafkalog calls an offset past the long range invalid data (Kafka's longs wrap)
        assert b is not None, "kafka-python reads an entry at %d, kafkalog none" % kb.position
        assert b.size == kb.size, ("size at %d" % kb.position, b.size, kb.size)
        assert b.is_valid == kb.crc_ok, ("CRC verdict at %d" % kb.position, b.is_valid, kb.crc_ok)
        their_last = k.last_offset if hasattr(k, "last_offset") else k.base_offset
        assert (b.base_offset, b.last_offset) == (k.base_offset, their_last), (
            "offsets at %d" % kb.position, (b.base_offset, b.last_offset), (k.base_offset, their_last))
        if not kb.crc_ok or b.magic < 2:
            # legacy inner messages: kafka-python reads a truncated last inner message and
            # takes any negative length for an empty value, where Kafka (and kafkalog) stop
            # and read null: their records are not compared
            continue
        try:
            records = list(k)
        except Exception:
            continue
        try:
            recs = decode_records(buf, b, inflater, max_message_size, batch_limit)
        except CorruptRecordError:
            continue  # kafkalog is stricter in places (counts, sizes, overflow): not compared
        got = [(o, None if key is None else bytes(key), None if v is None else bytes(v))
               for o, key, v in zip(recs.offsets, recs.keys, recs.values)]
        want = [(r.offset, r.key, r.value) for r in records]
        assert got == want, ("records at %d differ from kafka-python's" % kb.position,
                             len(got), len(want),
                             next(((i, g, w) for i, (g, w) in enumerate(zip(got, want)) if g != w),
                                  None))
    return compared


def read_records_area(data, count, limit=1 << 16):
    """decode_v2_records on raw bytes: only CorruptRecordError may escape."""
    from kafkalog_cli.format.errors import CorruptRecordError
    from kafkalog_cli.format.records import decode_v2_records
    for append_time in (None, kg.T0):
        try:
            recs = decode_v2_records(data, count, 2 ** 63 - 1 - (count % 3), -2 ** 63 + count % 5,
                                     append_time, limit)
        except CorruptRecordError:
            continue
        assert len(recs.offsets) == count


def with_pure_python(fn, *args, **kw):
    """Run ``fn`` with the C decoder switched off (the same process)."""
    import kafkalog_cli.format.records as records
    saved = records._speedups
    records._speedups = None
    try:
        return fn(*args, **kw)
    finally:
        records._speedups = saved


AUX_KINDS = ("index", "timeindex", "txnindex", "snapshot", "offset-checkpoint",
             "leader-epoch-checkpoint", "partition.metadata")


def aux_file_name(kind):
    return {"index": "00000000000000000000.index", "timeindex": "00000000000000000000.timeindex",
            "txnindex": "00000000000000000000.txnindex", "snapshot": "00000000000000000016.snapshot",
            "offset-checkpoint": "recovery-point-offset-checkpoint",
            "leader-epoch-checkpoint": "leader-epoch-checkpoint",
            "partition.metadata": "partition.metadata"}[kind]


def read_aux_file(kind, path, log_path=None, probe=0):
    """Read ``path`` with the reader of its kind and use everything it gives (entries, sanity
    checks, lookups, checks against ``log_path``). Exceptions other than the documented ones
    propagate to the caller."""
    from kafkalog_cli.log import checkpoints, index_check
    from kafkalog_cli.log.index import OffsetIndex, TimeIndex
    from kafkalog_cli.log.segment import LogFile
    from kafkalog_cli.log.snapshot import read_snapshot
    from kafkalog_cli.log.txnindex import TransactionIndex
    allowed = allowed_exceptions()
    try:
        if kind in ("index", "timeindex"):
            cls = OffsetIndex if kind == "index" else TimeIndex
            idx = cls(path)
            idx.entries, idx.sanity_problems(), idx.zero_tail, idx.preallocated
            idx.trimmed().entries
            for i in range(min(idx.slots, 3)):
                idx.slot(i)
            idx.lookup(probe)
            idx.lookup(-probe)
            if log_path is not None:
                with LogFile(log_path) as log:
                    if kind == "index":
                        index_check.check_offset_index(idx, log)
                    else:
                        index_check.check_time_index(idx, None, log)
        elif kind == "txnindex":
            txn = TransactionIndex(path)
            txn.sanity_problems()
            if log_path is not None:
                with LogFile(log_path) as log:
                    index_check.check_txn_index(txn, log)
        elif kind == "snapshot":
            for e in read_snapshot(path):
                e.first_sequence, e.has_batch_metadata
        elif kind == "offset-checkpoint":
            checkpoints.read_offset_checkpoint(path)
        elif kind == "leader-epoch-checkpoint":
            checkpoints.read_leader_epochs(path)
        elif kind == "partition.metadata":
            checkpoints.read_partition_metadata(path)
        else:
            raise ValueError(kind)
    except allowed:
        pass


# -- partition trees ---------------------------------------------------------------------------------

OUTSIDE = "outside-the-partition"  # where "symlink-out" puts the files its links point at
TREE_OPS = ("file", "rename-junk", "nonnumeric", "nonutf8", "loglog",
            "lifecycle", "devzero", "fifo", "remove", "splice-files", "empty", "dirname",
            "tmpfile", "shortname", "symlink-out")


# Plants among a partition's files (and its log directory's) at the names kafkalog's writers use:
# a symlink at a temporary name leading to a file outside the log directory, a dangling symlink
# at a lock's name, a FIFO at a temporary name, a stale (half-written) temporary file. The
# writers must never write through them, never block on them, and leave no temporary file.
PLANT_OPS = ("tmp-symlink-out", "lock-symlink", "tmp-fifo", "tmp-stale")
TMP = ".kafkalog-tmp"
LOG_DIR_TMP_NAMES = ("log-start-offset-checkpoint", "recovery-point-offset-checkpoint",
                     "replication-offset-checkpoint", "cleaner-offset-checkpoint",
                     ".kafka_cleanshutdown")


def log_end_offset(part):
    """The offset after the last complete entry of the partition's active segment (by Kafka's
    layouts, not kafkalog's code); the active segment's base offset when it holds none."""
    bases = sorted(int(n[:20]) for n in os.listdir(part)
                   if KAFKA_SEGMENT_NAME.match(n) and os.path.isfile(os.path.join(part, n)))
    if not bases:
        return 0
    with open(os.path.join(part, "%020d.log" % bases[-1]), "rb") as f:
        data = f.read()
    end = bases[-1]
    for pos in entry_starts(data):
        (size,) = struct.unpack_from(">i", data, pos + 8)
        if size < 0 or pos + 12 + size > len(data):
            break
        (base,) = struct.unpack_from(">q", data, pos)
        if data[pos + 16] == 2 and size >= 49:
            (delta,) = struct.unpack_from(">i", data, pos + 23)
            end = base + delta + 1
        else:
            end = base + 1
    return end


def tmp_plant_name(root, choice, files):
    """A temporary name one of the writers uses, relative to the partition ``root`` (``../``:
    the log directory): a partition file's (leader-epoch-checkpoint, an index), the producer
    snapshot at the log end offset (what roll and append write), a log-directory checkpoint's."""
    kinds = 3
    k = choice % kinds
    if k == 0 and files:
        return files[(choice // kinds) % len(files)] + TMP
    if k == 1:
        return "%020d.snapshot%s" % (log_end_offset(root), TMP)
    if k == 2 or not files:
        return os.path.join("..", LOG_DIR_TMP_NAMES[(choice // kinds) % len(LOG_DIR_TMP_NAMES)]
                            + TMP)
    return "leader-epoch-checkpoint" + TMP


def plant(root, op, choice, a, outside):
    """One of PLANT_OPS in the partition ``root``; ``outside`` is a directory outside its log
    directory, where the planted symlinks lead. Returns a description, or None."""
    files = [f for f in tree_files(root) if os.sep not in f and not f.endswith(TMP)]
    os.makedirs(outside, exist_ok=True)
    if op == "lock-symlink":
        rel = (".kafkalog-append.lock", os.path.join("..", ".lock"))[a % 2]
        target = os.path.join(outside, "dangling-%d" % len(os.listdir(outside)))
    else:
        rel = tmp_plant_name(root, choice, files)
        target = None
    path = os.path.normpath(os.path.join(root, rel))
    if os.path.lexists(path):
        return None
    if op == "tmp-symlink-out":
        target = os.path.join(outside, "%d-precious" % len(os.listdir(outside)))
        with open(target, "wb") as f:
            f.write(b"outside the log directory, not to be written\n" * (1 + a % 4))
        os.symlink(target, path)
        return "%s -> symlink to %s" % (rel, target)
    if op == "lock-symlink":
        os.symlink(target, path)
        return "%s -> dangling symlink to %s" % (rel, target)
    if op == "tmp-fifo":
        os.mkfifo(path)
        return "%s -> FIFO" % rel
    if op == "tmp-stale":
        src = os.path.join(root, rel[:-len(TMP)]) if not rel.startswith("..") else \
            os.path.normpath(os.path.join(root, rel[:-len(TMP)]))
        data = b""
        if os.path.isfile(src):
            with open(src, "rb") as f:
                data = f.read()
        with open(path, "wb") as f:
            f.write(data[:a % (len(data) + 1)] + _noise(a, a % 7))
        return "%s -> stale temporary file" % rel
    raise ValueError(op)


def tree_files(root):
    """Regular files under ``root`` (relative paths), sorted, the quarantine excluded."""
    out = []
    for d, dirs, names in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != "kafkalog-quarantine")
        for n in sorted(names):
            p = os.path.join(d, n)
            if os.path.isfile(p) and not os.path.islink(p):
                out.append(os.path.relpath(p, root))
    return out


def mutate_tree(root, ops, other=b""):
    """Apply ``(tree_op, file_choice, a, b, byte_ops)`` mutations to the files under ``root``.
    ``file`` applies byte mutations to one file; the others change the directory's contents as
    a hostile or half-crashed directory could hold them. Returns a description."""
    done = []
    for top, choice, a, b, byte_ops in ops:
        files = tree_files(root)
        if not files:
            break
        rel = files[choice % len(files)]
        path = os.path.join(root, rel)
        d, name = os.path.split(path)
        if top == "file":
            with open(path, "rb") as f:
                data = f.read()
            with open(path, "wb") as f:
                f.write(apply_ops(data, byte_ops, other))
            done.append("%s: %s" % (rel, describe_ops(byte_ops)))
            continue
        if top == "rename-junk":
            new = name + "." + ("x", "bak", "log", "index", "tmp", "swap")[a % 6]
        elif top == "nonnumeric":
            new = ("abc", "-0000000000000000001", "\u0661\u0662", "0x10", "1e3")[a % 5] + \
                "." + name.split(".", 1)[-1]
        elif top == "nonutf8":
            new = None
            os.rename(os.fsencode(path), os.path.join(os.fsencode(d), b"\xff" + os.fsencode(name)))
            done.append("%s -> \\xff%s" % (rel, name))
            continue
        elif top == "loglog":
            new = name.split(".", 1)[0] + ".log.log"
            shutil.copyfile(path, os.path.join(d, new))
            done.append("copy %s -> %s" % (rel, new))
            continue
        elif top == "lifecycle":
            new = name + (".deleted", ".cleaned", ".swap")[a % 3]
            shutil.copyfile(path, os.path.join(d, new))
            done.append("copy %s -> %s" % (rel, new))
            continue
        elif top == "devzero":
            os.unlink(path)
            os.symlink("/dev/zero", path)
            done.append("%s -> symlink to /dev/zero" % rel)
            continue
        elif top == "fifo":
            os.unlink(path)
            os.mkfifo(path)
            done.append("%s -> FIFO" % rel)
            continue
        elif top == "remove":
            os.unlink(path)
            done.append("removed %s" % rel)
            continue
        elif top == "splice-files":
            files2 = [f for f in files if f != rel]
            if not files2:
                continue
            rel2 = files2[a % len(files2)]
            with open(path, "rb") as f:
                x = f.read()
            with open(os.path.join(root, rel2), "rb") as f:
                y = f.read()
            with open(path, "wb") as f:
                f.write(x[:b % (len(x) + 1)] + y[a % (len(y) + 1):])
            done.append("%s = splice with %s" % (rel, rel2))
            continue
        elif top == "empty":
            open(path, "wb").close()
            done.append("%s emptied" % rel)
            continue
        elif top == "dirname":
            new = os.path.join(d, "%020d.%s" % (a % 1000, ("log", "index", "snapshot")[b % 3]))
            if os.path.lexists(new):
                continue
            os.mkdir(new)
            done.append("directory named like a segment file in %s" % os.path.dirname(rel))
            continue
        elif top == "shortname":
            stem, dot, rest = name.partition(".")
            if not stem.isdigit() or not dot:
                continue
            new = "%d.%s" % (int(stem), rest)
            if new == name or os.path.lexists(os.path.join(d, new)):
                continue
            shutil.copyfile(path, os.path.join(d, new))
            done.append("copy %s -> %s" % (rel, new))
            continue
        elif top == "symlink-out":
            # the file moved out of the partition (beside the tree) and a symlink left in its
            # place; with byte mutations when the op carries some (a segment recover must cut)
            outside = os.path.join(os.path.dirname(os.path.abspath(root)), OUTSIDE)
            os.makedirs(outside, exist_ok=True)
            target = os.path.join(outside, "%d-%s" % (len(os.listdir(outside)), name))
            with open(path, "rb") as f:
                data = f.read()
            with open(target, "wb") as f:
                f.write(apply_ops(data, byte_ops, other) if byte_ops else data)
            os.unlink(path)
            os.symlink(target, path)
            done.append("%s -> symlink to a copy outside the partition%s"
                        % (rel, " (%s)" % describe_ops(byte_ops) if byte_ops else ""))
            continue
        elif top == "tmpfile":
            shutil.copyfile(path, path + ".kafkalog-tmp")
            done.append("copy %s -> %s.kafkalog-tmp" % (rel, rel))
            continue
        else:
            raise ValueError(top)
        os.rename(path, os.path.join(d, new))
        done.append("%s -> %s" % (rel, new))
    return done


def snapshot_tree(root):
    """{relative path: digest} of everything under ``root`` (regular files by content, symlinks
    by target, FIFOs and directories by kind); kafkalog's own lock files left out."""
    out = {}
    for d, dirs, names in os.walk(os.fsencode(root)):
        dirs.sort()
        for n in sorted(names) + [x + b"/" for x in dirs]:
            p = os.path.join(d, n.rstrip(b"/"))
            rel = os.path.relpath(p, os.fsencode(root))
            if n in (b".lock", b".kafkalog-append.lock") or n.endswith(b".lock") and n.startswith(b"."):
                continue
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = b"symlink:" + os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    out[rel] = hashlib.sha256(f.read()).digest()
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = b"dir"
            else:
                out[rel] = b"special:%o" % stat.S_IFMT(st.st_mode)
    return out


def _blob(path):
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return b"symlink:" + os.readlink(path)
    if stat.S_ISREG(st.st_mode):
        with open(path, "rb") as f:
            return f.read()
    return b"special:%o" % stat.S_IFMT(st.st_mode)


def partition_contents(part):
    """{name (bytes): blob} of the entries directly in a partition directory (files, symlinks,
    FIFOs; not subdirectories)."""
    out = {}
    for n in os.listdir(os.fsencode(part)):
        p = os.path.join(os.fsencode(part), n)
        if os.path.isdir(p) and not os.path.islink(p):
            continue
        out[n] = _blob(p)
    return out


def check_nothing_lost(before, part):
    """``before`` is partition_contents() of ``part`` before a ``recover``. Every original entry's
    bytes must be found verbatim: in the partition (any name: a .swap renamed into place), in the
    quarantine, or (a cut .log) as what stays in the log followed by the cut bytes the quarantine
    holds for it. Returns a list of problems (empty: nothing lost)."""
    after = partition_contents(part)
    qroot = os.path.join(part, "kafkalog-quarantine")
    held = set(after.values())
    reassembled = set()
    problems = []
    if os.path.isdir(qroot):
        for run in sorted(os.listdir(qroot)):
            rdir = os.path.join(qroot, run)
            kept = set()
            for d, _, names in os.walk(os.fsencode(rdir)):
                for n in names:
                    p = os.path.join(d, n)
                    held.add(_blob(p))
                    kept.add(os.path.relpath(p, os.fsencode(rdir)))
            mpath = os.path.join(rdir, "manifest.json")
            if not os.path.exists(mpath):
                problems.append("quarantine run %s has no manifest.json" % run)
                continue
            try:
                with open(mpath, "rb") as f:
                    manifest = json.load(f)
            except ValueError as e:
                problems.append("quarantine run %s: manifest.json is not JSON: %s" % (run, e))
                continue
            listed = {b"manifest.json"}
            for entry in manifest.get("entries", []):
                saved = entry.get("saved_as")
                if saved is None:
                    continue
                spath = os.path.join(os.fsencode(rdir), os.fsencode(saved))
                listed.add(os.path.relpath(spath, os.fsencode(rdir)))
                if not os.path.lexists(spath):
                    problems.append("manifest names %r, not in the quarantine" % saved)
                    continue
                if entry.get("what") == "cut":
                    tail = _blob(spath)
                    start = (entry.get("range") or [None])[0]
                    for blob in after.values():
                        if start is None or len(blob) == start:
                            reassembled.add(blob + tail)
            for rel in sorted(kept - listed):
                problems.append("quarantine run %s holds %s, which its manifest does not list"
                                % (run, rel.decode("utf-8", "backslashreplace")))
    for name, blob in before.items():
        if blob in held or blob in reassembled:
            continue
        problems.append("the bytes of %s (%d bytes) are nowhere after recover"
                        % (name.decode("utf-8", "backslashreplace"), len(blob)))
    return problems


def independent_verdict(data, start, base):
    """Why the entry at ``start`` of the segment bytes ``data`` (based at ``base``) is not one
    the broker's recovery keeps, judged with kafka-python and Kafka's rules (not kafkalog's
    code); None when it is a valid batch. Used on every cut ``recover`` makes: a cut at a valid
    batch loses data."""
    from kafka.record.memory_records import MemoryRecords
    prev_last = None
    for kb in kg.kafka_python_read(data[:start], deep=False):
        b = kb.batch
        prev_last = b.last_offset if hasattr(b, "last_offset") else b.base_offset
    rest = data[start:]
    if len(rest) < 17:
        return "incomplete header"
    (size,) = struct.unpack_from(">i", rest, 8)
    magic = rest[16]
    if size < 14 or 12 + size > len(rest):
        return "size field %d does not fit" % size
    if magic > 2:
        return "magic %d" % magic
    if magic == 2 and 12 + size < 61:
        return "v2 batch below 61 bytes"
    try:
        recs = MemoryRecords(bytes(rest[:12 + size]))
        b = recs.next_batch()
        if b is None:
            return "kafka-python reads no batch"
        if not b.validate_crc():
            return "CRC"
        records = list(b)
    except Exception as e:  # kafka-python's verdict: the records cannot be read
        return "kafka-python: %s: %s" % (type(e).__name__, e)
    if magic == 2:
        last = b.last_offset
        if len(records) != b.records_count:
            return "%d records, header says %d" % (len(records), b.records_count)
        if b.is_control_batch:
            for r in records:
                if r.key is None or len(r.key) < 4 or struct.unpack_from(">h", r.key)[0] < 0:
                    return "malformed control record key"
        if any(r.offset > last or r.offset < b.base_offset for r in records):
            return "record offset outside the batch's range"
        if any(r.timestamp is not None and not -2 ** 63 <= r.timestamp <= 2 ** 63 - 1
               for r in records):
            # Java wraps the sum silently; kafkalog's one rule calls it invalid (SECURITY.md)
            return "record timestamp overflows a long"
    else:
        last = b.base_offset
        if not records:
            return "no records"
        problem = legacy_lengths_problem(rest[:12 + size])
        if problem is not None:
            return problem
        if b.compression_type and any(r.offset > last for r in records):
            return "inner offset above the wrapper's"
    if prev_last is not None and last <= prev_last:
        return "last offset %d does not follow %d" % (last, prev_last)
    if not 0 <= last - base <= 2 ** 31 - 1:
        return "last offset %d does not fit a segment based at %d" % (last, base)
    if not -2 ** 63 <= last <= 2 ** 63 - 1:
        return "last offset overflows"
    return None


def epochs_go_backwards(part):
    """Whether a v2 batch of the partition's segments (base offset order) carries a leader
    epoch below one an earlier batch carries: data the broker's recovery keeps
    (LogSegment.recover assigns only a larger epoch to the cache) and that verify-index rightly
    calls leader_epoch_backwards. Read from the batch headers, not by kafkalog."""
    highest = -1
    for name in kafka_segments(part):
        data = open(name, "rb").read()
        for pos in entry_starts(data):
            if data[pos + 16] != 2:
                continue
            (epoch,) = struct.unpack_from(">i", data, pos + 12)
            if 0 <= epoch < highest:
                return True
            highest = max(highest, epoch)
    return False


def _java_split(line):
    """Java's ``Pattern.compile("\\s+").split(line)``, as Kafka's checkpoint formatters split a
    line: a leading separator gives an empty first field, trailing empty fields are dropped."""
    fields = re.split(r"[ \t\n\x0b\f\r]+", line)
    while fields and fields[-1] == "":
        fields.pop()
    return fields


def broker_epochs_after_load(part):
    """The leader-epoch-checkpoint text the broker's load of the partition as it is now would
    leave, or None when a file it needs cannot be read. Kafka's rules, written here from its
    source (not kafkalog's code): the cache loaded from the checkpoint; without a clean
    shutdown, the segments from the one holding the recovery point on recovered, each v2
    batch's epoch assigned when it is above the latest (LogSegment.recover;
    LeaderEpochFileCache.assign drops the entries at or above the new epoch or start offset);
    then truncateFromEnd(log end offset) and truncateFromStart(log start offset)
    (LogLoader.load). The segments are taken as valid (what a first recover left)."""
    def offsets_file(path, topic, number):
        try:
            lines = open(path, "rb").read().decode().splitlines()
        except OSError:
            return 0
        for line in lines[2:]:
            t, n, o = line.rsplit(" ", 2)
            if (t, int(n)) == (topic, number):
                return int(o)
        return 0
    logdir = os.path.dirname(os.path.abspath(part))
    topic, _, number = os.path.basename(part).rpartition("-")
    try:
        lines = open(os.path.join(part, "leader-epoch-checkpoint"), "rb").read().decode()
        lines = lines.splitlines()
        entries = [tuple(int(x) for x in _java_split(line)) for line in lines[2:]]
        if (lines[0] != "0" or int(lines[1]) != len(entries)
                or any(len(e) != 2 or min(e) < 0 for e in entries)):
            return None  # not one the broker loads: the emulation has nothing to say
        recovery_point = offsets_file(os.path.join(logdir, "recovery-point-offset-checkpoint"),
                                      topic, int(number))
        log_start = offsets_file(os.path.join(logdir, "log-start-offset-checkpoint"),
                                 topic, int(number))
    except (OSError, ValueError, IndexError):
        return None
    epochs = [list(e) for e in entries]  # [epoch, start offset], increasing
    segments = [(int(os.path.basename(n)[:20]), n) for n in kafka_segments(part)]
    if not segments:
        return None
    log_start = max(log_start, segments[0][0])
    first = max([b for b, _ in segments if b <= recovery_point] or [segments[0][0]])
    clean = os.path.exists(os.path.join(logdir, ".kafka_cleanshutdown"))
    log_end = segments[-1][0]
    for base, name in segments:
        data = open(name, "rb").read()
        for pos in entry_starts(data):
            (size,) = struct.unpack_from(">i", data, pos + 8)
            magic = data[pos + 16]
            if pos + 12 + size > len(data) or (magic == 2 and size < 49):
                break
            (offset,) = struct.unpack_from(">q", data, pos)
            last = offset + struct.unpack_from(">i", data, pos + 23)[0] if magic == 2 else offset
            log_end = max(log_end, last + 1)
            if magic != 2 or clean or base < first:
                continue
            (epoch,) = struct.unpack_from(">i", data, pos + 12)
            if epoch >= 0 and (not epochs or epoch > epochs[-1][0]):
                epochs = [e for e in epochs if e[0] < epoch and e[1] < offset] + [[epoch, offset]]
    epochs = [e for e in epochs if e[1] < log_end]
    below = [e for e in epochs if e[1] <= log_start]
    if below:
        epochs = [[below[-1][0], log_start]] + [e for e in epochs if e[1] > log_start]
    return "0\n%d\n" % len(epochs) + "".join("%d %d\n" % tuple(e) for e in epochs)


def manifest_entries(part):
    """Every entry of the quarantine manifests of ``part``, run folder by run folder."""
    qroot = os.path.join(part, "kafkalog-quarantine")
    if not os.path.isdir(qroot):
        return
    for run in sorted(os.listdir(qroot)):
        try:
            with open(os.path.join(qroot, run, "manifest.json"), "rb") as f:
                manifest = json.load(f)
        except (OSError, ValueError):
            continue
        yield from manifest.get("entries", [])


def check_cuts(before, part):
    """For every cut the quarantine manifests of ``part`` record: the entry where the cut
    starts must be one the broker does not keep (independent_verdict). Returns problems."""
    problems = []
    for entry in manifest_entries(part):
        if entry.get("what") != "cut" or not entry.get("range"):
            continue
        name = entry.get("file", "")
        raw = bytes.fromhex(entry["file_bytes_hex"]) if "file_bytes_hex" in entry else os.fsencode(name)
        data = before.get(raw)
        digits = raw.split(b".", 1)[0]
        if data is None or not digits.isdigit():
            continue
        start = entry["range"][0]
        verdict = independent_verdict(data, start, int(digits))
        if verdict is None:
            problems.append("cut %s at %d, where a valid batch starts (kafka-python reads it, "
                            "CRC holds, offsets follow)" % (name, start))
    return problems


# -- running the CLI ---------------------------------------------------------------------------------

class Run:
    __slots__ = ("args", "code", "out", "err", "seconds")

    def __init__(self, args, code, out, err, seconds):
        self.args = args
        self.code = code
        self.out = out
        self.err = err
        self.seconds = seconds

    def __repr__(self):
        return "Run(%s -> %r in %.1fs, stderr=%r)" % (" ".join(self.args), self.code,
                                                       self.seconds, self.err[-1500:])


def _limits(address_space):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def run_cli(args, timeout=60, address_space=3 << 30, env=None, cwd=None):
    """``python -m kafkalog_cli ARGS`` in a subprocess bounded in time and address space.
    Returns a Run; ``code`` is None after a timeout."""
    t0 = time.monotonic()
    e = dict(os.environ)
    e.setdefault("PYTHONIOENCODING", "utf-8")
    e.pop("COLUMNS", None)
    if env:
        e.update(env)
    try:
        p = subprocess.run([sys.executable, "-m", "kafkalog_cli", *args], cwd=cwd or REPO,
                           capture_output=True, timeout=timeout, env=e,
                           preexec_fn=_limits(address_space), stdin=subprocess.DEVNULL)
        code, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as x:
        code, out, err = None, x.stdout or b"", x.stderr or b""
    return Run(list(args), code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
               time.monotonic() - t0)


def run_problems(run, codes=(0, 1, 2)):
    """What is wrong with one CLI run (empty when it behaved)."""
    problems = []
    if run.code is None:
        problems.append("timed out after %.0fs" % run.seconds)
    elif run.code < 0:
        problems.append("killed by signal %d" % -run.code)
    elif run.code not in codes:
        problems.append("exit status %d (expected one of %s)" % (run.code, codes))
    if "Traceback (most recent call last)" in run.err:
        last = [line for line in run.err.splitlines() if line.strip()][-1:]
        problems.append("traceback: %s" % (last[0] if last else "?"))
    for marker in ("MemoryError", "Segmentation fault", "Fatal Python error"):
        if marker in run.err and "traceback" not in " ".join(problems):
            problems.append(marker)
    return problems


DUMP_VARIANTS = (
    ("dump", "--deep-iteration", "--print-data-log"),
    ("dump", "--format", "messages", "--print-data-log", "--timestamps", "iso", "--key-decoder", "hex"),
    ("dump", "--format", "json", "--deep-iteration", "--print-data-log", "--value-decoder", "json",
     "--timestamps", "iso"),
)


def _no_constant(name):
    raise ValueError("not JSON: %s" % name)


def json_lines_problems(text):
    """Every line of ``text`` must be one strict JSON object (no NaN, Infinity)."""
    for i, line in enumerate(text.splitlines(), 1):
        try:
            obj = json.loads(line, parse_constant=_no_constant)
        except ValueError as e:
            return ["line %d is not strict JSON (%s): %r" % (i, e, line[:200])]
        if not isinstance(obj, dict):
            return ["line %d is not a JSON object: %r" % (i, line[:200])]
    return []


def check_commands(tree, targets, timeout=60, recover=True, dump_variants=DUMP_VARIANTS,
                   extra_dump=(), address_space=3 << 30, compare_builds=True):
    """Run every read-only command on ``targets`` (paths under ``tree``), then ``recover`` on
    each partition of ``tree`` twice. Returns a list of problem strings."""
    problems = []
    outside = os.path.join(os.path.dirname(os.path.abspath(tree)), OUTSIDE)
    outside_before = snapshot_tree(outside) if os.path.isdir(outside) else None

    def run(args, codes=(0, 1, 2)):
        r = run_cli(list(args), timeout=timeout, address_space=address_space)
        for p in run_problems(r, codes):
            problems.append("%s: %s" % (" ".join(args), p))
        if outside_before is not None and snapshot_tree(outside) != outside_before:
            problems.append("%s changed a file outside the partition (through a symlink)"
                            % " ".join(args))
        return r

    for variant in tuple(dump_variants) + tuple(extra_dump):
        for target in targets:
            before = snapshot_tree(tree)
            r = run(list(variant) + [target])
            if "json" in variant:
                problems += ["%s: %s" % (" ".join(variant), p) for p in json_lines_problems(r.out)]
            if snapshot_tree(tree) != before:
                problems.append("%s %s changed the tree" % (" ".join(variant), target))
    if compare_builds:
        # the C fast paths against the pure-Python code they mirror: the same bytes out
        for variant in (("dump",), DUMP_VARIANTS[0]):
            c = run(list(variant) + list(targets))
            py = run_cli(list(variant) + list(targets), timeout=timeout,
                         address_space=address_space, env={"KAFKALOG_PURE_PYTHON": "1"})
            if (c.code, c.out) != (py.code, py.out):
                cl, pl = c.out.splitlines(), py.out.splitlines()
                i = next((k for k in range(min(len(cl), len(pl))) if cl[k] != pl[k]),
                         min(len(cl), len(pl)))
                problems.append("%s: C and pure-Python builds differ (exit %r vs %r), first at "
                                "line %d: %r vs %r" % (" ".join(variant), c.code, py.code, i + 1,
                                                       cl[i:i + 1], pl[i:i + 1]))
    for args in (("verify-index", "--format", "json"), ("recover", "--dry-run", "--format", "json")):
        before = snapshot_tree(tree)
        r = run(list(args) + list(targets))
        problems += ["%s: %s" % (" ".join(args), p) for p in json_lines_problems(r.out)]
        if snapshot_tree(tree) != before:
            problems.append("%s changed the tree" % " ".join(args))
    if not recover:
        return problems
    for part in partitions_of(tree):
        before = partition_contents(part)
        segments = kafka_segments(part)
        dumped = run(["dump", "--deep-iteration"] + segments) if segments else None
        first = run(["recover", "--full", part])
        if first.code is None or first.code < 0:
            continue
        lost = check_nothing_lost(before, part)
        problems += ["recover %s: %s" % (part, p) for p in lost]
        problems += ["recover %s: %s" % (part, p) for p in check_cuts(before, part)]
        if dumped is not None and dumped.code == 0 and cut_entries(part):
            problems.append("recover %s cut bytes of segments that dump --deep-iteration called "
                            "valid (exit 0): %s" % (part, ", ".join(cut_entries(part))))
        snap = snapshot_tree(part)
        # A run that met an error (exit 2: a file it cannot read and leaves alone, a refusal)
        # may meet it again; any run leaves nothing for the second to change.
        second = run(["recover", "--full", part], codes=(0, 2) if first.code == 2 else (0,))
        if snapshot_tree(part) != snap:
            problems.append("second recover %s changed the partition" % part)
        if first.code in (0, 1) and second.code == 0:
            # recover and the readers agree on what a valid batch is
            logs = kafka_segments(part)
            if logs:
                r = run(["dump", "--deep-iteration"] + logs, codes=(0,))
                if r.code == 1:
                    problems[-1] += " (after recover said the partition was sound)"
            # 2: what recover leaves alone (a FIFO, a symlink to a device) is still unreadable
            r = run(["verify-index", part], codes=(0, 2))
            if r.code == 1:
                problems[-1] += " (after recover said the partition was sound)"
    return problems


KAFKA_SEGMENT_NAME = re.compile(r"^[0-9]{20}\.log$")  # the names the broker gives segments


def kafka_segments(part):
    """The segment files of a partition by Kafka's names, regular files only."""
    return sorted(os.path.join(part, n) for n in os.listdir(part)
                  if KAFKA_SEGMENT_NAME.match(n) and os.path.isfile(os.path.join(part, n))
                  and not os.path.islink(os.path.join(part, n)))


def cut_entries(part):
    """'name@start' of every cut the quarantine manifests of ``part`` record."""
    out = ["%s@%s" % (e.get("file"), (e.get("range") or ["?"])[0])
           for e in manifest_entries(part) if e.get("what") == "cut"]
    return out


def partitions_of(tree):
    """Partition directories under ``tree`` (``tree`` itself when it is one)."""
    names = os.listdir(tree)
    if any(n.endswith(".log") or n.endswith(".index") for n in names):
        return [tree]
    return [os.path.join(tree, n) for n in sorted(names)
            if os.path.isdir(os.path.join(tree, n)) and not os.path.islink(os.path.join(tree, n))]


# -- minimising ----------------------------------------------------------------------------------------

def minimise(data, fails, rounds=8):
    """A smaller input for which ``fails(data)`` still holds: delete chunks of halving size,
    then zero single bytes (keeps the failing behaviour; simple ddmin)."""
    assert fails(data)
    chunk = max(1, len(data) // 2)
    for _ in range(64):
        i = 0
        changed = False
        while i < len(data):
            candidate = data[:i] + data[i + chunk:]
            if candidate != data and fails(candidate):
                data = candidate
                changed = True
            else:
                i += chunk
        if chunk == 1 and not changed:
            break
        chunk = max(1, chunk // 2)
    return data
