"""Test-only writer of real Kafka segment files, built on kafka-python's record builders.

Everything here produces bytes with an implementation that is independent of ``kafkalog_cli``:
record and batch encoding, compression and CRCs come from kafka-python
(``kafka.record.memory_records.MemoryRecordsBuilder``). Only what kafka-python cannot write is
patched afterwards, following Kafka's layouts (``DefaultRecordBatch``, ``LegacyRecord``,
``EndTransactionMarker``):

* v2 ``baseOffset`` (bytes 0-7) and ``partitionLeaderEpoch`` (bytes 12-15), which kafka-python
  always writes as 0 and which are outside the CRC (``DefaultRecordBatch`` header layout);
* control batches, LogAppendTime and the delete-horizon bit: attribute bits set by hand and the
  CRC-32C recomputed with the ``crc32c`` package over bytes 21..end (``DefaultRecordBatch``
  header and attributes, ``ControlRecordType``/``EndTransactionMarker``);
* legacy (v0/v1) compressed wrappers: kafka-python writes wrapper offset 0 and timestamp 0; the
  wrapper offset is set to the last inner offset (``AbstractLegacyRecordBatch``, not CRC-covered)
  and the v1 wrapper timestamp/type bit are set and the CRC-32 recomputed with ``zlib.crc32``.

Nothing in this module imports ``kafkalog_cli``.
"""

import os
import random
import struct
import zlib
from typing import NamedTuple, Optional, Sequence, Tuple

from crc32c import crc32c
from kafka.errors import CorruptRecordError as KafkaCorruptRecordError
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CODEC_NAMES = {v: k for k, v in CODECS.items()}
LEGACY_CODECS = ("none", "gzip", "snappy", "lz4")
V2_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

ABORT, COMMIT = 0, 1

# Large enough that kafka-python's builders never refuse a record.
_BATCH_SIZE = 1 << 31


class Rec(NamedTuple):
    """One record to write: key/value are bytes or None; headers are (str, bytes|None) pairs."""
    key: Optional[bytes]
    value: Optional[bytes]
    timestamp: int = 1700000000000
    headers: Tuple[Tuple[str, Optional[bytes]], ...] = ()


def _codec_id(codec):
    return CODECS[codec] if isinstance(codec, str) else int(codec)


# -- CRC helpers ---------------------------------------------------------------------------------

def fix_v2_crc(batch):
    """Recompute the CRC-32C of one v2 batch in place (bytes 21..end, ``DefaultRecordBatch``)."""
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return batch


def fix_legacy_crc(entry):
    """Recompute the CRC-32 of one legacy entry in place (magic byte .. end, ``LegacyRecord``)."""
    struct.pack_into(">I", entry, 12, zlib.crc32(bytes(entry[16:])) & 0xFFFFFFFF)
    return entry


def _zero_gzip_mtime(buf, at):
    """Python's gzip writes the current time into the member header (bytes 4-7): zero it so
    that generated files are reproducible. Returns True when it changed something (the caller
    then recomputes the CRC)."""
    if bytes(buf[at:at + 3]) == b"\x1f\x8b\x08" and any(buf[at + 4:at + 8]):
        buf[at + 4:at + 8] = b"\x00\x00\x00\x00"
        return True
    return False


# -- v2 ------------------------------------------------------------------------------------------

def v2_batch(records: Sequence[Rec], base_offset=0, codec="none", *, partition_leader_epoch=0,
             producer_id=-1, producer_epoch=-1, base_sequence=-1, transactional=False,
             offset_deltas=None, log_append_time=None, delete_horizon_ms=None,
             expect_compressed=None):
    """One v2 record batch as bytes.

    ``offset_deltas`` (increasing, first may be > 0) leaves compaction-style gaps between records.
    ``log_append_time`` switches the batch to LogAppendTime with that maxTimestamp.
    ``delete_horizon_ms`` sets attribute bit 6 and stores the value in baseTimestamp.
    ``expect_compressed`` (default: True when a codec is asked for) asserts that kafka-python
    really compressed the batch (it sends it uncompressed when compression does not pay).
    """
    codec_id = _codec_id(codec)
    builder = MemoryRecordsBuilder(magic=2, compression_type=codec_id, batch_size=_BATCH_SIZE,
                                   offset=0, transactional=transactional, producer_id=producer_id,
                                   producer_epoch=producer_epoch, base_sequence=base_sequence)
    if offset_deltas is not None:
        assert len(offset_deltas) == len(records)
    for i, r in enumerate(records):
        if offset_deltas is not None:
            skip = offset_deltas[i] - builder.next_offset()
            assert skip >= 0, "offset deltas must increase"
            if skip:
                builder.skip(skip)
        meta = builder.append(r.timestamp, r.key, r.value, list(r.headers))
        assert meta is not None
    builder.close()
    buf = bytearray(builder.buffer())
    attrs = buf[22]
    if expect_compressed is None:
        expect_compressed = codec_id != 0
    if expect_compressed:
        assert attrs & 0x07 == codec_id, (
            "kafka-python sent the batch uncompressed; use more compressible values")
    changed = _zero_gzip_mtime(buf, 61)
    if log_append_time is not None:
        buf[22] |= ATTR_LOG_APPEND_TIME
        struct.pack_into(">q", buf, 35, log_append_time)
        changed = True
    if delete_horizon_ms is not None:
        buf[22] |= ATTR_DELETE_HORIZON
        struct.pack_into(">q", buf, 27, delete_horizon_ms)
        changed = True
    if changed:
        fix_v2_crc(buf)
    set_v2_header(buf, base_offset=base_offset, partition_leader_epoch=partition_leader_epoch)
    return bytes(buf)


