"""`kafkalog recover`: the broker's recovery of a partition directory, offline, losing nothing.

Every expectation is computed independently of ``kafkalog_cli``: the partitions are written by
kafka-python (``kafkagen``) with broker-equivalent index files (``indexgen``), the corruption is
placed at a position we choose, so the valid prefix is known by construction, and the rebuilt
indexes are compared with ``indexgen.build_indexes`` over the bytes that must be kept.

Each case builder returns an ``Expect``: the partition's files before recovery, the ``.log``
bytes each remaining segment must have afterwards, the bytes cut (log name -> (first cut byte,
original bytes)), the files moved to quarantine (name -> original bytes), the files that must be
left untouched (bytes and mtime) and the ``.swap`` renames. The same builders feed the real run,
``--dry-run`` and ``--format json`` tests.
"""

import gzip
import hashlib
import json
import os
import re
import struct
import subprocess
import sys
from typing import Dict, NamedTuple, Set, Tuple

import pytest

import indexgen as ig
import kafkagen as kg
from dumpcheck import REPO, files_in, json_objects, kafkalog, kafkalog_checked

T0 = kg.T0
QUARANTINE = "kafkalog-quarantine"
OLD_MTIME_NS = 1_600_000_000 * 10**9   # fixture files get this mtime: any rewrite is visible
INT32_MAX = 2**31 - 1


# -- running -----------------------------------------------------------------------------------------

def recover(*args):
    return kafkalog_checked("recover", *args)


def verify_index(*args):
    return kafkalog_checked("verify-index", *args)


def assert_clean_exit2(res):
    assert res.code == 2, res
    assert len(res.err_lines) == 1 and res.err_lines[0].strip(), res
    assert "Traceback" not in res.err, res


# -- directory snapshots -----------------------------------------------------------------------------

def tree(directory):
    """{relative path: (bytes, mtime_ns)} of every file below ``directory``, and every directory
    (value None): names, bytes and modification times."""
    out = {}
    for root, dirs, files in os.walk(directory):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), directory) + "/"] = None
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, directory)] = (fh.read(), os.stat(p).st_mtime_ns)
    return out


def assert_same_tree(before, after):
    assert sorted(after) == sorted(before), "names changed: added %s, removed %s" % (
        sorted(set(after) - set(before)), sorted(set(before) - set(after)))
    for k in before:
        if before[k] is None:
            continue
        assert after[k][0] == before[k][0], "%s: bytes changed" % k
        assert after[k][1] == before[k][1], "%s: mtime changed" % k




def age_files(directory):
    for n in os.listdir(directory):
        p = os.path.join(directory, n)
        if os.path.isfile(p):
            os.utime(p, ns=(OLD_MTIME_NS, OLD_MTIME_NS))


def quarantine_dirs(part_dir):
    q = os.path.join(part_dir, QUARANTINE)
    if not os.path.isdir(q):
        return []
    return [os.path.join(q, n) for n in sorted(os.listdir(q))]


def check_written_entry(e, earlier, part_dir=None):
    """A ``written`` manifest entry (a file the run wrote where there was none): nothing saved,
    the hash and size of what was written, a name no earlier entry of the run set aside; with
    ``part_dir``, the file there holds exactly those bytes."""
    assert e["what"] == "written" and "saved_as" not in e, e
    assert isinstance(e["why"], str) and e["why"].strip(), e
    assert re.fullmatch(r"[0-9a-f]{64}", e["sha256"]) and e["size"] >= 0, e
    assert not [x for x in earlier if x["what"] == "moved" and x["file"] == e["file"]], e
    if part_dir is not None:
        with open(os.path.join(part_dir, e["file"]), "rb") as f:
            data = f.read()
        assert len(data) == e["size"] and hashlib.sha256(data).hexdigest() == e["sha256"], e


def read_manifest(qdir, kinds=("cut", "moved")):
    """The entries of a run's manifest of the kinds given (by default those that hold bytes
    in the run folder: cut and moved), every entry checked."""
    with open(os.path.join(qdir, "manifest.json"), encoding="utf-8") as f:
        m = json.load(f)
    assert isinstance(m, dict) and isinstance(m.get("entries"), list), m
    for i, e in enumerate(m["entries"]):
        if e["what"] == "written":
            check_written_entry(e, m["entries"][:i])
            continue
        if e["what"] == "renamed":  # a .swap renamed into place: nothing held
            assert "saved_as" not in e and e["earlier_name"].endswith(".swap"), e
            continue
        assert e["what"] in ("cut", "moved"), e
        assert isinstance(e["file"], str) and isinstance(e["saved_as"], str), e
        assert isinstance(e["why"], str) and e["why"].strip(), e
        assert os.path.isfile(os.path.join(qdir, e["saved_as"])), e
        if e["what"] == "cut":
            assert len(e["range"]) == 2 and e["range"][0] < e["range"][1], e
    return [e for e in m["entries"] if e["what"] in kinds]


def cut_files(qdir, log_name):
    """[(start, end, bytes)] of the ``<log name>.cut-<start>-<end>`` files in ``qdir``."""
    out = []
    pattern = re.compile(re.escape(log_name) + r"\.cut-(\d+)-(\d+)$")
    for n in os.listdir(qdir):
        m = pattern.match(n)
        if m:
            start, end = int(m.group(1)), int(m.group(2))
            with open(os.path.join(qdir, n), "rb") as f:
                out.append((start, end, f.read()))
    return sorted(out)


# -- partitions --------------------------------------------------------------------------------------

def name(base, kind):
    return "%s.%s" % (ig.segment_prefix(base), kind)


def snapshot_name(offset):
    return name(offset, "snapshot")


class Part(NamedTuple):
    dir: str
    segs: list        # indexgen.SegmentFiles
    bases: list
    leo: int
    snapshots: list   # offsets of the producer snapshots written


def make_partition(directory, n_segments=3, base0=0, preallocate_active=False, snapshots=True,
                   codec="none", segment_data=None):
    """A partition of busy segments (an aborted transaction in each, non-monotonic timestamps in
    the first), broker-built indexes, empty producer snapshots at every base but the first and at
    the log end offset (``snapshots`` False: only the one a broker's recovery writes at the log
    end offset), the broker's leader-epoch-checkpoint, a partition.metadata; every file aged."""
    os.makedirs(directory, exist_ok=True)
    if segment_data is None:
        segment_data = []
        base = base0
        for i in range(n_segments):
            data, nxt = ig.busy_segment(base, n_batches=25 + 5 * i, t0=T0 + 100000 * i,
                                        txn_at=4 + i, backwards_every=6 if i == 0 else 0,
                                        seed=i, codec=codec)
            segment_data.append((base, data))
            base = nxt
    segs = ig.write_partition(directory, segment_data, preallocate_active=preallocate_active)
    last = ig.read_log(segs[-1].data)
    leo = last[-1].last_offset + 1 if last else segs[-1].base_offset
    snaps = []
    if snapshots:
        snaps = sorted({s.base_offset for s in segs[1:]} | {leo})
        for off in snaps:
            ig.write_file(os.path.join(directory, snapshot_name(off)), ig.encode_snapshot([]))
    else:
        # only the one a broker's recovery writes at the log end offset, of every producer
        snaps = [leo]
        ig.write_file(os.path.join(directory, snapshot_name(leo)),
                      expected_snapshot_at(segment_data, segment_data[0][0], leo))
    ig.write_file(os.path.join(directory, "partition.metadata"),
                  ig.partition_metadata(ig.topic_id(5)))
    write_leader_epochs(directory, segment_data)
    age_files(directory)
    return Part(str(directory), segs, [s.base_offset for s in segs], leo, snaps)


def leader_epochs_of(logs, entries=()):
    """The leader epoch cache after LogSegment.recover's rule over ``logs`` [(base, .log
    bytes)] in order, from ``entries``: a v2 batch whose partition leader epoch (header bytes
    12-15) is above the latest epoch starts it at its base offset, removing the entries from
    the end whose epoch or start offset is not below (LeaderEpochFileCache.assign); then the
    entries starting at or past the log end offset dropped."""
    out = list(entries)
    leo = None
    for base, data in logs:
        leo = base
        for b in ig.read_log(data):
            leo = b.last_offset + 1
            if b.magic < 2:
                continue
            (epoch,) = struct.unpack_from(">i", data, b.position + 12)
            if epoch >= 0 and (not out or epoch > out[-1][0]):
                while out and (out[-1][0] >= epoch or out[-1][1] >= b.base_offset):
                    out.pop()
                out.append((epoch, b.base_offset))
    return [e for e in out if leo is None or e[1] < leo]


