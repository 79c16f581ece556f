"""``kafkalog compact`` over v0/v1 message sets, judged by Apache Kafka's own log cleaner.

A Kafka 4 broker writes only v2 batches, but it still loads, reads and cleans the v0/v1
segments an older broker left: its cleaner writes every v0/v1 message set it keeps again as a v2
batch (MemoryRecords.buildRetainedRecordsInto), whole or not, and stamps a delete horizon on one
that keeps a tombstone. The segments are written here by kafka-python's legacy message builder
(an encoder independent of kafkalog's) and a few lines of struct for the wrapper's offset and
time, as an older broker stored them: magic 0 and 1, gzip, snappy, lz4 (magic 0 with its
historical LZ4 header checksum), uncompressed, and LogAppendTime wrappers; keys updated many
times, tombstones, keyless records. They are put in place of the empty segment of compacted
topics the broker made (``min.cleanable.dirty.ratio`` 1: never cleaned); the broker loads and
recovers them, stops, and its log directory is copied; then the ratio is set to 0.01 and its
cleaner cleans each partition. ``kafkalog compact`` on the copy, at the time of the broker's pass
(read from the horizons it stamped), must leave the same segment files, byte for byte, and the
same cleaner-offset-checkpoint entry.
"""

import json
import os
import shutil
import struct
import subprocess
import sys
import time
import zlib

import pytest

import kafkaraw
from kafkabroker import offset_checkpoint, segment_files

pytestmark = pytest.mark.kafka

KAFKALOG = [sys.executable, "-m", "kafkalog_cli"]
GZIP, SNAPPY, LZ4 = 1, 2, 3
# topic: (magic, codec, the wrappers' timestamp type is LogAppendTime)
LAYOUTS = {
    "l-v0-gzip": (0, GZIP, False),
    "l-v0-snappy": (0, SNAPPY, False),
    "l-v0-lz4": (0, LZ4, False),
    "l-v0-none": (0, 0, False),
    "l-v1-gzip": (1, GZIP, False),
    "l-v1-snappy": (1, SNAPPY, False),
    "l-v1-lz4": (1, LZ4, False),
    "l-v1-none": (1, 0, False),
    "l-v1-gzip-append": (1, GZIP, True),
    "l-v1-lz4-append": (1, LZ4, True),
}
RECORDS = 420
PER_WRAPPER = 12
KEYS = 25
INDEX_INTERVAL = "512"  # the test broker's log.index.interval.bytes
RETENTION_MS = 60000  # delete.retention.ms


def _record(i, now):
    key = None if i % 41 == 40 else b"k%d" % (i * 7 % KEYS)
    value = None if i % 23 == 22 else b"v%d-" % i + b"x" * (i * 13 % 90)
    return key, value, now - 5000 + i * 3


