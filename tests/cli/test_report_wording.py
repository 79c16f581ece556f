"""What the reports of `recover`, `retain` and `describe` say is what happened: an index rebuilt
where there was none is created (not replaced), a dry run's indexes would be rebuilt, the
quarantine is named only when something was set aside in it, KRaft's own files are not called
unknown, the `.deleted` files retain removes are counted, a run that could not start prints no
summary line of zero partitions, and describe's last word is not "consistent" when a partition
could not be read."""

import os
import shutil
from pathlib import Path

import appendcheck as ac
import indexgen as ig
import kafkagen as kg
from dumpcheck import REPO
from dumpcheck import json_lines as json_objs
from dumpcheck import kafkalog_process as kafkalog
from kafkagen import Rec

FIXTURES = Path(REPO, "fixtures", "logdir")


def _copy(tmp_path):
    return Path(shutil.copytree(FIXTURES, tmp_path / "logdir"))


def _segment_line(out, name):
    (line,) = [line for line in out.splitlines() if line.split(": ", 1)[0].endswith(name)
               and "indexes" in line]
    return line


# the segment of events-0 from its recovery point on: recover rebuilds its indexes
SEGMENT = "%020d" % 100


def test_an_index_where_there_was_none_is_created(tmp_path):
    part = _copy(tmp_path) / "events-0"
    for kind in ("index", "timeindex"):
        os.unlink(part / ("%s.%s" % (SEGMENT, kind)))
    dry = kafkalog("recover", "--dry-run", part)
    assert dry.returncode == 1, dry
    line = _segment_line(dry.stdout, SEGMENT + ".log")
    assert "indexes would be rebuilt: index would be created, timeindex would be created" in line
    assert "replaced" not in line and "indexes rebuilt" not in line
    objs = json_objs(kafkalog("recover", "--dry-run", "--format", "json", part).stdout)
    (seg,) = [o for o in objs if o["type"] == "segment" and o["baseOffset"] == 100]
    assert (seg["indexesCreated"], seg["indexesReplaced"]) == (["index", "timeindex"], [])
    real = kafkalog("recover", part)
    assert real.returncode == 1, real
    line = _segment_line(real.stdout, SEGMENT + ".log")
    assert "indexes rebuilt: index created, timeindex created" in line
    assert "replaced" not in line
    # nothing was set aside: no line naming the quarantine as keeping what was removed
    assert "kept in" not in real.stdout and "quarantine" not in real.stdout


def test_an_index_that_differs_is_replaced_and_kept(tmp_path):
    part = _copy(tmp_path) / "events-0"
    (part / ("%s.timeindex" % SEGMENT)).write_bytes(bytes(12))  # one entry, all zero
    dry = kafkalog("recover", "--dry-run", part)
    line = _segment_line(dry.stdout, SEGMENT + ".log")
    assert "indexes would be rebuilt: timeindex would be replaced" in line
    real = kafkalog("recover", part)
    line = _segment_line(real.stdout, SEGMENT + ".log")
    assert "indexes rebuilt: timeindex replaced" in line
    assert "what was removed is kept in" in real.stdout


def test_a_dry_run_on_sound_indexes(tmp_path):
    part = _copy(tmp_path) / "events-0"
    dry = kafkalog("recover", "--dry-run", "--full", part)
    for line in dry.stdout.splitlines():
        if "indexes" in line:
            assert "indexes would be rebuilt: the files are the same" in line, line


def test_kraft_files_are_not_unknown(tmp_path):
    part = tmp_path / "logdir" / "__cluster_metadata-0"
    w = kg.SegmentWriter(0)
    w.add_v2([Rec(b"k", b"v", kg.T0)])
    ig.write_partition(part, [(0, w.data())])
    (part / "quorum-state").write_text('{"leaderId":1,"leaderEpoch":3,"votedId":-1,'
                                       '"data_version":1}')
    (part / "quorum-state.tmp").write_text("{")
    (part / "00000000000000000001-0000000003.checkpoint.part").write_bytes(b"")
    (part / "notes.txt").write_text("x")
    p = kafkalog("recover", "--dry-run", part)
    assert p.returncode in (0, 1), p
    unknown = [line for line in p.stdout.splitlines() if "not a name Kafka gives" in line]
    assert len(unknown) == 1 and "notes.txt" in unknown[0], p.stdout


def test_retain_counts_the_deleted_files_it_removes(tmp_path):
    part = _copy(tmp_path) / "orders-0"
    first = kafkalog("retain", "--log-start-offset", 50, part)
    assert first.returncode == 0, first
    deleted = sorted(n for n in os.listdir(part) if n.endswith(".deleted"))
    assert len(deleted) >= 2
    dry = kafkalog("retain", "--dry-run", "--file-delete-delay-ms", 0, part)
    assert "%d .deleted files would be removed" % len(deleted) in dry.stdout, dry.stdout
    assert sorted(n for n in os.listdir(part) if n.endswith(".deleted")) == deleted
    same = Path(shutil.copytree(part, tmp_path / "same" / "orders-0"))
    p = kafkalog("retain", "--file-delete-delay-ms", 0, "--format", "json", part)
    assert p.returncode == 0, p
    objs = json_objs(p.stdout)
    assert [o["deletedFilesRemoved"] for o in objs if o["type"] == "partition"] == [len(deleted)]
    assert objs[-1]["deletedFilesRemoved"] == len(deleted)
    assert not [n for n in os.listdir(part) if n.endswith(".deleted")]
    # the text, on the same files
    text = kafkalog("retain", "--file-delete-delay-ms", 0, same)
    last = text.stdout.splitlines()[-1]
    assert "nothing to delete" not in last
    assert "%d .deleted files removed" % len(deleted) in last, last
    assert not [n for n in os.listdir(same) if n.endswith(".deleted")]


def test_no_summary_of_nothing_after_a_path_error(tmp_path):
    for args in (["recover"], ["recover", "--dry-run"], ["retain", "--log-start-offset", 1],
                 ["cleaner"], ["compact"]):
        p = kafkalog(*args, tmp_path / "nonexistent")
        assert p.returncode == 2, (args, p)
        assert p.stdout == "", (args, p.stdout)
        assert len(p.stderr.splitlines()) == 1 and "nonexistent" in p.stderr, (args, p.stderr)
        # JSON still ends with its summary object
        objs = json_objs(kafkalog(*args, "--format", "json", tmp_path / "nonexistent").stdout)
        assert objs[-1]["type"] == "summary" and objs[-1]["partitions"] == 0


def test_no_summary_of_nothing_after_a_refused_run(tmp_path):
    logdir = _copy(tmp_path)
    with ac.lock_held(logdir):
        for args in (["recover"], ["retain", "--log-start-offset", 50]):
            p = kafkalog(*args, logdir / "orders-0")
            assert p.returncode == 2, (args, p)
            assert p.stdout == "", (args, p.stdout)
            assert len(p.stderr.splitlines()) == 1, (args, p.stderr)


def test_describe_does_not_call_a_partly_read_directory_consistent(tmp_path):
    logdir = _copy(tmp_path)
    os.mkfifo(logdir / "orders-1" / ("%020d.log" % 99))
    p = kafkalog("describe", logdir)
    assert p.returncode == 2, p
    last = p.stdout.splitlines()[-1]
    assert not last.endswith("consistent") and "1 unreadable" in last, last
    objs = json_objs(kafkalog("describe", "--format", "json", logdir).stdout)
    assert objs[-1]["unreadable"] == 1 and objs[-1]["consistent"] is False
