"""``kafkalog cleaner`` judged by Apache Kafka's own log cleaner.

One broker writes a compacted topic of small segments (``internal.segment.bytes``) whose
``min.cleanable.dirty.ratio`` is 1 (the cleaner never picks it: no ratio is above 1), keyed
records with many updates per key and a few tombstones, and stops cleanly; its log directory is
copied. ``kafkalog cleaner`` reads the copy (the topic's settings from the copy's
``__cluster_metadata-0``, the ratio given as the one the broker is about to get). Then the broker
starts again, the topic's ``min.cleanable.dirty.ratio`` is set to 0.01 (IncrementalAlterConfigs),
its cleaner (every ``log.cleaner.backoff.ms``) cleans the partition once, and it stops. Then:

* kafkalog said the cleaner would clean the partition, from offset 0 (no checkpoint entry) to
  the active segment's base offset;
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

pytestmark = pytest.mark.kafka

KAFKALOG = [sys.executable, "-m", "kafkalog_cli"]
TOPIC = "keyed"
SEGMENT_BYTES = 4096
KEYS = 40


def _checkpoint(path):
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()
    out = {}
    for line in lines[2:]:
        topic, p, offset = line.rsplit(" ", 2)
        out[(topic, int(p))] = int(offset)
    return out


def _records(directory):
    proc = subprocess.run([*KAFKALOG, "describe", "--format", "json", directory],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    (part,) = [o for o in map(json.loads, proc.stdout.decode().splitlines())
               if o["type"] == "partition"]
    return part["records"]


def _wait_cleaned(broker, timeout=120):
    """Until the broker's cleaner has written the partition's checkpoint entry and it has
    held still for 3 s."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while True:
        entry = _checkpoint(broker.logdir / "cleaner-offset-checkpoint").get((TOPIC, 0))
        if entry != last:
            last, since = entry, time.monotonic()
        elif entry and time.monotonic() - since > 3:
            return entry
        assert time.monotonic() < deadline, ("the broker's cleaner did not run", entry,
                                             broker.log_tail())
        time.sleep(0.3)


@pytest.fixture(scope="module")
def kafka_cleaned(tmp_path_factory, kafka_classpath):
    from kafka import KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType
    from kafkabroker import Broker

    work = tmp_path_factory.mktemp("kafka-cleaner")
    broker = Broker(work / "broker")
    try:
        broker.start()
        broker.create_topic(TOPIC, 1, cleanup_policy="compact", min_cleanable_dirty_ratio=1.0,
                            internal_segment_bytes=SEGMENT_BYTES)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5,
                                 batch_size=1024)
        now = kafkaraw.now_ms()
        for i in range(600):
            key = b"k%d" % (i % KEYS)
            value = None if i % 97 == 96 else b"v%d-" % i + b"x" * (i * 13 % 90)
            producer.send(TOPIC, key=key, value=value, partition=0, timestamp_ms=now - 600 + i)
            if i % 10 == 9:
                producer.flush()
        producer.flush()
        producer.close()
        broker.stop()

        copy = work / "kafkalog"
        shutil.copytree(broker.logdir, copy, symlinks=True)
        proc = subprocess.run([*KAFKALOG, "cleaner", "--format", "json",
                               "--min-cleanable-dirty-ratio", "0.01", copy / f"{TOPIC}-0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        assert proc.returncode == 0, (proc.stdout.decode(), proc.stderr.decode())
        status = json.loads(proc.stdout.decode().splitlines()[0])
        before = _records(copy / f"{TOPIC}-0")

        broker.start()
        broker.wait_leaders([TOPIC])
        admin = broker.admin()
        try:
            admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={
                "min.cleanable.dirty.ratio": "0.01"})])
        finally:
            admin.close()
        entry = _wait_cleaned(broker)
        broker.stop()
        after = _records(broker.partition_dir(TOPIC))
        yield status, entry, before, after, copy
    finally:
        broker.close()


def test_kafkalog_reads_the_topic_settings_from_the_metadata_log(kafka_cleaned):
    status = kafka_cleaned[0]
    assert status["config"]["cleanup.policy"] == {"value": "compact", "source": "topic config"}
    assert status["config"]["min.cleanable.dirty.ratio"]["source"] == "given"


def test_kafkalog_says_where_the_broker_cleaner_starts_and_stops(kafka_cleaned):
    status, entry, _, _, copy = kafka_cleaned
    bases = sorted(int(n[:-4]) for n in os.listdir(copy / f"{TOPIC}-0") if n.endswith(".log"))
    assert len(bases) >= 4, bases
    assert status["wouldClean"] is True
    assert (status["firstDirtyOffset"], status["firstUncleanableOffset"]) == (0, bases[-1])
    assert status["stoppedBy"] == ["active segment"]
    assert status["passEndOffset"] == entry


def test_kafkalog_counts_what_the_broker_cleaner_removes(kafka_cleaned):
    status, _, before, after, _ = kafka_cleaned
    assert before - after == status["recordsRemovable"] > 0
    assert status["tombstonesWaiting"] > 0
    assert status["problems"] == []
