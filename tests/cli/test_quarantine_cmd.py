"""`kafkalog quarantine list|restore|purge`: what `recover` set aside, listed from its manifests,
put back exactly, and purged by age.

The partitions are written by kafka-python (``kafkagen``) with broker-equivalent indexes
(``indexgen``), damaged, and recovered by `kafkalog recover`; every expectation is the bytes
read before the recovery.
"""

import datetime
import json
import os

import pytest

import indexgen as ig
from appendcheck import lock_held
from dumpcheck import kafkalog, on_a_terminal
from test_recover import (make_partition, mut_flipped_bit, mut_garbage_tail, mut_truncated_batch,
                          name, snapshot_name)

QUARANTINE = "kafkalog-quarantine"


def run(*args):
    res = kafkalog(*args)
    assert "Traceback" not in res.err + res.out, res
    return res


def state(log_dir):
    """{relative path: bytes} of every file of the log directory but the quarantine folders
    (and the .lock, which commands create)."""
    out = {}
    for root, dirs, files in os.walk(log_dir):
        dirs[:] = [d for d in dirs if d != QUARANTINE]
        for f in files:
            p = os.path.join(root, f)
            rel = os.path.relpath(p, log_dir)
            if rel != ".lock":
                with open(p, "rb") as fh:
                    out[rel] = fh.read()
    return out


def runs_of(part_dir):
    root = os.path.join(part_dir, QUARANTINE)
    return sorted(os.listdir(root)) if os.path.isdir(root) else []


def damage(part, seg_no, mutation):
    path = part.segs[seg_no].paths["log"]
    new, _ = mutation(part.segs[seg_no].data)
    ig.write_file(path, new)


# -- the damage kinds of the round trip ----------------------------------------------------------

def torn_tail(part):
    damage(part, len(part.segs) - 1, mut_truncated_batch)


def garbage_tail(part):
    damage(part, len(part.segs) - 1, mut_garbage_tail)


def missing_and_bad_index(part):
    """A sealed segment's .index gone, another's .timeindex garbled (set aside and rebuilt)."""
    os.unlink(os.path.join(part.dir, name(part.bases[0], "index")))
    with open(os.path.join(part.dir, name(part.bases[1], "timeindex")), "r+b") as f:
        f.write(b"\x7f" * 12)


def stray_snapshot(part):
    ig.write_file(os.path.join(part.dir, snapshot_name(part.bases[0] + 5)), ig.encode_snapshot([]))


def later_segments_set_aside(part):
    """A bit flipped in the first segment: recover cuts it and sets the later ones aside."""
    damage(part, 0, mut_flipped_bit)


def epoch_past_the_end(part):
    """A torn tail, and the leader-epoch-checkpoint naming an epoch that starts past the log
    end: recover truncates it (its old bytes copied to quarantine, the file rewritten)."""
    torn_tail(part)
    path = os.path.join(part.dir, "leader-epoch-checkpoint")
    with open(path, "rb") as f:
        lines = f.read().decode().split()
    entries = [(int(lines[i]), int(lines[i + 1])) for i in range(2, len(lines), 2)]
    entries.append((entries[-1][0] + 1 if entries else 1, part.leo - 1))
    ig.write_file(path, ig.leader_epoch_checkpoint(entries))


DAMAGE = {"torn-tail": torn_tail, "epoch-past-the-end": epoch_past_the_end, "garbage-tail": garbage_tail,
          "missing-index": missing_and_bad_index, "stray-snapshot": stray_snapshot,
          "later-segment": later_segments_set_aside}


