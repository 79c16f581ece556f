"""The daemon that forks local Spark's Python workers for `kafkalog export` and `kafkalog scan`
(spark.python.daemon.module, set by start.context for a local master whose workers run the
driver's own interpreter): pyspark's own daemon (pyspark.daemon.manager), started so that a
worker costs a fork rather than a second of imports:

- pyspark is imported from its installed package, whose modules Python has compiled and cached,
  rather than from the copy in Spark's python/lib/pyspark.zip, which Spark puts first on the
  workers' PYTHONPATH and from which Python compiles every module anew in every process
  (zipimport writes no .pyc): only when that zip is the installed package's own, so that both
  are the same pyspark;
- pyspark's worker and the tasks' modules (kafkalog_cli.spark.jobs and source) are imported
  here, once, before the workers are forked, rather than by each worker. None of them starts a
  thread (pyspark imports its worker after the fork because pandas and pyarrow do: those are
  still imported by each worker, when its first task needs them).

The JVM talks to it and its workers over Unix sockets (spark.python.unix.domain.socket.enabled,
set with it), on which a worker whose socket the JVM closed as it stopped would say so with a
traceback: it ends quietly instead (quiet_on_a_closed_socket).
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import PathFinder
from typing import Any, Callable

PYSPARK_ZIP = "pyspark.zip"


def installed_pyspark_first(path: list) -> None:
    """Take Spark's pyspark.zip out of ``path`` (sys.path) when the pyspark package installed on
    the rest of it is the one that zip came with (the zip lies in its python/lib)."""
    zips = [p for p in path if os.path.basename(p) == PYSPARK_ZIP]
    if not zips:
        return
    spec = PathFinder.find_spec("pyspark", [p for p in path if p not in zips])
    if spec is None or not spec.submodule_search_locations:
        return
    for package in spec.submodule_search_locations:
        own = os.path.realpath(os.path.join(package, "python", "lib", PYSPARK_ZIP))
        for z in zips:
            if os.path.realpath(z) == own:
                path.remove(z)


def quiet_on_a_closed_socket(worker: Callable[[Any, bool], int]) -> Callable[[Any, bool], int]:
    """pyspark.daemon.worker, for a worker whose socket the JVM has closed (as it stops: over a
    Unix socket the worker's last flush then fails, and pyspark re-raises that): the worker
    ends as it would, without its traceback on the command's stderr."""
    def run(sock: Any, authenticated: bool) -> int:
        try:
            return worker(sock, authenticated)
        except (BrokenPipeError, ConnectionResetError):
            return 1
    return run


def main() -> None:
    installed_pyspark_first(sys.path)
    from pyspark import daemon
    import pyspark.worker  # noqa: F401  (what daemon.worker imports after each fork)
    from . import jobs, source  # noqa: F401  (the tasks' functions, pickled by reference)
    setattr(daemon, "worker", quiet_on_a_closed_socket(daemon.worker))
    daemon.manager()


if __name__ == "__main__":
    main()
