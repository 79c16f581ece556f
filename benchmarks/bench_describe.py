#!/usr/bin/env python3
"""Benchmark `kafkalog describe` on a ~1 GiB segment.

Builds (or reuses, cached under --workdir) the v2 segment bench_dump.py builds for its --rss
run (1 KiB values in 16 KiB batches, kafka-python's batch builder), then times, best of
--repeat:

  describe      kafkalog describe FILE > /dev/null             (subprocess, start-up included)
  describe json kafkalog describe --format json FILE > /dev/null
  describe crc  kafkalog describe --crc FILE > /dev/null       (every byte read, CRCs checked)
  library       kafkalog_cli.log.describe.describe(FILE)       (in-process)
  startup       kafkalog describe of an empty segment          (what start-up costs)

The page cache is warm after the first run: the figures are CPU time, not disk time.
--compare-path DIR also times the commands of another checkout (e.g. `git worktree add
/tmp/base COMMIT`, its C modules built in place) by this interpreter with PYTHONPATH=DIR, the
runs interleaved with this checkout's, each printed as a ratio to this one's.
Units: MB = 10^6 bytes, GB = 10^9 bytes; --size-mb is MiB.

    .venv/bin/python benchmarks/bench_describe.py [--size-mb N] [--repeat N] [--codec C]
        [--compare-path DIR]
"""

import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_dump import CODECS, best_of, build_segment, run_child  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", default=os.path.join(HERE, "data"),
                        help="where segment files are built and cached (default: benchmarks/data)")
    parser.add_argument("--size-mb", type=int, default=1024,
                        help="size of the segment, MiB (default 1024)")
    parser.add_argument("--codec", choices=CODECS, default="none", help="batch compression")
    parser.add_argument("--repeat", type=int, default=3, help="best of N (default 3)")
    parser.add_argument("--compare-path", metavar="DIR", action="append", default=[],
                        help="also time the kafkalog of this checkout (PYTHONPATH=DIR)")
    args = parser.parse_args()

    from kafkalog_cli.log.describe import describe

    path = build_segment(args.workdir, "1k", args.size_mb, args.codec)
    empty = build_segment(args.workdir, "1k", 0, args.codec)
    size = os.path.getsize(path)
    jobs = (("describe", ["describe", path]), ("describe json", ["describe", "--format", "json",
                                                                   path]),
            ("describe crc", ["describe", "--crc", path]), ("startup", ["describe", empty]))
    # the children run in an empty directory: `python -m` imports a checkout in the working
    # directory before the one meant
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    checkouts = [("", env)] + [("@" + os.path.basename(os.path.abspath(p)),
                                dict(env, PYTHONPATH=os.path.abspath(p)))
                               for p in args.compare_path]
    best = {(name, label): float("inf") for name, _ in jobs for label, _ in checkouts}
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as empty_dir:
        os.chdir(empty_dir)
        for _, child_env in checkouts:
            run_child(["describe", empty], env=child_env)  # byte code compiled, not timed
        for _ in range(args.repeat):
            for name, job in jobs:
                for label, child_env in checkouts:
                    best[name, label] = min(best[name, label], run_child(job, env=child_env)[0])
        os.chdir(here)
    text, json_, crc, startup = (best[name, ""] for name, _ in jobs)
    library, d = best_of(args.repeat, describe, path)
    (seg,) = d.segments
    print("%s: %.1f MB, %d records, %d batches, codec %s (best of %d)"
          % (path, size / 1e6, seg.records, seg.batches, args.codec, args.repeat))
    for name, secs in (("describe", text), ("describe json", json_), ("describe crc", crc),
                       ("library", library), ("startup", startup)):
        print("  %-14s %7.3f s  %6.2f GB/s" % (name, secs, size / secs / 1e9))
        for label, _ in checkouts[1:] if name != "library" else ():
            theirs = best[name, label]
            print("  %-14s %7.3f s  %6.2f GB/s  (this checkout: %.3fx its time)"
                  % (name + label, theirs, size / theirs / 1e9, secs / theirs))
    print("kafkalog describe of a %.2f GiB segment: %.3f s (best of %d, start-up included)"
          % (size / (1 << 30), text, args.repeat))


if __name__ == "__main__":
    main()
