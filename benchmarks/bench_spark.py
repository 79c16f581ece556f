#!/usr/bin/env python3
"""Benchmark the Spark pipeline: export of a ~1 GiB log directory to Parquet.

Builds (once, under --workdir) a log directory of --partitions partitions, each holding the same
128 MiB v2 segment of bench_dump.py (hard links), then measures:

  json dump   `kafkalog dump --format json --print-data-log DIR` > /dev/null, one process
  export      the export job (Parquet) in a Spark session with local[1], then local[2]
              (the session and its Python workers are started and warmed up before the
              clock starts: start-up is not the job; the output goes to /dev/shm when there
              is one, so that the disk's write speed is not what is measured)

and prints MB/s of segment data, the local[2]/local[1] speedup (target 1.7x) and the per-core
throughput against the single-process JSON dump (target at least 50%).

    .venv/bin/python benchmarks/bench_spark.py [--partitions 8] [--quick]
"""

import argparse
import os
import shutil
import subprocess
import sys
import time

from bench_dump import build_segment
from bench_seek import write_indexes

MiB = 1 << 20


# The Parquet output goes to memory (tmpfs) when the machine has it, so that the figures
# measure the pipeline, not how fast this machine's disk absorbs a gigabyte of writes.
OUTPUT_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else None
WARM_SEGMENT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "fixtures", "logdir", "metrics-0", "00000000000000000000.log")


def build_log_dir(workdir, partitions, segment_mb):
    """Partitions of one segment each (hard links of one file) with its broker-style indexes."""
    source = build_segment(workdir, "1k", segment_mb, "none")
    stem = source[:-len(".log")]
    if not os.path.exists(stem + ".index"):
        write_indexes(source)
    log_dir = os.path.join(workdir, "spark-%dx%dMiB-indexed" % (partitions, segment_mb))
    if not os.path.isdir(log_dir):
        tmp = log_dir + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        for p in range(partitions):
            part = os.path.join(tmp, "bench-%d" % p)
            os.makedirs(part)
            for suffix in (".log", ".index", ".timeindex"):
                os.link(stem + suffix, os.path.join(part, os.path.basename(stem) + suffix))
        os.rename(tmp, log_dir)
    size = sum(os.path.getsize(os.path.join(root, n)) for root, _, names in os.walk(log_dir)
               for n in names if n.endswith(".log"))
    return log_dir, size


def time_export(log_dir, cores, task_bytes):
    """Seconds the Parquet export job takes in a local[cores] session (start-up excluded)."""
    code = """
import sys, time, tempfile, os
from kafkalog_cli.spark import jobs
spark = jobs.session("local[%d]")
# start the Python workers before the clock, with what they import: a worker's start-up is
# not the job
def warm(_):
    # imports, and one small export through the same code, so that allocators and code
    # paths are warm in every worker
    import tempfile
    from kafkalog_cli.spark import jobs, source
    small = %r
    jobs.write_parquet_slice((0, source.SegmentSlice(small, 0, os.path.getsize(small))),
                             tempfile.mkdtemp(), [], source.Options({}), "warm")
    return 0
spark.sparkContext.parallelize(range(%d), %d).map(warm).collect()
out = tempfile.mkdtemp(dir=%r)
t0 = time.perf_counter()
jobs.export(spark, %r, os.path.join(out, "pq"), "parquet", mode="overwrite",
            options={"maxBytesPerPartition": str(%d)})
print(time.perf_counter() - t0)
spark.stop()
import shutil
shutil.rmtree(out)
""" % (cores, WARM_SEGMENT, cores, cores, OUTPUT_DIR, log_dir, task_bytes)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("export with local[%d] failed:\n%s" % (cores, p.stderr[-2000:]))
    return float(p.stdout.strip().splitlines()[-1])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", default=os.path.join(here, "data"))
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="2 partitions of 16 MiB")
    parser.add_argument("--task-mb", type=int, default=128,
                        help="maxBytesPerPartition, MiB: segments split at index entries into "
                             "tasks of about this size (default 128: the data source's own)")
    args = parser.parse_args()
    partitions, segment_mb = (2, 16) if args.quick else (args.partitions, 128)
    log_dir, size = build_log_dir(args.workdir, partitions, segment_mb)
    print("%s: %d partitions, %.1f MB" % (log_dir, partitions, size / 1e6))

    t0 = time.perf_counter()
    logs = sorted(os.path.join(root, n) for root, _, names in os.walk(log_dir)
                  for n in names if n.endswith(".log"))  # the same data: the segments only
    subprocess.run([sys.executable, "-m", "kafkalog_cli", "dump", "--format", "json",
                    "--print-data-log"] + logs, stdout=subprocess.DEVNULL, check=True)
    dump_rate = size / (time.perf_counter() - t0) / 1e6
    print("  json dump, one process:   %7.1f MB/s" % dump_rate)
    rates = {}
    for cores in (1, 2):
        secs = time_export(log_dir, cores, args.task_mb * MiB)
        rates[cores] = size / secs / 1e6
        print("  export local[%d]:          %7.1f MB/s (%.1f s)" % (cores, rates[cores], secs))
    speedup = rates[2] / rates[1]
    per_core = rates[2] / 2
    print("  speedup local[2]/local[1]: %.2fx (target 1.7x)" % speedup)
    print("  per-core export / json dump: %.0f%% (target 50%%)" % (100 * per_core / dump_rate))


if __name__ == "__main__":
    main()
