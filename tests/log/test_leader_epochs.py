"""Leader epochs (kafkalog_cli.log.leader_epochs) against LeaderEpochFileCache's rules, and the
leader-epoch-checkpoint text checked literally (CheckpointFile: "0", the count, then
"epoch startOffset" lines, each ended by a newline)."""

import os

import pytest

from kafkalog_cli.errors import UsageError
from kafkalog_cli.log.files import FileFormatError
from kafkalog_cli.log.leader_epochs import LeaderEpochCache


def text(directory):
    with open(os.path.join(directory, "leader-epoch-checkpoint"), "rb") as f:
        return f.read()


def cache(*entries):
    c = LeaderEpochCache()
    for epoch, start in entries:
        c.assign(epoch, start)
    return c


def test_assign_appends_higher_epochs():
    c = LeaderEpochCache()
    assert c.latest_epoch is None
    assert c.assign(0, 0)
    assert c.assign(2, 10)
    assert c.assign(5, 10)   # same start offset: the empty epoch 2 goes
    assert c.entries == [(0, 0), (5, 10)]
    assert c.latest_epoch == 5


def test_assign_same_epoch_keeps_the_first_start():
    c = cache((1, 5))
    assert not c.assign(1, 5)
    assert not c.assign(1, 9)    # the same epoch at a later offset: nothing to record
    assert c.entries == [(1, 5)]
    assert c.assign(1, 3)        # the same epoch earlier: it now starts there
    assert c.entries == [(1, 3)]


def test_assign_lower_start_truncates_conflicting_entries():
    # maybeTruncateNonMonotonicEntries: from the end, remove entries whose epoch is >= the new
    # one or whose start offset is >= the new one's.
    c = cache((1, 0), (3, 10), (4, 20), (6, 30))
    assert c.assign(5, 15)
    assert c.entries == [(1, 0), (3, 10), (5, 15)]
    c = cache((1, 0), (3, 10), (4, 20))
    assert c.assign(2, 25)       # a lower epoch: the higher ones go, whatever their offsets
    assert c.entries == [(1, 0), (2, 25)]
    c = cache((1, 0), (3, 10), (4, 20))
    assert c.assign(3, 25)       # epoch 3 again, after 4: the old epoch 3 goes too
    assert c.entries == [(1, 0), (3, 25)]
    c = cache((1, 0), (3, 10))
    assert c.assign(7, 0)
    assert c.entries == [(7, 0)]


def test_assign_refuses_negative_values():
    with pytest.raises(UsageError):
        LeaderEpochCache().assign(-1, 0)
    with pytest.raises(UsageError):
        LeaderEpochCache().assign(0, -1)


def test_observe_assigns_only_higher_epochs():
    # LogSegment.recover: a v2 batch's partitionLeaderEpoch >= 0 and above the latest epoch
    c = LeaderEpochCache()
    assert not c.observe(-1, 0)
    assert c.observe(0, 0)
    assert not c.observe(0, 5)
    assert c.observe(2, 7)
    assert not c.observe(1, 9)   # going back is not assigned (verify reports it)
    assert not c.observe(2, 3)   # the latest epoch again, even at a lower offset
    assert c.entries == [(0, 0), (2, 7)]


def test_truncate_from_end():
    c = cache((0, 0), (1, 10), (2, 20), (3, 30))
    assert c.truncate_from_end(31) == []
    assert c.truncate_from_end(20) == [(3, 30), (2, 20)]
    assert c.entries == [(0, 0), (1, 10)]
    assert c.truncate_from_end(-1) == []
    assert c.truncate_from_end(0) == [(1, 10), (0, 0)]
    assert c.entries == []


def test_truncate_from_start_moves_the_last_removed_entry():
    c = cache((0, 0), (1, 10), (2, 20), (3, 30))
    assert c.truncate_from_start(25) == [(0, 0), (1, 10), (2, 20)]
    assert c.entries == [(2, 25), (3, 30)]
    assert c.truncate_from_start(30) == [(2, 25), (3, 30)]
    assert c.entries == [(3, 30)]
    assert c.truncate_from_start(5) == []
    assert c.entries == [(3, 30)]


def test_epoch_for_offset():
    c = cache((1, 10), (3, 20), (4, 40))
    assert c.epoch_for_offset(5) is None
    assert c.epoch_for_offset(10) == 1
    assert c.epoch_for_offset(19) == 1
    assert c.epoch_for_offset(20) == 3
    assert c.epoch_for_offset(39) == 3
    assert c.epoch_for_offset(40) == 4
    assert c.epoch_for_offset(10 ** 12) == 4
    assert LeaderEpochCache().epoch_for_offset(0) is None


def test_write_is_the_checkpoint_text(tmp_path):
    d = str(tmp_path)
    path = cache((0, 0), (2, 17), (5, 1234567890123)).write(d)
    assert os.path.basename(path) == "leader-epoch-checkpoint"
    assert text(d) == b"0\n3\n0 0\n2 17\n5 1234567890123\n"
    LeaderEpochCache().write(d)
    assert text(d) == b"0\n0\n"
    assert sorted(os.listdir(d)) == ["leader-epoch-checkpoint"]  # no temporary file left


def test_read_assigns_the_file_entries(tmp_path):
    d = str(tmp_path)
    assert LeaderEpochCache.read(d).entries == []
    with open(os.path.join(d, "leader-epoch-checkpoint"), "w") as f:
        f.write("0\n3\n1  0\n4\t50\n6 70\n")
    c = LeaderEpochCache.read(d)
    assert c.entries == [(1, 0), (4, 50), (6, 70)]
    c.truncate_from_end(60)
    c.write(d)
    assert text(d) == b"0\n2\n1 0\n4 50\n"
    # entries that go back are dropped as assign drops them when the broker builds its cache
    with open(os.path.join(d, "leader-epoch-checkpoint"), "w") as f:
        f.write("0\n3\n1 0\n4 50\n5 40\n")
    assert LeaderEpochCache.read(d).entries == [(1, 0), (5, 40)]


def test_read_refuses_a_malformed_file(tmp_path):
    d = str(tmp_path)
    with open(os.path.join(d, "leader-epoch-checkpoint"), "w") as f:
        f.write("1\n1\n0 0\n")
    with pytest.raises(FileFormatError):
        LeaderEpochCache.read(d)
