"""Producer state (kafkalog_cli.log.producer_state) against Kafka's rules, on real batches.

The batches are written by kafka-python (tests/kafkagen.py): idempotent and transactional
producers, a commit, aborts, epoch bumps (by a data batch and by a marker), a sequence that
wraps past Integer.MAX_VALUE, an empty control batch, and two producers whose transactions
interleave. The expected states are written out here by hand from ProducerStateManager's and
ProducerAppendInfo's rules, and the expected snapshot files are encoded by tests/indexgen.py
from the ProducerSnapshot layout (version int16 1, CRC-32C of the bytes after the CRC, count
int32, then 46-byte entries), with struct and crc32c, not with the module under test.
"""

import os

import indexgen as ig
import pytest
from kafkagen import ABORT, COMMIT, Rec, SegmentWriter

from kafkalog_cli.log import producer_state as ps
from kafkalog_cli.log.partition import Partition
from kafkalog_cli.log.snapshot import read_snapshot

T0 = 1700000000000
DAY = 86400000
WRAP_SEQ = 2147483646  # 2147483646, 2147483647, then 0


def expected_snapshot(entries):
    """The snapshot file of ``entries`` (producerId, epoch, lastSequence, lastOffset,
    offsetDelta, timestamp, coordinatorEpoch, currentTxnFirstOffset), in this order."""
    return ig.encode_snapshot(entries)


def recs(prefix, timestamps):
    return [Rec(b"%s-%d" % (prefix, i), b"v" * 20, ts) for i, ts in enumerate(timestamps)]


def write_partition(tmp_path):
    """Two segments (bases 0 and 10) with three producers: 2015 idempotent, 1000 and 1001
    transactional. Offsets are written out in the comments."""
    d = tmp_path / "t-0"
    a = SegmentWriter(0)
    a.add_v2(recs(b"i", [T0 + 1, T0 + 2, T0 + 3]),                        # 0-2
             producer_id=2015, producer_epoch=1, base_sequence=0)
    a.add_v2(recs(b"a", [T0 + 10, T0 + 11]),                              # 3-4, opens 3
             producer_id=1000, producer_epoch=2, base_sequence=7, transactional=True)
    a.add_v2(recs(b"b", [T0 + 20, T0 + 21, T0 + 22]),                     # 5-7, opens 5
             producer_id=1001, producer_epoch=0, base_sequence=WRAP_SEQ, transactional=True)
    a.add_control(COMMIT, 1000, 2, 5, timestamp=T0 + 41)                  # 8
    a.add_control(ABORT, 1001, 0, 6, timestamp=T0 + 51)                   # 9
    assert a.next_offset == 10
    a.write(str(d))
    b = SegmentWriter(10)
    b.add_v2(recs(b"c", [T0 + 60, T0 + 61]),                              # 10-11, opens 10
             producer_id=1000, producer_epoch=2, base_sequence=9, transactional=True)
    b.add_v2(recs(b"d", [T0 + 70]),                                       # 12, epoch bump
             producer_id=1001, producer_epoch=1, base_sequence=0, transactional=True)
    b.add_control(ABORT, 1001, 1, 6, timestamp=T0 + 80)                   # 13
    b.add_empty_control(1000, 2)                                          # 14
    b.add_v2(recs(b"e", [T0 + 90, T0 + 91]),                              # 15-16
             producer_id=2015, producer_epoch=1, base_sequence=3)
    b.add_control(ABORT, 1000, 3, 7, timestamp=T0 + 100)                  # 17, epoch bump
    b.add_v2(recs(b"plain", [T0 + 110]))                                  # 18, no producer
    assert b.next_offset == 19
    b.write(str(d))
    return str(d)


