"""A segment's offsets are checked within the segment only, judged by Kafka 4.4.0 itself.

LogSegment.recover validates a segment's batches knowing nothing of the segment before it. A
batch's base offset lies outside its CRC (v2; a legacy message's offset likewise), so one
damaged byte can leave the last batch of a segment with offsets above the next segment's base.
The broker's load keeps both segments; ``kafkalog recover`` keeps them too (it does not cut the
next segment whole as "does not follow").
"""

import os
import shutil
import struct
import subprocess
import sys

import pytest

import fuzzlib as F

pytestmark = pytest.mark.kafka

KAFKALOG = [sys.executable, "-m", "kafkalog_cli"]
TOPIC = "order"


def _logs(part):
    out = {}
    for n in sorted(os.listdir(part)):
        if n.endswith(".log"):
            with open(os.path.join(part, n), "rb") as f:
                out[n] = f.read()
    return out


def test_a_segment_whose_last_batch_jumps_past_the_next_segment_is_kept(kafka_broker, tmp_path):
    from kafka import KafkaProducer
    broker = kafka_broker(tmp_path / "broker")
    broker.start()
    broker.create_topic(TOPIC, 1, internal_segment_bytes=2048)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for i in range(40):
        producer.send(TOPIC, key=b"k%d" % i, value=b"v" * 200, partition=0)
        producer.flush()
    producer.close()
    broker.stop()
    part = str(broker.partition_dir(TOPIC))
    logs = sorted(n for n in os.listdir(part) if n.endswith(".log"))
    assert len(logs) >= 3, logs
    first = os.path.join(part, logs[0])
    with open(first, "rb") as f:
        data = bytearray(f.read())
    last = F.entry_starts(bytes(data))[-1]
    next_base = int(logs[1][:20])
    struct.pack_into(">q", data, last, next_base + 1000)   # outside the CRC
    with open(first, "wb") as f:
        f.write(data)
    # an unclean load recovering every segment
    os.unlink(os.path.join(str(broker.logdir), ".kafka_cleanshutdown"))
    with open(os.path.join(str(broker.logdir), "recovery-point-offset-checkpoint"), "w") as f:
        f.write("0\n1\n%s 0 0\n" % TOPIC)
    before = _logs(part)
    ours = str(tmp_path / "kafkalog")
    shutil.copytree(str(broker.logdir), ours, symlinks=True)
    ours_part = os.path.join(ours, os.path.basename(part))

    res = subprocess.run([*KAFKALOG, "recover", ours_part], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode in (0, 1), res
    assert "cut" not in res.stdout, res.stdout
    broker.start()
    broker.wait_leaders([TOPIC])
    broker.stop()
    theirs = _logs(part)
    assert set(theirs) == set(before), (sorted(before), sorted(theirs))
    for n in before:
        # the broker keeps every byte that was there (it may append to the last segment: a
        # leader's own writes, none here)
        assert theirs[n] == before[n], n
    assert _logs(ours_part) == before
