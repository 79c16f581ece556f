"""``kafkalog append`` and ``kafkalog roll`` judged by Apache Kafka itself.

One broker for the module. It creates the topics, a real idempotent producer (kafka-python)
writes to one, and the broker stops cleanly. kafkalog then appends to the stopped broker's
partitions (plain ``lines``, codecs, headers, tombstones, idempotent producers continuing the
real one, transactions committed and aborted, markers) and rolls one partition; a copy of every
partition is taken at that moment. Then:

* DumpLogSegments (``--deep-iteration``, ``--verify-index-only``) on that copy, our files as
  append and roll left them: exit 0, nothing on stderr (no index mismatch, no non-consecutive
  offsets), every batch ``isvalid: true``, no invalid trailing bytes;
* the broker starts on the directory (no recovery: append restores the clean-shutdown marker)
  and consumers read every partition back, read_uncommitted and read_committed: exactly the
  records written, at the offsets append reported, with their keys, values, headers and
  timestamps, aborted transactions hidden from read_committed;
* the producers go on through the broker with raw ProduceRequests (``kafkaraw``): the next
  sequence of a producer that kafkalog continued is accepted at the log end, a resend of the
  last batch kafkalog wrote for it is answered as the broker answers a duplicate (no error, the
  original batch's offset, nothing appended), a sequence gap is refused
  (OUT_OF_ORDER_SEQUENCE_NUMBER): the broker's producer state holds our batches;
* roll: two partitions get the same appended batches; kafkalog rolls one, the broker rolls the
  other itself (segment.ms passed: its next append rolls, ``UnifiedLog.roll``), the same raw
  batch goes to both through the broker; after a clean stop both partitions hold the same files,
  byte for byte: the sealed segment's log and trimmed indexes, the producer snapshot at the new
  base offset, the new active segment the broker kept writing into, the leader-epoch-checkpoint.
  Not covered by this comparison: the final time index entry of a roll whose last batch has no
  entry yet (LogSegment.onBecomeInactiveSegment). kafkalog adds it as a broker that appended the
  batch does; a broker restarted since takes its largest timestamp from the time index's last
  entry (LogSegment.maxTimestampSoFar) and adds none, so the twin's roll, made after the
  restart, cannot judge it.
"""

import base64
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kafkajvm
import kafkaraw

pytestmark = pytest.mark.kafka

KAFKALOG = [sys.executable, "-m", "kafkalog_cli"]
HOUR = 3600 * 1000


def kafkalog(*args, stdin=b""):
    proc = subprocess.run([*KAFKALOG, *[str(a) for a in args]], input=stdin,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert proc.returncode == 0, (args, proc.stdout.decode(), proc.stderr.decode())
    return proc.stdout.decode()


def append_jsonl(directory, lines, *options):
    """Append JSON lines; the summary append reports (firstOffset, lastOffset)."""
    text = "".join(json.dumps(line) + "\n" for line in lines)
    out = kafkalog("append", "--input-format", "jsonl", "--format", "json", *options, directory,
                   stdin=text.encode())
    summary = [json.loads(x) for x in out.splitlines() if '"summary"' in x][-1]
    return summary["firstOffset"], summary["lastOffset"]


class Expected:
    """What a partition must give back: (offset, key, value, headers, timestamp, aborted) per
    data record, in offset order; a timestamp None is "between these two times"."""

    def __init__(self):
        self.records = []
        self.next_offset = 0

    def add_jsonl(self, lines, first, last):
        """Offsets of the data records of ``lines``, appended at first..last (a marker line
        takes an offset of its own, as a control batch does)."""
        assert first == self.next_offset, (first, self.next_offset)
        offset = first
        open_txn = {}
        for line in lines:
            if "control" in line:
                aborted = line["control"] == "abort"
                for rec in open_txn.pop(line["producerId"], []):
                    rec["aborted"] = aborted
                offset += 1
                continue
            rec = {"offset": offset, "key": _bytes(line.get("key")),
                   "value": _bytes(line.get("value")),
                   "headers": _headers(line.get("headers")),
                   "timestamp": line.get("timestamp"), "aborted": False}
            if line.get("transactional"):
                open_txn.setdefault(line["producerId"], []).append(rec)
            self.records.append(rec)
            offset += 1
        assert not open_txn, "the test leaves no transaction open (it would hold the LSO)"
        assert offset - 1 == last, (offset - 1, last)
        self.next_offset = last + 1

    def add_lines(self, values, key, first, last, t0, t1):
        assert first == self.next_offset and last - first + 1 == len(values)
        for i, v in enumerate(values):
            self.records.append({"offset": first + i, "key": key, "value": v, "headers": [],
                                 "timestamp": (t0, t1), "aborted": False})
        self.next_offset = last + 1


def _bytes(v):
    if v is None:
        return None
    if isinstance(v, dict) and set(v) == {"base64"}:
        return base64.b64decode(v["base64"])
    if isinstance(v, str):
        return v.encode()
    return json.dumps(v, separators=(",", ":")).encode()


def _headers(h):
    if h is None:
        return []
    pairs = h.items() if isinstance(h, dict) else h
    return [(k, _bytes(v)) for k, v in pairs]


def consume(bootstrap, topic, partition, isolation):
    """Every record of the partition as a consumer with ``isolation`` reads it, to its end
    (the high watermark, or the last stable offset for read_committed)."""
    from kafka import KafkaConsumer, TopicPartition
    tp = TopicPartition(topic, partition)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, isolation_level=isolation,
                             auto_offset_reset="earliest", request_timeout_ms=30000)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        out = []
        deadline = time.monotonic() + 60
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"{topic}-{partition}: stuck before {end}"
            for recs in consumer.poll(timeout_ms=1000).values():
                out.extend(recs)
        return out, end
    finally:
        consumer.close()


