"""Numbers out of Java's range in checkpoint files.

The broker parses an offset checkpoint's entries with Integer.parseInt / Long.parseLong
(CheckpointFile with OffsetCheckpointFile's formatter): a number past 2^63-1 makes the whole
file malformed, and LogManager then reads log-start-offset-checkpoint as empty (every log starts
at its first segment). kafkalog must read it the same way: no segment named by a 23-digit
offset, no recovery point past the log, and a second recover with nothing to do. A
leader-epoch-checkpoint holding a 5000-digit number (past Python's int-string limit) is one
line, never a traceback, in recover, recover --dry-run and verify-index.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dumpcheck import REPO

FIXTURES = Path(REPO, "fixtures", "logdir")
KAFKALOG = [sys.executable, "-m", "kafkalog_cli"]


def kafkalog(*args):
    return subprocess.run([*KAFKALOG, *map(str, args)], capture_output=True, timeout=120)


def files(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("number", ["99999999999999999999999", "9223372036854775808",
                                    "-9223372036854775809"])
def test_an_offset_past_a_long_makes_the_checkpoint_malformed(tmp_path, number):
    logs = tmp_path / "logs"
    shutil.copytree(FIXTURES, logs)
    (logs / "log-start-offset-checkpoint").write_text(f"0\n1\norders-0 0 {number}\n".replace(
        "orders-0 0", "orders 0"))
    first = kafkalog("recover", logs)
    assert first.returncode in (0, 1), first.stderr
    assert b"Traceback" not in first.stderr
    for p in logs.rglob("*"):
        assert number.lstrip("-") not in p.name, p
    text = (logs / "recovery-point-offset-checkpoint").read_text()
    assert number.lstrip("-") not in text
    after_first = files(logs)
    second = kafkalog("recover", logs)
    assert second.returncode == 0, (second.stdout, second.stderr)
    assert files(logs) == after_first


def test_a_long_is_read_up_to_its_limit(tmp_path):
    """9223372036854775807 is a long: the checkpoint is read (its entry is past the log end, so
    the broker's LogLoader, and recover, clamp nothing else: no file is named by it)."""
    from kafkalog_cli.log.checkpoints import INT32, INT64, java_number
    assert java_number("9223372036854775807") == (1 << 63) - 1
    assert java_number("-9223372036854775808") == -(1 << 63)
    assert java_number("9223372036854775808") is None
    assert java_number("+0042") == 42
    assert java_number("2147483648", INT32) is None
    assert java_number("2147483647", INT32) == (1 << 31) - 1
    assert java_number("1_000") is None and java_number(" 1") is None
    assert java_number("9" * 5000, INT64) is None
    assert java_number("0" * 5000 + "7") == 7


@pytest.mark.parametrize("args", [["recover"], ["recover", "--dry-run"], ["verify-index"]])
def test_a_5000_digit_leader_epoch_is_one_line(tmp_path, args):
    logs = tmp_path / "logs"
    shutil.copytree(FIXTURES, logs)
    (logs / "orders-1" / "leader-epoch-checkpoint").write_text("0\n1\n" + "5" * 5000 + " 0\n")
    proc = kafkalog(*args, logs / "orders-1")
    err = proc.stderr.decode()
    assert "Traceback" not in err and "ValueError" not in err, err[-2000:]
    assert proc.returncode in (0, 1), (proc.returncode, err)
    assert len(err) < 2000 and len(proc.stdout) < 20000
    assert os.path.getsize(logs / "orders-1" / "leader-epoch-checkpoint") > 0
