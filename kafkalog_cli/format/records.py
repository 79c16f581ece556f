"""Batches and records of every message format, decoded from bytes.

A ``Batch`` is one log entry: a v2 record batch, or a legacy (v0/v1) message, which for a
compressed set is the wrapper. Its records are decoded on demand into ``Records``: parallel lists
(offsets, timestamps, keys, values, ...), one list per field rather than one object per record,
so that the per-record cost stays at a few list appends.
"""

from __future__ import annotations

import struct
import zlib
from typing import Iterable, Iterator, List, Optional, Tuple, Type, Union

from .crc import crc32c

from . import codecs
from .errors import CorruptRecordError, LimitExceededError
from .speedups import speedups as _speedups  # the optional C decoder
from .utf8 import ERRORS as JAVA_UTF8

LOG_OVERHEAD = 12
HEADER_PREFIX = 17  # offset, size, crc/ple, magic: enough to dispatch
V2_OVERHEAD = 61
LEGACY_MIN_SIZE = 14  # LegacyRecord.RECORD_OVERHEAD_V0: smallest size field Kafka accepts

CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP_TYPE = 0, 1, -1
TIMESTAMP_TYPE_NAMES = {CREATE_TIME: "CreateTime", LOG_APPEND_TIME: "LogAppendTime",
                        NO_TIMESTAMP_TYPE: "NoTimestampType"}

# offset, size, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta, baseTimestamp,
# maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
V2_HEADER = struct.Struct(">qiibIHiqqqhii")
LEGACY_HEADER = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
PREFIX = struct.Struct(">qi")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")

ATTR_CODEC = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40


def record_sequence(base_sequence: int, offset_delta: int) -> int:
    """A record's sequence number: -1 without one, else the base plus the delta, continuing
    at 0 past Integer.MAX_VALUE (DefaultRecordBatch.incrementSequence)."""
    if base_sequence == -1:
        return -1
    seq = base_sequence + offset_delta
    return seq - 0x80000000 if seq > 0x7FFFFFFF else seq


class Batch:
    """One log entry's header fields; v2 fields are -1/False for legacy entries."""

    __slots__ = ("position", "size", "magic", "base_offset", "last_offset", "count", "crc",
                 "computed_crc", "codec", "timestamp_type", "max_timestamp", "base_timestamp",
                 "producer_id", "producer_epoch", "base_sequence", "partition_leader_epoch",
                 "is_transactional", "is_control", "has_delete_horizon", "attributes")
    position: int
    size: int
    magic: int
    base_offset: int
    last_offset: int
    count: Optional[int]  # None for a legacy entry
    crc: int
    computed_crc: Optional[int]  # None below a v2 batch's minimum size, or not computed
    codec: int
    timestamp_type: int
    max_timestamp: int
    base_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    partition_leader_epoch: int
    is_transactional: bool
    is_control: bool
    has_delete_horizon: bool
    attributes: int

    @property
    def is_valid(self) -> bool:
        return self.crc == self.computed_crc

    @property
    def last_sequence(self) -> int:
        return record_sequence(self.base_sequence, self.last_offset - self.base_offset)

    @property
    def delete_horizon_ms(self) -> Optional[int]:
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def timestamp_type_name(self) -> str:
        return TIMESTAMP_TYPE_NAMES[self.timestamp_type]

    @property
    def codec_name(self) -> str:
        return codecs.codec_name(self.codec)

    @property
    def codec_problem(self) -> Optional[str]:
        """Why the batch's codec id cannot be read (None when it can)."""
        if self.codec > codecs.ZSTD:
            return "unknown compression type id %d" % self.codec
        if self.codec == codecs.ZSTD and self.magic < 2:
            return "zstd is not allowed for message format v%d" % self.magic
        return None