def java_hash_order(pids):
    """java.util.HashMap<Long, _>'s iteration order of a few keys inserted in this order
    (16 buckets: bucket of Long.hashCode spread by h ^ h >>> 16, insertion order within one)."""
    def bucket(pid):
        h = (pid ^ (pid >> 32)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & 15
    assert len(pids) <= 12
    return sorted(pids, key=lambda p: (bucket(p), pids.index(p)))


def expected_snapshot_at(logs, start, end):
    """The producer snapshot the broker writes at ``end`` after replaying the v2 producer
    batches of ``logs`` [(base, bytes)] whose last offset is in [start, end) onto an empty
    state (ProducerStateEntry's rules: a data batch sets epoch, last sequence, last offset,
    offset delta and timestamp, a transactional one opens a transaction; an end marker sets the
    epoch, its coordinator epoch and its timestamp and closes it; an empty control batch is
    skipped)."""
    state = {}
    for _, data in logs:
        for b in ig.read_log(data):
            if b.magic < 2 or b.producer_id < 0 or not start <= b.last_offset < end:
                continue
            e = state.setdefault(b.producer_id, {"epoch": -1, "seq": -1, "last": -1,
                                                 "delta": 0, "ts": -1, "coord": -1, "txn": -1})
            if b.is_control:
                if b.control_type is None:
                    continue
                # the marker record, alone in an uncompressed batch, ends with its value
                # (version int16, coordinator epoch int32) and a 0 header count
                end_at = b.position + b.size
                (coord,) = struct.unpack_from(">i", data, end_at - 5)
                e.update(epoch=b.producer_epoch, coord=coord, ts=b.records[0][1], txn=-1)
                continue
            (base_seq,) = struct.unpack_from(">i", data, b.position + 53)
            delta = b.last_offset - b.base_offset
            e.update(epoch=b.producer_epoch, seq=(base_seq + delta) % 2**31, last=b.last_offset,
                     delta=delta, ts=b.max_timestamp)
            if b.is_transactional and e["txn"] < 0:
                e["txn"] = b.base_offset
    return ig.encode_snapshot([
        ig.SnapshotEntry(pid, state[pid]["epoch"], state[pid]["seq"], state[pid]["last"],
                         state[pid]["delta"], state[pid]["ts"], state[pid]["coord"],
                         state[pid]["txn"]) for pid in java_hash_order(list(state))])


def parse_leader_epochs(data):
    """[(epoch, start offset)] of a leader-epoch-checkpoint's bytes; ValueError when it is
    not one (version 0, a count, that many two-number lines)."""
    lines = data.decode("utf-8").splitlines()
    if not lines:
        return []
    if lines[0] != "0" or len(lines) < 2 or int(lines[1]) != len(lines) - 2:
        raise ValueError("not a leader-epoch-checkpoint")
    out = []
    for line in lines[2:]:
        epoch, start = line.split()
        out.append((int(epoch), int(start)))
    return out


def write_leader_epochs(directory, logs):
    """The leader-epoch-checkpoint a broker has for ``logs`` (none when no epoch)."""
    entries = leader_epochs_of(logs)
    if entries:
        ig.write_file(os.path.join(directory, "leader-epoch-checkpoint"),
                      ig.leader_epoch_checkpoint(entries))


def segment_names(base):
    return [name(base, k) for k in ("log", "index", "timeindex", "txnindex")]


def positions(data):
    entries = kg.split_entries(data)
    pos, out = 0, []
    for e in entries:
        out.append(pos)
        pos += len(e)
    return entries, out


class Expect(NamedTuple):
    dir: str
    original: Dict[str, bytes]          # top-level files before recovery
    logs: Dict[str, bytes]              # remaining .log name -> expected bytes
    cuts: Dict[str, Tuple[int, bytes]]  # .log name -> (first cut byte, original bytes)
    moved: Dict[str, bytes]             # name -> original bytes, must be in quarantine
    untouched: Set[str]                 # names whose bytes and mtime must not change
    renamed: Dict[str, str]             # .swap name -> final name
    exact: Dict[str, bytes]             # other final files with known bytes
    interval: int = ig.INDEX_INTERVAL_BYTES

    @property
    def changes_log(self):
        return bool(self.cuts or self.moved)


def expect_from(part_dir, logs, cuts=None, moved_names=(), untouched=(), renamed=None,
                exact=None, interval=ig.INDEX_INTERVAL_BYTES):
    original = files_in(part_dir)
    moved = {n: original[n] for n in moved_names}
    for n in untouched:
        assert n in original, n
    return Expect(part_dir, original, dict(logs), dict(cuts or {}), moved, set(untouched),
                  dict(renamed or {}), dict(exact or {}), interval)


def leo_of(base, data):
    batches = ig.read_log(data)
    return batches[-1].last_offset + 1 if batches else base


def log_end(directory):
    """The log end offset of a partition directory, read by tests/indexgen from its last
    .log file."""
    last = max(n for n in os.listdir(directory) if n.endswith(".log"))
    with open(os.path.join(directory, last), "rb") as f:
        return leo_of(int(last[:20]), f.read())


def cut_expect(part, seg_no, new_data, prefix, extra_untouched=()):
    """Write ``new_data`` as segment ``seg_no``'s log (aged) and compute what recovery must do
    when its first bad batch is at ``prefix``."""
    seg = part.segs[seg_no]
    log = os.path.basename(seg.paths["log"])
    ig.write_file(seg.paths["log"], new_data)
    os.utime(seg.paths["log"], ns=(OLD_MTIME_NS, OLD_MTIME_NS))
    assert prefix < len(new_data)
    kept = new_data[:prefix]
    # the prefix we constructed is valid as kafka-python sees it
    assert sum(b.size for b in ig.read_log(kept)) == prefix
    new_leo = leo_of(seg.base_offset, kept)
    logs = {os.path.basename(s.paths["log"]): s.data for s in part.segs[:seg_no]}
    logs[log] = kept
    moved = [n for s in part.segs[seg_no + 1:] for n in segment_names(s.base_offset)
             if os.path.exists(os.path.join(part.dir, n))]
    moved += [snapshot_name(o) for o in part.snapshots if o > new_leo]
    # (a snapshot at a set-aside segment's base offset equal to the new log end offset is not
    # "above" it: it stays)
    untouched = [n for s in part.segs[:seg_no] for n in segment_names(s.base_offset)
                 if os.path.exists(os.path.join(part.dir, n))]
    untouched += [snapshot_name(o) for o in part.snapshots if o <= new_leo]
    untouched += ["partition.metadata"] + list(extra_untouched)
    return expect_from(part.dir, logs, {log: (prefix, new_data)}, moved, untouched)


# -- log corruptions: (segment bytes) -> (corrupt bytes, position of the first bad batch) -------------

def _middle(data):
    entries, pos = positions(data)
    k = len(entries) // 2
    return entries, pos, k


def mut_truncated_batch(data):
    entries, pos = positions(data)
    return kg.truncated(data, 10), pos[-1]


def mut_truncated_header(data):
    entries, pos = positions(data)
    return data[:pos[-1] + 7], pos[-1]          # not even the 12-byte offset+size header


def mut_truncated_inside_header(data):
    entries, pos = positions(data)
    return data[:pos[-1] + 40], pos[-1]         # offset+size there, the v2 header cut short


def mut_garbage_tail(data):
    return kg.garbage_tail(data, 37, seed=1), len(data)


def mut_short_garbage_tail(data):
    return kg.garbage_tail(data, 5, seed=2), len(data)


def mut_zero_tail(data):
    return kg.zero_tail(data, 4096), len(data)


def mut_flipped_bit(data):
    entries, pos, k = _middle(data)
    return kg.flip_bit(data, pos[k] + len(entries[k]) // 2, bit=3), pos[k]


def mut_flipped_bit_in_crc(data):
    entries, pos, k = _middle(data)
    return kg.flip_bit(data, pos[k] + 17, bit=0), pos[k]


def mut_length_2gb(data):
    entries, pos, k = _middle(data)
    return kg.set_size_field(data, pos[k], INT32_MAX), pos[k]


def mut_length_below_14(data):
    entries, pos, k = _middle(data)
    return kg.set_size_field(data, pos[k], 13), pos[k]


def mut_length_negative(data):
    entries, pos, k = _middle(data)
    return kg.set_size_field(data, pos[k], -1), pos[k]


def mut_length_too_short(data):
    """A size field that stays inside the file but cuts the batch short (CRC mismatch)."""
    entries, pos, k = _middle(data)
    return kg.set_size_field(data, pos[k], len(entries[k]) - 12 - 100), pos[k]


def mut_magic_3(data):
    entries, pos, k = _middle(data)
    b = bytearray(data)
    b[pos[k] + 16] = 3            # magic is outside the v2 CRC
    return bytes(b), pos[k]


def mut_offset_backwards(data):
    """Batch k gets batch k-1's base offset (baseOffset is outside the CRC): its last offset is
    not greater than the previous batch's."""
    entries, pos, k = _middle(data)
    b = bytearray(data)
    prev_base = struct.unpack_from(">q", data, pos[k - 1])[0]
    struct.pack_into(">q", b, pos[k], prev_base)
    return bytes(b), pos[k]


def mut_offset_overflow(data):
    """Batch k's offsets moved 2^31 up: its last offset does not fit the segment. Not a cut:
    recover splits the segment there (LocalLog.splitOverflowedSegment), then cuts the second
    part at batch k + 1, whose offsets go back (tests/cli/test_loglog_rules.py)."""
    entries, pos, k = _middle(data)
    b = bytearray(data)
    base = struct.unpack_from(">q", data, pos[k])[0]
    struct.pack_into(">q", b, pos[k], base + 2**31)
    return bytes(b), pos[k]


def mut_first_below_base(data):
    """The first batch's offsets moved 100 below the segment's base offset."""
    b = bytearray(data)
    base = struct.unpack_from(">q", data, 0)[0]
    struct.pack_into(">q", b, 0, base - 100)
    return bytes(b), 0


def mut_record_count(data):
    """v2 header record count + 1, CRC recomputed: the records do not match the count."""
    entries, pos, k = _middle(data)
    batch = bytearray(entries[k])
    struct.pack_into(">i", batch, 57, struct.unpack_from(">i", batch, 57)[0] + 1)
    kg.fix_v2_crc(batch)
    return data[:pos[k]] + bytes(batch) + data[pos[k] + len(batch):], pos[k]


def mut_record_count_lower(data):
    entries, pos, k = _middle(data)
    batch = bytearray(entries[k])
    struct.pack_into(">i", batch, 57, struct.unpack_from(">i", batch, 57)[0] - 1)
    kg.fix_v2_crc(batch)
    return data[:pos[k]] + bytes(batch) + data[pos[k] + len(batch):], pos[k]


def _replace_batch(data, k, compress):
    entries, pos = positions(data)
    bad = kg.recompress_v2(entries[k], "gzip", compress)
    return data[:pos[k]] + bad + data[pos[k] + len(entries[k]):], pos[k]


def mut_gzip_garbage(data):
    """Batch k claims gzip, its records area is random bytes (valid CRC)."""
    return _replace_batch(data, len(kg.split_entries(data)) // 2,
                          lambda raw: kg.random_bytes(len(raw) // 2, seed=11))


def mut_gzip_truncated(data):
    """Batch k's gzip stream is cut in half (valid CRC)."""
    return _replace_batch(data, len(kg.split_entries(data)) // 2,
                          lambda raw: gzip.compress(raw, mtime=0)[:len(gzip.compress(raw)) // 2])


def mut_abort_marker(data):
    """The segment's ABORT marker has a flipped bit: its aborted transaction is cut too."""
    entries, pos = positions(data)
    batches = ig.read_log(data)
    c = next(i for i, b in enumerate(batches) if b.is_control)
    return kg.flip_bit(data, pos[c] + len(entries[c]) - 3), pos[c]


def mut_first_batch(data):
    return kg.set_size_field(data, 0, INT32_MAX), 0


LOG_MUTATIONS = {
    "truncated-batch": mut_truncated_batch,
    "truncated-header": mut_truncated_header,
    "truncated-inside-header": mut_truncated_inside_header,
    "garbage-tail": mut_garbage_tail,
    "short-garbage-tail": mut_short_garbage_tail,
    "zero-tail": mut_zero_tail,
    "flipped-bit": mut_flipped_bit,
    "flipped-bit-in-crc": mut_flipped_bit_in_crc,
    "length-2gb": mut_length_2gb,
    "length-below-14": mut_length_below_14,
    "length-negative": mut_length_negative,
    "length-too-short": mut_length_too_short,
    "magic-3": mut_magic_3,
    "offset-backwards": mut_offset_backwards,
    "first-batch-below-base": mut_first_below_base,
    "record-count-higher": mut_record_count,
    "record-count-lower": mut_record_count_lower,
    "gzip-garbage": mut_gzip_garbage,
    "gzip-truncated": mut_gzip_truncated,
    "abort-marker": mut_abort_marker,
    "first-batch": mut_first_batch,
}


def log_case(mutation, seg_no, **part_kw):
    def build(directory):
        part = make_partition(directory, **part_kw)
        new, prefix = LOG_MUTATIONS[mutation](part.segs[seg_no].data)
        return cut_expect(part, seg_no, new, prefix)
    return build


# -- other log corruptions ---------------------------------------------------------------------------

def legacy_segment(magic, codec, base=0, n=60):
    w = kg.SegmentWriter(base)
    for i in range(n):
        recs = [kg.Rec(b"k%d" % i, kg.filler(i, repeat=25), T0 + 1000 * i + j * (-1) ** j)
                for j in range(3)]
        w.add_legacy(magic, recs, codec)
    return w.data(), w.next_offset


def legacy_case(magic, codec):
    def build(directory):
        n = 60 if codec == "none" else 200
        d0, n0 = legacy_segment(magic, codec, n=n)
        d1, _ = legacy_segment(magic, codec, base=n0, n=n)
        part = make_partition(directory, segment_data=[(0, d0), (n0, d1)], snapshots=False)
        new, prefix = mut_flipped_bit(d0)
        return cut_expect(part, 0, new, prefix)
    return build


def legacy_garbage_wrapper_case(directory):
    """A v1 gzip wrapper whose compressed value is random bytes (CRC-32 valid)."""
    d0, n0 = legacy_segment(1, "gzip", n=200)
    d1, _ = legacy_segment(1, "gzip", base=n0, n=200)
    part = make_partition(directory, segment_data=[(0, d0), (n0, d1)], snapshots=False)
    entries, pos = positions(d1)
    k = len(entries) // 2
    last_offset = struct.unpack_from(">q", entries[k], 0)[0]
    ts = struct.unpack_from(">q", entries[k], 18)[0]
    bad = kg.legacy_wrapper(1, b"", last_offset, "gzip",
                            lambda _: kg.random_bytes(300, seed=5), timestamp=ts)
    new = d1[:pos[k]] + bad + d1[pos[k] + len(entries[k]):]
    return cut_expect(part, 1, new, pos[k])


def preallocated_active_case(directory):
    """A live broker's last segment (pre-allocated indexes) with a torn last batch."""
    part = make_partition(directory, preallocate_active=True)
    new, prefix = mut_truncated_batch(part.segs[-1].data)
    return cut_expect(part, 2, new, prefix)


# -- index problems (log fine) -----------------------------------------------------------------------

def index_case(kind):
    def build(directory):
        part = make_partition(directory)
        seg = part.segs[1]
        p = seg.paths
        idx = seg.indexes
        rebuild_txn = False
        if kind == "missing-index":
            os.remove(p["index"])
        elif kind == "missing-timeindex":
            os.remove(p["timeindex"])
        elif kind == "missing-both":
            os.remove(p["index"])
            os.remove(p["timeindex"])
        elif kind == "wrong-index-offset":
            off, pos = idx.offset_entries[1]
            ig.write_file(p["index"], ig.encode_offset_index(
                ig.replace_entry(idx.offset_entries, 1, (off - 1, pos)), seg.base_offset))
        elif kind == "wrong-index-position":
            off, _ = idx.offset_entries[1]
            pos2 = idx.offset_entries[2][1]
            ig.write_file(p["index"], ig.encode_offset_index(
                ig.replace_entry(idx.offset_entries, 1, (off, pos2)), seg.base_offset))
        elif kind == "index-partial-entry":
            ig.write_file(p["index"], ig.truncated_bytes(
                ig.encode_offset_index(idx.offset_entries, seg.base_offset), 3))
        elif kind == "index-entry-past-log":
            extra = idx.offset_entries + [(seg.batches[-1].last_offset + 50, len(seg.data) + 999)]
            ig.write_file(p["index"], ig.encode_offset_index(extra, seg.base_offset))
        elif kind == "wrong-timeindex":
            ts, off = idx.time_entries[1]
            ig.write_file(p["timeindex"], ig.encode_time_index(
                ig.replace_entry(idx.time_entries, 1, (ts + 1, off)), seg.base_offset))
        elif kind == "index-sealed-preallocated":
            # KAFKA-19200: a sealed segment's index left at full size (verify-index notes it;
            # recover trims it by rebuilding, a reasonable choice the contract leaves open)
            ig.write_file(p["index"], ig.preallocated_offset_index(
                ig.encode_offset_index(idx.offset_entries, seg.base_offset)))
        elif kind == "timeindex-sealed-preallocated":
            ig.write_file(p["timeindex"], ig.preallocated_time_index(
                ig.encode_time_index(idx.time_entries, seg.base_offset)))
        elif kind == "timeindex-zero-tail":
            ig.write_file(p["timeindex"], ig.zero_entries(
                ig.encode_time_index(idx.time_entries, seg.base_offset), 3, ig.TIME_ENTRY))
        elif kind == "txnindex-wrong":
            real = seg.txns[0]
            ig.write_file(p["txnindex"], ig.encode_txn_index(
                [real._replace(producer_id=real.producer_id + 1)]))
            rebuild_txn = True
        elif kind == "txnindex-missing":
            assert seg.txns
            os.remove(p["txnindex"])
            rebuild_txn = True
        elif kind == "txnindex-below-base":
            real = seg.txns[0]
            ig.write_file(p["txnindex"], ig.encode_txn_index(
                [real._replace(last_offset=seg.base_offset - 1)]))
            rebuild_txn = True
        else:
            raise AssertionError(kind)
        age_files(directory)
        logs = {os.path.basename(s.paths["log"]): s.data for s in part.segs}
        untouched = {n for n in os.listdir(directory)
                     if not n.startswith(ig.segment_prefix(seg.base_offset))}
        untouched.add(os.path.basename(p["log"]))
        if rebuild_txn:
            # the offset and time indexes are fine: left alone
            untouched |= {os.path.basename(p["index"]), os.path.basename(p["timeindex"])}
        elif os.path.exists(p["txnindex"]):
            untouched.add(os.path.basename(p["txnindex"]))
        return expect_from(directory, logs, untouched=untouched)
    return build


INDEX_KINDS = ["missing-index", "missing-timeindex", "missing-both", "wrong-index-offset",
               "wrong-index-position", "index-partial-entry", "index-entry-past-log",
               "wrong-timeindex", "timeindex-zero-tail", "index-sealed-preallocated",
               "timeindex-sealed-preallocated", "txnindex-wrong", "txnindex-missing",
               "txnindex-below-base"]


# -- leftovers of a crash ----------------------------------------------------------------------------

def compacted(data, keep_every=2):
    """``data`` with some batches dropped as the log cleaner would (every transactional batch,
    the last batch and every ``keep_every``-th one kept): offsets with gaps, same base."""
    entries = kg.split_entries(data)
    batches = ig.read_log(data)
    assert len(entries) == len(batches)
    return b"".join(e for i, (e, b) in enumerate(zip(entries, batches))
                    if i % keep_every == 0 or b.is_transactional or i == len(entries) - 1)


def write_aged(path, data):
    ig.write_file(path, data)
    os.utime(path, ns=(OLD_MTIME_NS, OLD_MTIME_NS))
    return os.path.basename(path)


def deleted_case(directory):
    """Files of segments and a snapshot deleted by retention, waiting for file.delete.delay.ms."""
    part = make_partition(directory, base0=500)
    old, _ = ig.busy_segment(0, n_batches=8)
    d = part.dir
    moved = [write_aged(os.path.join(d, name(0, "log.deleted")), old),
             write_aged(os.path.join(d, name(0, "index.deleted")), ig.encode_offset_index(
                 ig.build_indexes(old).offset_entries, 0)),
             write_aged(os.path.join(d, name(0, "timeindex.deleted")), ig.encode_time_index(
                 ig.build_indexes(old).time_entries, 0)),
             write_aged(os.path.join(d, name(500, "snapshot.deleted")), ig.encode_snapshot([])),
             # a deleted copy of a live segment's file: moved, the live file kept
             write_aged(os.path.join(d, name(part.bases[1], "index.deleted")), b"\x00" * 24)]
    logs = {os.path.basename(s.paths["log"]): s.data for s in part.segs}
    untouched = set(files_in(d)) - set(moved)
    return expect_from(d, logs, moved_names=moved, untouched=untouched)


def orphans_case(directory):
    """Index files without a .log (the broker deletes them)."""
    part = make_partition(directory)
    d = part.dir
    orphan = part.leo + 1000
    seg = part.segs[0]
    moved = [write_aged(os.path.join(d, name(orphan, "index")), ig.encode_offset_index(
                 seg.indexes.offset_entries, 0)),
             write_aged(os.path.join(d, name(orphan, "timeindex")), b""),
             write_aged(os.path.join(d, name(orphan + 7, "txnindex")),
                        ig.encode_txn_index(seg.txns))]
    logs = {os.path.basename(s.paths["log"]): s.data for s in part.segs}
    untouched = set(files_in(d)) - set(moved)
    return expect_from(d, logs, moved_names=moved, untouched=untouched)


def cleaned_case(directory):
    """Cleaner output not yet swapped in, and a half-done split (.swap at or above the smallest
    .cleaned base offset): all of it moved, the live segments untouched."""
    part = make_partition(directory)
    d = part.dir
    b1, b2 = part.bases[1], part.bases[2]
    c1 = compacted(part.segs[1].data)
    c2 = compacted(part.segs[2].data)
    moved = [write_aged(os.path.join(d, name(b1, "log.cleaned")), c1),
             write_aged(os.path.join(d, name(b1, "index.cleaned")), ig.encode_offset_index(
                 ig.build_indexes(c1).offset_entries, b1)),
             write_aged(os.path.join(d, name(b1, "timeindex.cleaned")), b""),
             write_aged(os.path.join(d, name(b1, "log.swap")), c1),
             write_aged(os.path.join(d, name(b2, "log.swap")), c2),
             write_aged(os.path.join(d, name(b2, "index.swap")), ig.encode_offset_index(
                 ig.build_indexes(c2).offset_entries, b2))]
    logs = {os.path.basename(s.paths["log"]): s.data for s in part.segs}
    untouched = set(files_in(d)) - set(moved)
    return expect_from(d, logs, moved_names=moved, untouched=untouched)


def swap_case(with_indexes):
    """The cleaner replaced segments 0 and 1 by one compacted segment and crashed after renaming
    it to .swap: the old segments' files (and the producer snapshot in their range) are moved,
    the .swap files renamed into place."""
    def build(directory):
        part = make_partition(directory)
        d = part.dir
        b0, b1, b2 = part.bases
        swap = compacted(part.segs[0].data + part.segs[1].data)
        assert leo_of(b0, swap) == b2
        renamed = {write_aged(os.path.join(d, name(b0, "log.swap")), swap): name(b0, "log")}
        exact = {}
        if with_indexes:
            idx = ig.build_indexes(swap)
            txns = ig.aborted_txns(ig.read_log(swap))
            assert len(txns) == 2
            for kind, data in (("index", ig.encode_offset_index(idx.offset_entries, b0)),
                               ("timeindex", ig.encode_time_index(idx.time_entries, b0)),
                               ("txnindex", ig.encode_txn_index(txns))):
                renamed[write_aged(os.path.join(d, name(b0, kind + ".swap")), data)] = \
                    name(b0, kind)
                exact[name(b0, kind)] = data
        moved = [n for b in (b0, b1) for n in segment_names(b)] + [snapshot_name(b1)]
        logs = {name(b0, "log"): swap, name(b2, "log"): part.segs[2].data}
        untouched = set(segment_names(b2)) | {snapshot_name(b2), snapshot_name(part.leo),
                                               "partition.metadata"}
        return expect_from(d, logs, moved_names=moved, untouched=untouched, renamed=renamed,
                           exact=exact)
    return build


def cleaned_and_swap_case(directory):
    """A .swap below the smallest .cleaned base is completed; the .swap at/above it and the
    .cleaned files are moved."""
    part = make_partition(directory)
    d = part.dir
    b0, b1, b2 = part.bases
    swap = compacted(part.segs[0].data)
    renamed = {write_aged(os.path.join(d, name(b0, "log.swap")), swap): name(b0, "log")}
    c2 = compacted(part.segs[2].data, keep_every=3)
    moved = [write_aged(os.path.join(d, name(b2, "log.cleaned")), c2),
             write_aged(os.path.join(d, name(b2, "log.swap")), c2)]
    moved += segment_names(b0)
    logs = {name(b0, "log"): swap, name(b1, "log"): part.segs[1].data,
            name(b2, "log"): part.segs[2].data}
    untouched = (set(segment_names(b1)) | set(segment_names(b2))
                 | {snapshot_name(o) for o in part.snapshots} | {"partition.metadata"})
    return expect_from(d, logs, moved_names=moved, untouched=untouched, renamed=renamed)


def swap_then_corrupt_case(directory):
    """Leftovers and a corrupt segment together: a .deleted file, a .swap to complete, and a
    flipped bit in the middle segment (the last segment is set aside)."""
    part = make_partition(directory)
    d = part.dir
    b0, b1, b2 = part.bases
    swap = compacted(part.segs[0].data)
    new, prefix = mut_flipped_bit(part.segs[1].data)
    exp = cut_expect(part, 1, new, prefix)
    renamed = {write_aged(os.path.join(d, name(b0, "log.swap")), swap): name(b0, "log")}
    dele = write_aged(os.path.join(d, name(b0, "timeindex.deleted")), b"\x01" * 36)
    moved = list(exp.moved) + segment_names(b0) + [dele]
    logs = dict(exp.logs)
    logs[name(b0, "log")] = swap
    untouched = exp.untouched - set(segment_names(b0))
    return expect_from(d, logs, exp.cuts, moved_names=moved, untouched=untouched,
                       renamed=renamed)


# -- the case registry -------------------------------------------------------------------------------

CASES = {}
for _m in LOG_MUTATIONS:
    CASES["log-%s-middle" % _m] = log_case(_m, 1)
    CASES["log-%s-last" % _m] = log_case(_m, 2)
CASES["log-flipped-bit-first-of-three"] = log_case("flipped-bit", 0)
CASES["log-flipped-bit-gzip"] = log_case("flipped-bit", 1, codec="gzip")
CASES["log-truncated-gzip"] = log_case("truncated-batch", 2, codec="zstd")
CASES["log-legacy-v1"] = legacy_case(1, "none")
CASES["log-legacy-v0"] = legacy_case(0, "none")
CASES["log-legacy-v1-gzip"] = legacy_case(1, "gzip")
CASES["log-preallocated-active"] = preallocated_active_case
CASES["log-legacy-v1-gzip-garbage"] = legacy_garbage_wrapper_case
CASES["log-record-count-higher-gzip"] = log_case("record-count-higher", 2, codec="gzip")
CASES["log-record-count-lower-lz4"] = log_case("record-count-lower", 1, codec="lz4")
CASES["log-flipped-bit-middle-preallocated-active"] = log_case("flipped-bit", 1,
                                                               preallocate_active=True)
for _k in INDEX_KINDS:
    CASES["index-" + _k] = index_case(_k)
CASES["leftover-deleted"] = deleted_case
CASES["leftover-orphan-indexes"] = orphans_case
CASES["leftover-cleaned"] = cleaned_case
CASES["leftover-swap"] = swap_case(False)
CASES["leftover-swap-with-indexes"] = swap_case(True)
CASES["leftover-cleaned-and-swap"] = cleaned_and_swap_case
CASES["leftover-swap-and-corrupt-segment"] = swap_then_corrupt_case


KNOWN_BUGS = {}  # case -> reason: marked xfail(strict=True)


def case_params(cases):
    out = []
    for c in sorted(cases):
        bug = KNOWN_BUGS.get(c)
        out.append(pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=bug))
                   if bug else c)
    return out


def build_case(case, tmp_path):
    return CASES[case](str(tmp_path / "logdir" / "orders-0"))


# -- checking a recovered partition ------------------------------------------------------------------

def expected_txns(exp):
    """base -> aborted transactions of the remaining segments, in order (a transaction may begin
    in an earlier segment)."""
    open_txns, out = {}, {}
    for n in sorted(exp.logs):
        out[int(n.split(".")[0])] = ig.aborted_txns(ig.read_log(exp.logs[n]), open_txns)
    return out


def check_partition_files(exp):
    """The files outside the quarantine folder: names, .log bytes, rebuilt indexes."""
    d = exp.dir
    actual = files_in(d)
    subdirs = [n for n in os.listdir(d) if os.path.isdir(os.path.join(d, n))]
    assert subdirs in ([], [QUARANTINE]), subdirs
    txns = expected_txns(exp)
    bases = sorted(txns)
    required = (set(exp.original) - set(exp.moved) - set(exp.renamed)) | set(exp.renamed.values())
    txn_names = {name(b, "txnindex") for b in bases}
    required -= txn_names
    for b in bases:
        required |= {name(b, "log"), name(b, "index"), name(b, "timeindex")}
        if txns[b]:
            required.add(name(b, "txnindex"))
    allowed = required | txn_names
    # the leader epochs: those the file had (when it could be read), plus those the recovered
    # batches start, truncated at the log end offset
    epochs_name = "leader-epoch-checkpoint"
    if epochs_name not in exp.untouched and epochs_name not in exp.exact:
        try:
            had = parse_leader_epochs(exp.original[epochs_name]) \
                if epochs_name in exp.original else []
        except ValueError:
            had = None
        if had is not None:
            want = leader_epochs_of(sorted((int(n[:20]), d) for n, d in exp.logs.items()), had)
            if want:
                required.add(epochs_name)
                allowed.add(epochs_name)
                assert actual.get(epochs_name) == ig.leader_epoch_checkpoint(want).encode(), \
                    (actual.get(epochs_name), want)
    # the producer snapshots, as LogLoader leaves them: ProducerStateManager.removeStraySnapshots
    # (at no segment base, but the newest above every base), those above the log end offset or
    # at or below the log start offset (the first base) deleted; from the latest left (empty in
    # these tests) the batches are replayed, a snapshot taken at each of the last two segment
    # bases above it and at the log end offset (UnifiedLog.rebuildProducerState)
    logs = sorted((int(n[:20]), data) for n, data in exp.logs.items())
    if logs:
        leo = leo_of(*logs[-1])
        bases = [b for b, _ in logs]
        on_disk = sorted(int(n[:20]) for n in exp.original if n.endswith(".snapshot")
                         and n not in exp.moved)
        strays = [o for o in on_disk if o not in bases]
        if strays and strays[-1] > bases[-1]:
            strays.pop()
        kept = [o for o in on_disk if o not in strays and bases[0] < o <= leo]
        for o in set(on_disk) - set(kept):
            required.discard(snapshot_name(o))
            assert snapshot_name(o) not in actual, snapshot_name(o)
        start = max(kept, default=bases[0])
        if start in kept:
            assert exp.original[snapshot_name(start)] == ig.encode_snapshot([])
        taken = [b for b in bases[-2:] if start < b < leo] + ([leo] if leo > start else [])
        for off in taken:
            snap = snapshot_name(off)
            required.add(snap)
            allowed.add(snap)
            if snap in actual:
                assert actual[snap] == expected_snapshot_at(logs, start, off), snap
    assert required <= set(actual), "missing after recovery: %s" % sorted(required - set(actual))
    assert set(actual) <= allowed, "unexpected files: %s" % sorted(set(actual) - allowed)
    # logs: the valid prefix, byte for byte
    for n, data in exp.logs.items():
        assert len(actual[n]) == len(data), "%s: %d bytes, expected %d" % (
            n, len(actual[n]), len(data))
        assert actual[n] == data, n
    # untouched files: bytes and mtime
    for n in exp.untouched:
        assert actual[n] == exp.original[n], "%s changed" % n
        assert os.stat(os.path.join(d, n)).st_mtime_ns == OLD_MTIME_NS, "%s rewritten" % n
    for n, data in exp.exact.items():
        assert actual[n] == data, n
    # indexes: what the broker's recovery builds for the kept bytes (trimmed); the last
    # segment's may stay pre-allocated (zeros after the same entries), as LogLoader leaves the
    # active segment's once it has loaded the log
    for b in bases:
        log = exp.logs[name(b, "log")]
        idx = ig.build_indexes(log, interval=exp.interval)
        for kind, want in (("index", ig.encode_offset_index(idx.offset_entries, b)),
                           ("timeindex", ig.encode_time_index(idx.time_entries, b))):
            n = name(b, kind)
            if n in exp.untouched or n in exp.exact:
                continue
            got = actual[n]
            if b == max(bases) and len(got) > len(want) and not got[len(want):].strip(b"\0"):
                got = got[:len(want)]
            assert got == want, "%s: %d bytes, expected %d (entries %r)" % (
                n, len(actual[n]), len(want),
                ig.decode_offset_index(want, b) if kind == "index" else idx.time_entries)
        n = name(b, "txnindex")
        if n in exp.untouched or n in exp.exact:
            continue
        if txns[b]:
            assert actual[n] == ig.encode_txn_index(txns[b]), n
        elif n in actual:
            assert actual[n] == b"", "%s: %r, expected empty or absent" % (n, actual[n])


def check_quarantine(exp, qdirs):
    """Every moved file and every cut byte, verbatim, in the quarantine folder(s), with manifest
    entries."""
    entries = [(q, e) for q in qdirs for e in read_manifest(q)]
    for n, data in exp.moved.items():
        found = [(q, e) for q, e in entries
                 if e["what"] == "moved" and os.path.basename(e["file"]) == n]
        assert found, "no manifest entry for moved %s: %r" % (n, entries)
        for q, e in found:
            with open(os.path.join(q, e["saved_as"]), "rb") as f:
                assert f.read() == data, "%s: quarantined bytes differ" % n
        assert any(os.path.isfile(os.path.join(q, n)) for q in qdirs), \
            "%s not under its own name in quarantine" % n
    for log, (start, orig) in exp.cuts.items():
        pieces = [p for q in qdirs for p in cut_files(q, log)]
        assert pieces, "no %s.cut-* file in %s" % (log, [os.listdir(q) for q in qdirs])
        for s, e, data in pieces:
            assert data == orig[s:e], "%s.cut-%d-%d: not the original bytes" % (log, s, e)
        # together they cover [start, old size) exactly
        covered = start
        for s, e, _ in pieces:
            assert s <= covered, "gap in the cut bytes of %s before %d" % (log, s)
            covered = max(covered, e)
        assert pieces[0][0] == start and covered == len(orig), (
            log, [(s, e) for s, e, _ in pieces], start, len(orig))
        cut_entries = [e for _, e in entries
                       if e["what"] == "cut" and os.path.basename(e["file"]) == log]
        assert cut_entries, entries
        assert min(e["range"][0] for e in cut_entries) == start
        assert max(e["range"][1] for e in cut_entries) == len(orig)
    # every file the run wrote where there was none has a ``written`` entry (its hash), so
    # that `kafkalog quarantine restore` can take it away again
    written = {}
    for q in qdirs:
        for e in read_manifest(q, ("written",)):
            written[e["file"]] = e
    new = set(files_in(exp.dir)) - set(exp.original) - set(exp.renamed.values())
    assert new <= set(written), "written, not in a manifest: %s" % sorted(new - set(written))
    for n in new:
        check_written_entry(written[n], [], exp.dir)


def check_recovered(exp, res, text=True):
    assert res.code == 1, res
    check_partition_files(exp)
    qdirs = quarantine_dirs(exp.dir)
    if exp.changes_log:
        assert len(qdirs) == 1, qdirs
    else:
        assert len(qdirs) <= 1, qdirs
    check_quarantine(exp, qdirs)
    if text:
        for n in exp.logs:
            path = os.path.join(exp.dir, n)
            assert any(path in line for line in res.lines), (path, res.out)
    # the broker's index checks pass now
    v = verify_index(exp.dir)
    assert v.code == 0, v
    # a second run changes nothing
    # (with the same index interval: the segment holding the recovery point is rebuilt again)
    before = tree(exp.dir)
    again = recover("--index-interval-bytes", str(exp.interval), exp.dir)
    assert again.code == 0, again
    assert_same_tree(before, tree(exp.dir))


# -- the tests: every case, for real, as a dry run, and in JSON --------------------------------------

def test_mutations_place_the_first_bad_batch_where_we_say():
    """Sanity check of the fixtures: kafka-python reads every batch of the prefix, and the bytes
    from the first bad position on do not start a batch that it accepts as valid."""
    data, _ = ig.busy_segment(1000, n_batches=30, txn_at=4, seed=1)
    for m, fn in LOG_MUTATIONS.items():
        new, prefix = fn(data)
        assert new[:prefix] == data[:prefix], m
        assert new != data, m
        kept = ig.read_log(new[:prefix])
        assert sum(b.size for b in kept) == prefix, m


@pytest.mark.parametrize("case", case_params(CASES))
def test_recover(tmp_path, case):
    exp = build_case(case, tmp_path)
    res = recover(exp.dir)
    check_recovered(exp, res)


@pytest.mark.parametrize("case", case_params(CASES))
def test_dry_run(tmp_path, case):
    exp = build_case(case, tmp_path)
    before = tree(exp.dir)
    res = recover("--dry-run", exp.dir)
    assert res.code == 1, res
    assert_same_tree(before, tree(exp.dir))
    assert not os.path.exists(os.path.join(exp.dir, QUARANTINE))
    for n in exp.cuts:
        path = os.path.join(exp.dir, n)
        assert any(path in line for line in res.lines), (path, res.out)
    jres = recover("--dry-run", "--format", "json", exp.dir)
    assert jres.code == 1, jres
    assert_same_tree(before, tree(exp.dir))
    check_json_report(exp, jres)
    # and the real run afterwards does what the dry run announced
    check_recovered(exp, recover(exp.dir))


def check_json_report(exp, res):
    objs = json_objects(res)
    for o in objs:
        assert isinstance(o.get("type"), str), o
    segs = [o for o in objs if o["type"] == "segment"]
    for log, (start, orig) in exp.cuts.items():
        mine = [o for o in segs if os.path.basename(o["file"]) == log]
        assert len(mine) == 1, (log, segs)
        o = mine[0]
        assert o["bytesKept"] == start, o
        assert o["bytesCut"] == len(orig) - start, o
        assert o["firstBadPosition"] == start, o
        assert isinstance(o["reason"], str) and o["reason"].strip(), o
    for log in exp.logs:
        mine = [o for o in segs if os.path.basename(o["file"]) == log]
        assert len(mine) == 1, (log, segs)   # an object per segment
        if log in exp.cuts:
            continue
        assert mine[0]["bytesCut"] == 0, mine
        assert mine[0]["bytesKept"] == len(exp.logs[log]), mine
    # a file set aside: a "moved" object, or a segment's .log set aside whole
    moved_objs = [o for o in objs if o["type"] == "moved"
                  or (o["type"] == "segment" and o["setAside"])]
    for n in exp.moved:
        assert any(isinstance(v, str) and os.path.basename(v) == n
                   for o in moved_objs for v in o.values()), (n, moved_objs)
    assert any(o["type"] == "summary" for o in objs), objs


@pytest.mark.parametrize("case", case_params(
    c for c in CASES if "middle" in c or not c.startswith("log-") or c == "log-legacy-v1"))
def test_json_report(tmp_path, case):
    exp = build_case(case, tmp_path)
    res = recover("--format", "json", exp.dir)
    assert res.code == 1, res
    check_json_report(exp, res)
    check_recovered(exp, res, text=False)


# -- valid data that must be kept --------------------------------------------------------------------

def overlapping_batch_partition(directory):
    """A middle batch whose base offset is the previous batch's last offset (baseOffset is
    outside the CRC), its last offset still greater than the previous batch's last offset."""
    part = make_partition(directory, n_segments=2)
    data = part.segs[0].data
    entries, pos = positions(data)
    k = len(entries) // 2
    prev = ig.read_log(data)[k - 1]
    b = bytearray(data)
    struct.pack_into(">q", b, pos[k], prev.last_offset)
    ig.write_file(part.segs[0].paths["log"], bytes(b))
    age_files(directory)
    new = ig.read_log(bytes(b))
    assert new[k].base_offset == prev.last_offset < new[k].last_offset
    return part


def test_overlapping_batch_with_increasing_last_offset_is_kept(tmp_path):
    """Only a batch's last offset must increase: a batch whose base offset repeats the previous
    batch's last offset is valid and kept, with nothing to do."""
    part = overlapping_batch_partition(str(tmp_path / "logdir" / "t-0"))
    # its indexes (built for the unpatched bytes) still verify: nothing to do
    assert verify_index(part.dir).code == 0
    assert_nothing_to_do(part.dir)


def big_record_partition(directory, size=6_000_000):
    """A valid batch holding one record larger than 5 MiB (a broker with message.max.bytes
    above that writes such batches), between two small ones."""
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(b"k", b"x" * 100, T0)])
    w.add_v2([kg.Rec(b"big", kg.random_bytes(size), T0 + 1)])
    w.add_v2([kg.Rec(b"k2", b"x" * 100, T0 + 2)])
    return make_partition(directory, segment_data=[(0, w.data())])


def test_batch_larger_than_default_max_message_size_is_kept(tmp_path):
    """A valid batch with a record of 6,000,012 bytes (past the default --max-message-size) is
    kept: nothing to do."""
    part = big_record_partition(str(tmp_path / "logdir" / "big-0"))
    assert_nothing_to_do(part.dir)


def test_highly_compressed_batch_is_kept(tmp_path):
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(b"k", b"x" * 100, T0)])
    w.add_v2([kg.Rec(b"z%d" % i, bytes(1 << 20), T0 + 1) for i in range(90)], "zstd")
    w.add_v2([kg.Rec(b"k2", b"x" * 100, T0 + 2)])
    assert len(w.data()) < 10000
    part = make_partition(str(tmp_path / "logdir" / "z-0"), segment_data=[(0, w.data())])
    assert_nothing_to_do(part.dir)


