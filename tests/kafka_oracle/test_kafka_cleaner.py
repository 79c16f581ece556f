"""``kafkalog cleaner`` judged by Apache Kafka's own log cleaner.

One broker writes two compacted topics of small segments (``internal.segment.bytes``) whose
``min.cleanable.dirty.ratio`` is 1 (the cleaner never picks them: no ratio is above 1), keyed
records with many updates per key and a few tombstones, and stops cleanly; its log directory is
copied. In ``held``, a transactional producer has begun a transaction in the middle of the
records and not ended it (its timeout is ten minutes): the last stable offset stays at its first
offset. ``kafkalog cleaner`` reads the copy (the topics' settings from the copy's
``__cluster_metadata-0``, the ratio given as the one the broker is about to get). Then the broker
starts again, the topics' ``min.cleanable.dirty.ratio`` is set to 0.01
(IncrementalAlterConfigs), its cleaner (every ``log.cleaner.backoff.ms``) cleans each partition
once, and it stops. Then:

* kafkalog said the cleaner would clean each partition from offset 0 (no checkpoint entry) up
  to the active segment's base offset (``keyed``), or up to the base offset of the segment
  holding the open transaction's first offset, stopped by the last stable offset (``held``);
* the broker's ``cleaner-offset-checkpoint`` entry (the end of its pass, Cleaner.doClean's
  endOffset) is kafkalog's ``passEndOffset``;
* the records the broker's pass removed (the partition's records before, less those after) are
  kafkalog's ``recordsRemovable``, and the tombstones it kept are ``tombstonesWaiting``;
* kafkalog read the topic's ``cleanup.policy`` from the broker's metadata log.
"""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

import kafkaraw
from kafkabroker import offset_checkpoint

pytestmark = pytest.mark.kafka

KAFKALOG = [sys.executable, "-m", "kafkalog_cli"]
TOPICS = ("keyed", "held")
# "lagged": min.compaction.lag.ms of an hour (its ratio 0.01 from the start): never cleaned;
# "overdue": its ratio stays 1, max.compaction.lag.ms set to 1 s at the restart: cleaned
LAG_TOPICS = ("lagged", "overdue")
OVERDUE_LAG_MS = 1000
SEGMENT_BYTES = 4096
KEYS = 40


