#!/usr/bin/env python3
"""Benchmark `kafkalog compact`: one cleaning pass over a large compacted partition.

Builds (cached under --workdir) a partition of one sealed segment of about --size-mb MiB of v2
batches (100-byte values, 100 records a batch, uncompressed or --codec) whose keys are drawn
from a key space of --live percent of the records (default 10: about a tenth of the records
survive the pass), and a small active segment after it, with kafka-python's batch builder.
Each run copies the partition afresh (synced to disk: the copy is not compact's work) and times
`kafkalog compact --cleanup-policy compact` on it in a process of its own (start-up and its
fsyncs included), best of --repeat: the input MB/s (the sealed segment's size over the time),
and the child's peak RSS (wait4), against the offset map's bound: the broker's cleaner holds
its map in log.cleaner.dedupe.buffer.size (128 MiB by default) whatever the partition.
Units: MB = 10^6 bytes; --size-mb is MiB.

--broker also times Apache Kafka's own log cleaner (tests/kafkajvm.KAFKA, the broker of the
Kafka tests: tests/kafkabroker.py, KRaft on 127.0.0.1, its JVM options BROKER_JVM_OPTIONS) on
the same partition: a broker creates the topic (cleanup.policy=compact,
min.cleanable.dirty.ratio=0.01, segment.bytes and index.interval.bytes as kafkalog's defaults,
1073741824 and 4096) and stops cleanly; the built .log files take the place of the partition's
files (the broker rebuilds the missing indexes as it loads them); it starts again, its
LogCleaner cleans the partition once (the cleaner's own settings are the broker's, as its
KafkaConfig line reports them: Kafka's defaults, one thread and a 128 MiB offset map in the
test broker's -Xmx512m heap, unless the test broker overrides one), and it stops once
cleaner-offset-checkpoint holds the partition's entry (the broker JVM's peak RSS is given).
The broker's MB/s is the sealed segment's size over the time its cleaner logs for the pass
("... MB of log processed in N seconds", 0.1 s steps; the span between its "Beginning
cleaning" line and that line is given too, to the millisecond): building the offset map,
cleaning, flushing and swapping in, without JVM start-up and log loading (the wall time from
the broker's start to the checkpoint entry is given apart). The data has no tombstones and no
transactions, so the broker must leave what the last `kafkalog compact` run left, byte for
byte: the .log files and the checkpoint entry (exit 1 if either differs), and the cleaned
segment's .index and .timeindex are compared.

    .venv/bin/python benchmarks/bench_compact.py [--size-mb 1024] [--live 10] [--codec none]
        [--quick] [--repeat N] [--workdir DIR] [--broker]
"""

import argparse
import datetime
import filecmp
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

from kafka.record.default_records import DefaultRecordBatchBuilder

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
T0 = 1_700_000_000_000
ALPHABET = (bytes(range(97, 123)) * 10)[:256]


