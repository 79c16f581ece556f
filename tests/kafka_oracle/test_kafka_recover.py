"""``kafkalog recover`` judged by Apache Kafka's own recovery.

Real traffic goes through a real broker (kafka-python: a producer per codec with keys, null
keys and values, headers; idempotent producers; a transactional producer committing and
aborting, with offsets sent to its transactions), and the broker is SIGKILLed at a random moment
(a fixed seed per trial). The killed log directory is copied twice: ``kafkalog recover`` runs on
copy A, the broker's own recovery (``LogManager.loadLogs`` -> ``LogLoader.load``) on copy B (a
broker started on it, every partition online, then a clean stop). Then:

* **records**: a broker runs on A too (it must accept what recover left) and a consumer reads
  every partition of A and of B, data topics and ``__consumer_offsets``/``__transaction_state``
  (read_uncommitted, up to the high watermark): the same offsets, keys, values, headers,
  timestamps and timestamp types, and the same end offsets.

* **files, comparison 1: what recover wrote against what the broker's LogLoader kept.** A as
  recover leaves it (no broker has run on it) against B after the broker's start and clean stop.
  A clean stop writes only what loading left in memory (``UnifiedLog.close``: the producer
  snapshot at the log end, ``LogSegment.close``: indexes trimmed and the time index's last max
  timestamp entry, ``LogManager.shutdown``: the checkpoints and ``.kafka_cleanshutdown``), and
  the test takes care that nothing is written between (no transaction is mid-commit at a kill:
  the coordinator would complete it at the next start, with markers of that moment's time; no
  timeout, retention or cleaning is due while B runs). File by file:

  - every ``.log``: the same bytes (what the broker truncated, recover cut);
  - ``.index``/``.timeindex``: the same bytes, except that the last segment's files in A may
    end in a zero tail that recover keeps pre-allocated (the broker keeps it too while running,
    ``UnifiedLog``'s active segment resized to ``segment.index.bytes``, and trims it at its clean
    stop, ``AbstractIndex.trimToValidSize``): compared without A's trailing all-zero entries;
    the time index may get one entry at B's clean stop (``LogSegment.close`` appends the largest
    timestamp seen, ``TimeIndex.maybeAppend``, when it is newer than the last entry; after a
    ``LogSegment.recover`` it never is, since recover appends the same entry): allowed only as
    exactly that entry, computed here from the segment's batch headers;
  - ``.txnindex``: the same bytes, the same files present;
  - producer snapshots: the same names and bytes (the broker's load takes them at recovered
    segments' ends and in ``rebuildProducerState``; the snapshot at the log end that its close
    takes is already there, ``ProducerStateManager.takeSnapshot`` writes none at an offset it
    has);
  - ``leader-epoch-checkpoint``: B's is A's plus at most one entry, an epoch above A's last at
    the log end offset: the partition becoming leader again (``Partition.makeLeader`` ->
    ``UnifiedLog.maybeAssignEpochStartOffset``), not recovery;
  - ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``: the same entry per
    partition (their line order is the broker's map order, recover keeps the file's);
  - ``partition.metadata`` and anything else in a partition: the same bytes;
  - named, not compared: ``.kafka_cleanshutdown`` (B's clean stop writes it; recover never
    creates one), ``replication-offset-checkpoint`` and ``cleaner-offset-checkpoint`` (the high
    watermark and the cleaner's progress, written by B's replica manager and cleaner, not by
    loading), ``kafkalog-quarantine/`` (A only: what recover removed), and
    ``__cluster_metadata-0`` (the controller's log: every start appends registrations and
    leader changes of that moment).

* **files, comparison 2: both after one broker start.** Where the broker on A is stopped
  cleanly too (the damaged variants, the last trial of the campaign): A after recover, start
  and clean stop against B after start and clean stop, every file of every partition byte for
  byte (leader-epoch-checkpoint included: both brokers load the same metadata log and make the
  same leader epoch), but the quarantine and ``__cluster_metadata-0`` as above.

* a second ``kafkalog recover`` on (a copy of) A as recover left it changes nothing, exit 0
  (every fourth trial of the campaign, the last one and the damaged variants: a run takes a
  couple of seconds).

Among what this holds: a producer snapshot lying inside the segment recover recovers (the one
an earlier recover took at the log end offset, before the broker appended after it: at no base,
but the newest, so ``removeStraySnapshots`` alone would keep it) goes, as the broker's
``LogLoader.recoverSegment`` deletes every snapshot above the base of a segment it recovers
(``ProducerStateManager.truncateAndReload``) and takes its own.

The campaign (``slow``) chains its trials on one directory, for time: trial n's A, on which a
broker ran for the records comparison, is where trial n+1's traffic goes and its kill happens,
so every trial after the first also checks that the broker continues on what recover left.
The damaged variants damage a killed directory the way a crash or a disk does, one damage per
partition in one directory (partitions load independently): a last segment truncated mid-batch,
a byte flipped inside a batch (its CRC fails), an ``.index`` and a ``.timeindex`` deleted, a
``.log.swap`` left as ``LocalLog.replaceSegments`` leaves one (the cleaned segment renamed to
``.swap`` before the old ones are deleted), a ``.cleaned`` leftover and a segment half-deleted
(renamed ``.deleted`` by ``UnifiedLog.deleteSegments``, not yet removed). What the broker
truncates recover must cut and keep in its quarantine, and ``kafkalog quarantine restore``
gives back the damaged bytes (but in the partition with the ``.swap``: recover renamed it into
place, and restore refuses to put the old segments back over it, as the README says).
"""

