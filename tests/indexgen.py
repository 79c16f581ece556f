"""Test-only, broker-equivalent builder of everything a partition directory holds besides ``.log``.

The expected files are computed here from kafka-python's reading of the ``.log`` bytes
(``kafkagen.kafka_python_read``), following the broker's rules, never from ``kafkalog_cli``:

* ``.index`` / ``.timeindex``: ``LogSegment.recover``: per batch, remember
  ``(maxTimestamp, lastOffset)`` when the batch's maxTimestamp is larger than the max so far; when
  more than ``index.interval.bytes`` (4096, strict ``>``) were written since the last entry, append
  the offset-index entry ``(batch.lastOffset, position)`` and the time-index entry ``(maxSoFar,
  offsetOfMaxSoFar)`` if its timestamp is larger than the last time entry's; at the end append the
  final time-index entry the same way. Trimmed, or preallocated (zero-padded to 10485760 /
  10485756 bytes, ``AbstractIndex``).
* ``.txnindex`` (``TransactionIndex``, ``AbortedTxn``): one 34-byte entry per aborted non-empty
  transaction, in the segment holding its ABORT marker; LSO = first offset of the earliest other
  open transaction, else marker offset + 1 (``ProducerStateManager.lastStableOffset``).
* producer ``.snapshot`` (``ProducerStateManager.writeSnapshot``), offset checkpoint files
  (``OffsetCheckpointFile``), ``leader-epoch-checkpoint`` (``LeaderEpochCheckpointFile``),
  ``partition.metadata`` (``PartitionMetadataFile``).
* corruptors for each of them, and Kafka's DumpLogSegments verification
  (``DumpLogSegments.dumpIndex`` and ``dumpTimeIndex``) re-implemented over kafka-python's parse,
  as the oracle for expected summaries.

Nothing in this module imports ``kafkalog_cli``.
"""

import base64
import os
import struct
from typing import List, NamedTuple, Optional, Tuple

from crc32c import crc32c

from kafkagen import ABORT, kafka_python_read

INDEX_INTERVAL_BYTES = 4096
OFFSET_INDEX_MAX_BYTES = 10485760  # floor(10485760 / 8) * 8
TIME_INDEX_MAX_BYTES = 10485756    # floor(10485760 / 12) * 12
OFFSET_ENTRY = 8
TIME_ENTRY = 12
TXN_ENTRY = 34
SNAPSHOT_ENTRY = 46


def segment_prefix(base_offset):
    return "%020d" % base_offset


# -- the log as the broker sees it -------------------------------------------------------------------

class LogBatch(NamedTuple):
    position: int
    size: int
    magic: int
    base_offset: int
    last_offset: int
    max_timestamp: int          # the header's maxTimestamp (legacy: outer timestamp, -1 for v0)
    record_max_timestamp: int   # max over the records' timestamps (what DumpLogSegments computes)
    producer_id: int
    producer_epoch: int
    is_transactional: bool
    is_control: bool
    control_type: Optional[int]  # ABORT 0 / COMMIT 1 for a marker, else None
    records: List[Tuple[int, int]]  # (offset, timestamp)


def read_log(data):
    """The valid batches at the start of ``data`` (recovery stops at the first invalid one)."""
    out = []
    for kb in kafka_python_read(data, deep=True):
        if not kb.crc_ok:
            break
        b = kb.batch
        recs = [(r.offset, -1 if r.timestamp is None else r.timestamp) for r in kb.records]
        if b.magic >= 2:
            control_type = None
            if b.is_control_batch and kb.records:
                control_type = kb.records[0].type
            out.append(LogBatch(kb.position, kb.size, b.magic, b.base_offset, b.last_offset,
                                b.max_timestamp, max((t for _, t in recs), default=-1),
                                b.producer_id, b.producer_epoch, b.is_transactional,
                                b.is_control_batch, control_type, recs))
        else:
            ts = -1 if b.magic == 0 else b._timestamp
            first = recs[0][0] if recs else b.base_offset
            out.append(LogBatch(kb.position, kb.size, b.magic, first, b.base_offset, ts,
                                max((t for _, t in recs), default=-1), -1, -1, False, False,
                                None, recs))
    return out


