"""`kafkalog append` with producers and transactions (jsonl ``producerId``, ``producerEpoch``,
``sequence``, ``transactional``, control lines), and the partition leader epoch.

What is written is read back by independent code only: kafka-python (batches, control records),
``kafkalog dump`` of the ``.txnindex``, ``.snapshot`` and ``leader-epoch-checkpoint`` files
compared with what this file computes from kafka-python's reading of the log, following the
broker's rules (ProducerStateManager, ProducerAppendInfo, ProducerStateEntry,
LeaderEpochFileCache), written here again on purpose, small and separate from kafkalog_cli's.
"""

import struct

import appendcheck as ac
import indexgen as ig
import kafkagen as kg
from appendcheck import append, check_partition, expected_txn_index, log_batches, ok, producers_at
from dumpcheck import dump

T0 = kg.T0
INT32_MAX = 2 ** 31 - 1


def part_dir(tmp_path, name="txns-0"):
    return tmp_path / "logs" / name


def jsonl(d, objs, *args):
    return append(d, "--input-format", "jsonl", *args, input=ac.jsonl_input(objs))


def rec(value, pid=None, epoch=None, seq=None, txn=None, ts=None):
    o = {"value": value, "timestamp": T0 if ts is None else ts}
    for k, v in (("producerId", pid), ("producerEpoch", epoch), ("sequence", seq),
                 ("transactional", txn)):
        if v is not None:
            o[k] = v
    return o


def marker(kind, pid, epoch=None, coordinator_epoch=None, ts=None):
    o = {"control": kind, "producerId": pid, "timestamp": T0 + 9 if ts is None else ts}
    if epoch is not None:
        o["producerEpoch"] = epoch
    if coordinator_epoch is not None:
        o["coordinatorEpoch"] = coordinator_epoch
    return o


# -- the broker's rules, computed here from kafka-python's reading ---------------------------------------

def dumped_lines(path):
    res = dump(str(path))
    assert res.code == 0, res
    assert res.lines[0] == "Dumping %s" % path
    return res.lines[1:]


def assert_txn_indexes(d):
    for base, entries in expected_txn_index(d).items():
        path = d / ("%020d.txnindex" % base)
        if not entries:
            assert not path.exists() or path.stat().st_size == 0, path
            continue
        assert dumped_lines(path) == [ig.txn_line(e) for e in entries], path


def assert_snapshot(d, offset, batches=None):
    """``<offset>.snapshot`` exists and holds the producers the rules give at ``offset``
    (entry order is the broker's hash-map order: compared as a set)."""
    batches = log_batches(d) if batches is None else batches
    path = d / ("%020d.snapshot" % offset)
    assert path.exists(), "%s missing" % path
    want = sorted(ig.snapshot_line(e) for e in producers_at(batches, offset).values())
    assert sorted(dumped_lines(path)) == want, path


def epoch_checkpoint(d):
    path = d / "leader-epoch-checkpoint"
    return [tuple(int(x) for x in line.replace("epoch:", "").replace("startOffset:", "").split())
            for line in dumped_lines(path)]


def kafka_batches(d):
    return [kb for s in ac.read_partition(d) for kb in s.kbs]


def stopped_line(res, number):
    assert res.code == 2, res
    assert len(res.err_lines) == 1, res.err
    assert "line %d:" % number in res.err_lines[0], res.err
    return res.err_lines[0]


def stopped_lower(res, number):
    return stopped_line(res, number).lower()


# -- markers and the transaction index ------------------------------------------------------------------

def test_commit_and_abort_markers(tmp_path):
    d = part_dir(tmp_path)
    ok(jsonl(d, [rec("a", 7, 0, txn=True), rec("b", 7, 0, txn=True),
                 marker("commit", 7, 0, coordinator_epoch=4),
                 rec("c", 7, 0, txn=True), marker("abort", 7, 0, coordinator_epoch=4, ts=T0 + 50),
                 rec("plain")]))
    segs, recs = check_partition(d)
    kbs = kafka_batches(d)
    assert [(kb.batch.base_offset, kb.batch.is_control_batch, kb.batch.is_transactional)
            for kb in kbs] == [(0, False, True), (2, True, True), (3, False, True),
                               (4, True, True), (5, False, False)]
    for kb, kind in ((kbs[1], kg.COMMIT), (kbs[3], kg.ABORT)):
        b = kb.batch
        assert (b.producer_id, b.producer_epoch, b.base_sequence) == (7, 0, -1)
        assert len(kb.records) == 1
        r = kb.records[0]
        # ControlRecordType key (version 0, type), EndTransactionMarker value (version 0, epoch)
        assert r.key == struct.pack(">hh", 0, kind)
        assert r.value == struct.pack(">hi", 0, 4)
    assert kbs[3].records[0].timestamp == T0 + 50
    assert [kb.batch.base_sequence for kb in kbs if not kb.batch.is_control_batch] == [0, 2, -1]
    # one aborted transaction, first offset 3, marker 4, LSO 5
    assert expected_txn_index(d) == {0: [ig.AbortedTxn(7, 3, 4, 5)]}
    assert_txn_indexes(d)


