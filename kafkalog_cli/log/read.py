"""The one record iterator: reading a segment's batches and records, with the checks every
reader makes, as a stream of events that `dump`, the Spark data source and the Python API
(``Partition.records``) each turn into their own output.

A ``SegmentReader`` walks the .log file of one segment from a start position (the one the
offset and time indexes give, when seeking), batch by batch, in bounded memory. For each batch
it yields ``BatchRead`` events (the batch, then its records a chunk at a time when records are
wanted), and ``BatchProblem``/``BytesProblem``/``Note`` events for what is wrong or worth
saying. It decides what counts as invalid data by the rule of ``format.validity`` (the
broker's, LogSegment.recover and LogValidator): a batch whose CRC fails, whose magic is unknown,
whose records do not decode, whose offsets go back or out of the segment's reach, a control
batch whose records read are no well-formed control records, and bytes that are no batch.
``invalid`` is set once any counted problem is met, but for a malformed control record
(CONTROL): `dump`'s writers judge each control record they render by the same rule.
"""

from __future__ import annotations

import os
from typing import Callable, Generator, Iterator, List, Optional, Sequence, Tuple, Union

from ..errors import InvalidDataError
from ..format.errors import CorruptRecordError, LimitExceededError
from ..format.records import Batch, Records, held_back
from ..format.scan import InvalidBytes
from ..format.validity import (MAX_RELATIVE_OFFSET, Misplaced, OffsetOrder, control_problem,
                               magic_problem)
from . import names
from .files import Found, expand, printable_name
from .seek import Seek, next_bases
from .segment import DEFAULT_MAX_MESSAGE_SIZE, RELEASE_STEP, LogFile, Segment

# BatchProblem kinds
MISPLACED = "misplaced"        # offsets going back, or past the segment's reach: invalid
# a stretch of MISPLACED batches, said once where it ends (format.validity.Misplaced): counted
# only for a batch found out of place once the batch after it was read (it had no MISPLACED)
MISPLACED_STRETCH = "misplaced_stretch"
RECORDS = "records"            # its records cannot be read: invalid
NOT_DECODED = "not_decoded"    # its records inflate past the bound: valid, records not read
CONTROL = "control"            # a malformed control record among the records read: invalid

# A fast run: (log, position, end, bytes at most, last offset before) -> (position, last offset)
FastRun = Callable[[LogFile, int, int, int, int], Tuple[int, int]]
# ... with records: (log, position, end, bytes at most, last offset before, highest last offset
# the segment can hold) -> (position, last offset)
FastRecordsRun = Callable[[LogFile, int, int, int, int, int], Tuple[int, int]]
INT64_MAX = (1 << 63) - 1


class BatchRead:
    """A batch read, with a chunk of its records (``records``: None when records are not
    read, or none could be; the chunk holds only the records the bounds want). The first
    event of a batch has ``first`` set; its other chunks follow in further events."""

    __slots__ = ("batch", "records", "first")

    def __init__(self, batch: Batch, records: Optional[Records], first: bool) -> None:
        self.batch = batch
        self.records = records
        self.first = first


class BatchProblem:
    """Something wrong with a batch (``kind``: MISPLACED, MISPLACED_STRETCH, RECORDS,
    NOT_DECODED or CONTROL), said in ``message``; ``counted``: it makes the data invalid. Each
    batch out of place has its MISPLACED event, before its records; a stretch of them is said
    once, by a MISPLACED_STRETCH event (``batch``: the stretch's first) where it ends: readers
    that print say that one."""

    __slots__ = ("batch", "kind", "message", "counted")

    def __init__(self, batch: Batch, kind: str, message: str, counted: bool = True) -> None:
        self.batch = batch
        self.kind = kind
        self.message = message
        self.counted = counted


class BytesProblem:
    """Bytes that are no batch (``item``, an InvalidBytes); ``counted`` is False for a batch
    cut by a byte limit the caller set (``max_bytes``), which Kafka's tool does not count."""

    __slots__ = ("item", "counted")

    def __init__(self, item: InvalidBytes, counted: bool) -> None:
        self.item = item
        self.counted = counted


