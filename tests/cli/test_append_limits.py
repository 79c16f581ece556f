"""`append`'s input limits: deep JSON is one line, not a RecursionError traceback;
a record that cannot fit in a batch under max.message.bytes (the broker's default 1048588,
`--max-message-bytes`) stops the run at its line number, as the broker refuses the batch
(RecordTooLargeException), with memory bounded whatever the line's length, and what came
before its batch stays written. What was written is read back by kafka-python.
"""

import subprocess
import sys

import pytest
from kafka.record import MemoryRecords

KAFKALOG = [sys.executable, "-m", "kafkalog_cli"]


# Runs the command as its only child and writes that child's peak RSS (KiB) to the fd named
# first.
_MEASURE = ("import os, resource, subprocess, sys\n"
            "rc = subprocess.call(sys.argv[2:])\n"
            "os.write(int(sys.argv[1]), b'%d' % resource.getrusage(resource.RUSAGE_CHILDREN)"
            ".ru_maxrss)\n"
            "sys.exit(rc)\n")


def append(directory, data, *args):
    """Run append with ``data`` on stdin; (process, its own peak RSS in bytes)."""
    import os
    r, w = os.pipe()
    try:
        proc = subprocess.run([sys.executable, "-c", _MEASURE, str(w), *KAFKALOG, "append",
                               *args, str(directory)], input=data, capture_output=True,
                              timeout=300, pass_fds=(w,))
    finally:
        os.close(w)
    with os.fdopen(r, "rb") as f:
        peak = int(f.read() or b"0") * 1024
    return proc, peak


def values(directory):
    """The values of every record of the partition, read by kafka-python."""
    out = []
    for log in sorted(directory.glob("*.log")):
        records = MemoryRecords(log.read_bytes())
        while True:
            batch = records.next_batch()
            if batch is None:
                break
            out.extend(r.value for r in batch)
    return out


def test_deeply_nested_json_is_one_line(tmp_path):
    d = tmp_path / "t-0"
    deep = b"[" * 1000 + b"]" * 1000
    for line in (deep, b'{"value": ' + deep + b'}', b'{"value": "ok"}\n' + deep):
        proc, _ = append(d, line + b"\n", "--input-format", "jsonl")
        err = proc.stderr.decode()
        assert proc.returncode == 2, err
        assert "Traceback" not in err and "RecursionError" not in err, err
        assert "nested too deeply" in err
        assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("input_format", ["lines", "jsonl"])
def test_a_record_over_max_message_bytes_stops_at_its_line(tmp_path, input_format):
    d = tmp_path / "t-0"
    big = b"x" * 2_000_000
    if input_format == "lines":
        data = b"a\nb\n" + big + b"\nc\n"
    else:
        data = b'{"value":"a"}\n{"value":"b"}\n{"value":"' + big + b'"}\n{"value":"c"}\n'
    proc, _ = append(d, data, "--input-format", input_format, "--batch-records", "1")
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "line 3:" in err and "max.message.bytes" in err, err
    assert values(d) == [b"a", b"b"]  # the batches before it stay; nothing after it


def test_a_lower_limit_is_the_brokers_batch_limit(tmp_path):
    """With --max-message-bytes 1000 a 1100-byte value is refused; a 900-byte one fits (its
    batch is 900 + 61 + record overhead < 1000 bytes) and the batch written is under it."""
    d = tmp_path / "t-0"
    proc, _ = append(d, b"y" * 900 + b"\n" + b"z" * 1100 + b"\n", "--max-message-bytes", "1000",
                     "--batch-records", "1")
    assert proc.returncode == 2
    assert "line 2:" in proc.stderr.decode()
    assert values(d) == [b"y" * 900]
    assert (d / "00000000000000000000.log").stat().st_size <= 1000


@pytest.mark.slow
@pytest.mark.parametrize("newline", [True, False])
def test_a_200_mb_line_is_refused_in_bounded_memory(tmp_path, newline):
    d = tmp_path / "t-0"
    data = b"first\n" + b"x" * (200 << 20) + (b"\n" if newline else b"")
    proc, peak = append(d, data)
    assert proc.returncode == 2, proc.stderr
    assert b"line 2:" in proc.stderr
    assert peak < 150e6, peak
    assert values(d) == []  # "first" was in the refused line's batch: dropped, as the doc says
    assert b"1 earlier record dropped" in proc.stderr or b"1 earlier records dropped" in proc.stderr