def set_v2_header(buf, base_offset=None, partition_leader_epoch=None):
    """Patch the two v2 header fields outside the CRC (in place)."""
    if base_offset is not None:
        struct.pack_into(">q", buf, 0, base_offset)
    if partition_leader_epoch is not None:
        struct.pack_into(">i", buf, 12, partition_leader_epoch)
    return buf


def control_batch(control_type, base_offset, producer_id, producer_epoch, coordinator_epoch,
                  timestamp=1700000000000, partition_leader_epoch=0, key_version=0,
                  marker_version=0):
    """A transaction marker batch as the broker writes it (``EndTransactionMarker``,
    ``ControlRecordType``): one control record,
    key = version int16 + type int16, value = version int16 + coordinatorEpoch int32,
    attributes transactional|control, baseSequence -1, uncompressed (78 bytes)."""
    key = struct.pack(">hh", key_version, control_type)
    value = struct.pack(">hi", marker_version, coordinator_epoch)
    # kafka-python refuses producer id without a sequence: write 0 and patch it to -1 after.
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=_BATCH_SIZE, offset=0,
                                   transactional=True, producer_id=producer_id,
                                   producer_epoch=producer_epoch, base_sequence=0)
    builder.append(timestamp, key, value, [])
    builder.close()
    buf = bytearray(builder.buffer())
    buf[22] |= ATTR_CONTROL | ATTR_TRANSACTIONAL
    struct.pack_into(">i", buf, 53, -1)
    fix_v2_crc(buf)
    set_v2_header(buf, base_offset=base_offset, partition_leader_epoch=partition_leader_epoch)
    return bytes(buf)


def empty_control_batch(base_offset, producer_id, producer_epoch, last_offset_delta=0,
                        timestamp=1700000000000, partition_leader_epoch=0):
    """A control batch with no record, as the log cleaner leaves one once the transaction it
    ended is gone (``DefaultRecordBatch``: the 61-byte header alone, ``batchLength`` 49, record
    count 0, ``lastOffsetDelta`` kept): a marker batch with its record cut off, the length,
    count and CRC-32C rewritten."""
    buf = bytearray(control_batch(COMMIT, base_offset, producer_id, producer_epoch, 0,
                                  timestamp=timestamp,
                                  partition_leader_epoch=partition_leader_epoch)[:61])
    struct.pack_into(">i", buf, 8, 61 - 12)           # batchLength: bytes after the field
    struct.pack_into(">i", buf, 23, last_offset_delta)
    struct.pack_into(">i", buf, 57, 0)                 # records count
    return bytes(fix_v2_crc(buf))


# -- legacy v0 / v1 ------------------------------------------------------------------------------