def damaged(tmp_path, kind):
    log_dir = str(tmp_path / "logdir")
    part = make_partition(os.path.join(log_dir, "orders-0"))
    DAMAGE[kind](part)
    return log_dir, part


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_restore_round_trip(tmp_path, kind):
    """recover, restore: the partition is what it was before recover, byte for byte: every
    file there before has its bytes again, and the files recover wrote where there were none
    (indexes, snapshots rebuilt from the log) are set aside; recover again: the state of the
    first recover, byte for byte."""
    log_dir, part = damaged(tmp_path, kind)
    before = state(log_dir)
    res = run("recover", log_dir)
    assert res.code == 1, res
    recovered = state(log_dir)
    assert recovered != before
    (run_id,) = runs_of(part.dir)

    res = run("quarantine", "restore", part.dir, run_id, "--dry-run")
    assert res.code == 0, res
    assert "would be" in res.out and state(log_dir) == recovered

    res = run("quarantine", "restore", part.dir, run_id)
    assert res.code == 0, res
    assert "restored" in res.out
    after = state(log_dir)
    for rel, data in before.items():
        if rel == "recovery-point-offset-checkpoint":
            continue
        assert rel in after, "%s not restored" % rel
        assert after[rel] == data, "%s: bytes differ from before recover" % rel
    extra = set(after) - set(before) - {"recovery-point-offset-checkpoint"}
    assert not extra, extra
    written = set(recovered) - set(before) - {"recovery-point-offset-checkpoint"}
    # what stood in the way is kept, verbatim, in a new run
    displaced = [r for r in runs_of(part.dir) if r != run_id]
    for r in displaced:
        with open(os.path.join(part.dir, QUARANTINE, r, "manifest.json"), "rb") as f:
            doc = json.load(f)
        assert doc["tool"] == "kafkalog quarantine restore"
        for e in doc["entries"]:
            with open(os.path.join(part.dir, QUARANTINE, r, e["saved_as"]), "rb") as f:
                assert f.read() == recovered[os.path.join("orders-0", e["file"])]
    changed = {rel for rel in recovered if rel in before and recovered[rel] != before[rel]
               and not rel.endswith(".log") and rel != "recovery-point-offset-checkpoint"}
    assert len(displaced) == (1 if changed or written else 0)

    res = run("recover", log_dir)
    assert res.code == 1, res
    assert state(log_dir) == recovered

    # the restored run is marked and cannot be restored twice
    res = run("quarantine", "restore", part.dir, run_id)
    assert res.code == 2 and "restored already" in res.err and len(res.err_lines) == 1, res


def test_list_after_recover(tmp_path):
    log_dir, part = damaged(tmp_path, "later-segment")
    assert run("recover", log_dir).code == 1
    (run_id,) = runs_of(part.dir)
    res = run("quarantine", "list", log_dir, "--format", "json")
    assert res.code == 0, res
    obj, summary = [json.loads(line) for line in res.out.splitlines()]
    assert summary["type"] == "summary" and summary["command"] == "quarantine list"
    assert (summary["runs"], summary["files"], summary["bytes"]) == (1, obj["files"], obj["bytes"])
    assert obj["topic"] == "orders" and obj["partition"] == 0 and obj["run"] == run_id
    assert obj["type"] == "quarantineRun" and not obj["restored"]
    cuts = [e for e in obj["entries"] if e["what"] == "cut"]
    assert len(cuts) == 1
    cut = cuts[0]
    data = part.segs[0].data
    new, prefix = mut_flipped_bit(data)
    assert cut["range"] == [prefix, len(new)] and cut["bytes"] == len(new) - prefix
    kept = ig.read_log(new[:prefix])
    assert cut["firstOffset"] == kept[-1].last_offset + 1
    moved = {e["file"]: e for e in obj["entries"] if e["what"] == "moved"}
    for seg in part.segs[1:]:
        e = moved[name(seg.base_offset, "log")]
        assert e["bytes"] == len(seg.data)
        batches = ig.read_log(seg.data)
        assert (e["firstOffset"], e["lastOffset"]) == (seg.base_offset, batches[-1].last_offset)
    # the files the run wrote where there were none (the producer snapshot at the new log
    # end, say) are listed with their hash, and are not files held in the run folder
    held = [e for e in obj["entries"] if e["what"] != "written"]
    written = [e for e in obj["entries"] if e["what"] == "written"]
    assert name(cut["firstOffset"], "snapshot") in [e["file"] for e in written], written
    for e in written:
        assert e["savedAs"] == "" and len(e["sha256"]) == 64
        with open(os.path.join(part.dir, e["file"]), "rb") as f:
            assert len(f.read()) == e["bytes"]
    assert obj["files"] == len(held) == len(obj["entries"]) - len(written)
    assert obj["bytes"] == sum(e["bytes"] for e in held)
    for e in obj["entries"]:
        assert e["topic"] == "orders" and e["partition"] == 0
        assert all(" " not in k and "_" not in k for k in e)
    # text on a pipe: one line per run, one per entry
    res = run("quarantine", "list", part.dir)
    assert res.code == 0, res
    lines = res.out.splitlines()
    assert lines[0].startswith(part.dir + ": run " + run_id)
    assert len(lines) == 1 + len(obj["entries"])
    assert any(line.strip().startswith("cut %s" % name(0, "log")) and "bytes %d-%d" % (
        prefix, len(new)) in line for line in lines)


