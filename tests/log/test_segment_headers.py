"""LogFile.headers (a pread per batch header, the producer state rebuild's reader) yields the
entries LogFile.batches yields (the scan of the whole file, read in), field for field but the
CRC it does not compute, on segments kafka-python and the tests' encoder write, mutated: bit
flips, size fields, magic bytes, offsets near the 64-bit limits, truncations, zero fill; from
the start and from positions inside."""

import os
import struct
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkagen import mixed_segment
from kafkalog_cli.format.records import Batch
from kafkalog_cli.log.segment import LogFile

FIELDS = [n for n in Batch.__slots__ if n != "computed_crc"]
SEGMENT = mixed_segment()


def _walks(data, start=0):
    fd, path = tempfile.mkstemp(suffix=".log")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        with LogFile(path) as log:
            want = [tuple(getattr(b, n) for n in FIELDS) for b in log.batches(start)]
        with LogFile(path) as log:
            got = [(tuple(getattr(b, n) for n in FIELDS), b.computed_crc)
                   for b in log.headers(start)]
    finally:
        os.unlink(path)
    assert [g for g, _ in got] == want
    assert all(crc is None for _, crc in got)
    return want


def test_unmutated_segment_every_batch():
    assert len(_walks(SEGMENT)) == 7


@pytest.mark.parametrize("base_offset", [(1 << 63) - 1, (1 << 63) - 2, -(1 << 63)])
def test_offsets_at_the_limit(base_offset):
    data = bytearray(SEGMENT)
    struct.pack_into(">q", data, 0, base_offset)
    _walks(bytes(data))


def test_a_bad_crc_is_walked_over_as_batches_does():
    data = bytearray(SEGMENT)
    data[70] ^= 0xFF  # inside the first batch's records: its CRC fails, the chain goes on
    assert len(_walks(bytes(data))) == 7


@settings(max_examples=400, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(flips=st.lists(st.tuples(st.integers(0, len(SEGMENT) - 1), st.integers(0, 255)),
                      max_size=4),
       cut=st.integers(0, 200), zeros=st.integers(0, 100),
       start=st.integers(0, len(SEGMENT) + 10))
def test_mutated_segments(flips, cut, zeros, start):
    data = bytearray(SEGMENT)
    for at, byte in flips:
        data[at] = byte
    data = bytes(data[:len(data) - cut]) + b"\0" * zeros
    _walks(data)
    _walks(data, start)


@pytest.mark.parametrize("size", [13, 14, 30, 48])
def test_size_fields_below_a_header(size):
    """A size field below the legacy minimum (14) or, for a v2 batch, below its 61-byte
    header, ends the chain there."""
    data = bytearray(SEGMENT)
    struct.pack_into(">i", data, 8, size)
    assert _walks(bytes(data)) == []