def test_two_producers_interleaved_last_stable_offset(tmp_path):
    """An ABORT's last stable offset is the first offset of the earliest transaction another
    producer still has open (ProducerStateManager.lastStableOffset), else the marker + 1. A
    change of producer closes the batch."""
    d = part_dir(tmp_path)
    ok(jsonl(d, [rec("p1-a", 1, 0, txn=True), rec("p1-b", 1, 0, txn=True),
                 rec("p2-a", 2, 0, txn=True), rec("p1-c", 1, 0, txn=True),
                 marker("abort", 2, 0), rec("p3", 3, 0, txn=True),
                 marker("abort", 1, 0), marker("abort", 3, 0)]))
    kbs = kafka_batches(d)
    assert [(kb.batch.base_offset, kb.batch.producer_id, len(kb.records)) for kb in kbs] == [
        (0, 1, 2), (2, 2, 1), (3, 1, 1), (4, 2, 1), (5, 3, 1), (6, 1, 1), (7, 3, 1)]
    assert expected_txn_index(d) == {0: [ig.AbortedTxn(2, 2, 4, 0), ig.AbortedTxn(1, 0, 6, 5),
                                         ig.AbortedTxn(3, 5, 7, 8)]}
    assert_txn_indexes(d)


def test_abort_in_a_later_run_and_segment(tmp_path):
    """The open transaction is found again from the log (or the snapshot at the roll) by a later
    run; the entry goes to the .txnindex of the segment holding the marker."""
    d = part_dir(tmp_path)
    ok(jsonl(d, [rec("x" * 300, 9, 2, txn=True), rec("other", 8, 0)], "--batch-records", "1"))
    ok(jsonl(d, [rec("y" * 300, 9, 2, txn=True)], "--segment-bytes", "600"))
    ok(jsonl(d, [marker("abort", 9, 2)], "--segment-bytes", "600"))
    segs, _ = check_partition(d)
    assert len(segs) >= 2
    assert expected_txn_index(d)[segs[-1].base] == [ig.AbortedTxn(9, 0, 3, 4)]
    assert_txn_indexes(d)


def test_empty_marker_adds_no_entry(tmp_path):
    d = part_dir(tmp_path)
    ok(jsonl(d, [rec("idem", 4, 0), marker("abort", 4, 0), marker("commit", 5, 0)]))
    assert [kb.batch.is_control_batch for kb in kafka_batches(d)] == [False, True, True]
    assert not (d / "00000000000000000000.txnindex").exists()


# -- producer epochs and sequences -------------------------------------------------------------------

def test_sequences_continue_per_producer_and_across_runs(tmp_path):
    d = part_dir(tmp_path)
    ok(jsonl(d, [rec("a", 1, 0), rec("b", 1, 0), rec("c", 2, 0, seq=10), rec("d", 1, 0)]))
    ok(jsonl(d, [rec("e", 1, 0, seq=3), rec("f", 2, 0), rec("g", 1)]))
    kbs = kafka_batches(d)
    assert [(kb.batch.producer_id, kb.batch.base_sequence, len(kb.records)) for kb in kbs] == [
        (1, 0, 2), (2, 10, 1), (1, 2, 1), (1, 3, 1), (2, 11, 1), (1, 4, 1)]


def test_sequence_wraps_to_zero(tmp_path):
    d = part_dir(tmp_path)
    ok(jsonl(d, [rec("a", 6, 1, seq=INT32_MAX - 1), rec("b", 6, 1), rec("c", 6, 1),
                 rec("d", 6, 1, seq=1)], "--batch-records", "2"))
    kbs = kafka_batches(d)
    assert [kb.batch.base_sequence for kb in kbs] == [INT32_MAX - 1, 0]
    # a sequence out of order after the wrap
    res = jsonl(d, [rec("e", 6, 1, seq=INT32_MAX)])
    assert "out of order" in stopped_lower(res, 1)
    ok(jsonl(d, [rec("e", 6, 1, seq=2)]))