def test_list_on_a_terminal_is_a_table_once(tmp_path):
    log_dir, part = damaged(tmp_path, "torn-tail")
    assert run("recover", log_dir).code == 1
    (run_id,) = runs_of(part.dir)
    code, out = on_a_terminal(["quarantine", "list", log_dir], columns=250)
    assert code == 0, out
    assert "━" in out or "─" in out
    assert ": run " not in out                     # the pipe's lines are not printed too
    assert out.count(name(part.bases[-1], "log")) == 1 and run_id in out


def test_restore_refused_while_locked(tmp_path):
    log_dir, part = damaged(tmp_path, "torn-tail")
    assert run("recover", log_dir).code == 1
    (run_id,) = runs_of(part.dir)
    recovered = state(log_dir)
    with lock_held(log_dir):
        res = run("quarantine", "restore", part.dir, run_id)
        assert res.code == 2 and len(res.err_lines) == 1 and "locked" in res.err, res
        assert state(log_dir) == recovered
        # a dry run reads anyway, with a warning
        res = run("quarantine", "restore", part.dir, run_id, "--dry-run")
        assert res.code == 0 and "warning" in res.err, res
        res = run("quarantine", "purge", log_dir, "--older-than", "0")
        assert res.code == 2 and len(res.err_lines) == 1, res
    assert state(log_dir) == recovered and runs_of(part.dir) == [run_id]


def test_restore_refused_when_the_log_grew(tmp_path):
    """A tail cut goes back only onto a .log that still ends where it was cut."""
    log_dir, part = damaged(tmp_path, "garbage-tail")
    assert run("recover", log_dir).code == 1
    (run_id,) = runs_of(part.dir)
    log = part.segs[-1].paths["log"]
    with open(log, "ab") as f:     # a broker appended since
        f.write(part.segs[0].data[:61])
    grown = state(log_dir)
    res = run("quarantine", "restore", part.dir, run_id)
    assert res.code == 2 and len(res.err_lines) == 1, res
    assert "newer data" in res.err and os.path.basename(log) in res.err
    assert state(log_dir) == grown
    assert not [r for r in runs_of(part.dir) if r != run_id]  # no displacement run made


@pytest.mark.parametrize("where", ["same-name", "log-end"])
def test_restore_refused_over_a_newer_segment(tmp_path, where):
    """Segments set aside do not come back over a .log written since (same-name), nor beside
    one (log-end: a broker rolled a segment at the log end recover left)."""
    log_dir, part = damaged(tmp_path, "later-segment")
    assert run("recover", log_dir).code == 1
    (run_id,) = runs_of(part.dir)
    if where == "same-name":
        ig.write_file(os.path.join(part.dir, name(part.bases[1], "log")), part.segs[1].data[:100])
    else:
        _, prefix = mut_flipped_bit(part.segs[0].data)
        leo = ig.read_log(part.segs[0].data[:prefix])[-1].last_offset + 1
        ig.write_file(os.path.join(part.dir, name(leo, "log")), part.segs[0].data[:61])
    now = state(log_dir)
    res = run("quarantine", "restore", part.dir, run_id)
    assert res.code == 2 and len(res.err_lines) == 1 and "newer data" in res.err, res
    assert state(log_dir) == now


