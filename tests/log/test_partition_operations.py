"""The operations as methods of Partition and LogDir (the library the commands wrap): each
carries out what its command does, under the log directory's lock, and a dry run changes
nothing. What they leave is checked with kafka-python's reading of the files."""

import os
import shutil

import pytest

import kafkagen as kg
from appendcheck import lock_held
from dumpcheck import REPO
from kafkagen import Rec, kafka_python_read

LOGDIR = os.path.join(REPO, "fixtures", "logdir")


def tree(directory):
    return {n: open(os.path.join(directory, n), "rb").read()
            for n in sorted(os.listdir(directory))
            if os.path.isfile(os.path.join(directory, n))}


@pytest.fixture
def torn(tmp_path):
    """A partition whose one segment ends in half a batch, as a crash leaves it."""
    recs = [Rec(b"k%d" % i, b"v%d" % i, kg.T0 + i) for i in range(30)]
    w = kg.SegmentWriter()
    w.add_v2(recs[:10])
    w.add_v2(recs[10:20])
    whole = w.data()
    w.add_v2(recs[20:])
    directory = str(tmp_path / "logs" / "t-0")
    kg.write_segment(directory, 0, w.data()[:len(whole) + 25])
    return directory, whole


def test_recover_cuts_a_torn_tail_and_a_dry_run_does_not(torn):
    from kafkalog_cli import Partition
    directory, whole = torn
    before = tree(directory)
    plan = Partition(directory).recover(dry_run=True)
    assert plan.changes and plan.log_end_offset == 20
    assert tree(directory) == before
    plan = Partition(directory).recover()
    assert plan.changes
    data = tree(directory)[kg.segment_name(0)]
    assert data == whole
    assert [r.offset for kb in kafka_python_read(data) for r in kb.records] == list(range(20))
    assert not Partition(directory).recover().changes  # a second run changes nothing


def test_logdir_recover_holds_each_partitions_result(torn):
    from kafkalog_cli import LogDir
    directory, _ = torn
    recovery = LogDir(os.path.dirname(directory)).recover(dry_run=True)
    assert [r.directory for r in recovery.results] == [directory]
    assert recovery.results[0].plan.log_end_offset == 20


def test_the_operations_refuse_a_log_directory_a_broker_holds(torn):
    from kafkalog_cli import LockHeld, Partition, Policy
    directory, _ = torn
    before = tree(directory)
    with lock_held(os.path.dirname(directory)):
        with pytest.raises(LockHeld):
            Partition(directory).recover()
        with pytest.raises(LockHeld):
            Partition(directory).retain(Policy(log_start_offset=5))
        with pytest.raises(LockHeld):
            Partition(directory).roll()
        assert Partition(directory).recover(dry_run=True).changes  # a dry run only reads
    assert tree(directory) == before


def test_retain_and_roll(tmp_path):
    from kafkalog_cli import Partition, Policy
    copy = str(tmp_path / "logdir")
    shutil.copytree(LOGDIR, copy)
    orders = Partition(os.path.join(copy, "orders-0"))
    bases = [s.base_offset for s in orders.segments()]
    assert len(bases) == 2
    plan = orders.retain(Policy(log_start_offset=bases[1]), delete_delay_ms=0)
    assert plan.removed_offsets == (0, bases[1] - 1)
    assert [s.base_offset for s in orders.segments()] == bases[1:]
    result = orders.roll()
    assert result.sealed.base_offset == bases[1]
    assert [s.base_offset for s in orders.segments()] == [bases[1], result.active.base_offset]
    assert os.path.getsize(result.active.log_path) == 0


def test_append_continues_at_the_log_end(tmp_path):
    from kafkalog_cli import Partition
    from kafkalog_cli.format.encode import Record
    directory = str(tmp_path / "logs" / "t-0")
    partition = Partition(directory)
    first = partition.append([Record(key=b"a", value=b"1", timestamp=kg.T0)])
    second = partition.append([Record(key=b"b", value=b"2", timestamp=kg.T0 + 1)])
    assert (first.first_offset, second.first_offset, second.log_end_offset) == (0, 1, 2)
    data = tree(directory)[kg.segment_name(0)]
    assert [(r.offset, r.key, r.value) for kb in kafka_python_read(data) for r in kb.records] \
        == [(0, b"a", b"1"), (1, b"b", b"2")]