import hashlib
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kafkabroker import Broker, copy_logdir, offset_checkpoint
from kafkatraffic import _headers, _key, _value

pytestmark = pytest.mark.kafka

KAFKALOG = [sys.executable, "-m", "kafkalog_cli"]
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
TOPICS = {"codecs": len(CODECS), "idem": 2, "txn": 2}
INTERNAL = {"__consumer_offsets": 2, "__transaction_state": 2}
INDEX_INTERVAL = 512  # the brokers' log.index.interval.bytes (kafkabroker.BASE_CONFIG)
SEGMENT_BYTES = 16384
TXN_ID = "kafkalog-recover-txn"
TXN_GROUP = "kafkalog-recover-group"
# The brokers' settings, the same for every copy of a directory: the recovery point checkpointed
# often (log.flush.offset.checkpoint.interval.ms), so that a kill finds it anywhere from an old
# segment to the active one.
# A broker restarted after a kill waits for its dead incarnation's session to expire before it
# registers (DUPLICATE_BROKER_REGISTRATION): a short session (broker.session.timeout.ms) makes
# that wait short.
CONFIG = {"log.flush.offset.checkpoint.interval.ms": "1500",
          "transaction.max.timeout.ms": "900000",
          "broker.session.timeout.ms": "2000", "broker.heartbeat.interval.ms": "300"}
CAMPAIGN_TRIALS = int(os.environ.get("KAFKALOG_RECOVER_TRIALS", "20"))
NOT_COMPARED_PARTITIONS = {"__cluster_metadata-0"}
QUARANTINE = "kafkalog-quarantine"


# -- kafkalog -------------------------------------------------------------------------------------

def kafkalog(*args, ok=(0,)):
    proc = subprocess.run([*KAFKALOG, *[str(a) for a in args]], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=300)
    assert proc.returncode in ok, (args, proc.returncode, proc.stdout.decode()[-3000:],
                                   proc.stderr.decode()[-3000:])
    return proc


def recover(logdir):
    return kafkalog("recover", "--format", "json", "--index-interval-bytes", INDEX_INTERVAL,
                    logdir, ok=(0, 1))


def tree_hashes(root):
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            p = Path(dirpath, f)
            if f == ".lock":
                continue
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


# -- traffic --------------------------------------------------------------------------------------

