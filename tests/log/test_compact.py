"""Partition.compact: one pass of the log cleaner on segments written by kafka-python's
builders (kafkagen), the kept records read back with kafka-python's reader; the expectations
worked out by hand from Kafka's Cleaner (the broker itself judges the bytes in
tests/kafka_oracle/test_kafka_compact.py)."""

import os

import pytest

from appendcheck import lock_held
from kafkagen import Rec, SegmentWriter, garbage_tail, kafka_python_read
from kafkalog_cli import Partition
from kafkalog_cli.log import compact, names
from kafkalog_cli.log.lock import LockHeld
from kafkalog_cli.log.topic_config import topic_config

T0 = 1_700_000_000_000
HOUR = 3_600_000
NOW = T0 + HOUR
DAY = 86_400_000


def _config(**given):
    values = {"cleanup.policy": "compact"}
    values.update({k.replace("_", "."): v for k, v in given.items()})
    return topic_config("compacted", None, values)


@pytest.fixture
def partition(tmp_path):
    """compacted-0: segment 0 holds k0..k4 (offsets 0-4); segment 5 updates k0..k2 (5-7),
    deletes k3 (a tombstone at 8) and holds a keyless record (9); the active segment 10
    updates k4."""
    d = tmp_path / "compacted-0"
    s0 = SegmentWriter(0)
    s0.add_v2([Rec(b"k%d" % i, b"v%d" % i, T0) for i in range(5)])
    s0.write(str(d))
    s1 = SegmentWriter(5)
    s1.add_v2([Rec(b"k%d" % i, b"w%d" % i, T0 + 1) for i in range(3)])
    s1.add_v2([Rec(b"k3", None, T0 + 2)])
    s1.add_v2([Rec(None, b"nokey", T0 + 3)])
    s1.write(str(d))
    s2 = SegmentWriter(10)
    s2.add_v2([Rec(b"k4", b"w4", T0 + 4)])
    s2.write(str(d))
    return Partition(str(d))


def read_kafka_python(path):
    """The records of the .log at ``path`` as kafka-python reads them (every batch valid)."""
    with open(path, "rb") as f:
        batches = kafka_python_read(f.read())
    assert all(b.crc_ok for b in batches)
    return [r for b in batches for r in b.records]


def _live(directory):
    return sorted(n for n in os.listdir(directory) if not names.lifecycle_suffix(n))


def test_a_pass_keeps_the_last_record_of_each_key_and_the_tombstone(partition):
    result = partition.compact(_config(), now=NOW)
    assert result.skipped is None and result.end_offset == 10
    # one group (both segments fit segment.bytes): k4 at 4, the updates 5-7, the tombstone 8
    (group,) = result.groups
    assert (group.base_offset, group.bases) == (0, [0, 5])
    assert (group.records_before, group.records_after) == (10, 5)
    assert result.records_removed == 5 and result.tombstones_removed == 0
    assert _live(partition.directory) == [
        "00000000000000000000.index", "00000000000000000000.log",
        "00000000000000000000.timeindex", "00000000000000000010.log"]
    records = read_kafka_python(os.path.join(partition.directory, "00000000000000000000.log"))
    assert [(r.offset, r.key, r.value) for r in records] == [
        (4, b"k4", b"v4"), (5, b"k0", b"w0"), (6, b"k1", b"w1"), (7, b"k2", b"w2"),
        (8, b"k3", None)]
    # the old segments are kept, renamed .deleted
    assert {"00000000000000000000.log.deleted", "00000000000000000005.log.deleted"} \
        <= set(os.listdir(partition.directory))
    with open(os.path.join(partition.log_dir, names.CLEANER_OFFSET_CHECKPOINT)) as f:
        assert f.read() == "0\n1\ncompacted 0 10\n"


def test_the_tombstone_goes_once_its_delete_horizon_has_passed(partition):
    partition.compact(_config(), now=NOW)
    again = partition.compact(_config(min_cleanable_dirty_ratio=0.0), now=NOW + 2 * DAY)
    # the dirty range is now only the active segment: nothing to clean
    assert again.skipped == compact.NOTHING_DIRTY
    # from the start again (the checkpoint at the log start): the horizon stamped on the first
    # pass (NOW + a day) has passed, so the tombstone goes
    with open(os.path.join(partition.log_dir, names.CLEANER_OFFSET_CHECKPOINT), "w") as f:
        f.write("0\n1\ncompacted 0 0\n")
    second = partition.compact(_config(), now=NOW + 2 * DAY)
    assert second.tombstones_removed == 1
    records = read_kafka_python(os.path.join(partition.directory, "00000000000000000000.log"))
    assert [(r.offset, r.key) for r in records][-1] == (7, b"k2")


def test_a_dry_run_changes_nothing_and_says_the_same(partition, tmp_path):
    before = {n: open(os.path.join(partition.directory, n), "rb").read()
              for n in os.listdir(partition.directory)}
    preview = partition.compact(_config(), now=NOW, dry_run=True)
    after = {n: open(os.path.join(partition.directory, n), "rb").read()
             for n in os.listdir(partition.directory)}
    assert after == before
    assert not os.path.exists(os.path.join(partition.log_dir, names.CLEANER_OFFSET_CHECKPOINT))
    done = partition.compact(_config(), now=NOW)
    assert (preview.end_offset, preview.groups) == (done.end_offset, done.groups)


def test_a_topic_not_compacted_is_left_alone(partition):
    result = partition.compact(topic_config("compacted", None, {"cleanup.policy": "delete"}),
                               now=NOW)
    assert result.skipped == compact.NOT_COMPACTED and result.groups == []


def test_bytes_that_hold_no_batch_stop_the_pass_and_change_nothing(partition):
    log = os.path.join(partition.directory, "00000000000000000005.log")
    with open(log, "rb") as f:
        data = f.read()
    with open(log, "wb") as f:
        f.write(garbage_tail(data))
    before = sorted(os.listdir(partition.directory))
    with pytest.raises(compact.CompactError):
        partition.compact(_config(), now=NOW)
    assert sorted(os.listdir(partition.directory)) == before


def test_a_directory_a_broker_holds_is_refused(partition):
    before = sorted(os.listdir(partition.directory))
    with lock_held(partition.log_dir):
        with pytest.raises(LockHeld):
            partition.compact(_config(), now=NOW)
    assert sorted(os.listdir(partition.directory)) == before
