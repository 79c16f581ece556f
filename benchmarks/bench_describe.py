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
Units: MB = 10^6 bytes, GB = 10^9 bytes; --size-mb is MiB.

    .venv/bin/python benchmarks/bench_describe.py [--size-mb N] [--repeat N] [--codec C]
"""

import argparse
import os
import sys

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
    args = parser.parse_args()

    from kafkalog_cli.log.describe import describe

    path = build_segment(args.workdir, "1k", args.size_mb, args.codec)
    empty = build_segment(args.workdir, "1k", 0, args.codec)
    size = os.path.getsize(path)
    startup = min(run_child(["describe", empty])[0] for _ in range(args.repeat))
    text = min(run_child(["describe", path])[0] for _ in range(args.repeat))
    json_ = min(run_child(["describe", "--format", "json", path])[0]
                for _ in range(args.repeat))
    crc = min(run_child(["describe", "--crc", path])[0] for _ in range(args.repeat))
    library, d = best_of(args.repeat, describe, path)
    (seg,) = d.segments
    print("%s: %.1f MB, %d records, %d batches, codec %s (best of %d)"
          % (path, size / 1e6, seg.records, seg.batches, args.codec, args.repeat))
    for name, secs in (("describe", text), ("describe json", json_), ("describe crc", crc),
                       ("library", library), ("startup", startup)):
        print("  %-14s %7.3f s  %6.2f GB/s" % (name, secs, size / secs / 1e9))
    print("kafkalog describe of a %.2f GiB segment: %.3f s (best of %d, start-up included)"
          % (size / (1 << 30), text, args.repeat))


if __name__ == "__main__":
    main()
