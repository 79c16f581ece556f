"""``kafkalog compact`` judged by Apache Kafka's own log cleaner, byte for byte, over two passes.

One broker writes compacted topics of small segments (``internal.segment.bytes``) whose
``min.cleanable.dirty.ratio`` is 1 (the cleaner never picks them), one per codec, with keyed
records updated many times, tombstones, headers, an idempotent producer on some, and a topic
written by a transactional producer (transactions committed and aborted); then it stops cleanly
and its log directory is copied. The broker starts again, the topics' ratio is set to 0.01, its
cleaner cleans each partition once (pass 1), and it stops; its directory is kept. Then more
records come (ratio 1 again), the directory is copied, and the broker's cleaner makes a second
pass, once pass 1's delete horizons (``delete.retention.ms`` is 5 s) have passed, so that it
removes the tombstones pass 1 kept. For each pass, ``kafkalog compact`` cleans the copy taken
before it, with ``--now`` the time of the broker's pass (read from the delete horizons it
stamped: the pass's time plus delete.retention.ms), and must leave the same segment files, byte
for byte: every .log, .index, .timeindex and .txnindex, and the same cleaner-offset-checkpoint
entry; ``--dry-run`` first changes nothing and reports what the pass then does.
"""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

import kafkaraw
from kafkabroker import offset_checkpoint, segment_files

pytestmark = pytest.mark.kafka

KAFKALOG = [sys.executable, "-m", "kafkalog_cli"]
CODECS = ("none", "gzip", "lz4", "zstd", "snappy")
TOPICS = tuple("c-%s" % c for c in CODECS) + ("c-txn",)
SEGMENT_BYTES = 6000
KEYS = 30
RETENTION_MS = 5000  # delete.retention.ms: pass 1's horizons are past when pass 2 comes
INDEX_INTERVAL = "512"  # the test broker's log.index.interval.bytes (a static broker setting)


def _wait_cleaned(broker, after=None, timeout=180):
    """Until the broker's cleaner has written every partition's checkpoint entry (past the
    entries ``after``) and they have held still for 3 s."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while True:
        written = offset_checkpoint(broker.logdir / "cleaner-offset-checkpoint")
        entry = {t: written.get((t, 0)) for t in TOPICS}
        if entry != last:
            last, since = entry, time.monotonic()
        elif all(entry[t] and (after is None or entry[t] > after[t]) for t in TOPICS) \
                and time.monotonic() - since > 3:
            return entry
        assert time.monotonic() < deadline, ("the broker's cleaner did not run", entry,
                                             broker.log_tail())
        time.sleep(0.3)


def _produce(broker, topic, codec, idempotent, now, numbers):
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5,
                             batch_size=2048, enable_idempotence=idempotent,
                             compression_type=None if codec == "none" else codec)
    try:
        for i in numbers:
            key = b"k%d" % (i * 7 % KEYS)
            value = None if i % 23 == 22 else b"v%d-" % i + b"x" * (i * 13 % 120)
            producer.send(topic, key=key, value=value, partition=0, timestamp_ms=now - 900 + i,
                          headers=[("h", b"%d" % i)] if i % 5 == 0 else [])
            if i % 17 == 16:
                producer.flush()
        producer.flush()
    finally:
        producer.close()


def _produce_transactions(broker, topic, now, numbers):
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="compact-txn",
                             compression_type="lz4", linger_ms=5)
    try:
        producer.init_transactions()
        for t in numbers:
            producer.begin_transaction()
            for i in range(12):
                n = t * 12 + i
                value = None if n % 19 == 18 else b"t%d-" % n + b"y" * (n % 60)
                producer.send(topic, key=b"k%d" % (n % KEYS), value=value, partition=0,
                              timestamp_ms=now - 900 + n)
            producer.flush()
            if t % 3 == 1:
                producer.abort_transaction()
            else:
                producer.commit_transaction()
    finally:
        producer.close()


def _settings(ratio):
    return {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": ratio,
            "delete.retention.ms": str(RETENTION_MS), "internal.segment.bytes": str(SEGMENT_BYTES)}


def _set_ratio(broker, ratio):
    broker.alter_topic_configs({topic: _settings(ratio) for topic in TOPICS})


@pytest.fixture(scope="module")
def kafka_compacted(tmp_path_factory, kafka_classpath):
    """The broker's two passes: (the copy before pass 1, the broker's directory after it, its
    checkpoint entries), then the same for pass 2, made once more records have come and the
    tombstones' delete horizons stamped by pass 1 have passed."""
    from kafkabroker import Broker

    work = tmp_path_factory.mktemp("kafka-compact")
    broker = Broker(work / "broker")
    try:
        broker.start()
        for topic in TOPICS:
            broker.create_topic(topic, 1, cleanup_policy="compact", min_cleanable_dirty_ratio=1.0,
                                delete_retention_ms=RETENTION_MS,
                                internal_segment_bytes=SEGMENT_BYTES)
        now = kafkaraw.now_ms()
        for k, codec in enumerate(CODECS):
            _produce(broker, "c-%s" % codec, codec, k % 2 == 0, now, range(700))
        _produce_transactions(broker, "c-txn", now, range(40))
        broker.stop()
        copy1 = work / "kafkalog-1"
        shutil.copytree(broker.logdir, copy1, symlinks=True)
        broker.start()
        broker.wait_leaders(list(TOPICS))
        _set_ratio(broker, "0.01")
        entry1 = _wait_cleaned(broker)
        broker.stop()
        after1 = work / "broker-after-1"
        shutil.copytree(broker.logdir, after1, symlinks=True)

        broker.start()
        broker.wait_leaders(list(TOPICS))
        _set_ratio(broker, "1.0")
        now = kafkaraw.now_ms()
        for k, codec in enumerate(CODECS):
            _produce(broker, "c-%s" % codec, codec, k % 2 == 1, now, range(700, 1000))
        _produce_transactions(broker, "c-txn", now, range(40, 55))
        broker.stop()
        copy2 = work / "kafkalog-2"
        shutil.copytree(broker.logdir, copy2, symlinks=True)
        # pass 1's horizons (its time + delete.retention.ms) are past by now
        assert kafkaraw.now_ms() > max(_horizons(after1)) + 1000
        broker.start()
        broker.wait_leaders(list(TOPICS))
        _set_ratio(broker, "0.01")
        entry2 = _wait_cleaned(broker, after=entry1)
        broker.stop()
        yield {1: (copy1, after1, entry1), 2: (copy2, broker.logdir, entry2)}
    finally:
        broker.close()


