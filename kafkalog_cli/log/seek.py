"""Seeking by offset and time: which segments to read, where in them to start, which records.

Segments are chosen by their file names' base offsets; inside a segment the start position
comes from the offset index (largest entry at or below the offset) or, for a timestamp, from the
time index then the offset index, as LogSegment.findOffsetByTimestamp does. An index that is
missing or fails the broker's sanity check is not used: the segment is scanned from its start.
"""

from __future__ import annotations

import os
from typing import Dict, Iterable, List, Optional, Tuple, Type, TypeVar

from ..format.records import Batch, Records
from . import names
from .files import FileFormatError
from .index import OffsetIndex, TimeIndex
from .segment import LogFile, Segment


AnyIndex = TypeVar("AnyIndex", OffsetIndex, TimeIndex)


class Seek:
    """Bounds on records and the state of one partition's pass, with one meaning for every
    reader (dump's options, the Spark source's, the Python API's): offsets inclusive; from_ts
    starts at the first record, in offset order, whose timestamp is at least from_ts (as
    offsets-for-times does, UnifiedLog.fetchOffsetByTimestamp); to_ts keeps the records whose
    timestamp is at most to_ts. A record without a timestamp (v0) is outside any time bound."""

    def __init__(self, from_offset: Optional[int] = None, to_offset: Optional[int] = None,
                 from_ts: Optional[int] = None, to_ts: Optional[int] = None) -> None:
        self.from_offset = from_offset
        self.to_offset = to_offset
        self.from_ts = from_ts
        self.to_ts = to_ts
        self.started = from_ts is None

    def fresh(self) -> "Seek":
        """The same bounds for another partition."""
        return Seek(self.from_offset, self.to_offset, self.from_ts, self.to_ts)

    def wants_segment(self, base: Optional[int], next_base: Optional[int]) -> bool:
        """Can a segment of offsets [base, next_base) hold a record in the offset bounds?"""
        if self.to_offset is not None and base is not None and base > self.to_offset:
            return False
        if self.from_offset is not None and next_base is not None and next_base <= self.from_offset:
            return False
        return True

    def past_end(self, batch: Batch, recs: Optional[Records] = None) -> bool:
        """No later batch can be wanted (offsets increase along a partition). A legacy
        compressed wrapper's offset is its last inner one: its records tell its first."""
        if self.to_offset is None:
            return False
        first = recs.offsets[0] if recs is not None and len(recs) else batch.base_offset
        return first > self.to_offset

    def select(self, recs: Records) -> List[int]:
        """Indices of the wanted records of a batch, in order."""
        out = []
        lo, hi, from_ts, to_ts = self.from_offset, self.to_offset, self.from_ts, self.to_ts
        for i, (off, ts) in enumerate(zip(recs.offsets, recs.timestamps)):
            if (lo is not None and off < lo) or (hi is not None and off > hi):
                continue
            if not self.started:
                if from_ts is not None and ts < from_ts:  # not started: from_ts is set
                    continue
                self.started = True
            if to_ts is not None and not 0 <= ts <= to_ts:
                continue  # a record without a timestamp (-1) is outside any time bound
            out.append(i)
        return out

    def start_position(self, log: LogFile) -> Tuple[int, Optional[str]]:
        """(position, note): where to start reading the segment ``log`` (a LogFile), and why
        not further in (None when the indexes did their job)."""
        if self.from_offset is None and self.started:
            return 0, None
        segment = Segment.at(log.path)
        base = segment.base_offset
        if base is None:
            return 0, "%s: no base offset in the file name: reading it from the start" % log.path
        index_path = segment.index_path
        oindex, note = _sane(OffsetIndex, index_path, base)
        if oindex is None:
            return 0, note
        target = self.from_offset if self.from_offset is not None else base
        if not self.started and self.from_ts is not None:
            tindex, note = _sane(TimeIndex, segment.time_index_path, base)
            if tindex is None:
                if self.from_offset is None:
                    return 0, note
            else:
                ts, ts_offset = tindex.lookup(self.from_ts)
                if ts != -1 and not _time_entry_holds(segment, log, oindex, ts, ts_offset):
                    return 0, ("%s: entry (%d, %d) does not match the batch ending at that offset: "
                               "reading the segment from its start"
                               % (tindex.path, ts, ts_offset))
                target = max(ts_offset, target)
        offset, position = oindex.lookup(target)
        if position:
            # An index can pass the sanity check and still be wrong: trust an entry only where
            # the batch it names starts.
            batch = segment.batch_at(position, log)
            if not isinstance(batch, Batch) or batch.last_offset != offset:
                return 0, ("%s: entry for offset %d points at position %d, where no batch ending "
                           "at that offset starts: reading the segment from its start"
                           % (index_path, offset, position))
        return position, note

    def end_offset(self, log: LogFile, base: int) -> int:
        """The offset after the last batch whose CRC holds of the segment ``log`` read from
        where this seek starts in it (``start_position``), the largest such; ``base`` (its
        base offset) when there is none: where a pass that showed nothing finds the log to
        end."""
        start = self.start_position(log)[0]
        end = base
        for batch in Segment.at(log.path).batches(start, log):
            if batch.is_valid:
                end = max(end, batch.last_offset + 1)
        return end


def _time_entry_holds(segment: Segment, log: LogFile, oindex: OffsetIndex, timestamp: int,
                      offset: int) -> bool:
    """Does the batch ending at ``offset`` exist and carry ``timestamp`` as its max timestamp,
    as a time index entry claims? (A wrong index can pass the sanity check.)"""
    for batch in segment.batches(oindex.lookup(offset)[1], log):
        if batch.last_offset >= offset:
            return batch.last_offset == offset and batch.max_timestamp == timestamp
    return False


def _sane(cls: Type[AnyIndex], path: str,
          base: int) -> Tuple[Optional[AnyIndex], Optional[str]]:
    """The index at ``path`` cut to its entries, or (None, why it cannot be used)."""
    if not os.path.isfile(path):
        return None, "%s: missing: reading the segment from its start" % path
    try:
        raw = cls(path, base)
        index = raw.trimmed()
    except (OSError, FileFormatError) as e:
        return None, "%s: unreadable (%s): reading the segment from its start" % (path, e)
    problems = raw.sanity_problems()
    if problems and raw.zero_tail and raw.file_size % raw.entry.size == 0:
        problems = index.sanity_problems()  # a pre-allocated tail: judged as the broker trims it
    if problems:
        return None, "%s: %s: reading the segment from its start" % (path, problems[0])
    return index, None


def next_bases(log_paths: Iterable[str]) -> Dict[str, Optional[int]]:
    """For each log path, the base offset of the next segment of the same directory (or None)."""
    out: Dict[str, Optional[int]] = {}
    by_dir: Dict[str, List[str]] = {}
    for p in log_paths:
        by_dir.setdefault(os.path.dirname(p), []).append(p)
    for paths in by_dir.values():
        bases = sorted((names.base_offset_from_name(p), p) for p in paths
                       if names.base_offset_from_name(p) is not None
                       and not names.lifecycle_suffix(p))
        for (base, p), nxt in zip(bases, bases[1:] + [(None, None)]):
            out[p] = nxt[0]
    return out
