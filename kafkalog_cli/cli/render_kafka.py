"""`dump --format kafka`: kafka-dump-log.sh's lines, byte for byte, for each release's layout
(``--kafka-format``), with the C renderer of plain batches (``_kafkatext``) where it is built."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..format.crc import crc32c
from ..format import codecs
from ..format.errors import CorruptRecordError
from ..format.records import LOG_OVERHEAD, RECORD_CHUNK, V2_OVERHEAD, record_sequence
from ..format.validity import control_record_error
from ..log import names
from . import decoders
from .render import BOOL_TEXT, FAST_CHUNK, FLUSH_BYTES, Writer, control_text, map_order

if TYPE_CHECKING:
    from types import ModuleType
    from typing import BinaryIO, Callable, Dict, Iterable, List, Optional, TextIO, Tuple

    from ..format.records import Batch, Records
    from ..format.scan import InvalidBytes
    from ..log.read import FastRecordsRun, FastRun
    from ..log.segment import LogFile
    from .render import DumpOptions

    # step(view, at, n, file position of view) -> position in view where it stopped
    Step = Callable[[memoryview, int, int, int], int]

# The optional C renderer of kafka text (built from _kafkatext.c); KAFKALOG_PURE_PYTHON=1
# forces the Python code below, so tests can check both.
_kafkatext: Optional[ModuleType] = None
if not os.environ.get("KAFKALOG_PURE_PYTHON"):
    try:
        from . import _kafkatext  # type: ignore[attr-defined,no-redef]  # a C module without stub
    except ImportError:  # pragma: no cover - depends on the build
        _kafkatext = None


def log_header(path: str, base_offset: int) -> str:
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

    def __init__(self, out: BinaryIO, err: TextIO, opts: DumpOptions) -> None:
        super().__init__(out, err, opts)
        self._chunk = bytearray()  # the buffer _chunk_at reuses, of FAST_CHUNK bytes once read
        # (absolute path, [(a, b), ...]) per file
        self._nonconsecutive: List[Tuple[str, List[Tuple[int, int]]]] = []
        self._pairs: List[Tuple[int, int]] = []  # the current file's, in _nonconsecutive
        self._last: Optional[int] = None
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
        # (log, file position, length) of what _chunk holds
        self._chunk_span: Optional[Tuple[LogFile, int, int]] = None
        self._inflater: Optional[codecs.Inflater] = None
        # ... and record lines with a parser's payloads, for a parser that gives them by batch
        self._c_parser_records = (native if opts.parser is not None
                                  and opts.parser.payloads is not None else None)

    def begin_file(self, path: str, base_offset: int,
                   buf: Optional[memoryview] = None) -> None:
        super().begin_file(path, base_offset, buf)
        self._lines.append("Dumping %s" % path)
        self._lines.append(log_header(path, base_offset))
        self._pairs = []
        self._last = -1 if self._java else None
        self._nonconsecutive.append((os.path.abspath(path), self._pairs))
        self._chunk_span = None

    def fast_path(self) -> Optional[FastRun]:
        """A function that prints a run of batches at once, where this dump allows it."""
        return None if self._c_runs is None else self._fast_batches

    def fast_records_path(self) -> Optional[FastRecordsRun]:
        """A function that prints a run of batches with their records at once, where this
        dump allows it."""
        return None if self._c_deep is None else self._fast_deep

    def _chunk_at(self, log: LogFile, pos: int, end: int, fresh: bool) -> Tuple[int, int]:
        """(file position, length) of the file's bytes held in the reused buffer, which holds
        ``pos``: read there anew (at most FAST_CHUNK bytes, up to ``end``) unless it already
        holds ``pos`` and ``fresh`` is false. A run that ends one batch before a batch the
        fast path does not take resumes in the bytes already read."""
        if not self._chunk:
            self._chunk = bytearray(FAST_CHUNK)
        span = self._chunk_span
        if fresh or span is None or span[0] is not log or not span[1] <= pos < span[1] + span[2]:
            n = log.read_into(memoryview(self._chunk)[:min(FAST_CHUNK, end - pos)], pos)
            span = self._chunk_span = (log, pos, n)
        return span[1], min(span[2], end - span[1])

    def _fast_run(self, log: LogFile, pos: int, end: int, max_bytes: int, step: Step) -> int:
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

    def _held_whole(self, at: int, n: int) -> bool:
        """Does the buffer hold the whole entry at ``at`` (of its ``n`` bytes read), or one
        whose size field no v2 batch has (the fast path takes v2 batches only)?"""
        if n - at < LOG_OVERHEAD:
            return False
        size = int.from_bytes(self._chunk[at + 8:at + LOG_OVERHEAD], "big", signed=True)
        return size < V2_OVERHEAD - LOG_OVERHEAD or at + LOG_OVERHEAD + size <= n

    def _fast_batches(self, log: LogFile, pos: int, end: int, max_bytes: int,
                      prev_last: int) -> Tuple[int, int]:
        """Print the run of valid v2 batches from ``pos`` whose last offsets rise above
        ``prev_last`` in one go; return where it stopped and the highest last
        offset printed (or ``prev_last``).

        The file is read in chunks into one reused buffer. The caller goes on with ``batch``
        for the entry at the position returned (one the fast path does not take, or one larger
        than the buffer).
        """
        runs = self._c_runs
        assert runs is not None  # fast_path gives this function only then
        last = [prev_last]

        def step(view: memoryview, at: int, n: int, start: int) -> int:
            data, used, last[0] = runs.batch_lines(view, at, n, n - at, crc32c, start, last[0])
            if data:
                self.put_bytes(data)
                self._maybe_flush()
            return used

        return self._fast_run(log, pos, end, max_bytes, step), last[0]

    def _fast_deep(self, log: LogFile, pos: int, end: int, max_bytes: int, prev_last: int,
                   reach_last: int) -> Tuple[int, int]:
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

        def inflate(codec: int, data: codecs.Bytes) -> codecs.Inflated:
            return inflate_any(codec, data, batch_limit, 2)

        deep = self._c_deep
        assert deep is not None  # fast_records_path gives this function only then
        last = [prev_last]
        print_data = self.opts.print_data

        def step(view: memoryview, at: int, n: int, start: int) -> int:
            data, used, last[0], self._last = deep.deep_lines(
                view, at, n, n - at, crc32c, start, last[0], reach_last, self._last,
                log.max_message_size, print_data, inflate, CorruptRecordError, FLUSH_BYTES,
                RECORD_CHUNK)
            if data:
                self.put_bytes(data)
                self._maybe_flush()
            return used

        return self._fast_run(log, pos, end, max_bytes, step), last[0]

    def batch(self, b: Batch, recs: Optional[Records]) -> None:
        native = self._c_batch_line
        if native is not None and b.magic == 2 and b.codec <= 4 and self.buf is not None:
            self.put_bytes(native.batch_line(self.buf, b.position, b.is_valid))
        else:
            self._lines.append(self._batch_line(b))
        if recs is not None:
            self.records(b, recs)
        else:
            self._maybe_flush()

    def records(self, b: Batch, recs: Records) -> None:
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

    def _batch_line(self, b: Batch) -> str:
        ts = self._ts(b.max_timestamp)
        count = b.count
        if count is not None:  # a v2 batch (magic 2 and above); a legacy entry has none
            dh = b.delete_horizon_ms
            return (
                "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d "
                "producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %s "
                "isControl: %s deleteHorizonMs: %s position: %d %s: %s size: %d magic: %d "
                "compresscodec: %s crc: %d isvalid: %s" % (
                    b.base_offset, b.last_offset, count, b.base_sequence, b.last_sequence,
                    b.producer_id, b.producer_epoch, b.partition_leader_epoch,
                    BOOL_TEXT[b.is_transactional], BOOL_TEXT[b.is_control],
                    "OptionalLong.empty" if dh is None else "OptionalLong[%s]" % self._ts(dh),
                    b.position, b.timestamp_type_name, ts, b.size, b.magic, b.codec_name, b.crc,
                    BOOL_TEXT[b.is_valid]))
        return ("offset: %d position: %d %s: %s size: %d magic: %d compresscodec: %s crc: %d "
                "isvalid: %s" % (b.last_offset, b.position, b.timestamp_type_name, ts, b.size,
                                 b.magic, b.codec_name, b.crc, BOOL_TEXT[b.is_valid]))

    def _track_offsets(self, offsets: List[int]) -> None:
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

    def _v2_lines(self, b: Batch, recs: Records) -> None:
        """The hot path: data records of a v2 batch with metadata, plain epoch timestamps."""
        if self._c_records is not None:
            self.put_bytes(self._c_records.record_lines(
                recs.offsets, recs.timestamps, recs.keys, recs.values, recs.headers,
                b.base_offset, b.base_sequence, b.timestamp_type_name, self.opts.print_data))
            return
        headers = recs.headers or ()  # a v2 batch's: a list
        add = self._lines.append
        head = "| offset: "
        tl = " %s: " % b.timestamp_type_name
        print_data = self.opts.print_data
        kt = self._key_text
        vt = self._value_text
        base_seq = b.base_sequence
        base_off = b.base_offset
        for off, ts, k, v, h in zip(recs.offsets, recs.timestamps, recs.keys, recs.values,
                                    headers):
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

    def _parser_lines(self, b: Batch, recs: Records) -> None:
        """_generic_lines' output for data records of a v2 batch through a parser
        (--cluster-metadata-decoder...), with metadata and plain epoch timestamps."""
        parser = self.opts.parser
        assert parser is not None  # records() comes here with one only
        native, payloads = self._c_parser_records, parser.payloads
        if native is not None and payloads is not None:  # set together (__init__)
            self.put_bytes(native.record_lines(
                recs.offsets, recs.timestamps, recs.keys, recs.values, recs.headers,
                b.base_offset, b.base_sequence, b.timestamp_type_name, True,
                payloads(recs.offsets, recs.values)))
            return
        add = self._lines.append
        parse = parser.text
        head = "| offset: "
        tl = " %s: " % b.timestamp_type_name
        base_seq = b.base_sequence
        base_off = b.base_offset
        for off, ts, k, v, h in zip(recs.offsets, recs.timestamps, recs.keys, recs.values,
                                    recs.headers or ()):  # a v2 batch's: a list
            kt, vt = parse(off, k, v)
            add(f"{head}{off}{tl}{ts} keySize: {-1 if k is None else len(k)} valueSize: "
                f"{-1 if v is None else len(v)} sequence: "
                f"{record_sequence(base_seq, off - base_off)} headerKeys: "
                f"[{','.join([x[0] for x in h]) if h else ''}]"
                f"{'' if kt is None else ' key: ' + kt}{'' if vt is None else ' payload: ' + vt}")

    def _generic_lines(self, b: Batch, recs: Records) -> None:
        """Every other record line: legacy, control, --skip-record-metadata, iso timestamps."""
        add = self._lines.append
        opts = self.opts
        tl = b.timestamp_type_name
        v2 = b.magic >= 2
        # a v2 batch's headers; a legacy entry's messages' own CRCs and verdicts
        headers, valids, crcs = recs.headers or (), recs.valids or (), recs.crcs or ()
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
                        seq, ",".join(x[0] for x in headers[i])))
                else:
                    parts.append(" isValid: %s crc: %d%s" % (
                        BOOL_TEXT[valids[i]], crcs[i], "" if self._java else "}"))
                if b.is_control:
                    error = control_record_error(k, v)
                    if error is None:
                        parts.append(control_text(k, v, opts.kafka_format))
                    else:
                        parts.append(" controlType: INVALID")
                        self.bad_record(off, error)
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

    def invalid(self, inv: InvalidBytes, counted: bool) -> None:
        super().invalid(inv, counted)
        if not counted:
            return
        path = self.path
        assert path is not None  # begin_file named it
        name = os.path.basename(path)
        if inv.at_end:
            self._lines.append("Found %d invalid bytes at the end of %s" % (inv.size, name))
        else:
            self._lines.append("Skipped %d invalid bytes at position %d of %s"
                               % (inv.size, inv.position, name))

    def finish(self) -> None:
        self.flush()
        self._print_problems()
        # DumpLogSegments' map of each file's non-consecutive pairs: a HashMap of TreeMaps
        # (sorted by offset) in the Java tool, a Scala mutable.HashMap of Lists (each pair
        # prepended) before
        by_path: Dict[str, List[Tuple[int, int]]] = {}
        puts: List[str] = []
        for path, pairs in self._nonconsecutive:
            if pairs:
                by_path.setdefault(path, []).extend(pairs)
                puts.extend([path] * len(pairs))
        for path in map_order(puts, self._java):
            pairs = by_path[path]
            ordered: Iterable[Tuple[int, int]]
            if self._java:
                ordered = sorted(dict(pairs).items())
            else:
                ordered = reversed(pairs)
            self.err.write("Non-consecutive offsets in %s\n" % path)
            for a, b in ordered:
                self.err.write("  %d is followed by %d\n" % (a, b))
        self.err.flush()