# -- offset and time index ---------------------------------------------------------------------------

class Indexes(NamedTuple):
    offset_entries: List[Tuple[int, int]]  # (absolute offset, position)
    time_entries: List[Tuple[int, int]]    # (timestamp, absolute offset)


def build_indexes(data, interval=INDEX_INTERVAL_BYTES, final_time_entry=True):
    """The entries ``LogSegment.recover`` writes for the segment bytes ``data``."""
    offset_entries, time_entries = [], []
    max_ts, offset_of_max = -1, -1
    last_time_ts = -1  # an empty time index's lastEntry is (-1, base)
    valid_bytes = last_index_entry = 0
    for b in read_log(data):
        if b.max_timestamp > max_ts:
            max_ts, offset_of_max = b.max_timestamp, b.last_offset
        if valid_bytes - last_index_entry > interval:
            offset_entries.append((b.last_offset, valid_bytes))
            if max_ts > last_time_ts:
                time_entries.append((max_ts, offset_of_max))
                last_time_ts = max_ts
            last_index_entry = valid_bytes
        valid_bytes += b.size
    if final_time_entry and max_ts > last_time_ts:
        time_entries.append((max_ts, offset_of_max))
    return Indexes(offset_entries, time_entries)


def encode_offset_index(entries, base_offset):
    return b"".join(struct.pack(">ii", off - base_offset, pos) for off, pos in entries)


def encode_time_index(entries, base_offset):
    return b"".join(struct.pack(">qi", ts, off - base_offset) for ts, off in entries)


def decode_offset_index(data, base_offset):
    n = len(data) // OFFSET_ENTRY
    return [(struct.unpack_from(">i", data, 8 * i)[0] + base_offset,
             struct.unpack_from(">i", data, 8 * i + 4)[0]) for i in range(n)]


def preallocated(data, max_bytes):
    """``data`` zero-padded to the preallocated index size."""
    assert len(data) <= max_bytes
    return data + bytes(max_bytes - len(data))


def preallocated_offset_index(data):
    return preallocated(data, OFFSET_INDEX_MAX_BYTES)


def preallocated_time_index(data):
    return preallocated(data, TIME_INDEX_MAX_BYTES)


# -- transaction index -------------------------------------------------------------------------------

class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def aborted_txns(batches, open_txns=None):
    """The aborted transactions completed in ``batches`` (in marker order). ``open_txns``
    (producer id -> first offset) carries open transactions across segments and is updated."""
    if open_txns is None:
        open_txns = {}
    out = []
    for b in batches:
        if b.magic < 2 or b.producer_id < 0:
            continue
        if b.is_control:
            if b.control_type is None:
                continue
            first = open_txns.pop(b.producer_id, None)
            if first is not None and b.control_type == ABORT:
                lso = min(open_txns.values()) if open_txns else b.last_offset + 1
                out.append(AbortedTxn(b.producer_id, first, b.last_offset, lso))
        elif b.is_transactional and b.producer_id not in open_txns:
            open_txns[b.producer_id] = b.base_offset
    return out


def encode_txn_index(entries, version=0):
    return b"".join(struct.pack(">hqqqq", version, *e) for e in entries)


def txn_line(e, version=0):
    return ("version: %d producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d"
            % (version, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset))


# -- producer snapshot -------------------------------------------------------------------------------

class SnapshotEntry(NamedTuple):
    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


def encode_snapshot(entries, version=1, count=None):
    body = struct.pack(">i", len(entries) if count is None else count)
    body += b"".join(struct.pack(">qhiqiqiq", *e) for e in entries)
    return struct.pack(">hI", version, crc32c(body)) + body


def snapshot_crc(data):
    """(stored, computed) CRC of a snapshot file's bytes."""
    return struct.unpack_from(">I", data, 2)[0], crc32c(data[6:])


def decrement_sequence(sequence, decrement):
    """Kafka's DefaultRecordBatch.decrementSequence (BatchMetadata.firstSeq): sequences wrap
    within [0, Integer.MAX_VALUE], not as int32."""
    if sequence < decrement:
        return 2147483647 - (decrement - sequence) + 1
    return sequence - decrement