def read_batch(buf: codecs.Bytes, pos: int, size: int, magic: int) -> Batch:
    """Parse the header of the entry of ``size`` bytes at ``pos`` (bounds already checked)."""
    b = Batch()
    b.position = pos
    b.size = size
    b.magic = magic
    if magic >= 2:
        (base_offset, _, ple, _, crc, attrs, last_delta, base_ts, max_ts, pid, epoch, base_seq,
         count) = V2_HEADER.unpack_from(buf, pos)
        attrs &= 0xFF
        b.base_offset = base_offset
        b.last_offset = base_offset + last_delta
        b.count = count
        b.crc = crc
        b.computed_crc = crc32c(buf[pos + 21:pos + size]) if size >= V2_OVERHEAD else None
        b.codec = attrs & ATTR_CODEC
        b.timestamp_type = LOG_APPEND_TIME if attrs & ATTR_TIMESTAMP_TYPE else CREATE_TIME
        b.max_timestamp = max_ts
        b.base_timestamp = base_ts
        b.producer_id = pid
        b.producer_epoch = epoch
        b.base_sequence = base_seq
        b.partition_leader_epoch = ple
        b.is_transactional = bool(attrs & ATTR_TRANSACTIONAL)
        b.is_control = bool(attrs & ATTR_CONTROL)
        b.has_delete_horizon = bool(attrs & ATTR_DELETE_HORIZON)
        b.attributes = attrs
        return b
    offset, _, crc, _, attrs = LEGACY_HEADER.unpack_from(buf, pos)
    attrs &= 0xFF
    b.base_offset = b.last_offset = offset
    b.count = None
    b.crc = crc
    b.computed_crc = zlib.crc32(buf[pos + 16:pos + size])
    b.codec = attrs & ATTR_CODEC
    if magic == 1 and size >= 22:
        b.timestamp_type = LOG_APPEND_TIME if attrs & ATTR_TIMESTAMP_TYPE else CREATE_TIME
        b.max_timestamp = INT64.unpack_from(buf, pos + 18)[0]
    else:
        b.timestamp_type = NO_TIMESTAMP_TYPE
        b.max_timestamp = -1
    b.base_timestamp = b.max_timestamp
    b.producer_id = -1
    b.producer_epoch = -1
    b.base_sequence = -1
    b.partition_leader_epoch = -1
    b.is_transactional = False
    b.is_control = False
    b.has_delete_horizon = False
    b.attributes = attrs
    return b


# A v2 record's headers: (key, value or None) pairs.
Headers = Tuple[Tuple[str, Optional[bytes]], ...]


class Records:
    """The records of one batch, one list per field.

    ``keys``/``values`` hold bytes or None (null). v2 batches fill ``headers`` (a tuple of
    (key str, value bytes or None) pairs per record, ``()`` when none); legacy entries fill
    ``crcs`` and ``valids`` (each message's own CRC and whether it checks out).
    """

    __slots__ = ("offsets", "timestamps", "keys", "values", "headers", "crcs", "valids")

    def __init__(self) -> None:
        self.offsets: List[int] = []
        self.timestamps: List[int] = []
        self.keys: List[Optional[bytes]] = []
        self.values: List[Optional[bytes]] = []
        self.headers: Optional[List[Headers]] = None
        self.crcs: Optional[List[int]] = None
        self.valids: Optional[List[bool]] = None

    def __len__(self) -> int:
        return len(self.offsets)

    def select(self, indices: Iterable[int]) -> "Records":
        """A Records of the records at ``indices`` only."""
        out = Records()
        for name in self.__slots__:
            column = getattr(self, name)
            if column is not None:
                setattr(out, name, [column[i] for i in indices])
        return out


# Records are decoded this many at a time, so that a batch of millions of tiny records costs
# its decompressed bytes plus one chunk of Python objects, never an object per record at once.
RECORD_CHUNK = 32768

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
# A one-byte zigzag varint is within this of zero: a base this far from the int64 limits cannot
# overflow with it, so the decoder checks the sum only on the multi-byte path.
_SMALL_DELTA = 64


def v2_offset_problem(base_offset: int, last_offset_delta: int) -> Optional[str]:
    """Why a v2 batch's offset range is impossible (its last offset, base offset plus
    lastOffsetDelta, does not fit a signed 64-bit long), or None. Kafka's longs would wrap;
    its batch validation (LogValidator) rejects the wrapped range."""
    last = base_offset + last_offset_delta
    if last > INT64_MAX or last < INT64_MIN:
        return ("last offset overflows a 64-bit long: baseOffset %d + lastOffsetDelta %d"
                % (base_offset, last_offset_delta))
    return None