class Note:
    """A sentence about the reading itself (an index not used, a guessed base offset);
    ``counted``: it reports invalid data."""

    __slots__ = ("message", "counted")

    def __init__(self, message: str, counted: bool = False) -> None:
        self.message = message
        self.counted = counted


Event = Union[BatchRead, BatchProblem, BytesProblem, Note]


def to_say(event: Union[BatchProblem, BytesProblem, Note]) -> bool:
    """Whether a reader that lists invalid data says ``event``: a counted one, but a batch
    out of place, which its stretch (MISPLACED_STRETCH) says once."""
    if isinstance(event, BatchProblem) and event.kind in (MISPLACED, MISPLACED_STRETCH):
        return event.kind == MISPLACED_STRETCH
    return event.counted


def problem_text(path: str, event: Union[BatchProblem, BytesProblem, Note]) -> str:
    """One line for a problem event met in the segment file ``path``."""
    if isinstance(event, Note):
        return event.message  # names its file already
    if isinstance(event, BytesProblem):
        item = event.item
        return "%s: %d invalid bytes at position %d: %s" % (
            printable_name(path), item.size, item.position, item.reason)
    return "%s: the batch at position %d: %s" % (printable_name(path), event.batch.position,
                                                  event.message)


class SegmentReader:
    """The events of one segment's .log file (``log``, an open LogFile), as described above.

    - ``base``: the segment's base offset (None: from the file name, else from its first batch,
      with a Note saying so).
    - ``seek``: a Seek (bounds on offsets and timestamps, and the state of one partition's
      pass); the reading then starts where the indexes say, and stops once no later batch can
      hold a wanted record. Only batches holding wanted records are given (and of those, only
      the wanted records), besides those whose records cannot be read.
    - ``records``: decode records (else batches only, unless seeking needs them).
    - ``start``/``stop``: read the batches starting in [start, stop) (stop: None, the end).
    - ``max_bytes``: read only this many bytes of the file; a batch cut by it is not counted.
    - ``resync``: after invalid bytes, go on at the next position where a valid batch starts.
    - ``valid_only``: records of batches whose CRC fails are not decoded, and a chunk of
      records is given only once the records after it decode (a batch damaged in its first
      chunk gives no records): rows for a table rather than lines for a person.
    - ``skip_control``: control batches are passed over without an event.
    - ``fast``: a function that consumes a run of plain valid batches at once (the C renderer
      of `dump`); used only when no records are read and nothing is sought.
    - ``fast_records``: the same for a run of batches with their records (`dump
      --deep-iteration`); used only when records are read, nothing is sought, no ``stop`` is
      given, and neither ``valid_only`` nor ``skip_control`` is set. It stops before any batch
      it cannot take as this reader gives it (a problem, a control batch...), which this
      reader then reads.
    """

    def __init__(self, log: LogFile, base: Optional[int] = None, *, seek: Optional[Seek] = None,
                 records: bool = False, start: int = 0, stop: Optional[int] = None,
                 max_bytes: Optional[int] = None, resync: bool = False,
                 valid_only: bool = False, skip_control: bool = False,
                 fast: Optional[FastRun] = None,
                 fast_records: Optional[FastRecordsRun] = None) -> None:
        self.log = log
        self.seek = seek
        self.records = records
        self.resync = resync
        self.valid_only = valid_only
        self.skip_control = skip_control
        self.fast = fast if seek is None and not records else None
        self.fast_records = (fast_records if seek is None and stop is None and records
                             and not valid_only and not skip_control else None)
        self.end = log.size if max_bytes is None else min(log.size, max_bytes)
        self.limited = max_bytes is not None
        self.stop = stop
        self.invalid = False
        self.notes: List[Note] = []
        if seek is not None and start == 0:
            start, note = seek.start_position(log)
            if note is not None:
                self.notes.append(Note(note))
        self.start = start
        if base is None:
            base = names.base_offset_from_name(log.path)
        if base is None:
            base = log.first_base_offset()
            source = "from the first batch"
            if base is None:
                base, source = 0, "as no batch holds one"
            self.notes.append(Note("%s: the file name holds no base offset; using %d %s "
                                   "(--base-offset sets it)"
                                   % (printable_name(log.path), base, source)))
        self.base = base

    def __iter__(self) -> Iterator[Event]:
        order = OffsetOrder(self.base)
        ended = yield from self._entries(order)
        stretch = order.finish()
        if stretch is not None:
            yield BatchProblem(stretch.item, MISPLACED_STRETCH,  # type: ignore[arg-type]
                               stretch.text(ended), counted=False)

    def _placed(self, order: OffsetOrder, item: Batch) -> Iterator[Event]:
        """The events of the order of ``item``'s offsets (a valid batch): the broker's
        recovery stops the segment at offsets going back or out of the segment's reach (its
        index cannot take the entry)."""
        why, stretch = order.check(item.position, item.size, item.base_offset, item.last_offset,
                                   item)
        if stretch is not None or why is not None:
            yield from self._misplaced(item, why, stretch)

    def _misplaced(self, item: Batch, why: Optional[str],
                   stretch: Optional[Misplaced]) -> Iterator[Event]:
        """The events of what OffsetOrder.check said of ``item``."""
        if stretch is not None:
            # counted when its batch had no MISPLACED event (found out of place late)
            self.invalid = True
            yield BatchProblem(stretch.item, MISPLACED_STRETCH,  # type: ignore[arg-type]
                               stretch.text(), counted=stretch.late)
        if why is not None:
            self.invalid = True
            yield BatchProblem(item, MISPLACED, why)

    def _replay(self, order: OffsetOrder, start: int, stop: int,
                prev_last: Optional[int]) -> Iterator[Event]:
        """The order of the batches a fast run took from ``start`` to ``stop`` (rendered
        already), checked batch by batch from ``prev_last`` (the run's start): the fast runs
        do not keep which batch they took last."""
        order.forget(prev_last)
        for batch in self.log.headers(start):
            if batch.position >= stop:
                break
            yield from self._placed(order, batch)

    def _entries(self, order: OffsetOrder) -> Generator[Event, None, bool]:
        """The events, up to the end of what is read (returns True) or of what is wanted."""
        log, base, end = self.log, self.base, self.end
        pos = min(self.start, end)
        fast_records = self.fast_records
        run: Optional[Tuple[int, Optional[int]]] = None  # a fast run's start, and prev_last then
        while pos < end:
            if fast_records is not None or self.fast is not None:
                prev = order.prev_last
                start = pos
                floor = base - 1 if prev is None else prev
                if fast_records is not None:
                    # It stops before a batch whose offsets go back or out of the segment's
                    # reach.
                    pos, last = fast_records(log, pos, end, RELEASE_STEP, floor,
                                             min(base + MAX_RELATIVE_OFFSET, INT64_MAX))
                else:
                    # From base - 1 the fast run also stops at a batch below the segment's
                    # base; not at one beyond its reach, which the replay then finds.
                    assert self.fast is not None
                    pos, last = self.fast(log, pos, end, RELEASE_STEP, floor)
                log.release_before(pos)
                if pos > start:
                    run = (start, prev)
                    if last - base > MAX_RELATIVE_OFFSET:
                        yield from self._replay(order, start, pos, prev)
                        run = None
                    else:
                        stretch = order.resumed(start)  # the run's first batch is in place
                        if stretch is not None:
                            yield BatchProblem(stretch.item,  # type: ignore[arg-type]
                                               MISPLACED_STRETCH, stretch.text(), counted=False)
                        order.forget(last)
            for item in log.entries(pos, end, self.resync):
                if self.stop is not None and item.position >= self.stop:
                    return False
                pos = item.position + item.size
                if not isinstance(item, Batch):
                    # A batch cut by the caller's byte limit is not an error, as in Kafka.
                    counted = not (self.limited and item.at_end and item.truncated)
                    self.invalid |= counted
                    yield BytesProblem(item, counted)
                    continue
                if item.is_valid:
                    if run is not None and order.taken is None and order.stretch is None \
                            and order.prev_last is not None \
                            and item.last_offset <= order.prev_last:
                        # which batch of the fast run came last decides who is out of place
                        yield from self._replay(order, run[0], item.position, run[1])
                    run = None
                    # in line rather than through _placed: a generator a batch costs
                    why, stretch = order.check(item.position, item.size, item.base_offset,
                                               item.last_offset, item)
                    if stretch is not None or why is not None:
                        yield from self._misplaced(item, why, stretch)
                problem = magic_problem(item)
                if problem is not None:
                    # DumpLogSegments prints such a batch (isvalid by its CRC), but it is
                    # invalid, as recover says.
                    self.invalid = True
                    yield BatchProblem(item, RECORDS, problem)
                if item.is_control and self.skip_control:
                    continue
                outcome = yield from self._batch(item)
                if outcome is None:
                    return False  # past the sought offsets: no later batch is wanted
                if outcome and (self.fast is not None or fast_records is not None):
                    break  # back to the fast run
            else:
                break
        return pos >= end

    def _batch(self, batch: Batch) -> Generator[Event, None, Optional[bool]]:
        """The events of one batch; returns whether it was shown (None: past the bounds)."""
        seek = self.seek
        decode = (self.records or seek is not None) and (batch.is_valid or not self.valid_only)
        shown = False
        checked_end = seek is None
        check_control = self.records and batch.is_control
        error = None
        if decode:
            chunks = self.log.iter_records(batch)
            if self.valid_only:
                chunks = held_back(chunks)
            try:
                for recs in chunks:
                    if seek is not None and not checked_end:
                        checked_end = True
                        if seek.past_end(batch, recs):
                            return None
                    if seek is not None:
                        wanted = seek.select(recs)
                        if not wanted:
                            continue
                        if len(wanted) != len(recs):
                            recs = recs.select(wanted)
                    if shown and not self.records:
                        continue
                    if check_control:
                        # told before the chunk that holds the malformed record (once a batch)
                        problem = control_problem(recs)
                        if problem is not None:
                            check_control = False
                            yield BatchProblem(batch, CONTROL, problem)
                    yield BatchRead(batch, recs if self.records else None, not shown)
                    shown = True
            except CorruptRecordError as e:
                error = e
        if seek is not None and not checked_end and seek.past_end(batch, None):
            return None
        if not shown and (seek is None or error is not None or not decode):
            yield BatchRead(batch, None, True)
            shown = True
        if not shown:
            return False
        if isinstance(error, LimitExceededError):
            # A batch whose records inflate past the bound is valid (its CRC holds; the broker
            # does not look inside): said, not counted as invalid.
            yield BatchProblem(batch, NOT_DECODED, str(error), counted=False)
            error = None
        message = str(error) if error is not None else None
        if message is None and not self.records:
            message = batch.codec_problem
        if message is not None:
            self.invalid = True
            yield BatchProblem(batch, RECORDS, message)
        elif not batch.is_valid:
            self.invalid = True
        return True


