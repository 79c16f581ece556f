"""Appending records to a partition as a producer and a broker would together: records are
grouped into batches as a producer's RecordAccumulator groups them (batch.size, and a record
count), each batch is given the next offsets (UnifiedLog.append assigns them from the log end
offset), the producer's sequence numbers and, for LogAppendTime, the broker's clock, then
encoded in the message format asked for and written by PartitionWriter.

The one entry point is ``append_records``; nothing here prints: flushes are reported through a
callback and the outcome is returned.
"""

from __future__ import annotations

import os
from operator import attrgetter
from typing import Any, Callable, Iterable, Iterator, List, Optional, Tuple, Union

from ..format import codecs
from ..format.control import ABORT, COMMIT
from ..format.encode import (Record, encode_control_batch, encode_legacy, encode_lines,
                             encode_v2_area, encode_v2_batch, encode_v2_record)
from ..format.records import LOG_APPEND_TIME
from ..format.speedups import speedups
from .append import PartitionWriter, WriteFailed, now_ms
from .append_types import (SEQUENCE_MODULUS, V2_BATCH_OVERHEAD, AppendResult, AppendSettings,
                           InputError, Item, Marker, ProducedRecord, RecordRun)
from .partition import Partition
from .producer_state import (CoordinatorFencedError, EndMarker, InvalidProducerEpochError,
                             OutOfOrderSequenceError, ProducerStateEntry)

# its C mirror (format/speedups.py), unless KAFKALOG_PURE_PYTHON or a build without it
encode_lines = getattr(speedups, "encode_lines", encode_lines)

# (encoded bytes, last offset, max timestamp) of one log entry
Entry = Tuple[bytes, int, int]

# The producer fields a batch is written with: (producer id, epoch, transactional)
ProducerKey = Tuple[int, int, bool]
NO_PRODUCER: ProducerKey = (-1, -1, False)


def encode_entries(records: List[Record], base_offset: int, settings: AppendSettings,
                   producer: ProducerKey, sequence: int, append_time: Optional[int],
                   leader_epoch: int = -1) -> List[Entry]:
    """The log entries of one batch of ``records`` at ``base_offset``: one v2 batch
    (DefaultRecordBatch) of ``producer`` from ``sequence``, carrying ``leader_epoch``; for
    magic 0/1, one wrapper message of them all when compressed, else a message each
    (LegacyRecord: uncompressed messages are entries of their own). ``append_time``: the
    broker's time for LogAppendTime, else None."""
    codec, magic, ts_type = settings.codec_id, settings.magic, settings.timestamp_type_id

    def max_ts(batch: List[Record]) -> int:
        if magic == 0:
            return -1  # magic 0 has no timestamps
        return append_time if append_time is not None else max(map(_timestamp, batch))

    last = base_offset + len(records) - 1
    if magic == 2:
        producer_id, epoch, transactional = producer
        return [(encode_v2_batch(records, base_offset, codec, ts_type, append_time, producer_id,
                                 epoch, sequence, transactional,
                                 partition_leader_epoch=leader_epoch), last, max_ts(records))]
    if codec == codecs.NONE:
        return [(encode_legacy([r], base_offset + i, magic, codec, ts_type, append_time),
                 base_offset + i, max_ts([r])) for i, r in enumerate(records)]
    return [(encode_legacy(records, base_offset, magic, codec, ts_type, append_time), last,
             max_ts(records))]


_timestamp = attrgetter("timestamp")


def _next_sequence(sequence: int, n: int = 1) -> int:
    return (sequence + n) % SEQUENCE_MODULUS


