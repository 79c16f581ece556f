"""``kafkalog verify-index`` judged by Apache Kafka's DumpLogSegments.

For every offset and time index of the broker's own log directories (``kafka_traffic``: the
SIGKILLed ``crashed`` one, with pre-allocated active indexes, and the cleanly stopped ``clean``
one) and of damaged copies, DumpLogSegments runs on each file on its own
(``kafkajvm.dump_each``: one JVM, the tool's ``main`` per file, so that a file on which it
throws does not hide the next) with ``--verify-index-only`` and with ``--index-sanity-check``:

* ``kafkalog verify-index --sanity-only`` reports a problem on exactly the files on which
  ``--index-sanity-check`` fails (CorruptIndexException), and none on the others;
* ``kafkalog verify-index`` (entries against the log, and the sanity check) reports a problem
  on exactly the files on which either Kafka option reports one (an index mismatch or a time
  index error on stderr, or an exception), and none on the others. One deliberate difference:
  kafkalog reads the active segment's pre-allocated index as the broker uses it, its zero tail
  cut off as ``AbstractIndex.trimToValidSize`` cuts it on close and roll, where DumpLogSegments
  reads every slot (an index with no entry yet shows it a phantom entry ``offset: <base>
  position: 0`` in its zero slot 0, which it then finds matching no batch; a time index's zero
  tail fails ``TimeIndex.sanityCheck``). For those files the verdict kafkalog must match is
  DumpLogSegments' on a copy of the segment with the index trimmed so; the test checks that
  the difference shows where it should (the crashed directory's active segments);
* one more difference, kafkalog stricter: an offset index whose offsets go backwards, each
  entry still naming the batch it points at, passes both DumpLogSegments checks (it checks
  each entry on its own; ``OffsetIndex.sanityCheck`` looks at the last entry only) but breaks
  the broker's binary search (``OffsetIndex.lookup``): kafkalog reports it (exit 1).
"""

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import kafkajvm

pytestmark = pytest.mark.kafka

KAFKALOG = [sys.executable, "-m", "kafkalog_cli"]
SLOT = {".index": 8, ".timeindex": 12}


def index_files(root):
    return sorted(str(p) for p in Path(root).glob("*/*")
                  if p.suffix in SLOT and p.is_file())