class Traffic:
    """Producers writing through ``bootstrap`` until ``stop()``: a thread per producer. The
    transactional thread holds ``txn_lock`` from its InitProducerId (which aborts the previous
    trial's open transaction) and each EndTxn until the coordinator has written the
    transaction's end to ``__transaction_state`` (read from the broker's files in ``logdir``);
    the killer takes the lock before SIGKILL, so no transaction is left prepared (the next
    start's coordinator would complete it, its markers and end stamped with that start's time,
    writes that recovery does not make)."""

    def __init__(self, bootstrap, seed, logdir):
        self.bootstrap = bootstrap
        self.logdir = logdir
        self.seed = seed
        self.stopping = threading.Event()
        self.txn_lock = threading.Lock()
        self.threads = []
        self.errors = []
        self.sent = 0
        self.settled = 0  # transactions seen ended in __transaction_state

    def start(self):
        for i, codec in enumerate(CODECS):
            self._thread(self._plain, "codecs", i, codec, False)
        self._thread(self._plain, "idem", 0, "zstd", True)
        self._thread(self._plain, "idem", 1, "gzip", True)
        self._thread(self._transactional)
        return self

    def _thread(self, target, *args):
        t = threading.Thread(target=self._guard, args=(target, *args), daemon=True)
        self.threads.append(t)
        t.start()

    def _guard(self, target, *args):
        try:
            target(*args)
        except Exception as e:  # the broker was killed under it: expected once stopping
            if not self.stopping.is_set():
                self.errors.append(repr(e))

    def _producer(self, **options):
        from kafka import KafkaProducer
        return KafkaProducer(bootstrap_servers=self.bootstrap, max_block_ms=5000,
                             request_timeout_ms=5000, reconnect_backoff_ms=200,
                             **options)

    def _plain(self, topic, partition, codec, idempotent):
        rng = random.Random(f"{self.seed}-{topic}-{partition}")
        producer = self._producer(acks="all" if idempotent else 1,
                                  compression_type=None if codec == "none" else codec,
                                  enable_idempotence=idempotent, linger_ms=rng.choice((0, 5, 20)),
                                  batch_size=rng.choice((1024, 4096)))
        try:
            i = 0
            while not self.stopping.is_set():
                key, value = _key(i), _value(rng, i)
                if key is None and value is None:
                    value = b"-"
                producer.send(topic, key=key, value=value, headers=_headers(i),
                              partition=partition,
                              timestamp_ms=None if i % 4 else int(time.time() * 1000) - i % 9)
                i += 1
                self.sent += 1
                if i % rng.randrange(5, 40) == 0:
                    producer.flush(timeout=5)
                    time.sleep(rng.uniform(0, 0.02))
        finally:
            _close(producer)

    def _transactional(self):
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata
        rng = random.Random(f"{self.seed}-txn")
        producer = self._producer(transactional_id=TXN_ID, compression_type="lz4", linger_ms=5,
                                  transaction_timeout_ms=600000)
        try:
            # fences the producer of the trial before and aborts its open transaction: under
            # the lock too, its markers written before a kill (else both copies' coordinators
            # complete the abort at their start, each with its own time)
            with self.txn_lock:
                if self.stopping.is_set():
                    return
                producer.init_transactions()
                self._wait_txn_settled()
            t = 0
            while not self.stopping.is_set():
                producer.begin_transaction()
                for i in range(rng.randrange(1, 25)):
                    producer.send("txn", key=b"t%d-%d" % (t, i), value=_value(rng, i),
                                  headers=_headers(i), partition=rng.randrange(2))
                    if i % 5 == 4:
                        producer.flush(timeout=5)
                producer.flush(timeout=5)
                if t % 3 == 1:
                    producer.send_offsets_to_transaction(
                        {TopicPartition("txn", 0): OffsetAndMetadata(t, "meta-%d" % t, -1)},
                        TXN_GROUP)
                with self.txn_lock:
                    if self.stopping.is_set():
                        return
                    if rng.random() < 0.35:
                        producer.abort_transaction()
                    else:
                        producer.commit_transaction()
                    # EndTxn is answered once PrepareCommit/PrepareAbort is written; the
                    # markers and the Complete state follow (TransactionMarkerChannelManager)
                    self._wait_txn_settled()
                t += 1
                self.sent += 1
        finally:
            _close(producer)

    def _txn_status(self):
        """The status of TXN_ID's last record in ``__transaction_state`` as the broker's files
        hold it (TransactionLogValue: version, producer id, epoch, timeout, then the status
        byte), or None when there is none yet."""
        from kafka.record.memory_records import MemoryRecords
        key = struct.pack(">hh", 0, len(TXN_ID)) + TXN_ID.encode()
        status = None
        for part in sorted(Path(self.logdir).glob("__transaction_state-*")):
            for log in sorted(part.glob("*.log")):
                records = MemoryRecords(log.read_bytes())
                while True:
                    try:
                        batch = records.next_batch()
                    except Exception:  # a batch being written: the end of what is there
                        break
                    if batch is None:
                        break
                    for r in batch:
                        if r.key == key:
                            status = None if r.value is None else r.value[16]
        return status

    def _wait_txn_settled(self):
        """Until TXN_ID's last status in ``__transaction_state`` is Empty, CompleteCommit or
        CompleteAbort (0, 4, 5: TransactionState), at most 600 looks."""
        for _ in range(600):
            if self._txn_status() in (0, 4, 5):
                self.settled += 1
                return
            time.sleep(0.05)
        self.errors.append("the transaction did not settle in 600 looks at __transaction_state"
                           " (last status %r)" % self._txn_status())

    def kill_at_random(self, broker, rng, low=0.3, high=1.8):
        """Let the traffic run a random while, then SIGKILL the broker mid-stream."""
        time.sleep(rng.uniform(low, high))
        deadline = time.monotonic() + 30
        while self.sent < 50 and time.monotonic() < deadline:
            time.sleep(0.1)
        with self.txn_lock:
            broker.kill()
            self.stopping.set()
        for t in self.threads:  # a producer blocked on the dead broker ends within max_block_ms
            t.join(0.5)
        assert not self.errors, self.errors
        # the transactional thread takes the lock first, for its InitProducerId
        assert self.settled > 0, "no transaction was seen settled in __transaction_state"
        assert self.sent >= 50, "the traffic did not get going"


