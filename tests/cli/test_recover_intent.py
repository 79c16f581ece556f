"""A killed `recover` leaves nothing in its quarantine that no manifest lists.

The fixtures' metrics-0 with one byte of segment 0 flipped: `recover --full` sets the damaged
segment's tail aside. It is SIGKILLed before each of its file operations in turn
(tests/killshim.py). After every kill:

* every file in a run folder of the quarantine is listed by that folder's manifest (the entry
  is written, flushed, before the file is moved there: the intent first);
* `quarantine list` still reads every run (exit 0);
* a second `recover` finishes (exit 0 or 1) and a third changes nothing.

Restoring every run of a killed recover and of the rerun that finished it, newest first, gives
back every byte of the damaged segments, also when the killed run had moved a later segment
aside (the rerun's restore changes files back to what the killed run left: not newer data);
a segment written after that restore is still newer data, and restoring the killed run is
refused.
"""

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka.record import MemoryRecords

from appendcheck import KILLSHIM, kill_step
from dumpcheck import REPO

FIXTURES = Path(REPO, "fixtures", "logdir")
KAFKALOG = [sys.executable, "-m", "kafkalog_cli"]

pytestmark = pytest.mark.slow


def kafkalog(*args):
    return subprocess.run([*KAFKALOG, *map(str, args)], capture_output=True, timeout=300)


def killed_at(step, *args):
    """Run kafkalog ARGS under killshim, SIGKILLed at kill point ``step`` (0: never):
    appendcheck.kill_step's, every one of the first file operations, then every third.
    Returns (killed, stderr)."""
    proc = subprocess.run([sys.executable, KILLSHIM, str(kill_step(step) if step else 0),
                           *map(str, args)],
                          capture_output=True, timeout=300)
    return proc.returncode == -9, proc.stderr.decode()


def records(part):
    """(offset, value) of every record in the partition's .log files, by kafka-python."""
    out = set()
    for log in part.glob("*.log"):
        recs = MemoryRecords(log.read_bytes())
        while True:
            try:
                batch = recs.next_batch()
            except Exception:  # kafka-python stops at bytes that are no entry
                break
            if batch is None:
                break
            if not batch.validate_crc():
                continue
            for r in batch:
                out.add((r.offset, r.value))
    return out


def logs_of(part):
    return {p.name: p.read_bytes() for p in part.glob("*.log")}


def unlisted(part):
    """Files in the partition's quarantine run folders that no manifest of theirs lists."""
    out = []
    root = part / "kafkalog-quarantine"
    if not root.exists():
        return out
    for run in root.iterdir():
        manifest = run / "manifest.json"
        listed = set()
        if manifest.exists():
            listed = {e.get("saved_as") for e in json.loads(manifest.read_text())["entries"]}
        for f in run.rglob("*"):
            rel = str(f.relative_to(run))
            if f.is_file() and rel != "manifest.json" and not rel.endswith(".kafkalog-tmp") \
                    and rel not in listed:
                out.append(str(f))
    return out


@pytest.fixture
def damaged(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(FIXTURES, src)
    part = src / "metrics-0"
    want = records(part)
    assert len(want) == 600
    seg = part / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 0xFF
    seg.write_bytes(bytes(data))
    return src, want


def test_a_killed_recover_lists_everything_it_set_aside(tmp_path, damaged):
    src, want = damaged
    done, steps = False, 0
    k = 1
    while not done:
        logs = tmp_path / ("k%03d" % k)
        shutil.copytree(src, logs)
        part = logs / "metrics-0"
        killed, err = killed_at(k, "recover", "--full", part)
        if not killed:
            done = True
        assert unlisted(part) == [], (k, unlisted(part))
        listing = kafkalog("quarantine", "list", part)
        assert listing.returncode == 0, (k, listing.stderr.decode())
        second = kafkalog("recover", "--full", part)
        assert second.returncode in (0, 1), (k, second.stderr.decode())
        before = {p: p.read_bytes() for p in part.rglob("*") if p.is_file()}
        third = kafkalog("recover", "--full", part)
        assert third.returncode == 0, (k, third.stdout.decode(), third.stderr.decode())
        assert {p: p.read_bytes() for p in part.rglob("*") if p.is_file()} == before, k
        shutil.rmtree(logs)
        steps = k
        k += 1
    assert steps > 5


def _kill_step_moving(src, name):
    """The first kill point at which the killed run has set ``name`` aside (listed)."""
    for k in range(1, 200):
        logs = src.parent / ("probe%03d" % k)
        shutil.copytree(src, logs)
        part = logs / "metrics-0"
        killed, _ = killed_at(k, "recover", "--full", part)
        moved = any((run / name).exists() for run in (part / "kafkalog-quarantine").iterdir()) \
            if (part / "kafkalog-quarantine").exists() else False
        shutil.rmtree(logs)
        if not killed:
            return None
        if moved:
            return k
    return None


@pytest.fixture
def killed_and_rerun(tmp_path, damaged):
    """A copy of the damaged log directory whose metrics-0 went through a `recover --full`
    SIGKILLed after it had moved segment 300 aside, then a second `recover --full` that
    finished: (the damaged log directory, that partition), two runs in its quarantine."""
    src, _ = damaged
    k = _kill_step_moving(src, "00000000000000000300.log")
    assert k is not None
    logs = tmp_path / "killed"
    shutil.copytree(src, logs)
    part = logs / "metrics-0"
    assert killed_at(k, "recover", "--full", part)[0]
    assert kafkalog("recover", "--full", part).returncode in (0, 1)
    return src, part


def test_restore_after_a_killed_run_and_its_rerun(killed_and_rerun):
    src, part = killed_and_rerun
    for run in sorted((part / "kafkalog-quarantine").iterdir(), reverse=True):
        restored = kafkalog("quarantine", "restore", part, run.name)
        assert restored.returncode == 0, (run.name, restored.stderr.decode())
    assert logs_of(part) == logs_of(src / "metrics-0")


def test_restore_still_refuses_data_written_after_a_later_restore(killed_and_rerun):
    """The same runs, but a segment the rerun's restore gave back is written again after that
    restore: restoring the killed run is refused (the data is newer than both)."""
    _, part = killed_and_rerun
    killed_run, rerun = sorted(p.name for p in (part / "kafkalog-quarantine").iterdir())
    assert kafkalog("quarantine", "restore", part, rerun).returncode == 0
    time.sleep(0.05)
    seg = part / "00000000000000000000.log"
    seg.write_bytes(seg.read_bytes() + seg.read_bytes()[:100])  # newer bytes
    before = {p: p.read_bytes() for p in part.rglob("*") if p.is_file()}
    refused = kafkalog("quarantine", "restore", part, killed_run)
    assert refused.returncode == 2, refused.stderr.decode()
    assert "interleave them with newer data" in refused.stderr.decode()
    assert {p: p.read_bytes() for p in part.rglob("*") if p.is_file()} == before
