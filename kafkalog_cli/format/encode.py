"""Records and batches to bytes: v2 record batches (any codec, producer fields, control
batches) and legacy v0/v1 messages, as Kafka's MemoryRecordsBuilder writes them; a batch's
retained records written again as the log cleaner writes them
(MemoryRecords.buildRetainedRecordsInto)."""

from __future__ import annotations

import operator
import struct
import zlib
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

from .crc import crc32c

from . import codecs
from .control import ABORT, COMMIT
from .records import (ATTR_CONTROL, ATTR_DELETE_HORIZON, ATTR_TIMESTAMP_TYPE, ATTR_TRANSACTIONAL,
                      LOG_APPEND_TIME, V2_HEADER, V2_OVERHEAD, Batch, Records)
from .speedups import speedups
from .varint import encode_varint

_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_JAVA_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_SNAPPY_BLOCK = 32 * 1024  # snappy-java's default block size
_LZ4_BLOCK = 64 * 1024
_CRC = struct.Struct(">I")
_TIMESTAMP = operator.attrgetter("timestamp")

Headers = Sequence[Tuple[str, Optional[bytes]]]

# the C mirror of encode_v2_records (format/speedups.py)
_encode_records: Optional[Callable[[Sequence[Record], int], Optional[bytes]]] = (
    None if speedups is None else speedups.encode_records)


def _varint_cache() -> List[bytes]:
    return [encode_varint(i) for i in range(-1, 128)]


_SMALL = _varint_cache()  # encode_varint(n) for -1 <= n < 128, the common lengths and deltas


def _varint(n: int) -> bytes:
    return _SMALL[n + 1] if -1 <= n < 128 else encode_varint(n)


def compress(codec: int, data: bytes, magic: int = 2) -> bytes:
    """Compress a records area (v2) or an inner message set (legacy) with ``codec``, in the
    framing Kafka's Java clients write (for magic 0 LZ4, with its historical header checksum)."""
    if codec == codecs.GZIP:
        # java.util.zip.GZIPOutputStream: its own header (no mtime, no extra flags, OS
        # "unknown"), raw deflate at Kafka's default level, then the CRC-32 and size
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        return b"".join((_JAVA_GZIP_HEADER, c.compress(data), c.flush(),
                         struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)))
    if codec == codecs.SNAPPY:
        # snappy-java's SnappyOutputStream: its header, then 32 KiB blocks, each compressed as
        # C++ snappy compresses it (format/snappy.py)
        from .snappy import compress_raw
        out = [_XERIAL_HEADER]
        for i in range(0, len(data), _SNAPPY_BLOCK):
            block = compress_raw(data[i:i + _SNAPPY_BLOCK])
            out.append(struct.pack(">i", len(block)))
            out.append(block)
        return b"".join(out)
    if codec == codecs.LZ4:
        frame = codecs._lib("lz4.frame")
        # Independent 64 KiB blocks, no checksums: the subset Kafka's Lz4BlockInputStream reads.
        out = frame.compress(data, block_size=frame.BLOCKSIZE_MAX64KB, block_linked=False,
                             content_checksum=False, store_size=False)
        if magic == 0:
            # Kafka's magic-0 writers hashed the frame magic into the header checksum too
            out = out[:6] + bytes([(codecs.xxh32(out[:6]) >> 8) & 0xFF]) + out[7:]
        return out
    if codec == codecs.ZSTD:
        # zstd-jni's ZstdOutputStream as Kafka closes it: a streamed frame (no content size),
        # level 3, the data flushed as a block (ZSTD_e_flush), then an empty last block
        zstd = codecs._lib("zstandard")
        c = zstd.ZstdCompressor(level=3, write_content_size=False).compressobj()
        return c.compress(data) + c.flush(zstd.COMPRESSOBJ_FLUSH_BLOCK) + c.flush()
    if codec == codecs.NONE:
        return data
    raise ValueError("unknown codec %r" % codec)


class Record:
    """What a producer sends: key and value bytes (or None), timestamp (ms), headers as a
    sequence of (str key, bytes or None)."""

    __slots__ = ("key", "value", "timestamp", "headers")

    def __init__(self, key: Optional[bytes], value: Optional[bytes], timestamp: int,
                 headers: Headers = ()) -> None:
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers = headers

    def size_estimate(self) -> int:
        return ((len(self.key) if self.key is not None else 0)
                + (len(self.value) if self.value is not None else 0)
                + sum(len(k) + (len(v) if v is not None else 0) for k, v in self.headers) + 21)


