"""A segment checked end to end and summed up: the unit of work of `kafkalog scan`."""

import os

from ..format.errors import CorruptRecordError
from ..format.records import Batch
from .segment import DEFAULT_MAX_MESSAGE_SIZE, LogFile


def summarize_segment(path, max_message_size=DEFAULT_MAX_MESSAGE_SIZE):
    """Batches, records, bytes, offset and time ranges, codecs, invalid batches (CRC mismatch
    or records that cannot be read) and invalid bytes of one segment file, as a dict."""
    out = {"segment": path, "bytes": os.path.getsize(path), "batches": 0, "records": 0,
           "first_offset": None, "last_offset": None, "min_timestamp": None,
           "max_timestamp": None, "codecs": [], "invalid_batches": 0, "invalid_bytes": 0,
           "problems": []}
    codecs = set()
    with LogFile(path, max_message_size) as log:
        for item in log.entries(resync=True):
            if not isinstance(item, Batch):
                out["invalid_bytes"] += item.size
                out["problems"].append("%d bytes at %d: %s" % (item.size, item.position, item.reason))
                continue
            out["batches"] += 1
            codecs.add(item.codec_name)
            count, first, lo, hi = 0, None, -1, -1
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
                    out["min_timestamp"] = ts if out["min_timestamp"] is None else min(out["min_timestamp"], ts)
                    out["max_timestamp"] = ts if out["max_timestamp"] is None else max(out["max_timestamp"], ts)
    out["codecs"] = sorted(codecs)
    return out
