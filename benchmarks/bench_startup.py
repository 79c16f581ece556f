#!/usr/bin/env python3
"""Benchmark start-up: `kafkalog dump` of an empty segment against `python -c pass`.

A shell loop over thousands of segments pays start-up once per segment. Times, best of
--repeat, the runs interleaved (so that a burst of load on the machine hits all of them):

  python -c pass     the interpreter alone (with its site-packages: the same venv)
  import click       python -c "import click": the floor of any click command's start-up
  dump empty         python -m kafkalog_cli dump EMPTY.log > /dev/null
  --help             python -m kafkalog_cli --help > /dev/null (imports every command's module)

and prints each as a ratio to `python -c pass` (the goal: a dump of an empty segment within 2.0x;
the `import click` row shows how much of that click's import alone takes),
in wall time and in CPU time (the child's user + system time: less moved by other processes on
a loaded machine, which delay a run without adding to its CPU time).
--compare-path DIR also times another checkout (e.g. `git worktree add /tmp/base COMMIT`, its C
modules built in place) run by this interpreter with PYTHONPATH=DIR, so with the same
site-packages, in the same loop; --compare PYTHON another installation's interpreter. Each is
set against its own `python -c pass`. The commands run in an empty directory: `python -m` puts
the working directory first on sys.path, and a checkout there would be the one imported.
Python writes no byte code
under PYTHONDONTWRITEBYTECODE: the script runs each command once first with it unset, so that
what is timed is a start-up from cached byte code, as for an installed tool.

    .venv/bin/python benchmarks/bench_startup.py [--repeat 20] [--compare-path /tmp/base]
"""

import argparse
import os
import sys
import tempfile
import time


def run(argv, env):
    """(wall time, CPU time) of ``argv`` run with stdout to /dev/null; exits on a failure."""
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env,
                         file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
    _, status, usage = os.wait4(pid, 0)
    elapsed = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("%s exited with %d" % (" ".join(argv), os.waitstatus_to_exitcode(status)))
    return elapsed, usage.ru_utime + usage.ru_stime


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=20, help="best of N (default 20)")
    parser.add_argument("--quick", action="store_true", help="best of 3, for a smoke test")
    parser.add_argument("--compare", metavar="PYTHON",
                        help="another interpreter with kafkalog installed, timed alongside")
    parser.add_argument("--compare-path", metavar="DIR", action="append", default=[],
                        help="another checkout, run by this interpreter with PYTHONPATH=DIR "
                             "(may be given more than once)")
    args = parser.parse_args()
    repeat = 3 if args.quick else args.repeat

    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("KAFKALOG_PURE_PYTHON", None)
    env.pop("PYTHONPATH", None)
    # (label, interpreter, environment)
    pythons = [("this", sys.executable, env)]
    if args.compare:
        pythons.append(("compare %s" % args.compare, args.compare, env))
    for path in args.compare_path:
        pythons.append(("compare PYTHONPATH=%s" % path, sys.executable,
                        dict(env, PYTHONPATH=os.path.abspath(path))))
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # no checkout in the working directory (see above)
        directory = os.path.join(tmp, "topic-0")
        os.mkdir(directory)
        empty = os.path.join(directory, "00000000000000000000.log")
        open(empty, "wb").close()
        cases = []
        for label, python, penv in pythons:
            cases += [(label, "python -c pass", [python, "-c", "pass"], penv),
                      (label, "import click", [python, "-c", "import click"], penv),
                      (label, "dump empty", [python, "-m", "kafkalog_cli", "dump", empty], penv),
                      (label, "--help", [python, "-m", "kafkalog_cli", "--help"], penv)]
        for _, _, argv, penv in cases:  # byte code written, files in the page cache
            run(argv, penv)
        best = [(float("inf"), float("inf"))] * len(cases)
        for _ in range(repeat):
            for i, (_, _, argv, penv) in enumerate(cases):
                wall, cpu = run(argv, penv)
                best[i] = (min(best[i][0], wall), min(best[i][1], cpu))
        os.chdir("/")

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print("start-up, best of %d, load average %.2f, Python %s"
          % (repeat, load, sys.version.split()[0]))
    for label, python, _ in pythons:
        rows = [(name, t) for (lab, name, _, _), t in zip(cases, best) if lab == label]
        base_wall, base_cpu = rows[0][1]
        print("%s (%s):" % (label, python))
        for name, (wall, cpu) in rows:
            print("  %-16s wall %6.1f ms %5.2fx   cpu %6.1f ms %5.2fx   (x: python -c pass)"
                  % (name, wall * 1e3, wall / base_wall, cpu * 1e3, cpu / base_cpu))


if __name__ == "__main__":
    main()
