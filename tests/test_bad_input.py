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
        if args[:2] == ["dump", str(part)]:
            assert res.code == 1, (args, res)  # a plain dump reads every file: the garbage shows
        else:
            assert res.code in (0, 1), (args, res)  # verify/recover/seek read what they need


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
