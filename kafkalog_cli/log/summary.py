"""A segment checked end to end and summed up: the unit of work of `kafkalog scan`."""

import os
from typing import Any, Dict, Optional, Set

from ..format.errors import CorruptRecordError
from ..format.scan import InvalidBytes
from .segment import DEFAULT_MAX_MESSAGE_SIZE, LogFile


def summarize_segment(path: str,
                      max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> Dict[str, Any]:
    """Batches, records, bytes, offset and time ranges, codecs, invalid batches (CRC mismatch
    or records that cannot be read) and invalid bytes of one segment file, as a dict."""
    out: Dict[str, Any] = {
        "segment": path, "bytes": os.path.getsize(path), "batches": 0, "records": 0,
        "first_offset": None, "last_offset": None, "min_timestamp": None, "max_timestamp": None,
        "codecs": [], "invalid_batches": 0, "invalid_bytes": 0, "problems": []}
    codecs: Set[str] = set()
    with LogFile(path, max_message_size) as log:
        for item in log.entries(resync=True):
            if isinstance(item, InvalidBytes):
                out["invalid_bytes"] += item.size
                out["problems"].append("%d bytes at %d: %s"
                                       % (item.size, item.position, item.reason))
                continue
            out["batches"] += 1
            codecs.add(item.codec_name)
            count, lo, hi = 0, -1, -1
            first: Optional[int] = None
            try:
                # a chunk at a time: a batch may hold millions of records
                for recs in log.iter_records(item):
                    if not len(recs):
                        continue
                    a, b = min(recs.timestamps), max(recs.timestamps)
                    lo, hi = (a, b) if first is None else (min(lo, a), max(hi, b))
                    if first is None:
                        first = recs.offsets[0]
                    count += len(recs)
                if not item.is_valid:
                    raise CorruptRecordError("CRC mismatch")
            except CorruptRecordError as e:
                out["invalid_batches"] += 1
                out["problems"].append("batch at %d: %s" % (item.position, e))
                continue
            out["records"] += count
            if out["first_offset"] is None:
                out["first_offset"] = item.base_offset if first is None else first
            out["last_offset"] = item.last_offset
            for ts in (lo, hi):
                if ts >= 0:
                    low, high = out["min_timestamp"], out["max_timestamp"]
                    out["min_timestamp"] = ts if low is None else min(low, ts)
                    out["max_timestamp"] = ts if high is None else max(high, ts)
    out["codecs"] = sorted(codecs)
    return out
