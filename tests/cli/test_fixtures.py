"""fixtures/logdir: what fixtures/make_fixtures.py produces, and a clean dump of it."""

import importlib.util
import os
import subprocess
import sys

import pytest

from dumpcheck import REPO, check_kafka_dump, dump, kafka_file_lines_check, kafka_python_read

uses_both_implementations = pytest.mark.usefixtures("implementation")

LOGDIR = os.path.join(REPO, "fixtures", "logdir")
SCRIPT = os.path.join(REPO, "fixtures", "make_fixtures.py")


@pytest.fixture(scope="module")
def make_fixtures():
    spec = importlib.util.spec_from_file_location("make_fixtures", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def built(make_fixtures):
    return make_fixtures.build()


def _on_disk():
    files = {}
    for root, _, names in os.walk(LOGDIR):
        for n in names:
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                files[os.path.relpath(p, LOGDIR)] = f.read()
    return files


def _contents(data):
    """What kafka-python reads from a segment: batch headers and every record, decompressed
    (compressed bytes may differ between releases of the compression libraries)."""
    out = []
    for kb in kafka_python_read(data):
        b = kb.batch
        out.append((kb.position, b.magic, b.compression_type, b.base_offset, kb.crc_ok,
                    [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in kb.records]))
    return out


def _logs(built):
    return {rel: data for rel, data in built.items() if rel.endswith(".log")}


def test_fixture_files_hold_what_make_fixtures_writes(built):
    on_disk = _on_disk()
    assert sorted(on_disk) == sorted(built), "rerun: python fixtures/make_fixtures.py"
    for rel in built:
        if rel.endswith(".log"):
            same = _contents(on_disk[rel]) == _contents(built[rel])
        else:  # indexes, snapshots, checkpoints: no compressor involved, so byte for byte
            same = on_disk[rel] == built[rel]
        assert same, "%s differs from a rebuild: rerun fixtures/make_fixtures.py" % rel


def test_make_fixtures_is_deterministic(make_fixtures, built):
    assert make_fixtures.build() == built


def test_make_fixtures_script_check_and_out(tmp_path):
    out = tmp_path / "logdir"
    p = subprocess.run([sys.executable, SCRIPT, "--out", str(out)], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([sys.executable, SCRIPT, "--check", "--out", str(out)], capture_output=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    victim = out / "orders-0" / "00000000000000000042.log"
    victim.write_bytes(victim.read_bytes()[:-1])
    p = subprocess.run([sys.executable, SCRIPT, "--check", "--out", str(out)], capture_output=True,
                       timeout=60)
    assert p.returncode == 1
    assert b"orders-0" in p.stderr


def test_fixture_contents(built):
    """The log directory holds what it promises (read with kafka-python)."""
    total = sum(len(d) for d in built.values())
    assert total < 400 * 1024
    kinds = {os.path.basename(rel).rpartition(".")[2] for rel in built}
    assert {"log", "index", "timeindex", "txnindex", "snapshot", "metadata"} <= kinds
    built = _logs(built)
    partitions = {rel.split(os.sep)[0] for rel in built}
    assert {"orders-0", "orders-1", "events-0", "legacy-0"} <= partitions
    segments = {}
    for rel in built:
        segments.setdefault(rel.split(os.sep)[0], []).append(os.path.basename(rel))
    assert sorted(segments["orders-0"]) == ["00000000000000000000.log", "00000000000000000042.log"]
    assert all(len(n) == len("00000000000000000000.log") for names in segments.values()
               for n in names)
    codecs, magics, markers = set(), set(), set()
    for rel, data in built.items():
        kbs = kafka_python_read(data)
        assert sum(kb.size for kb in kbs) == len(data)
        assert all(kb.crc_ok for kb in kbs)
        base = int(os.path.basename(rel).split(".")[0])
        assert kbs[0].batch.base_offset >= base
        for kb in kbs:
            codecs.add(kb.batch.compression_type)
            magics.add(kb.batch.magic)
            if kb.batch.magic == 2 and kb.batch.is_control_batch:
                markers.update(r.type for r in kb.records)
    assert codecs == {0, 1, 2, 3, 4}
    assert magics == {0, 1, 2}
    assert markers == {0, 1}  # ABORT and COMMIT


def test_segments_of_a_partition_continue_each_other(built):
    by_part = {}
    for rel, data in _logs(built).items():
        part, name = rel.split(os.sep)
        by_part.setdefault(part, []).append((int(name.split(".")[0]), data))
    for part, segs in by_part.items():
        segs.sort()
        for (base, data), (next_base, _) in zip(segs, segs[1:]):
            last = kafka_python_read(data)[-1].batch
            last_offset = last.last_offset if last.magic >= 2 else last.base_offset
            assert last_offset < next_base, part


def test_leader_epoch_checkpoints_are_what_the_appends_leave(built):
    """Each partition's leader-epoch-checkpoint holds what a broker appending its batches leaves
    (UnifiedLog.append): a v2 batch with an epoch above the latest starts it at its base offset
    (LeaderEpochFileCache.assign); a v0/v1 batch clears the cache (clearAndFlush). Read with
    kafka-python."""
    by_part = {}
    for rel, data in _logs(built).items():
        part, name = rel.split(os.sep)
        by_part.setdefault(part, []).append((int(name.split(".")[0]), data))
    for part, segs in sorted(by_part.items()):
        cache = []
        for _, data in sorted(segs):
            for kb in kafka_python_read(data, deep=False):
                b = kb.batch
                if b.magic < 2:
                    cache = []
                elif b.leader_epoch >= 0 and (not cache or b.leader_epoch > cache[-1][0]):
                    cache.append((b.leader_epoch, b.base_offset))
        expected = "0\n%d\n" % len(cache) + "".join("%d %d\n" % e for e in cache)
        assert built[os.path.join(part, "leader-epoch-checkpoint")].decode() == expected, part
    assert len(by_part) == 5


@uses_both_implementations
def test_dump_logdir_exits_0():
    res = dump(LOGDIR)
    assert res.code == 0, res
    res = dump("--print-data-log", LOGDIR)
    assert res.code == 0, res


@uses_both_implementations
def test_dump_logdir_matches_kafka_python():
    order = ["events-0", "legacy-0", "metrics-0", "orders-0", "orders-1"]
    logs = [os.path.join(LOGDIR, part, name) for part in order
            for name in sorted(os.listdir(os.path.join(LOGDIR, part))) if name.endswith(".log")]
    res = dump("--print-data-log", *logs)
    assert res.code == 0, res
    i = 0
    for part in order:
        names = sorted(n for n in os.listdir(os.path.join(LOGDIR, part)) if n.endswith(".log"))
        for name in names:
            path = os.path.join(LOGDIR, part, name)
            with open(path, "rb") as f:
                data = f.read()
            i = kafka_file_lines_check(res.lines, i, path, data, deep=True, print_data=True,
                                       base_offset=int(name.split(".")[0]))
    assert i == len(res.lines)


@uses_both_implementations
def test_dump_fixture_segment_by_relative_path(monkeypatch):
    monkeypatch.chdir(REPO)
    rel = os.path.join("fixtures", "logdir", "legacy-0", "00000000000000000020.log")
    with open(rel, "rb") as f:
        data = f.read()
    res = dump("--print-data-log", "--files", rel)
    assert res.code == 0, res
    check_kafka_dump(res, rel, data, deep=True, print_data=True, base_offset=20)


@uses_both_implementations
def test_dump_logdir_shows_every_file_in_order():
    res = dump(LOGDIR)
    assert res.code == 0, res
    shown = [line[len("Dumping "):] for line in res.lines if line.startswith("Dumping ")]
    on_disk = sorted(os.path.join(LOGDIR, rel) for rel in _on_disk())
    assert sorted(shown) == on_disk
    root = [p for p in shown if os.path.dirname(p) == LOGDIR]
    assert shown[:len(root)] == root  # the log directory's checkpoints come first
    assert res.err == ""


def test_verify_index_on_the_fixtures_is_clean():
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", "verify-index", LOGDIR],
                       capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stderr == b""


@pytest.mark.parametrize("partition", ["orders-0", "orders-1", "events-0", "metrics-0"])
def test_producer_state_rebuilt_from_the_logs_equals_the_fixture_snapshot(partition):
    """The fixtures' snapshots are written by hand from the broker's rules (make_fixtures'
    SNAPSHOTS: an end marker sets the producer's timestamp, entries in HashMap order); the
    library's replay of the same logs must give those bytes."""
    from kafkalog_cli import Partition
    from kafkalog_cli.log import producer_state

    part = Partition(os.path.join(LOGDIR, partition))
    segments = part.segments()
    (offset, path), = part.snapshot_paths()
    rebuilt = producer_state.rebuild(segments, offset)
    with open(path, "rb") as f:
        assert rebuilt.snapshots[-1] == (offset, f.read())