def v2_offset_problem_at(buf: codecs.Bytes, pos: int) -> Optional[str]:
    """v2_offset_problem of the v2 batch header at ``buf[pos:]`` (61 bytes there)."""
    return v2_offset_problem(INT64.unpack_from(buf, pos)[0], INT32.unpack_from(buf, pos + 23)[0])


def _new_v2_records() -> Records:
    recs = Records()
    recs.headers = []
    return recs


def iter_v2_records(data: codecs.Inflated, count: int, base_offset: int, base_timestamp: int,
                    append_time: Optional[int], limit: int,
                    chunk: int = RECORD_CHUNK) -> Iterator[Records]:
    """Yield the ``count`` v2 records that fill ``data`` (bytes) exactly, as Records of at most
    ``chunk`` records each.

    ``append_time`` is the batch max timestamp for LogAppendTime batches (every record then
    carries it), else None. ``limit`` bounds each record's size. At damage, the complete records
    before it are yielded, then CorruptRecordError (LimitExceededError for ``limit``) is raised.
    """
    if count < 0:
        raise CorruptRecordError("invalid record count %d" % count)
    decode = _decode_v2_loop if _speedups is None else _speedups.decode_v2
    pos = 0
    done = 0
    while done < count:
        n = min(chunk, count - done)
        recs = _new_v2_records()
        try:
            pos = decode(data, pos, n, done, count, base_offset, base_timestamp, append_time,
                         limit, recs, CorruptRecordError, LimitExceededError)
        except CorruptRecordError:
            if len(recs):
                yield recs
            raise
        done += n
        yield recs
    if pos != len(data):
        raise CorruptRecordError("incorrect declared batch size: %d bytes remain after %d records"
                                 % (len(data) - pos, count))


def join_records(chunks: Iterable[Records], empty: Records) -> Records:
    """One Records holding every record of ``chunks`` (``empty`` when there are none)."""
    out: Optional[Records] = None
    for recs in chunks:
        if out is None:
            out = recs
            continue
        for name in Records.__slots__:
            column = getattr(recs, name)
            if column is not None:
                getattr(out, name).extend(column)
    return empty if out is None else out


def held_back(chunks: Iterable[Records]) -> Iterator[Records]:
    """The chunks of ``chunks`` (an iter_records), each given out only once the next one (or
    the end) has been decoded without error: a batch damaged within its first chunk gives
    nothing, as a batch decoded whole does; the partial chunk before damage is never given."""
    prev: Optional[Records] = None
    for recs in chunks:
        if prev is not None:
            yield prev
        prev = recs
    if prev is not None:
        yield prev


def decode_v2_records(data: codecs.Inflated, count: int, base_offset: int, base_timestamp: int,
                      append_time: Optional[int], limit: int) -> Records:
    """All ``count`` v2 records of ``data`` as one Records (see iter_v2_records)."""
    return join_records(iter_v2_records(data, count, base_offset, base_timestamp, append_time,
                                        limit), _new_v2_records())


def _varint(data: codecs.Inflated, pos: int, end: int, max_bytes: int) -> Tuple[int, int]:
    """A zigzag varint of a record body: IndexError when it runs past ``end`` (reported as
    running past the batch data), CorruptRecordError when it is longer than ``max_bytes``.
    Excess high bits of the last group are dropped as Kafka's ByteUtils does."""
    raw = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise IndexError
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            raw &= 0xFFFFFFFF if max_bytes == 5 else 0xFFFFFFFFFFFFFFFF
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise CorruptRecordError("varint longer than %d bytes" % max_bytes)


