"""The Python API: every example of the README's "Python API" section runs as it stands on the
shipped fixtures, and what it prints is what kafka-python (or the file system) says of the same
files. Further tests hold Partition.records to kafka-python's reading of files it wrote."""

import os
import re
import subprocess
import sys

import pytest

import kafkagen as kg
from dumpcheck import REPO
from kafkagen import Rec, kafka_python_read

LOGDIR = os.path.join(REPO, "fixtures", "logdir")


def readme_examples():
    """The ```python blocks of the README's "Python API" section, in order."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("\n## Python API\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def run_example(index):
    code = readme_examples()[index]
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def kafka_python_records(partition, include_control=False):
    """(offset, timestamp, key, value, is_control) of every record of a partition directory,
    in file order, as kafka-python reads its segment files."""
    directory = os.path.join(LOGDIR, partition)
    out = []
    for name in sorted(n for n in os.listdir(directory) if n.endswith(".log")):
        with open(os.path.join(directory, name), "rb") as f:
            data = f.read()
        for kb in kafka_python_read(data):
            control = bool(getattr(kb.batch, "is_control_batch", False))
            if control and not include_control:
                continue
            for r in kb.records:
                out.append((r.offset, r.timestamp, r.key, r.value, control))
    return out


def test_the_examples_are_all_tested():
    assert len(readme_examples()) == 6


def test_example_partitions_and_segments():
    expected = []
    for name in os.listdir(LOGDIR):
        path = os.path.join(LOGDIR, name)
        if os.path.isdir(path):
            topic, _, number = name.rpartition("-")
            bases = sorted(int(n.split(".")[0]) for n in os.listdir(path) if n.endswith(".log"))
            expected.append((topic, int(number), bases))
    expected.sort()
    assert run_example(0) == ["%s %d %r" % e for e in expected]


def test_example_records_between_offsets():
    expected = ["%d %d %r %d" % (o, ts, k, len(v))
                for o, ts, k, v, _ in kafka_python_records("orders-0") if 40 <= o <= 45]
    assert expected  # the fixture has records there
    assert run_example(1) == expected


def test_example_from_a_point_in_time():
    t, t2 = 1704067250000, 1704067260000
    every = kafka_python_records("orders-0", include_control=True)
    start = next(o for o, ts, *_ in every if ts >= t)
    data = [r for r in every if not r[4]]
    first = next(i for i, r in enumerate(data) if r[1] >= t)
    wanted = [r[0] for r in data[first:] if 0 <= r[1] <= t2]
    assert run_example(2) == [str(start), repr(wanted)]


def test_example_segment_files():
    directory = os.path.join(LOGDIR, "events-0")
    expected = []
    for name in sorted(n for n in os.listdir(directory) if n.endswith(".log")):
        stem = os.path.join(directory, name[:-len(".log")])
        expected.append("%s %d %d %d" % (name, os.path.getsize(stem + ".log"),
                                          os.path.getsize(stem + ".index") // 8,
                                          os.path.getsize(stem + ".timeindex") // 12))
    assert run_example(3) == expected


def test_example_operations():
    every = kafka_python_records("orders-0", include_control=True)
    first_segment = sorted(n for n in os.listdir(os.path.join(LOGDIR, "orders-0"))
                           if n.endswith(".log"))[0]
    with open(os.path.join(LOGDIR, "orders-0", first_segment), "rb") as f:
        below = [r.offset for kb in kafka_python_read(f.read()) for r in kb.records]
    assert max(below) < 50  # the example's log start offset leaves the first segment whole below
    before = {n: os.path.getmtime(os.path.join(LOGDIR, "orders-0", n))
              for n in os.listdir(os.path.join(LOGDIR, "orders-0"))}
    assert run_example(4) == [
        "%d %d %d" % (every[0][0], every[-1][0] + 1, len(every)),
        "%d %r" % (len(below), (min(below), max(below))),
        "False"]  # the shipped fixtures were written whole: recovery has nothing to change
    assert before == {n: os.path.getmtime(os.path.join(LOGDIR, "orders-0", n))
                      for n in os.listdir(os.path.join(LOGDIR, "orders-0"))}


def test_example_dataframe():
    offsets = [r[0] for r in kafka_python_records("events-0")]
    assert run_example(5) == ["%d %d %d" % (len(offsets), min(offsets), max(offsets))]


# -- Partition.records against kafka-python, on files it wrote --------------------------------

def _partition(tmp_path, batches, name="t-0"):
    directory = tmp_path / name
    w = kg.SegmentWriter()
    for b in batches:
        b(w)
    kg.write_segment(str(directory), 0, w.data())
    return str(directory)


@pytest.mark.parametrize("codec", kg.V2_CODECS)
def test_records_match_kafka_python(tmp_path, codec):
    from kafkalog_cli import Partition
    recs = [Rec(b"k%d" % i, kg.filler(i), kg.T0 + i * 1000, (("h", b"v%d" % i),))
            for i in range(300)]
    d = _partition(tmp_path, [lambda w: w.add_v2(recs[:150], codec),
                              lambda w: w.add_v2(recs[150:], codec)])
    with open(os.path.join(d, kg.segment_name(0)), "rb") as f:
        expected = [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
                    for kb in kafka_python_read(f.read()) for r in kb.records]
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers)
           for r in Partition(d).records()]
    assert got == expected
    assert [r.topic for r in Partition(d).records()] == ["t"] * 300


def test_records_stop_at_invalid_data(tmp_path):
    from kafkalog_cli import InvalidDataError, KafkalogError, Partition
    recs = [Rec(b"k", b"v%d" % i, kg.T0 + i) for i in range(10)]
    w = kg.SegmentWriter()
    w.add_v2(recs[:5])
    good = w.data()
    w.add_v2(recs[5:])
    data = kg.flip_bit(w.data(), len(good) + 70)  # inside the second batch's records
    kg.write_segment(str(tmp_path / "t-0"), 0, data)
    seen = []
    with pytest.raises(InvalidDataError) as info:
        for r in Partition(str(tmp_path / "t-0")).records():
            seen.append(r.offset)
    assert seen == [0, 1, 2, 3, 4]
    assert isinstance(info.value, KafkalogError) and info.value.exit_code == 1
    assert "position %d" % len(good) in str(info.value)