def test_out_of_order_sequence_stops_at_its_line(tmp_path):
    d = part_dir(tmp_path)
    res = jsonl(d, [rec("a", 5, 0, seq=0), rec("b", 5, 0, seq=1), rec("c", 5, 0, seq=2),
                    rec("d", 5, 0, seq=3), rec("e", 5, 0, seq=7), rec("f", 5, 0, seq=8)],
                "--batch-records", "3", "--format", "json")
    line = stopped_lower(res, 5)
    assert "out of order" in line and "producer 5 " in line, line
    # batch 1 (a-c) stays; d was in the batch the bad line would have joined: dropped
    _, recs = check_partition(d)
    assert [r.value for r in recs] == [b"a", b"b", b"c"]
    assert ac.appended_obj(res)["records"] == 3


def test_out_of_order_first_sequence_of_a_batch(tmp_path):
    d = part_dir(tmp_path)
    ok(jsonl(d, [rec("a", 5, 0, seq=0)]))
    res = jsonl(d, [rec("x", 8), rec("b", 5, 0, seq=2)])
    assert "out of order" in stopped_lower(res, 2)
    # the other producer's batch before it stays
    _, recs = check_partition(d)
    assert [r.value for r in recs] == [b"a", b"x"]
    # a duplicate of the last batch is out of order too
    assert "out of order" in stopped_lower(jsonl(d, [rec("a", 5, 0, seq=0)]), 1)


def test_epoch_bump_and_fencing(tmp_path):
    d = part_dir(tmp_path)
    ok(jsonl(d, [rec("a", 3, 0), rec("b", 3, 0), rec("c", 3, 1, seq=0), rec("d", 3)]))
    kbs = kafka_batches(d)
    assert [(kb.batch.producer_epoch, kb.batch.base_sequence) for kb in kbs] == [(0, 0), (1, 0)]
    # an older epoch is fenced; a new epoch must start at sequence 0
    assert "epoch" in stopped_line(jsonl(d, [rec("e", 3, 0)]), 1)
    line = stopped_lower(jsonl(d, [rec("e", 3, 2, seq=5)]), 1)
    assert "new epoch" in line and "5 (seq. number)" in line, line
    assert [kb.batch.base_offset for kb in kafka_batches(d)] == [0, 2]
    # a marker may bump the epoch (the coordinator fencing the producer)
    ok(jsonl(d, [rec("t", 3, 1, txn=True), marker("abort", 3, 2, coordinator_epoch=1),
                 rec("u", 3, 2, seq=0)]))
    assert "coordinator epoch" in stopped_line(
        jsonl(d, [rec("v", 3, 2, txn=True), marker("commit", 3, 2, coordinator_epoch=0)]), 2)


def test_open_transaction_needs_transactional_records(tmp_path):
    d = part_dir(tmp_path)
    ok(jsonl(d, [rec("t", 2, 0, txn=True)]))
    assert "open transaction" in stopped_line(jsonl(d, [rec("plain", 2, 0)]), 1)


def test_bad_producer_fields_are_input_errors(tmp_path):
    d = part_dir(tmp_path)
    for i, bad in enumerate([{"value": "x", "sequence": 1}, {"value": "x", "transactional": True},
                             {"value": "x", "producerId": -3},
                             {"value": "x", "producerId": 1, "producerEpoch": 40000},
                             {"value": "x", "producerId": 1, "sequence": 2 ** 31},
                             {"value": "x", "producerId": 1, "transactional": "yes"},
                             {"control": "commit"}, {"control": "prepare", "producerId": 1},
                             {"control": "abort", "producerId": 1, "value": "v"}]):
        res = jsonl(d, [rec("ok-%d" % i), bad], "--batch-records", "1")
        stopped_line(res, 2)
    _, recs = check_partition(d)
    assert len(recs) == 9


# -- producer snapshots at rolls -----------------------------------------------------------------------