# -- brokers --------------------------------------------------------------------------------------

def new_broker(kafka_broker, workdir):
    broker = kafka_broker(workdir, **CONFIG)
    return broker


def copy_broker(kafka_broker, src_logdir, workdir, made):
    """A broker on a copy of ``src_logdir`` (the kafka_broker fixture's way of closing it)."""
    broker = Broker.on_copy(src_logdir, workdir, **CONFIG)
    made.append(broker)
    return broker


def start_all(brokers):
    """Start brokers side by side (the machine's cores load two JVMs at once faster than one
    after the other) and wait until every partition of each is online."""
    errors = []

    def run(b):
        try:
            b.start()
            b.wait_leaders([*TOPICS, *INTERNAL])
        except Exception as e:
            errors.append((b.workdir, e, b.log_tail(40)))

    threads = [threading.Thread(target=run, args=(b,)) for b in brokers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def read_records(broker):
    """Every record of every partition (data topics and the two coordinators' topics), read
    through ``broker`` from the start to the high watermark: {(topic, partition): (end offset,
    [(offset, key, value, headers, timestamp, timestamp type)])}."""
    from kafka import KafkaConsumer, TopicPartition
    tps = [TopicPartition(t, p) for t, n in {**TOPICS, **INTERNAL}.items() for p in range(n)]
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             group_id=None, fetch_max_wait_ms=50, request_timeout_ms=30000,
                             max_partition_fetch_bytes=1 << 20)
    try:
        consumer.assign(tps)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(tps)
        out = {(tp.topic, tp.partition): [] for tp in tps}
        deadline = time.monotonic() + 60
        idle = 0
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "reading back took over 60 s"
            polled = consumer.poll(timeout_ms=300, max_records=5000)
            idle = 0 if polled else idle + 1
            if idle > 6:  # only control batches left before the end: positions stay put
                break
            for tp, messages in polled.items():
                out[(tp.topic, tp.partition)].extend(
                    (m.offset, m.key, m.value, tuple(m.headers), m.timestamp, m.timestamp_type)
                    for m in messages)
        return {k: (ends[TopicPartition(*k)], v) for k, v in out.items()}
    finally:
        consumer.close()


# -- the files ------------------------------------------------------------------------------------

def partition_files(logdir):
    """{partition dir: {file name: bytes}}, the quarantine and the controller's log left out."""
    out = {}
    for d in sorted(Path(logdir).iterdir()):
        if not d.is_dir() or d.name in NOT_COMPARED_PARTITIONS:
            continue
        out[d.name] = {f.name: f.read_bytes() for f in d.iterdir()
                       if f.is_file() and f.name != QUARANTINE}
    return out


