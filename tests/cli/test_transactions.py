"""`kafkalog transactions` on partitions written by kafka-python (tests/kafkagen.py) with the
broker's .txnindex (tests/indexgen.py): committed and aborted transactions of interleaved
producers, a producer whose epoch the coordinator bumped, an aborted transaction left out of
the .txnindex, a transaction still open (hanging or not), and bad input. Every expected value
is what the test wrote, never the command's own output."""

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

import indexgen as ig
import kafkagen as kg
from dumpcheck import REPO
from kafkagen import Rec

T0 = kg.T0
NEWEST = T0 + 60005  # the newest timestamp written below (not its batch's first record's)


def run(*args):
    from kafkalog_cli.cli.main import cli
    r = CliRunner().invoke(cli, ["transactions", *[str(a) for a in args]],
                           catch_exceptions=False)
    return r.exit_code, r.stdout_bytes.decode(), r.stderr_bytes.decode()


def run_process(*args):
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", "transactions",
                        *[str(a) for a in args]], cwd=REPO, capture_output=True, timeout=60)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def json_lines(out):
    objs = [json.loads(line) for line in out.splitlines()]
    # the run ends with its summary object (README, "JSON output"); the tests read the rest
    assert objs and objs[-1]["type"] == "summary" and objs[-1]["command"] == "transactions", objs
    parts = [o for o in objs if o["type"] == "partition"]
    assert objs[-1]["partitions"] == len(parts), objs
    assert objs[-1]["hanging"] == sum(o["hanging"] for o in parts), objs
    return objs[:-1]


def _records(prefix, n, ts):
    return [Rec(b"%s-%d" % (prefix, i), b"value-%d" % i, ts) for i in range(n)]


# What the partition below holds: (producer id, epoch, first offset, end offset, marker,
# marker epoch, coordinator epoch, records, first batch max timestamp)
COMMITTED_1000 = (1000, 2, 0, 5, "COMMIT", 2, 5, 3, T0)
ABORTED_2000 = (2000, 0, 3, 8, "ABORT", 0, 7, 2, T0 + 1)       # interleaved with 1000's
ABORTED_1000 = (1000, 2, 6, 9, "ABORT", 2, 5, 2, T0 + 10)      # left out of the .txnindex
FENCED_3000 = (3000, 4, 10, 12, "ABORT", 5, 9, 2, T0 + 20)     # ended at a bumped epoch
OPEN_4000 = (4000, 0, 13, T0 + 30)                              # no marker: open
EMPTY_5000 = (5000, 1, 16, "COMMIT", 3)                         # a marker ending nothing
LOG_END = 17


@pytest.fixture
def partition(tmp_path):
    """A partition of two segments (base 0 and 10) with every case above; the .txnindex of
    segment 0 lists 2000's aborted transaction but not 1000's."""
    w = kg.SegmentWriter(0)
    w.add_v2(_records(b"a", 3, T0), producer_id=1000, producer_epoch=2, base_sequence=0,
             transactional=True)                                            # 0-2
    w.add_v2(_records(b"b", 2, T0 + 1), producer_id=2000, producer_epoch=0, base_sequence=0,
             transactional=True)                                            # 3-4
    w.add_control(kg.COMMIT, 1000, 2, 5, timestamp=T0 + 2)                  # 5
    w.add_v2(_records(b"c", 2, T0 + 10), producer_id=1000, producer_epoch=2, base_sequence=3,
             transactional=True)                                            # 6-7
    w.add_control(kg.ABORT, 2000, 0, 7, timestamp=T0 + 11)                  # 8
    w.add_control(kg.ABORT, 1000, 2, 5, timestamp=T0 + 12)                  # 9
    w2 = kg.SegmentWriter(w.next_offset)
    assert w2.base_offset == 10
    w2.add_v2(_records(b"d", 2, T0 + 20), producer_id=3000, producer_epoch=4, base_sequence=0,
              transactional=True)                                           # 10-11
    w2.add_control(kg.ABORT, 3000, 5, 9, timestamp=T0 + 21)                 # 12: epoch 4 -> 5
    w2.add_v2(_records(b"e", 1, T0 + 30), producer_id=4000, producer_epoch=0, base_sequence=0,
              transactional=True)                                           # 13: open
    w2.add_v2([Rec(b"f-0", b"v", T0 + 59000), Rec(b"f-1", b"v", NEWEST)])   # 14-15
    w2.add_control(kg.COMMIT, 5000, 1, 3, timestamp=T0 + 60001)             # 16: empty
    assert w2.next_offset == LOG_END
    directory = tmp_path / "logs" / "events-0"
    files = ig.write_partition(directory, [(0, w.data()), (10, w2.data())])
    # the broker's entries (indexgen's own reading of ProducerStateManager) are as planned
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in files[0].txns] == \
        [(2000, 3, 8), (1000, 6, 9)]
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in files[1].txns] == \
        [(3000, 10, 12)]
    # 1000's aborted transaction left out of segment 0's .txnindex
    ig.write_file(files[0].paths["txnindex"], ig.encode_txn_index(files[0].txns[:1]))
    return directory


