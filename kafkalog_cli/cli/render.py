"""Output formats of `kafkalog dump`: kafka (kafka-dump-log.sh's lines), messages, json.

A writer receives, per file: ``begin_file``, then ``batch``/``record_error``/``invalid`` in file
order, then ``end_file``; ``finish`` once at the end prints the run's summaries. A batch's records
come in chunks (a huge batch is never held whole): the first with ``batch``, the others with
``records``, each written out before the next is decoded. Text is collected in lists and written
in large chunks. Every JSON text written is strict JSON (no NaN or Infinity).
"""

from __future__ import annotations

import os
import sys

from ..format.crc import crc32c

from ..format import codecs, control
from ..format.errors import CorruptRecordError
from ..format.records import RECORD_CHUNK, record_sequence
from ..log import names
from ..log.files import printable_name
from ..log.read import MISPLACED, NOT_DECODED, BatchProblem, BatchRead, BytesProblem
from .. import jsonvocab
from . import decoders
from .._lazy import lazy_module

index_check = lazy_module("kafkalog_cli.log.index_check")  # its problem kinds, when there are some

_BOOL = ("false", "true")
_FLUSH_LINES = 32
_FLUSH_BYTES = 256 * 1024
_FAST_CHUNK = 8 * 1024 * 1024

# The optional C renderer of kafka text (built from _kafkatext.c); KAFKALOG_PURE_PYTHON=1
# forces the Python code below, so tests can check both.
_kafkatext = None
if not os.environ.get("KAFKALOG_PURE_PYTHON"):
    try:
        from . import _kafkatext
    except ImportError:  # pragma: no cover - depends on the build
        _kafkatext = None


def kafka_version(text):
    """A --kafka-format value as a comparable tuple: "4.10" -> (4, 10), "3.x" -> (3, 0)."""
    return tuple(int(p) if p.isdigit() else 0 for p in text.split("."))


JAVA_TOOL = (4, 3)  # the first kafka-dump-log.sh rewritten in Java (DumpLogSegments.java)


# DumpLogSegments prints LeaderChange control records as JSON, and the coordinators' records
# through CoordinatorRecordMessageParser (the transaction log as JSON too), from Kafka 4.1
LEADER_CHANGE_JSON = COORDINATOR_JSON = (4, 1)


def java_tool(kafka_format):
    return kafka_version(kafka_format) >= JAVA_TOOL


class DumpOptions:
    def __init__(self, deep=False, print_data=False, skip_metadata=False, key_decoder="string",
                 value_decoder="string", iso=False, kafka_format="4.2", report_trailing=True,
                 parser=None):
        self.deep = deep or print_data
        self.print_data = print_data
        self.skip_metadata = skip_metadata
        self.key_decoder = key_decoder
        self.value_decoder = value_decoder
        self.iso = iso
        self.kafka_format = kafka_format
        self.report_trailing = report_trailing
        self.parser = parser  # a parsers.Parser (--cluster-metadata-decoder...) or None