def _strip_zero_entries(data, size):
    """``data`` without its trailing all-zero entries of ``size`` bytes."""
    keep = len(data.rstrip(b"\0"))
    keep = -(-keep // size) * size  # up to the end of the entry holding the last non-zero byte
    return data[:keep]


def _max_timestamp_entry(log_bytes, base):
    """The entry LogSegment.close (and the end of LogSegment.recover) give TimeIndex.maybeAppend:
    the largest batch max timestamp and the last offset of the first batch that has it
    (relative to the base), from the v2 batch headers."""
    pos, best = 0, None
    while pos + 61 <= len(log_bytes):
        base_offset, length = struct.unpack_from(">qi", log_bytes, pos)
        last_delta, = struct.unpack_from(">i", log_bytes, pos + 23)
        max_ts, = struct.unpack_from(">q", log_bytes, pos + 35)
        if best is None or max_ts > best[0]:
            best = (max_ts, base_offset + last_delta)
        pos += 12 + length
    return None if best is None else struct.pack(">qi", best[0], best[1] - base)


def _epochs(data):
    lines = data.decode().splitlines()
    return [tuple(int(x) for x in line.split()) for line in lines[2:]]


def log_end_offset(files):
    """The log end offset of a partition from its last segment's batch headers."""
    logs = sorted(n for n in files if n.endswith(".log"))
    if not logs:
        return None
    data, base = files[logs[-1]], int(logs[-1][:20])
    pos, end = 0, base
    while pos + 61 <= len(data):
        base_offset, length = struct.unpack_from(">qi", data, pos)
        last_delta, = struct.unpack_from(">i", data, pos + 23)
        end = base_offset + last_delta + 1
        pos += 12 + length
    return end


def compare_recovered_with_loaded(a_files, b_files, a_logdir, b_logdir, label):
    """Comparison 1 (see the module's docstring): A as recover left it, B after the broker's
    load and clean stop. Returns the named differences seen (for the report)."""
    named = []
    problems = []
    assert set(a_files) == set(b_files), (label, sorted(set(a_files) ^ set(b_files)))
    for part in sorted(a_files):
        a, b = a_files[part], b_files[part]
        logs = sorted(n for n in a if n.endswith(".log"))
        last = logs[-1][:20] if logs else None
        only = sorted(set(a) ^ set(b))
        if only:
            problems.append(f"{part}: files in one copy only: "
                            + ", ".join(f"{n} ({'A' if n in a else 'B'})" for n in only))
        leo = log_end_offset(a)
        for name in sorted(set(a) & set(b)):
            x, y = a[name], b[name]
            if x == y:
                continue
            if name.startswith(last or "-") and name.endswith(".index") and \
                    _strip_zero_entries(x, 8) == y:
                named.append(f"{part}/{name}: A's pre-allocated zero tail (B trimmed at stop)")
                continue
            if name.startswith(last or "-") and name.endswith(".timeindex"):
                xs = _strip_zero_entries(x, 12)
                if xs == y:
                    named.append(f"{part}/{name}: A's pre-allocated zero tail")
                    continue
                extra = _max_timestamp_entry(a[last + ".log"], int(last))
                if xs + extra == y:
                    named.append(f"{part}/{name}: B's LogSegment.close max timestamp entry")
                    continue
            if name == "leader-epoch-checkpoint":
                ea, eb = _epochs(x), _epochs(y)
                if (eb[:-1] == ea and eb[-1][1] == leo
                        and (not ea or eb[-1][0] > ea[-1][0])):
                    named.append(f"{part}: B's leader epoch {eb[-1]} (Partition.makeLeader)")
                    continue
            problems.append(f"{part}/{name}: A {len(x)} bytes, B {len(y)} bytes differ"
                            + (f" (A {_epochs(x)}, B {_epochs(y)})"
                               if name == "leader-epoch-checkpoint" else ""))
    for ckpt in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
        ca = {k: v for k, v in offset_checkpoint(Path(a_logdir, ckpt)).items()
              if f"{k[0]}-{k[1]}" in a_files}
        cb = {k: v for k, v in offset_checkpoint(Path(b_logdir, ckpt)).items()
              if f"{k[0]}-{k[1]}" in b_files}
        if ckpt == "log-start-offset-checkpoint":
            # the broker writes an entry only where the log start is above the first segment's
            # base (LogManager.checkpointLogStartOffsetsInDir); recover leaves the file alone
            ca = {k: v for k, v in ca.items() if v > _first_base(a_files[f"{k[0]}-{k[1]}"])}
        if ca != cb:
            problems.append(f"{ckpt}: A {ca} B {cb}")
    assert not problems, f"{label}: recover differs from the broker's recovery:\n" + \
        "\n".join(problems)
    return named


def _first_base(files):
    logs = sorted(n for n in files if n.endswith(".log"))
    return int(logs[0][:20]) if logs else 0


def compare_both_loaded(a_files, b_files, label):
    """Comparison 2: A after recover, a broker start and a clean stop, against B after a broker
    start and a clean stop: every file of every partition byte for byte."""
    problems = []
    assert set(a_files) == set(b_files), (label, sorted(set(a_files) ^ set(b_files)))
    for part in sorted(a_files):
        a, b = a_files[part], b_files[part]
        for name in sorted(set(a) | set(b)):
            if a.get(name) != b.get(name):
                problems.append(f"{part}/{name}: A {len(a.get(name) or b'')} bytes"
                                f"{'' if name in a else ' (missing)'}, B "
                                f"{len(b.get(name) or b'')} bytes"
                                f"{'' if name in b else ' (missing)'}")
    assert not problems, f"{label}: after one broker start each:\n" + "\n".join(problems)


def compare_records(ra, rb, label):
    problems = []
    for tp in sorted(rb):
        if ra[tp] != rb[tp]:
            (ea, la), (eb, lb) = ra[tp], rb[tp]
            first = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y), min(len(la), len(lb)))
            problems.append(f"{tp}: end offsets A {ea} B {eb}, records A {len(la)} B {len(lb)}, "
                            f"first difference at record {first}")
    assert not problems, f"{label}: A and B give different records:\n" + "\n".join(problems)
    return sum(len(v[1]) for v in rb.values())