# The snapshot at offset 10 (the second segment's base). The map iterates by bucket (the
# low 4 bits of these ids), not in the order the producers came: 1000 (8), 1001 (9), 2015 (15).
AT_10 = [
    (1000, 2, 8, 4, 1, T0 + 41, 5, -1),          # committed: marker's time and coordinator
    (1001, 0, 0, 7, 2, T0 + 51, 6, -1),          # sequence 2147483646 + 2 wrapped to 0
    (2015, 1, 2, 2, 2, T0 + 3, -1, -1),
]
# At 13: 1000 in the transaction opened at 10, 1001 (new epoch: old batches forgotten) at 12.
AT_13 = [
    (1000, 2, 10, 11, 1, T0 + 61, 5, 10),
    (1001, 1, 0, 12, 0, T0 + 70, 6, 12),
    (2015, 1, 2, 2, 2, T0 + 3, -1, -1),
]
# At 19: 1000's ABORT came with epoch 3: its batches are forgotten (lastOffset -1).
AT_19 = [
    (1000, 3, -1, -1, 0, T0 + 100, 7, -1),
    (1001, 1, 0, 12, 0, T0 + 80, 6, -1),
    (2015, 1, 4, 16, 1, T0 + 91, -1, -1),
]
# .txnindex entries (producer, first offset, last offset, last stable offset): 1001's second
# abort at 13 while 1000's transaction is open since 10 has last stable offset 10.
ABORTED = [(1001, 5, 9, 10), (1001, 12, 13, 10), (1000, 10, 17, 18)]


def fields(entry):
    return (entry.producer_id, entry.epoch, entry.last_sequence, entry.last_offset,
            entry.offset_delta, entry.timestamp, entry.coordinator_epoch,
            entry.current_txn_first_offset)


def append_all(directory, up_to=None):
    """Replay every batch one by one (LogSegment.recover's way); the aborted entries."""
    state = ps.ProducerState()
    aborted = []
    for segment in Partition(directory).segments():
        with segment.open(1 << 20) as log:
            for batch, marker in ps.producer_batches(log, 0, up_to):
                entry = state.append(batch, marker)
                if entry is not None:
                    aborted.append(entry)
    return state, aborted


def test_rebuild_snapshots_equal_the_rules(tmp_path):
    d = write_partition(tmp_path)
    rebuilt = ps.rebuild(Partition(d).segments(), 19)
    assert [off for off, _ in rebuilt.snapshots] == [10, 19]
    assert rebuilt.snapshots[0][1] == expected_snapshot(AT_10)
    assert rebuilt.snapshots[1][1] == expected_snapshot(AT_19)
    assert rebuilt.state.snapshot_bytes() == expected_snapshot(AT_19)


def test_rebuild_with_open_transactions(tmp_path):
    d = write_partition(tmp_path)
    rebuilt = ps.rebuild(Partition(d).segments(), 13)
    assert rebuilt.snapshots[-1] == (13, expected_snapshot(AT_13))
    assert rebuilt.state.txns.open == {1000: 10, 1001: 12}


def test_append_one_by_one_gives_the_txnindex_entries(tmp_path):
    d = write_partition(tmp_path)
    state, aborted = append_all(d)
    assert aborted == ABORTED
    assert state.end_offset == 18  # the last batch of a producer; `append` moves it
    assert state.snapshot_bytes() == expected_snapshot(AT_19)


def test_written_snapshot_reads_back(tmp_path):
    d = write_partition(tmp_path)
    state = ps.rebuild(Partition(d).segments(), 13).state
    path = ps.write_snapshot(d, 13, state.snapshot_bytes())
    assert os.path.basename(path) == "00000000000000000013.snapshot"
    assert [fields(e) for e in read_snapshot(path)] == AT_13
    assert not [n for n in os.listdir(d) if "tmp" in n]
    with pytest.raises(FileExistsError):
        ps.write_snapshot(d, 13, b"", replace=False)


def test_load_then_rebuild_continues_the_state(tmp_path):
    d = write_partition(tmp_path)
    path = ps.write_snapshot(d, 10, expected_snapshot(AT_10))
    state = ps.ProducerState()
    state.load(read_snapshot(path), 10, now_ms=T0)
    rebuilt = ps.rebuild(Partition(d).segments(), 19, state=state)
    assert rebuilt.snapshots == [(19, expected_snapshot(AT_19))]


