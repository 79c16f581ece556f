"""``kafkalog retain`` judged by Apache Kafka itself.

One broker for the module writes partitions of small segments (``internal.segment.bytes``) with
retention off, and stops cleanly; its log directory is copied. On the copy, ``kafkalog retain``
runs with a policy per partition; on the original, the broker starts again with the same policy
set on the topic (IncrementalAlterConfigs) or asked for (DeleteRecords), its retention thread
(every ``log.retention.check.interval.ms``, 500 ms here) deletes, and it stops cleanly. Then,
partition by partition:

* the same segments are left (``.log`` base offsets), with the same index and time index files;
* the same log start offset: the first segment's base and the partition's entry of
  ``log-start-offset-checkpoint`` (the broker writes an entry only where the log start is
  above the first segment's base, as after DeleteRecords: LogManager.checkpointLogStartOffsetsInDir);
* the same ``recovery-point-offset-checkpoint`` entry (a clean stop leaves it at the log end,
  which retention never passes; the broker's policy that deletes everything rolls first, its
  recovery point then the new segment's base, which is the log end);
* the same ``leader-epoch-checkpoint``, but for the entry the broker's restart adds at the log
  end (a new leader epoch: the broker was the partition's leader again).

Policies: ``retention.bytes`` (the size pass), ``retention.ms`` over records whose CreateTime is
years in the past (the time pass: the segments wholly in the past go, the one holding today's
records stays), ``retention.ms`` over a partition whose every record is old (the broker rolls
the active segment so that it can go: ``retain --roll-active``), and a DeleteRecords log start
offset in the middle of a segment (``retain --log-start-offset``).
"""

import datetime
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
SEGMENT_BYTES = 4096
DAY = 24 * 3600 * 1000
OLD = int(datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc).timestamp() * 1000)
RETENTION_MS = 30 * DAY
RETENTION_BYTES = 11000

# topic: (kafkalog retain options, the broker's topic configs (None: DeleteRecords))
POLICIES = {
    "bytes": (["--retention-bytes", str(RETENTION_BYTES)], {"retention.bytes": RETENTION_BYTES}),
    "time": (["--retention-ms", str(RETENTION_MS)], {"retention.ms": RETENTION_MS}),
    "alltime": (["--retention-ms", str(RETENTION_MS), "--roll-active"],
                {"retention.ms": RETENTION_MS}),
    # DeleteRecords (kafkalog: --log-start-offset) in the middle of the second segment, and
    # inside the first (no segment goes, the log start moves)
    "deleted": (None, None),
    "deletedfirst": (None, None),
}


def _produce(broker, topic, n, timestamp, idempotent=False, first=0):
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5,
                             batch_size=1024, enable_idempotence=idempotent)
    for i in range(first, first + n):
        producer.send(topic, key=b"k%d" % (i % 17), value=b"v%d-" % i + b"x" * (i * 13 % 120),
                      partition=0, timestamp_ms=timestamp(i))
        if i % 10 == 9:
            producer.flush()
    producer.flush()
    producer.close()


def _segments(d):
    return sorted(n for n in os.listdir(d) if n.endswith((".log", ".index", ".timeindex")))


def _wait_retention(broker, topics, timeout=90):
    """Until the broker's retention has run on ``topics``: every partition's log start offset
    moved and held still for 3 s, and no ``.deleted`` file left (file.delete.delay.ms 0)."""
    from kafka import TopicPartition
    from kafka.protocol.consumer import OffsetSpec
    admin = broker.admin()
    try:
        deadline = time.monotonic() + timeout
        last, since = None, time.monotonic()
        while True:
            specs = {TopicPartition(t, 0): OffsetSpec.EARLIEST for t in topics}
            got = admin.list_partition_offsets(specs)
            starts = {tp.topic: info.offset for tp, info in got.items()}
            pending = [n for t in topics for n in os.listdir(broker.partition_dir(t))
                       if n.endswith(".deleted")]
            if starts != last:
                last, since = starts, time.monotonic()
            elif (all(v > 0 for v in starts.values()) and not pending
                  and time.monotonic() - since > 3):
                return starts
            assert time.monotonic() < deadline, (starts, pending)
            time.sleep(0.3)
    finally:
        admin.close()


