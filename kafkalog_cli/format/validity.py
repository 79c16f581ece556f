"""The validity rule every reader of a log applies to a batch whose bytes the scanner
(``format.scan``) has framed: what the broker's recovery (LogSegment.recover) and its batch
validation (LogValidator) refuse, as one sentence each, the same in `dump`, `recover`,
`describe`, `scan`, the Python API and the Spark source.

- ``batch_problem``: a batch by its header: its CRC (``crc_problem``), its magic
  (``magic_problem``), its offsets against the batch before it (``order_problem``) and against
  the segment's base offset (``reach_problem``: the 32 bits of an offset index entry).
- ``control_problem``: the records of a control batch (``control_record_error`` for one).
- ``record_validity``: a record's own CRC verdict (a legacy message's; a v2 record's batch's).

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
