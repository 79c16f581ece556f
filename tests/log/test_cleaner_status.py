"""Partition.cleaner_status: the log cleaner's view of a compacted partition, on segments written
by kafka-python's builders (kafkagen), the expectations worked out by hand from Kafka's
LogCleanerManager.cleanableOffsets / calculateCleanableBytes / maxCompactionDelay and
Cleaner.buildOffsetMap / shouldRetainRecord."""

import os
import struct

import pytest

from kafkagen import ABORT, Rec, SegmentWriter, garbage_tail
from kafkalog_cli import Partition
from kafkalog_cli.log import cleaner, names
from kafkalog_cli.log.topic_config import (CLUSTER_DEFAULT, DEFAULT, GIVEN, TOPIC_CONFIG,
                                           cluster_configs, topic_config)

T0 = 1_700_000_000_000
HOUR = 3_600_000
NOW = T0 + HOUR
DAY = 86_400_000


def _checkpoint(path, entries):
    with open(path, "w") as f:
        f.write("0\n%d\n" % len(entries) + "".join("%s %d %d\n" % e for e in entries))


def _config(**given):
    values = {"cleanup.policy": "compact"}
    values.update({k.replace("_", "."): v for k, v in given.items()})
    return topic_config("compacted", None, values)


@pytest.fixture
def log_dir(tmp_path):
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
    return tmp_path


def _size(log_dir, base):
    return os.path.getsize(log_dir / "compacted-0" / names.offset_name(base, names.LOG))


def test_a_partition_never_cleaned_is_cleanable_up_to_its_active_segment(log_dir):
    s = Partition(str(log_dir / "compacted-0")).cleaner_status(_config(), now=NOW)
    assert (s.log_start_offset, s.log_end_offset) == (0, 11)
    assert s.checkpointed_cleaner_offset is None
    assert (s.first_dirty_offset, s.first_dirty_reset) == (0, cleaner.NO_CHECKPOINT)
    assert (s.high_watermark, s.last_stable_offset) == (11, 11)
    assert s.first_uncleanable_offset == 10
    assert s.stopped_by == [cleaner.ACTIVE_SEGMENT]
    assert s.clean_bytes == 0
    assert s.cleanable_bytes == _size(log_dir, 0) + _size(log_dir, 5)
    assert s.dirty_ratio == 1.0 and s.would_clean and not s.overdue
    # the map: k0..k4 (k3 by its tombstone); the keyless record is read, not mapped
    assert (s.dirty_records, s.dirty_keys, s.pass_end_offset) == (10, 5, 10)
    # removed: k0..k2 at 0-2 and k3 at 3 (superseded), the keyless record at 9; kept: k4 at 4
    # (its update is past the pass), the updates, the tombstone (no delete horizon yet)
    assert (s.records_removable, s.keyless_records) == (5, 1)
    assert s.tombstones_waiting == 1 and s.next_tombstone_expiry_ms == NOW + DAY
    assert s.problems == []


def test_the_checkpointed_offset_starts_the_dirty_range(log_dir):
    _checkpoint(log_dir / names.CLEANER_OFFSET_CHECKPOINT, [("compacted", 0, 5)])
    s = Partition(str(log_dir / "compacted-0")).cleaner_status(_config(), now=NOW)
    assert (s.checkpointed_cleaner_offset, s.first_dirty_offset, s.first_dirty_reset) == (
        5, 5, None)
    assert s.clean_bytes == _size(log_dir, 0)
    assert s.cleanable_bytes == _size(log_dir, 5)
    assert s.dirty_ratio == pytest.approx(_size(log_dir, 5) / (_size(log_dir, 0)
                                                               + _size(log_dir, 5)))
    assert (s.dirty_records, s.dirty_keys, s.pass_end_offset) == (5, 4, 10)
    assert s.records_removable == 5


@pytest.mark.parametrize("log_start, checkpoint, first_dirty, why", [
    (None, 50, 0, cleaner.PAST_LOG_END),
    (5, 2, 5, cleaner.BELOW_LOG_START),
    (5, 7, 7, None),
])
def test_a_checkpointed_offset_out_of_range_is_reset_to_the_log_start(
        log_dir, log_start, checkpoint, first_dirty, why):
    _checkpoint(log_dir / names.CLEANER_OFFSET_CHECKPOINT, [("compacted", 0, checkpoint)])
    if log_start is not None:
        _checkpoint(log_dir / names.LOG_START_OFFSET_CHECKPOINT, [("compacted", 0, log_start)])
    s = Partition(str(log_dir / "compacted-0")).cleaner_status(_config(), now=NOW)
    assert (s.first_dirty_offset, s.first_dirty_reset) == (first_dirty, why)