def _message_set(magic, codec, append_time, now):
    """The segment's bytes: RECORDS messages at offsets 0.., as a broker of the v0/v1 era stored
    them (a compressed wrapper at its last inner offset, with the largest inner timestamp, or
    under LogAppendTime the broker's time and attribute; inner offsets relative under magic 1)."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    out = []
    per = PER_WRAPPER if codec else 1
    for first in range(0, RECORDS, per):
        offsets = range(first, min(first + per, RECORDS))
        builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
        stamps = []
        for offset in offsets:
            key, value, ts = _record(offset, now)
            stamps.append(ts)
            inner = offset - first if (magic == 1 and codec) else offset
            assert builder.append(inner, ts, key, value) is not None
        data = bytearray(builder.build())
        # the wrapper (or the single message) at its absolute last offset; the time and the
        # timestamp type of a v1 wrapper set as the broker's validator set them
        struct.pack_into(">q", data, 0, offsets[-1])
        if magic == 1 and codec:
            data[17] |= 0x08 if append_time else 0
            struct.pack_into(">q", data, 18, now if append_time else max(stamps))
            struct.pack_into(">I", data, 12, zlib.crc32(data[16:]))
        out.append(bytes(data))
    return b"".join(out)


def _set_ratio(broker, ratio):
    broker.alter_topic_configs({topic: {
        "cleanup.policy": "compact", "min.cleanable.dirty.ratio": ratio,
        "delete.retention.ms": RETENTION_MS} for topic in LAYOUTS})


def _wait_cleaned(broker, timeout=180):
    deadline = time.monotonic() + timeout
    while True:
        written = offset_checkpoint(broker.logdir / "cleaner-offset-checkpoint")
        if all((t, 0) in written for t in LAYOUTS):
            time.sleep(2)  # the last partition's files are swapped in before its checkpoint
            return {t: written[(t, 0)] for t in LAYOUTS}
        assert time.monotonic() < deadline, ("the broker's cleaner did not run", written,
                                             broker.log_tail())
        time.sleep(0.3)


@pytest.fixture(scope="module")
def kafka_legacy_compacted(tmp_path_factory, kafka_classpath):
    """(the copy before the broker's pass, the broker's directory after it, its checkpoint
    entries)."""
    from kafkabroker import Broker

    work = tmp_path_factory.mktemp("kafka-compact-legacy")
    broker = Broker(work / "broker")
    try:
        broker.start()
        for topic in LAYOUTS:
            broker.create_topic(topic, 1, cleanup_policy="compact", min_cleanable_dirty_ratio=1.0,
                                delete_retention_ms=RETENTION_MS)
        broker.stop()
        now = kafkaraw.now_ms()
        for topic, (magic, codec, append_time) in LAYOUTS.items():
            part = broker.partition_dir(topic)
            for name in os.listdir(part):
                if name.startswith("0000"):
                    os.unlink(part / name)
            (part / ("%020d.log" % 0)).write_bytes(_message_set(magic, codec, append_time, now))
            (part / ("%020d.log" % RECORDS)).write_bytes(b"")
        # no clean-shutdown marker: the broker recovers the segments (and makes their indexes)
        (broker.logdir / ".kafka_cleanshutdown").unlink(missing_ok=True)
        broker.start()
        broker.wait_leaders(list(LAYOUTS))
        broker.stop()
        copy = work / "kafkalog"
        shutil.copytree(broker.logdir, copy, symlinks=True)
        broker.start()
        broker.wait_leaders(list(LAYOUTS))
        _set_ratio(broker, "0.01")
        entry = _wait_cleaned(broker)
        broker.stop()
        yield copy, broker.logdir, entry
    finally:
        broker.close()


def _pass_time(directory):
    """The time of the broker's pass over ``directory``: its delete horizons less
    delete.retention.ms (they are the same in one pass)."""
    from kafkalog_cli.log.segment import Segment
    times = {b.delete_horizon_ms - RETENTION_MS for name in os.listdir(directory)
             if name.endswith(".log") for b in Segment.at(str(directory / name)).batches()
             if b.delete_horizon_ms is not None}
    assert len(times) == 1, times
    return times.pop()


@pytest.mark.parametrize("topic", sorted(LAYOUTS))
def test_kafkalog_compact_of_legacy_message_sets_leaves_the_brokers_segments(
        kafka_legacy_compacted, topic):
    copy, cleaned_dir, entry = kafka_legacy_compacted
    part = copy / f"{topic}-0"
    before = segment_files(part)
    when = _pass_time(cleaned_dir / f"{topic}-0")
    proc = subprocess.run([*KAFKALOG, "compact", "--format", "json", "--now", str(when),
                           "--min-cleanable-dirty-ratio", "0.01", "--index-interval-bytes",
                           INDEX_INTERVAL, part], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=300)
    assert proc.returncode == 0, (proc.stdout.decode(), proc.stderr.decode())
    (result,) = [o for o in map(json.loads, proc.stdout.decode().splitlines())
                 if o["type"] == "partition"]
    assert result["endOffset"] == entry[topic]
    assert offset_checkpoint(copy / "cleaner-offset-checkpoint")[(topic, 0)] == entry[topic]
    ours, theirs = segment_files(part), segment_files(cleaned_dir / f"{topic}-0")
    assert sorted(ours) == sorted(theirs)
    different = [n for n in ours if ours[n] != theirs[n]]
    assert not different, different
    assert ours != before
    assert result["recordsRemoved"] > 0
    # every message set kept was written again as a v2 batch
    groups = result["groups"]
    assert sum(g["batchesRewritten"] for g in groups) == sum(g["batchesAfter"] for g in groups)
