"""Each mutating command killed (SIGKILL, a real process) before every one of its file operations
and at 50 random moments; after `recover` and finishing the job, the whole log directory equals
an uninterrupted run's (tests/crashcheck.py says exactly what is compared). A compaction pass
killed once its intent is written needs no rerun: one `recover` finishes it."""

import json
import os

import pytest

import appendcheck as ac
import crashcheck as cc
import indexgen as ig
import kafkagen as kg

pytestmark = pytest.mark.slow

RETENTION_MS = 10_000
NOW = cc.T0 + 23_003 + RETENTION_MS + 1   # segments 0 and 1 expired, the active one not


@pytest.fixture(scope="module")
def seed(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("seed") / "logs")
    _, leo = cc.write_seed(d)
    return d, leo


# -- append -------------------------------------------------------------------------------------------

APPEND_ARGS = ["--input-format", "jsonl", "--batch-records", "4", "--segment-bytes", "9000",
               "--leader-epoch", "3", "--flush-messages", "10", "--format", "json"]


def append_lines(n, seq100):
    """JSON lines: plain records; producer 100 (idempotent) going on from the seed's sequence,
    then bumping its epoch; producer 202 transactional, a commit or an abort every 7 of its
    records. One line, one offset."""
    lines, seq202, open202, epoch100 = [], 0, 0, 0
    for i in range(n):
        ts = cc.T0 + 100_000 + 10 * i
        value = "appended-%06d-" % i + "x" * 150
        kind = i % 5
        if i == n // 2:
            epoch100, seq100 = 1, 0
        if kind in (0, 3):
            obj = {"key": "a%d" % i, "value": value, "timestamp": ts}
        elif kind == 1:
            obj = {"key": "p%d" % i, "value": value, "timestamp": ts, "producerId": 100,
                   "producerEpoch": epoch100, "sequence": seq100}
            seq100 += 1
        elif open202 >= 7:
            obj = {"control": "abort" if (i // 7) % 2 else "commit", "producerId": 202,
                   "producerEpoch": 0, "coordinatorEpoch": 4, "timestamp": ts}
            open202 = 0
        else:
            obj = {"key": "t%d" % i, "value": value, "timestamp": ts, "producerId": 202,
                   "producerEpoch": 0, "sequence": seq202, "transactional": True}
            seq202 += 1
            open202 += 1
        lines.append(json.dumps(obj))
    return lines


def append_campaign(tmp_path, seed, n_lines):
    log_dir, leo = seed
    lines = append_lines(n_lines, cc.seed_segments()[2])
    stdin = str(tmp_path / "input.jsonl")
    with open(stdin, "w") as f:
        f.write("".join(x + "\n" for x in lines))

    def args(part):
        return ["append", part, *APPEND_ARGS]

    def check_killed(part, out):
        # every offset reported flushed is in the log after recover
        end = ac.next_offset(part)
        flushed = [o["lastOffset"] for o in cc.json_objects(out) if o.get("type") == "flushed"]
        assert not flushed or max(flushed) < end, (flushed, end)

    def resume(part, out):
        done = ac.next_offset(part) - leo
        assert 0 <= done <= len(lines)
        if done < len(lines):
            res = ac.kafkalog_in("append", part, *APPEND_ARGS,
                                 input="".join(x + "\n" for x in lines[done:]))
            assert res.code == 0, res

    return cc.Campaign(tmp_path, log_dir, args, resume, stdin=stdin, check_killed=check_killed)


def test_append_killed_before_every_file_operation(tmp_path, seed):
    c = append_campaign(tmp_path, seed, 40)
    c.every_step()
    print(c.stats)
    assert not c.failures, "\n".join(c.failures)


def test_append_killed_at_random(tmp_path, seed):
    c = append_campaign(tmp_path, seed, 4000)
    c.random_kills()
    print(c.stats)
    assert c.stats["changed_by_kill"] >= 25, c.stats
    assert not c.failures, "\n".join(c.failures)


# -- roll, retain, recover ------------------------------------------------------------------------------

def seed_dir(tmp_path, label, **kw):
    d = str(tmp_path / label / "logs")
    cc.write_seed(d, **kw)
    return d


def rerun(*args):
    def resume(part, out):
        res = ac.kafkalog_in(*args, part)
        assert res.code == 0, res
    return resume


def roll_campaign(tmp_path, clean_shutdown=False):
    # the active segment ends in an open transaction: the snapshot at the new base holds it
    log_dir = seed_dir(tmp_path, "seed-roll", open_transaction=True,
                       clean_shutdown=clean_shutdown)
    return cc.Campaign(tmp_path, log_dir, lambda part: ["roll", part], rerun("roll"))


RETAIN = ["--retention-ms", str(RETENTION_MS), "--now", str(NOW)]


def retain_campaign(tmp_path, delay, clean_shutdown=False):
    log_dir = seed_dir(tmp_path, "seed-retain", clean_shutdown=clean_shutdown)
    args = RETAIN + ["--file-delete-delay-ms", delay]
    return cc.Campaign(tmp_path, log_dir, lambda part: ["retain", *args, part],
                       rerun("retain", *args))


COMPACT = ["--cleanup-policy", "compact", "--now", str(NOW)]


def intent_written(files):
    """Once its intent is written (every new segment complete), a killed pass is one `recover`
    finishes; before, `recover` undoes it and the rerun makes it."""
    return ".kafkalog-compact-intent" in files


def compact_campaign(tmp_path, clean_shutdown=False):
    # each batch of the seed holds a key twice: the pass removes the first of each pair and
    # the markers it no longer needs (the open transaction at 29 ends the pass at segment 23)
    log_dir = seed_dir(tmp_path, "seed-compact", clean_shutdown=clean_shutdown)
    return cc.Campaign(tmp_path, log_dir, lambda part: ["compact", *COMPACT, part],
                       rerun("compact", *COMPACT), finished_by_recover=intent_written)


def keyed_seed(tmp_path):
    """A partition of four sealed segments of keyed records (7 keys updated over and over, a
    tombstone now and then) and an active one: a pass covers all four."""
    log_dir = str(tmp_path / "seed-compact-groups" / "logs")
    segments, offset = [], 0
    for _ in range(5):
        w = kg.SegmentWriter(offset)
        for _ in range(8):
            n = w.next_offset
            w.add_v2([kg.Rec(b"k%d" % ((n + r) % 7),
                             None if (n + r) % 11 == 10 else b"v%d-" % (n + r) + b"x" * 90,
                             cc.T0 + n + r) for r in range(3)])
        segments.append((offset, w.data()))
        offset = w.next_offset
    d = os.path.join(log_dir, cc.PARTITION)
    ig.write_partition(d, segments, preallocate_active=True)
    ig.write_file(os.path.join(d, "leader-epoch-checkpoint"), ig.leader_epoch_checkpoint([(0, 0)]))
    ig.write_file(os.path.join(d, "partition.metadata"), ig.partition_metadata(ig.topic_id(9)))
    return log_dir


def compact_groups_campaign(tmp_path):
    # segment.bytes below two segments' size: each sealed segment is cleaned into its own
    # group, swapped in one after the other
    args = COMPACT + ["--segment-bytes", "2000"]
    return cc.Campaign(tmp_path, keyed_seed(tmp_path), lambda part: ["compact", *args, part],
                       rerun("compact", *args), finished_by_recover=intent_written)


def damaged_seed(tmp_path):
    """The seed with what recover repairs: 37 bytes of garbage after the last batch, the middle
    segment's .timeindex gone, the recovery point at the start of the middle segment."""
    log_dir = seed_dir(tmp_path, "seed-recover")
    part = os.path.join(log_dir, cc.PARTITION)
    logs = sorted(n for n in os.listdir(part) if n.endswith(".log"))
    with open(os.path.join(part, logs[-1]), "ab") as f:
        f.write(kg.random_bytes(37))
    os.unlink(os.path.join(part, logs[1][:-4] + ".timeindex"))
    return log_dir


def recover_campaign(tmp_path):
    return cc.Campaign(tmp_path, damaged_seed(tmp_path), lambda part: ["recover", part],
                       lambda part, out: None)


@pytest.mark.parametrize("command", ["roll", "retain", "retain-with-delay", "recover",
                                     "compact", "compact-groups"])
def test_killed_before_every_file_operation(tmp_path, command):
    c = {"roll": lambda: roll_campaign(tmp_path),
         "compact": lambda: compact_campaign(tmp_path),
         "compact-groups": lambda: compact_groups_campaign(tmp_path),
         "retain": lambda: retain_campaign(tmp_path, "0"),
         "retain-with-delay": lambda: retain_campaign(tmp_path, "60000"),
         "recover": lambda: recover_campaign(tmp_path)}[command]()
    c.every_step()
    print(command, c.stats)
    assert not c.failures, "\n".join(c.failures)


@pytest.mark.parametrize("command", ["roll", "retain", "recover", "compact-groups"])
def test_killed_at_random(tmp_path, command):
    c = {"roll": lambda: roll_campaign(tmp_path),
         "compact-groups": lambda: compact_groups_campaign(tmp_path),
         "retain": lambda: retain_campaign(tmp_path, "0"),
         "recover": lambda: recover_campaign(tmp_path)}[command]()
    c.random_kills()
    print(command, c.stats)
    assert c.stats["changed_by_kill"] >= 20, c.stats
    assert not c.failures, "\n".join(c.failures)


@pytest.mark.parametrize("command", ["append", "roll", "retain", "compact"])
def test_killed_before_every_file_operation_after_a_clean_shutdown(tmp_path, command):
    """The log directory has the broker's clean-shutdown marker: a run lifts it (flushed)
    before its first change and puts it back once everything is flushed, so that a kill never
    leaves a marker vouching for files half written (a broker would trust them unrecovered)."""
    if command == "append":
        d = str(tmp_path / "seed-append" / "logs")
        _, leo = cc.write_seed(d, clean_shutdown=True)
        c = append_campaign(tmp_path, (d, leo), 30)
    elif command == "roll":
        c = roll_campaign(tmp_path, clean_shutdown=True)
    elif command == "compact":
        c = compact_campaign(tmp_path, clean_shutdown=True)
    else:
        c = retain_campaign(tmp_path, "0", clean_shutdown=True)
    assert cc.MARKER in c.want
    c.every_step()
    print(command, c.stats)
    assert not c.failures, "\n".join(c.failures)
