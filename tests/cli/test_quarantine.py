"""`kafkalog recover` never loses a byte: every file it sets aside and every byte it cuts is in
its quarantine folder, verbatim, under a name nothing else there holds, with a manifest entry.

The partitions are written by kafka-python (``kafkagen``) with broker-equivalent indexes
(``indexgen``); every expectation is the original bytes themselves, read before the run.
"""

import datetime
import json
import os

import pytest

import indexgen as ig
import kafkagen as kg
from dumpcheck import kafkalog

QUARANTINE = "kafkalog-quarantine"
T0 = kg.T0


def name(base, kind):
    return "%s.%s" % (ig.segment_prefix(base), kind)


def recover(*args):
    res = kafkalog("recover", *args)
    assert "Traceback" not in res.err + res.out, res
    return res


def top_files(directory):
    """{name (bytes, as the file system has it): contents} of the files directly in it."""
    out = {}
    for n in os.listdir(os.fsencode(directory)):
        p = os.path.join(os.fsencode(directory), n)
        if os.path.isfile(p):
            with open(p, "rb") as f:
                out[n] = f.read()
    return out


def quarantine_files(directory):
    """[(run folder, relative path, bytes)] of every file anywhere in the quarantine."""
    root = os.path.join(directory, QUARANTINE)
    out = []
    for run in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        for dirpath, _, names in os.walk(os.path.join(root, run)):
            for n in names:
                p = os.path.join(dirpath, n)
                with open(p, "rb") as f:
                    out.append((run, os.path.relpath(p, os.path.join(root, run)), f.read()))
    return out


def manifests(directory):
    root = os.path.join(directory, QUARANTINE)
    out = {}
    for run in sorted(os.listdir(root)):
        with open(os.path.join(root, run, "manifest.json"), "rb") as f:
            raw = f.read()
        out[run] = json.loads(raw.decode("utf-8"))  # valid UTF-8 JSON, whatever the names
    return out


def check_manifest_and_names(directory):
    """Saved names are unique per run folder, each manifest entry names an existing file, and
    every file (but the manifest) has exactly one entry."""
    files = quarantine_files(directory)
    from test_recover import check_written_entry
    for run, m in manifests(directory).items():
        for i, e in enumerate(m["entries"]):
            if e["what"] == "written":   # a file the run wrote where there was none
                check_written_entry(e, m["entries"][:i])
        saved = [e["saved_as"] for e in m["entries"] if e["what"] not in ("written", "renamed")]
        assert len(saved) == len(set(saved)), "a saved name used twice: %r" % saved
        on_disk = {rel for r, rel, _ in files if r == run and rel != "manifest.json"}
        assert set(saved) == on_disk, (sorted(saved), sorted(on_disk))
        for e in m["entries"]:
            assert e["what"] in ("moved", "cut", "written", "renamed") and e["why"].strip(), e
    return files


def assert_all_kept(directory, before, files, cut_prefixes):
    """Every original file that is gone, or whose bytes changed, is in the quarantine verbatim;
    each cut .log's lost tail is there too."""
    after = top_files(directory)
    contents = [data for _, _, data in files]
    for n, data in before.items():
        if after.get(n) == data:
            continue
        if n in cut_prefixes:
            kept = cut_prefixes[n]
            assert after[n] == data[:kept], n
            assert data[kept:] in contents, "%s: cut bytes [%d, %d) not in quarantine" % (
                n, kept, len(data))
            continue
        assert data in contents, "%r (%d bytes) is nowhere" % (n, len(data))


# -- a .swap beside a segment after a corrupt one ------------------------------------------------

def compacted(data):
    entries = kg.split_entries(data)
    batches = ig.read_log(data)
    return b"".join(e for i, (e, b) in enumerate(zip(entries, batches))
                    if i % 3 == 0 or b.is_transactional or i == len(entries) - 1)