def check_second_recover(a_copy):
    before = tree_hashes(a_copy)
    proc = kafkalog("recover", "--index-interval-bytes", INDEX_INTERVAL, a_copy, ok=(0,))
    assert tree_hashes(a_copy) == before, proc.stdout.decode()[-2000:]


# -- one trial ------------------------------------------------------------------------------------

class Trial:
    """A killed log directory, recovered on A and loaded by the broker on B."""

    def __init__(self, kafka_broker, made, killed_logdir, workdir, label):
        self.label = label
        self.workdir = Path(workdir)
        self.a = copy_broker(kafka_broker, killed_logdir, self.workdir / "A", made)
        self.b = copy_broker(kafka_broker, killed_logdir, self.workdir / "B", made)
        self.recovered = None

    def recover_a(self):
        proc = recover(self.a.logdir)
        self.report = [json.loads(line) for line in proc.stdout.decode().splitlines()]
        self.a_files = partition_files(self.a.logdir)
        self.a_checkpoints = {c: Path(self.a.logdir, c).read_bytes()
                              for c in ("recovery-point-offset-checkpoint",
                                        "log-start-offset-checkpoint")
                              if Path(self.a.logdir, c).exists()}
        self.a_copy = self.workdir / "A-recovered"
        copy_logdir(self.a.logdir, self.a_copy)

    def load_and_compare(self, stop_a, second_recover=True):
        start_all([self.a, self.b])
        ra, rb = read_records(self.a), read_records(self.b)
        self.records = compare_records(ra, rb, self.label)
        self.b.stop()
        assert (self.b.logdir / ".kafka_cleanshutdown").exists()
        self.named = compare_recovered_with_loaded(self.a_files, partition_files(self.b.logdir),
                                                   self.a_copy, self.b.logdir, self.label)
        if second_recover:
            check_second_recover(self.a_copy)
        if stop_a:
            self.a.stop()
            compare_both_loaded(partition_files(self.a.logdir), partition_files(self.b.logdir),
                                self.label)


def _close(producer):
    """Close a kafka-python producer whose broker may have been killed under it. Its close()
    flushes first and, with records still pending, raises before it stops its sender thread,
    which then keeps reconnecting (drawing on the random module's state for its back-off) until
    its __del__ fails the same way. Here its sender is made to drop the pending records, then
    the producer closes."""
    from kafka.errors import KafkaTimeoutError
    try:
        producer.close(timeout=0)
    except KafkaTimeoutError:
        producer._sender.force_close()
        producer._sender.join(10)
        producer.close(timeout=0)


