"""What the output formats of `kafkalog dump` share: the ``Writer`` every format subclasses
(kafka-dump-log.sh's lines: ``render_kafka``; messages and json: ``render_json``), the options,
the summaries and the control records' text.

A writer receives, per file: ``begin_file``, then ``batch``/``record_error``/``invalid`` in file
order, then ``end_file``; ``finish`` once at the end prints the run's summaries. A batch's records
come in chunks (a huge batch is never held whole): the first with ``batch``, the others with
``records``, each written out before the next is decoded. Text is collected in lists and written
in large chunks. Every JSON text written is strict JSON (no NaN or Infinity).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING


from ..format import control
from ..format.validity import control_record_problem
from ..log import names
from ..log.files import printable_name
from ..log.read import (CONTROL, MISPLACED, MISPLACED_STRETCH, NOT_DECODED, BatchProblem,
                        BatchRead, BytesProblem)
from . import decoders
from .._lazy import lazy_module

if TYPE_CHECKING:
    from typing import (Any, BinaryIO, Dict, ItemsView, Iterator, List, Optional, Protocol,
                        Sequence, TextIO, Tuple)

    from ..format.records import Batch, Records
    from ..format.scan import InvalidBytes
    from ..log.findings import Finding
    from ..log.read import Event, FastRecordsRun, FastRun, Note
    from ..log.seek import Seek
    from ..log.segment import LogFile
    from .parsers import Parser

    class Events(Protocol):
        """What ``Writer.segment`` reads of a log.read.SegmentReader (or of a stand-in for
        one that forwards to it)."""

        notes: List[Note]
        log: LogFile
        base: int
        seek: Optional[Seek]

        def __iter__(self) -> Iterator[Event]: ...

findings = lazy_module("kafkalog_cli.log.findings")  # the finding kinds, when there are some

BOOL_TEXT = ("false", "true")
FLUSH_LINES = 32
FLUSH_BYTES = 256 * 1024
FAST_CHUNK = 8 * 1024 * 1024

def kafka_version(text: str) -> Tuple[int, ...]:
    """A --kafka-format value as a comparable tuple: "4.10" -> (4, 10), "3.x" -> (3, 0)."""
    return tuple(int(p) if p.isdigit() else 0 for p in text.split("."))


JAVA_TOOL = (4, 3)  # the first kafka-dump-log.sh rewritten in Java (DumpLogSegments.java)


# DumpLogSegments prints LeaderChange control records as JSON, and the coordinators' records
# through CoordinatorRecordMessageParser (the transaction log as JSON too), from Kafka 4.1
LEADER_CHANGE_JSON = COORDINATOR_JSON = (4, 1)


def java_tool(kafka_format: str) -> bool:
    return kafka_version(kafka_format) >= JAVA_TOOL


class DumpOptions:
    def __init__(self, deep: bool = False, print_data: bool = False, skip_metadata: bool = False,
                 key_decoder: decoders.Decoder = "string",
                 value_decoder: decoders.Decoder = "string", iso: bool = False,
                 kafka_format: str = "4.2", report_trailing: bool = True,
                 parser: Optional[Parser] = None) -> None:
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
    def __init__(self, out: BinaryIO, err: TextIO, opts: DumpOptions) -> None:
        self.out = out          # binary stream
        self.err = err          # text stream
        self.opts = opts
        self._lines: List[str] = []     # text lines not yet encoded
        self._chunks: List[bytes] = []  # encoded output not yet written
        self._pending = 0
        self.path: Optional[str] = None
        self.buf: Optional[memoryview] = None
        self.found_invalid = False  # set by the writer itself for records it cannot render
        self._problems: List[Finding] = []
        self._java = java_tool(opts.kafka_format)

    # -- plumbing ------------------------------------------------------------------------
    def _encode_lines(self) -> None:
        if self._lines:
            self._lines.append("")
            chunk = "\n".join(self._lines).encode("utf-8", "replace")
            self._chunks.append(chunk)
            self._pending += len(chunk)
            # emptied in place: a writer's loop may hold ``self._lines.append`` across a flush
            # (a warning flushes), and its next lines must not go to a list nobody writes
            self._lines.clear()

    def put_bytes(self, data: bytes) -> None:
        """Add already encoded output (whole lines), keeping the order with text lines."""
        self._encode_lines()
        self._chunks.append(data)
        self._pending += len(data)

    def _write_chunks(self) -> None:
        self._encode_lines()
        if self._chunks:
            self.out.write(b"".join(self._chunks) if len(self._chunks) > 1 else self._chunks[0])
            self._chunks = []
            self._pending = 0

    def flush(self) -> None:
        self._write_chunks()
        self.out.flush()

    def _maybe_flush(self) -> None:
        if len(self._lines) >= FLUSH_LINES or self._pending >= FLUSH_BYTES:
            self._write_chunks()

    def bad_record(self, offset: int, error: str) -> None:
        """A control record that Kafka would refuse (``error``: why, from
        format.validity.control_record_error): said on stderr, and the run's exit status
        becomes 1."""
        self.found_invalid = True
        self.warn("%s: %s" % (self.path, control_record_problem(offset, error)))

    def ignored(self, path: str) -> None:
        """A file of a kind nobody reads, met in a directory: named on stderr, as Kafka does."""
        self.flush()
        self.err.write("Ignoring unknown file %s\n" % path)
        self.err.flush()

    def warn(self, message: str) -> None:
        self.flush()
        self.err.write("kafkalog: %s\n" % message)
        self.err.flush()

    def _ts(self, ms: int) -> str:
        """An epoch-ms value, with its UTC time beside it under --timestamps iso."""
        if self.opts.iso:
            iso = decoders.iso_time(ms)
            if iso is not None:
                return "%d (%s)" % (ms, iso)
        return str(ms)

    # -- events ----------------------------------------------------------------------------
    def segment(self, reader: Events) -> None:
        """Write one segment file: the events of ``reader`` (a log.read.SegmentReader)."""
        for note in reader.notes:
            self.warn(note.message)
        self.begin_file(printable_name(reader.log.path), reader.base, reader.log.buf)
        if names.lifecycle_suffix(reader.log.path) == names.DELETED:
            self.deleted_file()
        first_match = reader.seek is not None
        for event in reader:
            if isinstance(event, BatchRead):
                if event.first:
                    self.batch(event.batch, event.records)
                    if first_match:
                        self.flush()  # the first match at once: the rest may take a scan
                        first_match = False
                elif event.records is not None:  # a further chunk: records are shown
                    self.records(event.batch, event.records)
            elif isinstance(event, BatchProblem):
                if event.kind == MISPLACED:
                    pass  # said once for its stretch (MISPLACED_STRETCH)
                elif event.kind == MISPLACED_STRETCH:
                    self.warn("%s: the batch at position %d: %s"
                              % (self.path, event.batch.position, event.message))
                elif event.kind == NOT_DECODED:
                    self.records_not_decoded(event.batch, reader.log.batch_limit)
                elif event.kind == CONTROL:
                    pass  # each malformed control record is said where its record is written
                else:
                    self.record_error(event.batch, event.message)
            elif isinstance(event, BytesProblem):
                self.invalid(event.item, event.counted)
            else:
                self.warn(event.message)
        self.end_file()

    def begin_file(self, path: str, base_offset: int,
                   buf: Optional[memoryview] = None) -> None:
        """Start a file; ``buf`` is its bytes, for writers that render from them directly."""
        self.path = path
        self.buf = buf

    def deleted_file(self) -> None:
        """The file begun is a `.log.deleted`: a segment UnifiedLog.deleteSegmentFiles renamed
        (retention, a log start offset moved, the cleaner's swap) and removes after
        file.delete.delay.ms. Its records are shown, and said to be out of the log."""
        self.warn("note: " + deleted_note(self.path or ""))

    def fast_path(self) -> Optional[FastRun]:
        """None, or a function(log, pos, end, max_bytes, prev_last) -> (new pos, prev_last)
        that writes a run of batches faster than ``batch`` one by one would, stopping before a
        batch whose last offset is not above ``prev_last``."""
        return None

    def fast_records_path(self) -> Optional[FastRecordsRun]:
        """None, or a function(log, pos, end, max_bytes, prev_last, reach_last) -> (new pos,
        prev_last) that writes a run of batches with their records (as ``batch`` and
        ``records`` would), stopping before a batch whose last offset is not above ``prev_last``
        or is above ``reach_last``, and before any batch it cannot write as they would."""
        return None

    def batch(self, batch: Batch, recs: Optional[Records]) -> None:
        """A batch's line(s), with the first chunk of its records (None: not shown)."""
        raise NotImplementedError

    def records(self, batch: Batch, recs: Records) -> None:
        """A further chunk of the records of the batch last given to ``batch``."""
        raise NotImplementedError

    def records_not_decoded(self, batch: Batch, limit: int) -> None:
        """A valid batch whose records inflate past ``limit`` bytes: kept (its CRC holds, and
        the broker never looks inside), its records not shown."""
        self.warn("%s: records of the batch at position %d (offsets %d-%d) not decoded: they "
                  "inflate past %d bytes (raise --max-message-size)"
                  % (self.path, batch.position, batch.base_offset, batch.last_offset, limit))

    def record_error(self, batch: Batch, message: str) -> None:
        self.warn("%s: records of the batch at position %d (offset %d) cannot be read: %s"
                  % (self.path, batch.position, batch.base_offset, message))

    def invalid(self, inv: InvalidBytes, counted: bool) -> None:
        if counted:
            self.warn("%s: %d invalid bytes at position %d: %s" % (self.path, inv.size,
                                                                   inv.position,
                                                                   inv.reason))

    def end_file(self) -> None:
        self.buf = None
        self._maybe_flush()

    # -- index, snapshot and checkpoint files ----------------------------------------------
    def begin_aux(self, path: str) -> None:
        """Start a file that is not a log (an index, a snapshot, a checkpoint...)."""
        self.path = path
        self._lines.append("Dumping %s" % path)

    def entry(self, kind: str, fields: Dict[str, Any]) -> None:
        """One entry of such a file: ``fields`` in the order they print."""
        self._lines.append(entry_text(kind, fields, self.opts.kafka_format))
        self._maybe_flush()

    def note(self, text: str) -> None:
        """A line Kafka's tool prints about a file (``<file> is empty.``)."""
        self._lines.append(text)

    def problems(self, problems: Sequence[Finding]) -> None:
        """Findings about the current file, reported at the end of the run (text) or at once."""
        self._problems.extend(problems)

    def unreadable(self, problem: Finding) -> None:
        """A file that cannot be read as its kind: one line on stderr, at once."""
        self.warn("%s: %s" % (problem.file, problem.message))

    def finish(self) -> None:
        self.flush()
        self._print_problems()

    def _print_problems(self) -> None:
        """Kafka's end-of-run summaries for index mismatches and time index errors, in its
        order and wording; any other finding as a line of its own."""
        if not self._problems:  # nothing to group: findings (the kinds) is not imported
            self.err.flush()
            return
        by_kind: Dict[str, List[Finding]] = {}
        for p in self._problems:
            by_kind.setdefault(p.kind, []).append(p)
        err = self.err
        # Each summary is a map keyed by the file's absolute path, printed in the map's order:
        # a java.util.HashMap in the Java tool (4.3+), a Scala mutable.HashMap before.
        # DumpLogSegments.dumpIndex: the Java tool keeps one mismatch per index offset, highest
        # first (a TreeMap in reverse order); the Scala tool prepends each to a List.
        grouped = ((findings.OFFSET_MISMATCH, "Mismatches in :%s", not self._java),
                   (findings.TIMESTAMP_MISMATCH, "Found timestamp mismatch in :%s", False),
                   (findings.TIMESTAMP_OUT_OF_ORDER, "Found out of order timestamp in :%s",
                    False),
                   (findings.OFFSET_NOT_FOUND,
                    "The following indexed offsets are not found in :%s" if self._java
                    else "The following indexed offsets are not found in the log.", False))
        for kind, header, reverse in grouped:
            # every problem is a call on the map (computeIfAbsent; the Scala tool's put for an
            # offset index mismatch), but the Scala tool puts a time index's list once
            once = not self._java and kind != findings.OFFSET_MISMATCH
            files = self._map_order(by_kind.pop(kind, []), once)
            for path, items in files:
                err.write((header % path if "%s" in header else header) + "\n")
                if kind == findings.OFFSET_MISMATCH and self._java:
                    items = sorted({p.fields["index_offset"]: p for p in items}.values(),
                                   key=lambda p: -p.fields["index_offset"])
                indent = "" if kind == findings.OFFSET_NOT_FOUND else "  "
                for p in (reversed(items) if reverse else items):
                    err.write("%s%s\n" % (indent, p.message))
        for items in by_kind.values():
            for p in items:
                err.write("kafkalog: %s: %s\n" % (p.file, p.message))
        err.flush()

    def _map_order(self, problems: Sequence[Finding],
                   once: bool = False) -> List[Tuple[str, List[Finding]]]:
        """[(absolute path, its problems)] in the iteration order of DumpLogSegments' map of
        them, into which each problem was put (``once``: each file once)."""
        files: Dict[str, List[Finding]] = {}
        puts: List[str] = []
        for p in problems:
            path = os.path.abspath(p.file)
            files.setdefault(path, []).append(p)
            puts.append(path)
        return [(path, files[path]) for path in map_order(list(files) if once else puts,
                                                         self._java)]


def map_order(calls: List[str], java: bool) -> List[str]:
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


def _by_file(problems: Sequence[Finding]) -> ItemsView[str, List[Finding]]:
    files: Dict[str, List[Finding]] = {}
    for p in problems:
        files.setdefault(p.file, []).append(p)
    return files.items()


def _optional_long(value: Optional[int]) -> str:
    return "OptionalLong.empty" if value is None else "OptionalLong[%d]" % value


def entry_text(kind: str, f: Dict[str, Any], kafka_format: str) -> str:
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


def deleted_note(path: str) -> str:
    """The note on a `.log.deleted` file a dump shows."""
    return ("%s is a deleted segment (renamed .deleted by retention or the log cleaner; "
            "the broker removes it after file.delete.delay.ms): its records are no longer in the "
            "log" % path)


# -- control records ---------------------------------------------------------------------------

def control_text(key: Optional[bytes], value: Optional[bytes],
                 kafka_format: str) -> str:
    """What kafka-dump-log appends to the line of a control record that is well formed
    (format.validity.control_record_error finds nothing wrong with it)."""
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
    if type_id == control.LEADER_CHANGE and kafka_version(kafka_format) >= LEADER_CHANGE_JSON:
        body = control.kraft_control_json(type_id, value)
        return " LeaderChange: %s" % json.dumps(body, separators=(",", ":"), allow_nan=False)
    return " controlType: %s(%d)" % (control.control_type_name(type_id), type_id)


def control_fields(key: Optional[bytes], value: Optional[bytes]) -> Dict[str, Any]:
    """The details of a well-formed control record for JSON output."""
    type_id = control.control_type(key)
    out: Dict[str, Any] = {"controlType": control.control_type_name(type_id),
                           "controlTypeId": type_id}
    if type_id in (control.ABORT, control.COMMIT):
        out["coordinatorEpoch"] = control.end_txn_marker(value)[1]
    elif type_id in control.kraft_control_names():
        out["data"] = control.kraft_control_json(type_id, value)
    return out