def test_load_drops_expired_producers_but_not_open_transactions(tmp_path):
    d = write_partition(tmp_path)
    path = ps.write_snapshot(d, 13, expected_snapshot(AT_13))
    state = ps.ProducerState()
    # 2015's last timestamp is T0 + 3: expired exactly producer.id.expiration.ms later. The
    # others have open transactions, so they stay, however old.
    state.load(read_snapshot(path), 13, now_ms=T0 + 3 + DAY)
    assert list(state.producers) == [1000, 1001]
    state = ps.ProducerState()
    state.load(read_snapshot(path), 13, now_ms=T0 + 2 + DAY)
    assert list(state.producers) == [1000, 1001, 2015]
    state = ps.ProducerState()
    state.load(read_snapshot(path), 13, now_ms=T0 + 1000 * DAY)
    assert list(state.producers) == [1000, 1001]
    state = ps.ProducerState(expiration_ms=1000)
    state.load(read_snapshot(path), 13, now_ms=T0 + 1003)
    assert 2015 not in state.producers
    # rebuilt on to 15 (before 2015 writes again), the snapshot has no 2015
    rebuilt = ps.rebuild(Partition(d).segments(), 15, state=state)
    assert rebuilt.snapshots == [(15, expected_snapshot([
        (1000, 2, 10, 11, 1, T0 + 61, 5, 10),
        (1001, 1, 0, 12, 0, T0 + 80, 6, -1)]))]


def test_producer_batches_by_last_offset(tmp_path):
    d = write_partition(tmp_path)
    first = Partition(d).segments()[0]
    with first.open(1 << 20) as log:
        def spans(start, end):
            return [(b.base_offset, b.last_offset, m is not None)
                    for b, m in ps.producer_batches(log, start, end)]
        assert spans(0, None) == [(0, 2, False), (3, 4, False), (5, 7, False), (8, 8, True),
                                  (9, 9, True)]
        assert spans(4, 8) == [(3, 4, False), (5, 7, False)]
        assert spans(5, 9) == [(5, 7, False), (8, 8, True)]


def test_snapshots_at_the_last_two_segment_bases(tmp_path):
    # UnifiedLog.rebuildProducerState snapshots at the bases of the last two segments and at
    # the end offset; none at the log start (the state has not moved past it).
    d = tmp_path / "t-0"
    for base in (0, 1, 2, 3):
        w = SegmentWriter(base)
        w.add_v2(recs(b"s", [T0 + base]), producer_id=4, producer_epoch=0,
                 base_sequence=base)
        w.write(str(d))
    rebuilt = ps.rebuild(Partition(str(d)).segments(), 4)
    assert [off for off, _ in rebuilt.snapshots] == [2, 3, 4]
    assert rebuilt.snapshots[0][1] == expected_snapshot([(4, 0, 1, 1, 0, T0 + 1, -1, -1)])
    state = ps.ProducerState()
    state.load(read_snapshot(ps.write_snapshot(str(d), 3, rebuilt.snapshots[1][1])), 3, T0)
    assert ps.rebuild(Partition(str(d)).segments(), 4, state=state).snapshots == [
        rebuilt.snapshots[2]]


def _plain_write_in_open_transaction(tmp_path):
    """A partition where producer 7 writes a non-transactional batch inside its open
    transaction."""
    d = tmp_path / "t-0"
    w = SegmentWriter(0)
    w.add_v2(recs(b"a", [T0]), producer_id=7, producer_epoch=0, base_sequence=0,
             transactional=True)
    w.add_v2(recs(b"b", [T0 + 1]), producer_id=7, producer_epoch=0, base_sequence=1)
    w.write(str(d))
    return d


def test_non_transactional_write_in_open_transaction_is_refused(tmp_path):
    d = _plain_write_in_open_transaction(tmp_path)
    with pytest.raises(ps.InvalidTxnStateError):
        ps.rebuild(Partition(str(d)).segments(), 2)


def test_refused_write_leaves_the_state_as_it_was(tmp_path):
    d = _plain_write_in_open_transaction(tmp_path)
    state = ps.ProducerState()
    with Partition(str(d)).segments()[0].open(1 << 20) as log:
        (first, m1), (second, m2) = ps.producer_batches(log)
        state.append(first, m1)
        before = state.snapshot_bytes()
        with pytest.raises(ps.InvalidTxnStateError):
            state.append(second, m2)
    assert state.snapshot_bytes() == before == expected_snapshot([(7, 0, 0, 0, 0, T0, -1, 0)])