def set_up(broker):
    """The data topics, and the coordinators' topics (a group's offset commit makes
    ``__consumer_offsets``, a transactional producer ``__transaction_state``)."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata
    for topic, n in TOPICS.items():
        broker.create_topic(topic, n, internal_segment_bytes=SEGMENT_BYTES)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="kafkalog-recover-plain",
                             enable_auto_commit=False)
    consumer.assign([TopicPartition("codecs", 0)])
    consumer.commit({TopicPartition("codecs", 0): OffsetAndMetadata(0, "start", -1)})
    consumer.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=TXN_ID)
    producer.init_transactions()
    producer.close()
    broker.wait_leaders([*TOPICS, *INTERNAL])


# -- the SIGKILL campaign -------------------------------------------------------------------------

@pytest.mark.slow
def test_sigkill_campaign(kafka_broker, tmp_path):
    """CAMPAIGN_TRIALS SIGKILLs at random moments (seeds 0..n-1), each recovered by kafkalog
    and by the broker, compared as the module's docstring says; the trials are chained: each
    one's traffic goes through a broker on the previous trial's A."""
    made = []
    live = new_broker(kafka_broker, tmp_path / "live")
    live.start()
    set_up(live)
    # the coordinators' topics exist once a transactional producer and a group have used them
    traffic = Traffic(live.bootstrap, seed=-1, logdir=live.logdir).start()
    traffic.kill_at_random(live, random.Random(-1), 1.0, 1.5)
    killed = live.logdir
    notes = []
    t0 = time.monotonic()
    try:
        for n in range(CAMPAIGN_TRIALS):
            rng = random.Random(n)
            trial = Trial(kafka_broker, made, killed, tmp_path / f"trial-{n}", f"trial {n}")
            trial.recover_a()
            last = n == CAMPAIGN_TRIALS - 1
            # a second recover on every fourth trial's A (each takes a couple of seconds)
            trial.load_and_compare(stop_a=last, second_recover=last or n % 4 == 0)
            notes.append((n, trial.records, len(trial.named)))
            shutil.rmtree(trial.b.workdir)
            if not last:
                # the next trial's traffic on A, which a broker now serves
                traffic = Traffic(trial.a.bootstrap, seed=n, logdir=trial.a.logdir).start()
                traffic.kill_at_random(trial.a, rng)
                killed = trial.a.logdir
            if n >= 2:
                shutil.rmtree(tmp_path / f"trial-{n - 2}", ignore_errors=True)
    finally:
        for b in made:
            b.close()
    print(f"{CAMPAIGN_TRIALS} trials in {time.monotonic() - t0:.0f} s: {notes}")


# -- the damaged variants -------------------------------------------------------------------------

def _batches(data):
    """[(position, size)] of the v2 batches of a segment's bytes."""
    out, pos = [], 0
    while pos + 61 <= len(data):
        length, = struct.unpack_from(">i", data, pos + 8)
        if pos + 12 + length > len(data):
            break
        out.append((pos, 12 + length))
        pos += 12 + length
    return out


def _segments(part):
    return sorted(p for p in part.iterdir() if p.name.endswith(".log"))