class Writer:
    def __init__(self, out, err, opts):
        self.out = out          # binary stream
        self.err = err          # text stream
        self.opts = opts
        self._lines = []        # text lines not yet encoded
        self._chunks = []       # encoded output not yet written
        self._pending = 0
        self.path = None
        self.buf = None
        self.found_invalid = False  # set by the writer itself for records it cannot render
        self._problems = []
        self._java = java_tool(opts.kafka_format)

    # -- plumbing ------------------------------------------------------------------------
    def _encode_lines(self):
        if self._lines:
            self._lines.append("")
            chunk = "\n".join(self._lines).encode("utf-8", "replace")
            self._chunks.append(chunk)
            self._pending += len(chunk)
            # emptied in place: a writer's loop may hold ``self._lines.append`` across a flush
            # (a warning flushes), and its next lines must not go to a list nobody writes
            self._lines.clear()

    def put_bytes(self, data):
        """Add already encoded output (whole lines), keeping the order with text lines."""
        self._encode_lines()
        self._chunks.append(data)
        self._pending += len(data)

    def _write_chunks(self):
        self._encode_lines()
        if self._chunks:
            self.out.write(b"".join(self._chunks) if len(self._chunks) > 1 else self._chunks[0])
            self._chunks = []
            self._pending = 0

    def flush(self):
        self._write_chunks()
        self.out.flush()

    def _maybe_flush(self):
        if len(self._lines) >= _FLUSH_LINES or self._pending >= _FLUSH_BYTES:
            self._write_chunks()

    def bad_record(self, offset, error):
        """A record that Kafka would refuse (a malformed control record): said on stderr, and
        the run's exit status becomes 1."""
        self.found_invalid = True
        self.warn("%s: control record at offset %d: %s" % (self.path, offset, error))

    def ignored(self, path):
        """A file of a kind nobody reads, met in a directory: named on stderr, as Kafka does."""
        self.flush()
        self.err.write("Ignoring unknown file %s\n" % path)
        self.err.flush()

    def warn(self, message):
        self.flush()
        self.err.write("kafkalog: %s\n" % message)
        self.err.flush()

    def _ts(self, ms):
        """An epoch-ms value, with its UTC time beside it under --timestamps iso."""
        if self.opts.iso:
            iso = decoders.iso_time(ms)
            if iso is not None:
                return "%d (%s)" % (ms, iso)
        return str(ms)

    # -- events ----------------------------------------------------------------------------
    def segment(self, reader):
        """Write one segment file: the events of ``reader`` (a log.read.SegmentReader)."""
        for note in reader.notes:
            self.warn(note.message)
        self.begin_file(printable_name(reader.log.path), reader.base, reader.log.buf)
        first_match = reader.seek is not None
        for event in reader:
            if isinstance(event, BatchRead):
                if event.first:
                    self.batch(event.batch, event.records)
                    if first_match:
                        self.flush()  # the first match at once: the rest may take a scan
                        first_match = False
                else:
                    self.records(event.batch, event.records)
            elif isinstance(event, BatchProblem):
                if event.kind == MISPLACED:
                    self.warn("%s: the batch at position %d: %s"
                              % (self.path, event.batch.position, event.message))
                elif event.kind == NOT_DECODED:
                    self.records_not_decoded(event.batch, reader.log.batch_limit)
                else:
                    self.record_error(event.batch, event.message)
            elif isinstance(event, BytesProblem):
                self.invalid(event.item, event.counted)
            else:
                self.warn(event.message)
        self.end_file()

    def begin_file(self, path, base_offset, buf=None):
        """Start a file; ``buf`` is its bytes, for writers that render from them directly."""
        self.path = path
        self.buf = buf

    def fast_path(self):
        """None, or a function(log, pos, end, max_bytes, prev_last) -> (new pos, prev_last)
        that writes a run of batches faster than ``batch`` one by one would, stopping before a
        batch whose last offset is not above ``prev_last``."""
        return None

    def fast_records_path(self):
        """None, or a function(log, pos, end, max_bytes, prev_last, reach_last) -> (new pos,
        prev_last) that writes a run of batches with their records (as ``batch`` and
        ``records`` would), stopping before a batch whose last offset is not above ``prev_last``
        or is above ``reach_last``, and before any batch it cannot write as they would."""
        return None

    def batch(self, batch, recs):
        """A batch's line(s), with the first chunk of its records (None: not shown)."""
        raise NotImplementedError

    def records(self, batch, recs):
        """A further chunk of the records of the batch last given to ``batch``."""
        raise NotImplementedError

    def records_not_decoded(self, batch, limit):
        """A valid batch whose records inflate past ``limit`` bytes: kept (its CRC holds, and
        the broker never looks inside), its records not shown."""
        self.warn("%s: records of the batch at position %d (offsets %d-%d) not decoded: they "
                  "inflate past %d bytes (raise --max-message-size)"
                  % (self.path, batch.position, batch.base_offset, batch.last_offset, limit))

    def record_error(self, batch, message):
        self.warn("%s: records of the batch at position %d (offset %d) cannot be read: %s"
                  % (self.path, batch.position, batch.base_offset, message))

    def invalid(self, inv, counted):
        if counted:
            self.warn("%s: %d invalid bytes at position %d: %s" % (self.path, inv.size,
                                                                   inv.position,
                                                                   inv.reason))

    def end_file(self):
        self.buf = None
        self._maybe_flush()

    # -- index, snapshot and checkpoint files ----------------------------------------------
    def begin_aux(self, path):
        """Start a file that is not a log (an index, a snapshot, a checkpoint...)."""
        self.path = path
        self._lines.append("Dumping %s" % path)

    def entry(self, kind, fields):
        """One entry of such a file: ``fields`` in the order they print."""
        self._lines.append(entry_text(kind, fields, self.opts.kafka_format))
        self._maybe_flush()

    def note(self, text):
        """A line Kafka's tool prints about a file (``<file> is empty.``)."""
        self._lines.append(text)

    def problems(self, problems):
        """Findings about the current file, reported at the end of the run (text) or at once."""
        self._problems.extend(problems)

    def unreadable(self, problem):
        """A file that cannot be read as its kind: one line on stderr, at once."""
        self.warn("%s: %s" % (problem.file, problem.message))

    def finish(self):
        self.flush()
        self._print_problems()

    def _print_problems(self):
        """Kafka's end-of-run summaries for index mismatches and time index errors, in its
        order and wording; any other finding as a line of its own."""
        if not self._problems:  # nothing to group: index_check (its problem kinds) is not imported
            self.err.flush()
            return
        by_kind = {}
        for p in self._problems:
            by_kind.setdefault(p.kind, []).append(p)
        err = self.err
        # Each summary is a map keyed by the file's absolute path, printed in the map's order:
        # a java.util.HashMap in the Java tool (4.3+), a Scala mutable.HashMap before.
        # DumpLogSegments.dumpIndex: the Java tool keeps one mismatch per index offset, highest
        # first (a TreeMap in reverse order); the Scala tool prepends each to a List.
        grouped = ((index_check.OFFSET_MISMATCH, "Mismatches in :%s", not self._java),
                   (index_check.TIMESTAMP_MISMATCH, "Found timestamp mismatch in :%s", False),
                   (index_check.TIMESTAMP_OUT_OF_ORDER, "Found out of order timestamp in :%s",
                    False),
                   (index_check.OFFSET_NOT_FOUND,
                    "The following indexed offsets are not found in :%s" if self._java
                    else "The following indexed offsets are not found in the log.", False))
        for kind, header, reverse in grouped:
            # every problem is a call on the map (computeIfAbsent; the Scala tool's put for an
            # offset index mismatch), but the Scala tool puts a time index's list once
            once = not self._java and kind != index_check.OFFSET_MISMATCH
            files = self._map_order(by_kind.pop(kind, []), once)
            for path, items in files:
                err.write((header % path if "%s" in header else header) + "\n")
                if kind == index_check.OFFSET_MISMATCH and self._java:
                    items = sorted({p.fields["index_offset"]: p for p in items}.values(),
                                   key=lambda p: -p.fields["index_offset"])
                indent = "" if kind == index_check.OFFSET_NOT_FOUND else "  "
                for p in (reversed(items) if reverse else items):
                    err.write("%s%s\n" % (indent, p.message))
        for items in by_kind.values():
            for p in items:
                err.write("kafkalog: %s: %s\n" % (p.file, p.message))
        err.flush()

    def _map_order(self, problems, once=False):
        """[(absolute path, its problems)] in the iteration order of DumpLogSegments' map of
        them, into which each problem was put (``once``: each file once)."""
        files = {}
        puts = []
        for p in problems:
            path = os.path.abspath(p.file)
            files.setdefault(path, []).append(p)
            puts.append(path)
        return [(path, files[path]) for path in map_order(list(files) if once else puts,
                                                         self._java)]