def test_older_epoch_in_replication_is_taken(tmp_path):
    # origin REPLICATION: an older epoch is only logged; the entry takes it, its batches reset
    d = tmp_path / "t-0"
    w = SegmentWriter(0)
    w.add_v2(recs(b"a", [T0, T0]), producer_id=7, producer_epoch=2, base_sequence=0)
    w.add_v2(recs(b"b", [T0 + 1]), producer_id=7, producer_epoch=1, base_sequence=9)
    w.write(str(d))
    state, _ = append_all(str(d))
    assert len(state.producers[7].batches) == 1
    assert state.snapshot_bytes() == expected_snapshot([(7, 1, 9, 2, 0, T0 + 1, -1, -1)])


def test_marker_without_transaction_updates_epoch_and_coordinator(tmp_path):
    # A marker of a producer with no open transaction completes nothing (no .txnindex entry)
    # but still sets its epoch, coordinator epoch and timestamp.
    d = tmp_path / "t-0"
    w = SegmentWriter(0)
    w.add_control(ABORT, 9, 4, 3, timestamp=T0 + 5)
    w.write(str(d))
    state, aborted = append_all(str(d))
    assert aborted == []
    assert state.snapshot_bytes() == expected_snapshot([(9, 4, -1, -1, 0, T0 + 5, 3, -1)])


def test_empty_control_batch_is_ignored(tmp_path):
    d = tmp_path / "t-0"
    w = SegmentWriter(0)
    w.add_v2(recs(b"a", [T0]), producer_id=7, producer_epoch=0, base_sequence=0,
             transactional=True)
    w.add_empty_control(7, 1, timestamp=T0 + 9)
    w.write(str(d))
    state, aborted = append_all(str(d))
    assert aborted == []
    assert state.snapshot_bytes() == expected_snapshot([(7, 0, 0, 0, 0, T0, -1, 0)])


def test_only_five_batches_retained_and_last_written(tmp_path):
    d = tmp_path / "t-0"
    w = SegmentWriter(0)
    for i in range(7):
        w.add_v2(recs(b"x%d" % i, [T0 + i, T0 + i]), producer_id=5, producer_epoch=0,
                 base_sequence=2 * i)
    w.write(str(d))
    state, _ = append_all(str(d))
    entry = state.producers[5]
    assert [b.first_seq for b in entry.batches] == [4, 6, 8, 10, 12]
    assert state.snapshot_bytes() == expected_snapshot([(5, 0, 13, 13, 1, T0 + 6, -1, -1)])


def test_sequence_wrap_first_sequence(tmp_path):
    d = tmp_path / "t-0"
    w = SegmentWriter(0)
    w.add_v2(recs(b"w", [T0, T0, T0]), producer_id=3, producer_epoch=0,
             base_sequence=WRAP_SEQ)
    w.write(str(d))
    state, _ = append_all(str(d))
    assert state.producers[3].last_seq == 0
    assert state.producers[3].first_seq == WRAP_SEQ


# -- loading a partition's state as the broker's log loading does ---------------------------------

def test_load_state_takes_the_newest_readable_snapshot_in_range(tmp_path):
    d = write_partition(tmp_path)
    ps.write_snapshot(d, 0, expected_snapshot([]))            # at the log start: removed
    ps.write_snapshot(d, 10, expected_snapshot(AT_10))
    ps.write_snapshot(d, 13, b"\x00\x01garbage")               # corrupt: removed, older tried
    ps.write_snapshot(d, 25, expected_snapshot(AT_13))         # past the log end: removed
    p = Partition(d)
    loaded = ps.load_state(p.segments(), p.snapshot_paths(), 19, now_ms=T0)
    assert loaded.removed == [0, 13, 25]
    assert loaded.snapshots == [(19, expected_snapshot(AT_19))]
    # a valid snapshot at 13 is the newest: the state goes on from it
    ps.write_snapshot(d, 13, expected_snapshot(AT_13))
    loaded = ps.load_state(p.segments(), p.snapshot_paths(), 19, now_ms=T0)
    assert loaded.removed == [0, 25]
    assert loaded.state.snapshot_offset == 19
    assert loaded.snapshots == [(19, expected_snapshot(AT_19))]


