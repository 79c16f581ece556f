"""`kafkalog compact` end to end: its lines, its JSON, its exit codes."""

import json
import os
import subprocess
import sys

import pytest

from kafkagen import Rec, SegmentWriter, garbage_tail

KAFKALOG = [sys.executable, "-m", "kafkalog_cli"]
T0 = 1_700_000_000_000
NOW = str(T0 + 3_600_000)


def _partition(tmp_path):
    d = tmp_path / "compacted-0"
    s0 = SegmentWriter(0)
    s0.add_v2([Rec(b"k%d" % (i % 3), b"v%d" % i, T0) for i in range(9)])
    s0.write(str(d))
    s1 = SegmentWriter(9)
    s1.add_v2([Rec(b"k0", b"last", T0 + 1)])
    s1.write(str(d))
    return d


def _run(*args):
    proc = subprocess.run([*KAFKALOG, "compact", "--now", NOW, "--cleanup-policy", "compact",
                           *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=120)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def test_a_dry_run_then_the_pass(tmp_path):
    d = _partition(tmp_path)
    code, out, err = _run("--dry-run", d)
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == (
        "%s: would clean offsets 0-8 (1 segment into 1 segment): would remove 6 records of 9 "
        "records, " % d) + out.splitlines()[0].split("records, ", 1)[1]
    assert "the cleaner checkpoint would move to 9" in out
    assert not (tmp_path / "cleaner-offset-checkpoint").exists()
    code, out, err = _run("--format", "json", d)
    assert (code, err) == (0, "")
    part, summary = map(json.loads, out.splitlines())
    assert (part["type"], part["endOffset"], part["recordsRemoved"]) == ("partition", 9, 6)
    assert part["groups"][0]["bases"] == [0]
    assert part["config"]["cleanup.policy"] == {"value": "compact", "source": "given"}
    assert part["config"]["delete.retention.ms"] == {"value": 86400000, "source": "default"}
    assert summary["type"] == "summary" and summary["cleaned"] == 1
    assert "00000000000000000000.log.deleted" in os.listdir(d)


def test_a_topic_not_compacted_is_said_and_left_alone(tmp_path):
    d = _partition(tmp_path)
    proc = subprocess.run([*KAFKALOG, "compact", d], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=120)
    assert proc.returncode == 0
    assert proc.stdout.decode().splitlines()[0] == (
        "%s: not cleaned: its cleanup.policy does not include compact" % d)


def test_bytes_that_hold_no_batch_exit_1_and_change_nothing(tmp_path):
    d = _partition(tmp_path)
    log = d / "00000000000000000000.log"
    log.write_bytes(garbage_tail(log.read_bytes()))
    before = sorted(os.listdir(d))
    code, out, err = _run(d)
    assert code == 1
    assert len(err.splitlines()) == 1 and "hold no batch" in err
    assert sorted(os.listdir(d)) == before


def test_a_missing_path_exits_2_in_one_line(tmp_path):
    code, out, err = _run(tmp_path / "nowhere-0")
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("kafkalog: ")


def test_recover_finishes_a_pass_killed_once_its_intent_was_written(tmp_path):
    import crashcheck as cc
    _partition(tmp_path / "logs")
    cc.shutil.copytree(tmp_path / "logs", tmp_path / "count")
    args = ["compact", "--now", NOW, "--cleanup-policy", "compact", tmp_path / "count"]
    steps = cc.count_steps(args)
    # the last kill that leaves the intent: after it, only the intent's removal remains
    for step in range(steps, 0, -1):
        cc.shutil.rmtree(tmp_path / "killed", ignore_errors=True)
        cc.shutil.copytree(tmp_path / "logs", tmp_path / "killed")
        killed_dir = tmp_path / "killed" / "compacted-0"
        args[-1] = killed_dir
        killed, _, _ = cc.kafkalog_killed_at(step, args)
        assert killed
        if (killed_dir / ".kafkalog-compact-intent").exists():
            break
    before = cc.log_dir_state(str(tmp_path / "killed"))

    def recover(*options, code=1):
        # exit 1: recover found what a kill left, 0: nothing
        proc = subprocess.run([*KAFKALOG, "recover", "--format", "json", *options, killed_dir],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        assert proc.returncode == code, proc.stderr.decode()
        return [json.loads(line) for line in proc.stdout.decode().splitlines()]

    (finished,) = [o for o in recover("--dry-run") if o["type"] == "compactFinished"]
    assert (finished["endOffset"], finished["dryRun"]) == (9, True)
    assert cc.log_dir_state(str(tmp_path / "killed")) == before
    (finished,) = [o for o in recover() if o["type"] == "compactFinished"]
    assert (finished["endOffset"], finished["dryRun"]) == (9, False)
    assert (tmp_path / "killed" / "cleaner-offset-checkpoint").read_text().splitlines()[2] \
        == "compacted 0 9"
    assert not (killed_dir / ".kafkalog-compact-intent").exists()
    after = cc.log_dir_state(str(tmp_path / "killed"))
    assert not [o for o in recover(code=0) if o["type"] in ("compactFinished", "moved",
                                                             "renamed")]
    assert cc.log_dir_state(str(tmp_path / "killed")) == after


PLANTED = {
    # a symlink at each name a pass creates, leading outside the log directory
    "the intent's temporary file": "compacted-0/.kafkalog-compact-intent.kafkalog-tmp",
    "the cleaner checkpoint's temporary file": "cleaner-offset-checkpoint.kafkalog-tmp",
    "the new segment's .cleaned log": "compacted-0/00000000000000000000.log.cleaned",
    "the new segment's .cleaned index": "compacted-0/00000000000000000000.index.cleaned",
}


@pytest.mark.parametrize("planted", list(PLANTED))
@pytest.mark.parametrize("dangling", [True, False], ids=["dangling", "to-a-file"])
def test_a_pass_never_writes_through_a_planted_symlink(tmp_path, planted, dangling):
    from appendcheck import tree_hash
    logs = tmp_path / "logs"
    d = _partition(logs)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_bytes(b"do not touch\n" * 10)
    target = outside / ("dangling" if dangling else "precious")
    link = logs / PLANTED[planted]
    link.symlink_to(target)
    before = tree_hash(outside)
    code, out, err = _run(d)
    assert tree_hash(outside) == before, (planted, err)
    assert not (outside / "dangling").exists()
    assert "Traceback" not in err
    # the stale name was removed, never followed: the pass is done
    assert code == 0, err
    assert not link.is_symlink()
    assert (logs / "cleaner-offset-checkpoint").read_text().splitlines()[2] == "compacted 0 9"
