"""A segment checked end to end and summed up: the unit of work of `kafkalog scan`, read with the
same reader and the same validity rules as `kafkalog dump` (log/read.py)."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from ..format.records import Batch, Records
from .read import (CONTROL, MISPLACED, MISPLACED_STRETCH, NOT_DECODED, BatchProblem, BatchRead,
                   BytesProblem, SegmentReader)
from .segment import DEFAULT_MAX_MESSAGE_SIZE, LogFile


class _Summary:
    """The totals of one segment, summed batch by batch as the reader's events come."""

    def __init__(self, path: str) -> None:
        self.out: Dict[str, Any] = {
            "segment": path, "bytes": os.path.getsize(path), "batches": 0, "records": 0,
            "first_offset": None, "last_offset": None, "min_timestamp": None,
            "max_timestamp": None, "codecs": [], "invalid_batches": 0, "invalid_bytes": 0,
            "problems": []}
        self.codecs: Set[str] = set()
        self.batch: Optional[Batch] = None
        self.problem: Optional[str] = None
        self.early: Optional[BatchProblem] = None  # a problem told before its batch's records
        self.misplaced = False  # the batch in progress is out of place
        self.finished: Optional[Batch] = None  # the batch counted last, and whether out of place
        self.finished_misplaced = False
        self.count = 0
        self.first: Optional[int] = None
        self.timestamps: List[int] = []

    def start(self, batch: Batch) -> None:
        self.finish()
        early = self.early if self.early is not None and self.early.batch is batch else None
        self.batch, self.count, self.first = batch, 0, None
        self.problem = early.message if early is not None else None
        self.misplaced = early is not None and early.kind == MISPLACED
        self.early = None
        self.timestamps = []
        self.out["batches"] += 1
        self.codecs.add(batch.codec_name)

    def add(self, recs: Records) -> None:
        if len(recs):
            if self.first is None:
                self.first = recs.offsets[0]
            self.count += len(recs)
            self.timestamps += (min(recs.timestamps), max(recs.timestamps))

    def stretch(self, problem: BatchProblem) -> None:
        """A stretch of batches out of place, said once; its first batch counted invalid here
        when it was read as in place (one batch above the offsets of the batches after it)."""
        if problem.batch is self.batch:
            self.problem = self.problem or problem.message
            self.misplaced = True
        elif self.finished is problem.batch and not self.finished_misplaced:
            self.out["invalid_batches"] += 1
        self.out["problems"].append("batch at %d: %s" % (problem.batch.position, problem.message))

    def fail(self, problem: BatchProblem) -> None:
        if problem.kind == MISPLACED:
            self.misplaced = True
        if problem.batch is self.batch:
            self.problem = self.problem or problem.message
        else:
            self.early = problem  # offsets out of place: said before the batch is read

    def invalid_bytes(self, size: int, text: str) -> None:
        self.finish()
        self.out["invalid_bytes"] += size
        self.out["problems"].append(text)

    def finish(self) -> None:
        """Count the batch in progress (if any) as valid or not."""
        batch, out = self.batch, self.out
        self.batch = None
        if batch is None:
            return
        self.finished, self.finished_misplaced = batch, self.misplaced
        if self.problem is None and not batch.is_valid:
            self.problem = "CRC mismatch"
        if self.problem is not None:
            out["invalid_batches"] += 1
            if not self.misplaced:  # a batch out of place: said once for its stretch
                out["problems"].append("batch at %d: %s" % (batch.position, self.problem))
            return
        out["records"] += self.count
        if out["first_offset"] is None:
            out["first_offset"] = batch.base_offset if self.first is None else self.first
        out["last_offset"] = batch.last_offset
        for ts in self.timestamps:
            if ts >= 0:
                low, high = out["min_timestamp"], out["max_timestamp"]
                out["min_timestamp"] = ts if low is None else min(low, ts)
                out["max_timestamp"] = ts if high is None else max(high, ts)


