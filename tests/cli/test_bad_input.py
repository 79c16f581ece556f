"""Garbage in every file kind of a partition: one-line errors and exit 1, never a traceback."""

import os
import random
import shutil

import pytest

from dumpcheck import REPO, kafkalog

KINDS = {"index": "00000000000000000000.index", "timeindex": "00000000000000000000.timeindex",
         "txnindex": "00000000000000000000.txnindex", "snapshot": "00000000000000000016.snapshot",
         "log": "00000000000000000000.log"}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_bytes_in_a_partition_file(tmp_path, kind, seed):
    part = tmp_path / "orders-1"
    shutil.copytree(os.path.join(REPO, "fixtures", "logdir", "orders-1"), part)
    # random bytes: index positions and offsets land anywhere, negative ones included
    (part / KINDS[kind]).write_bytes(random.Random(seed).randbytes(4999))
    for args in (["dump", str(part)], ["dump", "--deep-iteration", str(part)],
                 ["dump", "--from-offset", "3", str(part)], ["verify-index", str(part)],
                 ["recover", "--dry-run", str(part)]):
        res = kafkalog(*args)
        assert "Traceback" not in res.err + res.out, (args, res.err)
        assert res.code == _expected_exit(kind, args[0], "--from-offset" in args), (args, res)


def _expected_exit(kind, command, seeking):
    """Which commands must see garbage in which file: a dump of the partition reads every file;
    a seek reads only the .log (an index failing the sanity check is replaced by a scan, which
    finds the same records); verify-index judges the log and its three indexes but not producer
    snapshots; recover sets an unreadable snapshot aside, as the broker deletes it, and writes
    it again."""
    if command == "dump":
        return 1 if kind == "log" or not seeking else 0
    return 0 if kind == "snapshot" and command != "recover" else 1


def test_index_entry_with_a_negative_position(tmp_path):
    """The time index check starts at the offset index's position for each entry: a negative
    one (a corrupt index) must not reach the byte scanner as a start."""
    import struct
    part = tmp_path / "metrics-0"
    shutil.copytree(os.path.join(REPO, "fixtures", "logdir", "metrics-0"), part)
    (part / "00000000000000000000.index").write_bytes(struct.pack(">ii", 1, -1614771330))
    for args in (["dump", str(part)], ["verify-index", str(part)]):
        res = kafkalog(*args)
        assert "Traceback" not in res.err + res.out, (args, res.err)
        assert res.code == 1, (args, res)
