#!/usr/bin/env python3
"""Benchmark the Spark pipeline: export (or scan) of a log directory, on local Spark and on a
standalone cluster, against the one-process JSON dump.

Builds (once, under --workdir) a log directory of --partitions partitions, each holding the same
128 MiB v2 segment of bench_dump.py (hard links) with its indexes (by default 8: ~1 GB), then
measures:

  json dump     `kafkalog dump --format json --print-data-log` of the segments > /dev/null, one
                process: the reference rate
  local[1]      the export (Parquet) in a Spark session with local[1]
  local[2]      the same with local[2]
  standalone    the same on a Spark standalone cluster of 2 workers x 1 core (1 GiB each) on
                127.0.0.1, started by the tests' own fixture code (tests/sparkcluster.py) and
                stopped afterwards

For each Spark run, in one process (the same Spark start the commands make: start.context, or
jobs.context, or jobs.session in a checkout without either): the start-up (the session, the
executors registered, their Python workers started and warm: one small export through the same
code in every worker) and the job itself, timed apart, the job --repeat times (the best counts);
the MB/s of segment data of the job, per core, as a share of the JSON dump's rate, and the
start-up's share of the whole run (start-up / (start-up + job)); one untimed command of each
checkout comes first, so that what a first command leaves for the next ones (the class-data
archive of the driver's JVM, in ~/.cache/kafkalog) is there. Then the whole `kafkalog export`
command of one small segment (the fixtures' metrics-0: start-up is all it is) by the same
master, as a user waits for it (Python, Spark, the job, Spark stopping). The output goes to
/dev/shm when there is one, so that the disk's write speed is not what is measured. The split
size is the export's own (the data over the cores), unless --task-mb gives maxBytesPerPartition.
--job scan times `kafkalog scan`'s job instead of the export (the same slices).

--compare-path DIR also times another checkout (e.g. `git worktree add /tmp/base COMMIT`, its
C modules built in place), run by this interpreter with PYTHONPATH=DIR (and so in the
cluster's executors, spark.executorEnv.PYTHONPATH), each mode's runs one after the other:
before and after in one run. The children run in an empty directory: `python -m` (Spark's
Python workers, the command) puts the working directory first on sys.path, where a checkout
would be imported before the one meant.

    .venv/bin/python benchmarks/bench_spark.py [--partitions 8] [--segment-mb 128] [--quick]
        [--modes ...] [--repeat 3] [--job export|scan] [--compare-path DIR]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from bench_dump import build_segment  # noqa: E402
from bench_seek import write_indexes  # noqa: E402

MiB = 1 << 20
MODES = {"local1": ("local[1]", 1), "local2": ("local[2]", 2), "standalone": (None, 2)}

# The Parquet output goes to memory (tmpfs) when the machine has it, so that the figures
# measure the pipeline, not how fast this machine's disk absorbs a gigabyte of writes.
OUTPUT_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else None
WARM_SEGMENT = os.path.join(REPO, "fixtures", "logdir", "metrics-0", "00000000000000000000.log")


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


def warm(_):
    """In a worker: the imports, and one small export through the same code, so that
    allocators and code paths are warm (a worker's start-up is not the job)."""
    from kafkalog_cli.spark import jobs, source
    small = WARM_SEGMENT
    out = tempfile.mkdtemp(dir=OUTPUT_DIR)
    try:
        jobs.write_parquet_slice((0, source.SegmentSlice(small, 0, os.path.getsize(small))),
                                 out, [], source.Options({}), "warm")
    finally:
        shutil.rmtree(out)
    return os.getpid()


def child(master, cores, log_dir, task_bytes, job, repeat):
    """One Spark run (in its own process): {"startup": s, "jobs": [s, ...], "tasks": n} on
    stdout."""
    from kafkalog_cli.spark import jobs
    try:  # what the commands start; a checkout without it, its own
        from kafkalog_cli.spark.start import context as start
    except ImportError:
        start = getattr(jobs, "context", jobs.session)
    t0 = time.perf_counter()
    conf = [("spark.ui.enabled", "false")]
    if os.environ.get("PYTHONPATH"):  # a --compare-path checkout, in the executors too
        conf.append(("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"]))
    spark = start(master, conf, "bench_spark")
    sc = getattr(spark, "sparkContext", spark)
    deadline = time.monotonic() + 120
    # every executor registered (the driver counts as one in getExecutorInfos)
    while master.startswith("spark://") and len(sc.statusTracker().getExecutorInfos()) < cores + 1:
        if time.monotonic() > deadline:
            sys.exit("the cluster's executors did not register")
        time.sleep(0.2)
    # the Python workers started and warm, every core several times over
    sc.parallelize(range(4 * cores), 4 * cores).map(warm).collect()
    t1 = time.perf_counter()
    options = {"maxBytesPerPartition": str(task_bytes)} if task_bytes else {}
    times, tasks = [], 0
    for _ in range(repeat):
        out = tempfile.mkdtemp(dir=OUTPUT_DIR)
        try:
            t = time.perf_counter()
            if job == "scan":
                result = jobs.scan(spark, log_dir)
                times.append(time.perf_counter() - t)
                assert not result.invalid and len(result.partitions) > 0
                tasks = sc.statusTracker().getStageInfo(
                    max(sc.statusTracker().getJobInfo(
                        max(sc.statusTracker().getJobIdsForGroup())).stageIds)).numTasks
            else:
                jobs.export(spark, log_dir, os.path.join(out, "pq"), "parquet", mode="overwrite",
                            options=options)
                times.append(time.perf_counter() - t)
                tasks = len([n for n in os.listdir(os.path.join(out, "pq"))
                             if n.startswith("part-")])
        finally:
            shutil.rmtree(out)
    spark.stop()
    print(json.dumps({"startup": t1 - t0, "jobs": times, "tasks": tasks}))