def _by_first(objs):
    return {(o["producerId"], o["firstOffset"], o["endOffset"]): o for o in objs
            if o["type"] == "transaction"}


def test_json_fields_are_what_was_written(partition):
    code, out, err = run("--format", "json", "--age-from", "newest-timestamp", partition)
    assert code == 0, err
    assert err == ""
    objs = json_lines(out)
    assert [o["type"] for o in objs].count("partition") == 1 and objs[-1]["type"] == "partition"
    txns = _by_first(objs)
    assert len(txns) == 6
    for pid, epoch, first, end, marker, marker_epoch, coord, records, ts in (
            COMMITTED_1000, ABORTED_2000, ABORTED_1000, FENCED_3000):
        o = txns[(pid, first, end)]
        assert (o["producerEpoch"], o["state"], o["markerProducerEpoch"], o["coordinatorEpoch"],
                o["records"], o["batches"], o["firstTimestamp"]) == \
            (epoch, marker, marker_epoch, coord, records, 1, ts), o
        assert o["epochBumped"] is (marker_epoch > epoch)
        assert o["empty"] is False and o["hanging"] is False and o["ageMs"] is None
    assert txns[(1000, 0, 5)]["inTxnIndex"] is None  # a COMMIT is never indexed
    assert txns[(2000, 3, 8)]["inTxnIndex"] is True
    assert txns[(3000, 10, 12)]["inTxnIndex"] is True
    assert txns[(1000, 6, 9)]["inTxnIndex"] is False
    pid, epoch, first, ts = OPEN_4000
    o = txns[(pid, first, None)]
    assert (o["state"], o["producerEpoch"], o["records"], o["firstTimestamp"]) == \
        ("OPEN", epoch, 1, ts)
    assert o["ageMs"] == NEWEST - ts
    assert o["lsoLag"] == LOG_END - first
    pid, epoch, end, marker, coord = EMPTY_5000
    o = txns[(pid, None, end)]
    assert (o["empty"], o["state"], o["producerEpoch"], o["coordinatorEpoch"], o["records"]) == \
        (True, marker, epoch, coord, 0)
    p = objs[-1]
    assert (p["committed"], p["aborted"], p["open"], p["hanging"], p["missingFromTxnIndex"]) == \
        (1, 3, 1, 0, 1)
    assert (p["logEndOffset"], p["lastStableOffset"], p["lsoLag"]) == \
        (LOG_END, OPEN_4000[2], LOG_END - OPEN_4000[2])
    assert (p["newestTimestamp"], p["referenceMs"], p["referenceSource"]) == \
        (NEWEST, NEWEST, "newestTimestamp")
    assert (p["transactions"], p["empty"], p["problems"]) == (6, 1, 0)
    # as the markers are met, then the open ones
    assert [(o["producerId"], o["endOffset"]) for o in objs[:-1]] == \
        [(1000, 5), (2000, 8), (1000, 9), (3000, 12), (5000, 16), (4000, None)]


def test_txnindex_entry_with_a_wrong_first_offset_is_said(partition):
    path = os.path.join(partition, "%020d.txnindex" % 0)
    # 2000's entry with its first offset wrong (4 instead of 3); LSO as the broker wrote it
    ig.write_file(path, ig.encode_txn_index([ig.AbortedTxn(2000, 4, 8, 6)]))
    code, out, _ = run("--format", "json", partition)
    o = _by_first(json_lines(out))[(2000, 3, 8)]
    assert o["inTxnIndex"] is True
    assert "firstOffset 4 (expected 3)" in o["txnIndexProblem"]


