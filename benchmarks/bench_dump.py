#!/usr/bin/env python3
"""Benchmark `kafkalog dump` against Kafka's own DumpLogSegments and kafka-python's and
aiokafka's v2 record readers.

Builds v2 segment files with kafka-python's batch builder (cached under --workdir), one per data
set (default: 1 KiB values uncompressed, 100-byte values uncompressed, 1 KiB values with lz4,
1 KiB values with zstd), then times each reader in a whole process of its own (interpreter
start-up and imports included, output to /dev/null), best of --repeat:

  deep dump   kafkalog dump --deep-iteration --print-data-log FILE
              kafka-python / aiokafka: read the file, every batch's CRC checked, every record's
              offset, timestamp, key, value and headers read
  batch dump  kafkalog dump FILE
              kafka-python / aiokafka: read the file, every batch's header fields read (base
              and last offset, producer id and epoch, base sequence, max timestamp, attributes,
              crc) and its CRC checked

  kafka-dump-log  Kafka's DumpLogSegments (tests/kafkajvm.KAFKA, the tool `kafka-dump-log.sh`
              runs, with that script's JVM options), whole JVM process, the same command lines
              as kafkalog's; a second ratio subtracts each tool's start-up (its dump of an empty
              segment) from both, comparing the work past start-up. Needs Java and Maven
              (tests/kafkajvm.py resolves Kafka's jars once); --no-kafka leaves it out.

The comparison is of equal work: kafkalog checks every batch's CRC in both dumps (it prints
isvalid), so the peers do too; the peers write nothing while kafkalog renders and writes text
(to /dev/null). aiokafka is read with its Cython reader (aiokafka.record._crecords:
MemoryRecords, DefaultRecordBatch), checked to be the one loaded; kafka-python with its pure
Python one. A peer imports what a user of it would (aiokafka's package imports its client).

The runs are interleaved (each round runs every reader once, so that a burst of load hits all
of them) and timed two ways: wall time, and CPU time (the child's user + system time, less
moved by other processes on a loaded machine). --compare-path DIR also times the kafkalog of
another checkout (e.g. `git worktree add /tmp/base COMMIT`, its C modules built in place), run
with PYTHONPATH=DIR, in the same rounds: before and after in one run.

The "startup" line (a dump of an empty segment) shows how much of a time is start-up. --rss
instead dumps a ~1 GiB segment once each way and checks each child's own peak RSS against
150 MB. Units: MB = 10^6 bytes, GB = 10^9 bytes; --size-mb options are MiB.

    .venv/bin/python benchmarks/bench_dump.py [--quick] [--rss] [--repeat N] [--sets A,B]
        [--compare-path DIR]
"""

import argparse
import os
import random
import struct
import sys
import tempfile
import time
from importlib.metadata import version

from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

from bench_startup import run as run_timed  # (wall s, CPU s) of a child, stdout to /dev/null

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import kafkajvm  # noqa: E402  (the tests' Kafka: classpath through Maven)

# What bin/kafka-run-class.sh gives a tool (KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS).
KAFKA_TOOL_JVM = ("-Xmx256M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                  "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                  "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true")

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


