"""Fuzz tests of the auxiliary file readers, in-process: offset, time and transaction indexes,
producer snapshots and checkpoints, on the files indexgen builds and the shipped fixtures,
mutated (hypothesis, thousands of inputs): only the documented exceptions may escape
(CorruptRecordError, FileFormatError, OSError), in bounded time; and a file that is not a
regular file (/dev/zero, a FIFO) is refused at once.

``KAFKALOG_FUZZ_EXAMPLES`` scales every budget (default 1; 10 for a longer run).
"""

import os
import tempfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

import fuzzlib as F

# Randomized fuzzing runs, a few minutes: left out of the quick suite (pytest -m "not slow").
pytestmark = pytest.mark.slow

OPS = F.ops_strategy()
AUX_SEEDS = F.aux_seeds()
AUX_NAMES = sorted(AUX_SEEDS)
BUSY_LOG = F.busy_log()


@F.fuzz_settings(2000)
@given(seed=st.sampled_from(AUX_NAMES), ops=OPS, with_log=st.booleans(),
       probe=st.integers(-2 ** 63, 2 ** 63 - 1))
def test_aux_files_mutated(seed, ops, with_log, probe):
    kind, _ = seed
    data = F.apply_ops(AUX_SEEDS[seed], ops)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, F.aux_file_name(kind))
        with open(path, "wb") as f:
            f.write(data)
        log_path = None
        if with_log and kind in ("index", "timeindex", "txnindex"):
            log_path = os.path.join(d, "00000000000000000000.log")
            with open(log_path, "wb") as f:
                f.write(BUSY_LOG)
        F.timed(F.read_aux_file, kind, path, log_path, probe)


_SPECIAL_READER = """
import sys
from kafkalog_cli.log import checkpoints
from kafkalog_cli.log.files import NotRegularFileError
from kafkalog_cli.log.index import OffsetIndex, TimeIndex
from kafkalog_cli.log.snapshot import read_snapshot
from kafkalog_cli.log.txnindex import TransactionIndex
reader = {"index": OffsetIndex, "timeindex": TimeIndex, "txnindex": TransactionIndex,
          "snapshot": read_snapshot, "offset-checkpoint": checkpoints.read_offset_checkpoint,
          "leader-epoch-checkpoint": checkpoints.read_leader_epochs,
          "partition.metadata": checkpoints.read_partition_metadata}[sys.argv[1]]
try:
    reader(sys.argv[2])
except NotRegularFileError:
    sys.exit(0)
sys.exit(3)
"""


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
@pytest.mark.parametrize("kind", F.AUX_KINDS)
def test_aux_reader_refuses_what_is_not_a_regular_file(tmp_path, kind, special):
    """/dev/zero symlinked as an auxiliary file, or a FIFO with no writer: the reader refuses
    it at once with NotRegularFileError (in a process bounded to 1 GB and 20 s, since the
    failure modes are reading without end and blocking forever)."""
    import subprocess
    import sys
    path = tmp_path / F.aux_file_name(kind)
    if special == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(special)
    try:
        p = subprocess.run([sys.executable, "-c", _SPECIAL_READER, kind, str(path)],
                           capture_output=True, timeout=20, cwd=F.REPO,
                           preexec_fn=F._limits(1 << 30))
    except subprocess.TimeoutExpired:
        pytest.fail("reading a %s as %s blocked" % (special, kind))
    assert p.returncode == 0, p.stderr.decode()[-600:]

