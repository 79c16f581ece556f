"""Memory on hostile auxiliary files: a 2 GiB sparse `.index` (a few real entries,
then zeros) and offset checkpoints of about 25 MB each are read in bounded pieces: `dump`,
`verify-index`, `describe` and `recover --dry-run` stay under 150 MB of peak RSS (reading each
file whole and splitting it into lists would take 2.1 GB and 0.7-0.9 GB).

The peak RSS is the command's own (a wrapper process whose only child it is reads it from
getrusage(RUSAGE_CHILDREN)).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dumpcheck import REPO

pytestmark = pytest.mark.slow

FIXTURES = Path(REPO, "fixtures", "logdir")
KAFKALOG = [sys.executable, "-m", "kafkalog_cli"]
LIMIT = 150e6

_MEASURE = ("import os, resource, subprocess, sys\n"
            "rc = subprocess.call(sys.argv[2:], stdout=subprocess.DEVNULL)\n"
            "os.write(int(sys.argv[1]), b'%d' % resource.getrusage(resource.RUSAGE_CHILDREN)"
            ".ru_maxrss)\n"
            "sys.exit(rc)\n")


def peak_rss(*args):
    """(exit status, stderr, peak RSS in bytes) of ``kafkalog ARGS``."""
    r, w = os.pipe()
    try:
        proc = subprocess.run([sys.executable, "-c", _MEASURE, str(w), *KAFKALOG, *map(str, args)],
                              stderr=subprocess.PIPE, timeout=600, pass_fds=(w,))
    finally:
        os.close(w)
    with os.fdopen(r, "rb") as f:
        return proc.returncode, proc.stderr.decode(), int(f.read() or b"0") * 1024


@pytest.fixture(scope="module")
def sparse_index(tmp_path_factory):
    logs = tmp_path_factory.mktemp("sparse") / "logs"
    shutil.copytree(FIXTURES, logs)
    index = logs / "orders-0" / "00000000000000000042.index"
    with open(index, "r+b") as f:
        f.truncate(2 ** 31 - 8)  # the real entries, then zeros: a hole, no disk used
    return logs


@pytest.mark.parametrize("args", [["dump", "{index}"], ["verify-index", "{part}"],
                                  ["describe", "{part}"], ["recover", "--dry-run", "{part}"]])
def test_a_2_gib_sparse_index_costs_no_memory(sparse_index, args):
    part = sparse_index / "orders-0"
    index = part / "00000000000000000042.index"
    code, err, peak = peak_rss(*[a.format(index=index, part=part) for a in args])
    assert "Traceback" not in err, err[-2000:]
    assert code in (0, 1), (code, err[-2000:])
    assert peak < LIMIT, (args, peak)


@pytest.fixture(scope="module")
def big_checkpoints(tmp_path_factory):
    logs = tmp_path_factory.mktemp("checkpoints") / "logs"
    shutil.copytree(FIXTURES, logs)
    n = 700_000
    body = "".join("some-topic-name-%d %d %d\n" % (i, i % 50, i * 1000) for i in range(n))
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                 "replication-offset-checkpoint"):
        (logs / name).write_text("0\n%d\n" % n + body)
    assert (logs / "recovery-point-offset-checkpoint").stat().st_size > 20e6
    return logs


@pytest.mark.parametrize("args", [["dump", "{logs}/recovery-point-offset-checkpoint"],
                                  ["verify-index", "{logs}"], ["describe", "{logs}"],
                                  ["recover", "--dry-run", "{logs}"]])
def test_25_mb_checkpoints_are_read_an_entry_at_a_time(big_checkpoints, args):
    code, err, peak = peak_rss(*[a.format(logs=big_checkpoints) for a in args])
    assert "Traceback" not in err, err[-2000:]
    assert code in (0, 1), (code, err[-2000:])
    assert peak < LIMIT, (args, peak)
