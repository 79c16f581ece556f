#!/usr/bin/env python3
"""Benchmark `kafkalog recover` on a large segment: validation of every batch (CRC, records
decoded), a cut, and the index rebuild.

Copies the ~1 GiB v2 segment of bench_dump.py into a fresh partition directory with broker-style
indexes (bench_seek.write_indexes), appends a 64 KiB garbage tail, and times
`kafkalog recover` on it (a subprocess, start-up included), best of --repeat; then a second
run on the recovered partition (nothing to do: validation and index checks only).

    .venv/bin/python benchmarks/bench_recover.py [--size-mb 1024] [--quick]
"""

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

from bench_dump import build_segment
from bench_seek import write_indexes


def run(args):
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli"] + args, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0, p.returncode


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", default=os.path.join(here, "data"))
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a 32 MiB segment, for a smoke test")
    args = parser.parse_args()
    source = build_segment(args.workdir, "1k", 32 if args.quick else args.size_mb, "none")
    size = os.path.getsize(source)
    best = float("inf")
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        part = os.path.join(tmp, "bench-0")
        for _ in range(args.repeat):
            shutil.rmtree(part, ignore_errors=True)
            os.makedirs(part)
            log = os.path.join(part, os.path.basename(source))
            shutil.copyfile(source, log)
            write_indexes(log)
            with open(log, "ab") as f:
                f.write(random.Random(1).randbytes(64 * 1024))
            secs, code = run(["recover", part])
            if code != 1:
                sys.exit("recover exited %d, expected 1 (repaired)" % code)
            best = min(best, secs)
        again, code = run(["recover", part])
        if code != 0:
            sys.exit("second recover exited %d, expected 0 (nothing to do)" % code)
    print("%s: %.1f MB" % (source, size / 1e6))
    print("  recover (cut + index rebuild): %.3f s, %.0f MB/s" % (best, size / best / 1e6))
    print("  recover again (nothing to do): %.3f s, %.0f MB/s" % (again, size / again / 1e6))
    print("  %s the 500 MB/s target" % ("meets" if size / best / 1e6 >= 500 else "MISSES"))


if __name__ == "__main__":
    main()