def map_order(calls, java):
    """The keys of DumpLogSegments' ``Map[String, _]`` after a call for each of ``calls`` (keys
    may repeat), in the order the map iterates them: a java.util.HashMap filled by
    computeIfAbsent (the Java tool) or Scala 2.13's mutable.HashMap filled by put (the Scala
    tool). The tables resize on calls for keys already there, so every call counts."""
    if len(set(calls)) < 2:
        return list(dict.fromkeys(calls))
    if java:
        from ..log.javahash import java_string_hash_order
        return java_string_hash_order(calls, compute=True)
    from ..format.jvmhash import scala_string_map_order
    return scala_string_map_order(calls)


def _by_file(problems):
    files = {}
    for p in problems:
        files.setdefault(p.file, []).append(p)
    return files.items()


def _optional_long(value):
    return "OptionalLong.empty" if value is None else "OptionalLong[%d]" % value


def entry_text(kind, f, kafka_format):
    """The text line of one entry of an index, snapshot or checkpoint file."""
    if kind == names.INDEX:
        return "offset: %d position: %d" % (f["offset"], f["position"])
    if kind == names.TIMEINDEX:
        return "timestamp: %d offset: %d" % (f["timestamp"], f["offset"])
    if kind == names.TXNINDEX:
        return ("version: %d producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d"
                % (f["version"], f["producerId"], f["firstOffset"], f["lastOffset"],
                   f["lastStableOffset"]))
    if kind == names.SNAPSHOT:
        line = ("producerId: %d producerEpoch: %d coordinatorEpoch: %d currentTxnFirstOffset: %s "
                "lastTimestamp: %d" % (f["producerId"], f["producerEpoch"], f["coordinatorEpoch"],
                                       _optional_long(f["currentTxnFirstOffset"]),
                                       f["lastTimestamp"]))
        if "lastOffset" in f:
            return line + (" firstSequence: %d lastSequence: %d lastOffset: %d offsetDelta: %d "
                           "timestamp: %d" % (f["firstSequence"], f["lastSequence"],
                                              f["lastOffset"], f["offsetDelta"], f["timestamp"]))
        return line if java_tool(kafka_format) else line + " "  # the Scala tool's trailing space
    return " ".join("%s: %s" % item for item in f.items())


def record_validity(b, recs, i):
    """(isvalid, crc) of record ``i``: a legacy message's own, a v2 record's batch's."""
    if recs.valids is not None:
        return recs.valids[i], recs.crcs[i]
    return b.is_valid, b.crc


# -- control records ---------------------------------------------------------------------------

def control_text(key, value, kafka_format):
    """What kafka-dump-log appends to a control record's line."""
    type_id = control.control_type(key)
    if type_id in (control.ABORT, control.COMMIT):
        _, epoch = control.end_txn_marker(value)
        return " endTxnMarker: %s coordinatorEpoch: %d" % (control.control_type_name(type_id),
                                                           epoch)
    import json  # here, not at start-up: only KRaft's control records are shown as JSON
    labels = {control.SNAPSHOT_HEADER: "SnapshotHeader", control.SNAPSHOT_FOOTER: "SnapshotFooter",
              control.KRAFT_VERSION: "KRaftVersion", control.KRAFT_VOTERS: "KRaftVoters"}
    if type_id in labels:
        body = control.kraft_control_json(type_id, value)
        return " %s %s" % (labels[type_id],
                           json.dumps(body, separators=(",", ":"), allow_nan=False))
    if type_id == control.LEADER_CHANGE:
        # Read even where it is not printed (the plain controlType line of Kafka 3.x and 4.0):
        # a malformed value is invalid data for dump as for recover.
        body = control.kraft_control_json(type_id, value)
        if kafka_version(kafka_format) >= LEADER_CHANGE_JSON:
            return " LeaderChange: %s" % json.dumps(body, separators=(",", ":"), allow_nan=False)
    return " controlType: %s(%d)" % (control.control_type_name(type_id), type_id)


def control_fields(key, value):
    """Control record details for JSON output."""
    type_id = control.control_type(key)
    out = {"controlType": control.control_type_name(type_id), "controlTypeId": type_id}
    if type_id in (control.ABORT, control.COMMIT):
        out["coordinatorEpoch"] = control.end_txn_marker(value)[1]
    elif type_id in control.kraft_control_names():
        out["data"] = control.kraft_control_json(type_id, value)
    return out


# -- kafka -------------------------------------------------------------------------------------

