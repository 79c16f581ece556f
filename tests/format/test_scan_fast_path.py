"""format.scan takes a whole v2 batch without its general checks (_describe_bad_entry), and
recover leaves an uncompressed data batch's records undecoded when they read
(scan.plain_records_ok): what comes out must be what the general path gives. The reference
here is the general path alone (each entry through _describe_bad_entry, every batch's records
decoded), run on segments kafka-python writes, mutated: bit flips, size fields, magic bytes,
offsets near the 64-bit limits, truncations, zero fill, with and without resync."""

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafkagen as kg
from kafkalog_cli.format import scan as sc
from kafkalog_cli.format.errors import CorruptRecordError, LimitExceededError
from kafkalog_cli.format.codecs import Inflater
from kafkalog_cli.format.records import LOG_OVERHEAD, iter_records, read_batch


def general_scan(buf, start, end, resync=False):
    """format.scan.scan without its fast path: every entry through the general checks."""
    pos = min(max(start, 0), end)
    while True:
        if end - pos < sc.MIN_HEADER:
            if pos < end:
                yield sc.InvalidBytes(pos, end - pos, sc.SHORT_TAIL,
                                      "%d bytes left, fewer than a batch header needs"
                                      % (end - pos), True)
            return
        _, size = struct.unpack_from(">qi", buf, pos)
        magic = sc._signed_byte(buf[pos + 16])
        kind, reason = sc._describe_bad_entry(buf, pos, end, size, magic, sc._nothing)
        if kind is None:
            nxt = pos + LOG_OVERHEAD + size
            batch = read_batch(buf, pos, size + LOG_OVERHEAD, magic)
            if (batch.is_valid or not resync or end - nxt < sc.MIN_HEADER
                    or sc.entry_is_valid(buf, nxt, end)):
                yield batch
                pos = nxt
                continue
            kind = sc.CRC_MISMATCH
            reason = "CRC mismatch (stored %d, computed %s) and no valid batch follows it" % (
                batch.crc, batch.computed_crc)
        nxt = sc.find_next_entry(buf, pos + 1, end) if resync else None
        if nxt is None:
            yield sc.InvalidBytes(pos, end - pos, kind, reason, True)
            return
        yield sc.InvalidBytes(pos, nxt - pos, kind, reason, False)
        pos = nxt


def _fields(item):
    names = item.__slots__
    return (type(item).__name__,) + tuple(getattr(item, n) for n in names)


def _records_read(buf, batch, limit):
    """Do the batch's records read as records.iter_records reads them (the general path)?"""
    try:
        for _ in iter_records(buf, batch, Inflater(), limit, 1 << 20):
            pass
    except (CorruptRecordError, LimitExceededError):
        return False
    return True


SEGMENT = kg.mixed_segment()


def _same(data, resync):
    got = [_fields(x) for x in sc.scan(data, 0, len(data), resync)]
    want = [_fields(x) for x in general_scan(data, 0, len(data), resync)]
    assert got == want
    for item in sc.scan(data, 0, len(data), resync):
        if hasattr(item, "base_offset") and sc.plain_records_ok(data, item, 100):
            assert _records_read(data, item, 100), item.position


@pytest.mark.parametrize("resync", [False, True])
def test_unmutated_segment(resync):
    _same(SEGMENT, resync)
    assert sum(1 for _ in sc.scan(SEGMENT, 0, len(SEGMENT))) == 7


@pytest.mark.parametrize("resync", [False, True])
@pytest.mark.parametrize("base_offset", [(1 << 63) - 1, (1 << 63) - 2, -(1 << 63)])
def test_offsets_at_the_limit(resync, base_offset):
    data = bytearray(SEGMENT)
    struct.pack_into(">q", data, 0, base_offset)
    _same(bytes(data), resync)


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(flips=st.lists(st.tuples(st.integers(0, len(SEGMENT) - 1), st.integers(0, 255)),
                      max_size=4),
       cut=st.integers(0, 200), zeros=st.integers(0, 100), resync=st.booleans())
def test_mutated_segments(flips, cut, zeros, resync):
    data = bytearray(SEGMENT)
    for at, byte in flips:
        data[at] = byte
    data = bytes(data[:len(data) - cut]) + b"\0" * zeros
    _same(data, resync)
