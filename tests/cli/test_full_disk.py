"""The writers on a full disk: a small tmpfs (mounted here, as root; skipped
with the reason where mounting is not allowed) filled to the last block.

* ``append`` stops with one line naming the last offset written and flushed (and how many of
  its records), exit 2; the segment holds whole batches only, each record as written
  (kafka-python reads it), its indexes agree (``verify-index``), no temporary file is left,
  and appending goes on from there once there is room.
* ``recover`` stops with one line saying what it set aside so far, exit 2; it leaves no
  temporary file and no empty quarantine folder; once there is room one run finishes, a
  second changes nothing, and restoring every run gives back the damaged bytes.
* ``retain`` stops with one line, exit 2, and changes nothing.

Before (d559638): append left a torn batch and did not say how far it got; recover left
``*.kafkalog-tmp`` files and an empty quarantine folder."""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dumpcheck import REPO
from kafkagen import kafka_python_read

KAFKALOG = [sys.executable, "-m", "kafkalog_cli"]
FIXTURES = Path(REPO, "fixtures", "logdir")


def run(*args, stdin=None):
    return subprocess.run([*KAFKALOG, *[str(a) for a in args]], cwd=REPO, input=stdin,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def tmpfs(tmp_path):
    """A 3 MiB tmpfs, unmounted at the end."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip("a tmpfs cannot be mounted here (needs root): " + p.stderr.strip())
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


def grow(mnt):
    subprocess.run(["mount", "-o", "remount,size=8m", str(mnt)], check=True)


def fill(mnt, leave_kib=0):
    """Fill ``mnt`` up to ``leave_kib`` KiB free, with a file ``filler``."""
    free = shutil.disk_usage(mnt).free // 1024
    with open(mnt / "filler", "ab") as f:
        f.write(b"\0" * max(free - leave_kib, 0) * 1024)
    try:
        with open(mnt / "filler", "ab") as f:
            while shutil.disk_usage(mnt).free // 1024 > leave_kib:
                f.write(b"\0" * 1024)
                f.flush()
    except OSError:
        pass


def tree(root):
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for d in dirs:
            out[str(Path(dirpath, d).relative_to(root)) + "/"] = ""
        for f in files:
            p = Path(dirpath, f)
            if p.name in ("filler", ".lock"):
                continue
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def temporaries(root):
    return [str(p) for p in Path(root).rglob("*") if p.name.endswith(".kafkalog-tmp")]


def records(partition):
    out = []
    for log in sorted(Path(partition).glob("*.log")):
        for kb in kafka_python_read(log.read_bytes()):
            out += [(r.offset, r.value) for r in kb.records]
    return out


def test_append_says_how_far_it_got(tmpfs):
    part = tmpfs / "logdir" / "t-0"
    lines = ["value-%06d-%s" % (i, "x" * 40) for i in range(60000)]
    p = run("append", "--batch-records", "100", part, stdin="".join(x + "\n" for x in lines))
    assert p.returncode == 2, p
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0], p.stderr
    got = records(part)
    end = len(got)
    assert 0 < end < len(lines)
    assert got == [(i, lines[i].encode()) for i in range(end)]
    assert err[0] == ("kafkalog: %s: No space left on device: stopped at offset %d; this run's "
                      "offsets 0 to %d (its first %d records) are written, nothing after; the "
                      "partition ends whole at offset %d" % (part, end, end - 1, end, end - 1))
    assert run("verify-index", part).returncode == 0
    assert temporaries(tmpfs) == []
    # room again (the tmpfs grown): the next records continue at the offset named
    grow(tmpfs)
    p = run("append", part, stdin="after\n")
    assert p.returncode == 0, p.stderr
    assert records(part)[-1] == (end, b"after")


def test_append_to_a_partition_on_a_full_disk(tmpfs):
    logdir = tmpfs / "logdir"
    shutil.copytree(FIXTURES / "orders-0", logdir / "orders-0")
    assert run("recover", logdir).returncode in (0, 1)
    before = records(logdir / "orders-0")
    fill(tmpfs)
    p = run("append", logdir / "orders-0", stdin="".join("v%d\n" % i for i in range(3000)))
    assert p.returncode == 2, p
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert records(logdir / "orders-0")[:len(before)] == before
    end = len(records(logdir / "orders-0")) and records(logdir / "orders-0")[-1][0] + 1
    assert ("stopped at offset %d" % end) in p.stderr, p.stderr
    assert run("verify-index", logdir / "orders-0").returncode == 0
    assert temporaries(tmpfs) == []


def damaged_logdir(tmpfs):
    logdir = tmpfs / "logdir"
    shutil.copytree(FIXTURES / "orders-0", logdir / "orders-0")
    log = sorted((logdir / "orders-0").glob("*.log"))[-1]
    os.truncate(log, log.stat().st_size - 100)  # a torn last batch
    return logdir


@pytest.mark.parametrize("leave_kib", [0, 8])
def test_recover_leaves_nothing_of_its_own(tmpfs, leave_kib):
    logdir = damaged_logdir(tmpfs)
    original = tree(logdir)
    damaged = {p.name: p.read_bytes() for p in (logdir / "orders-0").iterdir()}
    fill(tmpfs, leave_kib)
    p = run("recover", logdir)
    assert p.returncode == 2, p
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "recovery stopped" in err[0], p.stderr
    assert temporaries(tmpfs) == []
    now = tree(logdir)
    if leave_kib == 0:
        assert now == original, err  # not even an empty quarantine folder
        assert "nothing set aside" in err[0]
    else:
        # what it set aside is listed: quarantine list reads every run
        assert run("quarantine", "list", logdir / "orders-0").returncode == 0
    # room again: one run finishes, a second changes nothing
    (tmpfs / "filler").unlink()
    assert run("recover", logdir).returncode in (0, 1)
    done = tree(logdir)
    assert run("recover", logdir).returncode == 0
    assert tree(logdir) == done
    # and every run restored gives back the damaged partition
    q = logdir / "orders-0" / "kafkalog-quarantine"
    for r in sorted(x.name for x in q.iterdir()):
        assert run("quarantine", "restore", logdir / "orders-0", r).returncode == 0
    restored = {p.name: p.read_bytes() for p in (logdir / "orders-0").iterdir() if p.is_file()}
    assert restored == damaged


def test_retain_changes_nothing(tmpfs):
    logdir = tmpfs / "logdir"
    logdir.mkdir()
    for name in ("orders-0", "orders-1"):
        shutil.copytree(FIXTURES / name, logdir / name)
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
        shutil.copyfile(FIXTURES / name, logdir / name)
    assert run("recover", logdir).returncode in (0, 1)
    for q in logdir.glob("*/kafkalog-quarantine"):
        shutil.rmtree(q)
    before = tree(logdir)
    fill(tmpfs)
    p = run("retain", "--retention-bytes", "100", "--file-delete-delay-ms", "0", logdir)
    assert p.returncode == 2, p
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert temporaries(tmpfs) == []
    assert tree(logdir) == before