def log_header(path, base_offset):
    """The line kafka-dump-log prints after ``Dumping <file>`` for a file of records: a
    segment's base offset, or a KRaft snapshot's id (DumpLogSegments.dumpLog)."""
    if names.file_kind(path) != names.KRAFT_SNAPSHOT:
        return "Log starting offset: %d" % base_offset
    name = names.without_lifecycle_suffix(os.path.basename(path))
    if name == names.BOOTSTRAP_SNAPSHOT:
        return "KRaft bootstrap snapshot"
    snapshot_id = names.kraft_snapshot_id(name)
    if snapshot_id is None:
        # Kafka's tool fails on such a name; the records are dumped all the same
        return "Snapshot end offset: unknown (not an <offset>-<epoch>.checkpoint name)"
    return "Snapshot end offset: %d, epoch: %d" % snapshot_id


class KafkaWriter(Writer):
    """Exactly the lines of kafka-dump-log.sh (Scala tool 3.x-4.2, or the 4.3 Java tool)."""

    # index files as DumpLogSegments reads them (a zero slot 0 is an entry: dump_aux)
    kafka_index_view = True

    def __init__(self, out, err, opts):
        super().__init__(out, err, opts)
        self._chunk = None
        self._nonconsecutive = []   # (absolute path, [(a, b), ...]) per file
        self._pairs = None
        self._last = None
        self._key_text = decoders.text_function(opts.key_decoder)
        self._value_text = decoders.text_function(opts.value_decoder)
        # Where the C renderer takes over (it writes plain epoch timestamps only): runs of
        # whole batches when no record is shown, batch lines, and v2 record lines whose keys
        # and values print as strings.
        native = _kafkatext if not opts.iso else None
        self._c_runs = native if not opts.deep else None
        self._c_batch_line = native
        self._c_records = (native if opts.key_decoder == opts.value_decoder == "string"
                           and opts.parser is None else None)
        # ... and runs of whole v2 data batches with their record lines (_v2_lines' output)
        self._c_deep = (self._c_records if opts.deep and not opts.skip_metadata
                        and hasattr(self._c_records, "deep_lines") else None)
        self._chunk_span = None  # (log, file position, length) of what _chunk holds
        self._inflater = None
        # ... and record lines with a parser's payloads, for a parser that gives them by batch
        self._c_parser_records = (native if opts.parser is not None
                                  and opts.parser.payloads is not None else None)

    def begin_file(self, path, base_offset, buf=None):
        super().begin_file(path, base_offset, buf)
        self._lines.append("Dumping %s" % path)
        self._lines.append(log_header(path, base_offset))
        self._pairs = []
        self._last = -1 if self._java else None
        self._nonconsecutive.append((os.path.abspath(path), self._pairs))
        self._chunk_span = None

    def fast_path(self):
        """A function that prints a run of batches at once, where this dump allows it."""
        return None if self._c_runs is None else self._fast_batches

    def fast_records_path(self):
        """A function that prints a run of batches with their records at once, where this
        dump allows it."""
        return None if self._c_deep is None else self._fast_deep

    def _chunk_at(self, log, pos, end, fresh):
        """(file position, length) of the file's bytes held in the reused buffer, which holds
        ``pos``: read there anew (at most _FAST_CHUNK bytes, up to ``end``) unless it already
        holds ``pos`` and ``fresh`` is false. A run that ends one batch before a batch the
        fast path does not take resumes in the bytes already read."""
        if self._chunk is None:
            self._chunk = bytearray(_FAST_CHUNK)
        span = self._chunk_span
        if fresh or span is None or span[0] is not log or not span[1] <= pos < span[1] + span[2]:
            n = log.read_into(memoryview(self._chunk)[:min(_FAST_CHUNK, end - pos)], pos)
            span = self._chunk_span = (log, pos, n)
        return span[1], min(span[2], end - span[1])

    def _fast_run(self, log, pos, end, max_bytes, step):
        """Feed the file's bytes from ``pos`` to ``step(view, at, n, file position of view)``,
        which renders what it can of ``view[at:n]`` and returns the position in ``view`` where
        it stopped; stops once ``max_bytes`` are consumed, at ``end``, or where ``step`` takes
        nothing of freshly read bytes. Returns the file position reached."""
        stop = min(end, pos + max_bytes)
        fresh = False
        while pos < stop:
            start, n = self._chunk_at(log, pos, end, fresh)
            at = pos - start
            used = step(memoryview(self._chunk), at, n, start)
            if used == at:
                if fresh or start == pos or self._held_whole(at, n):
                    break  # an entry the fast path does not take: the caller's
                fresh = True  # the entry may run past the bytes held: read from it
                continue
            fresh = False
            pos = start + used
        return pos

    def _held_whole(self, at, n):
        """Does the buffer hold the whole entry at ``at`` (of its ``n`` bytes read), or one
        whose size field no batch has?"""
        if n - at < 12:
            return False
        size = int.from_bytes(self._chunk[at + 8:at + 12], "big", signed=True)
        return size < 49 or at + 12 + size <= n

    def _fast_batches(self, log, pos, end, max_bytes, prev_last):
        """Print the run of valid v2 batches from ``pos`` whose last offsets rise above
        ``prev_last`` (None: any) in one go; return where it stopped and the highest last
        offset printed (or ``prev_last``).

        The file is read in chunks into one reused buffer. The caller goes on with ``batch``
        for the entry at the position returned (one the fast path does not take, or one larger
        than the buffer).
        """
        last = [prev_last]

        def step(view, at, n, start):
            data, used, last[0] = self._c_runs.batch_lines(view, at, n, n - at, crc32c, start,
                                                           last[0])
            if data:
                self.put_bytes(data)
                self._maybe_flush()
            return used

        return self._fast_run(log, pos, end, max_bytes, step), last[0]

    def _fast_deep(self, log, pos, end, max_bytes, prev_last, reach_last):
        """As _fast_batches, with each batch's records (``--deep-iteration``): the run of
        plain v2 data batches (see _kafkatext.deep_lines) from ``pos`` in one go, the records
        of compressed batches inflated as iter_records inflates them. The record offsets
        printed continue the writer's tracking of consecutive offsets (a batch that would
        break it is left to ``records``, which notes the gap)."""
        if self.opts.parser is not None:
            return pos, prev_last  # set for this file (a KRaft snapshot's metadata records)
        if self._inflater is None:
            self._inflater = codecs.Inflater()  # one per run: zstd's context is reused
        inflate_any = self._inflater.inflate
        batch_limit = log.batch_limit

        def inflate(codec, data):
            return inflate_any(codec, data, batch_limit, 2)

        last = [prev_last]
        print_data = self.opts.print_data

        def step(view, at, n, start):
            data, used, last[0], self._last = self._c_deep.deep_lines(
                view, at, n, n - at, crc32c, start, last[0], reach_last, self._last,
                log.max_message_size, print_data, inflate, CorruptRecordError, _FLUSH_BYTES,
                RECORD_CHUNK)
            if data:
                self.put_bytes(data)
                self._maybe_flush()
            return used

        return self._fast_run(log, pos, end, max_bytes, step), last[0]

    def batch(self, b, recs):
        native = self._c_batch_line
        if native is not None and b.magic == 2 and b.codec <= 4 and self.buf is not None:
            self.put_bytes(native.batch_line(self.buf, b.position, b.is_valid))
        else:
            self._lines.append(self._batch_line(b))
        if recs is not None:
            self.records(b, recs)
        else:
            self._maybe_flush()

    def records(self, b, recs):
        if len(recs):
            self._track_offsets(recs.offsets)
            opts = self.opts
            if (b.magic >= 2 and not b.is_control and not opts.skip_metadata and not opts.iso
                    and opts.parser is None):
                self._v2_lines(b, recs)
            elif (b.magic >= 2 and not b.is_control and not opts.skip_metadata and not opts.iso
                    and opts.print_data):
                self._parser_lines(b, recs)
            else:
                self._generic_lines(b, recs)
        self._maybe_flush()

    def _batch_line(self, b):
        ts = self._ts(b.max_timestamp)
        if b.magic >= 2:
            dh = b.delete_horizon_ms
            return (
                "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d "
                "producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %s "
                "isControl: %s deleteHorizonMs: %s position: %d %s: %s size: %d magic: %d "
                "compresscodec: %s crc: %d isvalid: %s" % (
                    b.base_offset, b.last_offset, b.count, b.base_sequence, b.last_sequence,
                    b.producer_id, b.producer_epoch, b.partition_leader_epoch,
                    _BOOL[b.is_transactional], _BOOL[b.is_control],
                    "OptionalLong.empty" if dh is None else "OptionalLong[%s]" % self._ts(dh),
                    b.position, b.timestamp_type_name, ts, b.size, b.magic, b.codec_name, b.crc,
                    _BOOL[b.is_valid]))
        return ("offset: %d position: %d %s: %s size: %d magic: %d compresscodec: %s crc: %d "
                "isvalid: %s" % (b.last_offset, b.position, b.timestamp_type_name, ts, b.size,
                                 b.magic, b.codec_name, b.crc, _BOOL[b.is_valid]))

    def _track_offsets(self, offsets):
        first = offsets[0]
        last = self._last
        if (last is None or first == last + 1) and offsets[-1] - first == len(offsets) - 1 \
                and offsets == list(range(first, first + len(offsets))):
            self._last = offsets[-1]
            return
        pairs = self._pairs
        for off in offsets:
            if last is not None and off != last + 1:
                pairs.append((last, off))
            last = off
        self._last = last

    def _v2_lines(self, b, recs):
        """The hot path: data records of a v2 batch with metadata, plain epoch timestamps."""
        if self._c_records is not None:
            self.put_bytes(self._c_records.record_lines(
                recs.offsets, recs.timestamps, recs.keys, recs.values, recs.headers,
                b.base_offset, b.base_sequence, b.timestamp_type_name, self.opts.print_data))
            return
        add = self._lines.append
        head = "| offset: "
        tl = " %s: " % b.timestamp_type_name
        print_data = self.opts.print_data
        kt = self._key_text
        vt = self._value_text
        base_seq = b.base_sequence
        base_off = b.base_offset
        for off, ts, k, v, h in zip(recs.offsets, recs.timestamps, recs.keys, recs.values,
                                    recs.headers):
            if base_seq == -1:
                seq = -1
            else:
                seq = base_seq + off - base_off
                if seq > 0x7FFFFFFF:
                    seq -= 0x80000000
            hk = ",".join([x[0] for x in h]) if h else ""
            if print_data:
                add(f"{head}{off}{tl}{ts} keySize: {-1 if k is None else len(k)} valueSize: "
                    f"{-1 if v is None else len(v)} sequence: {seq} headerKeys: [{hk}]"
                    f"{'' if k is None else ' key: ' + kt(k, off)}"
                    f"{'' if v is None else ' payload: ' + vt(v, off)}")
            else:
                add(f"{head}{off}{tl}{ts} keySize: {-1 if k is None else len(k)} valueSize: "
                    f"{-1 if v is None else len(v)} sequence: {seq} headerKeys: [{hk}]")

    def _parser_lines(self, b, recs):
        """_generic_lines' output for data records of a v2 batch through a parser
        (--cluster-metadata-decoder...), with metadata and plain epoch timestamps."""
        if self._c_parser_records is not None:
            self.put_bytes(self._c_parser_records.record_lines(
                recs.offsets, recs.timestamps, recs.keys, recs.values, recs.headers,
                b.base_offset, b.base_sequence, b.timestamp_type_name, True,
                self.opts.parser.payloads(recs.offsets, recs.values)))
            return
        add = self._lines.append
        parse = self.opts.parser.text
        head = "| offset: "
        tl = " %s: " % b.timestamp_type_name
        base_seq = b.base_sequence
        base_off = b.base_offset
        for off, ts, k, v, h in zip(recs.offsets, recs.timestamps, recs.keys, recs.values,
                                    recs.headers):
            kt, vt = parse(off, k, v)
            add(f"{head}{off}{tl}{ts} keySize: {-1 if k is None else len(k)} valueSize: "
                f"{-1 if v is None else len(v)} sequence: "
                f"{record_sequence(base_seq, off - base_off)} headerKeys: "
                f"[{','.join([x[0] for x in h]) if h else ''}]"
                f"{'' if kt is None else ' key: ' + kt}{'' if vt is None else ' payload: ' + vt}")

    def _generic_lines(self, b, recs):
        """Every other record line: legacy, control, --skip-record-metadata, iso timestamps."""
        add = self._lines.append
        opts = self.opts
        tl = b.timestamp_type_name
        v2 = b.magic >= 2
        for i, off in enumerate(recs.offsets):
            k = recs.keys[i]
            v = recs.values[i]
            parts = []
            prefix = "| "
            if not opts.skip_metadata:
                parts.append("| offset: %d %s: %s keySize: %d valueSize: %d" % (
                    off, tl, self._ts(recs.timestamps[i]), -1 if k is None else len(k),
                    -1 if v is None else len(v)))
                prefix = " "
                if v2:
                    seq = record_sequence(b.base_sequence, off - b.base_offset)
                    parts.append(" sequence: %d headerKeys: [%s]" % (
                        seq, ",".join(x[0] for x in recs.headers[i])))
                else:
                    parts.append(" isValid: %s crc: %d%s" % (_BOOL[recs.valids[i]], recs.crcs[i],
                                                             "" if self._java else "}"))
                if b.is_control:
                    try:
                        parts.append(control_text(k, v, opts.kafka_format))
                    except CorruptRecordError as e:
                        parts.append(" controlType: INVALID")
                        self.bad_record(off, e)
            if opts.print_data and not b.is_control:
                if opts.parser is not None:
                    # DumpLogSegments' MessageParser: each part printed when it gives one
                    kt, vt = opts.parser.text(off, k, v)
                else:
                    kt = None if k is None else self._key_text(k, off)
                    vt = None if v is None else self._value_text(v, off)
                if kt is not None:
                    parts.append("%skey: %s" % (prefix, kt))
                    prefix = " "
                if vt is not None:
                    parts.append("%spayload: %s" % (prefix if self._java else " ", vt))
            add("".join(parts))

    def invalid(self, inv, counted):
        super().invalid(inv, counted)
        if not counted:
            return
        name = os.path.basename(self.path)
        if inv.at_end:
            self._lines.append("Found %d invalid bytes at the end of %s" % (inv.size, name))
        else:
            self._lines.append("Skipped %d invalid bytes at position %d of %s"
                               % (inv.size, inv.position, name))

    def finish(self):
        self.flush()
        self._print_problems()
        # DumpLogSegments' map of each file's non-consecutive pairs: a HashMap of TreeMaps
        # (sorted by offset) in the Java tool, a Scala mutable.HashMap of Lists (each pair
        # prepended) before
        by_path = {}
        puts = []
        for path, pairs in self._nonconsecutive:
            if pairs:
                by_path.setdefault(path, []).extend(pairs)
                puts.extend([path] * len(pairs))
        for path in map_order(puts, self._java):
            pairs = by_path[path]
            if self._java:
                ordered = sorted(dict(pairs).items())
            else:
                ordered = reversed(pairs)
            self.err.write("Non-consecutive offsets in %s\n" % path)
            for a, b in ordered:
                self.err.write("  %d is followed by %d\n" % (a, b))
        self.err.flush()