def test_batch_within_max_message_size_option_is_kept(tmp_path):
    part = big_record_partition(str(tmp_path / "logdir" / "big-0"))
    assert_nothing_to_do(part.dir, "--max-message-size", "10000000")


# -- clean partitions --------------------------------------------------------------------------------

def assert_nothing_to_do(directory, *args):
    had_quarantine = os.path.exists(os.path.join(directory, QUARANTINE))
    before = tree(directory)
    res = recover(*args, directory)
    assert res.code == 0, res
    assert_same_tree(before, tree(directory))
    assert had_quarantine or not os.path.exists(os.path.join(directory, QUARANTINE))
    dry = recover("--dry-run", *args, directory)
    assert dry.code == 0, dry
    jres = recover("--format", "json", *args, directory)
    assert jres.code == 0, jres
    for o in json_objects(jres):
        if o.get("type") == "segment":
            assert o["bytesCut"] == 0 and not o["setAside"], o
        assert o.get("type") != "moved", o
    assert_same_tree(before, tree(directory))
    return res


def with_leader_epochs(part):
    ig.write_file(os.path.join(part.dir, "leader-epoch-checkpoint"),
                  ig.leader_epoch_checkpoint([(1, 0)]))
    age_files(part.dir)
    return part


def test_snapshot_at_set_aside_segment_base(tmp_path):
    """A producer snapshot at the base of a segment set aside is moved once, with the
    segment. Two segments, producer snapshots at the second segment's base (written at the roll,
    as every broker does) and at the log end offset; a flipped bit in the first segment's middle
    batch. Expected: segment 1 and both snapshots moved, exit 1."""
    d = str(tmp_path / "logdir" / "t-0")
    d0, n0 = ig.busy_segment(0, n_batches=10)
    d1, n1 = ig.busy_segment(n0, n_batches=10)
    part = make_partition(d, segment_data=[(0, d0), (n0, d1)])
    assert part.snapshots == [n0, n1]
    new, prefix = mut_flipped_bit(d0)
    exp = cut_expect(part, 0, new, prefix)
    assert set(exp.moved) == set(segment_names(n0)[:3]) | {snapshot_name(n0), snapshot_name(n1)}
    check_recovered(exp, recover(d))