def test_load_state_without_snapshots(tmp_path):
    d = write_partition(tmp_path)
    p = Partition(d)
    # unclean: every batch replayed, snapshots at the last two segment bases and the end
    loaded = ps.load_state(p.segments(), [], 19, now_ms=T0)
    assert loaded.snapshots == [(10, expected_snapshot(AT_10)), (19, expected_snapshot(AT_19))]
    # clean shutdown and no snapshot: nothing replayed, empty snapshots
    loaded = ps.load_state(p.segments(), [], 19, now_ms=T0, clean_shutdown=True)
    assert loaded.snapshots == [(10, expected_snapshot([])), (19, expected_snapshot([]))]
    assert loaded.state.producers == {}


def test_load_state_drops_producers_expired_in_the_snapshot(tmp_path):
    d = write_partition(tmp_path)
    ps.write_snapshot(d, 13, expected_snapshot(AT_13))
    p = Partition(d)
    loaded = ps.load_state(p.segments(), p.snapshot_paths(), 13, now_ms=T0 + 3 + DAY)
    assert loaded.snapshots == []  # nothing past the snapshot: no new one
    assert list(loaded.state.producers) == [1000, 1001]
    loaded = ps.load_state(p.segments(), p.snapshot_paths(), 13, now_ms=T0 + 2 + DAY)
    assert list(loaded.state.producers) == [1000, 1001, 2015]


def test_stray_snapshots():
    # LogLoader's removeStraySnapshots: not at a segment base, except the newest when above
    # the last base
    assert ps.stray_snapshots([0, 5, 10, 12, 19], [0, 10]) == [5, 12]
    assert ps.stray_snapshots([5, 8], [0, 10]) == [5, 8]
    assert ps.stray_snapshots([5, 8], []) == [5]
    assert ps.stray_snapshots([0, 10], [0, 10]) == []


# -- checks of a new write (a client's batch, a coordinator's marker) ----------------------------

def test_client_batch_sequence_and_epoch_checks(tmp_path):
    state, _ = append_all(write_partition(tmp_path))   # 2015: epoch 1, last sequence 4
    state.check_client_batch(2015, 1, 5, 19)
    with pytest.raises(ps.OutOfOrderSequenceError, match="Out of order sequence"):
        state.check_client_batch(2015, 1, 6, 19)
    with pytest.raises(ps.OutOfOrderSequenceError):
        state.check_client_batch(2015, 1, 4, 19)
    with pytest.raises(ps.InvalidProducerEpochError):
        state.check_client_batch(2015, 0, 5, 19)
    state.check_client_batch(2015, 2, 0, 19)            # a new epoch starts at 0
    with pytest.raises(ps.OutOfOrderSequenceError, match="new epoch"):
        state.check_client_batch(2015, 2, 5, 19)
    state.check_client_batch(77, 0, 12345, 19)          # never seen: any sequence
    state.check_client_batch(77, -1, 12345, 19)         # no epoch yet: any sequence
    # 1000's last marker bumped it to epoch 3 and forgot its batches: epoch 3 starts again
    # at 0
    state.check_client_batch(1000, 3, 0, 19)
    with pytest.raises(ps.OutOfOrderSequenceError):
        state.check_client_batch(1000, 3, 11, 19)
    assert state.snapshot_bytes() == expected_snapshot(AT_19)   # the checks change nothing


def test_client_batch_after_sequence_max(tmp_path):
    d = tmp_path / "t-0"
    w = SegmentWriter(0)
    w.add_v2(recs(b"m", [T0]), producer_id=3, producer_epoch=0, base_sequence=2147483647)
    w.write(str(d))
    state, _ = append_all(str(d))
    state.check_client_batch(3, 0, 0, 1)
    with pytest.raises(ps.OutOfOrderSequenceError):
        state.check_client_batch(3, 0, 1, 1)