# -- messages ----------------------------------------------------------------------------------

class MessagesWriter(Writer):
    """One line per message, the classic kafka-dump-log style, for grep and awk."""

    def __init__(self, out, err, opts):
        super().__init__(out, err, opts)
        self._key_text = decoders.text_function(opts.key_decoder)
        self._value_text = decoders.text_function(opts.value_decoder)

    def batch(self, b, recs):
        if recs is not None:
            self.records(b, recs)

    def records(self, b, recs):
        add = self._lines.append
        codec = b.codec_name
        tl = b.timestamp_type_name
        kt = self._key_text
        vt = self._value_text
        pos = b.position
        for i, off in enumerate(recs.offsets):
            k = recs.keys[i]
            v = recs.values[i]
            valid, crc = record_validity(b, recs, i)
            line = ("offset: %d position: %d %s: %s isvalid: %s crc: %d keysize: %d "
                    "payloadsize: %d magic: %d compresscodec: %s" % (
                        off, pos, tl, self._ts(recs.timestamps[i]), _BOOL[valid], crc,
                        -1 if k is None else len(k), -1 if v is None else len(v), b.magic, codec))
            if b.is_control:
                try:
                    line += control_text(k, v, self.opts.kafka_format)
                except CorruptRecordError as e:
                    self.bad_record(off, e)
            elif self.opts.parser is not None:
                key_text, payload_text = self.opts.parser.text(off, k, v)
                if key_text is not None:
                    line += " key: " + key_text
                if payload_text is not None:
                    line += " payload: " + payload_text
            else:
                if k is not None:
                    line += " key: " + kt(k, off)
                if v is not None:
                    line += " payload: " + vt(v, off)
            add(line)
        self._maybe_flush()


