"""The findings of the checks (`verify-index`, `describe`): one type, ``Finding``, and every
kind a check reports, by stable names used in the JSON output. A finding is a problem (the
files are not as the broker leaves them) or a note (said, not wrong); which one is the list it
is put in."""

from __future__ import annotations

from typing import Any, Dict

from .files import printable_name

# -- the index checks (DumpLogSegments' and LogLoader's) --------------------------------------
OFFSET_MISMATCH = "offset_mismatch"            # entry's offset != lastOffset of the batch there
NOT_A_BATCH = "not_a_batch_start"              # no complete batch starts at the entry's position
POSITION_PAST_END = "position_past_end"
NOT_INCREASING = "not_increasing"
TIMESTAMP_MISMATCH = "timestamp_mismatch"
TIMESTAMP_OUT_OF_ORDER = "timestamp_out_of_order"
OFFSET_NOT_FOUND = "offset_not_found"
SANITY = "sanity_check_failed"
ZERO_TAIL = "zero_tail"                        # a sealed segment's index still pre-allocated
TXN_WITHOUT_ABORT = "txn_entry_without_abort"
ABORT_WITHOUT_TXN = "abort_without_txn_entry"
TXN_FIRST_OFFSET = "txn_first_offset_mismatch"
UNREADABLE = "unreadable"                      # a file of the partition that cannot be read
MISSING_LOG = "missing_log"
# a live segment's .log without its .index: LogSegment.sanityCheck throws NoSuchFileException and
# LogLoader.loadSegmentFiles recovers the segment (an error in the broker's log when the segment
# is below the recovery point or the shutdown was clean). A problem for a sealed segment; for the
# active one a note (MISSING_INDEX_NOTE): a crash can leave it so, and the broker's load
# recovers the segment above the recovery point in any case.
MISSING_INDEX = "missing_index"
MISSING_INDEX_NOTE = "missing_active_index"
# a note: a live segment's .log without its .timeindex, which the broker creates empty
# (LogSegment.sanityCheck) without recovering the segment
MISSING_TIME_INDEX_NOTE = "missing_time_index"
# the leader-epoch-checkpoint against the log's batches (LeaderEpochCheck)
MALFORMED_CHECKPOINT = "malformed_checkpoint"    # not a file LeaderEpochFileCache wrote
LEADER_EPOCH_MISSING = "leader_epoch_missing"    # batches of an epoch the cache lacks there
LEADER_EPOCH_MISMATCH = "leader_epoch_mismatch"  # the cache gives a later epoch for them
LEADER_EPOCH_BACKWARDS = "leader_epoch_backwards"  # an epoch below one earlier in the log
# Note kinds: a cache entry at or past the log end offset, which the broker drops at load;
# batches before the cache's first entry, of no later epoch (a cache started after them)
LEADER_EPOCH_PAST_END = "leader_epoch_past_end"
LEADER_EPOCH_BEFORE_CACHE = "leader_epoch_before_cache"
# A note kind: an index whose log is gone as the broker removes a segment's files one at a time
BROKER_STATE = "broker_state"
# a .log whose bytes from position 0 are not a batch (not a segment: a text file, damage at its
# start): the indexes have nothing to point at, and a broker's recovery would empty it
NO_BATCH = "no_batch"

# -- a partition described (describe) ---------------------------------------------------------
INVALID_BYTES = "invalid_bytes"              # bytes that hold no batch: recovery cuts there
CRC_MISMATCH = "crc_mismatch"
UNREADABLE_RECORDS = "unreadable_records"    # a legacy wrapper whose messages cannot be read
OFFSET_ORDER = "offset_order"                # a batch's offsets out of place in its segment
SEGMENT_OVERLAP = "segment_overlap"          # a segment's offsets reach the next one's base
INDEX_SANITY = "index_sanity"                # OffsetIndex/TimeIndex.sanityCheck fails
RECOVERY_POINT_PAST_END = "recovery_point_past_end"
LOG_START_PAST_END = "log_start_past_end"
HIGH_WATERMARK_OUT_OF_RANGE = "high_watermark_out_of_range"
# notes
INDEX_MISSING = "index_missing"              # rebuilt by the broker at load
INDEX_ZERO_TAIL = "index_zero_tail"
LOG_START_BELOW_LOG = "log_start_below_log"
CLEANER_OFFSET_OUT_OF_RANGE = "cleaner_offset_out_of_range"
SNAPSHOT_PAST_END = "snapshot_past_end"
NO_SEGMENTS = "no_segments"


class Finding:
    """One finding: ``kind`` (above), a one-line ``message``, the ``file`` it is about, and the
    numbers behind it (``fields``). File names, and messages naming files, are kept as they may
    be printed: escaped, on one line."""

    __slots__ = ("kind", "message", "file", "fields")

    def __init__(self, kind: str, message: str, file: str, **fields: Any) -> None:
        self.kind = kind
        self.message = printable_name(message)
        self.file = printable_name(file)
        self.fields = fields

    def as_dict(self, type_name: str = "problem") -> Dict[str, Any]:
        """The finding as a JSON object of type ``type_name`` (its fields after the rest)."""
        out = {"type": type_name, "file": self.file, "kind": self.kind, "message": self.message}
        out.update(self.fields)
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Finding) and (self.kind, self.message, self.file, self.fields) \
            == (other.kind, other.message, other.file, other.fields)

    def __repr__(self) -> str:
        return "Finding(%r, %r, %r)" % (self.kind, self.message, self.file)
