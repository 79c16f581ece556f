#!/usr/bin/env python3
"""Benchmark `kafkalog recover` on a large segment: validation of every batch (CRC, records
decoded), a cut, and the index rebuild.

Copies the ~1 GiB v2 segment of bench_dump.py into a fresh partition directory with broker-style
indexes (bench_seek.write_indexes), appends a 64 KiB garbage tail, and times
`kafkalog recover` on it (a subprocess, start-up and its fsyncs included; the copy is synced
to disk first), and a second run on the recovered partition (nothing to do: validation and
index checks only), each best of --repeat. With --baseline PYTHON, the same runs with that
interpreter too (e.g. the venv of a worktree of an older commit), interleaved; with
--compare-path DIR, the same runs of another checkout (e.g. `git worktree add /tmp/base
COMMIT`, its C modules built in place) by this interpreter with PYTHONPATH=DIR, interleaved.

    .venv/bin/python benchmarks/bench_recover.py [--size-mb 1024] [--quick] [--baseline PYTHON]
        [--compare-path DIR]
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

TARGET = 1500  # MB/s the issue asks for


def run(args, python=sys.executable, cwd=None, env=None):
    # cwd: not this checkout, whose kafkalog_cli `-m` would import before the interpreter's own
    t0 = time.perf_counter()
    p = subprocess.run([python, "-m", "kafkalog_cli"] + args, stdout=subprocess.DEVNULL,
                       cwd=cwd, env=env)
    return time.perf_counter() - t0, p.returncode


def fresh_partition(source, part):
    """``part`` made anew: a copy of ``source`` with broker-style indexes and a garbage tail,
    flushed to disk (the copy's own writeback is not recover's work)."""
    shutil.rmtree(part, ignore_errors=True)
    os.makedirs(part)
    log = os.path.join(part, os.path.basename(source))
    shutil.copyfile(source, log)
    write_indexes(log)
    with open(log, "ab") as f:
        f.write(random.Random(1).randbytes(64 * 1024))
    os.sync()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", default=os.path.join(here, "data"))
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a 32 MiB segment, for a smoke test")
    parser.add_argument("--baseline", metavar="PYTHON",
                        help="also time this interpreter's kafkalog (printed as 'before'), "
                        "interleaved with this one's")
    parser.add_argument("--compare-path", metavar="DIR", action="append", default=[],
                        help="also time the kafkalog of this checkout (PYTHONPATH=DIR), "
                        "interleaved with this one's")
    args = parser.parse_args()
    source = build_segment(args.workdir, "1k", 32 if args.quick else args.size_mb, "none")
    size = os.path.getsize(source)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    pythons = [("after  " if args.baseline or args.compare_path else "", sys.executable, env)]
    if args.baseline:
        pythons.insert(0, ("before ", args.baseline, env))
    for path in args.compare_path:
        pythons.insert(0, ("%s " % os.path.basename(os.path.abspath(path)), sys.executable,
                           dict(env, PYTHONPATH=os.path.abspath(path))))
    best = {label: float("inf") for label, _, _ in pythons}
    again = dict(best)
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        part = os.path.join(tmp, "bench-0")
        # each round runs every checkout once: a repair, then a second recover of what it left
        for _ in range(args.repeat):
            for label, python, child_env in pythons:
                fresh_partition(source, part)
                secs, code = run(["recover", part], python, tmp, child_env)
                if code != 1:
                    sys.exit("recover exited %d, expected 1 (repaired)" % code)
                best[label] = min(best[label], secs)
                os.sync()
                secs, code = run(["recover", part], python, tmp, child_env)
                if code != 0:
                    sys.exit("second recover exited %d, expected 0 (nothing to do)" % code)
                again[label] = min(again[label], secs)
    print("%s: %.1f MB" % (source, size / 1e6))
    for label, _, _ in pythons:
        print("%s recover (cut + index rebuild): %.3f s, %.0f MB/s"
              % (label, best[label], size / best[label] / 1e6))
        print("%s recover again (nothing to do): %.3f s, %.0f MB/s"
              % (label, again[label], size / again[label] / 1e6))
    rate = size / best[pythons[-1][0]] / 1e6
    print("  %s the %d MB/s target" % ("meets" if rate >= TARGET else "MISSES", TARGET))


if __name__ == "__main__":
    main()
