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

    .venv/bin/python benchmarks/bench_compact.py [--size-mb 1024] [--live 10] [--codec none]
        [--quick] [--repeat N]
"""

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

from kafka.record.default_records import DefaultRecordBatchBuilder

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


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", default=os.path.join(here, "data"))
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--live", type=int, default=10, help="distinct keys, percent of records")
    parser.add_argument("--codec", choices=sorted(CODECS), default="none")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="a 16 MiB partition, a smoke test")
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
             kept / 1e6))


if __name__ == "__main__":
    main()