def test_text_lines(partition):
    code, out, err = run("--age-from", "newest-timestamp", partition)
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 7  # six transactions and the partition's summary
    assert all(line.startswith(str(partition) + ": ") for line in lines)
    missing = [line for line in lines if "MISSING from the .txnindex" in line]
    assert len(missing) == 1 and "producer 1000 epoch 2: offsets 6-9 ABORT" in missing[0]
    bumped = [line for line in lines if "bumped" in line]
    assert len(bumped) == 1 and "producer 3000 epoch 4: offsets 10-12 ABORT" in bumped[0]
    assert "ended at epoch 5" in bumped[0]
    opened = [line for line in lines if "OPEN" in line]
    assert len(opened) == 1 and "from offset 13" in opened[0]
    assert "age %d ms" % (NEWEST - OPEN_4000[3]) in opened[0]
    assert "back by %d offsets" % (LOG_END - 13) in opened[0]
    assert "HANGING" not in out
    assert "log end offset 17, last stable offset 13 (4 behind)" in lines[-1]
    assert "(1 missing from the .txnindex)" in lines[-1]


def test_hanging_exit_codes(partition):
    now = T0 + 3600000  # an hour after the open transaction's first batch (T0 + 30)
    code, out, _ = run("--format", "json", "--now", now, "--hanging-after-ms", 1000, partition)
    assert code == 1
    objs = json_lines(out)
    o = _by_first(objs)[(4000, 13, None)]
    assert o["hanging"] is True and o["ageMs"] == now - OPEN_4000[3]
    assert objs[-1]["hanging"] == 1 and objs[-1]["referenceSource"] == "now"
    assert objs[-1]["referenceMs"] == now
    # only the open one can hang: the ended ones are older still
    assert [k for k, v in _by_first(objs).items() if v["hanging"]] == [(4000, 13, None)]
    code, out, _ = run("--now", now, "--hanging-after-ms", 1000, partition)
    assert code == 1 and "HANGING" in out
    # a threshold the age does not pass: 0
    code, _, _ = run("--now", now, "--hanging-after-ms", now - OPEN_4000[3], partition)
    assert code == 0
    code, _, _ = run("--now", now, "--hanging-after-ms", now - OPEN_4000[3] - 1, partition)
    assert code == 1
    # default threshold (15 minutes) against the newest timestamp: the age is a minute
    code, _, _ = run("--age-from", "newest-timestamp", partition)
    assert code == 0
    code, _, _ = run("--now", OPEN_4000[3] + 900001, partition)
    assert code == 1


def test_marker_ends_the_transaction_whatever_its_epoch(tmp_path):
    """ProducerAppendInfo: one open transaction per producer id; a marker of a newer epoch
    (the coordinator's bump) ends it; the next transactional batch opens a new one."""
    w = kg.SegmentWriter(0)
    w.add_v2(_records(b"a", 2, T0), producer_id=7, producer_epoch=0, base_sequence=0,
             transactional=True)                                            # 0-1
    w.add_control(kg.ABORT, 7, 1, 2, timestamp=T0 + 1)                      # 2: fenced
    w.add_v2(_records(b"b", 1, T0 + 2), producer_id=7, producer_epoch=1, base_sequence=0,
             transactional=True)                                            # 3
    w.add_control(kg.COMMIT, 7, 1, 2, timestamp=T0 + 3)                     # 4
    directory = tmp_path / "t-0"
    ig.write_partition(directory, [(0, w.data())])
    code, out, _ = run("--format", "json", directory)
    assert code == 0
    txns = _by_first(json_lines(out))
    assert set(txns) == {(7, 0, 2), (7, 3, 4)}
    fenced, later = txns[(7, 0, 2)], txns[(7, 3, 4)]
    assert (fenced["producerEpoch"], fenced["markerProducerEpoch"], fenced["epochBumped"],
            fenced["state"], fenced["inTxnIndex"]) == (0, 1, True, "ABORT", True)
    assert (later["producerEpoch"], later["markerProducerEpoch"], later["epochBumped"],
            later["state"]) == (1, 1, False, "COMMIT")
    assert json_lines(out)[-1]["lastStableOffset"] == 5 == json_lines(out)[-1]["logEndOffset"]


def test_log_directory_and_segment_file(partition, tmp_path):
    other = tmp_path / "logs" / "other-3"
    w = kg.SegmentWriter(0)
    w.add_v2(_records(b"x", 1, T0), producer_id=9, producer_epoch=0, base_sequence=0,
             transactional=True)
    ig.write_partition(other, [(0, w.data())])
    code, out, _ = run("--format", "json", "--now", T0 + 10 ** 7, tmp_path / "logs")
    assert code == 1  # other-3's transaction has been open for 10^7 ms
    parts = [o for o in json_lines(out) if o["type"] == "partition"]
    assert [os.path.basename(p["directory"]) for p in parts] == ["events-0", "other-3"]
    assert [p["hanging"] for p in parts] == [1, 1]
    code, out, _ = run("--format", "json", "--age-from", "newest-timestamp",
                       os.path.join(partition, "%020d.log" % 10))
    assert code == 0
    assert [o["directory"] for o in json_lines(out) if o["type"] == "partition"] == \
        [str(partition)]