def _v2_record(rec: Record, offset_delta: int, base_timestamp: int) -> bytes:
    return encode_v2_record(rec.key, rec.value, rec.timestamp - base_timestamp, offset_delta,
                            rec.headers)


def encode_v2_record(key: Optional[bytes], value: Optional[bytes], timestamp_delta: int,
                     offset_delta: int, headers: Headers) -> bytes:
    """One v2 record (DefaultRecord.writeTo): its length, then attributes 0, the deltas, key,
    value and headers."""
    body = [b"\x00", encode_varint(timestamp_delta), _varint(offset_delta)]
    for field in (key, value):
        if field is None:
            body.append(b"\x01")
        else:
            body.append(_varint(len(field)))
            body.append(field)
    body.append(_varint(len(headers)))
    for k, v in headers:
        kb = k.encode("utf-8")
        body.append(_varint(len(kb)))
        body.append(kb)
        if v is None:
            body.append(b"\x01")
        else:
            body.append(_varint(len(v)))
            body.append(v)
    data = b"".join(body)
    return _varint(len(data)) + data


def encode_v2_records(records: Iterable[Record], base_timestamp: int) -> bytes:
    """The records area of a v2 batch of ``records`` (offset deltas 0, 1, ...; timestamp deltas
    from ``base_timestamp``). ``_speedups.encode_records`` is its C mirror (None where a
    record is not plainly made of bytes, None, ints and (str, bytes or None) headers)."""
    return b"".join(_v2_record(r, i, base_timestamp) for i, r in enumerate(records))


def encode_v2_batch(records: Sequence[Record], base_offset: int, codec: int = codecs.NONE,
                    timestamp_type: int = 0, log_append_time: Optional[int] = None,
                    producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                    transactional: bool = False, control: bool = False,
                    partition_leader_epoch: int = -1) -> bytes:
    """One v2 record batch holding ``records`` at offsets base_offset, base_offset+1, ...

    baseTimestamp is the first record's timestamp; maxTimestamp the largest, or
    ``log_append_time`` for a LogAppendTime batch (whose records then all read as that time).
    """
    if not records:
        raise ValueError("a batch needs at least one record")
    base_ts = records[0].timestamp
    area = _encode_records(records, base_ts) if _encode_records is not None else None
    if area is None:
        area = encode_v2_records(records, base_ts)
    return encode_v2_area(area, len(records), base_offset, base_ts,
                          max(map(_TIMESTAMP, records)), codec, timestamp_type,
                          log_append_time, producer_id, producer_epoch, base_sequence,
                          transactional, control, partition_leader_epoch)


def encode_v2_area(area: bytes, count: int, base_offset: int, base_ts: int, max_ts: int,
                   codec: int = codecs.NONE, timestamp_type: int = 0,
                   log_append_time: Optional[int] = None, producer_id: int = -1,
                   producer_epoch: int = -1, base_sequence: int = -1,
                   transactional: bool = False, control: bool = False,
                   partition_leader_epoch: int = -1) -> bytes:
    """The v2 batch of ``count`` records whose uncompressed records area (the records one
    after another, as ``encode_lines`` or ``encode_v2_batch`` writes them) is ``area``:
    compressed with ``codec``, under its header and CRC. ``base_ts`` is the first record's
    timestamp, ``max_ts`` the largest (replaced by ``log_append_time`` for LogAppendTime)."""
    area = compress(codec, area)
    attrs = codec
    if timestamp_type == LOG_APPEND_TIME:
        attrs |= ATTR_TIMESTAMP_TYPE
        max_ts = _append_time(log_append_time)
    if transactional:
        attrs |= ATTR_TRANSACTIONAL
    if control:
        attrs |= ATTR_CONTROL
    header = V2_HEADER.pack(base_offset, 49 + len(area), partition_leader_epoch, 2, 0, attrs,
                            count - 1, base_ts, max_ts, producer_id, producer_epoch,
                            base_sequence, count)
    crc = crc32c(area, crc32c(header[21:]))
    return b"".join((header[:17], _CRC.pack(crc), header[21:], area))


