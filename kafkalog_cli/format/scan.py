"""Walking the entries of a log: Kafka's file scan rules, plus reasons and resynchronisation.

``scan`` follows FileLogInputStream: stop when fewer than 18 bytes remain, follow each entry's
size field, treat magic < 2 as legacy and anything else as v2. Where Kafka throws (a size field
below 14) or stops quietly (an entry that runs past the end), ``scan`` yields an ``InvalidBytes``
that says why; with ``resync`` it then looks for the next position where a valid entry starts.

``buf`` may be only partly loaded: the optional ``need(a, b)`` is called before any byte of
``buf[a:b]`` is read, and may let go of what lies before ``a`` (nothing before ``a`` is read
again). Long searches (zero fill, resynchronisation) go in chunks of ``SEARCH_CHUNK`` bytes, so
a reader can keep memory flat over any stretch of garbage.
"""

from __future__ import annotations

import re
import zlib
from typing import Callable, Iterator, Optional, Tuple, Union

from .crc import crc32c

from . import codecs
from .errors import CorruptRecordError, LimitExceededError
from .records import (LEGACY_MIN_SIZE, LOG_APPEND_TIME, LOG_OVERHEAD, PREFIX, V2_OVERHEAD,
                      iter_v2_records, read_batch,
                      Batch, v2_offset_problem_at)
from .speedups import speedups
from .validity import crc_problem

SHORT_TAIL, PAST_END, BELOW_MINIMUM, ZERO_FILL, CRC_MISMATCH, OFFSET_OVERFLOW = (
    "short tail", "past end", "below minimum", "zero fill", "crc mismatch", "offset overflow")
MIN_HEADER = 18  # fewer bytes than this left: end of data, as in Kafka
SEARCH_CHUNK = 4 << 20  # bytes searched per step when looking through a bad stretch
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

_NONZERO = re.compile(rb"[^\x00]")
# A plausible entry start: size field below 2^31 and a magic byte of 0, 1 or 2.
_CANDIDATE = re.compile(rb"(?s)(?=.{8}[\x00-\x7f].{7}[\x00-\x02])")


class InvalidBytes:
    """``size`` bytes at ``position`` that hold no valid entry; ``reason`` says why.

    ``kind`` is one of SHORT_TAIL, PAST_END, BELOW_MINIMUM, ZERO_FILL, CRC_MISMATCH,
    OFFSET_OVERFLOW; ``at_end``
    tells whether the stretch runs to the end of the data scanned.
    """

    __slots__ = ("position", "size", "kind", "reason", "at_end")

    def __init__(self, position: int, size: int, kind: str, reason: str, at_end: bool) -> None:
        self.position = position
        self.size = size
        self.kind = kind
        self.reason = reason
        self.at_end = at_end

    @property
    def truncated(self) -> bool:
        """True when the bytes are an entry cut short by the end of the data."""
        return self.kind in (SHORT_TAIL, PAST_END)


def _signed_byte(b: int) -> int:
    return b - 256 if b >= 128 else b


# need(a, b): called before buf[a:b] is read (see the module notes)
Need = Callable[[int, int], object]


def _nothing(a: int, b: int) -> None:
    return None


def entry_is_valid(buf: codecs.Bytes, pos: int, end: int, need: Need = _nothing) -> bool:
    """Does a complete entry with a correct CRC start at ``pos``?"""
    if end - pos < MIN_HEADER:
        return False
    need(pos, pos + MIN_HEADER)
    _, size = PREFIX.unpack_from(buf, pos)
    magic = buf[pos + 16]
    if size < LEGACY_MIN_SIZE or pos + LOG_OVERHEAD + size > end or magic > 2:
        return False
    stop = pos + LOG_OVERHEAD + size
    need(pos, stop)
    if magic == 2:
        if size + LOG_OVERHEAD < V2_OVERHEAD or v2_offset_problem_at(buf, pos) is not None:
            return False
        return crc32c(buf[pos + 21:stop]) == int.from_bytes(buf[pos + 17:pos + 21], "big")
    return zlib.crc32(buf[pos + 16:stop]) == int.from_bytes(buf[pos + 12:pos + 16], "big")


def _find_nonzero(buf: codecs.Bytes, pos: int, end: int, need: Need) -> Optional[int]:
    """The position of the first non-zero byte of ``buf[pos:end]``, or None."""
    while pos < end:
        stop = min(end, pos + SEARCH_CHUNK)
        need(pos, stop)
        n = _NONZERO.search(buf, pos, stop)
        if n is not None:
            return n.start()
        pos = stop
    return None


