"""Real traffic through a real broker: the log directories the oracle tests read.

``build(workdir)`` starts a ``kafkabroker.Broker``, writes through it with kafka-python's
producers and consumers (nothing of kafkalog is used), and leaves two copies of its log
directory:

* ``crashed``: the broker SIGKILLed right after the traffic (active segments with their
  pre-allocated indexes, no clean-shutdown marker, checkpoints as the last flush left them);
* ``clean``: the same directory after the broker started on it again (its own recovery) and
  stopped cleanly (trimmed indexes, producer snapshots at the log end, every checkpoint).

The traffic: one topic per codec (keys, null keys, null and empty values, headers with empty and binary
empty values), an idempotent producer on a two-partition topic, a transactional producer
committing and aborting (with offsets sent to the transaction, so ``__consumer_offsets`` holds
transactional commits and ``__transaction_state`` the coordinator's records), a compacted topic
the broker's cleaner has cleaned (tombstones, keys overwritten), a consumer group committing
offsets, a topic created, written and deleted, so ``__cluster_metadata`` holds topic and
partition records, deletions and KRaft snapshots.
"""

import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafkabroker import Broker

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
SEGMENT_BYTES = 8192  # internal.segment.bytes: several segments per partition


@dataclass
class TrafficData:
    crashed: Path
    clean: Path
    topics: dict = field(default_factory=dict)  # topic -> number of partitions


def _value(rng, i):
    if i % 11 == 5:
        return None
    if i % 13 == 7:
        return b""
    n = rng.choice((1, 10, 50, 100, 300))
    return bytes(rng.randrange(32, 127) for _ in range(n))


def _key(i):
    return None if i % 7 == 3 else b"key-%d" % (i % 50)


def _headers(i):
    if i % 3 == 0:
        return [("h1", b"v%d" % i), ("empty", b""), ("utf8-\u00e9", b"\xff\x00")]
    if i % 5 == 0:
        return [("trace-id", b"%032x" % i)]
    return []


def _plain(broker, topic, codec, n, rng, idempotent=False, partitions=1):
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                             compression_type=None if codec == "none" else codec,
                             enable_idempotence=idempotent, linger_ms=20, batch_size=4096)
    for i in range(n):
        key, value = _key(i), _value(rng, i)
        if key is None and value is None:  # kafka-python refuses a record with neither
            value = b"-"
        producer.send(topic, key=key, value=value, headers=_headers(i), partition=i % partitions)
        if i % 97 == 0:
            producer.flush()
    producer.flush()
    producer.close()


def _transactions(broker, topic, group, rng):
    from kafka import KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="txn-oracle",
                             compression_type="lz4", linger_ms=10)
    producer.init_transactions()
    for t in range(12):
        producer.begin_transaction()
        for i in range(rng.randrange(1, 30)):
            producer.send(topic, key=b"t%d-%d" % (t, i), value=_value(rng, i),
                          headers=_headers(i), partition=(t + i) % 2)
        producer.flush()
        if t % 4 == 1:
            producer.send_offsets_to_transaction(
                {TopicPartition(topic, 0): OffsetAndMetadata(t * 10, "txn-meta", -1)}, group)
        if t % 3 == 2:
            producer.abort_transaction()
        else:
            producer.commit_transaction()
    producer.close()


def _compacted(broker, topic, rng):
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False,
                             linger_ms=5, batch_size=2048)
    for round_ in range(12):
        for k in range(25):
            value = None if (round_ * 25 + k) % 17 == 0 else b"r%d-%s" % (round_, b"x" * rng.randrange(5, 80))
            producer.send(topic, key=b"ck-%d" % k, value=value)
        producer.flush()
    producer.close()


def _consumer_group(broker, topic, group):
    from kafka import KafkaConsumer
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             max_poll_records=37)
    commits = 0
    deadline = time.monotonic() + 60
    while commits < 8 and time.monotonic() < deadline:
        batch = consumer.poll(timeout_ms=1000)
        if batch:
            consumer.commit()
            commits += 1
    consumer.close()


def _wait_cleaned(broker, topic, timeout=30):
    """Until the broker's cleaner has cleaned ``topic`` once (it is in cleaner-offset-checkpoint)."""
    deadline = time.monotonic() + timeout
    ckpt = broker.logdir / "cleaner-offset-checkpoint"
    while time.monotonic() < deadline:
        if ckpt.exists() and f"{topic} 0 " in ckpt.read_text():
            return True
        time.sleep(0.3)
    return False


def build(workdir, seed=23) -> TrafficData:
    workdir = Path(workdir)
    rng = random.Random(seed)
    broker = Broker(workdir / "broker", **{"log.cleaner.min.cleanable.ratio": "0.01"})
    topics = {}
    try:
        broker.start()
        for codec in CODECS:
            name = f"codec-{codec}"
            broker.create_topic(name, 1, internal_segment_bytes=SEGMENT_BYTES)
            topics[name] = 1
            _plain(broker, name, codec, 600, rng)
        broker.create_topic("idempotent", 2, internal_segment_bytes=SEGMENT_BYTES)
        topics["idempotent"] = 2
        _plain(broker, "idempotent", "lz4", 500, rng, idempotent=True, partitions=2)
        broker.create_topic("transactions", 2, internal_segment_bytes=SEGMENT_BYTES)
        topics["transactions"] = 2
        _transactions(broker, "transactions", "txn-group", rng)
        broker.create_topic("compacted", 1, internal_segment_bytes=2048, cleanup_policy="compact",
                            min_cleanable_dirty_ratio="0.01", delete_retention_ms=100,
                            segment_ms=100)
        topics["compacted"] = 1
        _compacted(broker, "compacted", rng)
        _consumer_group(broker, "codec-none", "oracle-group")
        broker.create_topic("doomed", 1)
        _plain(broker, "doomed", "none", 50, rng)
        admin = broker.admin()
        try:
            admin.delete_topics(["doomed"])
        finally:
            admin.close()
        # A segment roll on the compacted topic (segment.ms) needs a write after it; then the
        # cleaner can clean what is no longer active.
        time.sleep(0.3)
        _compacted(broker, "compacted", rng)
        _wait_cleaned(broker, "compacted")
        time.sleep(6)  # a KRaft snapshot after the last metadata records (interval 5 s)
        broker.kill()
        crashed = workdir / "crashed"
        shutil.copytree(broker.logdir, crashed, symlinks=True)
        broker.start()
        broker.wait_leaders(list(topics))
        broker.stop()
        clean = workdir / "clean"
        shutil.copytree(broker.logdir, clean, symlinks=True)
    finally:
        broker.close()
    return TrafficData(crashed=crashed, clean=clean, topics=topics)