def test_an_open_transaction_holds_the_cleaner_at_the_last_stable_offset(tmp_path):
    d = tmp_path / "compacted-0"
    s0 = SegmentWriter(0)
    s0.add_v2([Rec(b"k%d" % i, b"v", T0) for i in range(5)])
    s0.write(str(d))
    s1 = SegmentWriter(5)
    s1.add_v2([Rec(b"k0", b"t", T0)], producer_id=7, producer_epoch=0, base_sequence=0,
              transactional=True)
    s1.add_v2([Rec(b"k1", b"w", T0)])
    s1.write(str(d))
    SegmentWriter(7).write(str(d))  # an empty active segment
    s = Partition(str(d)).cleaner_status(_config(), now=NOW)
    assert s.open_transactions == 1 and s.last_stable_offset == 5
    assert (s.first_uncleanable_offset, s.stopped_by) == (5, [cleaner.LAST_STABLE_OFFSET])
    assert s.cleanable_bytes == os.path.getsize(d / names.offset_name(0, names.LOG))
    # a high watermark below it holds it too (and the broker's checkpoint is used)
    _checkpoint(tmp_path / names.REPLICATION_OFFSET_CHECKPOINT, [("compacted", 0, 3)])
    s = Partition(str(d)).cleaner_status(_config(), now=NOW)
    assert (s.high_watermark, s.last_stable_offset) == (3, 3)
    assert s.high_watermark_source == names.REPLICATION_OFFSET_CHECKPOINT
    assert (s.first_uncleanable_offset, s.cleanable_bytes, s.would_clean) == (0, 0, False)