def run_child(master, cores, log_dir, task_bytes, job, repeat, env, cwd):
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", master, str(cores),
                        log_dir, str(task_bytes or 0), job, str(repeat)],
                       capture_output=True, text=True, env=env, cwd=cwd)
    if p.returncode != 0:
        sys.exit("%s on %s failed:\n%s" % (job, master, p.stderr[-3000:]))
    return json.loads(p.stdout.strip().splitlines()[-1])


def command_time(master, env, cwd):
    """The wall time of the whole `kafkalog export` of the fixtures' small metrics-0 segment
    (Parquet, to /dev/shm) by ``master``."""
    out = tempfile.mkdtemp(dir=OUTPUT_DIR)
    try:
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "kafkalog_cli", "export", WARM_SEGMENT,
                            "--output", os.path.join(out, "pq"), "--master", master],
                           capture_output=True, text=True, env=env, cwd=cwd)
        elapsed = time.perf_counter() - t0
    finally:
        shutil.rmtree(out)
    if p.returncode != 0:
        sys.exit("kafkalog export on %s failed:\n%s" % (master, p.stderr[-3000:]))
    return elapsed


def standalone(workdir):
    """A started cluster of 2 workers x 1 core (tests/sparkcluster.py)."""
    sys.path.insert(0, os.path.join(REPO, "tests"))
    import sparkcluster
    return sparkcluster.Cluster(tempfile.mkdtemp(prefix="bench-spark-cluster-", dir=workdir),
                                workers=2, cores=1, memory="1g")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", default=os.path.join(HERE, "data"))
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--segment-mb", type=int, default=128,
                        help="each partition's segment, MiB (default 128)")
    parser.add_argument("--quick", action="store_true", help="2 partitions of 16 MiB")
    parser.add_argument("--task-mb", type=int, default=0,
                        help="maxBytesPerPartition, MiB (default: the export's own split size, "
                             "the data over the cores)")
    parser.add_argument("--modes", default="local1,local2,standalone",
                        help="comma-separated: local1, local2, standalone")
    parser.add_argument("--job", choices=("export", "scan"), default="export",
                        help="the job timed (default: export, to Parquet)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="the job's runs in each session, the best counted (default 3)")
    parser.add_argument("--compare-path", metavar="DIR", action="append", default=[],
                        help="also time another checkout (its C modules built in place), run "
                             "by this interpreter with PYTHONPATH=DIR")
    parser.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        master, cores, log_dir, task_bytes, job, repeat = args.child
        return child(master, int(cores), log_dir, int(task_bytes), job, int(repeat))
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error("unknown modes: %s" % ", ".join(sorted(unknown)))
    partitions, segment_mb = (2, 16) if args.quick else (args.partitions, args.segment_mb)
    log_dir, size = build_log_dir(args.workdir, partitions, segment_mb)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print("%s: %d partitions, %.1f MB; %d CPUs, load average %.1f"
          % (log_dir, partitions, size / 1e6, os.cpu_count() or 0, load))

    logs = sorted(os.path.join(root, n) for root, _, names in os.walk(log_dir)
                  for n in names if n.endswith(".log"))  # the same data: the segments only
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kafkalog_cli", "dump", "--format", "json",
                    "--print-data-log"] + logs, stdout=subprocess.DEVNULL, check=True, cwd=REPO)
    dump_rate = size / (time.perf_counter() - t0) / 1e6
    print("  json dump, one process:     %7.1f MB/s" % dump_rate)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    checkouts = [("", env)] + [("@" + os.path.basename(os.path.abspath(path)),
                                dict(env, PYTHONPATH=os.path.abspath(path)))
                               for path in args.compare_path]
    task_bytes = args.task_mb * MiB
    results = {}
    with tempfile.TemporaryDirectory() as empty_dir:
        for _, child_env in checkouts:
            # untimed: what a first command leaves for the next ones (the driver JVM's class
            # archive, written at its exit) is there, as it is for a user's every later command
            command_time("local[1]", child_env, empty_dir)
        for mode in modes:
            master, cores = MODES[mode]
            cluster = standalone(args.workdir) if mode == "standalone" else None
            try:
                for label, child_env in checkouts:
                    r = run_child(master or cluster.url, cores, log_dir, task_bytes, args.job,
                                  args.repeat, child_env, empty_dir)
                    whole = command_time(master or cluster.url, child_env, empty_dir)
                    job = min(r["jobs"])
                    rate = size / job / 1e6
                    results[mode, label] = rate
                    name = ("standalone 2x1" if mode == "standalone" else master) + label
                    print("  %s %-22s %7.1f MB/s, %5.1f MB/s per core = %3.0f%% of the json "
                          "dump; %d tasks in %.1f s (%s), start-up %.1f s (%.0f%% of the run); "
                          "`kafkalog export` of a small segment %.1f s"
                          % (args.job, name + ":", rate, rate / cores,
                             100 * rate / cores / dump_rate, r["tasks"], job,
                             " ".join("%.2f" % t for t in r["jobs"]), r["startup"],
                             100 * r["startup"] / (r["startup"] + job), whole))
            finally:
                if cluster is not None:
                    cluster.stop()
                    shutil.rmtree(cluster.root, ignore_errors=True)
    for label, _ in checkouts:
        if ("local1", label) in results and ("local2", label) in results:
            print("  speedup local[2]/local[1]%s: %.2fx"
                  % (label, results["local2", label] / results["local1", label]))
        if ("local1", label) in results and ("standalone", label) in results:
            print("  speedup standalone 2x1/local[1]%s: %.2fx"
                  % (label, results["standalone", label] / results["local1", label]))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print("  load average at the end: %.1f" % load)


if __name__ == "__main__":
    main()