# -- json --------------------------------------------------------------------------------------

class JsonWriter(Writer):
    """JSON Lines in the shared vocabulary (kafkalog_cli/jsonvocab.py, README "JSON output"):
    a "batch" object per batch, a "record" object per record, a "summary" object at the end."""

    def __init__(self, out, err, opts):
        super().__init__(out, err, opts)
        # key and value are always the bytes (lossless); a decoder other than the default
        # string adds its reading as keyDecoded/valueDecoded
        self._key_json = (None if opts.key_decoder == "string"
                          else decoders.json_function(opts.key_decoder))
        self._value_json = (None if opts.value_decoder == "string"
                            else decoders.json_function(opts.value_decoder))
        self._header_json = (None if opts.value_decoder == "string"
                             else decoders.header_json_function(opts.value_decoder))
        self._dumps = decoders.StrictEncoder(ensure_ascii=False, separators=(",", ":")).encode
        self._topic = self._partition = None
        self._counts = {"files": 0, "batches": 0, "invalidBatches": 0, "records": 0,
                        "invalidBytes": 0, "problems": 0}

    def _emit(self, obj):
        self._lines.append(self._dumps(obj))

    def _where(self, path):
        self._topic, self._partition = jsonvocab.partition_of(path)
        self._counts["files"] += 1

    def _emit_record(self, obj, k, v, hdrs):
        try:
            self._emit(obj)
        except RecursionError:
            # a payload parsed (--*-decoder json) that nests too deep to write back: as text
            for name, data in (("keyDecoded", k), ("valueDecoded", v)):
                if name in obj:
                    obj[name] = None if data is None else decoders.TEXT["string"](data)
            if "headersDecoded" in obj:
                obj["headersDecoded"] = [[hk, None if hv is None else decoders.TEXT["string"](hv)]
                                         for hk, hv in hdrs]
            self._emit(obj)

    def begin_file(self, path, base_offset, buf=None):
        super().begin_file(path, base_offset, buf)
        self._where(path)

    def batch(self, b, recs):
        tst = b.timestamp_type_name
        self._counts["batches"] += 1
        if not b.is_valid:
            self._counts["invalidBatches"] += 1
        self._emit({
            "type": "batch", "topic": self._topic, "partition": self._partition,
            "file": self.path, "position": b.position, "size": b.size,
            "magic": b.magic, "baseOffset": b.base_offset, "lastOffset": b.last_offset,
            "count": b.count, "crc": b.crc, "isValid": b.is_valid, "compresscodec": b.codec_name,
            "timestampType": tst, "maxTimestamp": b.max_timestamp, "producerId": b.producer_id,
            "producerEpoch": b.producer_epoch, "baseSequence": b.base_sequence,
            "lastSequence": b.last_sequence, "partitionLeaderEpoch": b.partition_leader_epoch,
            "isTransactional": b.is_transactional, "isControl": b.is_control,
            "deleteHorizonMs": b.delete_horizon_ms})
        if recs is not None:
            self.records(b, recs)

    def records(self, b, recs):
        tst = b.timestamp_type_name
        kj = self._key_json
        vj = self._value_json
        parser = self.opts.parser
        if kj is None and vj is None and parser is None and not b.is_control:
            self._plain_records(b, recs)
            return
        topic, partition = self._topic, self._partition
        bj = jsonvocab.bytes_json
        self._counts["records"] += len(recs.offsets)
        for i, off in enumerate(recs.offsets):
            k = recs.keys[i]
            v = recs.values[i]
            valid, crc = record_validity(b, recs, i)
            seq = -1 if b.magic < 2 else record_sequence(b.base_sequence, off - b.base_offset)
            obj = {"type": "record", "topic": topic, "partition": partition, "file": self.path,
                   "offset": off, "position": b.position, "timestamp": recs.timestamps[i],
                   "timestampType": tst, "keySize": -1 if k is None else len(k),
                   "valueSize": -1 if v is None else len(v), "key": bj(k), "value": bj(v)}
            if not b.is_control:
                if kj is not None:
                    obj["keyDecoded"] = None if k is None else kj(k, off)
                if vj is not None:
                    obj["valueDecoded"] = None if v is None else vj(v, off)
                if parser is not None:
                    for name, field in parser.json(off, k, v).items():
                        obj[_PARSER_FIELDS.get(name, name)] = field
            hdrs = recs.headers[i] if recs.headers is not None else ()
            obj["headers"] = jsonvocab.headers_json(hdrs)
            if self._header_json is not None and hdrs:
                hj = self._header_json
                obj["headersDecoded"] = [[hk, None if hv is None else hj(hv, off)]
                                         for hk, hv in hdrs]
            obj["sequence"] = seq
            obj["isValid"] = valid
            obj["crc"] = crc
            if b.is_control:
                try:
                    obj.update(control_fields(k, v))
                except CorruptRecordError as e:
                    obj["controlError"] = str(e)
                    self.bad_record(off, e)
            self._emit_record(obj, k, v, hdrs)
        self._maybe_flush()

    def _plain_records(self, b, recs):
        """The record objects of ``records`` for data records shown with the string decoders,
        written as text directly: the very bytes the encoder writes for those objects (the same
        keys in the same order; integers, strings, booleans and null as it writes them), for a
        fraction of its cost per record."""
        # the string encoder JSONEncoder(ensure_ascii=False) uses (json imported by then)
        from json.encoder import encode_basestring as enc
        head = (self._dumps({"type": "record", "topic": self._topic,
                             "partition": self._partition, "file": self.path})[:-1]
                + ',"offset":')
        mid = ',"position":%d,"timestamp":' % b.position
        tail_ts = ',"timestampType":%s,"keySize":' % enc(b.timestamp_type_name)
        base_seq, base_off, v2 = b.base_sequence, b.base_offset, b.magic >= 2
        valids, crcs = recs.valids, recs.crcs
        batch_valid = "true" if b.is_valid else "false"
        headers = recs.headers
        add = self._lines.append
        self._counts["records"] += len(recs.offsets)
        for i, (off, ts, k, v) in enumerate(zip(recs.offsets, recs.timestamps, recs.keys,
                                                recs.values)):
            if valids is not None:
                valid, crc = ("true" if valids[i] else "false"), crcs[i]
            else:
                valid, crc = batch_valid, b.crc
            seq = record_sequence(base_seq, off - base_off) if v2 else -1
            hdrs = headers[i] if headers is not None else ()
            hj = ("[%s]" % ",".join(["[%s,%s]" % (enc(hk), _bytes_json_text(hv, enc))
                                     for hk, hv in hdrs])) if hdrs else "[]"
            add("%s%d%s%d%s%d,\"valueSize\":%d,\"key\":%s,\"value\":%s,\"headers\":%s,"
                "\"sequence\":%d,\"isValid\":%s,\"crc\":%d}"
                % (head, off, mid, ts, tail_ts, -1 if k is None else len(k),
                   -1 if v is None else len(v), _bytes_json_text(k, enc), _bytes_json_text(v, enc),
                   hj,
                   seq, valid, crc))
        self._maybe_flush()

    def records_not_decoded(self, batch, limit):
        super().records_not_decoded(batch, limit)
        self._emit({"type": "recordsNotDecoded", "topic": self._topic,
                    "partition": self._partition, "file": self.path, "position": batch.position,
                    "baseOffset": batch.base_offset, "lastOffset": batch.last_offset,
                    "inflateLimit": limit})

    def record_error(self, batch, message):
        super().record_error(batch, message)
        self._emit({"type": "error", "file": self.path, "position": batch.position,
                    "reason": message})

    def begin_aux(self, path):
        self.path = path
        self._where(path)

    def entry(self, kind, fields):
        obj = {"type": jsonvocab.camel(kind.replace("-", "_") + "_entry"), "file": self.path}
        obj.update(jsonvocab.camel_keys(fields))
        self._emit(obj)
        self._maybe_flush()

    def note(self, text):
        self._emit({"type": "note", "file": self.path, "message": text})

    def problems(self, problems):
        for p in problems:
            self._counts["problems"] += 1
            self._emit(jsonvocab.camel_keys(p.as_dict()))

    def unreadable(self, problem):
        self._counts["problems"] += 1
        self._emit(jsonvocab.camel_keys(problem.as_dict()))
        super().unreadable(problem)

    def invalid(self, inv, counted):
        super().invalid(inv, counted)
        if counted:
            self._counts["invalidBytes"] += inv.size
            self._emit({"type": "invalidBytes", "file": self.path, "position": inv.position,
                        "size": inv.size, "reason": inv.reason})

    def finish(self):
        self._emit(jsonvocab.summary("dump", **self._counts))
        super().finish()


