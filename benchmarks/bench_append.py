#!/usr/bin/env python3
"""Benchmark `kafkalog append`: 1 KiB JSON lines into a fresh partition, uncompressed and lz4.

Writes an input file of --count JSON lines of about 1 KiB each (seeded), then times, best of
--repeat, `kafkalog append` (a subprocess, start-up and the final fsync included) with:

  lines   --input-format lines: each JSON line is a record's value
  jsonl   --input-format jsonl: {"key": .., "value": ..} objects, parsed

for --codec none and lz4, and prints MB/s of input consumed. With --baseline PYTHON, the same
runs with that interpreter too (e.g. the venv of a worktree of an older commit); with
--compare-path DIR, the same runs of another checkout (e.g. `git worktree add /tmp/base
COMMIT`, its C modules built in place) by this interpreter with PYTHONPATH=DIR. Each round
runs every one once, so that a before/after pair shares the machine's load.

    .venv/bin/python benchmarks/bench_append.py [--count 200000] [--quick] [--baseline PYTHON]
        [--compare-path DIR]
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

TARGETS = {"none": 300, "lz4": 200}  # MB/s the issue asks for


def write_inputs(directory, count):
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    paths = {fmt: os.path.join(directory, "input.%s" % fmt) for fmt in ("lines", "jsonl")}
    with open(paths["lines"], "w") as lines, open(paths["jsonl"], "w") as jsonl:
        for i in range(count):
            text = " ".join(rng.choice(words) for _ in range(170))[:960]
            lines.write(json.dumps({"id": i, "text": text}) + "\n")
            jsonl.write(json.dumps({"key": "k%d" % i, "value": text}) + "\n")
    return paths


def run_append(python, tmp, path, fmt, codec, env=None):
    """Seconds of one `kafkalog append` of ``path`` into a fresh partition, by ``python`` (with
    ``env``)."""
    part = os.path.join(tmp, "bench-0")
    shutil.rmtree(part, ignore_errors=True)
    with open(path, "rb") as stdin:
        t0 = time.perf_counter()
        # cwd: not this checkout, whose kafkalog_cli `-m` would import before the
        # interpreter's own install
        p = subprocess.run([python, "-m", "kafkalog_cli", "append", "--input-format", fmt,
                            "--codec", codec, part], stdin=stdin, stdout=subprocess.DEVNULL,
                           cwd=tmp, env=env)
        secs = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit("%s: append exited %d" % (python, p.returncode))
    return secs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=200000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="20000 lines, for a smoke test")
    parser.add_argument("--baseline", metavar="PYTHON",
                        help="also time this interpreter's kafkalog (printed as 'before')")
    parser.add_argument("--compare-path", metavar="DIR", action="append", default=[],
                        help="also time the kafkalog of this checkout (PYTHONPATH=DIR), "
                        "interleaved with this one's")
    args = parser.parse_args()
    count = 20000 if args.quick else args.count
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    # (label, interpreter, environment); this checkout's last
    pythons = [("after", sys.executable, env)]
    if args.baseline:
        pythons.insert(0, ("before", args.baseline, env))
    for path in args.compare_path:
        pythons.insert(0, (os.path.basename(os.path.abspath(path)), sys.executable,
                           dict(env, PYTHONPATH=os.path.abspath(path))))
    width = max(len(label) for label, _, _ in pythons) + 1
    if len(pythons) == 1:
        pythons, width = [("", sys.executable, env)], 0
    with tempfile.TemporaryDirectory() as tmp:
        inputs = write_inputs(tmp, count)
        ok = True
        for fmt, path in inputs.items():
            size = os.path.getsize(path)
            for codec, target in TARGETS.items():
                best = [float("inf")] * len(pythons)
                for _ in range(args.repeat):
                    for i, (_, python, child_env) in enumerate(pythons):
                        best[i] = min(best[i], run_append(python, tmp, path, fmt, codec,
                                                          child_env))
                for i, (label, _, _) in enumerate(pythons):
                    rate = size / best[i] / 1e6
                    if i == len(pythons) - 1:
                        ok &= rate >= target
                    print("%s%-6s %-5s %d records, %.1f MB in %.3f s: %6.1f MB/s (target %d) %s"
                          % (label.ljust(width), fmt, codec, count, size / 1e6, best[i], rate,
                             target, "ok" if rate >= target else "MISSES"), flush=True)
    sys.exit(0 if ok or args.quick else 1)


if __name__ == "__main__":
    main()
