#!/usr/bin/env python3
"""Benchmark `kafkalog dump --cluster-metadata-decoder` against the plain `--print-data-log`
dump of the same __cluster_metadata segment.

Builds (cached under --workdir) a segment of --records KRaft metadata records (default 1M), in
batches of 1000, every record type of Kafka's definitions at its highest version, encoded by
the tests' independent encoder (tests/schemaenc.py) and framed into v2 batches by kafka-python
(tests/kafkagen.py). Times each dump (subprocess, output to /dev/null), best of --repeat, and
prints records/s and the ratio (the goal: the decoder at least half the plain dump's speed).
The decoder's records go through the C walker of the layouts (format/_schemawalk.c) when it is
built; --check also dumps the file with KAFKALOG_PURE_PYTHON=1 and requires the same bytes.

    .venv/bin/python benchmarks/bench_cluster_metadata.py [--records N] [--repeat N] [--check]
"""

import argparse
import hashlib
import os
import random
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

import kafkagen  # noqa: E402
import schemaenc  # noqa: E402


def build(path, n):
    specs = schemaenc.all_specs()
    rng = random.Random(1)
    pool = []
    for name in sorted(specs):
        spec = specs[name]
        if spec["_folder"] != "metadata":
            continue
        hi = schemaenc.versions(spec["validVersions"])[1]
        for seed in range(8):
            values = schemaenc.random_values(spec, hi, random.Random(seed), "mixed")
            pool.append(schemaenc.metadata_frame(spec, hi, values))
    tmp = path + ".tmp"
    with open(tmp, "wb") as out:
        offset = 0
        while offset < n:
            count = min(1000, n - offset)
            recs = [kafkagen.Rec(None, rng.choice(pool)) for _ in range(count)]
            out.write(kafkagen.v2_batch(recs, base_offset=offset))
            offset += count
    os.replace(tmp, path)


def timed(args):
    start = time.perf_counter()
    with open(os.devnull, "wb") as null:
        subprocess.run([sys.executable, "-m", "kafkalog_cli", "dump", *args], stdout=null,
                       check=True, cwd=ROOT)
    return time.perf_counter() - start


def digest(args, pure):
    """sha256 of the dump's output, with the C fast paths or without them (pure)."""
    env = dict(os.environ)
    env.pop("KAFKALOG_PURE_PYTHON", None)
    if pure:
        env["KAFKALOG_PURE_PYTHON"] = "1"
    h = hashlib.sha256()
    with subprocess.Popen([sys.executable, "-m", "kafkalog_cli", "dump", *args],
                          stdout=subprocess.PIPE, cwd=ROOT, env=env) as proc:
        for chunk in iter(lambda: proc.stdout.read(1 << 20), b""):
            h.update(chunk)
    if proc.returncode != 0:
        raise SystemExit("dump %s exited with %d" % (" ".join(args), proc.returncode))
    return h.hexdigest()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--workdir", default="/tmp/kafkalog-bench")
    p.add_argument("--check", action="store_true",
                   help="also require the same output without the C fast paths")
    a = p.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    path = os.path.join(a.workdir, "metadata-%d" % a.records, "00000000000000000000.log")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        t = time.perf_counter()
        build(path, a.records)
        print("built %s (%.1f MB) in %.0f s" % (path, os.path.getsize(path) / 1e6,
                                                time.perf_counter() - t))
    plain = min(timed(["--print-data-log", path]) for _ in range(a.repeat))
    decoded = min(timed(["--cluster-metadata-decoder", path]) for _ in range(a.repeat))
    print("print-data-log           %8.2f s  %10.0f records/s" % (plain, a.records / plain))
    print("cluster-metadata-decoder %8.2f s  %10.0f records/s" % (decoded, a.records / decoded))
    print("ratio (decoder / plain speed): %.2f (goal: 0.5 or more)" % (plain / decoded))
    if a.check:
        args = ["--cluster-metadata-decoder", path]
        same = digest(args, pure=False) == digest(args, pure=True)
        print("output with and without the C fast paths: %s" % ("the same" if same
                                                                   else "DIFFERENT"))
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