def _decode_v2_loop(data: codecs.Inflated, pos: int, n: int, done: int, total: int,
                    base_offset: int, base_timestamp: int, append_time: Optional[int],
                    limit: int, recs: Records,
                    corrupt_error: Type[CorruptRecordError] = CorruptRecordError,
                    limit_error: Type[LimitExceededError] = LimitExceededError) -> int:
    """Decode ``n`` v2 records from ``data[pos:]`` (records ``done`` on of ``total``) into the
    lists of ``recs``; return the position after them.

    The rules (_speedups.decode_v2 follows them to the byte and the message): fields are read
    within the batch data, as Kafka's DefaultRecord.readFrom reads them from the batch buffer,
    and a record must then have used exactly its declared length. A record offset or timestamp
    outside a signed 64-bit long is invalid data. On an error ``recs`` keeps the complete
    records before it.
    """
    try:
        return _decode_v2_records(data, pos, n, done, total, base_offset, base_timestamp,
                                  append_time, limit, recs)
    except BaseException as e:
        complete = len(recs.headers or ())  # a v2 Records: headers are added last
        for column in (recs.offsets, recs.timestamps, recs.keys, recs.values):
            del column[complete:]
        if isinstance(e, IndexError):
            raise CorruptRecordError("record runs past the end of the batch data") from None
        raise


def _offset_overflow(base_offset: int, delta: int) -> CorruptRecordError:
    return CorruptRecordError("record offset overflows a 64-bit long: base offset %d + "
                              "offsetDelta %d" % (base_offset, delta))


def _timestamp_overflow(base_timestamp: int, delta: int) -> CorruptRecordError:
    return CorruptRecordError("record timestamp overflows a 64-bit long: base timestamp %d + "
                              "timestampDelta %d" % (base_timestamp, delta))