def truncate_mid_batch(part):
    """A torn write: the last segment cut in the middle of its last batch."""
    log = _segments(part)[-1]
    pos, size = _batches(log.read_bytes())[-1]
    os.truncate(log, pos + size // 2)
    return f"{log.name} cut to {pos + size // 2} (mid-batch at {pos})"


def flip_byte(part):
    """A bad sector: one byte flipped in the records of a batch in the middle of the last
    segment (its CRC fails: the broker truncates there, and drops what follows)."""
    log = _segments(part)[-1]
    data = bytearray(log.read_bytes())
    batches = _batches(bytes(data))
    pos, size = batches[len(batches) // 2]
    at = pos + 61 + (size - 61) // 2
    data[at] ^= 0x5A
    log.write_bytes(bytes(data))
    return f"{log.name} byte {at} flipped (batch at {pos})"


def delete_indexes(part):
    """A lost .index (the broker's sanity check sends its segment to recovery) and a lost
    .timeindex (created empty, not rebuilt)."""
    logs = _segments(part)
    (part / (logs[0].name[:20] + ".index")).unlink()
    (part / (logs[1].name[:20] + ".timeindex")).unlink()
    return f"{logs[0].name[:20]}.index and {logs[1].name[:20]}.timeindex deleted"


def leave_swap(part):
    """LocalLog.replaceSegments caught between renaming the cleaned segment to .swap and
    deleting the segments it replaces: ``<first base>.log.swap`` holding the two first
    segments' batches (their indexes follow on to .swap only later: none here), the old
    segments still in place."""
    logs = _segments(part)
    swap = part / (logs[0].name + ".swap")
    swap.write_bytes(logs[0].read_bytes() + logs[1].read_bytes())
    return f"{swap.name} over {logs[0].name} and {logs[1].name}"


def leave_cleaned_and_deleted(part):
    """The cleaner's output before its swap (``.log.cleaned``, ``.index.cleaned``) and the first
    segment mid-deletion (UnifiedLog.deleteSegments renames it and its indexes .deleted; the
    files go later)."""
    logs = _segments(part)
    second = logs[1].name[:20]
    shutil.copyfile(logs[1], part / f"{second}.log.cleaned")
    shutil.copyfile(part / f"{second}.index", part / f"{second}.index.cleaned")
    first = logs[0].name[:20]
    for f in list(part.iterdir()):
        if f.name.startswith(first) and f.suffix in (".log", ".index", ".timeindex", ".txnindex"):
            f.rename(part / (f.name + ".deleted"))
    return f"{second}.log.cleaned, {first}.* .deleted"


DAMAGES = {"codecs-0": truncate_mid_batch, "codecs-1": flip_byte, "codecs-2": delete_indexes,
           "codecs-3": leave_swap, "codecs-4": leave_cleaned_and_deleted,
           "txn-0": truncate_mid_batch, "txn-1": flip_byte, "idem-0": flip_byte}
# how many segments each damage needs in its partition
NEEDS = {delete_indexes: 2, leave_swap: 3, leave_cleaned_and_deleted: 3}


def _enough_segments(logdir):
    """Every damaged partition has the segments its damage needs, and its last segment at
    least two whole batches (what a damage to the last segment cuts or flips)."""
    for part, damage in DAMAGES.items():
        d = Path(logdir, part)
        logs = sorted(d.glob("*.log")) if d.is_dir() else []
        if len(logs) < NEEDS.get(damage, 1) or len(_batches(logs[-1].read_bytes())) < 2:
            return False
    return True


def test_damaged_variants(kafka_broker, tmp_path):
    """A killed directory damaged in eight partitions (see DAMAGES), recovered by kafkalog on A
    and by the broker on B: the same records and files (comparisons 1 and 2); restoring A's
    quarantine runs gives back the damaged files byte for byte."""
    made = []
    live = new_broker(kafka_broker, tmp_path / "live")
    live.start()
    set_up(live)
    for attempt in range(4):
        # traffic until every damage has room, then a kill; again (the broker restarted on the
        # killed directory) if a segment rolled just before the kill left an empty last one
        traffic = Traffic(live.bootstrap, seed=1000 + attempt, logdir=live.logdir).start()
        deadline = time.monotonic() + 240
        while not _enough_segments(live.logdir) and time.monotonic() < deadline:
            time.sleep(0.2)
        traffic.kill_at_random(live, random.Random(1000 + attempt), 0.1, 0.6)
        if _enough_segments(live.logdir):
            break
        live.start()
        live.wait_leaders([*TOPICS, *INTERNAL])
    else:
        pytest.fail("no kill left room for every damage: "
                    + str({p: [f.stat().st_size for f in sorted(Path(live.logdir, p).glob("*.log"))]
                           for p in DAMAGES}))
    damaged = tmp_path / "damaged"
    copy_logdir(live.logdir, damaged)
    done = {part: damage(damaged / part) for part, damage in DAMAGES.items()}
    print("damages:", done)
    try:
        trial = Trial(kafka_broker, made, damaged, tmp_path / "variants", "damaged variants")
        trial.recover_a()
        cut = {(o["topic"], o["partition"]) for o in trial.report
               if o.get("type") == "partition" and (o.get("bytesCut") or o.get("tornRecords"))}
        for part in ("codecs-0", "codecs-1", "txn-0", "txn-1", "idem-0"):
            topic, p = part.rsplit("-", 1)
            assert (topic, int(p)) in cut, (part, trial.report)
        check_restore(trial.a_copy, damaged)
        trial.load_and_compare(stop_a=True)
        print("named differences:", trial.named)
    finally:
        for b in made:
            b.close()


def check_restore(recovered, damaged):
    """``kafkalog quarantine restore`` of every run recover made gives each damaged partition
    its files back, byte for byte (but the segment swapped into place: README, restore does
    not rename a .swap back)."""
    restored = recovered.parent / "restored"
    copy_logdir(recovered, restored)
    for part in sorted(restored.iterdir()):
        q = part / QUARANTINE
        if not q.is_dir() or DAMAGES.get(part.name) is leave_swap:
            # restore refuses a run whose .log.swap recover renamed into place: the segment
            # there is not one recover writes (README: a .swap is not renamed back)
            continue
        for run in sorted(p.name for p in q.iterdir() if p.is_dir()):
            kafkalog("quarantine", "restore", part, run)
    want, got = partition_files(damaged), partition_files(restored)
    problems = []
    for part in sorted(want):
        if DAMAGES.get(part) is leave_swap:
            continue
        for name in sorted(set(want[part]) | set(got[part])):
            if want[part].get(name) != got[part].get(name):
                problems.append(f"{part}/{name}: damaged {len(want[part].get(name) or b'')} "
                                f"bytes, restored {len(got[part].get(name) or b'')}"
                                f"{'' if name in got[part] else ' (missing)'}")
    assert not problems, "quarantine restore:\n" + "\n".join(problems)
