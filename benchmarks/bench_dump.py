#!/usr/bin/env python3
"""Benchmark `kafkalog dump` against kafka-python's v2 record parser.

Builds v2 segment files with kafka-python's batch builder (cached under --workdir), then
times, best of --repeat:

  deep dump    kafkalog dump --deep-iteration --print-data-log FILE > /dev/null   (subprocess)
  batch dump   kafkalog dump FILE > /dev/null                                     (subprocess)
  kp full      kafka-python: MemoryRecords over the file, every record's offset,
               timestamp, key, value and headers                                  (in-process)
  kp crc       kafka-python: every batch, batch.validate_crc()                    (in-process)

Subprocess times include interpreter start-up; the "startup" line (a dump of an empty
segment) shows how much that is. --rss instead dumps a ~1 GiB segment once each way and
checks each child's own peak RSS against 150 MB. Units: MB = 10^6 bytes, GB = 10^9 bytes;
--size-mb options are MiB.

    .venv/bin/python benchmarks/bench_dump.py [--quick] [--rss] [--repeat N] [--codec C]
"""

import argparse
import os
import random
import struct
import sys
import time
from importlib.metadata import version

from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# name: (value bytes, key bytes, batch limit in bytes, batch limit in records)
LAYOUTS = {"1k": (1024, 16, 16 * 1024, None), "small": (100, 0, None, 100)}
ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"  # 64 symbols
FIRST_TIMESTAMP = 1_700_000_000_000
RSS_LIMIT = 150e6
MiB = 1 << 20


def build_segment(workdir, layout, size_mib, codec, seed=42):
    """Return the path of a v2 segment of about size_mib MiB, building it unless cached."""
    directory = os.path.join(workdir, "%s-%dMiB-%s-seed%d" % (layout, size_mib, codec, seed))
    path = os.path.join(directory, "00000000000000000000.log")
    if os.path.exists(path):
        return path
    os.makedirs(directory, exist_ok=True)
    value_size, key_size, batch_bytes, batch_records = LAYOUTS[layout]
    rng = random.Random(seed)
    # Values are random slices of a pool of random printable letters: cheap, yet varied.
    pool = rng.randbytes(MiB + value_size).translate(ALPHABET * 4)
    target, offset, written = size_mib * MiB, 0, 0
    t0 = time.perf_counter()
    with open(path + ".tmp", "wb") as out:
        pending = None
        while True:
            builder = DefaultRecordBatchBuilder(2, CODECS[codec], False, -1, -1, -1,
                                                batch_bytes or 1 << 30)
            base, delta = offset, 0
            while batch_records is None or delta < batch_records:
                if pending is None:
                    start = rng.randrange(MiB)
                    key = b"key-%012d" % (base + delta) if key_size else None
                    pending = (key, pool[start:start + value_size])
                if builder.append(delta, FIRST_TIMESTAMP + base + delta, pending[0],
                                  pending[1], []) is None:
                    break  # batch full; this record opens the next one
                pending, delta = None, delta + 1
            batch = builder.build()
            if written + len(batch) > target:
                break
            struct.pack_into(">q", batch, 0, base)  # baseOffset: outside the CRC
            out.write(batch)
            written, offset = written + len(batch), base + delta
    os.replace(path + ".tmp", path)
    print("built %s: %.1f MB, %d records in %.1f s"
          % (path, written / 1e6, offset, time.perf_counter() - t0), flush=True)
    return path