class RecordAppender:
    """Groups records into batches (one producer, epoch and transactional flag a batch),
    checks each producer's epochs and sequences as the broker checks a client's append
    (ProducerAppendInfo, origin CLIENT) and a coordinator's markers, encodes the batches and
    writes them with a PartitionWriter (which keeps the producer state, the transaction index
    and the leader epochs), and fsyncs as ``settings.flush_messages`` says, calling
    ``on_flush(last offset)`` after each fsync that made new records durable."""

    def __init__(self, writer: PartitionWriter, settings: AppendSettings,
                 on_flush: Optional[Callable[[int], None]] = None) -> None:
        self.writer = writer
        self.settings = settings
        self.on_flush = on_flush
        self.pending: List[Record] = []
        self.pending_bytes = 0
        self.pending_key = NO_PRODUCER
        self.pending_sequence = -1  # the base sequence of the batch being gathered
        self.base_sequence = settings.base_sequence  # for the settings' producer's first batch
        self.leader_epoch = -1
        if settings.magic == 2:
            self.leader_epoch = writer.leader_epoch_for_append(settings.leader_epoch)
        self.first: Optional[int] = None
        self.count = 0
        self.unflushed = 0
        self.lines_gathered = 0  # append_lines: the records of the batch being gathered
        self.lines_taken = 0  # append_lines: the lines (records) taken so far
        # append_jsonl's batch being gathered (plain records, no producer), as its records area
        # (``pending`` is then empty): the encoded records, how many, about how many bytes
        # (Record.size_estimate), the first record's timestamp and the largest
        self.area: List[bytes] = []
        self.area_count = 0
        self.area_bytes = 0
        self.area_base_ts = 0
        self.area_max_ts = 0

    def _too_large(self, size: int) -> InputError:
        """A record of ``size`` bytes (about) in a batch would pass max.message.bytes: the
        broker refuses the batch (RecordTooLargeException), a producer the record (its
        max.request.size check)."""
        return InputError("a record of about %d bytes in a batch of at least %d bytes is "
                          "larger than max.message.bytes %d (--max-message-bytes): the broker "
                          "refuses it (RecordTooLargeException)"
                          % (size, size + V2_BATCH_OVERHEAD, self.settings.max_message_bytes))

    def _check_batch(self, data: bytes) -> None:
        """An encoded batch over max.message.bytes is refused, as the broker refuses it."""
        if len(data) > self.settings.max_message_bytes:
            raise InputError("a batch of %d bytes is larger than max.message.bytes %d "
                             "(--max-message-bytes): the broker refuses it "
                             "(RecordTooLargeException)"
                             % (len(data), self.settings.max_message_bytes))

    # -- producers ---------------------------------------------------------------------------
    def _produced(self, item: Union[Record, ProducedRecord]) -> ProducedRecord:
        """A plain Record as the settings' producer's (None: no producer)."""
        if isinstance(item, ProducedRecord):
            if self.settings.magic < 2:
                raise InputError("producer fields need message format 2 (--magic 2)")
            return item
        s = self.settings
        if s.producer_id < 0:
            return ProducedRecord(item, -1)
        sequence = None
        if self.base_sequence >= 0:
            sequence, self.base_sequence = self.base_sequence, -1
        return ProducedRecord(item, s.producer_id, s.producer_epoch if s.producer_epoch >= 0
                              else None, sequence, s.transactional)

    def _current_epoch(self, producer_id: int) -> int:
        """The producer's epoch: its batch being gathered's, else the partition's (-1: none)."""
        if self.pending and self.pending_key[0] == producer_id:
            return self.pending_key[1]
        return self._entry(producer_id).epoch

    def _entry(self, producer_id: int) -> ProducerStateEntry:
        """The producer's state in the partition (a new producer's when it has none)."""
        entry = self.writer.producers.producers.get(producer_id)
        return entry if entry is not None else ProducerStateEntry(producer_id)

    def _batch_sequence(self, item: ProducedRecord, epoch: int) -> int:
        """The first sequence of a new batch of ``item``'s producer at ``epoch`` (its own, or
        the producer's next: 0 for a new epoch), checked as the broker checks a client's batch
        (ProducerState.check_client_batch) and refused, as appendDataBatch refuses it, when
        it is not transactional while the producer has a transaction open."""
        pid, seq = item.producer_id, item.sequence
        entry = self._entry(pid)
        if seq is None:
            seq = 0 if epoch != entry.epoch else _next_sequence(entry.last_seq)
        try:
            self.writer.producers.check_client_batch(pid, epoch, seq, self.writer.next_offset)
        except (InvalidProducerEpochError, OutOfOrderSequenceError) as e:
            raise InputError(str(e)) from None
        if entry.current_txn_first_offset is not None and not item.transactional:
            raise InputError("Expected transactional write from producer %d at offset %d: it "
                             "has an open transaction (InvalidTxnState)"
                             % (pid, self.writer.next_offset))
        return seq

    # -- gathering -------------------------------------------------------------------------------
    def add(self, item: Item) -> None:
        if type(item) is Record and self.settings.producer_id < 0:
            self._add_plain(item)
            return
        if isinstance(item, RecordRun):
            if self.settings.producer_id < 0:
                self._add_plain_run(item)
                return
            for record, line in zip(item, item.lines):
                try:
                    self.add(record)
                except InputError as e:
                    e.line = line  # the record's own line, not the run's last
                    raise
            return
        if isinstance(item, Marker):
            self.write_pending()
            self.write_marker(item)
            return
        produced = self._produced(item)
        record, pid = produced.record, produced.producer_id
        epoch = -1
        if pid >= 0:
            epoch = (produced.producer_epoch if produced.producer_epoch is not None
                     else max(self._current_epoch(pid), 0))
        key: ProducerKey = (pid, epoch, produced.transactional) if pid >= 0 else NO_PRODUCER
        size = record.size_estimate()
        s = self.settings
        if size + V2_BATCH_OVERHEAD > s.max_message_bytes:
            raise self._too_large(size)
        if self.pending and key == self.pending_key:
            if pid >= 0:
                expected = _next_sequence(self.pending_sequence, len(self.pending))
                if produced.sequence is not None and produced.sequence != expected:
                    # within a batch the sequences follow on: the record would start a batch
                    # out of order (ProducerAppendInfo.checkSequence)
                    raise InputError("Out of order sequence number for producer %d at offset "
                                     "%d: %d (incoming seq. number), %d (current end sequence "
                                     "number)" % (pid, self.writer.next_offset + len(self.pending),
                                                  produced.sequence, expected - 1))
            if self.pending_bytes + size > s.batch_bytes:
                self.write_pending()  # this record would overflow the batch: it opens the next
        else:
            self.write_pending()  # another producer, epoch or transactional flag: a new batch
        if not self.pending:
            self.pending_key = key
            self.pending_sequence = self._batch_sequence(produced, epoch) if pid >= 0 else -1
        self.pending.append(record)
        self.pending_bytes += size
        if len(self.pending) >= s.batch_records or self.pending_bytes >= s.batch_bytes:
            self.write_pending()  # full: written now, so that bad input later cannot drop it

    def _add_plain(self, record: Record) -> None:
        """``add`` of a plain Record when the settings name no producer: what ``add`` does
        for it, without its producer checks."""
        size = record.size_estimate()
        if size + V2_BATCH_OVERHEAD > self.settings.max_message_bytes:
            raise self._too_large(size)
        if self.pending and (self.pending_key != NO_PRODUCER
                             or self.pending_bytes + size > self.settings.batch_bytes):
            self.write_pending()
        if not self.pending:
            self.pending_key = NO_PRODUCER
            self.pending_sequence = -1
        self.pending.append(record)
        self.pending_bytes += size
        if (len(self.pending) >= self.settings.batch_records
                or self.pending_bytes >= self.settings.batch_bytes):
            self.write_pending()  # full: written now, so that bad input later cannot drop it

    def _add_plain_run(self, records: List[Record]) -> None:
        """``_add_plain`` of each of ``records``, in one loop."""
        batch_bytes, batch_records = self.settings.batch_bytes, self.settings.batch_records
        if self.pending and self.pending_key != NO_PRODUCER:
            self.write_pending()
        self.pending_key = NO_PRODUCER
        self.pending_sequence = -1
        pending, pending_bytes = self.pending, self.pending_bytes
        record_limit = self.settings.max_message_bytes - V2_BATCH_OVERHEAD
        for number, record in enumerate(records):
            key, value = record.key, record.value
            size = ((len(key) if key is not None else 0) + (len(value) if value is not None else 0)
                    + 21 if not record.headers else record.size_estimate())
            if size > record_limit:
                self.pending_bytes = pending_bytes  # its batch is dropped, as line by line
                error = self._too_large(size)
                lines = getattr(records, "lines", None)
                error.line = lines[number] if lines else None
                raise error
            if pending and pending_bytes + size > batch_bytes:
                self.pending_bytes = pending_bytes
                self.write_pending()
                pending, pending_bytes = self.pending, 0
            pending.append(record)
            pending_bytes += size
            if len(pending) >= batch_records or pending_bytes >= batch_bytes:
                self.pending_bytes = pending_bytes
                self.write_pending()  # full: written now, so that bad input later cannot drop it
                pending, pending_bytes = self.pending, 0
        self.pending_bytes = pending_bytes
        self.writer.write_out()  # what a read of the input made full is written

    def write_pending(self) -> None:
        if self.area_count:
            self._write_area(self.area, self.area_count, self.area_base_ts, self.area_max_ts,
                             self.settings.timestamp_type_id == LOG_APPEND_TIME)
            self.area, self.area_count, self.area_bytes = [], 0, 0
            return
        if not self.pending:
            return
        base, n = self.writer.next_offset, len(self.pending)
        append_time = now_ms() if self.settings.timestamp_type_id == LOG_APPEND_TIME else None
        entries = encode_entries(self.pending, base, self.settings, self.pending_key,
                                 self.pending_sequence, append_time, self.leader_epoch)
        for data, _, _ in entries:
            self._check_batch(data)
        for data, last_offset, ts in entries:
            if self.settings.magic == 2 and self.pending_key == NO_PRODUCER:
                # no producer state to keep: written with the next run of plain batches
                self.writer.append_plain(data, base, last_offset, ts, self.leader_epoch)
            else:
                self.writer.append(data, last_offset, ts)
        self._written(base, n)
        self.pending, self.pending_bytes = [], 0

    def _written(self, base: int, n: int) -> None:
        if self.first is None:
            self.first = base
        self.count += n
        self.unflushed += n
        if self.settings.flush_messages and self.unflushed >= self.settings.flush_messages:
            self.flush()

    def write_marker(self, marker: Marker) -> None:
        """A COMMIT or ABORT marker batch, checked as ProducerAppendInfo.appendEndTxnMarker
        checks a coordinator's (epoch not older, coordinator epoch not older)."""
        if self.settings.magic < 2:
            raise InputError("transaction markers need message format 2 (--magic 2)")
        pid = marker.producer_id
        entry = self._entry(pid)
        epoch = marker.producer_epoch if marker.producer_epoch is not None else max(entry.epoch, 0)
        base = self.writer.next_offset
        try:
            self.writer.producers.check_marker(pid, epoch, marker.coordinator_epoch, base)
        except (InvalidProducerEpochError, CoordinatorFencedError) as e:
            raise InputError(str(e)) from None
        timestamp = marker.timestamp if marker.timestamp is not None else now_ms()
        data = encode_control_batch(COMMIT if marker.commit else ABORT, base, pid, epoch,
                                    marker.coordinator_epoch, timestamp, self.leader_epoch)
        self.writer.append(data, base, timestamp,
                           EndMarker(not marker.commit, marker.coordinator_epoch, timestamp))
        self._written(base, 1)

    def append_lines(self, chunks: Iterable[Tuple[bytes, int, int]],
                     key: Optional[bytes]) -> None:
        """Append the lines of ``chunks`` ((data, start, end): whole lines of
        ``data[start:end]``, the last of the input maybe without its newline) as plain Records
        of ``key`` (InputLines' ``lines``) stamped with the time each chunk is read, batched
        exactly as ``add`` batches such Records, but encoded a chunk at a time
        (format.encode.encode_lines) with no Record per line. For message format 2 without a
        producer (``lines_fast_path``)."""
        s = self.settings
        lat = s.timestamp_type_id == LOG_APPEND_TIME
        parts: List[bytes] = []
        count = pending = base_ts = max_ts = 0
        self.lines_gathered = 0
        for data, pos, end in self._counted(chunks, lambda: count):
            ts = now_ms()
            while pos < end:
                if not count:
                    base_ts = max_ts = ts
                area, pos, n, pending, full = encode_lines(
                    data, pos, end, key, ts - base_ts, count, pending, s.batch_records,
                    s.batch_bytes)
                if n:
                    parts.append(area)
                    count += n
                    self.lines_taken += n
                    max_ts = max(max_ts, ts)
                if full:
                    self._write_area(parts, count, base_ts, max_ts, lat)
                    parts, count, pending = [], 0, 0
            self.writer.write_out()
        if count:
            self._write_area(parts, count, base_ts, max_ts, lat)

    def _counted(self, chunks: Iterable[Tuple[bytes, int, int]],
                 gathered: Callable[[], int]) -> Iterator[Tuple[bytes, int, int]]:
        """``chunks``, keeping in ``lines_gathered`` how many records the batch being gathered
        holds when the next chunk is asked for (the records an input error drops)."""
        for chunk in chunks:
            yield chunk
            self.lines_gathered = gathered()
        self.lines_gathered = gathered()

    def _write_area(self, parts: List[bytes], count: int, base_ts: int, max_ts: int,
                    log_append_time: bool) -> None:
        """Write the batch of ``count`` plain records whose records area is ``parts``."""
        s = self.settings
        base = self.writer.next_offset
        append_time = now_ms() if log_append_time else None
        data = encode_v2_area(parts[0] if len(parts) == 1 else b"".join(parts), count, base,
                              base_ts, max_ts, s.codec_id, s.timestamp_type_id, append_time,
                              partition_leader_epoch=self.leader_epoch)
        self._check_batch(data)
        self.writer.append_plain(data, base, base + count - 1,
                                 append_time if append_time is not None else max_ts,
                                 self.leader_epoch)
        self._written(base, count)

    @property
    def lines_fast_path(self) -> bool:
        """Can plain Records go through ``append_lines`` or ``append_jsonl`` (message format 2,
        no producer)?"""
        return self.settings.magic == 2 and self.settings.producer_id < 0

    def append_jsonl(self, items: Any) -> None:
        """Append the JSON lines of ``items`` (InputLines of ``jsonl`` read from a stream:
        ``jsonl_chunks``, ``encode_plain``, ``plain_line``, ``jsonl_item``) as ``add`` appends
        the items its iteration gives, to the byte, but with the plain records of a read
        encoded into the batch being gathered at once (``encode_plain``: log/append_input.
        encode_jsonl or its C mirror), no Record made; every other line is read into its item
        (``jsonl_item``) and added as ``add`` adds it. For message format 2 without the
        settings' producer (``lines_fast_path``). An InputError is raised with its line: a
        line's own, and for a batch refused as it is written while plain records are taken,
        the last line of their run (where iteration would have stood)."""
        s = self.settings
        record_limit = s.max_message_bytes - V2_BATCH_OVERHEAD
        encode, plain_line = items.encode_plain, items.plain_line
        number = 0  # the lines taken
        for data, pos, end in items.jsonl_chunks(lambda: number):
            now = now_ms()  # the time of the read: the timestamp of a plain line without one
            run = False  # plain records taken and not yet followed by write_out
            while pos < end:
                area, pos, lines, taken, base_ts, pending, max_ts, full = encode(
                    data, pos, end, now, self.area_base_ts, self.area_count, self.area_bytes,
                    self.area_max_ts, s.batch_records, s.batch_bytes, record_limit, plain_line)
                number += lines
                try:
                    if taken:
                        run = True
                        if self.pending:
                            self.write_pending()  # a producer's batch: a new batch starts
                        self.area.append(area)
                        self.area_count += taken
                        self.area_base_ts, self.area_bytes, self.area_max_ts = (base_ts, pending,
                                                                                max_ts)
                    if full:
                        self.write_pending()
                except InputError as e:
                    if e.line is None:
                        e.line = _run_end(plain_line, data, pos, end, number)
                    raise
                if full or pos == end:
                    continue
                # the line at pos: it makes no plain record, or one encode leaves to us
                nl = data.find(b"\n", pos, end)
                nxt = end if nl < 0 else nl + 1
                number += 1
                record = plain_line(data[pos:end if nl < 0 else nl], now)
                try:
                    if record is not None:
                        run = True
                        self._add_to_area(record, number, True)
                    else:
                        if run:
                            self.writer.write_out()  # as after a run of plain records
                            run = False
                        item = items.jsonl_item(data[pos:nxt], number)
                        if isinstance(item, Record):
                            self._add_to_area(item, number, False)
                        else:
                            self.add(item)
                except InputError as e:
                    if e.line is None:
                        e.line = (number if record is None
                                  else _run_end(plain_line, data, nxt, end, number))
                    raise
                pos = nxt
            if run:
                self.writer.write_out()  # what a read of the input made full is written

    def _add_to_area(self, record: Record, line: int, plain: bool) -> None:
        """Add a Record (no producer) to append_jsonl's batch being gathered, as
        ``_add_plain_run`` adds the record of a plain line (``plain``: another producer's batch
        is written first) or ``_add_plain`` a Record (the size is checked first); InputError
        at ``line`` for a record too large."""
        s = self.settings
        size = record.size_estimate()
        if plain and self.pending:
            self.write_pending()
        if size + V2_BATCH_OVERHEAD > s.max_message_bytes:
            error = self._too_large(size)
            error.line = line
            raise error
        if self.pending or (self.area_count and self.area_bytes + size > s.batch_bytes):
            self.write_pending()  # another producer's batch, or one this record would overflow
        ts = record.timestamp
        if not self.area_count:
            self.area_base_ts = self.area_max_ts = ts
        self.area.append(encode_v2_record(record.key, record.value, ts - self.area_base_ts,
                                          self.area_count, record.headers))
        self.area_count += 1
        self.area_bytes += size
        self.area_max_ts = max(self.area_max_ts, ts)
        if self.area_count >= s.batch_records or self.area_bytes >= s.batch_bytes:
            self.write_pending()  # full: written now, so that bad input later cannot drop it

    def drop_pending(self) -> int:
        """Forget the batch being gathered; how many records it held."""
        dropped = len(self.pending) + self.area_count
        self.pending, self.pending_bytes = [], 0
        self.area, self.area_count, self.area_bytes = [], 0, 0
        return dropped

    def flush(self) -> None:
        self.writer.flush()
        if self.unflushed and self.on_flush is not None:
            self.on_flush(self.writer.next_offset - 1)
        self.unflushed = 0

    def append_all(self, items: Iterable[Item]) -> Tuple[Optional[InputError], int]:
        """Append every item, then write the last batch and flush. An InputError, raised by
        ``items`` or by the checks of an item, ends the input there: the batch being gathered
        is dropped and what was written is flushed. Returns (that error or None, the records
        dropped). An error of the checks takes the line number of ``items.line`` when the
        iterable says where it is. Items that offer ``line_chunks()`` (InputLines of
        ``lines``: values, no item can fail) go through ``append_lines`` when it applies, and
        those whose ``jsonl_stream()`` says so (InputLines of ``jsonl`` read from a stream)
        through ``append_jsonl``."""
        line_chunks = getattr(items, "line_chunks", None)
        if line_chunks is not None and self.lines_fast_path:
            chunks = line_chunks(lambda: self.lines_taken)
            if chunks is not None:
                try:
                    self.append_lines(chunks, getattr(items, "key", None))
                except InputError as e:  # a line too long: its batch is not written
                    self.flush()
                    return e, self.lines_gathered
                self.flush()
                return None, 0
        jsonl_stream = getattr(items, "jsonl_stream", None)
        try:
            if jsonl_stream is not None and self.lines_fast_path and jsonl_stream():
                self.append_jsonl(items)
            else:
                for item in items:
                    try:
                        self.add(item)
                    except InputError as e:
                        if e.line is None:
                            e.line = getattr(items, "line", None)
                        raise
        except InputError as e:
            dropped = self.drop_pending()
            self.flush()
            return e, dropped
        self.write_pending()
        self.flush()
        return None, 0