def summarize_segment(path: str,
                      max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> Dict[str, Any]:
    """Batches, records, bytes, offset and time ranges, codecs, invalid batches (what `dump`
    counts invalid: CRC mismatch, records that cannot be read, offsets out of place) and
    invalid bytes of one segment file, as a dict."""
    return _summarize(path, max_message_size, 0, None)[0].out


def _summarize(path: str, max_message_size: int, start: int,
               stop: Optional[int]) -> Tuple[_Summary, Optional[int], Optional[int], int]:
    """The summary of the batches starting in [start, stop) of ``path``, with the position of
    the first batch read (None: none), the last offset of the first valid batch (None: none)
    and the position where the last batch read ends."""
    summary = _Summary(path)
    first_position: Optional[int] = None
    first_last: Optional[int] = None
    end = start
    with LogFile(path, max_message_size) as log:
        for event in SegmentReader(log, records=True, resync=True, start=start, stop=stop):
            if isinstance(event, BytesProblem):
                item = event.item
                summary.invalid_bytes(item.size, "%d bytes at %d: %s"
                                      % (item.size, item.position, item.reason))
            elif isinstance(event, BatchRead):
                if event.first:
                    batch = event.batch
                    summary.start(batch)
                    if first_position is None:
                        first_position = batch.position
                    if first_last is None and batch.is_valid:
                        first_last = batch.last_offset
                    end = batch.position + batch.size
                if event.records is not None:
                    summary.add(event.records)
            elif isinstance(event, BatchProblem):
                if event.kind == NOT_DECODED:
                    # valid: a v2 header's count stands; a legacy wrapper has none (Kafka's
                    # countOrNull), its records uncounted
                    count = event.batch.count
                    if count is not None:
                        summary.count = count
                elif event.kind == MISPLACED_STRETCH:
                    summary.stretch(event)
                elif event.kind != CONTROL:  # a malformed control record leaves it counted valid
                    summary.fail(event)
    summary.finish()
    summary.out["codecs"] = sorted(summary.codecs)
    return summary, first_position, first_last, end


def summarize_slice(path: str, start: int, stop: int,
                    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> Dict[str, Any]:
    """The summary of the batches starting in bytes [start, stop) of a segment (a slice of it,
    cut at batch starts as the Spark jobs cut segments: source.slices), as summarize_segment
    gives one, with what ``merge_slices`` needs to put the slices of a segment together:
    ``start``, ``stop``, ``clean`` (nothing invalid and nothing said, its first batch at
    ``start`` and its last ending at ``stop``: batches end to end over the whole slice),
    ``first_last`` and ``last_last``: the last offsets of its first and last valid batches."""
    summary, first_position, first_last, end = _summarize(path, max_message_size, start, stop)
    out = summary.out
    out.update(start=start, stop=stop, first_last=first_last, last_last=out["last_offset"],
               clean=(not out["invalid_batches"] and not out["invalid_bytes"]
                      and not out["problems"] and first_position == start and end == stop))
    return out


def merge_slices(slices: Sequence[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The summary of a whole segment from those of its slices (summarize_slice, in file
    order), or None when they do not make the one a reading of the whole segment gives: each
    slice must be clean, each start where the one before stops (the first at 0, the last at the
    end of the file) and the first valid batch of each follow the last of the ones before (the
    order of offsets, which a slice checks only within itself). Then no batch of the segment is
    invalid or out of place, and its totals are the slices' sums."""
    if not slices or slices[0]["start"] != 0 or slices[-1]["stop"] != slices[-1]["bytes"]:
        return None
    last: Optional[int] = None
    stop = 0
    for s in slices:
        if not s["clean"] or s["start"] != stop:
            return None
        if s["first_last"] is not None:
            if last is not None and s["first_last"] <= last:
                return None
            last = s["last_last"]
        stop = s["stop"]
    first = [s["first_offset"] for s in slices if s["first_offset"] is not None]
    lasts = [s["last_offset"] for s in slices if s["last_offset"] is not None]
    low = [s["min_timestamp"] for s in slices if s["min_timestamp"] is not None]
    high = [s["max_timestamp"] for s in slices if s["max_timestamp"] is not None]
    return {"segment": slices[0]["segment"], "bytes": slices[0]["bytes"],
            "batches": sum(s["batches"] for s in slices),
            "records": sum(s["records"] for s in slices),
            "first_offset": first[0] if first else None,
            "last_offset": lasts[-1] if lasts else None,
            "min_timestamp": min(low) if low else None,
            "max_timestamp": max(high) if high else None,
            "codecs": sorted({c for s in slices for c in s["codecs"]}),
            "invalid_batches": 0, "invalid_bytes": 0, "problems": []}