def test_clean_partition(tmp_path):
    part = with_leader_epochs(make_partition(str(tmp_path / "logdir" / "orders-0")))
    res = assert_nothing_to_do(part.dir)
    for s in part.segs:
        assert any(s.paths["log"] in line for line in res.lines), res.out


def test_clean_partition_with_preallocated_active_segment(tmp_path):
    part = with_leader_epochs(make_partition(str(tmp_path / "logdir" / "orders-0"),
                                             preallocate_active=True))
    assert os.path.getsize(part.segs[-1].paths["index"]) == ig.OFFSET_INDEX_MAX_BYTES
    assert os.path.getsize(part.segs[-1].paths["timeindex"]) == ig.TIME_INDEX_MAX_BYTES
    assert_nothing_to_do(part.dir)


def test_clean_live_active_segment_without_final_time_entry(tmp_path):
    """A live broker's active segment: pre-allocated indexes, no final time entry yet. After
    a clean shutdown (the marker), left alone; without it, see
    test_killed_broker_active_segment_time_index_gets_its_final_entry."""
    part = make_partition(str(tmp_path / "logdir" / "orders-0"))
    ig.write_file(str(tmp_path / "logdir" / ".kafka_cleanshutdown"), b"")
    seg = part.segs[-1]
    idx = ig.build_indexes(seg.data, final_time_entry=False)
    assert len(idx.time_entries) < len(seg.indexes.time_entries)
    ig.write_file(seg.paths["index"], ig.preallocated_offset_index(
        ig.encode_offset_index(idx.offset_entries, seg.base_offset)))
    ig.write_file(seg.paths["timeindex"], ig.preallocated_time_index(
        ig.encode_time_index(idx.time_entries, seg.base_offset)))
    age_files(part.dir)
    assert_nothing_to_do(part.dir)


