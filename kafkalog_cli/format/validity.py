"""The validity rule every reader of a log applies to a batch whose bytes the scanner
(``format.scan``) has framed: what the broker's recovery (LogSegment.recover) and its batch
validation (LogValidator) refuse, as one sentence each, the same in `dump`, `recover`,
`describe`, `scan`, the Python API and the Spark source.

- ``batch_problem``: a batch by its header: its CRC (``crc_problem``), its magic
  (``magic_problem``), its offsets against the batch before it (``order_problem``) and against
  the segment's base offset (``reach_problem``: the 32 bits of an offset index entry).
- ``control_problem``: the records of a control batch (``control_record_error`` for one).
- ``record_validity``: a record's own CRC verdict (a legacy message's; a v2 record's batch's).
- ``OffsetOrder``: a segment's batches in order, each stretch of batches out of place (by
  ``reach_problem`` and ``order_problem``) one ``Misplaced``, said once by every reader.

Pure functions: no file is read and nothing is printed; each returns None or why.
"""

from __future__ import annotations

from typing import Optional, Tuple

from . import control
from .errors import CorruptRecordError
from .records import Batch, Records

# A segment's offset index holds offsets relative to its base offset in 32 bits
# (LogSegment.canConvertToRelativeOffset): every batch's last offset lies within this of it.
MAX_RELATIVE_OFFSET = 2 ** 31 - 1


def crc_problem(batch: Batch) -> Optional[str]:
    """Why ``batch``'s CRC fails (the stored one is not the one its bytes give), or None."""
    if batch.crc != batch.computed_crc:
        return "CRC mismatch (stored %d, computed %s)" % (batch.crc, batch.computed_crc)
    return None


def magic_problem(batch: Batch) -> Optional[str]:
    """Why ``batch``'s magic is none Kafka reads, or None. The byte lies outside the v2 CRC:
    FileLogInputStream reads such a batch as v2, but no producer writes it and consumers
    refuse it."""
    if batch.magic > 2:
        return "unknown magic %d" % batch.magic
    return None


def record_validity(batch: Batch, records: Records, i: int) -> Tuple[bool, int]:
    """(valid, crc) of record ``i`` of ``records`` (a chunk of ``batch``'s): a legacy
    message's own CRC check, a v2 record's batch's."""
    if records.valids is not None and records.crcs is not None:  # both for a legacy entry
        return records.valids[i], records.crcs[i]
    return batch.is_valid, batch.crc


def reach_problem(last_offset: int, base: int) -> Optional[str]:
    """Why a batch ending at ``last_offset`` cannot be in the segment based at ``base`` (its
    offset index could not hold it), or None."""
    if not 0 <= last_offset - base <= MAX_RELATIVE_OFFSET:
        return "last offset %d does not fit a segment based at %d" % (last_offset, base)
    return None


def order_problem(last_offset: int, prev_last: Optional[int]) -> Optional[str]:
    """Why a batch ending at ``last_offset`` cannot follow one ending at ``prev_last`` (None:
    no batch before it), or None: offsets only grow within a partition."""
    if prev_last is not None and last_offset <= prev_last:
        return "last offset %d does not follow offset %d" % (last_offset, prev_last)
    return None


def batch_problem(batch: Batch, base_offset: Optional[int],
                  previous_last: Optional[int]) -> Optional[str]:
    """Why ``batch`` is invalid by its header, or None: its CRC, its magic, its last offset
    after ``previous_last`` (the last offset of the valid batch before it; None: none) and
    within the reach of ``base_offset`` (the segment's; None: not checked). Its size and
    completeness are the scanner's; its records, ``control_problem``'s and the decoder's."""
    last = batch.last_offset
    if (batch.crc == batch.computed_crc and batch.magic <= 2
            and (previous_last is None or last > previous_last)
            and (base_offset is None or 0 <= last - base_offset <= MAX_RELATIVE_OFFSET)):
        return None  # a valid batch (every batch, nearly): decided without a call per check
    return (crc_problem(batch) or magic_problem(batch)
            or order_problem(batch.last_offset, previous_last)
            or (None if base_offset is None else reach_problem(batch.last_offset, base_offset)))


def control_record_error(key: Optional[bytes], value: Optional[bytes]) -> Optional[str]:
    """Why one control record is malformed, or None: its key a control key
    (ControlRecordType: at least 4 bytes, a version that is not negative), an ABORT/COMMIT
    value an end transaction marker (EndTransactionMarker), a KRaft control value readable as
    its type (read by format.schema as ControlRecordUtils reads it, version 0)."""
    try:
        type_id = control.control_type(key)
        if type_id in (control.ABORT, control.COMMIT):
            control.end_txn_marker(value)
        elif type_id in control.kraft_control_names():
            control.kraft_control_json(type_id, value)
    except CorruptRecordError as e:
        return str(e)
    return None


def control_record_problem(offset: int, error: str) -> str:
    """The sentence for the control record at ``offset`` that ``control_record_error`` finds
    malformed with ``error``."""
    return "control record at offset %d: %s" % (offset, error)


def control_problem(records: Records) -> Optional[str]:
    """Why the records of a control batch (a chunk of them) are malformed: the first malformed
    one (``control_record_error``), or None."""
    for offset, key, value in zip(records.offsets, records.keys, records.values):
        error = control_record_error(key, value)
        if error is not None:
            return control_record_problem(offset, error)
    return None