def run_child(args, argv=None):
    """Run `python -m kafkalog_cli ARGS` > /dev/null; return (wall s, child's peak RSS bytes)."""
    argv = argv or [sys.executable, "-m", "kafkalog_cli"] + args
    t0 = time.perf_counter()
    pid = os.posix_spawn(sys.executable, argv, os.environ,
                         file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
    _, status, usage = os.wait4(pid, 0)
    elapsed = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("%s exited with %d" % (" ".join(argv), os.waitstatus_to_exitcode(status)))
    return elapsed, usage.ru_maxrss * 1024  # ru_maxrss is in KiB on Linux


def kp_full_parse(path):
    """kafka-python: parse every record and touch its fields; return the record count."""
    with open(path, "rb") as f:
        data = f.read()
    count = 0
    for batch in MemoryRecords(data):
        for record in batch:
            record.offset, record.timestamp, record.key, record.value, record.headers
            count += 1
    return count


def kp_batch_crc(path):
    """kafka-python: iterate the batches, checking each one's CRC; return the batch count."""
    with open(path, "rb") as f:
        data = f.read()
    count = 0
    for batch in MemoryRecords(data):
        if not batch.validate_crc():
            sys.exit("%s: bad CRC in batch at offset %d" % (path, batch.base_offset))
        count += 1
    return count


def best_of(repeat, fn, *args):
    """Best wall time of `repeat` calls, and the last call's result."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best, result


def bench_file(path, repeat, startup):
    size = os.path.getsize(path)
    times = {}
    times["kp full parse"], records = best_of(repeat, kp_full_parse, path)
    times["kp batch+crc"], batches = best_of(repeat, kp_batch_crc, path)
    deep = ["dump", "--deep-iteration", "--print-data-log", path]
    times["our deep dump"] = min(run_child(deep)[0] for _ in range(repeat))
    times["our batch dump"] = min(run_child(["dump", path])[0] for _ in range(repeat))
    # kafka-python in a process of its own too, so that both sides pay interpreter start-up.
    for name, job in (("kp full (proc)", "full"), ("kp crc (proc)", "crc")):
        argv = [sys.executable, os.path.abspath(__file__), "--kp-child", job, path]
        times[name] = min(run_child(None, argv)[0] for _ in range(repeat))

    print("\n%s: %.1f MB, %d records, %d batches (best of %d)"
          % (path, size / 1e6, records, batches, repeat))
    print("  %-15s %9s %13s %10s" % ("", "seconds", "records/s", "MB/s"))
    for name in ("our deep dump", "kp full parse", "kp full (proc)", "our batch dump",
                 "kp batch+crc", "kp crc (proc)"):
        secs = times[name]
        print("  %-15s %9.3f %13s %10.1f" % (name, secs, format(round(records / secs), ","),
                                              size / secs / 1e6))
    print("  deep dump records/s / kp full parse records/s = %.2fx"
          % (times["kp full parse"] / times["our deep dump"]))
    print("  batch dump MB/s / kp batch+crc MB/s          = %.2fx"
          % (times["kp batch+crc"] / times["our batch dump"]))
    print("  the same, kafka-python in its own process: deep %.2fx, batch %.2fx"
          % (times["kp full (proc)"] / times["our deep dump"],
             times["kp crc (proc)"] / times["our batch dump"]))
    print("  batch dump throughput                        = %.2f GB/s"
          % (size / times["our batch dump"] / 1e9))
    # kafka-python is timed in-process, so it pays no interpreter start-up; these compare the
    # engines alone, our subprocess times less the start-up measured on an empty segment.
    deep, batch = (max(times[k] - startup, 1e-9) for k in ("our deep dump", "our batch dump"))
    print("  without our start-up (%.3f s): deep %.2fx, batch %.2fx, batch %.2f GB/s"
          % (startup, times["kp full parse"] / deep, times["kp batch+crc"] / batch,
             size / batch / 1e9))


def bench_rss(path):
    print("\n%s: %.1f MB; peak RSS of each child (limit %.0f MB)"
          % (path, os.path.getsize(path) / 1e6, RSS_LIMIT / 1e6))
    ok = True
    for name, args in (("our deep dump", ["dump", "--deep-iteration", "--print-data-log", path]),
                       ("our batch dump", ["dump", path])):
        secs, rss = run_child(args)
        ok &= rss <= RSS_LIMIT
        print("  %-15s %8.1f s  peak RSS %7.1f MB  %s"
              % (name, secs, rss / 1e6, "PASS" if rss <= RSS_LIMIT else "FAIL"))
    return ok


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", default=os.path.join(here, "data"),
                        help="where segment files are built and cached (default: benchmarks/data)")
    parser.add_argument("--size-mb", type=int,
                        help="size of the 1 KiB-value file, MiB (default 256)")
    parser.add_argument("--small-size-mb", type=int,
                        help="size of the 100-byte-value file, MiB (default 64)")
    parser.add_argument("--rss-size-mb", type=int,
                        help="size of the --rss file, MiB (default 1024)")
    parser.add_argument("--codec", choices=CODECS, default="none", help="batch compression")
    parser.add_argument("--repeat", type=int, default=3, help="best of N (default 3)")
    parser.add_argument("--quick", action="store_true", help="small files, for a smoke test")
    parser.add_argument("--rss", action="store_true",
                        help="only check the dumps' peak RSS on a ~1 GiB segment")
    parser.add_argument("--kp-child", nargs=2, metavar=("full|crc", "FILE"),
                        help=argparse.SUPPRESS)  # one kafka-python pass, timed by the parent
    args = parser.parse_args()
    if args.kp_child:
        job, path = args.kp_child
        (kp_full_parse if job == "full" else kp_batch_crc)(path)
        return

    print("Python %s, kafka-python %s, codec %s"
          % (sys.version.split()[0], version("kafka-python"), args.codec))
    if args.rss:
        size = args.rss_size_mb or (32 if args.quick else 1024)
        sys.exit(0 if bench_rss(build_segment(args.workdir, "1k", size, args.codec)) else 1)

    files = [build_segment(args.workdir, "1k", args.size_mb or (16 if args.quick else 256),
                           args.codec),
             build_segment(args.workdir, "small", args.small_size_mb or (8 if args.quick else 64),
                           args.codec)]
    empty = build_segment(args.workdir, "1k", 0, args.codec)
    startup = min(run_child(["dump", empty])[0] for _ in range(args.repeat))
    print("startup: %.3f s (best-of-%d dump of an empty segment, included in subprocess times)"
          % (startup, args.repeat))
    for path in files:
        bench_file(path, args.repeat, startup)


if __name__ == "__main__":
    main()