def test_killed_broker_active_segment_time_index_gets_its_final_entry(tmp_path):
    """The same active segment without the clean-shutdown marker: LogSegment.recover rebuilds
    its time index, final entry included (the broker's own recovery would)."""
    part = make_partition(str(tmp_path / "logdir" / "orders-0"))
    seg = part.segs[-1]
    idx = ig.build_indexes(seg.data, final_time_entry=False)
    ig.write_file(seg.paths["index"], ig.preallocated_offset_index(
        ig.encode_offset_index(idx.offset_entries, seg.base_offset)))
    ig.write_file(seg.paths["timeindex"], ig.preallocated_time_index(
        ig.encode_time_index(idx.time_entries, seg.base_offset)))
    res = recover(part.dir)
    assert res.code == 1, res
    with open(seg.paths["timeindex"], "rb") as f:
        assert f.read() == ig.encode_time_index(seg.indexes.time_entries, seg.base_offset)
    with open(seg.paths["index"], "rb") as f:   # pre-allocated, the same entries: kept
        assert f.read() == ig.preallocated_offset_index(
            ig.encode_offset_index(idx.offset_entries, seg.base_offset))
    assert_nothing_to_do(part.dir)


def test_clean_live_active_segment_without_index_entries(tmp_path):
    d0, n0 = ig.busy_segment(0, n_batches=20)
    d1, _ = ig.busy_segment(n0, n_batches=2)
    part = make_partition(str(tmp_path / "logdir" / "t-0"), segment_data=[(0, d0), (n0, d1)])
    ig.write_file(str(tmp_path / "logdir" / ".kafka_cleanshutdown"), b"")
    ig.write_file(part.segs[1].paths["index"], ig.preallocated_offset_index(b""))
    ig.write_file(part.segs[1].paths["timeindex"], ig.preallocated_time_index(b""))
    age_files(part.dir)
    assert_nothing_to_do(part.dir)