def test_interrupted_restore_is_finished_by_a_rerun(tmp_path):
    """Half the tail appended (a restore killed in the middle): a rerun appends the rest."""
    log_dir, part = damaged(tmp_path, "garbage-tail")
    before = state(log_dir)
    assert run("recover", log_dir).code == 1
    (run_id,) = runs_of(part.dir)
    log = part.segs[-1].paths["log"]
    rel = os.path.relpath(log, log_dir)
    kept = os.path.getsize(log)
    with open(log, "ab") as f:
        f.write(before[rel][kept:kept + 10])
    res = run("quarantine", "restore", part.dir, run_id)
    assert res.code == 0, res
    assert state(log_dir)[rel] == before[rel]


def test_unreadable_manifest(tmp_path):
    log_dir, part = damaged(tmp_path, "torn-tail")
    assert run("recover", log_dir).code == 1
    (run_id,) = runs_of(part.dir)
    with open(os.path.join(part.dir, QUARANTINE, run_id, "manifest.json"), "ab") as f:
        f.write(b"{")
    res = run("quarantine", "list", log_dir)
    assert res.code == 2 and "manifest not read" in res.out, res
    now = state(log_dir)
    res = run("quarantine", "restore", log_dir, run_id)
    assert res.code == 2 and len(res.err_lines) == 1 and "manifest not read" in res.err, res
    assert state(log_dir) == now


def set_run_time(part_dir, run_id, when):
    path = os.path.join(part_dir, QUARANTINE, run_id, "manifest.json")
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    doc["time"] = when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)


def test_purge_by_age(tmp_path):
    log_dir, part = damaged(tmp_path, "torn-tail")
    assert run("recover", log_dir).code == 1
    stray_snapshot(part)
    assert run("recover", log_dir).code == 1
    old, new = runs_of(part.dir)
    set_run_time(part.dir, old, datetime.datetime.now(datetime.timezone.utc)
                 - datetime.timedelta(days=10))
    recovered = state(log_dir)
    res = run("quarantine", "purge", log_dir, "--older-than", "7", "--dry-run")
    assert res.code == 0 and "would be deleted" in res.out and old in res.out, res
    assert new not in res.out and runs_of(part.dir) == [old, new]
    res = run("quarantine", "purge", log_dir, "--older-than", "7", "--format", "json")
    assert res.code == 0, res
    objs = [json.loads(line) for line in res.out.splitlines()]
    assert [o["run"] for o in objs if o["type"] == "purgedRun"] == [old]
    assert objs[-1] == {"type": "summary", "command": "quarantine purge", "runs": 1,
                        "bytes": objs[0]["bytes"], "dryRun": False}
    assert objs[0]["topic"] == "orders" and objs[0]["partition"] == 0
    assert runs_of(part.dir) == [new]
    assert state(log_dir) == recovered   # nothing else touched
    res = run("quarantine", "purge", log_dir, "--older-than", "7")
    assert res.code == 0 and runs_of(part.dir) == [new], res


@pytest.mark.parametrize("args", [
    ("restore", "{part}", "20000101T000000.000000Z"),
    ("restore", "{part}", "../../x"),
    ("restore", "{tmp}/nowhere", "x"),
    ("list", "{tmp}/plain"),
    ("list", "{tmp}/nowhere"),
])
def test_bad_input_one_line_exit_2(tmp_path, args):
    log_dir, part = damaged(tmp_path, "torn-tail")
    assert run("recover", log_dir).code == 1
    os.makedirs(str(tmp_path / "plain"))
    res = run("quarantine", *[a.format(part=part.dir, tmp=tmp_path) for a in args])
    assert res.code == 2, res
    assert len(res.err_lines) == 1 and res.err_lines[0].strip(), res