def check_read_back(bootstrap, topic, expected, committed_end):
    for isolation in ("read_uncommitted", "read_committed"):
        got, end = consume(bootstrap, topic, 0, isolation)
        want = [r for r in expected.records
                if isolation == "read_uncommitted" or not r["aborted"]]
        assert end == (expected.next_offset if isolation == "read_uncommitted"
                       else committed_end)
        assert [r.offset for r in got] == [r["offset"] for r in want], isolation
        for r, w in zip(got, want):
            assert (r.key, r.value) == (w["key"], w["value"]), (isolation, r.offset)
            assert [(k, v) for k, v in r.headers] == w["headers"], (isolation, r.offset)
            if isinstance(w["timestamp"], tuple):
                assert w["timestamp"][0] <= r.timestamp <= w["timestamp"][1], r.offset
            else:
                assert r.timestamp == w["timestamp"], r.offset
            assert r.timestamp_type == 0  # CreateTime


def dump_problems(files):
    """What DumpLogSegments finds wrong in ``files`` with --deep-iteration, and with
    --verify-index-only: one text per finding (empty: nothing)."""
    found = []
    for options in (["--deep-iteration"], ["--verify-index-only"]):
        rc, out, err = kafkajvm.dump_log_segments(files, options)
        err = _without_segment_starts(err)
        if rc != 0 or err.strip():
            found.append(f"{options}: exit {rc}, stderr:\n{err[-3000:]}")
        for line in out.splitlines():
            if "isvalid: false" in line or "invalid bytes" in line or "isValid: false" in line:
                found.append(f"{options}: {line}")
        batches = sum(1 for line in out.splitlines() if line.startswith("baseOffset: "))
        logs = [f for f in files if str(f).endswith(".log")]
        if logs and batches == 0:
            found.append(f"{options}: no batch printed at all")
    return found


def _without_segment_starts(err):
    """DumpLogSegments' stderr without the "Non-consecutive offsets" it reports for the first
    record of every segment whose base offset is not 0 (each file is dumped from a last offset
    of -1: "-1 is followed by <base offset>"; the broker's own segments get the same)."""
    out, pending = [], None
    for line in err.splitlines():
        if line.startswith("Non-consecutive offsets in "):
            pending = line
            continue
        if pending is not None and line.startswith("  "):
            base = int(os.path.basename(pending.split(" in ", 1)[1]).split(".")[0])
            if line.strip() == f"-1 is followed by {base}":
                continue
            out.append(pending)
            pending = None
            out.append(line)
            continue
        pending = None
        out.append(line)
    return "\n".join(out)


# -- the module's broker and what kafkalog wrote through it ---------------------------------

class Run:
    pass