def _run_end(plain_line: Callable[[bytes, int], Optional[Record]], data: bytes, pos: int,
             end: int, number: int) -> int:
    """The number of the last line of the run of plain records and blank lines at
    ``data[pos:end]`` (``number`` is the line before ``pos``): the line before the first that
    makes no plain record and is not blank, or the last of ``data``."""
    while pos < end:
        nl = data.find(b"\n", pos, end)
        line = data[pos:end if nl < 0 else nl]
        if line.strip() and plain_line(line, 0) is None:
            return number
        number += 1
        pos = end if nl < 0 else nl + 1
    return number


def append_records(directory: str, records: Iterable[Item],
                   settings: Optional[AppendSettings] = None,
                   on_flush: Optional[Callable[[int], None]] = None) -> AppendResult:
    """Append ``records`` (format.encode.Record, ProducedRecord, Marker) to the partition
    ``directory``, created with its log directory when absent, as producers, transaction
    coordinators and a broker would: offsets continue from the log end offset, producers'
    epochs and sequences are checked, segments roll and indexes, producer snapshots, the
    transaction index and the leader-epoch-checkpoint are kept as a broker keeps them
    (PartitionWriter).

    Takes the log directory's lock for the whole run (LockHeld when a broker holds it) and the
    partition's own (AppendError when another kafkalog writes it); AppendError when the active
    segment is damaged (recover first); UsageError for a leader epoch below the partition's
    latest; OSError. ``on_flush(last offset)`` is called after each fsync that made records
    durable. An InputError raised by ``records`` or by the checks of an item stops the run:
    see AppendResult.stopped."""
    settings = settings or AppendSettings()
    partition = Partition(directory)
    os.makedirs(partition.log_dir, exist_ok=True)
    with partition.lock(), PartitionWriter(directory, settings.roll) as writer:
        appender = RecordAppender(writer, settings, on_flush)
        try:
            stopped, dropped = appender.append_all(records)
        except WriteFailed:
            raise
        except OSError as e:
            # a write beside the segment's (a roll's new files, a producer snapshot, the
            # leader-epoch-checkpoint: each whole or absent) failed; the batches are whole
            writer.flush_written()
            raise writer.write_failed(e) from None
        return AppendResult(directory, appender.count, appender.first, writer.next_offset,
                            stopped, dropped)