def run_child(args, argv=None, env=None):
    """Run `python -m kafkalog_cli ARGS` > /dev/null (in ``env``, default ours); return (wall
    s, child's peak RSS bytes)."""
    argv = argv or [sys.executable, "-m", "kafkalog_cli"] + args
    t0 = time.perf_counter()
    pid = os.posix_spawn(sys.executable, argv, os.environ if env is None else env,
                         file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
    _, status, usage = os.wait4(pid, 0)
    elapsed = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("%s exited with %d" % (" ".join(argv), os.waitstatus_to_exitcode(status)))
    return elapsed, usage.ru_maxrss * 1024  # ru_maxrss is in KiB on Linux


def startup_times(empty, repeat):
    """Best wall times of a dump of the empty segment ``empty`` and of `python -c pass` (the
    interpreter's own start-up, the floor of ours), the two interleaved."""
    ours = alone = float("inf")
    for _ in range(repeat):
        ours = min(ours, run_child(["dump", empty])[0])
        alone = min(alone, run_child(None, [sys.executable, "-c", "pass"])[0])
    return ours, alone


def _checked(path, ok, base_offset):
    if not ok:
        sys.exit("%s: bad CRC in batch at offset %d" % (path, base_offset))


def kp_full_parse(path):
    """kafka-python: check every batch's CRC, touch every record's fields; return the count."""
    with open(path, "rb") as f:
        data = f.read()
    count = 0
    for batch in MemoryRecords(data):
        _checked(path, batch.validate_crc(), batch.base_offset)
        for record in batch:
            record.offset, record.timestamp, record.key, record.value, record.headers
            count += 1
    return count


def kp_batch_crc(path):
    """kafka-python: iterate the batches, reading their header fields and checking each one's
    CRC; return the batch count."""
    with open(path, "rb") as f:
        data = f.read()
    count = 0
    for batch in MemoryRecords(data):
        (batch.base_offset, batch.last_offset, batch.producer_id, batch.producer_epoch,
         batch.base_sequence, batch.max_timestamp, batch.attributes, batch.crc)
        _checked(path, batch.validate_crc(), batch.base_offset)
        count += 1
    return count


def _aiokafka_records():
    """aiokafka's MemoryRecords, as its users get it, checked to be the Cython reader."""
    from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
    from aiokafka.record.default_records import DefaultRecordBatch
    for cls in (AioMemoryRecords, DefaultRecordBatch):
        if not cls.__module__.startswith("aiokafka.record._crecords"):
            sys.exit("aiokafka's Cython reader is not loaded (%s is %s.%s)"
                     % (cls.__name__, cls.__module__, cls.__name__))
    return AioMemoryRecords


def aio_full_parse(path):
    """aiokafka (Cython): as kp_full_parse."""
    records_type = _aiokafka_records()
    with open(path, "rb") as f:
        data = f.read()
    records = records_type(data)
    count = 0
    while True:
        batch = records.next_batch()
        if batch is None:
            break
        _checked(path, batch.validate_crc(), batch.base_offset)
        for record in batch:
            record.offset, record.timestamp, record.key, record.value, record.headers
            count += 1
    return count


def aio_batch_crc(path):
    """aiokafka (Cython): as kp_batch_crc."""
    records_type = _aiokafka_records()
    with open(path, "rb") as f:
        data = f.read()
    records = records_type(data)
    count = 0
    while True:
        batch = records.next_batch()
        if batch is None:
            break
        (batch.base_offset, batch.next_offset, batch.producer_id, batch.producer_epoch,
         batch.base_sequence, batch.max_timestamp, batch.attributes, batch.crc)
        _checked(path, batch.validate_crc(), batch.base_offset)
        count += 1
    return count


PEERS = {("kp", "deep"): kp_full_parse, ("kp", "batch"): kp_batch_crc,
         ("aio", "deep"): aio_full_parse, ("aio", "batch"): aio_batch_crc}
# data set name: (layout, codec)
DATA_SETS = {"1k-none": ("1k", "none"), "small-none": ("small", "none"),
             "1k-lz4": ("1k", "lz4"), "1k-zstd": ("1k", "zstd")}


def best_of(repeat, fn, *args):
    """Best wall time of `repeat` calls, and the last call's result."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best, result


def kafka_argv():
    """The java command line of Kafka's DumpLogSegments, as kafka-dump-log.sh starts it."""
    return [kafkajvm.java(), *KAFKA_TOOL_JVM, *kafkajvm.tool_log_options(), "-cp",
            kafkajvm.classpath(), kafkajvm.dump_log_segments_class(kafkajvm.KAFKA)]


def reader_argv(peer, job, path):
    """The command line of one reader doing ``job`` (deep or batch) on ``path``."""
    if peer == "kafka":
        return kafka_argv() + ["--files", path] + (
            ["--deep-iteration", "--print-data-log"] if job == "deep" else [])
    if peer is None:
        args = ["dump", "--deep-iteration", "--print-data-log", path] if job == "deep" \
            else ["dump", path]
        return [sys.executable, "-m", "kafkalog_cli"] + args
    return [sys.executable, os.path.abspath(__file__), "--peer", peer, job, path]


def bench_file(name, path, repeat, readers):
    """Time every reader (label, peer, environment) on one data set, the runs interleaved
    (each round runs every reader once: a burst of load hits them all); return
    {(clock, label, job): best seconds} for the clocks "wall" and "cpu"."""
    size = os.path.getsize(path)
    records = kp_full_parse(path)
    times = {}
    for _ in range(repeat):
        for job in ("deep", "batch"):
            for label, peer, env in readers:
                wall, cpu = run_timed(reader_argv(peer, job, path), env)
                for clock, secs in (("wall", wall), ("cpu", cpu)):
                    key = (clock, label, job)
                    times[key] = min(times.get(key, float("inf")), secs)
    print("\n%s: %s, %.1f MB, %d records (best of %d, whole processes)"
          % (name, path, size / 1e6, records, repeat))
    labels = [label for label, _, _ in readers]
    print("  %-17s %s" % ("seconds", " ".join("%14s" % label[:14] for label in labels)))
    for clock in ("wall", "cpu"):
        for job, text in (("deep", "deep dump"), ("batch", "batch dump")):
            print("  %-17s %s" % ("%s (%s)" % (text, clock),
                                  " ".join("%14.3f" % times[clock, label, job]
                                           for label in labels)))
    print("  kafkalog: deep %.0f records/s, batch dump %.2f GB/s (wall)"
          % (records / times["wall", "kafkalog", "deep"],
             size / times["wall", "kafkalog", "batch"] / 1e9))
    return times


def geomean(values):
    """The geometric mean; nan when a value is not positive (a start-up-subtracted time of a
    file too small to measure past start-up)."""
    values = list(values)
    if any(v <= 0 for v in values):
        return float("nan")
    product = 1.0
    for v in values:
        product *= v
    return product ** (1 / len(values)) if values else float("nan")


def print_ratios(results, ours_labels, startups=None):
    """The time ratios kafkalog / peer per data set, and their geometric means, for each
    kafkalog timed (this checkout, and any --compare-path) and each clock. With ``startups``
    ({(clock, label): seconds of a dump of an empty segment}), also the ratios to
    kafka-dump-log with each tool's start-up subtracted from its times."""
    columns = [("deep", "aiokafka", "deep/aio"), ("batch", "aiokafka", "batch/aio"),
               ("deep", "kafka-python", "deep/kp"), ("batch", "kafka-python", "batch/kp")]
    if startups is not None:
        columns = [("deep", "kafka-dump-log", "deep/kdl"), ("batch", "kafka-dump-log", "batch/kdl"),
                   ("deep", "kafka-dump-log-", "deep/kdl-st"),
                   ("batch", "kafka-dump-log-", "batch/kdl-st")] + columns
    for clock in ("wall", "cpu"):
        for ours in ours_labels:
            print("\ntime ratio %s / peer, %s time (below 1: kafkalog faster)" % (ours, clock))
            if startups is not None:
                print("  kdl: kafka-dump-log (DumpLogSegments); kdl-st: both with their start-up "
                      "subtracted (kafkalog %.3f s, kafka-dump-log %.3f s)"
                      % (startups[clock, ours], startups[clock, "kafka-dump-log"]))
            print("  %-11s %s" % ("data set", " ".join("%11s" % c[2] for c in columns)))
            ratios = {c: [] for c in columns}
            for name, times in results:
                row = []
                for c in columns:
                    job, peer = c[0], c[1]
                    if peer == "kafka-dump-log-":
                        r = ((times[clock, ours, job] - startups[clock, ours])
                             / max(times[clock, "kafka-dump-log", job]
                                   - startups[clock, "kafka-dump-log"], 1e-9))
                    else:
                        r = times[clock, ours, job] / times[clock, peer, job]
                    ratios[c].append(r)
                    row.append(r)
                print("  %-11s %s" % (name, " ".join("%11.3f" % r for r in row)))
            print("  %-11s %s" % ("geo. mean", " ".join("%11.3f" % geomean(ratios[c])
                                                        for c in columns)))


def startup_of(readers, empty, repeat):
    """{(clock, label): best seconds} of each reader's batch dump of the empty segment."""
    out = {}
    for _ in range(repeat):
        for label, peer, env in readers:
            if peer not in (None, "kafka"):
                continue
            wall, cpu = run_timed(reader_argv(peer, "batch", empty), env)
            for clock, secs in (("wall", wall), ("cpu", cpu)):
                out[clock, label] = min(out.get((clock, label), float("inf")), secs)
    return out


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
                        help="size of the 1 KiB-value files, MiB (default 256)")
    parser.add_argument("--small-size-mb", type=int,
                        help="size of the 100-byte-value file, MiB (default 64)")
    parser.add_argument("--rss-size-mb", type=int,
                        help="size of the --rss file, MiB (default 1024)")
    parser.add_argument("--sets", default=",".join(DATA_SETS),
                        help="data sets, comma-separated (default: %(default)s)")
    parser.add_argument("--codec", choices=CODECS,
                        help="instead of --sets: the 1k and small layouts with this codec; "
                        "for --rss, the codec of its file (default none)")
    parser.add_argument("--repeat", type=int, help="best of N (default 3, 1 with --quick)")
    parser.add_argument("--quick", action="store_true", help="small files, for a smoke test")
    parser.add_argument("--rss", action="store_true",
                        help="only check the dumps' peak RSS on a ~1 GiB segment")
    parser.add_argument("--compare-path", metavar="DIR", action="append", default=[],
                        help="also time the kafkalog of another checkout (its C modules built "
                        "in place), run by this interpreter with PYTHONPATH=DIR, in the same "
                        "rounds")
    parser.add_argument("--no-kafka", action="store_true",
                        help="leave out Kafka's DumpLogSegments (no Java or Maven needed)")
    parser.add_argument("--peer", nargs=3, metavar=("kp|aio", "deep|batch", "FILE"),
                        help=argparse.SUPPRESS)  # one peer pass, timed by the parent
    args = parser.parse_args()
    if args.peer:
        reader, job, path = args.peer
        PEERS[reader, job](path)
        return
    repeat = args.repeat or (1 if args.quick else 3)

    print("Python %s, kafka-python %s, aiokafka %s; load average %s"
          % (sys.version.split()[0], version("kafka-python"), version("aiokafka"),
             " ".join("%.2f" % x for x in os.getloadavg())))
    if args.rss:
        size = args.rss_size_mb or (32 if args.quick else 1024)
        sys.exit(0 if bench_rss(build_segment(args.workdir, "1k", size, args.codec or "none"))
                 else 1)

    if args.codec is not None:
        sets = [("1k-" + args.codec, ("1k", args.codec)),
                ("small-" + args.codec, ("small", args.codec))]
    else:
        sets = []
        for name in args.sets.split(","):
            if name not in DATA_SETS:
                parser.error("unknown data set %r (known: %s)" % (name, ", ".join(DATA_SETS)))
            sets.append((name, DATA_SETS[name]))
    sizes = {"1k": args.size_mb or (8 if args.quick else 256),
             "small": args.small_size_mb or (4 if args.quick else 64)}
    files = [(name, os.path.abspath(build_segment(args.workdir, layout, sizes[layout], codec)))
             for name, (layout, codec) in sets]
    empty = build_segment(args.workdir, "1k", 0, "none")
    startup, alone = startup_times(empty, repeat)
    print("startup: %.3f s (best-of-%d dump of an empty segment, included in the times); "
          "python -c pass: %.3f s; ratio %.2fx (goal: 2.0x; benchmarks/bench_startup.py)"
          % (startup, repeat, alone, startup / alone))
    # The children run in an empty directory: `python -m` puts the working directory first on
    # sys.path, where a checkout would be imported before the one meant.
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("KAFKALOG_PURE_PYTHON", None)
    readers = [("kafkalog", None, env)]
    for path in args.compare_path:
        readers.append(("kafkalog@%s" % os.path.basename(os.path.abspath(path)), None,
                        dict(env, PYTHONPATH=os.path.abspath(path))))
    readers += [("kafka-python", "kp", env), ("aiokafka", "aio", env)]
    startups = None
    if not args.no_kafka:
        try:
            kafka_argv()
        except kafkajvm.KafkaUnavailable as e:
            sys.exit("bench_dump: %s (--no-kafka leaves Kafka's tool out)" % e)
        readers.append(("kafka-dump-log", "kafka", env))
        print("kafka-dump-log: Kafka %s's %s, JVM %s" % (
            kafkajvm.KAFKA, kafkajvm.dump_log_segments_class(kafkajvm.KAFKA),
            " ".join(KAFKA_TOOL_JVM)))
    with tempfile.TemporaryDirectory() as empty_dir:
        os.chdir(empty_dir)
        if not args.no_kafka:
            startups = startup_of(readers, os.path.abspath(empty), repeat)
        results = [(name, bench_file(name, path, repeat, readers)) for name, path in files]
    print_ratios(results, [label for label, peer, _ in readers
                           if peer is None], startups)
    print("load average at the end: %s" % " ".join("%.2f" % x for x in os.getloadavg()))


if __name__ == "__main__":
    main()
