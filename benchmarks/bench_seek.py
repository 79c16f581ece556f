#!/usr/bin/env python3
"""Benchmark seeking: `kafkalog dump --from-offset` into the middle of a large segment.

Reuses (or builds) the ~1 GiB v2 segment of bench_dump.py, writes its .index and .timeindex the
way a broker's recovery does (an entry each time more than 4096 bytes were written since the
last one), with plain struct code here, not kafkalog's, then times, best of --repeat:

  seek      kafkalog dump --deep-iteration --print-data-log --from-offset MID --to-offset MID
            time until its first record line arrives, and until it exits
  scan      the same dump with the index files moved away (kafkalog falls back to scanning)

    .venv/bin/python benchmarks/bench_seek.py [--size-mb 1024] [--quick]
"""

import argparse
import os
import struct
import subprocess
import sys
import time

from bench_dump import FIRST_TIMESTAMP, build_segment

INDEX_INTERVAL = 4096


def write_indexes(log_path):
    """Broker-style .index and .timeindex for ``log_path``; returns the record count."""
    base = int(os.path.basename(log_path).split(".")[0])
    index, tindex = bytearray(), bytearray()
    since, last_ts, max_ts, max_off, count = 0, -1, -1, base, 0
    with open(log_path, "rb") as f:
        pos = 0
        while True:
            header = f.read(61)
            if len(header) < 61:
                break
            base_offset, length = struct.unpack_from(">qi", header, 0)
            last_delta, = struct.unpack_from(">i", header, 23)
            batch_max_ts, = struct.unpack_from(">q", header, 35)
            last_offset = base_offset + last_delta
            count += last_delta + 1
            if batch_max_ts > max_ts:
                max_ts, max_off = batch_max_ts, last_offset
            if since > INDEX_INTERVAL:
                index += struct.pack(">ii", last_offset - base, pos)
                if max_ts > last_ts:
                    tindex += struct.pack(">qi", max_ts, max_off - base)
                    last_ts = max_ts
                since = 0
            since += 12 + length
            pos += 12 + length
            f.seek(pos)
    if max_ts > last_ts:
        tindex += struct.pack(">qi", max_ts, max_off - base)
    stem = log_path[:-len(".log")]
    for suffix, data in ((".index", index), (".timeindex", tindex)):
        with open(stem + suffix, "wb") as out:
            out.write(data)
    return count


def time_to_first_record(args):
    """(seconds to the first `| offset:` line, seconds to exit, that line)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "kafkalog_cli"] + args, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    first, line = None, None
    for raw in proc.stdout:
        if raw.startswith(b"| offset:"):
            first, line = time.perf_counter() - t0, raw[:60].decode()
            break
    proc.stdout.read()
    proc.wait()
    return first, time.perf_counter() - t0, line


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", default=os.path.join(here, "data"))
    parser.add_argument("--size-mb", type=int, default=1024,
                        help="segment size, MiB (default 1024)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a 32 MiB segment, for a smoke test")
    args = parser.parse_args()

    log_path = build_segment(args.workdir, "1k", 32 if args.quick else args.size_mb, "none")
    records = write_indexes(log_path)
    mid = records // 2
    dump = ["dump", "--deep-iteration", "--print-data-log", "--from-offset", str(mid),
            "--to-offset", str(mid), log_path]
    print("%s: %.1f MB, %d records; seeking offset %d" % (log_path, os.path.getsize(log_path) / 1e6,
                                                          records, mid))
    runs = [time_to_first_record(dump) for _ in range(args.repeat)]
    first = min(r[0] for r in runs)
    print("  seek: first record after %.3f s (exit after %.3f s): %s"
          % (first, min(r[1] for r in runs), runs[0][2].strip()))
    ts = FIRST_TIMESTAMP + mid  # bench_dump gives record N the timestamp FIRST_TIMESTAMP + N
    by_time = dump[:3] + ["--from-timestamp", str(ts), "--to-timestamp", str(ts), log_path]
    truns = [time_to_first_record(by_time) for _ in range(args.repeat)]
    print("  seek by timestamp %d: first record after %.3f s: %s"
          % (ts, min(r[0] for r in truns), truns[0][2].strip()))
    stem = log_path[:-len(".log")]
    for suffix in (".index", ".timeindex"):
        os.rename(stem + suffix, stem + suffix + ".away")
    try:
        scan = time_to_first_record(dump)
    finally:
        for suffix in (".index", ".timeindex"):
            os.rename(stem + suffix + ".away", stem + suffix)
    print("  scan without indexes: first record after %.3f s: %s" % (scan[0], scan[2].strip()))
    worst = max(first, min(r[0] for r in truns))
    print("  seek %s the 0.2 s target" % ("meets" if worst < 0.2 else "MISSES"))


if __name__ == "__main__":
    main()
