"""The Python API raises only KafkalogError subclasses: a missing file or directory is a
MissingFileError (a FileAccessError, also a FileNotFoundError, naming the path), whether it is
met when a method is called or while the iterator it returns is read."""

import os
import shutil

import pytest

from dumpcheck import REPO

LOGDIR = os.path.join(REPO, "fixtures", "logdir")


def _missing(call, path):
    from kafkalog_cli import FileAccessError, KafkalogError, MissingFileError
    with pytest.raises(KafkalogError) as info:
        call()
    e = info.value
    assert isinstance(e, MissingFileError) and isinstance(e, FileAccessError)
    assert isinstance(e, FileNotFoundError)  # what callers catching it before still catch
    assert e.exit_code == 2 and e.filename == path
    assert path in str(e)


@pytest.fixture
def copy(tmp_path):
    return shutil.copytree(LOGDIR, str(tmp_path / "logdir"))


def test_a_segment_without_its_index_files(copy):
    from kafkalog_cli import Partition
    directory = os.path.join(copy, "events-0")
    segment = Partition(directory).segments()[0]
    for path in (segment.index_path, segment.time_index_path, segment.txn_index_path):
        if os.path.exists(path):
            os.unlink(path)
    _missing(segment.offset_index, segment.index_path)
    _missing(segment.time_index, segment.time_index_path)
    _missing(segment.txn_index, segment.txn_index_path)


def test_a_partition_that_does_not_exist(tmp_path):
    from kafkalog_cli import Partition
    missing = str(tmp_path / "nonexistent-0")
    partition = Partition(missing)
    _missing(lambda: list(partition.records()), missing)
    _missing(partition.segments, missing)
    _missing(lambda: partition.offset_for_time(0), missing)
    _missing(partition.describe, missing)
    _missing(lambda: list(partition.transactions()), missing)
    _missing(partition.cleaner_status, missing)
    _missing(lambda: partition.recover(dry_run=True), missing)
    assert not os.path.exists(missing)


def test_a_log_directory_that_does_not_exist(tmp_path):
    from kafkalog_cli import LogDir
    missing = str(tmp_path / "nonexistent")
    _missing(LogDir(missing).partitions, missing)
    _missing(LogDir(missing).describe, missing)
    _missing(lambda: LogDir(missing).recover(dry_run=True), missing)


def test_a_segment_removed_while_its_records_are_read(copy):
    """The iterator of records raises the same error when a later segment is gone by the time
    it is opened."""
    from kafkalog_cli import Partition
    partition = Partition(os.path.join(copy, "events-0"))
    segments = partition.segments()
    assert len(segments) > 1
    records = partition.records()
    next(records)
    os.unlink(segments[-1].log_path)
    _missing(lambda: list(records), segments[-1].log_path)


def test_a_segment_file_that_does_not_exist(tmp_path):
    from kafkalog_cli import Segment
    segment = Segment(str(tmp_path), 0)
    _missing(segment.size, segment.log_path)
    _missing(lambda: list(segment.batches()), segment.log_path)
    _missing(segment.next_offset, segment.log_path)