def snapshot_line(e, kafka_format="4.2"):
    """DumpLogSegments' line for one snapshot entry (``DumpLogSegments.dumpProducerIdSnapshot``)."""
    txn = ("OptionalLong[%d]" % e.current_txn_first_offset if e.current_txn_first_offset >= 0
           else "OptionalLong.empty")
    line = ("producerId: %d producerEpoch: %d coordinatorEpoch: %d currentTxnFirstOffset: %s "
            "lastTimestamp: %d " % (e.producer_id, e.epoch, e.coordinator_epoch, txn, e.timestamp))
    if e.last_offset >= 0:
        line += ("firstSequence: %d lastSequence: %d lastOffset: %d offsetDelta: %d timestamp: %d"
                 % (decrement_sequence(e.last_sequence, e.offset_delta), e.last_sequence, e.last_offset,
                    e.offset_delta, e.timestamp))
    elif kafka_format >= "4.3":
        line = line[:-1]
    return line


# -- text files --------------------------------------------------------------------------------------

def offset_checkpoint(entries):
    """An offset checkpoint file: version 0, count, ``topic partition offset`` lines."""
    return "0\n%d\n" % len(entries) + "".join("%s %d %d\n" % e for e in entries)


def leader_epoch_checkpoint(entries):
    return "0\n%d\n" % len(entries) + "".join("%d %d\n" % e for e in entries)


def topic_id(seed=1):
    """A 22-character base64url topic id (no padding), never all zeros."""
    raw = bytes((seed * 37 + i * 11 + 1) % 256 for i in range(16))
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def partition_metadata(tid, version=0):
    return "version: %d\ntopic_id: %s" % (version, tid)


CHECKPOINT_NAMES = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                    "replication-offset-checkpoint", "cleaner-offset-checkpoint")

MALFORMED_OFFSET_CHECKPOINTS = {
    "bad-version": "1\n1\ntopic 0 5\n",
    "non-numeric-version": "x\n1\ntopic 0 5\n",
    "count-too-high": "0\n3\ntopic 0 5\n",
    "count-too-low": "0\n1\ntopic 0 5\ntopic 1 6\n",
    "two-fields": "0\n1\ntopic 5\n",
    "four-fields": "0\n1\ntopic 0 5 7\n",
    "non-numeric-offset": "0\n1\ntopic 0 five\n",
    "non-numeric-partition": "0\n1\ntopic p 5\n",
    "missing-count": "0\n",
    "binary": "\x00\x01\x02garbage\xff",
}

MALFORMED_LEADER_EPOCH_CHECKPOINTS = {
    "bad-version": "7\n1\n0 0\n",
    "count-mismatch": "0\n2\n0 0\n",
    "three-fields": "0\n1\n0 0 0\n",
    "non-numeric": "0\n1\nzero 0\n",
}

MALFORMED_PARTITION_METADATA = {
    "missing-topic-id": "version: 0\n",
    "bad-topic-id": "version: 0\ntopic_id: not-a-uuid!",
    "zero-topic-id": "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA",
    "bad-version": "version: x\ntopic_id: %s" % topic_id(3),
    "negative-version": "version: -1\ntopic_id: %s" % topic_id(3),
    "empty": "",
}


# -- a whole partition -------------------------------------------------------------------------------

class SegmentFiles(NamedTuple):
    base_offset: int
    data: bytes
    batches: List[LogBatch]
    indexes: Indexes
    txns: List[AbortedTxn]
    paths: dict  # kind -> path ("log", "index", "timeindex", "txnindex")


def write_file(path, data):
    mode = "w" if isinstance(data, str) else "wb"
    kw = {"encoding": "utf-8", "newline": ""} if mode == "w" else {}
    with open(path, mode, **kw) as f:
        f.write(data)
    return str(path)


