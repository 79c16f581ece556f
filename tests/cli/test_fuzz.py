"""Fuzz tests of the CLI end to end on mutated directories (real processes, a few dozen
inputs): ``dump`` in every format, ``verify-index``, ``recover --dry-run``, ``recover`` and a
second ``recover`` on mutated copies of the fixtures and of kafka-python partitions of every
codec, with hostile directory contents too. No traceback, exit status 0/1/2, bounded time and
address space, read-only commands change no byte, ``recover`` loses no byte and a second run
has nothing to do. Then the writers in-process (fuzz/run.py's writers target) and the findings
of the long run, replayed.

``KAFKALOG_FUZZ_EXAMPLES`` scales every budget (default 1; 10 for a longer run). For a long run
use fuzz/run.py.
"""

import json
import os
import random
import shutil
import struct
import tempfile

import pytest

import fuzzlib as F
import indexgen as ig
import kafkagen as kg

# Randomized fuzzing runs, a few minutes: left out of the quick suite (pytest -m "not slow").
pytestmark = pytest.mark.slow

LOG_SEEDS = F.log_seeds()
LOG_NAMES = sorted(LOG_SEEDS)


# -- the CLI end to end ------------------------------------------------------------------------------
#
# The end-to-end inputs are drawn from seeded random generators, not hypothesis: each one costs
# a dozen processes, so every problem of every input is collected and reported together (with
# the seed and the mutation, replayable with fuzz/run.py --target cli-replay).

def _fixture_copy(dest, partition):
    shutil.copytree(os.path.join(F.FIXTURES, partition), dest, symlinks=True)
    return dest


def _generated_partition(dest, variant):
    return F.generated_partition(dest, variant)


CLI_FIXTURES = ("events-0", "legacy-0", "metrics-0", "orders-0", "orders-1")
CLI_GENERATED = F.GENERATED_VARIANTS


def _tree_ops(rng, hostile):
    ops = []
    for _ in range(rng.randint(1, 3)):
        top = rng.choice(F.TREE_OPS) if hostile else "file"
        ops.append((top, rng.getrandbits(16), rng.getrandbits(16), rng.getrandbits(16),
                    F.random_ops(rng, 3)))
    return ops


def _fuzz_partitions(make, names, n, seed, hostile_every=3):
    rng = random.Random(seed)
    problems = []
    for i in range(n):
        name = names[i % len(names)]
        with tempfile.TemporaryDirectory() as d:
            part = make(os.path.join(d, name), name)
            ops = _tree_ops(rng, hostile=i % hostile_every == hostile_every - 1)
            desc = F.mutate_tree(part, ops, other=LOG_SEEDS[rng.choice(LOG_NAMES)])
            found = F.check_commands(part, [part], timeout=60)
            problems += ["[%s #%d %s: %s] %s" % (seed, i, name, "; ".join(desc), p) for p in found]
    return problems


def test_cli_mutated_fixtures():
    problems = _fuzz_partitions(_fixture_copy, CLI_FIXTURES, F.budget(8), seed=1)
    assert not problems, "\n".join(problems)


def test_cli_mutated_generated_partitions():
    """kafka-python partitions of every format and codec, nested compression, KRaft control
    batches, each mutated (byte mutations, some under the compression)."""
    problems = _fuzz_partitions(_generated_partition, CLI_GENERATED, F.budget(8), seed=2)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("op", F.TREE_OPS[1:])
def test_cli_hostile_directory_contents(tmp_path, op):
    """Each directory change a hostile or half-crashed directory may hold, on its own, applied
    to each kind of file of a partition in turn (seeded): every command behaves, recover loses
    nothing, cuts no valid batch, and a second recover has nothing to do."""
    # orders-1 holds an aborted transaction (and its .txnindex): the copy under a short name
    # must not make verify-index look for a transaction index of its own
    name = "orders-1" if op == "shortname" else "orders-0"
    part = _fixture_copy(str(tmp_path / name), name)
    names = F.tree_files(part)
    special = {"shortname": "00000000000000000000.log", "loglog": "00000000000000000042.log",
               "symlink-out": "00000000000000000000.log"}
    choice = names.index(special[op]) if op in special else len(op) * 7
    # the segment linked from outside is damaged half-way: recover would have to cut it
    byte_ops = [("zero", 1200, 99)] if op == "symlink-out" else []
    desc = F.mutate_tree(part, [(op, choice, len(op), 3 * len(op), byte_ops)])
    problems = F.check_commands(part, [part], dump_variants=F.DUMP_VARIANTS[:1],
                                compare_builds=False)
    assert not problems, "%s:\n%s" % ("; ".join(desc), "\n".join(problems))