def legacy_entries(magic, records: Sequence[Rec], base_offset=0, codec="none", *, offsets=None,
                   log_append_time=None):
    """Legacy messages as bytes: for codec none, one entry per record (absolute offsets); for a
    codec, one compressed wrapper entry holding the records as inner messages.

    Inner offsets of a wrapper are absolute for magic 0 and relative (0..n-1) for magic 1, and the
    wrapper offset is the last absolute offset (``AbstractLegacyRecordBatch``). ``offsets`` gives
    explicit absolute offsets (gaps). ``log_append_time`` (magic 1) sets the LogAppendTime bit on
    every entry (or on the wrapper only) with that timestamp.
    """
    assert magic in (0, 1)
    codec_id = _codec_id(codec)
    if offsets is None:
        offsets = list(range(base_offset, base_offset + len(records)))
    assert len(offsets) == len(records)
    if any(r.headers for r in records):
        raise ValueError("legacy messages have no headers")
    relative = codec_id != 0 and magic == 1
    first = offsets[0] - (offsets[0] if relative else 0)
    builder = MemoryRecordsBuilder(magic=magic, compression_type=codec_id, batch_size=_BATCH_SIZE,
                                   offset=first)
    for off, r in zip(offsets, records):
        target = off - offsets[0] if relative else off
        skip = target - builder.next_offset()
        assert skip >= 0, "offsets must increase"
        if skip:
            builder.skip(skip)
        assert builder.append(r.timestamp, r.key, r.value) is not None
    builder.close()
    buf = bytearray(builder.buffer())
    if codec_id == 0:
        if log_append_time is not None:
            assert magic == 1
            out = bytearray()
            for entry in split_entries(bytes(buf)):
                e = bytearray(entry)
                e[17] |= ATTR_LOG_APPEND_TIME
                struct.pack_into(">q", e, 18, log_append_time)
                out += fix_legacy_crc(e)
            buf = out
        return bytes(buf)
    # one wrapper: kafka-python wrote offset 0 and timestamp 0
    assert buf[17] & 0x07 == codec_id
    # wrapper key is null (length -1), the value length follows, then the compressed bytes
    value_at = (18 if magic == 0 else 26) + 4 + 4
    _zero_gzip_mtime(buf, value_at)
    struct.pack_into(">q", buf, 0, offsets[-1])
    if magic == 1:
        if log_append_time is not None:
            buf[17] |= ATTR_LOG_APPEND_TIME
            wrapper_ts = log_append_time
        else:
            wrapper_ts = max(r.timestamp for r in records)
        struct.pack_into(">q", buf, 18, wrapper_ts)
    fix_legacy_crc(buf)
    return bytes(buf)


# -- files ---------------------------------------------------------------------------------------

def split_entries(data):
    """Cut concatenated complete entries into their bytes (size field at 8..11)."""
    out = []
    pos = 0
    while pos + 12 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos + 8)
        out.append(data[pos:pos + 12 + size])
        pos += 12 + size
    assert pos == len(data), "not a whole number of entries"
    return out


def segment_name(base_offset):
    return "%020d.log" % base_offset