@pytest.fixture(scope="module")
def kafka_appended(tmp_path_factory, kafka_classpath):
    from kafka import KafkaProducer
    from kafkabroker import Broker

    work = tmp_path_factory.mktemp("kafka-append")
    broker = Broker(work / "broker")
    run = Run()
    run.broker = broker
    run.expected = {}
    try:
        broker.start()
        broker.create_topic("plain", 1)
        broker.create_topic("idem", 1)
        broker.create_topic("txn", 1)
        # segment.ms an hour: records two hours old make the broker roll at its next append
        broker.create_topic("rolled", 2, segment_ms=HOUR)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True,
                                 acks="all", linger_ms=0)
        idem = Expected()
        base_ts = kafkaraw.now_ms() - 10 * HOUR
        for i in range(10):
            producer.send("idem", key=b"real-%d" % i, value=b"v%d" % i, partition=0,
                          timestamp_ms=base_ts + i).get(timeout=30)
            idem.records.append({"offset": i, "key": b"real-%d" % i, "value": b"v%d" % i,
                                 "headers": [], "timestamp": base_ts + i, "aborted": False})
        idem.next_offset = 10
        pid_epoch = producer._transaction_manager.producer_id_and_epoch
        run.pid, run.epoch = pid_epoch.producer_id, pid_epoch.epoch
        producer.close()
        # rolled: one idempotent batch through the broker in each partition, so that the
        # broker's clean stop leaves a producer snapshot there (it then replays what kafkalog
        # appends after it, and takes its own snapshot when it rolls)
        first_batch = kafkaraw.batch([(b"before", b"b", [], kafkaraw.now_ms() - 3 * HOUR)],
                                     7099, 0, 0)
        for p in (0, 1):
            assert kafkaraw.produce_batch(broker.bootstrap, "rolled", p, first_batch) == (0, 0)
        broker.stop()

        logdir = broker.logdir
        run.appended = {}
        # plain: lines (rolled by append itself: small segments), then jsonl with a codec
        plain = Expected()
        values = [b"line-%d" % i for i in range(300)]
        t0 = kafkaraw.now_ms()
        out = kafkalog("append", "--key", "k", "--batch-records", "7", "--segment-bytes", "4096",
                       "--index-interval-bytes", "256", "--format", "json", logdir / "plain-0",
                       stdin=b"".join(v + b"\n" for v in values))
        t1 = kafkaraw.now_ms()
        s = [json.loads(x) for x in out.splitlines() if '"summary"' in x][-1]
        plain.add_lines(values, b"k", s["firstOffset"], s["lastOffset"], t0, t1)
        lines = []
        for i in range(120):
            line = {"key": "j-%d" % (i % 9), "timestamp": base_ts + 1000 * i}
            if i % 10 == 3:
                line["value"] = None
            elif i % 10 == 4:
                line["value"] = {"base64": base64.b64encode(bytes(range(i % 256))).decode()}
            elif i % 10 == 5:
                line["value"] = {"n": i, "list": [1, 2]}
            else:
                line["value"] = "value %d %s" % (i, "x" * (i % 50))
            if i % 3 == 0:
                line["headers"] = {"h": "v%d" % i, "bin": {"base64": "AP8="}}
            elif i % 3 == 1:
                line["headers"] = [["dup", "1"], ["dup", "2"], ["empty", ""]]
            lines.append(line)
        first, last = append_jsonl(logdir / "plain-0", lines, "--codec", "gzip",
                                   "--batch-records", "13", "--segment-bytes", "4096",
                                   "--index-interval-bytes", "256")
        plain.add_jsonl(lines, first, last)
        run.expected["plain"] = plain

        # idem: the real producer's id and epoch, its next sequences; then lz4 batches
        lines = [{"key": "ours-%d" % i, "value": "o%d" % i, "timestamp": base_ts + 100 + i,
                  "producerId": run.pid, "producerEpoch": run.epoch} for i in range(5)]
        first, last = append_jsonl(logdir / "idem-0", lines, "--batch-records", "2",
                                   "--codec", "lz4")
        idem.add_jsonl(lines, first, last)
        run.idem_last_batch = (last, 14)  # the last batch: one record, sequence 14
        run.expected["idem"] = idem

        # txn: transactions of several producers, committed and aborted, idempotent and
        # plain records between them, in a partition the broker never wrote to
        txn = Expected()
        ts = base_ts + 5000
        lines = [
            {"key": "a1", "value": "a", "producerId": 7001, "producerEpoch": 0, "transactional": True, "timestamp": ts},
            {"key": "a2", "value": "a", "producerId": 7001, "producerEpoch": 0, "transactional": True, "timestamp": ts + 1},
            {"key": "b1", "value": "b", "producerId": 7002, "producerEpoch": 2, "transactional": True, "timestamp": ts + 2},
            {"key": "p1", "value": "plain", "timestamp": ts + 3},
            {"control": "commit", "producerId": 7001, "producerEpoch": 0, "coordinatorEpoch": 1, "timestamp": ts + 4},
            {"control": "abort", "producerId": 7002, "producerEpoch": 2, "coordinatorEpoch": 1, "timestamp": ts + 5},
            {"key": "i1", "value": "idem", "producerId": 7003, "producerEpoch": 0, "timestamp": ts + 6},
            {"key": "i2", "value": "idem", "producerId": 7003, "producerEpoch": 0, "timestamp": ts + 7},
            {"key": "a3", "value": "a", "producerId": 7001, "producerEpoch": 0, "transactional": True, "timestamp": ts + 8, "headers": {"x": "y"}},
            {"control": "abort", "producerId": 7001, "producerEpoch": 0, "coordinatorEpoch": 1, "timestamp": ts + 9},
            {"key": "c1", "value": None, "producerId": 7004, "producerEpoch": 0, "transactional": True, "timestamp": ts + 10},
            {"control": "commit", "producerId": 7004, "producerEpoch": 0, "coordinatorEpoch": 3, "timestamp": ts + 11},
        ]
        first, last = append_jsonl(logdir / "txn-0", lines[:8], "--codec", "zstd")
        txn.add_jsonl(lines[:8], first, last)
        # the last batch of 7003: the two records i1, i2 (sequences 0-1) at these offsets
        run.txn_7003_batch = (last - 1, 0)
        first, last = append_jsonl(logdir / "txn-0", lines[8:])
        txn.add_jsonl(lines[8:], first, last)
        run.expected["txn"] = txn

        # rolled: the same batches in both partitions (after the broker's first one); kafkalog
        # rolls partition 0
        old = kafkaraw.now_ms() - 2 * HOUR
        lines = [{"key": "r%d" % i, "value": "x" * (i * 7 % 90), "timestamp": old + i,
                  "producerId": 7100, "producerEpoch": 1} for i in range(40)]
        lines += [{"key": "t", "value": "t", "producerId": 7101, "producerEpoch": 0,
                   "transactional": True, "timestamp": old + 50},
                  {"control": "commit", "producerId": 7101, "producerEpoch": 0,
                   "coordinatorEpoch": 0, "timestamp": old + 51}]
        for p in (0, 1):
            first, last = append_jsonl(logdir / f"rolled-{p}", lines, "--batch-records", "3",
                                       "--index-interval-bytes", "100")
        run.rolled_end = last + 1
        kafkalog("roll", logdir / "rolled-0")

        run.copy = work / "as-written"
        for name in ("plain-0", "idem-0", "txn-0", "rolled-0", "rolled-1"):
            shutil.copytree(logdir / name, run.copy / name)

        broker.start()
        broker.wait_leaders(["plain", "idem", "txn", "rolled"])
        yield run
    finally:
        broker.close()