def test_snapshot_at_every_roll(tmp_path):
    """Idempotent and transactional producers, an epoch bump, a sequence wrap and markers across
    many small segments: every segment after the first has a snapshot at its base offset holding
    the producers the rules give there."""
    d = part_dir(tmp_path)
    objs = []
    for i in range(40):
        objs.append(rec("v%03d-" % i + "x" * 80, 1, 0, ts=T0 + i))
        if i % 3 == 0:
            objs.append(rec("t%03d" % i, 2, 0 if i < 20 else 1, txn=True, ts=T0 + 100 + i))
        if i % 6 == 5:
            objs.append(marker("abort" if i % 12 == 5 else "commit", 2, 0 if i < 20 else 1,
                               coordinator_epoch=i // 10, ts=T0 + 200 + i))
        if i == 10:
            objs.append(rec("w", 4, 3, seq=INT32_MAX - 1, ts=T0 + 300))
            objs.append(rec("w", 4, 3, ts=T0 + 301))
            objs.append(rec("w", 4, 3, ts=T0 + 302))
    ok(jsonl(d, objs, "--segment-bytes", "700", "--batch-records", "2"))
    segs, _ = check_partition(d)
    assert len(segs) > 8
    batches = log_batches(d)
    assert any(lb.producer_id == 4 and s == 0 for lb, s, *_ in batches), "no wrap"
    for s in segs[1:]:
        assert_snapshot(d, s.base, batches)
    assert not (d / "00000000000000000000.snapshot").exists()
    assert_txn_indexes(d)


def test_roll_snapshot_continues_from_the_newest_snapshot(tmp_path):
    """A later run's state starts from the newest snapshot (ProducerStateManager's load), then
    replays the log after it: a producer the snapshot at 1 holds (put there by hand, not in
    the log) is carried into the snapshot of the next roll; one whose last timestamp is older
    than producer.id.expiration.ms is dropped on loading, as the broker drops it."""
    d = part_dir(tmp_path)
    now = ac.now_ms()
    ok(jsonl(d, [rec("a" * 200, 11, 0, ts=now), rec("b" * 200, 12, 0, ts=now)],
             "--segment-bytes", "300"))
    segs, _ = check_partition(d)
    assert [s.base for s in segs] == [0, 1]
    assert_snapshot(d, 1)
    kept = ig.SnapshotEntry(99, 4, 7, 0, 0, now, 2, -1)
    expired = ig.SnapshotEntry(98, 0, 3, 0, 0, now - 86400000 - 60000, -1, -1)
    ours = [ig.SnapshotEntry(11, 0, 0, 0, 0, now, -1, -1)]
    ig.write_file(d / "00000000000000000001.snapshot", ig.encode_snapshot(ours + [kept, expired]))
    ok(jsonl(d, [rec("c" * 200, 13, 0, ts=now)], "--segment-bytes", "300"))
    # the roll before c: 11 and 99 from the snapshot at 1, 12 from segment 1's batch
    want = producers_at(log_batches(d), 2)
    want[99] = kept
    assert sorted(dumped_lines(d / "00000000000000000002.snapshot")) == sorted(
        ig.snapshot_line(e) for e in want.values())
    assert sorted(want) == [11, 12, 99]


# -- the partition leader epoch ------------------------------------------------------------------------

def test_leader_epoch_default_and_assignment(tmp_path):
    d = part_dir(tmp_path)
    ok(append(d, input=ac.lines_input(["a", "b"])))
    assert [kb.batch.leader_epoch for kb in kafka_batches(d)] == [0]
    assert epoch_checkpoint(d) == [(0, 0)]
    ok(append(d, "--leader-epoch", "3", input=ac.lines_input(["c"])))
    ok(append(d, input=ac.lines_input(["d"])))  # the latest epoch of the checkpoint: 3
    ok(jsonl(d, [rec("t", 1, 0, txn=True), marker("commit", 1, 0)], "--leader-epoch", "5"))
    assert [kb.batch.leader_epoch for kb in kafka_batches(d)] == [0, 3, 3, 5, 5]
    assert epoch_checkpoint(d) == [(0, 0), (3, 2), (5, 4)]
    with open(d / "leader-epoch-checkpoint") as f:
        assert f.read() == ig.leader_epoch_checkpoint([(0, 0), (3, 2), (5, 4)])
    # a leader never writes with an older epoch than its cache's latest
    res = append(d, "--leader-epoch", "4", input=b"x\n")
    ac.assert_clean_exit2(res)
    assert "leader epoch" in res.err.lower()
    assert [kb.batch.base_offset for kb in kafka_batches(d)][-1] == 5


def test_older_message_format_clears_the_leader_epochs(tmp_path):
    """UnifiedLog.append: a batch of message format 0/1 carries no leader epoch, and the broker
    clears the cache (an empty checkpoint) rather than keep epochs that no longer cover it."""
    d = part_dir(tmp_path)
    ok(append(d, "--leader-epoch", "2", input=ac.lines_input(["a"])))
    assert epoch_checkpoint(d) == [(2, 0)]
    ok(append(d, "--magic", "1", input=ac.lines_input(["b"])))
    with open(d / "leader-epoch-checkpoint") as f:
        assert f.read() == ig.leader_epoch_checkpoint([])
    ok(append(d, "--leader-epoch", "4", input=ac.lines_input(["c"])))
    assert epoch_checkpoint(d) == [(4, 2)]