def swap_after_corrupt(directory, with_index_swaps):
    """Segments 0 (corrupt in the middle), B and C; a compacted copy of B as B.log.swap (and its
    index .swap files): recovery renames the swap over B (the old B set aside), then sets the
    new B aside as following the corrupt segment: two different files named B.log."""
    os.makedirs(directory)
    segs, base = [], 0
    for i in range(3):
        data, nxt = ig.busy_segment(base, n_batches=30, txn_at=3 + i, seed=i, t0=T0 + 10**6 * i)
        segs.append((base, data))
        base = nxt
    ig.write_partition(directory, segs)
    b0, b1, b2 = (b for b, _ in segs)
    bad = bytearray(segs[0][1])
    entries = kg.split_entries(bytes(bad))
    pos = sum(len(e) for e in entries[:len(entries) // 2])
    bad[pos + 30] ^= 0x10  # a bit inside the CRC-covered part of a middle batch
    ig.write_file(os.path.join(directory, name(b0, "log")), bytes(bad))
    swap = compacted(segs[1][1])
    assert len(swap) < len(segs[1][1])
    ig.write_file(os.path.join(directory, name(b1, "log.swap")), swap)
    if with_index_swaps:
        idx = ig.build_indexes(swap)
        txns = ig.aborted_txns(ig.read_log(swap))
        assert txns
        ig.write_file(os.path.join(directory, name(b1, "index.swap")),
                      ig.encode_offset_index(idx.offset_entries, b1))
        ig.write_file(os.path.join(directory, name(b1, "timeindex.swap")),
                      ig.encode_time_index(idx.time_entries, b1))
        ig.write_file(os.path.join(directory, name(b1, "txnindex.swap")),
                      ig.encode_txn_index(txns))
    for off in (b1, b2):
        ig.write_file(os.path.join(directory, name(off, "snapshot")), ig.encode_snapshot([]))
    return pos, (b0, b1, b2)


@pytest.mark.parametrize("with_index_swaps", [False, True])
def test_swap_then_set_aside_keeps_both_files(tmp_path, with_index_swaps):
    """Segment B after a corrupt one, with a .swap of B beside it: recovery renames the swap
    over B (the old B set aside), then sets the new B aside too. Both B.log files are kept
    byte for byte, each under a quarantine name of its own, the manifest naming where the second
    came from."""
    d = str(tmp_path / "logdir" / "metrics-0")
    pos, (b0, b1, b2) = swap_after_corrupt(d, with_index_swaps)
    before = top_files(d)
    res = recover(d)
    assert res.code == 1, res
    files = check_manifest_and_names(d)
    assert_all_kept(d, before, files, {os.fsencode(name(b0, "log")): pos})
    # both B.log files, byte for byte
    logs = [data for _, rel, data in files if os.path.basename(rel) == name(b1, "log")]
    assert sorted(logs) == sorted([before[os.fsencode(name(b1, "log"))],
                                   before[os.fsencode(name(b1, "log.swap"))]])
    if with_index_swaps:
        for kind in ("index", "timeindex", "txnindex"):
            same = [data for _, rel, data in files if os.path.basename(rel) == name(b1, kind)]
            assert sorted(same) == sorted([before[os.fsencode(name(b1, kind))],
                                           before[os.fsencode(name(b1, kind + ".swap"))]]), kind
    # the manifest says where the second B.log came from
    entries = [e for m in manifests(d).values() for e in m["entries"]]
    again = [e for e in entries if e["file"] == name(b1, "log") and e["what"] == "moved"]
    assert len(again) == 2 and {e.get("earlier_name") for e in again} == {None, name(b1, "log.swap")}
    # and that the swap was completed: a rename, recorded before it was made
    renamed = [e for e in entries if e["what"] == "renamed"]
    assert [(e["file"], e["earlier_name"]) for e in renamed if e["file"] == name(b1, "log")] \
        == [(name(b1, "log"), name(b1, "log.swap"))]
    # and a second run has nothing to do
    res2 = recover(d)
    assert res2.code == 0, res2


# -- every kind of file set aside twice under one name in one run --------------------------------

ALIASES = (b"\xff", b"\\xff")  # a name that is not UTF-8, and the escaped text it prints as


def test_every_kind_set_aside_twice(tmp_path):
    """One run sets aside, twice under the same (printed) name each: log, index, timeindex,
    txnindex (a swapped-in segment after a corrupt one, and the one it replaced), .deleted and
    .cleaned (a file whose name is not UTF-8 and one named by its escapes), snapshots and .swap
    files (two of each), and the cut bytes of two partitions:
    every original byte is in the quarantine, verbatim, each file under a name of its own."""
    logdir = tmp_path / "logdir"
    parts = []
    for p in range(2):
        d = str(logdir / ("metrics-%d" % p))
        pos, (b0, b1, b2) = swap_after_corrupt(d, with_index_swaps=True)
        parts.append((d, pos, b0))
    d = parts[0][0]
    bd = os.fsencode(d)
    extra = {}
    for alias in ALIASES:
        for suffix in (b".log.deleted", b".index.cleaned", b".log.cleaned", b".snapshot.deleted"):
            extra[alias + suffix] = b"%s%s-%d" % (alias, suffix, len(extra)) * 3
    # .swap files of a split that did not finish (at or above the smallest .cleaned base), and
    # an index .swap without its log .swap
    cleaned_base = 10**6
    extra[os.fsencode(name(cleaned_base, "log.cleaned"))] = b"cleaned"
    extra[os.fsencode(name(cleaned_base, "log.swap"))] = b"split swap 1"
    extra[os.fsencode(name(cleaned_base + 5, "log.swap"))] = b"split swap 2"
    extra[os.fsencode(name(0, "timeindex.swap"))] = b"\x00" * 12
    for n, data in extra.items():
        with open(os.path.join(bd, n), "wb") as f:
            f.write(data)
    befores = [top_files(pd) for pd, _, _ in parts]
    res = recover(str(logdir))
    assert res.code == 1, res
    for (pd, pos, b0), before in zip(parts, befores):
        files = check_manifest_and_names(pd)
        assert_all_kept(pd, before, files, {os.fsencode(name(b0, "log")): pos})
        # nothing left behind of what had to go
        after = top_files(pd)
        assert not [n for n in after if n.endswith((b".deleted", b".cleaned"))], sorted(after)
    files = quarantine_files(d)
    contents = [data for _, _, data in files]
    for n, data in extra.items():
        assert contents.count(data) == 1, n
    # the manifest is valid JSON and keeps the raw name of the non-UTF-8 files
    entries = [e for m in manifests(d).values() for e in m["entries"]]
    raw = {bytes.fromhex(e["file_bytes_hex"]) for e in entries if "file_bytes_hex" in e}
    assert {n for n in extra if n.startswith(b"\xff")} <= raw
    # each kind was set aside at least twice in this one run
    kinds = {}
    for e in entries:
        f = e["file"]
        for k in ("log", "index", "timeindex", "txnindex", "snapshot", "deleted", "cleaned",
                  "swap"):
            if f.endswith("." + k):
                kinds[k] = kinds.get(k, 0) + 1
    assert all(kinds.get(k, 0) >= 2 for k in ("log", "index", "timeindex", "txnindex",
                                               "snapshot", "deleted", "cleaned", "swap")), kinds
    cuts = [e for pd, _, _ in parts for m in manifests(pd).values() for e in m["entries"]
            if e["what"] == "cut"]
    assert len(cuts) == 2
    assert recover(str(logdir)).code == 0


# -- run folders never collide -------------------------------------------------------------------

def test_run_folder_taken_gets_another_name(tmp_path, monkeypatch):
    """Two runs at the same instant (or with the clock set back to an earlier run's time): the
    second takes a new folder, the first one's files untouched."""
    import kafkalog_cli.log.quarantine as rec

    fixed = datetime.datetime(2020, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.timezone.utc)

    class Clock(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return fixed

    monkeypatch.setattr(rec.datetime, "datetime", Clock)
    d = str(tmp_path / "t-0")
    os.makedirs(d)
    first = rec.new_run_folder(d)
    with open(os.path.join(first, "manifest.json"), "w") as f:
        f.write("first")
    second = rec.new_run_folder(d)
    third = rec.new_run_folder(d)
    assert len({first, second, third}) == 3
    assert all(os.path.isdir(p) for p in (first, second, third))
    with open(os.path.join(first, "manifest.json")) as f:
        assert f.read() == "first"
    assert os.listdir(second) == [] and os.listdir(third) == []


def test_rename_noreplace_never_replaces(tmp_path):
    from kafkalog_cli.log.indexbuild import rename_noreplace
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    for p, data in ((a, b"A"), (b, b"B")):
        with open(p, "wb") as f:
            f.write(data)
    with pytest.raises(FileExistsError):
        rename_noreplace(a, b)
    with open(a, "rb") as fa, open(b, "rb") as fb:
        assert (fa.read(), fb.read()) == (b"A", b"B")
    os.unlink(b)
    assert rename_noreplace(a, b) in ("renameat2", "link", "check")
    assert not os.path.exists(a)
    with open(b, "rb") as f:
        assert f.read() == b"A"


# -- renames elsewhere never replace either --------------------------------------------------------

def test_retain_does_not_rename_over_an_existing_deleted_file(tmp_path):
    """The log cleaner leaves the segment it replaced as ``X.log.deleted`` (the new one has the
    same base offset X) until the broker's delayed delete. Retention deleting X then must not
    rename X.log over that file: both stay until the delete delay has passed, and then both
    go."""
    d = str(tmp_path / "logs" / "orders-0")
    os.makedirs(d)
    segs, base = [], 0
    for i in range(3):
        data, nxt = ig.busy_segment(base, n_batches=6, seed=i, t0=T0 + 10**6 * i)
        segs.append((base, data))
        base = nxt
    ig.write_partition(d, segs)
    old = {}
    for kind in ("log", "index", "timeindex"):
        n = name(0, kind + ".deleted")
        old[n] = b"the segment the cleaner replaced: " + kind.encode()
        ig.write_file(os.path.join(d, n), old[n])
    before = top_files(d)
    res = kafkalog("retain", "--log-start-offset", str(segs[1][0]), "--file-delete-delay-ms",
                   "3600000", d)
    assert res.code == 0 and "Traceback" not in res.err, res
    after = top_files(d)
    contents = list(after.values())
    for n, data in before.items():
        assert data in contents, "%r: its bytes are gone" % n
    for n, data in old.items():
        assert after[os.fsencode(n)] == data, n   # untouched, under its own name
    assert os.fsencode(name(0, "log")) not in after
    # once the delay has passed, every .deleted file goes
    res = kafkalog("retain", "--file-delete-delay-ms", "0", d)
    assert res.code == 0, res
    assert not [n for n in top_files(d) if n.endswith(b".deleted")], sorted(top_files(d))


def test_append_does_not_trim_away_index_entries(tmp_path):
    """append trims a pre-allocated zero tail off the active segment's index before appending
    to it; entries after a slot that ends the real ones are not such a tail: append refuses
    and sends to recover, the index untouched."""
    import struct
    import subprocess
    import sys
    from dumpcheck import REPO
    d = str(tmp_path / "logs" / "orders-0")
    data, _ = ig.busy_segment(0, n_batches=40, seed=1)
    segs = ig.write_partition(d, [(0, data)])
    entries = segs[0].indexes.offset_entries
    assert len(entries) >= 3
    raw = ig.encode_offset_index(entries[:2], 0) + bytes(8) + ig.encode_offset_index(entries[2:], 0)
    path = segs[0].paths["index"]
    ig.write_file(path, raw)
    assert struct.unpack_from(">i", raw, 24)[0] != 0  # a real entry after the zero slot
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", "append", d], input=b"a\nb\n",
                       cwd=REPO, capture_output=True, timeout=120)
    assert p.returncode == 2, p
    assert b"Traceback" not in p.stderr and b"recover" in p.stderr, p.stderr
    with open(path, "rb") as f:
        assert f.read() == raw
    assert top_files(d)[os.fsencode(name(0, "log"))] == data
    # recover rebuilds that index (keeping this one), and append goes through then
    res = recover(d)
    assert res.code == 1, res
    assert raw in [c for _, _, c in quarantine_files(d)]
    with open(path, "rb") as f:
        assert f.read() == ig.encode_offset_index(entries, 0)
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", "append", d], input=b"a\nb\n",
                       cwd=REPO, capture_output=True, timeout=120)
    assert p.returncode == 0, p


@pytest.mark.parametrize("kind", ["symlink", "file"])
def test_quarantine_name_taken_by_something_else(tmp_path, kind):
    """``kafkalog-quarantine`` a symlink to another directory, or a file: nothing is moved
    through it or over it; one line on stderr, exit 2, the partition unchanged."""
    d = str(tmp_path / "logdir" / "metrics-0")
    swap_after_corrupt(d, with_index_swaps=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    q = os.path.join(d, QUARANTINE)
    if kind == "symlink":
        os.symlink(str(elsewhere), q)
    else:
        with open(q, "wb") as f:
            f.write(b"not ours")
    before = top_files(d)
    res = recover(d)
    assert res.code == 2, res
    assert len(res.err.splitlines()) == 1, res.err
    assert top_files(d) == before
    assert os.listdir(str(elsewhere)) == []


def _tree_bytes(root):
    """{relative path: bytes, or the link target for a symlink} of everything under root."""
    out = {}
    for dirpath, dirnames, names in os.walk(root):
        for n in names + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            p = os.path.join(dirpath, n)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            else:
                with open(p, "rb") as f:
                    out[rel] = f.read()
    return out


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_symlinked_segment_that_needs_a_cut_is_refused(tmp_path, dry_run):
    """A .log that is a symlink to a file outside the partition directory and must be cut:
    recover would write through the link into a file it does not own. It refuses that
    partition (exit 2, one line naming the link and its target), changes nothing there or
    outside, and still recovers the log directory's other partitions."""
    logdir = tmp_path / "logdir"
    outside = tmp_path / "outside"
    outside.mkdir()
    good = [kg.v2_batch([kg.Rec(b"k", b"v%d" % i, T0 + i)], i) for i in range(3)]
    data = b"".join(good)
    victim = outside / "victim.log"
    victim.write_bytes(kg.flip_bit(data, len(good[0]) + len(good[1]) + 40))
    linked = logdir / "linked-0"
    linked.mkdir(parents=True)
    os.symlink(str(victim), str(linked / name(0, "log")))
    other = logdir / "other-0"
    other.mkdir()
    (other / name(0, "log")).write_bytes(data + b"\x00garbage tail")
    before = _tree_bytes(str(tmp_path))
    args = ["--dry-run"] if dry_run else []
    res = recover(*args, str(logdir))
    assert res.code == 2, res
    errors = [line for line in res.err_lines if "linked-0" in line]
    assert len(errors) == 1 and "symlink" in errors[0] and "victim.log" in errors[0], res.err
    after = _tree_bytes(str(tmp_path))
    for rel in before:
        if not rel.startswith("logdir/other-0") and not rel.startswith("logdir" + os.sep + "other"):
            assert after.get(rel) == before[rel], rel
    assert not any(r.startswith(os.path.join("logdir", "linked-0", QUARANTINE)) for r in after)
    # the other partition was still handled: its garbage tail cut (or, dry, said to be)
    assert "other-0" in res.out
    if not dry_run:
        assert (other / name(0, "log")).read_bytes() == data