def test_dump_log_segments_finds_nothing_wrong_in_our_files(kafka_appended):
    files = sorted(str(p) for p in kafka_appended.copy.glob("*/*")
                   if p.suffix in (".log", ".index", ".timeindex", ".txnindex", ".snapshot"))
    assert len([f for f in files if f.endswith(".log")]) >= 6
    assert dump_problems(files) == []


@pytest.mark.parametrize("topic,committed_end", [("plain", None), ("idem", None), ("txn", None)])
def test_consumers_read_back_what_append_wrote(kafka_appended, topic, committed_end):
    expected = kafka_appended.expected[topic]
    # no transaction is left open: the last stable offset is the log end
    check_read_back(kafka_appended.broker.bootstrap, topic, expected, expected.next_offset)


def test_broker_continues_the_producer_kafkalog_continued(kafka_appended):
    run = kafka_appended
    b = run.broker.bootstrap
    rec = [(b"next", b"n", [], kafkaraw.now_ms())]
    end = run.expected["idem"].next_offset
    # the resend of kafkalog's last batch is a duplicate: the original offset, nothing appended
    offset, seq = run.idem_last_batch
    dup = [(b"ours-4", b"o4", [], 0)]
    assert kafkaraw.produce(b, "idem", 0, dup, run.pid, run.epoch, seq) == (kafkaraw.NONE, offset)
    # a gap after it is refused; the next sequence is taken at the log end
    assert kafkaraw.produce(b, "idem", 0, rec, run.pid, run.epoch, seq + 2)[0] == \
        kafkaraw.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert kafkaraw.produce(b, "idem", 0, rec, run.pid, run.epoch, seq + 1) == (kafkaraw.NONE, end)
    # an older epoch is fenced
    if run.epoch > 0:
        assert kafkaraw.produce(b, "idem", 0, rec, run.pid, run.epoch - 1, 0)[0] == \
            kafkaraw.INVALID_PRODUCER_EPOCH