def _find_candidate(buf: codecs.Bytes, pos: int, last: int, end: int,
                    need: Need) -> Optional[int]:
    """The first position in ``[pos, last]`` where an entry could start, or None."""
    while pos <= last:
        stop = min(last + 1, pos + SEARCH_CHUNK)
        # the pattern looks MIN_HEADER - 1 bytes past the position it matches
        need(pos, stop + MIN_HEADER - 1)
        m = _CANDIDATE.search(buf, pos, stop + MIN_HEADER - 1)
        if m is not None and m.start() < stop:
            return m.start()
        pos = stop
    return None


def find_next_entry(buf: codecs.Bytes, pos: int, end: int, need: Need = _nothing) -> Optional[int]:
    """The first position at or after ``pos`` where a valid entry starts, or None."""
    last = end - MIN_HEADER
    while pos <= last:
        found = _find_candidate(buf, pos, last, end, need)
        if found is None:
            return None
        pos = found
        if (buf[pos + 8] == 0 and buf[pos + 9] == 0 and buf[pos + 10] == 0
                and buf[pos + 11] < LEGACY_MIN_SIZE):
            # a size field below the minimum: skip ahead to where the size bytes could be non-zero
            n = _find_nonzero(buf, pos + 8, end, need)
            if n is None:
                return None
            pos = max(pos + 1, n - 11)
            continue
        if entry_is_valid(buf, pos, end, need):
            return pos
        pos += 1
    return None


def entry_problem(buf: codecs.Bytes, pos: int, end: int, size: int, magic: int,
                  need: Need = _nothing) -> Optional[Tuple[str, str]]:
    """(kind, reason) when the entry at ``pos`` of ``buf[:end]``, whose size field is ``size``
    and whose magic byte reads ``magic`` (signed), is no whole entry: a size field below the
    minimum (BELOW_MINIMUM), an entry running past ``end`` (PAST_END), a v2 batch below its
    minimum size (BELOW_MINIMUM) or whose offset range overflows a long (OFFSET_OVERFLOW);
    else None. Its CRC and contents are format.validity's to judge."""
    if size < LEGACY_MIN_SIZE:
        return BELOW_MINIMUM, "size field %d is below the minimum entry size of %d" % (
            size, LEGACY_MIN_SIZE)
    if pos + LOG_OVERHEAD + size > end:
        return PAST_END, ("entry of %d bytes at position %d runs past the end of the data "
                          "(%d bytes)" % (size + LOG_OVERHEAD, pos, end))
    if magic >= 2 and size + LOG_OVERHEAD < V2_OVERHEAD:
        return BELOW_MINIMUM, "v2 batch of %d bytes is below the minimum of %d" % (
            size + LOG_OVERHEAD, V2_OVERHEAD)
    if magic >= 2:
        # The CRC does not cover the base offset: a batch whose last offset does not fit a long
        # is damaged however its CRC reads (Kafka's LogValidator rejects such a range).
        need(pos, pos + V2_OVERHEAD)
        problem = v2_offset_problem_at(buf, pos)
        if problem is not None:
            return OFFSET_OVERFLOW, problem
    return None


def _describe_bad_entry(buf: codecs.Bytes, pos: int, end: int, size: int, magic: int,
                        need: Need) -> Union[Tuple[str, str], Tuple[None, None]]:
    if size < LEGACY_MIN_SIZE and _find_nonzero(buf, pos, end, need) is None:
        return ZERO_FILL, "zero fill (%d bytes of zeros)" % (end - pos)
    return entry_problem(buf, pos, end, size, magic, need) or (None, None)


def _bad_stretch(buf: codecs.Bytes, pos: int, end: int, kind: str, reason: str, resync: bool,
                 need: Need) -> InvalidBytes:
    """The invalid bytes from ``pos``: up to the next valid entry with ``resync`` (when there
    is one), else to the end."""
    nxt = find_next_entry(buf, pos + 1, end, need) if resync else None
    if nxt is None:
        return InvalidBytes(pos, end - pos, kind, reason, True)
    return InvalidBytes(pos, nxt - pos, kind, reason, False)