def files_to_read(target: str, bounds: Optional[Seek] = None) -> List[Tuple[Found, Optional[Seek]]]:
    """The files a path stands for (files.expand), each with the Seek its reading takes: with
    ``bounds``, only the segments the bounds reach (and partition directories that could not
    be read), with one fresh Seek per partition; without, every file and None."""
    found = expand(target)
    if bounds is None:
        return [(f, None) for f in found]
    found = [f for f in found if f.kind == names.LOG or f.error is not None]
    following = next_bases([f.path for f in found if f.error is None])
    out: List[Tuple[Found, Optional[Seek]]] = []
    seeks = {}
    for f in found:
        if f.error is not None:
            out.append((f, None))
            continue
        if not bounds.wants_segment(names.base_offset_from_name(f.path), following.get(f.path)):
            continue
        directory = os.path.dirname(f.path)
        if directory not in seeks:
            seeks[directory] = bounds.fresh()
        out.append((f, seeks[directory]))
    return out


class Record:
    """One record, as the Python API gives it: where it is (``topic``, ``partition``,
    ``offset``), its ``timestamp`` (ms since the epoch, -1 for none) and ``timestamp_type``
    ("CreateTime", "LogAppendTime" or "NoTimestampType"), ``key`` and ``value`` (bytes or None)
    and ``headers`` (a tuple of (str, bytes or None) pairs). ``batch`` is the header of the
    batch holding it (format.records.Batch: producer_id, is_transactional, is_control, magic,
    codec_name, position, ...)."""

    __slots__ = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value",
                 "headers", "batch")

    def __init__(self, topic: Optional[str], partition: Optional[int], offset: int,
                 timestamp: int, key: Optional[bytes], value: Optional[bytes],
                 headers: Tuple[Tuple[str, Optional[bytes]], ...], batch: Batch) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = batch.timestamp_type_name
        self.key = key
        self.value = value
        self.headers = headers
        self.batch = batch

    @property
    def is_control(self) -> bool:
        return bool(self.batch.is_control)

    def __repr__(self) -> str:
        return "Record(topic=%r, partition=%r, offset=%d, timestamp=%d, key=%r, value=%r)" % (
            self.topic, self.partition, self.offset, self.timestamp, self.key, self.value)