def _append_time(log_append_time: Optional[int]) -> int:
    """The broker's time a LogAppendTime batch carries, which its caller must give."""
    if log_append_time is None:
        raise ValueError("a LogAppendTime batch needs log_append_time")
    return log_append_time


def encode_lines(data: bytes, pos: int, end: int, key: Optional[bytes], timestamp_delta: int,
                 count: int, pending_bytes: int, batch_records: int,
                 batch_bytes: int) -> Tuple[bytes, int, int, int, bool]:
    """The v2 records of the lines of ``data[pos:end]`` (each line a value, ``key`` the key of
    all, bytes or None; a line ends at b"\n", which is dropped with a b"\r" before it; the last
    one may have no newline), appended to a batch being gathered that holds ``count`` records
    of about ``pending_bytes`` bytes: the records' offset deltas go on from ``count``, their
    timestamp delta is ``timestamp_delta``. Lines are taken as a producer's RecordAccumulator
    and RecordAppender.add take records: a record that would take the batch past
    ``batch_bytes`` (counting Record.size_estimate) waits for the next batch, unless the batch
    is empty; the batch is full once it holds ``batch_records`` records or ``batch_bytes``.

    Returns (records area, position after the lines taken, records taken, pending bytes,
    full): ``full`` says the batch is complete (write it, then go on from the position).
    ``_speedups.encode_lines`` is the C mirror of this function."""
    if not 0 <= pos <= end <= len(data):
        raise ValueError("positions outside the data")
    out: List[bytes] = []
    taken = 0
    fixed = (len(key) if key is not None else 0) + 21
    key_part = b"\x01" if key is None else encode_varint(len(key)) + key
    ts_part = encode_varint(timestamp_delta)
    full = False
    while pos < end:
        nl = data.find(b"\n", pos, end)
        if nl < 0:
            stop = nxt = end
        else:
            nxt = nl + 1
            stop = nl - 1 if nl > pos and data[nl - 1] == 13 else nl
        size = fixed + stop - pos
        if count and pending_bytes + size > batch_bytes:
            full = True
            break
        value = data[pos:stop]
        body = b"".join((b"\x00", ts_part, _varint(count), key_part, _varint(len(value)), value,
                         b"\x00"))
        out.append(_varint(len(body)))
        out.append(body)
        count += 1
        taken += 1
        pending_bytes += size
        pos = nxt
        if count >= batch_records or pending_bytes >= batch_bytes:
            full = True
            break
    return b"".join(out), pos, taken, pending_bytes, full


def encode_control_batch(marker: int, base_offset: int, producer_id: int, producer_epoch: int,
                         coordinator_epoch: int, timestamp: int,
                         partition_leader_epoch: int = -1) -> bytes:
    """A COMMIT or ABORT marker batch, as the broker writes one (78 bytes)."""
    if marker not in (ABORT, COMMIT):
        raise ValueError("marker must be ABORT or COMMIT")
    rec = Record(struct.pack(">hh", 0, marker), struct.pack(">hi", 0, coordinator_epoch), timestamp)
    return encode_v2_batch([rec], base_offset, producer_id=producer_id,
                           producer_epoch=producer_epoch, transactional=True, control=True,
                           partition_leader_epoch=partition_leader_epoch)


def _legacy_message(offset: int, magic: int, attrs: int, timestamp: int, key: Optional[bytes],
                    value: Optional[bytes]) -> bytes:
    body = [struct.pack(">bb", magic, attrs)]
    if magic == 1:
        body.append(struct.pack(">q", timestamp))
    for field in (key, value):
        if field is None:
            body.append(b"\xff\xff\xff\xff")
        else:
            body.append(struct.pack(">i", len(field)))
            body.append(field)
    data = b"".join(body)
    return struct.pack(">qiI", offset, len(data) + 4, zlib.crc32(data)) + data


