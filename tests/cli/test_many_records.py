"""A valid batch of millions of tiny records is dumped in bounded memory: records are decoded and
written a chunk at a time, never held all at once (memory ~ the decompressed batch + a chunk).

The segment is built here from Kafka's published v2 layout (DefaultRecordBatch with a zstd
records section, DefaultRecord per record); the dump runs as a real process under an address
space limit (RLIMIT_AS) that a whole-batch decode (~2 M record objects, then every output line
of the batch at once) does not fit in.
"""

import json
import os
import resource
import struct
import subprocess
import sys

import pytest
import zstandard
from crc32c import crc32c

import kafkagen as kg

# Millions of records, in bounded memory: left out of the quick suite (pytest -m "not slow").
pytestmark = pytest.mark.slow

RECORDS = 2_000_000
BASE_OFFSET = 1_000
BASE_TS = 1_700_000_000_000
# Enough for the interpreter, its libraries and the 20 MB decompressed batch; not for a batch's
# worth of per-record objects and lines.
LIMIT_AS = 420 * 1024 * 1024


def _records(n):
    """n DefaultRecords: attributes 0, timestampDelta i % 64, offsetDelta i, null key and value,
    no headers."""
    parts = []
    for i in range(n):
        body = b"\x00" + kg.varint(i % 64) + kg.varint(i) + b"\x01\x01\x00"
        parts.append(kg.varint(len(body)) + body)
    return b"".join(parts)


def _zstd_batch(base_offset, n):
    payload = zstandard.ZstdCompressor(level=3).compress(_records(n))
    attributes = 4  # zstd, CreateTime
    after_crc = struct.pack(">hiqqqhii", attributes, n - 1, BASE_TS, BASE_TS + 63, -1, -1, -1, n)
    after_crc += payload
    size = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", base_offset, size, 0, 2, crc32c(after_crc)) + after_crc


@pytest.fixture(scope="module")
def big_segment(tmp_path_factory):
    d = tmp_path_factory.mktemp("many")
    path = d / ("%020d.log" % BASE_OFFSET)
    path.write_bytes(_zstd_batch(BASE_OFFSET, RECORDS))
    return str(path)


def _limited():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_AS, LIMIT_AS))


def _dump(*args):
    out_path = args[-1] + ".out"
    with open(out_path, "wb") as out:
        p = subprocess.run([sys.executable, "-m", "kafkalog_cli", "dump", *args[:-1]],
                           stdout=out, stderr=subprocess.PIPE, preexec_fn=_limited, timeout=600)
    return p.returncode, out_path, p.stderr.decode("utf-8", "replace")


@pytest.mark.usefixtures("implementation")
def test_deep_iteration_of_two_million_records(big_segment):
    code, out, err = _dump("--deep-iteration", big_segment, big_segment)
    assert code == 0, err[-2000:]
    assert "Traceback" not in err and "MemoryError" not in err
    count = 0
    last = None
    with open(out, "rb") as f:
        for line in f:
            if line.startswith(b"| offset: "):
                count += 1
                last = line
    os.unlink(out)
    assert count == RECORDS
    assert last.startswith(b"| offset: %d CreateTime: %d " % (BASE_OFFSET + RECORDS - 1,
                                                             BASE_TS + (RECORDS - 1) % 64))


@pytest.mark.parametrize("fmt", ["json", "messages"])
def test_other_formats_of_two_million_records(big_segment, fmt):
    code, out, err = _dump("--format", fmt, "--deep-iteration", big_segment, big_segment)
    assert code == 0, err[-2000:]
    assert "Traceback" not in err and "MemoryError" not in err
    count = 0
    last = None
    with open(out, "rb") as f:
        for line in f:
            if fmt == "json":
                if line.startswith(b'{"type":"record"'):
                    count += 1
                    last = line
            elif line.startswith(b"offset: "):
                count += 1
                last = line
    os.unlink(out)
    assert count == RECORDS
    if fmt == "json":
        rec = json.loads(last)
        assert (rec["offset"], rec["timestamp"]) == (BASE_OFFSET + RECORDS - 1,
                                                     BASE_TS + (RECORDS - 1) % 64)
    else:
        assert last.startswith(b"offset: %d " % (BASE_OFFSET + RECORDS - 1))