def write_partition(directory, segments, preallocate_active=False, txnindex=True):
    """Write ``segments`` (list of (base offset, .log bytes)) and their broker-built ``.index``,
    ``.timeindex`` and (when an aborted transaction ends in it) ``.txnindex`` into ``directory``.
    ``preallocate_active``: the last segment's indexes are zero-padded to full size, as a live
    broker leaves them. Returns a list of SegmentFiles."""
    os.makedirs(directory, exist_ok=True)
    open_txns = {}
    out = []
    for i, (base, data) in enumerate(segments):
        prefix = os.path.join(str(directory), segment_prefix(base))
        batches = read_log(data)
        idx = build_indexes(data)
        txns = aborted_txns(batches, open_txns)
        paths = {"log": write_file(prefix + ".log", data)}
        oi = encode_offset_index(idx.offset_entries, base)
        ti = encode_time_index(idx.time_entries, base)
        if preallocate_active and i == len(segments) - 1:
            oi, ti = preallocated_offset_index(oi), preallocated_time_index(ti)
        paths["index"] = write_file(prefix + ".index", oi)
        paths["timeindex"] = write_file(prefix + ".timeindex", ti)
        if txnindex and txns:
            paths["txnindex"] = write_file(prefix + ".txnindex", encode_txn_index(txns))
        out.append(SegmentFiles(base, data, batches, idx, txns, paths))
    return out


# -- corruptors --------------------------------------------------------------------------------------

def replace_entry(entries, i, entry):
    out = list(entries)
    out[i] = entry
    return out


def swap_entries(entries, i, j):
    out = list(entries)
    out[i], out[j] = out[j], out[i]
    return out


def truncated_bytes(data, drop=3):
    """Index bytes with a partial last entry."""
    assert 0 < drop < len(data)
    return data[:-drop]


def zero_entries(data, n=3, entry_size=OFFSET_ENTRY):
    """Index bytes followed by ``n`` all-zero slots (a short preallocated tail)."""
    return data + bytes(n * entry_size)


def bad_snapshot_crc(data):
    b = bytearray(data)
    b[2] ^= 0xFF
    return bytes(b)


def snapshot_with_version(data, version):
    return struct.pack(">h", version) + data[2:]


# -- Kafka's DumpLogSegments verification over kafka-python's parse (the oracle) ---------------------

def kafka_offset_index_mismatches(entries, batches, base_offset):
    """Mismatch pairs (indexOffset, batchLastOffset) in discovery order for the entries Kafka
    reads (stops at i > 0 with relative offset 0). Entries must point at batch starts."""
    by_pos = {b.position: b for b in batches}
    out = []
    for i, (off, pos) in enumerate(entries):
        if i > 0 and off == base_offset:
            break
        b = by_pos[pos]
        if b.last_offset != off:
            out.append((off, b.last_offset))
    return out


def _lookup_position(offset_entries, target):
    pos = 0
    for off, p in offset_entries:
        if off <= target:
            pos = p
        else:
            break
    return pos


class TimeIndexErrors(NamedTuple):
    mismatches: List[Tuple[int, int]]      # (indexTs, logMaxTs)
    out_of_order: List[Tuple[int, int]]    # (indexTs, prevTs)
    not_found: List[Tuple[int, int]]       # (indexOffset, foundLastOffset or -1)

    def any(self):
        return bool(self.mismatches or self.out_of_order or self.not_found)


def kafka_time_index_errors(time_entries, offset_entries, batches, base_offset):
    """DumpLogSegments' ``TimeIndexDumpErrors`` for a time index (``dumpTimeIndex``), with a clean
    offset index."""
    errs = TimeIndexErrors([], [], [])
    prev = -1
    for i, (ts, off) in enumerate(time_entries):
        if i > 0 and off == base_offset:
            break
        pos = _lookup_position(offset_entries, off)
        found = next((b for b in batches if b.position >= pos and b.last_offset >= off), None)
        if found is None:
            errs.not_found.append((off, -1))
        elif found.last_offset != off:
            errs.not_found.append((off, found.last_offset))
        else:
            if found.record_max_timestamp != ts:
                errs.mismatches.append((ts, found.record_max_timestamp))
            if prev >= ts:
                errs.out_of_order.append((ts, prev))
        prev = ts
    return errs