def test_duplicate_batches(tmp_path):
    state, _ = append_all(write_partition(tmp_path))
    assert state.find_duplicate(2015, 1, 3, 4) == ps.BatchMetadata(4, 16, 1, T0 + 91)
    assert state.find_duplicate(2015, 1, 0, 2) == ps.BatchMetadata(2, 2, 2, T0 + 3)
    assert state.find_duplicate(2015, 1, 1, 2) is None
    assert state.find_duplicate(2015, 2, 3, 4) is None
    assert state.find_duplicate(1001, 1, 0, 0) == ps.BatchMetadata(0, 12, 0, T0 + 70)
    assert state.find_duplicate(5, 0, 0, 0) is None


def test_marker_checks(tmp_path):
    state, _ = append_all(write_partition(tmp_path))    # 1000: epoch 3, coordinator epoch 7
    state.check_marker(1000, 3, 7, 19)
    state.check_marker(1000, 4, 8, 19)
    with pytest.raises(ps.InvalidProducerEpochError):
        state.check_marker(1000, 2, 7, 19)
    with pytest.raises(ps.CoordinatorFencedError):
        state.check_marker(1000, 3, 6, 19)
    state.check_marker(88, 0, 0, 19)



# Producer ids sharing their low 6 bits make a tree bin in the broker's map, whose order depends
# on the order of insertion. A rebuild (UnifiedLog.loadProducersFromRecords) puts a segment's new
# producers into the map in the order of its own HashMap of the segment's producers; recovery
# (LogSegment.recover) puts each when first seen. Both orders as OpenJDK 17's HashMap gave them
# (tests/log/test_javahash.py's HASH_ORDER_JAVA: the ids put into a map, then, for the rebuild, its
# iteration order put into a second map).
TREE_IDS = [9344, 12544, 1088, 4224, 1984, 8128, 12480, 7424, 7744, 10688, 6272, 3456, 1600,
            8000, 512]
TREE_REBUILT = [4224, 7424, 6272, 9344, 12544, 1088, 512, 1600, 3456, 1984, 8128, 8000, 7744,
                12480, 10688]
TREE_RECOVERED = [7424, 9344, 12544, 1088, 512, 1600, 4224, 3456, 1984, 8128, 12480, 7744, 8000,
                  10688, 6272]


def test_order_of_new_producers_in_a_rebuild_and_in_recovery(tmp_path):
    d = tmp_path / "t-0"
    w = SegmentWriter(0)
    for i, pid in enumerate(TREE_IDS):
        w.add_v2(recs(b"p", [T0 + i]), producer_id=pid, producer_epoch=0, base_sequence=0)
    w.write(str(d))
    rebuilt = ps.rebuild(Partition(str(d)).segments(), len(TREE_IDS))
    assert [e.producer_id for e in rebuilt.state.snapshot_entries()] == TREE_REBUILT
    state, _ = append_all(str(d))
    assert [e.producer_id for e in state.snapshot_entries()] == TREE_RECOVERED


# The same with producers already in the state (from a snapshot): the segment's map holds them
# too, which changes the order its new producers are put in. Order as OpenJDK 17 gave it.
LOADED_IDS = [2240, 320, 256, 3008, 3840]
SEEN_IDS = [2240, 3840, 256, 10688, 320, 3008, 6592, 7488, 7808, 10944, 9344, 7744, 8320, 9856,
            8256, 9024, 9472, 10560]
LOADED_REBUILT = [3008, 2240, 320, 256, 3840, 10688, 9344, 8320, 8256, 9024, 9472, 9856, 10560,
                  6592, 7488, 7808, 7744, 10944]


def test_order_of_new_producers_beside_loaded_ones(tmp_path):
    d = tmp_path / "t-0"
    w = SegmentWriter(0)
    for i, pid in enumerate(SEEN_IDS):
        w.add_v2(recs(b"p", [T0 + i]), producer_id=pid, producer_epoch=0, base_sequence=0)
    w.write(str(d))
    state = ps.ProducerState()
    state.load(read_snapshot(ps.write_snapshot(str(d), 0, expected_snapshot(
        [(pid, 0, 0, -1, 0, T0, -1, -1) for pid in LOADED_IDS]))), 0, now_ms=T0)
    rebuilt = ps.rebuild(Partition(str(d)).segments(), len(SEEN_IDS), state=state)
    assert [e.producer_id for e in rebuilt.state.snapshot_entries()] == LOADED_REBUILT