def test_broker_continues_producers_of_a_partition_kafkalog_created(kafka_appended):
    """txn-0: the broker had never written to it (no producer snapshot at its clean stop)."""
    run = kafka_appended
    b = run.broker.bootstrap
    end = run.expected["txn"].next_offset
    offset, seq = run.txn_7003_batch
    dup = [(b"i1", b"idem", [], 0), (b"i2", b"idem", [], 0)]
    assert kafkaraw.produce(b, "txn", 0, dup, 7003, 0, seq) == (kafkaraw.NONE, offset)
    rec = [(b"i3", b"idem", [], kafkaraw.now_ms())]
    assert kafkaraw.produce(b, "txn", 0, rec, 7003, 0, 5)[0] == \
        kafkaraw.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert kafkaraw.produce(b, "txn", 0, rec, 7003, 0, 2) == (kafkaraw.NONE, end)


def test_roll_leaves_what_the_broker_leaves_when_it_rolls(kafka_appended):
    run = kafka_appended
    broker = run.broker
    end = run.rolled_end
    rec = [(b"after-roll", b"a", [("h", b"1")], kafkaraw.now_ms())]
    data = kafkaraw.batch(rec)
    for p in (0, 1):
        # into the new active segment (partition 0: kafkalog's; partition 1: the broker rolls
        # the segment whose first batch is two hours old, segment.ms being an hour)
        assert kafkaraw.produce_batch(broker.bootstrap, "rolled", p, data) == (kafkaraw.NONE, end)
    broker.stop()  # the module's last test: the broker stays stopped
    ours, theirs = broker.partition_dir("rolled", 0), broker.partition_dir("rolled", 1)
    names = sorted(os.listdir(ours))
    # One difference, the broker's load: the snapshot its clean stop left at offset 1 is in
    # both partitions after kafkalog's roll as after its own (UnifiedLog.roll takes a snapshot
    # and removes none), but its next load removes a snapshot that is neither the latest nor at
    # a segment's base offset (ProducerStateManager.removeStraySnapshots): partition 0 was
    # loaded after kafkalog's roll, partition 1 rolled after its load.
    stray = "%020d.snapshot" % 1
    assert stray in os.listdir(run.copy / "rolled-0")
    assert sorted(os.listdir(theirs)) == sorted(names + [stray])
    seg = "%020d" % end
    for suffix in (".log", ".index", ".timeindex", ".snapshot"):
        assert seg + suffix in names, suffix
    assert "%020d.log" % 0 in names
    different = [n for n in names if (ours / n).read_bytes() != (theirs / n).read_bytes()]
    assert different == [], _describe(different, ours, theirs)


def _describe(names, a, b):
    out = []
    for n in names:
        rc, da, _ = kafkajvm.dump_log_segments([a / n], ["--deep-iteration"]) \
            if Path(n).suffix in (".log", ".index", ".timeindex", ".snapshot") else (0, "", "")
        _, db, _ = kafkajvm.dump_log_segments([b / n], ["--deep-iteration"]) \
            if Path(n).suffix in (".log", ".index", ".timeindex", ".snapshot") else (0, "", "")
        out.append(f"{n}: kafkalog's roll\n{da}\nthe broker's\n{db}")
    return "\n".join(out)
