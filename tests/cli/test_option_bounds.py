"""Numeric options are bounded as Kafka's own settings and fields are (kafkalog_cli/cli/
numbers.py): a value past a Java int, long or short is a usage error naming the option, exit 2,
one line, never a traceback (`dump --max-message-size` and `--base-offset` with a 23-digit
number among them, which the C fast path could not hold)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dumpcheck import REPO

LOGDIR = Path(REPO, "fixtures", "logdir")
SEGMENT = LOGDIR / "orders-0" / "00000000000000000000.log"
INT_PAST, LONG_PAST, SHORT_PAST = str(2 ** 31), str(2 ** 63), str(2 ** 15)

CASES = [
    ("dump", "--max-message-size", INT_PAST, ["--deep-iteration", "--files", SEGMENT]),
    ("dump", "--max-bytes", INT_PAST, ["--files", SEGMENT]),
    ("dump", "--base-offset", LONG_PAST, [SEGMENT]),
    ("dump", "--from-offset", LONG_PAST, [SEGMENT]),
    ("dump", "--to-offset", LONG_PAST, ["--deep-iteration", SEGMENT]),
    ("verify-index", "--max-message-size", INT_PAST, [LOGDIR / "orders-0"]),
    ("describe", "--max-message-size", INT_PAST, [LOGDIR]),
    ("transactions", "--max-message-size", INT_PAST, [LOGDIR]),
    ("transactions", "--now", LONG_PAST, [LOGDIR]),
    ("recover", "--max-message-size", INT_PAST, ["--dry-run", "{copy}"]),
    ("recover", "--index-interval-bytes", INT_PAST, ["--dry-run", "{copy}"]),
    ("retain", "--retention-ms", LONG_PAST, ["--dry-run", "{copy}"]),
    ("retain", "--retention-bytes", "-" + str(2 ** 63 + 1), ["--dry-run", "{copy}"]),
    ("retain", "--log-start-offset", LONG_PAST, ["{copy}"]),
    ("retain", "--high-watermark", LONG_PAST, ["--retention-bytes", "1", "{copy}"]),
    ("append", "--segment-bytes", INT_PAST, ["{copy}/orders-0"]),
    ("append", "--producer-id", LONG_PAST, ["{copy}/orders-0"]),
    ("append", "--producer-epoch", SHORT_PAST, ["--producer-id", "7", "{copy}/orders-0"]),
    ("append", "--base-sequence", INT_PAST, ["{copy}/orders-0"]),
    ("roll", "--if-bytes", LONG_PAST, ["{copy}/orders-0"]),
]


@pytest.mark.parametrize("command,option,value,rest", CASES,
                         ids=["%s %s" % (c[0], c[1]) for c in CASES])
def test_a_number_past_its_java_type_is_a_usage_error(tmp_path, command, option, value, rest):
    copy = tmp_path / "logdir"
    shutil.copytree(LOGDIR, copy)
    before = sorted(p.name for p in copy.rglob("*"))
    args = [str(a).replace("{copy}", str(copy)) for a in rest]
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", command, option, value, *args],
                       cwd=REPO, capture_output=True, text=True, input="x\n", timeout=120)
    assert p.returncode == 2, p
    assert "Traceback" not in p.stderr
    assert "Invalid value for '%s'" % option in p.stderr, p.stderr
    assert sorted(p.name for p in copy.rglob("*")) == before