def _decode_v2_records(data: codecs.Inflated, pos: int, n: int, done: int, total: int,
                       base_offset: int, base_timestamp: int, append_time: Optional[int],
                       limit: int, recs: Records) -> int:
    add_off = recs.offsets.append
    add_ts = recs.timestamps.append
    key_and_value = (recs.keys.append, recs.values.append)
    headers = recs.headers
    assert headers is not None  # a v2 Records (_new_v2_records)
    add_hdr = headers.append
    end = len(data)
    no_headers: Headers = ()
    lo, hi = INT64_MIN, INT64_MAX
    check_ts = append_time is None
    # Can a one-byte delta overflow? Only next to the limits.
    off_edge = not lo + _SMALL_DELTA <= base_offset <= hi - _SMALL_DELTA
    ts_edge = check_ts and not lo + _SMALL_DELTA <= base_timestamp <= hi - _SMALL_DELTA
    for i in range(n):
        if pos >= end:
            raise CorruptRecordError("premature end of record data: %d of %d records read"
                                     % (done + i, total))
        # length
        b = data[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            try:
                length, pos = _varint(data, pos, end, 5)
            except (IndexError, CorruptRecordError):
                raise CorruptRecordError("invalid record length varint") from None
        if length < 0 or length > end - pos:
            raise CorruptRecordError("invalid record size %d with %d bytes left"
                                     % (length, end - pos))
        if length > limit:
            raise LimitExceededError("record of %d bytes exceeds the limit of %d bytes"
                                     % (length, limit))
        rec_end = pos + length
        pos += 1  # attributes: unused
        # timestampDelta (varlong)
        b = data[pos]
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            pos += 1
            if ts_edge and not lo <= base_timestamp + ts_delta <= hi:
                raise _timestamp_overflow(base_timestamp, ts_delta)
        else:
            ts_delta, pos = _varint(data, pos, end, 10)
            if check_ts and not lo <= base_timestamp + ts_delta <= hi:
                raise _timestamp_overflow(base_timestamp, ts_delta)
        # offsetDelta
        b = data[pos]
        if b < 0x80:
            delta = (b >> 1) ^ -(b & 1)
            pos += 1
            if off_edge and not lo <= base_offset + delta <= hi:
                raise _offset_overflow(base_offset, delta)
        else:
            delta, pos = _varint(data, pos, end, 5)
            if not lo <= base_offset + delta <= hi:
                raise _offset_overflow(base_offset, delta)
        # key, value: a length past the data shows at the next read (IndexError)
        for add in key_and_value:
            b = data[pos]
            if b < 0x80:
                size = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                size, pos = _varint(data, pos, end, 5)
            if size < 0:
                add(None)
            else:
                add(data[pos:pos + size])
                pos += size
        # headers
        b = data[pos]
        if b == 0:
            pos += 1
            hdrs = no_headers
        else:
            hdrs, pos = _read_headers(data, pos, end)
        if pos != rec_end:
            raise CorruptRecordError("invalid record size: expected %d bytes, read %d"
                                     % (length, pos - (rec_end - length)))
        add_off(base_offset + delta)
        add_ts(base_timestamp + ts_delta if append_time is None else append_time)
        add_hdr(hdrs)
    return pos


def _read_headers(data: codecs.Inflated, pos: int, end: int) -> Tuple[Headers, int]:
    n, pos = _varint(data, pos, end, 5)
    if n < 0 or n > end - pos:
        raise CorruptRecordError("invalid number of record headers %d" % n)
    hdrs: List[Tuple[str, Optional[bytes]]] = []
    for _ in range(n):
        klen, pos = _varint(data, pos, end, 5)
        if klen < 0 or klen > end - pos:
            raise CorruptRecordError("invalid header key size %d" % klen)
        key = data[pos:pos + klen].decode("utf-8", JAVA_UTF8)
        pos += klen
        vlen, pos = _varint(data, pos, end, 5)
        if vlen < 0:
            hdrs.append((key, None))
        else:
            if vlen > end - pos:
                raise CorruptRecordError("invalid header value size %d" % vlen)
            hdrs.append((key, data[pos:pos + vlen]))
            pos += vlen
    return tuple(hdrs), pos


def _legacy_key_value(buf: Union[codecs.Bytes, codecs.Inflated], pos: int, end: int
                      ) -> Tuple[Optional[bytes], Optional[bytes]]:
    """Key and value of a legacy message whose key length field is at ``pos``."""
    if pos + 4 > end:
        raise CorruptRecordError("legacy message too short for its key length")
    (klen,) = INT32.unpack_from(buf, pos)
    pos += 4
    key = None
    if klen >= 0:
        if pos + klen > end:
            raise CorruptRecordError("legacy message key of %d bytes runs past its end" % klen)
        key = bytes(buf[pos:pos + klen])
        pos += klen
    if pos + 4 > end:
        raise CorruptRecordError("legacy message too short for its value length")
    (vlen,) = INT32.unpack_from(buf, pos)
    pos += 4
    value = None
    if vlen >= 0:
        if pos + vlen > end:
            raise CorruptRecordError("legacy message value of %d bytes runs past its end" % vlen)
        value = bytes(buf[pos:pos + vlen])
        pos += vlen
    return key, value


def _legacy_body_start(magic: int) -> int:
    return 18 + (8 if magic == 1 else 0)


def _new_legacy_records() -> Records:
    recs = Records()
    recs.crcs = []
    recs.valids = []
    return recs


def iter_legacy_records(buf: codecs.Bytes, batch: Batch, inflater: codecs.Inflater, limit: int,
                        chunk: int = RECORD_CHUNK) -> Iterator[Records]:
    """The messages of a legacy entry, as Records of at most ``chunk`` messages: the entry
    itself, or a compressed wrapper's inner messages."""
    pos = batch.position
    end = pos + batch.size
    magic = batch.magic
    if batch.size < _legacy_body_start(magic) - LOG_OVERHEAD + 8:
        raise CorruptRecordError("legacy message of %d bytes is below the minimum size"
                                 % batch.size)
    key, value = _legacy_key_value(buf, pos + _legacy_body_start(magic), end)
    if batch.codec == codecs.NONE:
        recs = Records()
        recs.crcs = []
        recs.valids = []
        recs.offsets.append(batch.base_offset)
        recs.timestamps.append(batch.max_timestamp)
        recs.keys.append(key)
        recs.values.append(value)
        recs.crcs.append(batch.crc)
        recs.valids.append(batch.crc == batch.computed_crc)
        yield recs
        return
    if value is None:
        raise CorruptRecordError("compressed wrapper message has a null value")
    inner = inflater.inflate(batch.codec, value, limit, magic)
    iend = _inner_end(inner)  # first pass: sizes checked, no per-message objects kept
    if iend == 0:
        raise CorruptRecordError("compressed wrapper message has no inner records")
    base = 0
    if magic >= 1:
        last_inner = PREFIX.unpack_from(inner, _last_inner_position(inner, iend))[0]
        if batch.base_offset != 0:
            if batch.base_offset < last_inner:
                raise CorruptRecordError("wrapper offset %d is below the last inner relative "
                                         "offset %d" % (batch.base_offset, last_inner))
            base = batch.base_offset - last_inner
    append_time = batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else None
    recs = Records()
    recs.crcs = []
    recs.valids = []
    ipos = 0
    while ipos < iend:
        off, size = PREFIX.unpack_from(inner, ipos)
        crc, imagic, iattrs = struct.unpack_from(">Ibb", inner, ipos + 12)
        if off + base > INT64_MAX:
            raise CorruptRecordError("inner offset %d with the wrapper's base %d overflows a "
                                     "64-bit long" % (off, base))
        if iattrs & ATTR_CODEC:
            raise CorruptRecordError("inner messages must not be compressed (offset %d)"
                                     % (off + base))
        ibody = _legacy_body_start(imagic if imagic in (0, 1) else 0)
        if imagic == 1 and size >= 22:
            ts = INT64.unpack_from(inner, ipos + 18)[0]
        else:
            ts = -1
        ikey, ival = _legacy_key_value(inner, ipos + ibody, ipos + LOG_OVERHEAD + size)
        recs.offsets.append(off + base)
        recs.timestamps.append(append_time if append_time is not None else
                               (ts if magic == 1 else -1))
        recs.keys.append(ikey)
        recs.values.append(ival)
        recs.crcs.append(crc)
        recs.valids.append(crc == zlib.crc32(inner[ipos + 16:ipos + LOG_OVERHEAD + size]))
        ipos += LOG_OVERHEAD + size
        if len(recs) >= chunk:
            yield recs
            recs = Records()
            recs.crcs = []
            recs.valids = []
    if len(recs):
        yield recs


def _inner_end(inner: codecs.Inflated) -> int:
    """Where the complete inner messages of a decompressed wrapper end: a truncated inner entry
    ends iteration silently, as in Kafka; a size field below the minimum is an error."""
    ipos = 0
    iend = len(inner)
    while iend - ipos >= LOG_OVERHEAD + 5:
        size = PREFIX.unpack_from(inner, ipos)[1]
        if size < LEGACY_MIN_SIZE:
            raise CorruptRecordError("inner message size %d below the minimum" % size)
        if ipos + LOG_OVERHEAD + size > iend:
            break
        ipos += LOG_OVERHEAD + size
    return ipos


def _last_inner_position(inner: codecs.Inflated, iend: int) -> int:
    ipos = last = 0
    while ipos < iend:
        last = ipos
        ipos += LOG_OVERHEAD + PREFIX.unpack_from(inner, ipos)[1]
    return last


def iter_records(buf: codecs.Bytes, batch: Batch, inflater: codecs.Inflater, limit: int,
                 batch_limit: int, chunk: int = RECORD_CHUNK) -> Iterator[Records]:
    """The records of ``batch`` (whose bytes are ``buf[batch.position:+batch.size]``), as
    Records of at most ``chunk`` records: memory stays bounded by the batch's decompressed
    size (at most ``batch_limit``) plus a chunk. At damage, the complete records before it are
    yielded, then CorruptRecordError is raised. A batch of no records yields nothing."""
    if batch.magic < 2:
        yield from iter_legacy_records(buf, batch, inflater, batch_limit, chunk)
        return
    if batch.size < V2_OVERHEAD:
        raise CorruptRecordError("batch of %d bytes is below the minimum of %d"
                                 % (batch.size, V2_OVERHEAD))
    count = batch.count
    if not count:  # no records (a v2 batch's count is never None)
        return
    start = batch.position + V2_OVERHEAD
    end = batch.position + batch.size
    data: codecs.Inflated
    if batch.codec == codecs.NONE:
        data = bytes(buf[start:end])
    else:
        data = inflater.inflate(batch.codec, buf[start:end], batch_limit, batch.magic)
    append_time = batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else None
    yield from iter_v2_records(data, count, batch.base_offset, batch.base_timestamp,
                               append_time, limit, chunk)


def decode_records(buf: codecs.Bytes, batch: Batch, inflater: codecs.Inflater, limit: int,
                   batch_limit: int) -> Records:
    """All records of ``batch`` as one Records (see iter_records; for small batches)."""
    empty = _new_legacy_records() if batch.magic < 2 else _new_v2_records()
    return join_records(iter_records(buf, batch, inflater, limit, batch_limit), empty)