def scan(buf: codecs.Bytes, start: int, end: int, resync: bool = False,
         need: Optional[Need] = None) -> Iterator[Union[Batch, InvalidBytes]]:
    """Yield each entry of ``buf[start:end]`` as a Batch, and bad stretches as InvalidBytes.

    A batch whose CRC does not match is yielded (``is_valid`` false) and followed by its size
    field, as Kafka does; with ``resync`` it is reported as invalid bytes instead when its size
    field does not lead to another valid entry (or the end), since the size is then suspect.

    ``need(a, b)``, when given, is called before ``buf[a:b]`` is read (see the module notes);
    the bytes of an entry stay loaded until the next entry is asked for.
    """
    if need is None:
        need = _nothing
    # A start outside the data (a position read from a corrupt index) scans from its edge.
    pos = min(max(start, 0), end)
    kind: Optional[str]
    reason: Optional[str]
    while True:
        if end - pos < MIN_HEADER:
            if pos < end:
                yield InvalidBytes(pos, end - pos, SHORT_TAIL,
                                   "%d bytes left, fewer than a batch header needs" % (end - pos),
                                   True)
            return
        need(pos, pos + MIN_HEADER)
        _, size = PREFIX.unpack_from(buf, pos)
        magic = buf[pos + 16]
        nxt = pos + LOG_OVERHEAD + size
        if 2 <= magic < 128 and size + LOG_OVERHEAD >= V2_OVERHEAD and nxt <= end:
            # the common case, a whole v2 batch, checked as _describe_bad_entry checks it
            need(pos, min(end, nxt + MIN_HEADER))  # the entry and the next one's header
            batch = read_batch(buf, pos, size + LOG_OVERHEAD, magic)
            if INT64_MIN <= batch.last_offset <= INT64_MAX:
                if (batch.crc == batch.computed_crc or not resync or end - nxt < MIN_HEADER
                        or entry_is_valid(buf, nxt, end, lambda a, b: need(pos, b))):
                    yield batch
                    pos = nxt
                    continue
                kind = CRC_MISMATCH
                reason = "%s and no valid batch follows it" % crc_problem(batch)
            else:
                overflow = v2_offset_problem_at(buf, pos)
                assert overflow is not None  # the last offset lies outside a long
                kind, reason = OFFSET_OVERFLOW, overflow
            item = _bad_stretch(buf, pos, end, kind, reason, resync, need)
            yield item
            if item.at_end:
                return
            pos += item.size
            continue
        magic = _signed_byte(magic)
        kind, reason = _describe_bad_entry(buf, pos, end, size, magic, need)
        if kind is None or reason is None:  # both None: a whole entry
            nxt = pos + LOG_OVERHEAD + size
            need(pos, min(end, nxt + MIN_HEADER))  # the entry and the next one's header
            batch = read_batch(buf, pos, size + LOG_OVERHEAD, magic)
            if (batch.is_valid or not resync or end - nxt < MIN_HEADER
                    or entry_is_valid(buf, nxt, end, lambda a, b: need(pos, b))):
                yield batch
                pos = nxt
                continue
            kind = CRC_MISMATCH
            reason = "%s and no valid batch follows it" % crc_problem(batch)
        item = _bad_stretch(buf, pos, end, kind, reason, resync, need)
        yield item
        if item.at_end:
            return
        pos += item.size


def v2_records_ok_python(buf: codecs.Bytes, start: int, end: int, count: int, base_offset: int,
                         base_timestamp: int, log_append_time: bool, limit: int) -> bool:
    """Would records.iter_v2_records decode the ``count`` records of ``buf[start:end]`` (a v2
    batch's uncompressed records) without an error? ``_speedups.v2_records_ok`` is its C
    mirror, which reads them in place and makes no object."""
    if not 0 <= start <= end <= len(buf):
        raise ValueError("positions outside the data")
    try:
        for _ in iter_v2_records(bytes(buf[start:end]), count, base_offset, base_timestamp,
                                 0 if log_append_time else None, limit):
            pass
    except (CorruptRecordError, LimitExceededError):
        return False
    return True


v2_records_ok = (v2_records_ok_python if speedups is None
                 else speedups.v2_records_ok)  # the C mirror (format/speedups.py)


def plain_records_ok(buf: codecs.Bytes, batch: Batch, limit: int) -> bool:
    """Do the records of ``batch`` (its bytes loaded in ``buf``) read without an error, as
    records.iter_records reads them with ``limit``, for an uncompressed v2 data batch, known
    without making their objects? False for any other batch, or records that do not: decode
    them to learn why."""
    if (batch.magic != 2 or batch.codec != codecs.NONE or batch.is_control
            or batch.size < V2_OVERHEAD):
        return False
    count = batch.count
    if not count:  # no records (a v2 batch's count is never None)
        return True  # iter_records gives nothing
    start = batch.position + V2_OVERHEAD
    return v2_records_ok(buf, start, batch.position + batch.size, count,
                         batch.base_offset, batch.base_timestamp,
                         batch.timestamp_type == LOG_APPEND_TIME, limit)