def test_clean_empty_active_segment(tmp_path):
    d0, n0 = ig.busy_segment(0, n_batches=20)
    part = make_partition(str(tmp_path / "logdir" / "t-0"), segment_data=[(0, d0), (n0, b"")],
                          preallocate_active=True)
    assert_nothing_to_do(part.dir)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_clean_compressed_partition(tmp_path, codec):
    part = make_partition(str(tmp_path / "logdir" / "c-0"), codec=codec)
    assert_nothing_to_do(part.dir)


@pytest.mark.parametrize("magic,codec", [(0, "none"), (1, "none"), (1, "gzip"), (0, "gzip")])
def test_clean_legacy_partition(tmp_path, magic, codec):
    d0, n0 = legacy_segment(magic, codec, n=60 if codec == "none" else 200)
    part = make_partition(str(tmp_path / "logdir" / "l-0"), segment_data=[(0, d0)],
                          snapshots=False)
    assert_nothing_to_do(part.dir)


def test_clean_sample_segments_with_every_field(tmp_path):
    """kafkagen's sample segment: gaps, transactions, LogAppendTime, delete horizon, headers."""
    d = str(tmp_path / "logdir" / "s-0")
    data = kg.sample_segment(2, "none")
    part = make_partition(d, segment_data=[(0, data)], snapshots=False)
    assert_nothing_to_do(part.dir)


def test_clean_after_recovery_quarantine_folder_is_ignored(tmp_path):
    """A quarantine folder from an earlier run is not a reason to do anything."""
    exp = build_case("log-garbage-tail-middle", tmp_path)
    assert recover(exp.dir).code == 1
    age_files(exp.dir)
    assert_nothing_to_do(exp.dir)


# -- options and paths -------------------------------------------------------------------------------

def test_index_interval_bytes(tmp_path):
    """--index-interval-bytes: a rebuilt index has an entry after more than N bytes."""
    part = make_partition(str(tmp_path / "logdir" / "orders-0"))
    seg = part.segs[1]
    os.remove(seg.paths["index"])
    new, prefix = mut_flipped_bit(part.segs[2].data)
    exp = cut_expect(part, 2, new, prefix)
    exp = exp._replace(untouched=exp.untouched - set(segment_names(seg.base_offset)),
                       interval=1024)
    want = ig.build_indexes(seg.data, interval=1024)
    assert len(want.offset_entries) > len(seg.indexes.offset_entries)
    # no recovery point: every segment's indexes rebuilt at 1024 bytes, segment 0's too
    exp = exp._replace(untouched=exp.untouched - {name(part.bases[0], "index"),
                                                  name(part.bases[0], "timeindex")})
    res = recover("--index-interval-bytes", "1024", exp.dir)
    check_recovered(exp, res)


def test_index_interval_bytes_zero(tmp_path):
    """index.interval.bytes 0: an entry for every batch but the first."""
    part = make_partition(str(tmp_path / "logdir" / "orders-0"), n_segments=1)
    os.remove(part.segs[0].paths["index"])
    exp = expect_from(part.dir, {name(0, "log"): part.segs[0].data},
                      untouched={"partition.metadata", name(0, "log"), name(0, "txnindex")}
                      | {snapshot_name(o) for o in part.snapshots}, interval=0)
    want = ig.build_indexes(part.segs[0].data, interval=0)
    assert len(want.offset_entries) == len(part.segs[0].batches) - 1
    check_recovered(exp, recover("--index-interval-bytes", "0", part.dir))


def test_max_message_size_option_accepted(tmp_path):
    exp = build_case("log-garbage-tail-last", tmp_path)
    check_recovered(exp, recover("--max-message-size", "10000000", exp.dir))


def test_log_file_path_means_its_partition(tmp_path):
    exp = build_case("log-zero-tail-middle", tmp_path)
    res = recover(os.path.join(exp.dir, name(0, "log")))
    check_recovered(exp, res)


def test_log_directory_path(tmp_path):
    logdir = tmp_path / "logdir"
    exp0 = CASES["log-zero-tail-middle"](str(logdir / "orders-0"))
    exp1 = CASES["log-garbage-tail-last"](str(logdir / "orders-1"))
    clean = make_partition(str(logdir / "orders-2"))
    ig.write_file(logdir / "recovery-point-offset-checkpoint",
                  ig.offset_checkpoint([("orders", 0, 0), ("orders", 1, 0), ("orders", 2, 0)]))
    ig.write_file(logdir / "replication-offset-checkpoint",
                  ig.offset_checkpoint([("orders", 0, 10), ("orders", 1, 20), ("orders", 2, 5)]))
    age_files(str(logdir))
    checkpoints = {n: (logdir / n).read_bytes() for n in os.listdir(logdir)
                   if n.endswith("checkpoint")}
    clean_before = tree(clean.dir)
    res = recover(str(logdir))
    assert res.code == 1, res
    for exp in (exp0, exp1):
        check_partition_files(exp)
        check_quarantine(exp, quarantine_dirs(exp.dir))
        for n in exp.logs:
            assert any(os.path.join(exp.dir, n) in line for line in res.lines), res.out
    assert_same_tree(clean_before, tree(clean.dir))
    # the recovery points written back at the log end offsets, in the file's order; the
    # other checkpoints untouched
    for n, data in checkpoints.items():
        if n != "recovery-point-offset-checkpoint":
            assert (logdir / n).read_bytes() == data, n
    assert (logdir / "recovery-point-offset-checkpoint").read_bytes() == ig.offset_checkpoint(
        [("orders", 0, log_end(exp0.dir)), ("orders", 1, log_end(exp1.dir)),
         ("orders", 2, log_end(clean.dir))]).encode()
    assert verify_index(str(logdir)).code == 0
    before = tree(str(logdir))
    assert recover(str(logdir)).code == 0
    after = tree(str(logdir))
    after.pop(".lock", None)
    before.pop(".lock", None)
    assert_same_tree(before, after)


def test_several_partition_paths(tmp_path):
    exp0 = CASES["log-zero-tail-last"](str(tmp_path / "logdir" / "orders-0"))
    exp1 = CASES["index-missing-index"](str(tmp_path / "logdir" / "orders-1"))
    res = recover(exp0.dir, exp1.dir)
    assert res.code == 1, res
    for exp in (exp0, exp1):
        check_partition_files(exp)
        check_quarantine(exp, quarantine_dirs(exp.dir))
    assert recover(exp0.dir, exp1.dir).code == 0


def test_missing_path(tmp_path):
    assert_clean_exit2(recover(str(tmp_path / "nope")))


def test_missing_path_among_good_ones_exits_2(tmp_path):
    exp = build_case("log-garbage-tail-last", tmp_path)
    res = recover(exp.dir, str(tmp_path / "nope"))
    assert res.code == 2, res
    assert "nope" in res.err, res


def test_index_file_path_is_a_usage_error(tmp_path):
    exp = build_case("log-garbage-tail-last", tmp_path)
    before = tree(exp.dir)
    res = recover(os.path.join(exp.dir, name(0, "index")))
    assert res.code == 2, res
    assert_same_tree(before, tree(exp.dir))


def test_directory_without_partitions(tmp_path):
    (tmp_path / "empty").mkdir()
    res = recover(str(tmp_path / "empty"))
    assert res.code == 2, res
    assert len(res.err_lines) == 1 and "Traceback" not in res.err, res


def test_empty_txnindex_without_aborts_is_left_alone(tmp_path):
    d0, _ = ig.busy_segment(0, n_batches=20)
    part = make_partition(str(tmp_path / "logdir" / "e-0"), segment_data=[(0, d0)])
    ig.write_file(os.path.join(part.dir, name(0, "txnindex")), b"")
    age_files(part.dir)
    assert_nothing_to_do(part.dir)


def test_no_arguments():
    res = kafkalog("recover")
    assert res.code == 2, res


@pytest.mark.parametrize("args", [["--format", "xml"], ["--bogus"],
                                  ["--index-interval-bytes", "abc"],
                                  ["--max-message-size", "0"]])
def test_bad_usage(tmp_path, args):
    exp = build_case("log-garbage-tail-last", tmp_path)
    before = tree(exp.dir)
    res = recover(*args, exp.dir)
    assert res.code == 2, res
    assert_same_tree(before, tree(exp.dir))