@pytest.fixture(scope="module")
def kafka_retained(tmp_path_factory, kafka_classpath):
    from kafka import TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType
    from kafkabroker import Broker

    work = tmp_path_factory.mktemp("kafka-retain")
    broker = Broker(work / "broker")
    try:
        broker.start()
        for topic in POLICIES:
            broker.create_topic(topic, 1, internal_segment_bytes=SEGMENT_BYTES, retention_ms=-1,
                                retention_bytes=-1, file_delete_delay_ms=0)
        now = kafkaraw.now_ms()
        _produce(broker, "bytes", 300, lambda i: now - 1000 + i, idempotent=True)
        # time: 200 records of 2020, then 60 of today (the segments holding only 2020 go)
        _produce(broker, "time", 200, lambda i: OLD + 1000 * i)
        _produce(broker, "time", 60, lambda i: now - 60 + i, first=200)
        _produce(broker, "alltime", 150, lambda i: OLD + 1000 * i, idempotent=True)
        _produce(broker, "deleted", 200, lambda i: now - 1000 + i)
        _produce(broker, "deletedfirst", 200, lambda i: now - 1000 + i, idempotent=True)
        broker.stop()

        delete_at = {}
        for topic in ("deleted", "deletedfirst"):
            bases = sorted(int(n[:-4]) for n in os.listdir(broker.partition_dir(topic))
                           if n.endswith(".log"))
            assert len(bases) >= 3, bases
            delete_at[topic] = ((bases[1] + bases[2]) // 2 if topic == "deleted"
                                else bases[1] // 2)
        copy = work / "kafkalog"
        shutil.copytree(broker.logdir, copy, symlinks=True)
        for topic, (options, _) in POLICIES.items():
            if options is None:
                options = ["--log-start-offset", str(delete_at[topic])]
            proc = subprocess.run([*KAFKALOG, "retain", *options, "--file-delete-delay-ms", "0",
                                   copy / f"{topic}-0"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, timeout=120)
            assert proc.returncode == 0, (topic, proc.stdout.decode(), proc.stderr.decode())

        broker.start()
        broker.wait_leaders(list(POLICIES))
        admin = broker.admin()
        try:
            admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={
                k: str(v) for k, v in configs.items()})
                for topic, (_, configs) in POLICIES.items() if configs])
            admin.delete_records({TopicPartition(t, 0): o for t, o in delete_at.items()})
        finally:
            admin.close()
        starts = _wait_retention(broker, list(POLICIES))
        broker.stop()
        yield broker.logdir, copy, starts, delete_at
    finally:
        broker.close()


@pytest.mark.parametrize("topic", list(POLICIES))
def test_retain_deletes_what_the_broker_deletes(kafka_retained, topic):
    theirs, ours, starts, delete_at = kafka_retained
    name = f"{topic}-0"
    assert _segments(ours / name) == _segments(theirs / name)
    # something was deleted (but where the log start stays in the first segment), something
    # is left
    assert (ours / name / ("%020d.log" % 0)).exists() == (topic == "deletedfirst")
    assert _segments(ours / name)
    first = min(int(n.split(".")[0]) for n in _segments(ours / name))
    log_start = max(first, offset_checkpoint(ours / "log-start-offset-checkpoint").get((topic, 0), 0))
    assert log_start == starts[topic]
    if topic in delete_at:
        assert log_start == delete_at[topic]


def test_retain_leaves_the_checkpoints_the_broker_leaves(kafka_retained):
    theirs, ours, _, _ = kafka_retained
    ours_lso = offset_checkpoint(ours / "log-start-offset-checkpoint")
    theirs_lso = offset_checkpoint(theirs / "log-start-offset-checkpoint")
    assert ours_lso == theirs_lso
    assert ("deleted", 0) in ours_lso and ("deletedfirst", 0) in ours_lso
    ours_rp = offset_checkpoint(ours / "recovery-point-offset-checkpoint")
    theirs_rp = offset_checkpoint(theirs / "recovery-point-offset-checkpoint")
    for topic in POLICIES:
        assert ours_rp[(topic, 0)] == theirs_rp[(topic, 0)], topic


@pytest.mark.parametrize("topic", list(POLICIES))
def test_retain_truncates_leader_epochs_as_the_broker(kafka_retained, topic):
    theirs, ours, _, _ = kafka_retained

    def entries(d):
        lines = (d / f"{topic}-0" / "leader-epoch-checkpoint").read_text().splitlines()
        return [tuple(int(x) for x in line.split()) for line in lines[2:]]

    mine, broker = entries(ours), entries(theirs)
    # The broker's restart made it leader again: a new epoch at the log end, assigned as
    # LeaderEpochFileCache.assign does (entries at or after its start offset go); retention's
    # truncateFromStart came after it on the broker, before it on our side, which ends the same.
    epoch, start = broker[-1]
    assert epoch > mine[-1][0]
    expected = [(e, o) for e, o in mine if o < start] + [(epoch, start)]
    assert broker == expected, (broker, mine)


@pytest.mark.parametrize("topic", list(POLICIES))
def test_retain_leaves_the_producer_snapshots_the_broker_leaves(kafka_retained, topic):
    theirs, ours, _, _ = kafka_retained
    name = f"{topic}-0"

    def snapshots(d):
        return sorted(n for n in os.listdir(d / name) if n.endswith(".snapshot"))

    assert snapshots(ours) == snapshots(theirs)
