"""The project's own plumbing: one version everywhere, the lock's error in the KafkalogError
family, and the live segments of a directory as names.live_log_bases finds them."""

import errno
import importlib.metadata
import os
import subprocess
import sys

import pytest

import kafkalog_cli
from kafkalog_cli.errors import EXIT_USAGE, KafkalogError
from kafkalog_cli.log import names
from kafkalog_cli.log.lock import LockHeld, LogDirLock


def test_one_version_everywhere():
    """The installed distribution, the package and `kafkalog --version` agree: pyproject.toml
    takes the version from kafkalog_cli.__version__ rather than repeating it."""
    installed = importlib.metadata.version("kafkalog")
    assert installed == kafkalog_cli.__version__
    res = subprocess.run([sys.executable, "-m", "kafkalog_cli", "--version"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "kafkalog, version %s" % installed


_HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""


def test_lock_held_is_a_kafkalog_error_and_an_oserror(tmp_path):
    """Another process holding the log directory's POSIX lock (as a broker's FileChannel.tryLock
    does): LockHeld is both a KafkalogError (exit code 2) and an OSError (EAGAIN), naming the
    holder's pid."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path / ".lock")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LockHeld) as caught:
            with LogDirLock(str(tmp_path)):
                pass
        error = caught.value
        assert isinstance(error, KafkalogError) and isinstance(error, OSError)
        assert error.exit_code == EXIT_USAGE
        assert error.errno == errno.EAGAIN
        assert "pid %d" % holder.pid in str(error)
    finally:
        holder.kill()
        holder.wait()
    # the holder gone, its lock goes with it: the same directory is taken at once
    with LogDirLock(str(tmp_path)) as lock:
        assert lock.path == os.path.join(str(tmp_path), ".lock")


def test_live_log_bases_are_the_segments_a_broker_loads(tmp_path):
    """Only ``<20 digits>.log`` without a lifecycle suffix, in offset (not name) order."""
    entries = [names.offset_name(300, names.LOG), names.offset_name(5, names.LOG),
               names.offset_name(40, names.LOG, names.DELETED),
               names.offset_name(41, names.LOG, names.SWAP), names.offset_name(7, names.INDEX),
               names.offset_name(9, names.SNAPSHOT), "1000.log", "abc.log",
               "00000000000000000000.log.log", names.LEADER_EPOCH_CHECKPOINT]
    assert names.live_log_bases(entries) == [5, 300]
    for n in entries:
        (tmp_path / n).write_bytes(b"")
    from kafkalog_cli.log.partition import Partition
    assert [s.base_offset for s in Partition(str(tmp_path)).segments()] == [5, 300]