def _bytes_json_text(data, enc):
    """jsonvocab.bytes_json(data) as the JSON text the writers' encoder makes of it (``enc``:
    its string encoder)."""
    if data is None:
        return "null"
    try:
        return enc(data.decode("utf-8"))
    except UnicodeDecodeError:
        return '{"base64":"%s"}' % jsonvocab.bytes_json(data)["base64"]


# the parsers' (--cluster-metadata-decoder...) names for the value side, in the vocabulary's
_PARSER_FIELDS = {"payloadDecoded": "valueDecoded", "payloadError": "valueError",
                  "payloadErrorCause": "valueErrorCause"}


WRITERS = {"kafka": KafkaWriter, "messages": MessagesWriter, "json": JsonWriter}


# -- the reports of recover and retain: one layout per output --------------------------------------

def human_bytes(n):
    """Bytes as a short figure for a terminal (1024-based units: 1.2 MiB); JSON keeps the
    exact integer."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return ("%d B" % n) if unit == "B" else ("%.1f %s" % (size, unit))
        size /= 1024
    return str(n)  # pragma: no cover


def table_output(fmt):
    """One layout per output: a rich table on a terminal, plain lines on a pipe (or JSON)."""
    return fmt == "text" and sys.stdout.isatty()


def plural(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def offsets_text(first, last, records):
    """"offsets 290-299, 10 records", or "no batch"."""
    if first is None or last is None:
        return "no batch"
    return "offsets %d-%d, %s" % (first, last, plural(records, "record"))


def new_offsets_text(label, objs, key):
    """The summary's tail naming each partition's new offset (``key`` of its JSON object):
    "; new log end offset 290", or one per partition when there are several."""
    if len(objs) == 1:
        return "; new %s %s" % (label, objs[0][key])
    if objs:
        return "; new %ss %s" % (label, ", ".join(
            "%s-%s %s" % (o["topic"], o["partition"], o[key]) for o in objs))
    return ""