def write_segment(directory, base_offset, *chunks, name=None):
    """Write the concatenated ``chunks`` to ``directory/<20-digit base>.log``; return the path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name or segment_name(base_offset))
    with open(path, "wb") as f:
        for c in chunks:
            f.write(c)
    return str(path)


class SegmentWriter:
    """Append batches with consecutive offsets; ``data()`` gives the segment bytes.

    Each ``add_*`` method returns the bytes of what it appended.
    """

    def __init__(self, base_offset=0, partition_leader_epoch=0):
        self.base_offset = base_offset
        self.next_offset = base_offset
        self.partition_leader_epoch = partition_leader_epoch
        self.chunks = []

    def add(self, chunk, next_offset):
        self.chunks.append(chunk)
        self.next_offset = next_offset
        return chunk

    def add_v2(self, records, codec="none", gap=0, offset_deltas=None, **kw):
        kw.setdefault("partition_leader_epoch", self.partition_leader_epoch)
        base = self.next_offset + gap
        chunk = v2_batch(records, base, codec, offset_deltas=offset_deltas, **kw)
        last = base + (offset_deltas[-1] if offset_deltas else len(records) - 1)
        return self.add(chunk, last + 1)

    def add_control(self, control_type, producer_id, producer_epoch, coordinator_epoch, **kw):
        kw.setdefault("partition_leader_epoch", self.partition_leader_epoch)
        chunk = control_batch(control_type, self.next_offset, producer_id, producer_epoch,
                              coordinator_epoch, **kw)
        return self.add(chunk, self.next_offset + 1)

    def add_empty_control(self, producer_id, producer_epoch, last_offset_delta=0, **kw):
        kw.setdefault("partition_leader_epoch", self.partition_leader_epoch)
        chunk = empty_control_batch(self.next_offset, producer_id, producer_epoch,
                                    last_offset_delta, **kw)
        return self.add(chunk, self.next_offset + last_offset_delta + 1)

    def add_legacy(self, magic, records, codec="none", gap=0, offsets=None, **kw):
        if offsets is None:
            base = self.next_offset + gap
            offsets = list(range(base, base + len(records)))
        chunk = legacy_entries(magic, records, codec=codec, offsets=offsets, **kw)
        return self.add(chunk, offsets[-1] + 1)

    def data(self):
        return b"".join(self.chunks)

    def write(self, directory, name=None):
        return write_segment(directory, self.base_offset, self.data(), name=name)


# -- corruption ----------------------------------------------------------------------------------

def truncated(data, drop):
    """``data`` without its last ``drop`` bytes."""
    assert 0 < drop < len(data)
    return data[:-drop]


def garbage_tail(data, n=37, seed=1):
    """``data`` followed by ``n`` seeded random bytes."""
    return data + random.Random(seed).randbytes(n)


def zero_tail(data, n=4096):
    return data + bytes(n)


def flip_bit(data, position, bit=0):
    """``data`` with one bit flipped at ``position``."""
    b = bytearray(data)
    b[position] ^= 1 << bit
    return bytes(b)


def set_size_field(data, entry_position, size):
    """``data`` with the size field of the entry at ``entry_position`` replaced (e.g. 2 GB)."""
    b = bytearray(data)
    struct.pack_into(">i", b, entry_position + 8, size)
    return bytes(b)


def random_bytes(n, seed=7):
    return random.Random(seed).randbytes(n)


# -- the independent reader ----------------------------------------------------------------------

class KBatch(NamedTuple):
    """What kafka-python reads from one entry, plus its position and size in the file."""
    position: int
    size: int
    batch: object
    crc_ok: bool
    records: list


def kafka_python_read(data, deep=True):
    """Parse ``data`` with kafka-python; return a list of KBatch: the complete entries up to the
    first one that does not fit or whose size field is below the minimum."""
    out = []
    pos = 0
    recs = MemoryRecords(bytes(data))
    while recs.has_next():
        try:
            b = recs.next_batch()
        except KafkaCorruptRecordError:
            break  # an entry whose size field is below the minimum: the rest is not entries
        size = b.size_in_bytes
        crc_ok = b.validate_crc()
        records = list(b) if deep else []
        out.append(KBatch(pos, size, b, crc_ok, records))
        pos += size
    return out


def valid_bytes(data):
    """Bytes covered by complete entries at the start of ``data`` (kafka-python's view)."""
    return MemoryRecords(bytes(data)).valid_bytes()


# -- a sample segment that exercises every field -------------------------------------------------

T0 = 1700000000000
UNICODE = "naïve café – ключ – 鍵 – 🙂".encode("utf-8")


def filler(i, repeat=20):
    """Compressible bytes (so that kafka-python really compresses the batch)."""
    return (b"compressible-%03d|" % i) * repeat


def log_append_time_segment():
    """A segment of 60 v2 batches of 3 records each, every fourth one from the second on with
    LogAppendTime (T0 + 100000 + i * 1000, after every CreateTime of the segment): its bytes."""
    w = SegmentWriter(0)
    for i in range(60):
        recs = [Rec(b"k", filler(i, repeat=15), T0 + i * 10 + j) for j in range(3)]
        if i % 4 == 1:
            w.add_v2(recs, log_append_time=T0 + 100000 + i * 1000)
        else:
            w.add_v2(recs)
    return w.data()


def binary(seed, n):
    """Seeded random bytes without \\n and \\r (record lines stay one line each)."""
    rnd = random.Random(seed)
    return bytes(b for b in rnd.randbytes(n * 2) if b not in (0x0A, 0x0D))[:n]


def sample_segment(magic, codec="none", base_offset=0):
    """Bytes of a segment with several batches of one message format and codec.

    Covers null keys, null values, both null, unicode and binary keys/values, a maximum timestamp
    that is not the last record's, consecutive batches, a gap between batches and gaps inside a
    batch (compaction). v2 adds headers (incl. null header values), an idempotent batch, two
    transactions ended by COMMIT and ABORT markers, a sequence that wraps past 2^31-1,
    LogAppendTime and a delete horizon. v1 adds a LogAppendTime entry/wrapper.
    """
    w = SegmentWriter(base_offset, partition_leader_epoch=3)
    first = [
        Rec(b"key-0", filler(0), T0),
        Rec(None, filler(1), T0 + 1),
        Rec(b"tombstone", None, T0 + 2),
        Rec(UNICODE, UNICODE + filler(3), T0 + 5),
        Rec(binary(1, 16), binary(2, 40) + filler(4), T0 + 3),
        Rec(None, None, T0 + 4),
    ]
    if magic >= 2:
        w.add_v2(first, codec)
        w.add_v2([Rec(b"h-%d" % i, filler(10 + i), T0 + 10 + i,
                      (("trace-id", b"abc%d" % i), ("null-header", None), ("ünï", UNICODE),
                       ("bin", binary(3, 8))))
                  for i in range(3)], codec)
        w.add_v2([Rec(b"c-%d" % i, filler(20 + i), T0 + 20 + i) for i in range(4)], codec,
                 offset_deltas=[0, 2, 3, 7])
        w.add_v2([Rec(b"after-gap", filler(30), T0 + 30)], codec, gap=10)
        w.add_v2([Rec(b"txn-a-%d" % i, filler(40 + i), T0 + 40) for i in range(3)], codec,
                 producer_id=1000, producer_epoch=2, base_sequence=7, transactional=True)
        w.add_control(COMMIT, 1000, 2, 5, timestamp=T0 + 41)
        w.add_v2([Rec(b"txn-b-%d" % i, filler(50 + i), T0 + 50) for i in range(3)], codec,
                 producer_id=1001, producer_epoch=0, base_sequence=2147483646,
                 transactional=True)
        w.add_control(ABORT, 1001, 0, 6, timestamp=T0 + 51)
        w.add_v2([Rec(b"idem-%d" % i, filler(60 + i), T0 + 60) for i in range(2)], codec,
                 producer_id=2000, producer_epoch=1, base_sequence=0)
        w.add_v2([Rec(b"lat-%d" % i, filler(70 + i), T0 + 70 + i) for i in range(2)], codec,
                 log_append_time=T0 + 100000)
        w.add_v2([Rec(b"dh-%d" % i, filler(80 + i), T0 + 80 + i) for i in range(2)], codec,
                 delete_horizon_ms=T0 + 86400000)
    else:
        w.add_legacy(magic, first, codec)
        w.add_legacy(magic, [Rec(b"m-%d" % i, filler(10 + i), T0 + 10 + i) for i in range(3)],
                     codec)
        w.add_legacy(magic, [Rec(b"after-gap", filler(30), T0 + 30)], codec, gap=10)
        nxt = w.next_offset
        w.add_legacy(magic, [Rec(b"c-%d" % i, filler(20 + i), T0 + 20 + i) for i in range(3)],
                     codec, offsets=[nxt, nxt + 2, nxt + 5])
        if magic == 1:
            w.add_legacy(1, [Rec(b"lat-%d" % i, filler(70 + i), T0 + 70 + i) for i in range(2)],
                         codec, log_append_time=T0 + 100000)
    return w.data()


def mixed_segment():
    """Bytes of a small segment of seven entries in both message formats: four uncompressed v2
    batches (records with and without headers), a gzip v2 batch, a legacy v1 message and a last
    v2 batch."""
    w = SegmentWriter(0)
    for i in range(4):
        w.add_v2([Rec(b"k%d" % j, b"v" * (10 * j + i), 1700000000000 + j,
                      (("h", b"x"),) if j % 2 else ()) for j in range(3)])
    w.add_v2([Rec(None, b"compressed" * 20, 1700000000100)], codec="gzip")
    w.add_legacy(1, [Rec(b"old", b"legacy", 1700000000200)])
    w.add_v2([Rec(b"last", b"x", 1700000000300)])
    return w.data()


# -- batches compressed by other writers (streams Kafka's codecs read: ``GzipCompression``,
# ``SnappyCompression``, ``KafkaLZ4BlockInputStream``, ``ZstdCompression``) ----------------------

def recompress_v2(batch, codec, compress):
    """``batch`` (an uncompressed v2 batch) with its records area replaced by
    ``compress(records_bytes)`` and the codec bits set; batchLength and CRC are recomputed."""
    b = bytearray(batch)
    assert b[22] & 0x07 == 0, "start from an uncompressed batch"
    body = compress(bytes(b[61:]))
    out = bytearray(b[:61]) + body
    struct.pack_into(">i", out, 8, len(out) - 12)
    out[22] = (out[22] & 0xF8) | _codec_id(codec)
    return bytes(fix_v2_crc(out))


def legacy_wrapper(magic, inner, last_offset, codec, compress, timestamp=0):
    """A legacy wrapper message around the message set ``inner`` compressed by ``compress``."""
    value = compress(bytes(inner))
    body = struct.pack(">bb", magic, _codec_id(codec))
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += struct.pack(">ii", -1, len(value)) + value
    entry = bytearray(struct.pack(">qiI", last_offset, len(body) + 4, 0) + body)
    return bytes(fix_legacy_crc(entry))


# -- varints, from Kafka's published layout (ByteUtils), for tests that build records by hand ------

def uvarint(n):
    """An unsigned varint: 7 bits a byte, low first, the top bit set on all but the last."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def varint(n):
    """A signed (zigzag) varint or varlong, as records' fields are written."""
    return uvarint(((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)
