"""Every report's tables on a terminal of 60, 80, 100, 160 and 220 columns: a number, an offset
or a file name printed on a pipe and in a table is printed whole at every width (a table too wide for the
terminal is drawn as blocks of ``header: value`` lines, never with a cell cut short).

The log directory: one topic with a long name, partitions 31 and 44, each two segments, the
second at a ten-digit base offset, 13-digit timestamps, a transaction, a torn tail."""

import os
import re
import subprocess
import sys

import pytest

import kafkagen as kg
from dumpcheck import REPO, on_a_terminal

TOPIC = "payments.settlement-events.eu-west-1"
T0 = 1725000000000
WIDTHS = (60, 80, 100, 160, 220)
PRODUCER = 4000000000123


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("widths") / "logdir"
    for p in (31, 44):
        d = root / ("%s-%d" % (TOPIC, p))
        for base in (0, 1210000000 + p):
            w = kg.SegmentWriter(base_offset=base)
            for i in range(3):
                w.add_v2([kg.Rec(b"k%d" % j, b"v" * 400, T0 + 1000 * j) for j in range(40)],
                         codec="gzip" if i % 2 else "none")
            if base:
                w.add_v2([kg.Rec(b"t", b"x", T0 + 50000)], producer_id=PRODUCER,
                         producer_epoch=7, base_sequence=0, transactional=True)
                w.add_control(kg.COMMIT, PRODUCER, 7, 3, timestamp=T0 + 51000)
                w.add_v2([kg.Rec(b"t", b"y", T0 + 52000)], producer_id=PRODUCER,
                         producer_epoch=7, base_sequence=1, transactional=True)
            w.write(str(d))
    return root


def _torn(log_dir):
    """Partition 44 with a torn last batch in its active segment."""
    part = log_dir / ("%s-44" % TOPIC)
    log = part / kg.segment_name(1210000044)
    os.truncate(log, os.path.getsize(log) - 5)
    return part


def _on_a_pipe(args):
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli"] + [str(a) for a in args],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL, cwd=REPO, timeout=120)
    return p.returncode, p.stdout.decode()


def _numbers(text):
    """The whole numbers of three digits or more of ``text``: offsets, timestamps, record
    counts, producer ids (a byte count in "(N bytes)" is a pipe's alone: the terminal shows
    the size in KiB)."""
    return set(n for n in re.findall(r"\d+", re.sub(r"\(\d+ bytes\)", "", text))
               if len(n) >= 3)


def _file_names(text):
    """The file names and partition directory names of ``text``."""
    return set(re.findall(r"[\w.-]+\.(?:log|index|timeindex|txnindex|snapshot)\b", text)
               + re.findall(re.escape(TOPIC) + r"-\d+", text))


def _whole_on_a_terminal(args):
    """``kafkalog ARGS`` on a terminal of each width prints whole every number and name it
    prints on a pipe and on a terminal wide enough for every table (what a table shows of the
    pipe's lines)."""
    code, plain = _on_a_pipe(args)
    wide = on_a_terminal(args, columns=1000, stderr_too=True)[1]
    numbers = _numbers(plain) & _numbers(wide)
    names = _file_names(plain) & _file_names(wide)
    assert numbers and names, (plain, wide)
    for width in WIDTHS:
        tcode, screen = on_a_terminal(args, columns=width, stderr_too=True)
        assert tcode == code, screen
        assert "…" not in screen, (width, screen)
        cut = numbers - _numbers(screen)
        assert not cut, (width, sorted(cut), screen)
        cut = names - _file_names(screen)
        assert not cut, (width, sorted(cut), screen)
        for line in screen.splitlines():
            # a table's line fits the terminal (a block's line is the terminal's to wrap)
            if any(c in line for c in "┃│┏┡└"):
                assert len(line) <= width, (width, line)


def test_describe(log_dir):
    _whole_on_a_terminal(["describe", log_dir])


def test_verify_index(log_dir):
    _whole_on_a_terminal(["verify-index", log_dir])


def test_transactions(log_dir):
    _whole_on_a_terminal(["transactions", "--now", T0 + 3600000, log_dir / ("%s-31" % TOPIC)])


def test_cleaner(log_dir):
    _whole_on_a_terminal(["cleaner", "--now", T0, "--cleanup-policy", "compact", log_dir])


def test_retain(log_dir):
    _whole_on_a_terminal(["retain", "--dry-run", "--log-start-offset", 1210000100,
                          log_dir / ("%s-44" % TOPIC)])


def test_recover_and_quarantine(tmp_path, log_dir):
    import shutil
    copy = tmp_path / "logdir"
    shutil.copytree(log_dir, copy)
    part = _torn(copy)
    _whole_on_a_terminal(["recover", "--full", "--dry-run", part])
    assert _on_a_pipe(["recover", "--full", part])[0] == 1
    _whole_on_a_terminal(["quarantine", "list", copy])


@pytest.mark.slow
def test_scan(log_dir):
    pytest.importorskip("pyspark")
    _whole_on_a_terminal(["scan", "--master", "local[1]", log_dir])