def _horizons(log_dir):
    """The delete horizons stamped in the batches under ``log_dir``."""
    from kafkalog_cli.log.segment import Segment
    for directory, _, files in os.walk(log_dir):
        for name in files:
            if name.endswith(".log"):
                for batch in Segment.at(os.path.join(directory, name)).batches():
                    if batch.delete_horizon_ms is not None:
                        yield batch.delete_horizon_ms


def _pass_time(directory):
    """The time of the broker's last pass over ``directory``: the newest delete horizon in it,
    less delete.retention.ms (None when there is none)."""
    return max((h - RETENTION_MS for h in _horizons(directory)), default=None)


def _compact(directory, when, *options):
    proc = subprocess.run([*KAFKALOG, "compact", "--format", "json", "--now", str(when),
                           "--min-cleanable-dirty-ratio", "0.01", "--index-interval-bytes",
                           INDEX_INTERVAL, *options, directory],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert proc.returncode == 0, (proc.stdout.decode(), proc.stderr.decode())
    (result,) = [o for o in map(json.loads, proc.stdout.decode().splitlines())
                 if o["type"] == "partition"]
    return result


@pytest.mark.parametrize("topic", TOPICS)
@pytest.mark.parametrize("cleaning", (1, 2))
def test_kafkalog_compact_leaves_the_brokers_segments(kafka_compacted, topic, cleaning):
    copy, cleaned_dir, entry = kafka_compacted[cleaning]
    cleaned = cleaned_dir / f"{topic}-0"
    when = _pass_time(cleaned)
    if when is None:  # no horizon stamped: the pass's time leaves no trace
        when = kafkaraw.now_ms()
    before = segment_files(copy / f"{topic}-0")
    preview = _compact(copy / f"{topic}-0", when, "--dry-run")
    assert segment_files(copy / f"{topic}-0") == before
    result = _compact(copy / f"{topic}-0", when)
    assert {k: v for k, v in preview.items() if k not in ("dryRun", "renamed")} \
        == {k: v for k, v in result.items() if k not in ("dryRun", "renamed")}
    assert result["endOffset"] == entry[topic]
    assert offset_checkpoint(copy / "cleaner-offset-checkpoint")[(topic, 0)] == entry[topic]
    ours, theirs = segment_files(copy / f"{topic}-0"), segment_files(cleaned)
    assert sorted(ours) == sorted(theirs)
    different = [n for n in ours if ours[n] != theirs[n]]
    assert not different, different
    assert ours != before
    assert result["recordsRemoved"] > 0
    if cleaning == 2:
        # the tombstones pass 1 kept with their horizon are gone
        assert result["tombstonesRemoved"] > 0