def offsets_text(low: int, high: int) -> str:
    """"offset 5", "offsets 5-9" (or "offsets -5 to 9")."""
    if low == high:
        return "offset %d" % low
    return ("offsets %d-%d" if low >= 0 else "offsets %d to %d") % (low, high)


class Misplaced:
    """A stretch of consecutive batches whose offsets are out of place, said once: where it
    starts (``position``, with ``why`` its first batch is out of place and ``item``, what the
    caller gave for that batch), how many batches (``batches``) and bytes (``size``) it holds,
    the offsets they carry (``low``-``high``), the offset they do not follow (``after``; None:
    none before them) and where the offsets resume being in order (``resume``: the position of
    the first batch after it that follows ``after``; None: none does). ``late``: its one batch
    was taken in place when read, and found out of place by the batch after it."""

    __slots__ = ("position", "why", "item", "batches", "size", "low", "high", "after", "resume",
                 "late")

    def __init__(self, position: int, size: int, first: int, last: int, why: str,
                 after: Optional[int], item: object = None) -> None:
        self.position = position
        self.why = why
        self.item = item
        self.batches = 1
        self.size = size
        self.low = first
        self.high = last
        self.after = after
        self.resume: Optional[int] = None
        self.late = False

    def add(self, size: int, first: int, last: int) -> None:
        self.batches += 1
        self.size += size
        self.low = min(self.low, first)
        self.high = max(self.high, last)

    def text(self, ended: bool = True) -> str:
        """The one sentence for the stretch; ``ended``: the segment was read to its end (else
        where the offsets resume is not known when none was met)."""
        out = "%s: %d batch%s, %d bytes (%s) out of place" % (
            self.why, self.batches, "" if self.batches == 1 else "es", self.size,
            offsets_text(self.low, self.high))
        if self.resume is not None:
            return out + "; offsets resume at position %d" % self.resume
        if ended and self.after is not None:
            return out + "; no later batch of the segment follows offset %d" % self.after
        return out


class OffsetOrder:
    """The order of a segment's offsets, batch by batch (``check``), with one ``Misplaced``
    for each stretch of batches out of place rather than one sentence per batch. A batch is
    out of place when ``reach_problem`` or ``order_problem`` says so against the batches in
    place before it (``prev_last``, the highest last offset of those). One batch whose offsets
    lie above those of the batch after it, when that one follows the batch before it (or the
    segment's base offset) (a flipped bit in a base offset, which the CRC does not cover), is
    that stretch alone: the batches after it are in place."""

    __slots__ = ("base", "prev_last", "taken", "stretch")

    def __init__(self, base: Optional[int], prev_last: Optional[int] = None) -> None:
        self.base = base
        self.prev_last = prev_last
        # the batch taken in place last: (position, size, first, last, prev_last before it,
        # item), when known
        self.taken: Optional[Tuple[int, int, int, int, Optional[int], object]] = None
        self.stretch: Optional[Misplaced] = None

    def forget(self, prev_last: Optional[int]) -> None:
        """Batches taken in place elsewhere, up to ``prev_last``: which one was last is not
        known."""
        self.prev_last = prev_last
        self.taken = None

    def check(self, position: int, size: int, first: int, last: int,
              item: object = None) -> Tuple[Optional[str], Optional[Misplaced]]:
        """(why the batch at ``position`` is out of place, or None; a stretch that this batch
        ends, to be said, or None). ``first``/``last``: its offsets; ``item``: kept with it."""
        base, prev = self.base, self.prev_last
        why = ((None if base is None else reach_problem(last, base))
               or order_problem(last, prev))
        if why is None:
            ended = self.stretch
            if ended is not None:
                ended.resume = position
                self.stretch = None
            self.taken = (position, size, first, last, prev, item)
            self.prev_last = last
            return None, ended
        stretch = self.stretch
        if stretch is not None:
            stretch.add(size, first, last)
            return why, None
        taken = self.taken
        if taken is not None and order_problem(last, prev) is not None:
            t_pos, t_size, t_first, t_last, floor, t_item = taken
            if floor is None and base is not None:
                floor = base - 1  # the segment's first batch
            if floor is not None and floor < first and last < t_first:
                # this batch follows the one before the batch taken last: that one is out
                # of place, alone
                spike = Misplaced(t_pos, t_size, t_first, t_last,
                                  "%s above those of the batch after it (%s)"
                                  % (offsets_text(t_first, t_last), offsets_text(first, last)),
                                  taken[4], t_item)
                spike.resume = position
                spike.late = True
                self.taken = (position, size, first, last, taken[4], item)
                self.prev_last = last
                return None, spike
        self.stretch = Misplaced(position, size, first, last, why, prev, item)
        return why, None

    def resumed(self, position: int) -> Optional[Misplaced]:
        """The stretch that the batch at ``position``, taken in place elsewhere, ends, or
        None."""
        stretch, self.stretch = self.stretch, None
        if stretch is not None:
            stretch.resume = position
        return stretch

    def finish(self) -> Optional[Misplaced]:
        """The stretch still open where the reading stops, or None."""
        stretch, self.stretch = self.stretch, None
        return stretch