def segment_events(segments: Sequence[Segment], seek: Optional[Seek] = None, *,
                   records: bool = True, valid_only: bool = True, skip_control: bool = False,
                   max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
                   ) -> Iterator[Tuple[Segment, Event]]:
    """(segment, event) for the segments of one partition in offset order (``segments``, as
    Partition.segments() gives them), each read by a SegmentReader; with ``seek``, only the
    segments its offset bounds reach are opened."""
    bases = [s.base_offset for s in segments]
    for segment, next_base in zip(segments, bases[1:] + [None]):
        if seek is not None and not seek.wants_segment(segment.base_offset, next_base):
            continue
        with segment.open(max_message_size) as log:
            reader = SegmentReader(log, segment.base_offset, seek=seek, records=records,
                                   valid_only=valid_only, skip_control=skip_control)
            for note in reader.notes:
                yield segment, note
            for event in reader:
                yield segment, event


def read_records(segments: Sequence[Segment], from_offset: Optional[int] = None,
                 to_offset: Optional[int] = None, from_timestamp: Optional[int] = None,
                 to_timestamp: Optional[int] = None, include_control: bool = False,
                 max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> Iterator[Record]:
    """The records of ``segments`` (one partition's, in offset order) within the bounds (with
    the meaning of `dump`'s options: see Seek), as Record objects. Raises InvalidDataError at
    the first invalid data met (the records before it have been given; of a control batch
    holding a malformed control record, the chunk of records that holds it is not given)."""
    bounds = (from_offset, to_offset, from_timestamp, to_timestamp)
    seek = Seek(*bounds) if bounds != (None,) * 4 else None
    # the segments of one partition: one directory names their topic and partition
    topic, number = names.topic_partition(segments[0].directory) if segments else (None, None)
    for segment, event in segment_events(segments, seek, skip_control=not include_control,
                                         max_message_size=max_message_size):
        if isinstance(event, BatchRead):
            batch = event.batch
            if not batch.is_valid:
                raise InvalidDataError("%s: the batch at position %d (offset %d): its CRC does "
                                       "not match its bytes" % (segment.log_path, batch.position,
                                                               batch.base_offset))
            recs = event.records
            if recs is None:
                continue
            headers = recs.headers or [()] * len(recs)
            for offset, ts, key, value, hdrs in zip(recs.offsets, recs.timestamps, recs.keys,
                                                    recs.values, headers):
                yield Record(topic, number, offset, ts, key, value, tuple(hdrs), batch)
        elif event.counted:
            raise InvalidDataError(problem_text(segment.log_path, event))


def offset_for_time(segments: Sequence[Segment], timestamp: int,
                    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE, *,
                    from_offset: Optional[int] = None) -> Optional[int]:
    """The offset of the first record, in offset order, whose timestamp is at least
    ``timestamp`` (offsets-for-times, UnifiedLog.fetchOffsetByTimestamp), or None when no
    record has one; with ``from_offset``, the first such record at or after that offset (where
    a Seek with both bounds starts). Invalid data is passed over."""
    for _, event in segment_events(segments, Seek(from_offset, from_ts=timestamp),
                                   max_message_size=max_message_size):
        if isinstance(event, BatchRead) and event.records is not None and len(event.records):
            return event.records.offsets[0]
    return None