@pytest.mark.parametrize("args", [("purge", "{part}", "--older-than", "-1"), ("purge", "{part}"),
                                  ("restore", "{part}")])
def test_bad_options_exit_2(tmp_path, args):
    """click's usage errors: exit 2, the last line says what is wrong."""
    log_dir, part = damaged(tmp_path, "torn-tail")
    res = run("quarantine", *[a.format(part=part.dir) for a in args])
    assert res.code == 2 and res.err_lines[-1].startswith("Error:"), res


@pytest.mark.slow
def test_restore_killed_before_every_step(tmp_path):
    """A restore SIGKILLed just before each of its file operations in turn (tests/killshim.py),
    then run again, leaves what an uninterrupted restore leaves, byte for byte; recover then
    leaves what the first recover left. The run: later segments set aside, a cut tail, indexes
    replaced, snapshots, and a leader-epoch-checkpoint rewritten."""
    import shutil

    import crashcheck as cc
    log_dir, part = damaged(tmp_path / "seed", "later-segment")
    epochs = os.path.join(part.dir, "leader-epoch-checkpoint")
    with open(epochs, "rb") as f:
        lines = f.read().decode().split()
    last = (int(lines[-2]), int(lines[-1]))
    ig.write_file(epochs, ig.leader_epoch_checkpoint([last, (last[0] + 1, part.leo - 1)]))
    assert run("recover", log_dir).code == 1
    recovered = state(log_dir)
    (run_id,) = runs_of(part.dir)
    rel_part = os.path.relpath(part.dir, log_dir)

    def copy(label):
        dst = str(tmp_path / label)
        shutil.copytree(log_dir, dst, symlinks=True)
        return dst, os.path.join(dst, rel_part)

    ref, ref_part = copy("ref")
    args = ["quarantine", "restore", ref_part, run_id]
    steps = cc.count_steps(args)
    shutil.rmtree(ref)
    ref, ref_part = copy("ref")
    assert run(*args).code == 0
    restored = state(ref)
    assert restored != recovered
    for k in range(1, steps + 1):
        d, p = copy("k%d" % k)
        killed, _, _ = cc.kafkalog_killed_at(k, ["quarantine", "restore", p, run_id])
        assert killed, k
        res = run("quarantine", "restore", p, run_id)
        # (killed once restored.json was written: the restore was complete)
        assert res.code == 0 or (k >= steps - 3 and "restored already" in res.err), (k, res)
        assert state(d) == restored, k
        assert run("recover", d).code == 1
        assert state(d) == recovered, k
        shutil.rmtree(d)


def marker_case(tmp_path):
    """A clean shutdown, and a segment without its .index and with a garbled .timeindex: the
    sanity check sends it to recovery; recover writes the .index (no file there before) and
    replaces the .timeindex."""
    log_dir, part = damaged(tmp_path, "stray-snapshot")
    os.unlink(os.path.join(part.dir, name(part.bases[0], "index")))
    with open(os.path.join(part.dir, name(part.bases[0], "timeindex")), "r+b") as f:
        f.write(b"\x7f" * 12)
    ig.write_file(os.path.join(log_dir, ".kafka_cleanshutdown"), b'{"brokerEpoch":7}')
    before = state(log_dir)
    assert run("recover", log_dir).code == 1
    (run_id,) = runs_of(part.dir)
    return log_dir, part, run_id, before, state(log_dir)


