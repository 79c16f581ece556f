"""The writing commands never write through a symlink: a symlink planted at a
temporary name, a lock's name, or an active segment file's name leads outside the log
directory; `append`, `retain`, `roll` and `recover` must change nothing outside it. Checked by
hashing a sibling tree (the "outside") before and after, and by looking at what each link
points to afterwards: still absent when it was dangling, unchanged otherwise.

Every case runs the real command in a subprocess on a copy of the shipped fixtures.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from appendcheck import tree_hash
from dumpcheck import REPO

FIXTURES = Path(REPO, "fixtures", "logdir")
KAFKALOG = [sys.executable, "-m", "kafkalog_cli"]


def kafkalog(*args, input=None):
    return subprocess.run([*KAFKALOG, *map(str, args)], input=input, capture_output=True,
                          timeout=120)


@pytest.fixture
def world(tmp_path):
    """A copy of the fixtures (``logs``) and a sibling tree outside it with a file to protect."""
    logs = tmp_path / "logs"
    shutil.copytree(FIXTURES, logs)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_bytes(b"do not touch\n" * 10)
    return logs, outside


def _log_end(log):
    """The offset after the last batch of the segment ``log``, read by kafka-python."""
    from kafka.record import MemoryRecords
    records = MemoryRecords(log.read_bytes())
    end = None
    while True:
        batch = records.next_batch()
        if batch is None:
            return end
        end = batch.next_offset


def _active_base(part):
    return max(int(p.name[:20]) for p in part.glob("*.log"))


CASES = {
    # name: (file planted in the partition or the log dir, command, dangling?)
    "retain through log-start-offset-checkpoint's temporary file": (
        "logs/log-start-offset-checkpoint.kafkalog-tmp",
        ["retain", "--retention-bytes", "100", "--file-delete-delay-ms", "0", "{logs}"], False),
    "append through leader-epoch-checkpoint's temporary file": (
        "logs/orders-0/leader-epoch-checkpoint.kafkalog-tmp",
        ["append", "--leader-epoch", "9", "{logs}/orders-0"], False),
    "roll through the new producer snapshot's temporary file": (
        "logs/orders-0/{next:020d}.snapshot.kafkalog-tmp",
        ["roll", "{logs}/orders-0"], False),
    "append through a dangling partition lock": (
        "logs/orders-0/.kafkalog-append.lock", ["append", "{logs}/orders-0"], True),
    "recover through a dangling .lock": (
        "logs/.lock", ["recover", "--full", "{logs}"], True),
    "append through a symlinked active .log": (
        "logs/orders-0/{active:020d}.log", ["append", "{logs}/orders-0"], False),
    "append through a symlinked active .timeindex": (
        "logs/orders-0/{active:020d}.timeindex", ["append", "{logs}/orders-0"], False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_no_write_through_a_planted_symlink(world, case):
    logs, outside = world
    planted, command, dangling = CASES[case]
    part = logs / "orders-0"
    active = _active_base(part)
    next_offset = _log_end(part / f"{active:020d}.log")
    fmt = dict(logs=logs, active=active, next=next_offset)
    link = logs.parent / planted.format(**fmt)
    target = outside / ("dangling" if dangling else "precious")
    if "snapshot" in planted:
        # roll writes the snapshot at the new segment's base offset only when there is none
        (part / f"{next_offset:020d}.snapshot").unlink(missing_ok=True)
    if link.exists() and not link.is_symlink():
        # a real segment file: what it held moves outside, the link leads there
        shutil.move(str(link), str(outside / "precious"))
    link.symlink_to(target)
    before = tree_hash(outside)

    proc = kafkalog(*[c.format(**fmt) for c in command], input=b"v1\nv2\n")

    assert tree_hash(outside) == before, (case, proc.stderr.decode())
    assert not (outside / "dangling").exists()
    # Whatever the command did, the planted name is not left a link into the outside with our
    # data behind it: either still the untouched link (refused), or gone/replaced by a file.
    if link.is_symlink():
        assert os.readlink(link) == str(target)
        assert proc.returncode == 2, (case, proc.returncode, proc.stderr.decode())
        assert b"Traceback" not in proc.stderr
        assert len(proc.stderr.decode().strip().splitlines()) >= 1
    for p in logs.rglob("*"):
        if p.is_symlink() and p != link:
            raise AssertionError(f"{p} became a symlink")