def kafkalog_verdicts(files, sanity_only=False):
    """{file: number of problems kafkalog verify-index reports on it}."""
    proc = subprocess.run([*KAFKALOG, "verify-index", "--format", "json",
                           *(["--sanity-only"] if sanity_only else []), *files],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr.decode()
    out = {}
    for line in proc.stdout.decode().splitlines():
        d = json.loads(line)
        if d.get("type") == "file" and d["file"] in files:
            out[d["file"]] = out.get(d["file"], 0) + d["problems"]
    assert set(out) == set(files), set(files) - set(out)
    return out


def _kafka_found(result):
    rc, _, err = result
    return rc != 0 or bool(err.strip())


def kafka_verdicts(files):
    """{file: (found by --verify-index-only, found by --index-sanity-check, what it said)}."""
    verify = kafkajvm.dump_each(files, ["--verify-index-only"])
    sanity = kafkajvm.dump_each(files, ["--index-sanity-check"])
    return {f: (_kafka_found(verify[f]), _kafka_found(sanity[f]),
                (verify[f][2] + sanity[f][2])[:600]) for f in files}


def _active(path):
    d = os.path.dirname(path)
    bases = [n.split(".")[0] for n in os.listdir(d) if n.endswith(".log")]
    return bool(bases) and os.path.basename(path).split(".")[0] == max(bases)


def _real_slots(path):
    """Slots before the zero tail: up to the first slot of zeros."""
    data = Path(path).read_bytes()
    size = SLOT[Path(path).suffix]
    n = len(data) // size
    for i in range(n):
        if not any(data[i * size:(i + 1) * size]):
            return i
    return n


def preallocated_active(path):
    data_len = os.path.getsize(path)
    return _active(path) and _real_slots(path) * SLOT[Path(path).suffix] < data_len


def trimmed_copies(files, work):
    """{file: its copy in a segment whose pre-allocated indexes are trimmed} for the active
    segments' pre-allocated indexes."""
    out = {}
    for f in files:
        if not preallocated_active(f):
            continue
        p = Path(f)
        dest = Path(work) / ("trimmed-%d" % len(out)) / p.parent.name
        dest.mkdir(parents=True)
        base = p.name.split(".")[0]
        for suffix in (".log", ".index", ".timeindex"):
            src = p.parent / (base + suffix)
            if not src.exists():
                continue
            data = src.read_bytes()
            if suffix in SLOT:
                data = data[:_real_slots(src) * SLOT[suffix]]
            (dest / src.name).write_bytes(data)
        out[f] = str(dest / p.name)
    return out


def compare(files, work):
    """The verdicts of both tools on ``files``; a list of disagreements (empty: none), and
    the files where Kafka's verdict on the file as it is differs from the trimmed one's."""
    trimmed = trimmed_copies(files, work)
    kafka = kafka_verdicts(list(files) + list(trimmed.values()))
    ours_full = kafkalog_verdicts(files)
    ours_sanity = kafkalog_verdicts(files, sanity_only=True)
    bad, phantom = [], []
    for f in files:
        verify, sanity, said = kafka[f]
        if bool(ours_sanity[f]) != sanity:
            bad.append(f"{f}: --index-sanity-check {'fails' if sanity else 'passes'}, "
                       f"kafkalog --sanity-only: {ours_sanity[f]} problems\n{said}")
        judged = kafka[trimmed[f]] if f in trimmed else kafka[f]
        if f in trimmed and judged[:2] != kafka[f][:2]:
            phantom.append(f)
        expect = judged[0] or judged[1]
        if bool(ours_full[f]) != expect:
            bad.append(f"{f}: DumpLogSegments {'finds a problem' if expect else 'finds none'}"
                       f"{' (trimmed)' if f in trimmed else ''}, kafkalog verify-index: "
                       f"{ours_full[f]} problems\n{judged[2]}")
    return bad, phantom, kafka, ours_full


@pytest.mark.parametrize("which", ["clean", "crashed"])
def test_verify_index_agrees_with_kafka_on_the_brokers_files(kafka_traffic, which, tmp_path):
    files = index_files(getattr(kafka_traffic, which))
    assert len(files) >= 40
    bad, phantom, kafka, _ = compare(files, tmp_path)
    assert bad == []
    if which == "crashed":
        # the broker was killed: its active segments' indexes are pre-allocated, and on some
        # DumpLogSegments' reading of every slot differs from the trimmed one's (the sanity
        # check of a time index with a zero tail fails)
        assert phantom
        assert any(kafka[f][1] for f in phantom)


# -- damaged copies -----------------------------------------------------------------------

def _entries(path):
    size = SLOT[Path(path).suffix]
    data = Path(path).read_bytes()
    return [bytearray(data[i:i + size]) for i in range(0, len(data) - size + 1, size)]


def _write(path, entries, tail=b""):
    Path(path).write_bytes(b"".join(bytes(e) for e in entries) + tail)


def _mid_batch(index, timeindex):
    e = _entries(index)
    rel, pos = struct.unpack(">ii", e[2])
    e[2][:] = struct.pack(">ii", rel, pos + 7)
    _write(index, e)
    return index


def _truncated(index, timeindex):
    data = Path(index).read_bytes()
    Path(index).write_bytes(data[:-3])
    return index


def _time_truncated(index, timeindex):
    data = Path(timeindex).read_bytes()
    Path(timeindex).write_bytes(data[:-5])
    return timeindex


def _time_backwards(index, timeindex):
    e = _entries(timeindex)
    ts1 = struct.unpack(">q", e[1][:8])[0]
    e[2][:8] = struct.pack(">q", ts1 - 1000)
    _write(timeindex, e)
    return timeindex


def _time_last_below_first(index, timeindex):
    e = _entries(timeindex)
    ts0 = struct.unpack(">q", e[0][:8])[0]
    e[-1][:8] = struct.pack(">q", ts0 - 1)
    _write(timeindex, e)
    return timeindex


def _zero_tail_index(index, timeindex):
    _write(index, _entries(index), bytes(8 * 16))
    return index


def _zero_tail_timeindex(index, timeindex):
    _write(timeindex, _entries(timeindex), bytes(12 * 16))
    return timeindex


def _past_log_end(index, timeindex):
    e = _entries(index)
    log_size = os.path.getsize(str(index)[:-len(".index")] + ".log")
    rel = struct.unpack(">i", e[-1][:4])[0]
    e.append(bytearray(struct.pack(">ii", rel + 1, log_size + 100)))
    _write(index, e)
    return index


def _backwards(index, timeindex):
    e = _entries(index)
    e[2], e[3] = e[3], e[2]
    _write(index, e)
    return index


DAMAGES = {"mid_batch": _mid_batch, "truncated": _truncated, "time_truncated": _time_truncated,
           "time_backwards": _time_backwards, "time_last_below_first": _time_last_below_first,
           "zero_tail_index": _zero_tail_index, "zero_tail_timeindex": _zero_tail_timeindex,
           "past_log_end": _past_log_end, "backwards": _backwards}
PARTITION = "transactions-0"  # its first segment: sealed, six offset index entries


def test_verify_index_agrees_with_kafka_on_damaged_copies(kafka_traffic, tmp_path):
    src = kafka_traffic.clean / PARTITION
    damaged = {}
    for name, damage in DAMAGES.items():
        dest = tmp_path / name / PARTITION
        shutil.copytree(src, dest)
        base = dest / ("%020d" % 0)
        assert len(_entries(str(base) + ".index")) >= 6
        damaged[name] = damage(str(base) + ".index", str(base) + ".timeindex")
    files = sorted(damaged.values())
    bad, _, kafka, ours = compare(files, tmp_path / "trim")
    # kafkalog's one stricter verdict (the module's docstring): offsets going backwards
    backwards = damaged["backwards"]
    assert kafka[backwards][:2] == (False, False)
    assert ours[backwards] > 0
    bad = [b for b in bad if not b.startswith(backwards + ":")]
    assert bad == []
    # Kafka itself finds each other damage but the zero tails (which it reads past: its loop
    # stops at the first zero slot after slot 0; a zero tail on a time index fails the sanity
    # check, one on an offset index does not)
    found = {name: any(kafka[f][:2]) for name, f in damaged.items()}
    assert found == {name: name not in ("backwards", "zero_tail_index") for name in DAMAGES}