def test_cli_short_name_beside_a_segment_set_aside(tmp_path):
    """A copy of segment 42 under the short name ``42.log``, and segment 0 damaged half-way:
    the first recover sets segment 42 aside; the copy must not become segment 42 on the next
    run (Kafka never reads a short-named file's bytes), so the second run has nothing to do."""
    part = _fixture_copy(str(tmp_path / "orders-0"), "orders-0")
    shutil.copyfile(os.path.join(part, "00000000000000000042.log"), os.path.join(part, "42.log"))
    log = os.path.join(part, "00000000000000000000.log")
    with open(log, "rb") as f:
        data = f.read()
    with open(log, "wb") as f:
        f.write(F.apply_op(data, "zero", len(data) // 2, 99))
    problems = F.check_commands(part, [part], dump_variants=F.DUMP_VARIANTS[:1],
                                compare_builds=False)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("damage", ["offsets-go-back", "kraft-control-value", "segment-below-its-name"])
def test_cli_dump_and_recover_agree(tmp_path, damage):
    """What recover cuts, dump calls invalid (exit 1), and the other way round: one validity
    rule. offsets-go-back: a batch (CRC intact: the base offset is outside it) whose offsets
    are below the previous batch's; kraft-control-value: a LEADER_CHANGE control record whose
    value declares a tagged field it does not hold (CRC fixed up)."""
    if damage in ("offsets-go-back", "segment-below-its-name"):
        # offsets-go-back: the 4th batch of segment 0 based at offset 1; segment-below-its-name:
        # the first batch of segment 42 based at offset 1 (below 42 and the offsets before it)
        part = _fixture_copy(str(tmp_path / "orders-0"), "orders-0")
        name, k = (("00000000000000000000.log", 3) if damage == "offsets-go-back"
                   else ("00000000000000000042.log", 0))
        log = os.path.join(part, name)
        with open(log, "rb") as f:
            data = bytearray(f.read())
        struct.pack_into(">q", data, F.entry_starts(bytes(data))[k], 1)
    else:
        part = str(tmp_path / "__cluster_metadata-0")
        data = bytearray(F.kraft_control_batches())
        # LEADER_CHANGE is the first batch (91 bytes): its value ends at byte 89 with the
        # top-level tagged-field count 0 (byte 90 is the record's header count); say 1 instead
        # (and fix the CRC)
        assert data[89] == 0 and data[90] == 0
        data[89] = 1
        data = bytearray(F.fix_crcs(bytes(data)))
        log = kg.write_segment(part, 0, b"")
    with open(log, "wb") as f:
        f.write(bytes(data))
    dump = F.run_cli(["dump", "--deep-iteration", part])
    recover = F.run_cli(["recover", "--dry-run", "--full", part])
    cuts = "cut 0 bytes" not in recover.out and " cut " in recover.out
    assert not F.run_problems(dump) and not F.run_problems(recover), (dump, recover)
    assert (dump.code == 1) == cuts, (
        "dump exits %d but recover %s:\n%s" % (dump.code, "cuts" if cuts else "cuts nothing",
                                               recover.out[-1500:]))


def test_cli_recover_and_verify_agree_under_a_tiny_bound(tmp_path):
    """With --max-message-size 1 every batch inflates past the bound (16 bytes): recover keeps
    them unchecked, and keeps the partition's correct .txnindex; verify-index with the same
    bound must not then call that .txnindex wrong (the ABORT marker is there, only not decoded)."""
    part = _fixture_copy(str(tmp_path / "orders-1"), "orders-1")
    first = F.run_cli(["recover", "--max-message-size", "1", part])
    second = F.run_cli(["recover", "--max-message-size", "1", part])
    verify = F.run_cli(["verify-index", "--max-message-size", "1", part])
    for r in (first, second, verify):
        assert not F.run_problems(r), r
    assert second.code == 0, second
    assert verify.code == 0, verify


def test_cli_length_fields_at_extremes(tmp_path):
    """The size field of one entry of every segment set to 0, -1, 2^31-1 and -2^31 (one value
    per partition), and a records count and a key length likewise."""
    logdir = tmp_path / "logdir"
    shutil.copytree(F.FIXTURES, logdir)
    values = (0, -1, 2 ** 31 - 1, -2 ** 31)
    for i, part in enumerate(CLI_FIXTURES):
        for j, n in enumerate(sorted(os.listdir(logdir / part))):
            if not n.endswith(".log"):
                continue
            p = logdir / part / n
            data = p.read_bytes()
            starts = F.entry_starts(data)
            at = starts[len(starts) // 2]
            field = (8, 57, 18)[(i + j) % 3] if data[at + 16] == 2 or (i + j) % 3 != 1 else 8
            data = data[:at + field] + struct.pack(">i", values[(i + j) % 4]) + data[at + field + 4:]
            p.write_bytes(data)
    problems = F.check_commands(str(logdir), [str(logdir)])
    assert not problems, "\n".join(problems)


def test_cli_splices_and_truncations(tmp_path):
    """Each segment spliced with another file of the fixtures (index or log) at seeded points,
    or truncated mid-batch; the log directory's checkpoint files mutated."""
    rng = random.Random(3)
    logdir = tmp_path / "logdir"
    shutil.copytree(F.FIXTURES, logdir)
    others = [p for p in F.fixture_files().values()]
    for part in CLI_FIXTURES:
        for n in sorted(os.listdir(logdir / part)):
            if n.endswith(".log"):
                p = logdir / part / n
                data = p.read_bytes()
                if rng.random() < 0.5:
                    other = rng.choice(others)
                    data = data[:rng.randrange(len(data) + 1)] + other[rng.randrange(len(other) + 1):]
                else:
                    data = data[:rng.randrange(len(data) + 1)]
                p.write_bytes(data)
    # and the log directory's own checkpoint files, read by a dump of the directory
    for n in sorted(os.listdir(logdir)):
        p = logdir / n
        if p.is_file():
            p.write_bytes(F.apply_ops(p.read_bytes(), F.random_ops(rng, 2), rng.choice(others)))
    problems = F.check_commands(str(logdir), [str(logdir)])
    assert not problems, "\n".join(problems)


def test_cli_decompression_bombs(tmp_path):
    """A record of 96 MiB of zeros in a batch of every codec (v2 for each, and a v0 gzip and a
    v1 lz4 wrapper): past the 80 MiB a batch may inflate to with the default
    --max-message-size. Every command stays within 3 GB of address space and two minutes,
    without a traceback, and recover keeps the batches (their CRCs hold)."""
    part = tmp_path / "bombs-0"
    w = bytearray()
    bombs = [(2, 1), (2, 2), (2, 3), (2, 4), (0, 1), (1, 3)]
    for offset, (magic, codec) in enumerate(bombs):
        if magic == 2:
            b = bytearray(F.big_record_v2(codec, 96 << 20))
        else:
            b = bytearray(F._big_record_legacy(magic, codec, 96 << 20))
        struct.pack_into(">q", b, 0, offset)  # base offset / wrapper offset: not in the CRC
        w += b
    ig.write_partition(part, [(0, bytes(w))])
    problems = F.check_commands(str(part), [str(part)], timeout=120,
                                dump_variants=[F.DUMP_VARIANTS[2]], compare_builds=False)
    assert not problems, "\n".join(problems)


# -- the checks themselves can fail ---------------------------------------------------------------------

def test_checks_catch_what_they_look_for(tmp_path):
    """Each invariant check flags the defect it exists for (a check that cannot fail is none)."""
    part = tmp_path / "orders-0"
    shutil.copytree(os.path.join(F.FIXTURES, "orders-0"), part)
    before = F.partition_contents(str(part))
    # a file gone without a trace
    os.unlink(part / "partition.metadata")
    assert any("nowhere" in p for p in F.check_nothing_lost(before, str(part)))
    # a cut whose bytes the quarantine does not hold, and one whose manifest is missing
    log = part / "00000000000000000000.log"
    data = before[b"00000000000000000000.log"]
    starts = F.entry_starts(data)
    log.write_bytes(data[:starts[2]])
    run = part / "kafkalog-quarantine" / "20260101T000000.000000Z"
    run.mkdir(parents=True)
    (run / "cut").write_bytes(data[starts[2]:-1])
    (run / "manifest.json").write_text(json.dumps({"entries": [
        {"what": "cut", "file": "00000000000000000000.log", "saved_as": "cut",
         "range": [starts[2], len(data)]}]}))
    problems = F.check_nothing_lost(before, str(part))
    assert any("00000000000000000000.log" in p for p in problems), problems
    # the same cut with every byte kept: nothing lost, but the cut is at a valid batch
    (run / "cut").write_bytes(data[starts[2]:])
    (part / "partition.metadata").write_bytes(before[b"partition.metadata"])
    assert F.check_nothing_lost(before, str(part)) == []
    assert any("valid batch" in p for p in F.check_cuts(before, str(part)))
    # a cut at a batch with a flipped CRC-covered byte is fine
    bad = bytearray(data)
    bad[starts[2] + 40] ^= 1
    assert F.independent_verdict(bytes(bad), starts[2], 0) == "CRC"
    # an unlisted file in the quarantine
    (run / "stray").write_bytes(b"x")
    assert any("does not list" in p for p in F.check_nothing_lost(before, str(part)))
    # the tree digest sees a one-byte change, and not our lock file
    snap = F.snapshot_tree(str(tmp_path))
    (tmp_path / ".lock").write_bytes(b"")
    assert F.snapshot_tree(str(tmp_path)) == snap
    log.write_bytes(data[:starts[2]] + b"\0")
    assert F.snapshot_tree(str(tmp_path)) != snap
    # JSON Lines: NaN and Infinity are not JSON
    assert F.json_lines_problems('{"a": 1}\n{"b": [2]}\n') == []
    assert F.json_lines_problems('{"a": NaN}\n')
    assert F.json_lines_problems('{"a": Infinity}\n')
    # a traceback, a signal, a timeout, an exit status outside 0-2
    r = F.Run(["x"], 1, "", "Traceback (most recent call last):\n  ...\nKeyError: 1\n", 0.1)
    assert F.run_problems(r)
    assert F.run_problems(F.Run(["x"], -7, "", "", 0.1))
    assert F.run_problems(F.Run(["x"], None, "", "", 60))
    assert F.run_problems(F.Run(["x"], 3, "", "", 0.1))
    assert F.run_problems(F.Run(["x"], 1, "", "kafkalog: bad\n", 0.1)) == []


def test_cli_check_sees_a_crash(tmp_path):
    """run_cli reports what a crashing process does: a real `python -m kafkalog_cli` whose
    command raises (a kafkalog_cli package first on the path, in the working directory, whose
    __main__ raises KeyError) ends with a traceback and exit status 1, which run_problems must
    call a traceback (exit 1 alone is allowed: only the traceback marks the crash)."""
    pkg = tmp_path / "kafkalog_cli"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text("raise KeyError('planted crash')\n")
    r = F.run_cli(["dump", "--help"], cwd=str(tmp_path))
    assert r.code == 1, r
    assert "KeyError: 'planted crash'" in r.err, r.err
    problems = F.run_problems(r)
    assert any(p.startswith("traceback:") and "KeyError" in p for p in problems), problems


# -- the writers in-process (fuzz/run.py's writers target) ----------------------------------------

def _fuzz_run_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("fuzz_run", os.path.join(F.REPO, "fuzz", "run.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_writers_mutated(tmp_path):
    """append, roll, retain and recover + quarantine restore in-process on recovered partitions
    with a file replaced, a symlink at a temporary name leading outside the log directory, a
    dangling lock symlink, a FIFO or a stale file at a temporary name (fuzz/run.py's writers
    target, a few dozen inputs, seeded): no exception, exit 0/1/2, nothing written outside,
    no temporary file left, one recover enough, restore gives the .log files back."""
    run = _fuzz_run_module()
    target = run.WritersTarget(str(tmp_path))
    seeds = target.seeds()
    rng = random.Random(24)
    problems = []
    for i in range(F.budget(60)):
        data = rng.choice(seeds)
        if i % 2:
            data = data[:8] + F.apply_ops(data[8:], F.random_ops(rng, 3), rng.choice(seeds)[8:])
        try:
            target.run(data)
        except Exception as e:
            problems.append("%s: %s: %s" % (target.describe(data), type(e).__name__, e))
    assert not problems, "\n".join(problems)


def test_writers_target_sees_a_temporary_file_left(tmp_path, monkeypatch):
    """The writers target can fail: with write_atomically leaving a copy of its temporary
    file behind (a planted defect), the first command that writes a checkpoint is a crash."""
    import kafkalog_cli.log.indexbuild as indexbuild
    from kafkalog_cli.log import names
    run = _fuzz_run_module()
    target = run.WritersTarget(str(tmp_path))
    real = indexbuild._write_tmp

    def leaky(path, data):
        tmp = real(path, data)
        shutil.copyfile(tmp, path + ".left" + names.TMP_SUFFIX)
        return tmp

    monkeypatch.setattr(indexbuild, "_write_tmp", leaky)
    # an append of the lines of a segment's bytes (some records), the partition undamaged
    seed = next(s for s in target.seeds() if "command append-lines," in target.describe(s)
                and ".log kept, damage ," in target.describe(s))
    with pytest.raises(run.Crash, match="left a temporary file"):
        target.run(seed)


def test_recover_alternates_as_the_broker_at_log_start_at_log_end(tmp_path):
    """orders-1 recovered (log end offset 16, high watermark 16, its batches in leader epochs
    up to 2), then retain --log-start-offset 31: the log start offset becomes 16,
    leader-epoch-checkpoint 2@16 (truncateFromStart, as DeleteRecords leaves it). Each recover
    then loads the partition as LogLoader does without a clean shutdown: the segment holding
    the recovery point recovered (LogSegment.recover assigns a batch's epoch only above the
    latest), the epochs truncated at the log end (truncateFromEnd), then at the log start
    (truncateFromStart). From 2@16: no epoch assigned, 2@16 dropped at the log end: none.
    From none: 0@0 ... 2@x assigned, folded into 2@16 at the log start. The broker's own
    unclean loads alternate so; recover follows them (truncateFromStart included: without it
    the second run would leave 2@0). fuzz/run.py's writers target accepts exactly this
    alternation."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for n in os.listdir(F.FIXTURES):
        if os.path.isfile(os.path.join(F.FIXTURES, n)):
            shutil.copyfile(os.path.join(F.FIXTURES, n), logs / n)
    part = _fixture_copy(str(logs / "orders-1"), "orders-1")
    epochs = os.path.join(part, "leader-epoch-checkpoint")
    assert F.run_cli(["recover", part]).code in (0, 1)
    r = F.run_cli(["retain", "--log-start-offset", "31", "--file-delete-delay-ms", "0", part])
    assert r.code == 0, r
    assert open(epochs).read() == "0\n1\n2 16\n"
    seen = []
    for _ in range(3):
        run = F.run_cli(["recover", part])
        assert run.code == 1, run
        seen.append(open(epochs).read())
    assert seen == ["0\n0\n", "0\n1\n2 16\n", "0\n0\n"]


FINDINGS = os.path.join(F.REPO, "tests", "data", "fuzz-findings")


@pytest.mark.parametrize("finding", sorted(os.listdir(FINDINGS)))
def test_long_run_findings_replay_clean(tmp_path, finding):
    """The inputs the long fuzz run kept (fuzz/findings), replayed (fuzz/run.py --replay): every
    invariant holds on each. cli-8230e7307a10: a batch's leader epoch set to 2^31-1 (outside
    the CRC), epochs then going backwards, which recover keeps as LogSegment.recover keeps them;
    cli-7b7a0a343aca: a leader-epoch-checkpoint of one wrong entry that the broker loads as it
    is; cli-8c7d0f6664d4: a segment split on offset overflow, its original kept whole in the
    quarantine; cli-fe1658aa1498: a legacy wrapper whose inner message's value length runs past
    its end, which recover cuts (Java's LegacyRecord cannot read it, kafka-python silently reads
    it short); writers-1cfd8b512c21: a leader-epoch-checkpoint entry past the log end that
    hides the batches' epochs from the first load, as from the broker's; cli-b660c1e09c40: a
    legacy offset (outside the CRC) of a segment's last message raised past the next segment's
    base, which is no reason to cut the next segment (LogSegment.recover compares no segment
    with the one before); cli-dc6eee68f1de: a legacy lz4 wrapper whose one inner message runs
    past the decompressed bytes (Java's DeepRecordsIterator finds no inner records,
    kafka-python reads it short), which recover cuts; cli-6a79f2a8e2b6: a KRaft control record
    whose value does not decode, whose INVALID line the C and pure-Python dumps both print;
    cli-c6102403f4be: a v2 batch whose magic byte (outside the CRC) became 56, on which recover
    (cutting it as "unknown magic") and dump agree; cli-23c5ed998b8a: a control batch
    with a damaged record count, cut below the log end, which the producer state rebuild does
    not read (the first recover writes the snapshots); cli-30dcbb076955: a record whose
    timestamp overflows a long, which recover cuts by kafkalog's one rule (Java wraps it,
    kafka-python reads the big number); cli-d6047fe6a853: a batch whose base offset became -1,
    which the broker cannot load (recover: one line, exit 2, no traceback)."""
    run = _fuzz_run_module()
    target = run._make_target(finding.split("-", 1)[0], str(tmp_path))
    with open(os.path.join(FINDINGS, finding), "rb") as f:
        target.run(f.read())