def test_restore_keeps_the_clean_shutdown_marker(tmp_path):
    """The marker is lifted while the restore changes files and put back, the same bytes,
    after (as recover does); every file there before recover has its bytes again."""
    log_dir, part, run_id, before, recovered = marker_case(tmp_path)
    assert recovered[".kafka_cleanshutdown"] == b'{"brokerEpoch":7}'
    res = run("quarantine", "restore", part.dir, run_id)
    assert res.code == 0 and "timeindex" in res.out, res
    after = state(log_dir)
    assert after[".kafka_cleanshutdown"] == b'{"brokerEpoch":7}'
    assert {k: after.get(k) for k in before} == before


def add_written_entry(part_dir, run_id, file_name):
    """What recover would record with quarantine.written_entry for a file it wrote where
    there was none."""
    from kafkalog_cli.log.quarantine import written_entry
    path = os.path.join(part_dir, QUARANTINE, run_id, "manifest.json")
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    with open(os.path.join(part_dir, file_name), "rb") as f:
        doc["entries"].append(written_entry(file_name, f.read(), "rebuilt from the log"))
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)


def test_written_entries_are_set_aside(tmp_path):
    """A file the run wrote where there was none, recorded as a ``written`` entry, is set
    aside by the restore: the state before recover comes back whole, and recover then gives
    the first recover's state even after a clean shutdown (the sanity check finds the .index
    missing again)."""
    log_dir, part, run_id, before, recovered = marker_case(tmp_path)
    index = name(part.bases[0], "index")
    res = run("quarantine", "list", part.dir, "--format", "json")
    obj, _ = [json.loads(line) for line in res.out.splitlines()]
    written = [e["file"] for e in obj["entries"] if e["what"] == "written"]
    assert index in written and len(set(written)) == len(written)
    for n in written:
        assert "orders-0/" + n in recovered and "orders-0/" + n not in before, n
    assert obj["files"] == len(obj["entries"]) - len(written)
    res = run("quarantine", "restore", part.dir, run_id)
    assert res.code == 0 and "where there was no file" in res.out, res
    after = state(log_dir)
    # (the recovery point recover wrote stays, lowered: the manifest has no old value)
    assert after.pop("recovery-point-offset-checkpoint") == b"0\n1\norders 0 0\n"
    assert after == before
    assert run("recover", log_dir).code == 1
    assert state(log_dir) == recovered


def test_written_entry_changed_since_is_newer_data(tmp_path):
    log_dir, part, run_id, before, recovered = marker_case(tmp_path)
    add_written_entry(part.dir, run_id, "partition.metadata")
    with open(os.path.join(part.dir, "partition.metadata"), "ab") as f:
        f.write(b"\n")
    now = state(log_dir)
    res = run("quarantine", "restore", part.dir, run_id)
    assert res.code == 2 and "newer data" in res.err and len(res.err_lines) == 1, res
    assert state(log_dir) == now


def test_restore_then_recover_after_a_clean_shutdown(tmp_path):
    log_dir, part, run_id, before, recovered = marker_case(tmp_path)
    assert run("quarantine", "restore", part.dir, run_id).code == 0
    assert run("recover", log_dir).code == 1
    assert state(log_dir) == recovered


def test_a_half_purged_run_is_never_listed_and_the_next_purge_removes_it(tmp_path):
    log_dir, part = damaged(tmp_path, "torn-tail")
    assert run("recover", log_dir).code == 1
    (run_id,) = runs_of(part.dir)
    root = os.path.join(part.dir, QUARANTINE)
    # what a purge killed after its rename leaves
    os.rename(os.path.join(root, run_id), os.path.join(root, "." + run_id + ".purging"))
    res = run("quarantine", "list", log_dir, "--format", "json")
    assert res.code == 0, res
    (summary,) = [json.loads(line) for line in res.out.splitlines()]
    assert summary["type"] == "summary" and summary["runs"] == 0, summary
    res = run("quarantine", "purge", log_dir, "--older-than", "1")
    assert res.code == 0, res
    assert os.listdir(root) == []
