"""Leader epochs at a load, judged by Kafka 4.4.0 itself.

A broker's load without a clean shutdown recovers the segment holding the recovery point
(LogLoader.recoverLog -> LogSegment.recover), assigning each batch's partition leader epoch to
the cache only when it is above the latest one, and only then truncates the cache at the log end
offset (LeaderEpochFileCache.truncateFromEnd) and the log start offset (truncateFromStart). A
``leader-epoch-checkpoint`` whose last entry starts past the log end therefore hides the
batches' epochs from that load: the entry is dropped, and nothing is assigned in its place.
``kafkalog recover`` does the same, so a second recover then assigns them (the broker's second
unclean load would too); the fuzzer's writers target accepts exactly that second change
(``fuzzlib.broker_epochs_after_load``). Here the first load is checked against the broker.
"""

import os
import shutil
import subprocess
import sys

import pytest

import fuzzlib as F

pytestmark = pytest.mark.kafka

KAFKALOG = [sys.executable, "-m", "kafkalog_cli"]
TOPIC = "epochs"


def _produce(broker, n, first):
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
    for i in range(first, first + n):
        producer.send(TOPIC, key=b"k%d" % i, value=b"v%d" % i, partition=0)
        producer.flush()
    producer.close()


def _epochs(part):
    """leader-epoch-checkpoint as [(epoch, start offset)]."""
    with open(os.path.join(part, "leader-epoch-checkpoint")) as f:
        lines = f.read().splitlines()
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2, lines
    return [tuple(int(x) for x in line.split()) for line in lines[2:]]


def _write_epochs(part, entries):
    with open(os.path.join(part, "leader-epoch-checkpoint"), "w") as f:
        f.write("0\n%d\n" % len(entries) + "".join("%d %d\n" % e for e in entries))


def test_an_epoch_entry_past_the_log_end_hides_the_batches_epochs_from_one_load(
        kafka_broker, tmp_path):
    broker = kafka_broker(tmp_path / "broker")
    broker.start()
    broker.create_topic(TOPIC, 1)
    _produce(broker, 5, 0)
    broker.stop()
    broker.start()          # a new leader epoch for the partition's next batches
    broker.wait_leaders([TOPIC])
    _produce(broker, 5, 5)
    broker.stop()
    part = str(broker.partition_dir(TOPIC))
    real = _epochs(part)
    assert len(real) >= 2 and real[0] == (0, 0), real   # the batches carry two epochs
    log_end = 10
    # the last entry moved past the log end, its epoch above every batch's
    forged = real[:1] + [(real[-1][0] + 5, log_end + 100)]
    _write_epochs(part, forged)
    os.unlink(os.path.join(str(broker.logdir), ".kafka_cleanshutdown"))  # an unclean load
    ours = str(tmp_path / "kafkalog")
    shutil.copytree(str(broker.logdir), ours, symlinks=True)
    ours_part = os.path.join(ours, os.path.basename(part))

    # the emulation the fuzzer uses agrees with recover and (below) with the broker
    expected = F.broker_epochs_after_load(ours_part)
    assert expected == "0\n1\n0 0\n", expected
    first = subprocess.run([*KAFKALOG, "recover", ours_part], capture_output=True, text=True,
                           timeout=120)
    assert first.returncode == 1, first
    assert _epochs(ours_part) == [(0, 0)]

    # the broker's load of the same files: the batches' epochs are not assigned either; once
    # loaded, the partition's leader appends its own epoch at the log end
    # (UnifiedLog.maybeAssignEpochStartOffset), which is not the load's doing
    broker.start()
    broker.wait_leaders([TOPIC])
    broker.stop()
    theirs = _epochs(part)
    assert theirs[:1] == [(0, 0)], theirs
    assert all(start == log_end and epoch > real[-1][0] for epoch, start in theirs[1:]), theirs
    assert len(theirs) <= 2, theirs

    # kafkalog's second run assigns the batches' epochs, as the emulation of a second load says
    expected = F.broker_epochs_after_load(ours_part)
    second = subprocess.run([*KAFKALOG, "recover", ours_part], capture_output=True, text=True,
                            timeout=120)
    assert second.returncode == 1, second
    assert _epochs(ours_part) == real
    with open(os.path.join(ours_part, "leader-epoch-checkpoint")) as f:
        assert f.read() == expected
    third = subprocess.run([*KAFKALOG, "recover", ours_part], capture_output=True, text=True,
                           timeout=120)
    assert third.returncode == 0, third