def test_min_compaction_lag_holds_recent_segments(log_dir):
    s = Partition(str(log_dir / "compacted-0")).cleaner_status(
        _config(min_compaction_lag_ms=2 * HOUR), now=NOW)
    assert (s.first_uncleanable_offset, s.stopped_by) == (0, [cleaner.MIN_COMPACTION_LAG])
    assert (s.cleanable_bytes, s.dirty_ratio, s.would_clean) == (0, 0.0, False)
    assert s.config.sources["min.compaction.lag.ms"] == GIVEN
    s = Partition(str(log_dir / "compacted-0")).cleaner_status(
        _config(min_compaction_lag_ms=HOUR // 2), now=NOW)
    assert s.first_uncleanable_offset == 10  # both sealed segments are old enough


def test_max_compaction_lag_makes_the_cleaning_overdue(log_dir):
    _checkpoint(log_dir / names.CLEANER_OFFSET_CHECKPOINT, [("compacted", 0, 5)])
    s = Partition(str(log_dir / "compacted-0")).cleaner_status(
        _config(min_cleanable_dirty_ratio=0.99), now=NOW)
    assert not s.would_clean and not s.overdue
    s = Partition(str(log_dir / "compacted-0")).cleaner_status(
        _config(min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=1000), now=NOW)
    # the first batch of segment 5 has max timestamp T0 + 1
    assert s.max_compaction_delay_ms == NOW - 1000 - (T0 + 1)
    assert s.overdue and s.would_clean


def test_a_full_offset_map_ends_the_pass_early(log_dir):
    # 4 slots of 24 bytes, load factor 0.9: the map takes 3 keys
    config = _config(**{"log_cleaner_dedupe_buffer_size": 96})
    assert cleaner.offset_map_capacity(config) == 3
    s = Partition(str(log_dir / "compacted-0")).cleaner_status(config, now=NOW)
    assert (s.dirty_keys, s.offset_map_full_at, s.pass_end_offset) == (3, 3, 3)
    assert s.records_removable == 0  # nothing below offset 3 is superseded by offsets 0-2


def test_tombstones_past_their_delete_horizon_are_removed(tmp_path):
    d = tmp_path / "compacted-0"
    s0 = SegmentWriter(0)
    s0.add_v2([Rec(b"a", None, T0)], delete_horizon_ms=NOW - 1)
    s0.add_v2([Rec(b"b", None, T0)], delete_horizon_ms=NOW + 5)
    s0.write(str(d))
    SegmentWriter(2).write(str(d))
    s = Partition(str(d)).cleaner_status(_config(), now=NOW)
    assert (s.records_removable, s.tombstones_waiting, s.next_tombstone_expiry_ms) == (
        1, 1, NOW + 5)


def test_an_aborted_transaction_is_removed_and_not_mapped(tmp_path):
    d = tmp_path / "compacted-0"
    s0 = SegmentWriter(0)
    s0.add_v2([Rec(b"a", b"1", T0)])
    s0.add_v2([Rec(b"a", b"aborted", T0), Rec(b"z", b"aborted", T0)], producer_id=9,
              producer_epoch=0, base_sequence=0, transactional=True)
    s0.add_control(ABORT, 9, 0, 0)
    s0.write(str(d))
    SegmentWriter(4).write(str(d))
    s = Partition(str(d)).cleaner_status(_config(), now=NOW)
    # "a" at 0 is the latest unaborted value of its key: kept; the aborted pair is removed
    assert (s.dirty_keys, s.records_removable) == (1, 2)


def test_what_would_stop_the_cleaner_is_a_problem(log_dir):
    path = log_dir / "compacted-0" / names.offset_name(5, names.LOG)
    path.write_bytes(garbage_tail(path.read_bytes()))
    s = Partition(str(log_dir / "compacted-0")).cleaner_status(_config(), now=NOW)
    assert [p.kind for p in s.problems] == ["invalid_bytes"]
    assert "marks the partition uncleanable" in s.problems[0].message


def test_a_partition_not_compacted_is_said_so(log_dir):
    s = Partition(str(log_dir / "compacted-0")).cleaner_status(now=NOW)
    assert not s.compacted and not s.would_clean
    assert (s.config.values["cleanup.policy"], s.config.sources["cleanup.policy"]) == (
        "delete", DEFAULT)


# -- the topic's settings from the cluster's metadata log -----------------------------------

def _uvarint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _compact_string(s):
    if s is None:
        return b"\x00"
    data = s.encode()
    return _uvarint(len(data) + 1) + data


def config_record(resource_type, resource_name, name, value):
    """A ConfigRecord (apiKey 4, version 0) in MetadataRecordSerde's frame, written from
    Kafka's ConfigRecord.json: resourceType int8, resourceName, name, value (nullable), no
    tagged fields."""
    return (_uvarint(1) + _uvarint(4) + _uvarint(0) + struct.pack(">b", resource_type)
            + _compact_string(resource_name) + _compact_string(name) + _compact_string(value)
            + _uvarint(0))


def test_the_topic_settings_come_from_the_cluster_metadata(log_dir):
    meta = SegmentWriter(0)
    meta.add_v2([Rec(None, config_record(4, "", "log.cleaner.min.cleanable.ratio", "0.2"), T0),
                 Rec(None, config_record(2, "compacted", "cleanup.policy", "compact"), T0),
                 Rec(None, config_record(2, "compacted", "delete.retention.ms", "1000"), T0),
                 Rec(None, config_record(2, "other", "cleanup.policy", "compact"), T0),
                 Rec(None, config_record(2, "compacted", "delete.retention.ms", None), T0),
                 Rec(None, config_record(2, "compacted", "min.compaction.lag.ms", "5"), T0)])
    meta.write(str(log_dir / "__cluster_metadata-0"))
    configs = cluster_configs(str(log_dir))
    assert configs.topics["compacted"] == {"cleanup.policy": "compact",
                                           "min.compaction.lag.ms": "5"}
    config = topic_config("compacted", configs, {"min.compaction.lag.ms": 0})
    assert config.compacted
    assert (config.values["cleanup.policy"], config.sources["cleanup.policy"]) == (
        "compact", TOPIC_CONFIG)
    assert (config.values["min.cleanable.dirty.ratio"],
            config.sources["min.cleanable.dirty.ratio"]) == (0.2, CLUSTER_DEFAULT)
    # a setting deleted goes back to the default; an option wins over the topic's setting
    assert (config.values["delete.retention.ms"], config.sources["delete.retention.ms"]) == (
        DAY, DEFAULT)
    assert (config.values["min.compaction.lag.ms"], config.sources["min.compaction.lag.ms"]) \
        == (0, GIVEN)
    # the status of the partition reads them itself
    s = Partition(str(log_dir / "compacted-0")).cleaner_status(now=NOW)
    assert s.compacted and s.config.sources["min.compaction.lag.ms"] == TOPIC_CONFIG