# -- the lock ----------------------------------------------------------------------------------------

LOCK_HOLDER = r"""
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.lockf(fd, fcntl.LOCK_EX)   # what the JVM's FileChannel.tryLock() takes on Linux
sys.stdout.write("locked\n")
sys.stdout.flush()
time.sleep(600)
"""


class LockHolder:
    """A real process holding a POSIX record lock on ``path``, as a live broker does."""

    def __init__(self, path):
        self.proc = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(path)],
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line == "locked\n", line

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


@pytest.fixture
def lock_holder():
    holders = []

    def start(path):
        h = LockHolder(path)
        holders.append(h)
        return h
    yield start
    for h in holders:
        h.stop()


@pytest.mark.parametrize("path_kind", ["partition", "log-file", "log-directory"])
def test_refuses_while_a_broker_holds_the_lock(tmp_path, lock_holder, path_kind):
    exp = build_case("log-flipped-bit-last", tmp_path)
    logdir = os.path.dirname(exp.dir)
    holder = lock_holder(os.path.join(logdir, ".lock"))
    path = {"partition": exp.dir, "log-file": os.path.join(exp.dir, name(0, "log")),
            "log-directory": logdir}[path_kind]
    before = tree(logdir)
    res = recover(path)
    assert_clean_exit2(res)
    assert ".lock" in res.err or "lock" in res.err.lower(), res
    assert_same_tree(before, tree(logdir))
    dry = recover("--dry-run", path)
    # a dry run reads beside the lock holder (it changes nothing) and says it would repair
    assert dry.code == 1, dry
    assert_same_tree(before, tree(logdir))
    # the broker goes away: recovery proceeds
    holder.stop()
    check_recovered(exp, recover(path))


def test_lock_of_another_log_directory_does_not_matter(tmp_path, lock_holder):
    exp = build_case("log-flipped-bit-last", tmp_path)
    other = tmp_path / "otherdir"
    other.mkdir()
    lock_holder(other / ".lock")
    check_recovered(exp, recover(exp.dir))


def test_stale_lock_file_does_not_block(tmp_path):
    """A .lock nobody holds, as a crashed broker leaves it."""
    exp = build_case("log-flipped-bit-last", tmp_path)
    lock = os.path.join(os.path.dirname(exp.dir), ".lock")
    ig.write_file(lock, b"")
    check_recovered(exp, recover(exp.dir))


def test_lock_of_a_killed_broker_does_not_block(tmp_path, lock_holder):
    """The lock dies with the process that held it (SIGKILL, like a crashed broker)."""
    exp = build_case("log-garbage-tail-middle", tmp_path)
    holder = lock_holder(os.path.join(os.path.dirname(exp.dir), ".lock"))
    holder.stop()
    assert os.path.exists(os.path.join(os.path.dirname(exp.dir), ".lock"))
    check_recovered(exp, recover(exp.dir))


def test_lock_held_while_recover_runs_in_a_subprocess(tmp_path, lock_holder):
    """The real command line, as a separate process, against a real lock holder."""
    exp = build_case("log-flipped-bit-last", tmp_path)
    logdir = os.path.dirname(exp.dir)
    holder = lock_holder(os.path.join(logdir, ".lock"))
    before = tree(logdir)
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", "recover", exp.dir], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p
    assert len(p.stderr.splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr
    assert_same_tree(before, tree(logdir))
    holder.stop()
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", "recover", exp.dir], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p
    check_partition_files(exp)


# -- recover agrees with itself and with the readers ----------------------------------------------

def _patched_batch(data, k, patch):
    """``data`` with its ``k``-th entry changed by ``patch(bytearray)`` and its CRC fixed up."""
    entries = [bytearray(e) for e in kg.split_entries(data)]
    patch(entries[k])
    kg.fix_v2_crc(entries[k])
    return b"".join(bytes(e) for e in entries)


def _max_ts_beyond_records(buf):
    struct.pack_into(">q", buf, 35, struct.unpack_from(">q", buf, 35)[0] + 10**9)


def test_header_max_timestamp_above_records_nothing_to_do(tmp_path):
    """A batch whose header maxTimestamp is above its records' (CRC fixed up).
    LogSegment.recover indexes the header's value, so the broker-built indexes are right: nothing
    to do (no index rebuilt, exit 0), and verify-index agrees."""
    data, _ = ig.busy_segment(0, n_batches=30, seed=3)
    data = _patched_batch(data, 12, _max_ts_beyond_records)
    b = ig.read_log(data)[12]
    assert b.max_timestamp > b.record_max_timestamp
    part = make_partition(str(tmp_path / "logdir" / "metrics-0"), segment_data=[(0, data)])
    assert any(ts == b.max_timestamp for ts, _ in part.segs[0].indexes.time_entries)
    assert verify_index(part.dir).code == 0
    assert_nothing_to_do(part.dir)


def test_time_index_from_record_timestamps_is_rebuilt_once(tmp_path):
    """The same batch with a time index holding its records' maximum instead (as
    kafka-dump-log's check would want): one run rebuilds it as the broker would, the next finds
    nothing to do."""
    data, _ = ig.busy_segment(0, n_batches=30, seed=3)
    data = _patched_batch(data, 29, _max_ts_beyond_records)
    b = ig.read_log(data)[29]
    part = make_partition(str(tmp_path / "logdir" / "metrics-0"), segment_data=[(0, data)],
                          snapshots=False)
    entries = list(part.segs[0].indexes.time_entries)
    assert entries[-1] == (b.max_timestamp, b.last_offset)
    entries[-1] = (b.record_max_timestamp, b.last_offset)
    tpath = part.segs[0].paths["timeindex"]
    write_aged(tpath, ig.encode_time_index(entries, 0))
    res = recover(part.dir)
    assert res.code == 1, res
    with open(tpath, "rb") as f:
        assert f.read() == ig.encode_time_index(part.segs[0].indexes.time_entries, 0)
    assert verify_index(part.dir).code == 0
    assert_nothing_to_do(part.dir)


def _overbound_txn_partition(directory):
    """A transactional zstd batch inflating to ~200 KB (past the bound of --max-message-size
    1000, 16000 bytes) and the ABORT closing it, between ordinary batches."""
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(b"a", b"x" * 100, T0)])
    w.add_v2([kg.Rec(b"big%d" % i, bytes(50_000), T0 + 1) for i in range(4)], "zstd",
             producer_id=4242, producer_epoch=0, base_sequence=0, transactional=True)
    w.add_control(0, 4242, 0, 3, timestamp=T0 + 2)   # ABORT
    w.add_v2([kg.Rec(b"b", b"y" * 100, T0 + 3)])
    part = make_partition(directory, segment_data=[(0, w.data())], snapshots=False)
    assert part.segs[0].txns, part.segs[0].txns
    return part


def test_overbound_transactional_batch_keeps_its_txnindex_entry(tmp_path):
    """A transactional batch inflating past the bound: the transaction's first offset comes
    from the batch header, not from its records, so the correct .txnindex stays (not set
    aside). The batch is reported as kept with its records unchecked."""
    part = _overbound_txn_partition(str(tmp_path / "logdir" / "orders-1"))
    res = assert_nothing_to_do(part.dir, "--max-message-size", "1000")
    notes = [line for line in res.lines if "not checked" in line]
    assert len(notes) == 1, res.out
    assert ("offsets 1-4" in notes[0] and "inflate past 16000 bytes" in notes[0]
            and "--max-message-size" in notes[0]), notes
    # and with the txnindex missing, it is written with the entry
    os.unlink(part.segs[0].paths["txnindex"])
    res = recover("--max-message-size", "1000", part.dir)
    assert res.code == 1, res
    with open(part.segs[0].paths["txnindex"], "rb") as f:
        assert f.read() == ig.encode_txn_index(part.segs[0].txns)
    assert verify_index(part.dir).code == 0


def test_overbound_batch_readers_agree(tmp_path):
    """recover keeps a batch inflating past the bound; a deep
    dump prints it with a note on stderr and exits 0; verify-index exits 0."""
    part = _overbound_txn_partition(str(tmp_path / "logdir" / "orders-1"))
    assert_nothing_to_do(part.dir, "--max-message-size", "1000")
    d = kafkalog("dump", "--deep-iteration", "--max-message-size", "1000", part.dir)
    assert d.code == 0, d
    notes = [line for line in d.err.splitlines() if "not decoded" in line]
    assert len(notes) == 1 and "offsets 1-4" in notes[0] and "16000" in notes[0], d.err
    assert any("baseOffset: 1 lastOffset: 4" in line for line in d.lines), d.out
    v = verify_index("--max-message-size", "1000", part.dir)
    assert v.code == 0, v


def _bad_control_key(buf):
    """Turn a transactional data batch of 2-byte keys into a control batch (attributes bit 5)."""
    buf[22] |= 0x20


def test_malformed_control_batch_is_cut(tmp_path):
    """A batch whose attributes say transactional+control but whose record keys are shorter
    than 4 bytes is invalid for the readers, so recover cuts there, and dump of the result
    exits 0."""
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(b"k", b"x" * 100, T0)])
    w.add_v2([kg.Rec(b"\x00\x00", b"\x00\x00\x00\x00\x00\x00", T0 + 1)],
             producer_id=77, producer_epoch=0, base_sequence=0, transactional=True)
    w.add_v2([kg.Rec(b"k2", b"y" * 100, T0 + 2)])
    good = w.data()
    k = 1
    bad = _patched_batch(good, k, _bad_control_key)
    entries = kg.split_entries(bad)
    prefix = len(entries[0])
    part = make_partition(str(tmp_path / "logdir" / "__cluster_metadata-0"),
                          segment_data=[(0, good)])
    exp = cut_expect(part, 0, bad, prefix)
    res = recover(exp.dir)
    assert any("control record" in line for line in res.lines), res.out
    check_recovered(exp, res)
    d = kafkalog("dump", "--deep-iteration", exp.dir)
    assert d.code == 0, d


def test_index_swap_is_set_aside_not_renamed_over(tmp_path):
    """An index .swap without its segment's .log.swap is set aside (the broker's loader
    deletes it and rebuilds), never renamed over the existing index, which (right) stays;
    leader-epoch-checkpoint.swap, a name Kafka does not write, is left alone and reported."""
    part = make_partition(str(tmp_path / "logdir" / "orders-0"), n_segments=2)
    d = part.dir
    b1 = part.bases[1]
    swap = write_aged(os.path.join(d, name(b1, "timeindex.swap")), b"\x00" * 12 * 3)
    lec = write_aged(os.path.join(d, "leader-epoch-checkpoint"), b"0\n1\n1 0\n")
    lec_swap = write_aged(os.path.join(d, "leader-epoch-checkpoint.swap"), b"0\n1\n2 5\n")
    logs = {os.path.basename(s.paths["log"]): s.data for s in part.segs}
    untouched = set(files_in(d)) - {swap}
    exp = expect_from(d, logs, moved_names=[swap], untouched=untouched)
    res = recover(d)
    assert any(lec_swap in line and "left alone" in line for line in res.lines), res.out
    check_recovered(exp, res)
    assert lec in untouched and lec_swap in untouched


