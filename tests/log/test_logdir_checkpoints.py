"""LogDir's offset checkpoints: read once for every partition it lists, read again once the
file is replaced (as the broker's CheckpointFile and kafkalog replace it: a new file renamed
over the old), an unreadable file an error each time it is asked for."""

import os

import pytest

from kafkalog_cli import LogDir, Partition
from kafkalog_cli.log import names
from kafkalog_cli.log.checkpoints import write_offset_checkpoint
from kafkalog_cli.log.files import FileFormatError


def _checkpoint(path, entries):
    lines = ["0", str(len(entries))] + ["%s %d %d" % e for e in entries]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


@pytest.fixture
def log_dir(tmp_path):
    for name in ("orders-0", "orders-1"):
        os.mkdir(tmp_path / name)
        (tmp_path / name / "00000000000000000000.log").write_bytes(b"")
    _checkpoint(tmp_path / names.RECOVERY_POINT_CHECKPOINT,
                [("orders", 0, 40), ("orders", 1, 7), ("orders", 0, 42)])
    return tmp_path


def test_the_partitions_a_log_dir_lists_read_its_checkpoints_through_it(log_dir):
    d = LogDir(str(log_dir))
    p0, p1 = d.partitions()
    assert p0.parent is d and p1.parent is d
    # of two lines for one partition the last counts (OffsetCheckpointFile.read)
    assert p0.checkpointed(names.RECOVERY_POINT_CHECKPOINT) == 42
    assert p1.checkpointed(names.RECOVERY_POINT_CHECKPOINT) == 7
    assert d.offset_checkpoint(names.RECOVERY_POINT_CHECKPOINT) == {("orders", 0): 42,
                                                                   ("orders", 1): 7}
    assert d.offset_checkpoint(names.RECOVERY_POINT_CHECKPOINT, [("orders", 1), ("x", 0)]) == {
        ("orders", 1): 7}
    assert p0.checkpointed(names.LOG_START_OFFSET_CHECKPOINT) is None  # no such file


def test_a_checkpoint_is_read_once_while_it_is_the_same_file(log_dir):
    path = log_dir / names.RECOVERY_POINT_CHECKPOINT
    d = LogDir(str(log_dir))
    assert d.checkpointed(names.RECOVERY_POINT_CHECKPOINT, "orders", 1) == 7
    # the same file (inode, size, modification time) with other bytes: what was read stands
    st = os.stat(path)
    with open(path, "r+") as f:
        f.write("0\n3\norders 0 40\norders 1 8\norders 0 42\n")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size
    assert d.checkpointed(names.RECOVERY_POINT_CHECKPOINT, "orders", 1) == 7
    # a LogDir of its own reads the file as it is
    assert LogDir(str(log_dir)).checkpointed(names.RECOVERY_POINT_CHECKPOINT, "orders", 1) == 8


def test_a_checkpoint_replaced_is_read_again(log_dir):
    partition = LogDir(str(log_dir)).partition("orders", 1)
    assert partition.checkpointed(names.RECOVERY_POINT_CHECKPOINT) == 7
    write_offset_checkpoint(str(log_dir / names.RECOVERY_POINT_CHECKPOINT), {("orders", 1): 9})
    assert partition.checkpointed(names.RECOVERY_POINT_CHECKPOINT) == 9
    os.unlink(log_dir / names.RECOVERY_POINT_CHECKPOINT)
    assert partition.checkpointed(names.RECOVERY_POINT_CHECKPOINT) is None


def test_an_unreadable_checkpoint_raises_each_time(log_dir):
    path = log_dir / names.LOG_START_OFFSET_CHECKPOINT
    path.write_text("0\n1\norders 0 many\n")
    partition = Partition(str(log_dir / "orders-0"))
    for _ in range(2):
        with pytest.raises(FileFormatError, match="not a number"):
            partition.checkpointed(names.LOG_START_OFFSET_CHECKPOINT)
    # a directory in the checkpoint's place: no entry for the partition, an error to a reader
    # of the whole file
    os.mkdir(log_dir / names.CLEANER_OFFSET_CHECKPOINT)
    assert partition.checkpointed(names.CLEANER_OFFSET_CHECKPOINT) is None
    with pytest.raises(OSError):
        partition.parent.offset_checkpoint(names.CLEANER_OFFSET_CHECKPOINT)


def test_a_log_dir_keeps_the_entries_of_its_partitions_and_finds_the_others(log_dir):
    d = LogDir(str(log_dir))
    p0 = d.holding(str(log_dir / "orders-0"))
    assert p0.checkpointed(names.RECOVERY_POINT_CHECKPOINT) == 42
    # a partition it did not hold: the file read again for it
    assert d.checkpointed(names.RECOVERY_POINT_CHECKPOINT, "orders", 1) == 7
    assert d.offset_checkpoint(names.RECOVERY_POINT_CHECKPOINT, [("orders", 1)]) == {
        ("orders", 1): 7}