def _records(directory):
    proc = subprocess.run([*KAFKALOG, "describe", "--format", "json", directory],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    (part,) = [o for o in map(json.loads, proc.stdout.decode().splitlines())
               if o["type"] == "partition"]
    return part["records"]


def _wait_cleaned(broker, timeout=120):
    """Until the broker's cleaner has written every partition's checkpoint entry and they have
    held still for 3 s."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while True:
        written = offset_checkpoint(broker.logdir / "cleaner-offset-checkpoint")
        entry = {t: written.get((t, 0)) for t in TOPICS + LAG_TOPICS}
        if entry != last:
            last, since = entry, time.monotonic()
        elif all(entry[t] for t in TOPICS + ("overdue",)) and time.monotonic() - since > 3:
            return entry
        assert time.monotonic() < deadline, ("the broker's cleaner did not run", entry,
                                             broker.log_tail())
        time.sleep(0.3)


@pytest.fixture(scope="module")
def kafka_cleaned(tmp_path_factory, kafka_classpath):
    from kafka import KafkaProducer
    from kafkabroker import Broker

    work = tmp_path_factory.mktemp("kafka-cleaner")
    broker = Broker(work / "broker")
    open_producer = None
    try:
        broker.start()
        for topic in TOPICS + ("overdue",):
            broker.create_topic(topic, 1, cleanup_policy="compact", min_cleanable_dirty_ratio=1.0,
                                internal_segment_bytes=SEGMENT_BYTES)
        broker.create_topic("lagged", 1, cleanup_policy="compact",
                            min_cleanable_dirty_ratio=0.01, min_compaction_lag_ms=3_600_000,
                            internal_segment_bytes=SEGMENT_BYTES)
        now = kafkaraw.now_ms()
        _produce(broker, "keyed", range(600), now)
        _produce(broker, "lagged", range(300), now)
        _produce(broker, "overdue", range(300), now)
        _produce(broker, "held", range(300), now)
        open_producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                                      transactional_id="held-open",
                                      transaction_timeout_ms=600000)
        open_producer.init_transactions()
        open_producer.begin_transaction()
        open_producer.send("held", key=b"k1", value=b"in an open transaction", partition=0,
                           timestamp_ms=now)
        open_producer.flush()
        _produce(broker, "held", range(300, 600), now)
        broker.stop()

        copy = work / "kafkalog"
        shutil.copytree(broker.logdir, copy, symlinks=True)
        status, before = {}, {}
        for topic in TOPICS:
            proc = subprocess.run([*KAFKALOG, "cleaner", "--format", "json",
                                   "--min-cleanable-dirty-ratio", "0.01", copy / f"{topic}-0"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
            assert proc.returncode == 0, (proc.stdout.decode(), proc.stderr.decode())
            status[topic] = json.loads(proc.stdout.decode().splitlines()[0])
            before[topic] = _records(copy / f"{topic}-0")
        for topic, options in (("lagged", []),
                               ("overdue", ["--max-compaction-lag-ms", str(OVERDUE_LAG_MS)])):
            proc = subprocess.run([*KAFKALOG, "cleaner", "--format", "json", *options,
                                   copy / f"{topic}-0"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
            assert proc.returncode in (0, 1), (proc.stdout.decode(), proc.stderr.decode())
            status[topic] = json.loads(proc.stdout.decode().splitlines()[0])
            before[topic] = _records(copy / f"{topic}-0")

        broker.start()
        broker.wait_leaders(list(TOPICS))
        configs = {topic: {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                           "internal.segment.bytes": SEGMENT_BYTES} for topic in TOPICS}
        configs["overdue"] = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "1.0",
                              "max.compaction.lag.ms": OVERDUE_LAG_MS,
                              "internal.segment.bytes": SEGMENT_BYTES}
        broker.alter_topic_configs(configs)
        entry = _wait_cleaned(broker)
        broker.stop()
        after = {topic: _records(broker.partition_dir(topic))
                 for topic in TOPICS + LAG_TOPICS}
        yield status, entry, before, after, copy
    finally:
        if open_producer is not None:
            open_producer.close(timeout=0)
        broker.close()


def _produce(broker, topic, numbers, now):
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5,
                             batch_size=1024)
    for i in numbers:
        key = b"k%d" % (i % KEYS)
        value = None if i % 97 == 96 else b"v%d-" % i + b"x" * (i * 13 % 90)
        producer.send(topic, key=key, value=value, partition=0, timestamp_ms=now - 600 + i)
        if i % 10 == 9:
            producer.flush()
    producer.flush()
    producer.close()


@pytest.mark.parametrize("topic", TOPICS)
def test_kafkalog_reads_the_topic_settings_from_the_metadata_log(kafka_cleaned, topic):
    status = kafka_cleaned[0][topic]
    assert status["config"]["cleanup.policy"] == {"value": "compact", "source": "topic config"}
    assert status["config"]["min.cleanable.dirty.ratio"]["source"] == "given"


def _bases(copy, topic):
    return sorted(int(n[:-4]) for n in os.listdir(copy / f"{topic}-0") if n.endswith(".log"))


def test_kafkalog_says_where_the_broker_cleaner_starts_and_stops(kafka_cleaned):
    status, entry, _, _, copy = kafka_cleaned
    keyed = status["keyed"]
    bases = _bases(copy, "keyed")
    assert len(bases) >= 4, bases
    assert keyed["wouldClean"] is True
    assert (keyed["firstDirtyOffset"], keyed["firstUncleanableOffset"]) == (0, bases[-1])
    assert keyed["stoppedBy"] == ["active segment"]
    assert keyed["passEndOffset"] == entry["keyed"]


def test_an_open_transaction_stops_kafkalog_where_it_stops_the_broker(kafka_cleaned):
    status, entry, _, _, copy = kafka_cleaned
    held = status["held"]
    assert held["openTransactions"] == 1 and held["stoppedBy"] == ["last stable offset"]
    # the cleanable range ends at the base of the segment holding the open transaction
    bases = _bases(copy, "held")
    lso = held["lastStableOffset"]
    assert held["firstUncleanableOffset"] == max(b for b in bases if b <= lso) < bases[-1]
    assert held["passEndOffset"] == entry["held"] == held["firstUncleanableOffset"]


@pytest.mark.parametrize("topic", TOPICS)
def test_kafkalog_counts_what_the_broker_cleaner_removes(kafka_cleaned, topic):
    status, _, before, after, _ = kafka_cleaned
    assert before[topic] - after[topic] == status[topic]["recordsRemovable"] > 0
    if topic == "keyed":  # its last tombstone is its key's latest record: kept for a day
        assert status[topic]["tombstonesWaiting"] > 0
    assert status[topic]["problems"] == []


def test_describe_gives_the_cleaners_dirty_ratio_of_a_compacted_topic(kafka_cleaned):
    status, _, _, _, copy = kafka_cleaned
    proc = subprocess.run([*KAFKALOG, "describe", "--format", "json", copy],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    parts = {o["topic"]: o for o in map(json.loads, proc.stdout.decode().splitlines())
             if o["type"] == "partition"}
    for topic in TOPICS:
        assert (parts[topic]["firstDirtyOffset"], parts[topic]["dirtyRatio"]) == (
            status[topic]["firstDirtyOffset"], status[topic]["dirtyRatio"])
    # the metadata partition itself is not a compacted topic's
    assert parts["__cluster_metadata"]["dirtyRatio"] is None


def test_min_compaction_lag_stops_kafkalog_where_it_stops_the_broker(kafka_cleaned):
    status, entry, before, after, _ = kafka_cleaned
    lagged = status["lagged"]
    # every segment is newer than the lag: nothing cleanable, and the broker cleaned nothing
    assert lagged["stoppedBy"] == ["min.compaction.lag.ms"]
    assert lagged["firstUncleanableOffset"] == lagged["firstDirtyOffset"] == 0
    assert lagged["cleanableBytes"] == 0 and lagged["wouldClean"] is False
    assert entry["lagged"] is None and before["lagged"] == after["lagged"]


def test_max_compaction_lag_makes_kafkalog_and_the_broker_clean(kafka_cleaned):
    status, entry, before, after, _ = kafka_cleaned
    overdue = status["overdue"]
    # the dirty ratio (1.0) is not above min.cleanable.dirty.ratio (1.0): only the lag
    assert overdue["dirtyRatio"] == 1.0 and overdue["overdue"] is True
    assert overdue["wouldClean"] is True and overdue["maxCompactionDelayMs"] > 0
    assert overdue["passEndOffset"] == entry["overdue"]
    assert before["overdue"] - after["overdue"] == overdue["recordsRemovable"] > 0