def test_partition_holding_only_deleted_file_second_run_exit_0(tmp_path):
    """After the first run moved the only file away, a directory holding our quarantine is
    still a partition directory: the second run has nothing to do (exit 0), not 'no partition
    directories in it' (exit 2)."""
    d = str(tmp_path / "logdir" / "t-0")
    os.makedirs(d)
    data, _ = ig.busy_segment(0, n_batches=5)
    write_aged(os.path.join(d, name(0, "log.deleted")), data)
    res = recover(d)
    assert res.code == 1, res
    assert os.listdir(d) == [QUARANTINE]
    for path in (d, os.path.dirname(d)):
        before = tree(d)
        again = recover(path)
        assert again.code == 0, again
        assert_same_tree(before, tree(d))


def test_non_utf8_file_name(tmp_path):
    """A file whose name is not UTF-8 (b'\\xff.timeindex.deleted'): the report prints the name
    escaped, the manifest is valid JSON keeping the raw name, and the file is kept verbatim."""
    part = make_partition(str(tmp_path / "logdir" / "t-0"), n_segments=1)
    raw = os.path.join(os.fsencode(part.dir), b"\xff.timeindex.deleted")
    with open(raw, "wb") as f:
        f.write(b"raw bytes")
    for args in (("--dry-run",), ("--dry-run", "--format", "json")):
        res = recover(*args, part.dir)
        assert res.code == 1, res
        assert any("\\xff.timeindex.deleted" in line for line in res.lines), res.out
    res = recover("--format", "json", part.dir)
    assert res.code == 1, res
    json_objects(res)
    (qdir,) = quarantine_dirs(part.dir)
    entries = read_manifest(qdir)
    (e,) = [e for e in entries if "file_bytes_hex" in e]
    assert bytes.fromhex(e["file_bytes_hex"]) == b"\xff.timeindex.deleted"
    with open(os.path.join(qdir, e["saved_as"]), "rb") as f:
        assert f.read() == b"raw bytes"
    assert not os.path.exists(raw)


@pytest.mark.parametrize("odd", ["00000000000000000000.log.log", "abc.log", "abc.index",
                                 "-00000000000000000001.log", "\u0661\u0662.log", "7.log",
                                 "000000000000000000007.log"])
def test_names_kafka_does_not_give_are_left_alone(tmp_path, odd):
    """Names a broker does not give a segment's files (``X.log.log``, ``abc.log``, a negative,
    short, 21-digit or non-ASCII-digit base) are no segment's: left alone, named in the
    report."""
    part = make_partition(str(tmp_path / "logdir" / "t-0"), n_segments=2)
    write_aged(os.path.join(part.dir, odd), part.segs[0].data[:500])
    res = assert_nothing_to_do(part.dir)
    assert any(odd in line and "left alone" in line for line in res.lines), res.out


# -- memory: a batch of millions of records ---------------------------------------------------------

def many_records_batch(n):
    """One zstd v2 batch of ``n`` records with null keys and values, encoded here from Kafka's
    record layout (length, attributes, timestamp delta, offset delta, key, value, headers)."""
    import zstandard
    from crc32c import crc32c
    body = bytearray()
    for i in range(n):
        rec = b"\x00" + kg.varint(0) + kg.varint(i) + kg.varint(-1) + kg.varint(-1) + kg.varint(0)
        body += kg.varint(len(rec)) + rec
    payload = zstandard.ZstdCompressor().compress(bytes(body))
    after_crc = struct.pack(">hiqqqhii", 4, n - 1, T0, T0, -1, -1, -1, n) + payload
    batch = struct.pack(">qiib", 0, 4 + 1 + 4 + len(after_crc), 0, 2)
    return batch + struct.pack(">I", crc32c(after_crc)) + after_crc, len(body)


@pytest.mark.slow
def test_many_records_scanned_in_bounded_memory(tmp_path):
    """A valid batch of 1,500,000 records: recover --dry-run's scan never holds every record at
    once; its memory stays near the decompressed size. Measured on a real process (its peak
    resident size)."""
    n = 1_500_000
    data, inflated = many_records_batch(n)
    (kb,) = kg.kafka_python_read(data, deep=False)   # kafka-python: one batch, CRC right
    assert kb.crc_ok and kb.batch.last_offset == n - 1
    d = tmp_path / "logdir" / "many-0"
    os.makedirs(d)
    ig.write_file(str(d / name(0, "log")), data)
    # VmHWM: the peak of this process's own memory (ru_maxrss would count the memory of the
    # pytest process it was forked from, as it survives exec)
    code = ("import runpy, sys; sys.argv = ['kafkalog', 'recover', '--dry-run', %r]\n"
            "try:\n    runpy.run_module('kafkalog_cli', run_name='__main__')\n"
            "except SystemExit as e:\n    status = e.code\n"
            "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')]\n"
            "print('RSS', hwm[0], status, file=sys.stderr)" % str(d))
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                       timeout=600)
    rss_kb = int(p.stderr.split("RSS ")[1].split()[0])
    assert p.stderr.split()[-1] == "1", p.stderr   # the missing indexes would be written
    assert "valid: offsets 0-%d, %d records, %d bytes" % (n - 1, n, len(data)) in p.stdout, \
        p.stdout
    # the records held at once would take far more than this (~200 bytes each)
    print("peak RSS %d kB, %d bytes inflated" % (rss_kb, inflated))
    assert rss_kb < 100_000 + 3 * inflated // 1024, (rss_kb, inflated)


@pytest.mark.parametrize("what", ["devzero-index", "dangling-timeindex", "fifo-txnindex",
                                  "directory-index"])
def test_non_regular_file_under_an_index_name_is_left_alone(tmp_path, what):
    """A symlink to /dev/zero, a dangling symlink, a FIFO or a directory under an index's name:
    not read, not written over, not moved (a rebuilt index was written over it before, or the
    run failed half-way). As for a reader, a file that cannot be read is exit 2 with a line on
    stderr naming it; a second run changes nothing and says the same."""
    part = make_partition(str(tmp_path / "logdir" / "t-0"), n_segments=2)
    kind = what.split("-")[1]
    path = os.path.join(part.dir, name(part.bases[0], kind))
    if os.path.exists(path):
        os.unlink(path)
    if what.startswith("devzero"):
        os.symlink("/dev/zero", path)
    elif what.startswith("dangling"):
        os.symlink(str(tmp_path / "nowhere"), path)
    elif what.startswith("fifo"):
        os.mkfifo(path)
    else:
        os.mkdir(path)
    first = recover(part.dir)
    assert first.code == 2, first
    assert any(os.path.basename(path) in line and "not a regular file" in line
               for line in first.lines), first.out
    assert [line for line in first.err_lines if "not a regular file" in line] == [
        "kafkalog: %s: not a regular file: not read, left alone" % path], first.err
    assert os.path.lexists(path) and not os.path.isfile(path)
    if what.startswith("devzero"):
        assert os.readlink(path) == "/dev/zero"
    before = safe_tree(part.dir)
    again = recover(part.dir)
    assert again.code == 2, again
    assert again.err == first.err
    assert safe_tree(part.dir) == before


def safe_tree(directory):
    """{relative path: bytes and mtime, or the kind of a non-regular entry} below ``directory``,
    never opening what is not a regular file (a symlink to /dev/zero reads without end)."""
    import stat as st
    out = {}
    for root, dirs, names in os.walk(directory):
        for n in dirs + names:
            p = os.path.join(root, n)
            info = os.lstat(p)
            if st.S_ISREG(info.st_mode):
                with open(p, "rb") as f:
                    out[os.path.relpath(p, directory)] = (f.read(), info.st_mtime_ns)
            elif st.S_ISLNK(info.st_mode):
                out[os.path.relpath(p, directory)] = ("symlink", os.readlink(p))
            else:
                out[os.path.relpath(p, directory)] = ("mode", st.S_IFMT(info.st_mode))
    return out


def test_two_logs_with_one_base_offset(tmp_path):
    """``0.log`` beside ``00000000000000000000.log`` (both name base offset 0): the one named as
    Kafka names segments is the segment, the other is left alone and named; nothing is cut
    (the second was taken for a segment whose offsets go backwards, and cut at 0)."""
    part = make_partition(str(tmp_path / "logdir" / "t-0"), n_segments=2)
    write_aged(os.path.join(part.dir, "0.log"), part.segs[0].data)
    res = assert_nothing_to_do(part.dir)
    assert any("0.log" in line and "left alone" in line for line in res.lines), res.out


def test_lock_file_made_by_recover_stays_in_place(tmp_path):
    """recover creates the log directory's .lock when there is none and leaves it, as a broker
    does: had it unlinked the file, a broker that opened it a moment before could lock the
    unlinked file while the next command, finding no .lock, made and locked another one."""
    exp = build_case("log-flipped-bit-last", tmp_path)
    lock = os.path.join(os.path.dirname(exp.dir), ".lock")
    assert not os.path.exists(lock)
    res = recover(exp.dir)
    assert res.code == 1, res
    inode = os.stat(lock).st_ino
    assert recover(exp.dir).code == 0
    assert os.stat(lock).st_ino == inode


def test_library_recover_partition(tmp_path):
    """recover_partition, the one call the command makes per partition: with dry_run it plans
    the cut at the first bad byte (where we wrote the garbage) and changes nothing; then it
    carries the plan out: the log keeps its valid prefix, the cut bytes are in the quarantine
    folder the plan names, the later segment's files are moved there."""
    from kafkalog_cli.log.recover_plan import CUT, MOVE
    from kafkalog_cli.log.recover_run import recover_partition
    part = make_partition(str(tmp_path / "logdir" / "lib-0"))
    data, prefix = mut_garbage_tail(part.segs[1].data)
    exp = cut_expect(part, 1, data, prefix)
    log = name(part.bases[1], "log")
    before = tree(part.dir)
    plan = recover_partition(part.dir, dry_run=True)
    assert_same_tree(before, tree(part.dir))
    assert plan.quarantine is None and plan.changes
    assert [(a.name, a.start, a.end) for a in plan.actions if a.kind == CUT] == [
        (log, prefix, len(data))]
    assert set(exp.moved) <= {a.name for a in plan.actions if a.kind == MOVE}
    assert plan.bytes_cut == len(data) - prefix
    done = recover_partition(part.dir)
    assert done.quarantine == quarantine_dirs(part.dir)[0]
    with open(os.path.join(part.dir, log), "rb") as f:
        assert f.read() == data[:prefix]
    assert cut_files(done.quarantine, log) == [(prefix, len(data), data[prefix:])]
    for n, original in exp.moved.items():
        assert not os.path.exists(os.path.join(part.dir, n)), n
        with open(os.path.join(done.quarantine, n), "rb") as f:
            assert f.read() == original, n