def test_bad_input(tmp_path):
    code, out, err = run_process(tmp_path / "missing")
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert str(tmp_path / "missing") in err
    stray = tmp_path / "notes.txt"
    stray.write_text("x")
    code, out, err = run_process(stray)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "Traceback" not in err
    code, out, err = run_process("--hanging-after-ms", "-1", tmp_path)
    assert code == 2 and "Traceback" not in err


def test_corrupt_batch_is_said_and_passed_over(tmp_path):
    w = kg.SegmentWriter(0)
    w.add_v2(_records(b"a", 1, T0), producer_id=7, producer_epoch=0, base_sequence=0,
             transactional=True)
    marker_at = len(w.data())
    w.add_control(kg.COMMIT, 7, 0, 2, timestamp=T0 + 1)
    data = kg.flip_bit(w.data(), marker_at + 17)  # the marker batch's CRC field
    directory = tmp_path / "t-0"
    kg.write_segment(directory, 0, data)
    code, out, err = run("--format", "json", "--now", T0 + 10 ** 6, directory)
    assert "CRC" in err and len(err.splitlines()) == 1
    o = _by_first(json_lines(out))[(7, 0, None)]
    assert o["state"] == "OPEN" and code == 1


def test_rich_table_on_a_terminal(partition):
    """stdout a terminal: one rich table per partition instead of the text lines."""
    import fcntl
    import pty
    import struct
    import termios
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    try:
        env = dict(os.environ, COLUMNS="200")
        p = subprocess.run([sys.executable, "-m", "kafkalog_cli", "transactions", "--now",
                            str(T0 + 3600000), "--hanging-after-ms", "1000", str(partition)],
                           cwd=REPO, stdout=slave, stderr=subprocess.PIPE, timeout=60, env=env)
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the other side is closed and all is read
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
    out = b"".join(chunks).decode("utf-8", "replace")
    assert p.returncode == 1, p.stderr
    assert "producer" in out and "LSO lag" in out and "HANGING" in out
    assert "missing" in out  # 1000's ABORT absent from the .txnindex
    assert "offsets 6-9" not in out  # not the text lines


def test_library_streams_each_transaction_as_its_marker_is_met(partition):
    """partition_transactions keeps only the open transactions: an ended one is given when its
    marker is read, before the next segment is opened."""
    from kafkalog_cli.log.transactions import PartitionSummary, Transaction, partition_transactions
    items = partition_transactions(str(partition))
    first = next(items)
    assert isinstance(first, Transaction)
    assert (first.producer_id, first.first_offset, first.end_offset, first.state) == \
        (1000, 0, 5, "COMMIT")
    os.rename(os.path.join(partition, "%020d.log" % 10), os.path.join(partition, "later"))
    with pytest.raises(FileNotFoundError):  # segment 10 is opened only now
        list(items)
    os.rename(os.path.join(partition, "later"), os.path.join(partition, "%020d.log" % 10))
    rest = list(partition_transactions(str(partition)))
    assert isinstance(rest[-1], PartitionSummary) and rest[-1].transactions == 6


def test_unreadable_txnindex_is_said(partition):
    """A .txnindex the broker could not read (an entry whose version byte is 1: AbortedTxn
    throws) is said on stderr; its ABORTs are neither listed nor missing."""
    path = os.path.join(partition, "%020d.txnindex" % 0)
    data = bytearray(ig.encode_txn_index([ig.AbortedTxn(2000, 3, 8, 6)]))
    data[0] = 1
    ig.write_file(path, bytes(data))
    code, out, err = run("--format", "json", "--age-from", "newest-timestamp", partition)
    assert code == 0
    assert len(err.splitlines()) == 1 and "%020d.txnindex" % 0 in err
    txns = _by_first(json_lines(out))
    for key in ((2000, 3, 8), (1000, 6, 9)):
        assert txns[key]["inTxnIndex"] is None and "cannot be read" in txns[key]["txnIndexProblem"]
    assert txns[(3000, 10, 12)]["inTxnIndex"] is True  # the other segment's index is fine
    assert json_lines(out)[-1]["problems"] == 1
    code, out, err = run(partition)
    assert "producer 5000 epoch 1: COMMIT marker at offset 16 (coordinator epoch 3) with no " \
        "open transaction" in out