def offset_index_summary_lines(abs_path, mismatches):
    """Kafka's stderr lines for one index file (Scala order: reverse discovery)."""
    if not mismatches:
        return []
    return ["Mismatches in :%s" % abs_path] + [
        "  Index offset: %d, log offset: %d" % m for m in reversed(mismatches)]


def time_index_summary_lines(abs_path, errs):
    lines = []
    if errs.mismatches:
        lines.append("Found timestamp mismatch in :%s" % abs_path)
        lines += ["  Index timestamp: %d, log timestamp: %d" % m for m in errs.mismatches]
    if errs.out_of_order:
        lines.append("Found out of order timestamp in :%s" % abs_path)
        lines += ["  Index timestamp: %d, Previously indexed timestamp: %d" % m
                  for m in errs.out_of_order]
    if errs.not_found:
        lines.append("The following indexed offsets are not found in the log.")
        lines += ["Indexed offset: %d, found log offset: %d" % m for m in errs.not_found]
    return lines


# -- sample segments with enough data for several index entries -------------------------------------

def busy_segment(base_offset, n_batches=40, records_per_batch=3, value_size=300, t0=None,
                 ts_step=1000, backwards_every=0, codec="none", txn_at=None, seed=0):
    """Bytes of a segment of ``n_batches`` v2 batches with consecutive offsets from
    ``base_offset`` (about 1 KB each with the defaults, so an index entry every ~5 batches).

    Batch i's records have timestamps around ``t0 + i * ts_step`` with the maximum in the middle
    record; with ``backwards_every`` = k every k-th batch goes back in time by 3.5 steps (so the
    segment's timestamps are not monotonic). ``txn_at`` = j puts an aborted transaction (producer
    7000 + seed) at batch j: a transactional data batch then an ABORT marker."""
    import kafkagen as kg
    if t0 is None:
        t0 = kg.T0
    w = kg.SegmentWriter(base_offset, partition_leader_epoch=1)
    for i in range(n_batches):
        bt = t0 + i * ts_step
        if backwards_every and i % backwards_every == backwards_every - 1:
            bt -= int(3.5 * ts_step)
        deltas = [0, 7, 3] + [j for j in range(1, records_per_batch)]
        recs = [kg.Rec(b"k-%d-%d" % (i, j), kg.filler(i * 10 + j, repeat=1) * (value_size // 17),
                       bt + deltas[j % len(deltas)])
                for j in range(records_per_batch)]
        if txn_at is not None and i == txn_at:
            pid = 7000 + seed
            w.add_v2(recs, codec, producer_id=pid, producer_epoch=0, base_sequence=0,
                     transactional=True)
            w.add_control(ABORT, pid, 0, 3, timestamp=bt + 1)
        else:
            w.add_v2(recs, codec)
    return w.data(), w.next_offset


# -- partitions for the retention tests --------------------------------------------------------------

def timed_segments(layout, first_offset=0, value_size=60, magic=2):
    """Segments of one-record batches, one batch per timestamp: ``layout`` is a list (one item
    per segment) of lists of record timestamps. Offsets are consecutive from ``first_offset``.
    Returns ([(base offset, .log bytes)], log end offset). ``magic`` 0 writes v0 messages (whose
    timestamps do not exist: -1), 1 v1 messages, 2 v2 batches."""
    import kafkagen as kg
    out = []
    base = first_offset
    for i, timestamps in enumerate(layout):
        w = kg.SegmentWriter(base, partition_leader_epoch=1)
        for j, ts in enumerate(timestamps):
            rec = kg.Rec(b"k-%d-%d" % (i, j), bytes([97 + (i + j) % 26]) * value_size, ts)
            if magic >= 2:
                w.add_v2([rec])
            else:
                w.add_legacy(magic, [rec])
        out.append((base, w.data()))
        base = w.next_offset
    return out, base


def write_snapshots(directory, offsets):
    """Empty producer snapshots ``<offset>.snapshot``; returns their names."""
    names = []
    for off in offsets:
        names.append(segment_prefix(off) + ".snapshot")
        write_file(os.path.join(str(directory), names[-1]), encode_snapshot([]))
    return names
