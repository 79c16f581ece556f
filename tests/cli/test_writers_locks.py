"""A partition reached through a symlink is locked where it really lives.

``logdirB/orders-0 -> logdir/orders-0`` with ``logdir/.lock`` held by a live process (a POSIX
lock, as the broker's JVM holds it): `recover logdirB`, `append logdirB/orders-0`, `retain
logdirB` and `roll logdirB/orders-0` must refuse (exit 2, one line naming the lock) and change
no byte of either directory. And a writer in progress holds the partition against the others:
while an `append` is writing (its input still open), `recover` and `retain` of the same
partition, through either path, refuse.
"""

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from appendcheck import lock_held, tree_hash
from dumpcheck import REPO

FIXTURES = Path(REPO, "fixtures", "logdir")
KAFKALOG = [sys.executable, "-m", "kafkalog_cli"]


def kafkalog(*args, input=b""):
    return subprocess.run([*KAFKALOG, *map(str, args)], input=input, capture_output=True,
                          timeout=120)


@pytest.fixture
def linked(tmp_path):
    """``logdir`` (a copy of the fixtures, one segment byte flipped so recover would cut) and
    ``logdirB`` whose orders-0 is a symlink to logdir/orders-0."""
    logdir = tmp_path / "logdir"
    shutil.copytree(FIXTURES, logdir)
    seg = logdir / "orders-0" / "00000000000000000042.log"
    data = bytearray(seg.read_bytes())
    data[-5] ^= 0xFF  # the last batch's CRC fails: recover would cut it
    seg.write_bytes(bytes(data))
    logdir_b = tmp_path / "logdirB"
    logdir_b.mkdir()
    (logdir_b / "orders-0").symlink_to(logdir / "orders-0")
    return logdir, logdir_b


COMMANDS = {
    "recover": ["recover", "--full", "{b}"],
    "append": ["append", "{b}/orders-0"],
    "retain": ["retain", "--retention-bytes", "100", "--file-delete-delay-ms", "0", "{b}"],
    "roll": ["roll", "{b}/orders-0"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_symlinked_partition_does_not_get_past_the_brokers_lock(linked, tmp_path, command):
    logdir, logdir_b = linked
    before = tree_hash(tmp_path)
    with lock_held(logdir):
        before = tree_hash(tmp_path)
        proc = kafkalog(*[a.format(b=logdir_b) for a in COMMANDS[command]], input=b"x\ny\n")
    assert proc.returncode == 2, (command, proc.returncode, proc.stdout, proc.stderr)
    err = proc.stderr.decode()
    assert "Traceback" not in err
    assert str(logdir / ".lock") in err, err
    after = tree_hash(tmp_path)
    after.pop("logdirB/.lock", None)
    before.pop("logdirB/.lock", None)
    assert after == before


def _start_append(directory):
    """An append that has taken its locks and waits on its open input."""
    p = subprocess.Popen([*KAFKALOG, "append", str(directory)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdin.write(b"first\n")
    p.stdin.flush()
    lock = Path(directory) / ".kafkalog-append.lock"
    deadline = time.monotonic() + 30
    while not lock.exists():
        assert p.poll() is None, p.stderr.read()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.3)
    return p


@pytest.mark.parametrize("command", ["recover", "retain"])
@pytest.mark.parametrize("via", ["direct", "symlink"])
def test_no_recover_or_retain_while_an_append_writes(linked, command, via):
    logdir, logdir_b = linked
    seg = "orders-0/00000000000000000042.log"
    shutil.copyfile(FIXTURES / seg, logdir / seg)  # undamaged: append refuses a damaged log
    writer = _start_append(logdir / "orders-0")
    try:
        target = logdir if via == "direct" else logdir_b
        proc = kafkalog(*[a.format(b=target) for a in COMMANDS[command]])
        assert proc.returncode == 2, (command, via, proc.stdout, proc.stderr)
        assert b"locked by a running process" in proc.stderr, proc.stderr
    finally:
        writer.stdin.close()
        writer.wait(timeout=30)
    assert writer.returncode == 0, writer.stderr.read()


@pytest.mark.parametrize("command", ["restore", "purge", "restore --dry-run"])
def test_the_quarantine_through_a_symlinked_partition_is_locked_where_it_lives(linked, tmp_path,
                                                                                command):
    """restore and purge of a run reached through ``logdirB``: refused while ``logdir``'s lock
    is held; a dry run reads, with the one-line warning naming that lock."""
    logdir, logdir_b = linked
    assert kafkalog("recover", "--full", logdir).returncode == 1
    (run_id,) = [p.name for p in (logdir / "orders-0" / "kafkalog-quarantine").iterdir()
                 if not p.name.startswith(".")]
    args = {"restore": ["quarantine", "restore", logdir_b / "orders-0", run_id],
            "purge": ["quarantine", "purge", logdir_b, "--older-than", "0"],
            "restore --dry-run": ["quarantine", "restore", logdir_b / "orders-0", run_id,
                                  "--dry-run"]}[command]
    with lock_held(logdir):
        before = tree_hash(tmp_path)
        proc = kafkalog(*args)
        after = tree_hash(tmp_path)
    err = proc.stderr.decode()
    assert "Traceback" not in err
    assert str(logdir / ".lock") in err and len(err.splitlines()) == 1, err
    assert proc.returncode == (0 if "dry" in command else 2), (proc.returncode, err)
    after.pop("logdirB/.lock", None)
    before.pop("logdirB/.lock", None)
    assert after == before