def build_partition(workdir, size_mib, live_percent, codec, seed=7):
    """The partition directory ``compacted-0`` of about size_mib MiB, built unless cached."""
    root = os.path.join(workdir, "compact-%dMiB-%dpct-%s-seed%d" % (size_mib, live_percent,
                                                                     codec, seed))
    part = os.path.join(root, "compacted-0")
    if os.path.exists(os.path.join(part, "done")):
        return root, part
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(part)
    rng = random.Random(seed)
    pool = rng.randbytes(MiB + 100).translate(ALPHABET)
    records = size_mib * MiB // 130
    keys = max(1, records * live_percent // 100)
    target, offset, written = size_mib * MiB, 0, 0
    t0 = time.perf_counter()
    with open(os.path.join(part, "%020d.log" % 0), "wb") as out:
        while written < target:
            builder = DefaultRecordBatchBuilder(2, CODECS[codec], False, -1, -1, -1, 1 << 30)
            for delta in range(100):
                start = rng.randrange(MiB)
                key = b"key-%010d" % rng.randrange(keys)
                builder.append(delta, T0 + offset + delta, key, pool[start:start + 100], [])
            batch = builder.build()
            batch[0:8] = offset.to_bytes(8, "big")
            out.write(batch)
            written += len(batch)
            offset += 100
    with open(os.path.join(part, "%020d.log" % offset), "wb") as out:
        builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
        builder.append(0, T0 + offset, b"key-last", b"active", [])
        batch = builder.build()
        batch[0:8] = offset.to_bytes(8, "big")
        out.write(batch)
    open(os.path.join(part, "done"), "w").close()
    print("built %s: %.1f MB, %d records, %d keys in %.1f s"
          % (part, written / 1e6, offset, keys, time.perf_counter() - t0), flush=True)
    return root, part


def run(part):
    """(seconds, peak RSS in bytes, exit code) of one `kafkalog compact` of ``part``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "kafkalog_cli", "compact", "--cleanup-policy",
                             "compact", "--now", str(T0 + 3_600_000), part],
                            stdout=subprocess.DEVNULL, cwd="/")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t0, usage.ru_maxrss * 1024, proc.returncode


TOPIC = "compacted"
# The topic's settings the broker gets: kafkalog compact's defaults (segment.bytes, and
# index.interval.bytes over the test broker's log.index.interval.bytes=512) for equal files.
TOPIC_CONFIG = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                "segment.bytes": "1073741824", "index.interval.bytes": "4096"}
# The broker's cleaner settings, as its KafkaConfig line at start-up reports them.
CLEANER_SETTINGS = ("log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
                    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size",
                    "log.cleaner.io.max.bytes.per.second")


def _checkpoint_entry(path):
    """The partition's entry in cleaner-offset-checkpoint ``path``, None if it has none."""
    try:
        lines = open(path).read().splitlines()
    except FileNotFoundError:
        return None
    for line in lines[2:]:
        topic, partition, offset = line.rsplit(" ", 2)
        if (topic, partition) == (TOPIC, "0"):
            return int(offset)
    return None


def _log_time(stamp):
    return datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def parse_broker_log(text):
    """From the broker's output: its cleaner settings (KafkaConfig values), and the cleaner's
    stats of the pass over the partition: the logged lines and figures."""
    settings = {}
    for name in CLEANER_SETTINGS:
        found = re.search(r"^\s*%s = (\S+)$" % re.escape(name), text, re.M)
        settings[name] = found.group(1) if found else "?"
    stats = re.search(r"^\[([^\]]+)\] INFO [^\n]*\n\tLog cleaner thread (\d+) cleaned log %s-0 "
                      r"\(dirty section = \[(\d+), (\d+)\]\)\n(.*?)(?=^\[)"
                      % re.escape(TOPIC), text, re.M | re.S)
    if stats is None:
        return settings, None
    body = stats.group(5)

    def number(pattern):
        found = re.search(pattern, body)
        return float(found.group(1).replace(",", "")) if found else None

    begin = re.search(r"^\[([^\]]+)\] INFO .*Beginning cleaning of log %s-0\b"
                      % re.escape(TOPIC), text, re.M)
    processed = re.search(r"[\d,.]+ MB of log processed in [\d,.]+ seconds \([^)]*\)\.", body)
    return settings, {
        "thread": int(stats.group(2)), "dirty": (int(stats.group(3)), int(stats.group(4))),
        "line": processed.group(0) if processed else "?",
        "seconds": number(r"MB of log processed in ([\d,.]+) seconds"),
        "index_seconds": number(r"Indexed [\d,.]+ MB in ([\d,.]+) seconds"),
        "clean_seconds": number(r"Cleaned [\d,.]+ MB in ([\d,.]+) seconds"),
        "utilization": number(r"Buffer utilization: ([\d,.]+)%"),
        "span": (_log_time(stats.group(1)) - _log_time(begin.group(1))) if begin else None,
    }


def broker_pass(workdir, source, timeout):
    """Kafka's LogCleaner over a copy of the partition ``source``: (its partition directory,
    the wall seconds from its start to the checkpoint entry, the entry, the broker's output of
    that start, the broker's version, the broker JVM's peak RSS or 0). The broker is stopped
    whatever happens."""
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    import kafkabroker
    import kafkajvm

    broker = kafkabroker.Broker(os.path.join(workdir, "broker"))
    try:
        broker.start(timeout=300)
        broker.create_topic(TOPIC, 1, **{k.replace(".", "_"): v for k, v in TOPIC_CONFIG.items()})
        broker.stop()
        part = broker.partition_dir(TOPIC)
        for name in os.listdir(part):
            if name.endswith((".log", ".index", ".timeindex", ".txnindex", ".snapshot")):
                os.unlink(part / name)
        for name in os.listdir(source):
            if name.endswith(".log"):
                shutil.copyfile(os.path.join(source, name), part / name)
        os.sync()
        checkpoint = broker.logdir / "cleaner-offset-checkpoint"
        t0 = time.perf_counter()
        broker.start(timeout=timeout)
        while True:
            entry = _checkpoint_entry(checkpoint)
            if entry:
                wall = time.perf_counter() - t0
                break
            text = broker.log_text()
            if not broker.running or "as uncleanable" in text:
                sys.exit("the broker's cleaner failed:\n" + broker.log_tail(60))
            if time.perf_counter() - t0 > timeout:
                sys.exit("the broker's cleaner did not clean %s-0 within %d s:\n%s"
                         % (TOPIC, timeout, broker.log_tail(60)))
            time.sleep(0.2)
        peak = 0
        try:
            with open("/proc/%d/status" % broker.proc.pid) as status:
                peak = next((int(line.split()[1]) * 1024 for line in status
                             if line.startswith("VmHWM:")), 0)
        except OSError:
            pass
        broker.stop()
        return part, wall, entry, broker.log_text(), kafkajvm.KAFKA, peak
    finally:
        broker.close()


def compare(ours, theirs):
    """[(file name, equal or None when only one side has it)] of the segment files kafkalog
    left in ``ours``: every .log of either side, and the indexes of ours."""
    names = {n for n in os.listdir(ours) if n.endswith((".log", ".index", ".timeindex",
                                                          ".txnindex"))}
    names |= {n for n in os.listdir(theirs) if n.endswith(".log")}
    out = []
    for name in sorted(names):
        a, b = os.path.join(ours, name), os.path.join(theirs, name)
        both = os.path.exists(a) and os.path.exists(b)
        out.append((name, filecmp.cmp(a, b, shallow=False) if both else None))
    return out


def report_broker(args, tmp, source, sealed, ours, best):
    """Run the broker's pass, print its figures beside kafkalog's; False if the .log files or
    the checkpoint entries differ."""
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    import kafkabroker
    import kafkajvm

    try:
        kafkajvm.java()
        kafkajvm.classpath()
    except kafkajvm.KafkaUnavailable as e:
        sys.exit("--broker: %s" % e)
    timeout = 300 + sealed // (2 * 10**6)  # generous: 2 MB/s, log loading included
    part, wall, entry, text, version, peak = broker_pass(tmp, source, timeout)
    settings, stats = parse_broker_log(text)
    heap = [o for o in kafkabroker.BROKER_JVM_OPTIONS if o.startswith("-Xm")]
    print("broker: Kafka %s LogCleaner, %s; JVM %s; topic %s"
          % (version, ", ".join("%s=%s" % kv for kv in settings.items()), " ".join(heap),
             ", ".join("%s=%s" % kv for kv in TOPIC_CONFIG.items() if kv[0] != "cleanup.policy")))
    if stats is None:
        sys.exit("the broker's log has no cleaner stats for %s-0:\n%s"
                 % (TOPIC, "\n".join(text.splitlines()[-40:])))
    seconds = stats["seconds"] or stats["span"]
    span = "%.3f s" % stats["span"] if stats["span"] is not None else "?"
    broker_rate = sealed / 1e6 / seconds
    print("broker logged (cleaner thread %d, dirty section [%d, %d]; its MB are MiB): %s "
          "Indexed in %.1f s, cleaned in %.1f s, buffer utilization %.1f%%"
          % (stats["thread"], *stats["dirty"], stats["line"], stats["index_seconds"] or 0,
             stats["clean_seconds"] or 0, stats["utilization"] or 0))
    print("broker: %.0f MB in %.1f s as logged (%s from its 'Beginning cleaning' line to its "
          "stats), %.1f MB/s; start to checkpoint entry %.1f s (JVM start, log loading and "
          "index rebuild included); the broker JVM's peak RSS %.0f MB"
          % (sealed / 1e6, seconds, span, broker_rate, wall, peak / 1e6))
    ours_rate = sealed / 1e6 / best
    print("kafkalog %.1f MB/s, broker %.1f MB/s: kafkalog/broker %.2f"
          % (ours_rate, broker_rate, ours_rate / broker_rate))
    files = compare(ours, part)
    ours_entry = _checkpoint_entry(os.path.join(os.path.dirname(ours),
                                                "cleaner-offset-checkpoint"))
    print("byte-equal to the broker's: %s; checkpoint entry kafkalog %s, broker %s"
          % ("; ".join("%s %s" % (n, {True: "identical", False: "DIFFERS",
                                       None: "only kafkalog's" if os.path.exists(
                                           os.path.join(ours, n)) else "only the broker's"}[eq])
                       for n, eq in files), ours_entry, entry))
    logs_equal = all(eq for n, eq in files if n.endswith(".log"))
    return logs_equal and ours_entry == entry


def main():
    here = HERE
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", default=os.path.join(here, "data"))
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--live", type=int, default=10, help="distinct keys, percent of records")
    parser.add_argument("--codec", choices=sorted(CODECS), default="none")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="a 16 MiB partition, a smoke test")
    parser.add_argument("--broker", action="store_true",
                        help="also time Kafka's LogCleaner on the same data (Java, Maven)")
    args = parser.parse_args()
    size_mib = 16 if args.quick else args.size_mb
    os.makedirs(args.workdir, exist_ok=True)
    root, source = build_partition(args.workdir, size_mib, args.live, args.codec)
    sealed = os.path.getsize(os.path.join(source, "%020d.log" % 0))
    best, rss = float("inf"), 0
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        for _ in range(args.repeat):
            part = os.path.join(tmp, "logs", "compacted-0")
            shutil.rmtree(os.path.join(tmp, "logs"), ignore_errors=True)
            shutil.copytree(source, part)
            os.unlink(os.path.join(part, "done"))
            os.sync()
            seconds, peak, code = run(part)
            if code != 0:
                sys.exit("kafkalog compact exited with %d" % code)
            best, rss = min(best, seconds), max(rss, peak)
            kept = sum(os.path.getsize(os.path.join(part, n)) for n in os.listdir(part)
                       if n.endswith(".log"))
        print("compact %.0f MB (%s, %d%% live keys): best %.2f s, %.1f MB/s; peak RSS %.0f MB "
              "(the broker's offset map: 134 MB); %.0f MB left"
              % (sealed / 1e6, args.codec, args.live, best, sealed / 1e6 / best, rss / 1e6,
                 kept / 1e6), flush=True)
        if args.broker and not report_broker(args, tmp, source, sealed, part, best):
            sys.exit("the broker's cleaned partition differs from kafkalog's")


if __name__ == "__main__":
    main()