def encode_legacy(records: Sequence[Record], base_offset: int, magic: int,
                  codec: int = codecs.NONE, timestamp_type: int = 0,
                  log_append_time: Optional[int] = None) -> bytes:
    """Legacy messages (magic 0 or 1) at offsets base_offset, ...: one entry per record, or
    for a codec one wrapper message holding them (inner offsets absolute under magic 0,
    relative under magic 1; the wrapper's offset is the last one)."""
    if magic not in (0, 1):
        raise ValueError("legacy magic must be 0 or 1")
    if codec == codecs.ZSTD:
        raise ValueError("zstd needs message format v2")
    ts_attr = ATTR_TIMESTAMP_TYPE if magic == 1 and timestamp_type == LOG_APPEND_TIME else 0
    append_ts = _append_time(log_append_time) if ts_attr else -1

    def ts(r: Record) -> int:
        if magic == 0:
            return -1
        return append_ts if ts_attr else r.timestamp

    if codec == codecs.NONE:
        return b"".join(_legacy_message(base_offset + i, magic, ts_attr, ts(r), r.key, r.value)
                        for i, r in enumerate(records))
    inner = b"".join(_legacy_message(i if magic == 1 else base_offset + i, magic, 0, ts(r),
                                     r.key, r.value) for i, r in enumerate(records))
    wrapper_ts = max(ts(r) for r in records) if magic == 1 else -1
    return _legacy_message(base_offset + len(records) - 1, magic, codec | ts_attr, wrapper_ts, None,
                           compress(codec, inner, magic))


# -- a batch's retained records written again (MemoryRecords.buildRetainedRecordsInto) --------

def encode_retained_v2(batch: Batch, records: Records, keep: List[int], horizon: int
                       ) -> Tuple[bytes, int, int]:
    """The v2 batch of ``batch``'s records at indices ``keep``, as
    MemoryRecords.buildRetainedRecordsInto writes it: its codec (Kafka's default level), the base
    timestamp the delete horizon when one is set (``horizon`` >= 0), else the first kept
    record's timestamp. A v2 batch keeps its producer fields and its last offset; a v0/v1
    message set becomes a v2 batch too (Kafka 4 writes no other), from its first kept offset to
    its last, with no producer or leader epoch, a v0 one under CreateTime. Returns the bytes,
    the last offset and the largest timestamp of its header."""
    append_time = batch.timestamp_type == LOG_APPEND_TIME
    stamps = ([batch.max_timestamp] * len(keep) if append_time
              else [records.timestamps[i] for i in keep])
    base_ts = horizon if horizon >= 0 else stamps[0]
    if batch.magic >= 2:
        base, last = batch.base_offset, batch.last_offset
        epoch, producer = batch.partition_leader_epoch, (batch.producer_id, batch.producer_epoch,
                                                         batch.base_sequence)
    else:
        base, last = records.offsets[keep[0]], records.offsets[keep[-1]]
        epoch, producer = -1, (-1, -1, -1)
    headers = records.headers
    area = b"".join(encode_v2_record(records.keys[i], records.values[i], ts - base_ts,
                                     records.offsets[i] - base,
                                     headers[i] if headers is not None else ())
                    for i, ts in zip(keep, stamps))
    area = compress(batch.codec, area)
    attrs = batch.codec
    if append_time:
        attrs |= ATTR_TIMESTAMP_TYPE
    if batch.is_transactional:
        attrs |= ATTR_TRANSACTIONAL
    if batch.is_control:
        attrs |= ATTR_CONTROL
    if horizon >= 0:
        attrs |= ATTR_DELETE_HORIZON
    max_ts = batch.max_timestamp if append_time else max(stamps)
    header = V2_HEADER.pack(base, 49 + len(area), epoch, 2, 0, attrs, last - base, base_ts,
                            max_ts, *producer, len(keep))
    crc = crc32c(area, crc32c(header[21:]))
    return b"".join((header[:17], _CRC.pack(crc), header[21:], area)), last, max_ts


def encode_empty_v2(batch: Batch) -> bytes:
    """DefaultRecordBatch.writeEmptyHeader: the batch's header with no record."""
    attrs = 0
    if batch.timestamp_type == LOG_APPEND_TIME:
        attrs |= ATTR_TIMESTAMP_TYPE
    if batch.is_transactional:
        attrs |= ATTR_TRANSACTIONAL
    if batch.is_control:
        attrs |= ATTR_CONTROL
    header = V2_HEADER.pack(batch.base_offset, V2_OVERHEAD - 12, batch.partition_leader_epoch,
                            2, 0, attrs, batch.last_offset - batch.base_offset, -1,
                            batch.max_timestamp, batch.producer_id, batch.producer_epoch,
                            batch.base_sequence, 0)
    crc = crc32c(header[21:])
    return header[:17] + _CRC.pack(crc) + header[21:]
