"""What a recovery plan is made of: the changes (``Action``, one per file), the rule that chose
each segment's fate, a segment's report and a partition's plan (``PartitionPlan``), which
``recover.plan_partition`` fills, ``recover_run.execute`` carries out and the command renders."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Set, Tuple

from . import names


MOVE, RENAME, CUT, WRITE, REMOVE, SPLIT = "move", "rename", "cut", "write", "remove", "split"
EPOCHS = "epochs"  # the leader-epoch-checkpoint rewritten (a copy of the old one kept)


class Action:
    """One change: move a file to quarantine, rename a .swap into place, cut a .log (its tail
    saved to quarantine first), write a rebuilt index file, or split a .log whose offsets
    overflow into the segments ``pieces`` [(base offset, start, end)] (``split_segment``)."""

    __slots__ = ("kind", "name", "why", "target", "start", "end", "data", "pieces", "in_place")

    def __init__(self, kind: str, name: str, why: str, target: str = "", start: int = 0,
                 end: int = 0, data: bytes = b"",
                 pieces: Optional[List[Tuple[int, int, int]]] = None,
                 in_place: bool = False) -> None:
        self.pieces = pieces or []
        # MOVE: the file stays under its name until the next action (EPOCHS) replaces it (a
        # hard link to it is made in quarantine, not a rename: see ``plan_epochs_aside``)
        self.in_place = in_place
        self.kind = kind
        self.name = name      # file name inside the partition directory
        self.why = why
        self.target = target  # RENAME: the new name
        self.start = start    # CUT: keep [0, start), save [start, end)
        self.end = end
        self.data = data      # WRITE: the new contents


# Which of LogLoader's rules chose what happens to a segment (``SegmentReport.rule``).
RULE_FULL = "full"                             # --full: every segment recovered
RULE_RECOVERY_POINT = "recovery-point"         # from the segment holding the recovery point
RULE_BELOW = "below-recovery-point"            # sane (LogSegment.sanityCheck): kept, not read
RULE_CLEAN = "clean-shutdown"                  # the marker: no recovery of unflushed segments
RULE_NO_INDEX = "missing-index"                # sanityCheck: no .index, so recovered
RULE_TXN_BELOW_BASE = "txnindex-below-base"    # sanityCheck: CorruptIndexException, recovered
RULE_AFTER_CUT = "after-corrupt-segment"       # deleted by the broker after a truncation
RECOVERING = (RULE_FULL, RULE_RECOVERY_POINT, RULE_NO_INDEX, RULE_TXN_BELOW_BASE)
SANITY_RECOVERY = (RULE_NO_INDEX, RULE_TXN_BELOW_BASE)


class SegmentReport:
    """What recovery found and did for one segment, and which rule chose it (``rule``).
    ``records``, ``first_offset`` and ``next_offset`` describe the valid batches kept when the
    segment was read (None when it was not); ``bad_offset`` is the base offset of the first
    invalid batch when its header could be read; ``split_into`` the base offsets of the segments
    an offset overflow split it into."""

    __slots__ = ("name", "size", "kept", "first_bad", "reason", "index_entries",
                 "timeindex_entries", "txn_entries", "moved", "notes", "rule", "base_offset",
                 "records", "first_offset", "next_offset", "bad_offset", "split_into",
                 "indexes_replaced", "timeindex_created", "removed_records", "removed_first",
                 "removed_last", "torn_bytes", "torn_first", "torn_last", "torn_records")

    def __init__(self, name: str, size: int, rule: str = RULE_RECOVERY_POINT) -> None:
        self.name = name
        self.size = size
        self.kept = size
        self.first_bad: Optional[int] = None
        self.reason: Optional[str] = None
        self.index_entries: Optional[int] = None      # set when the indexes were rebuilt
        self.timeindex_entries: Optional[int] = None
        self.txn_entries: Optional[int] = None
        self.moved = False
        self.notes: List[str] = []     # things said, not changed (batches left unchecked)
        self.rule = rule
        self.base_offset = names.base_offset_from_name(name)
        self.records: Optional[int] = None
        self.first_offset: Optional[int] = None
        self.next_offset: Optional[int] = None
        self.bad_offset: Optional[int] = None
        self.split_into: List[int] = []
        self.indexes_replaced: List[str] = []   # kinds whose file the rebuilt one replaces
        self.timeindex_created = False
        # What the cut tail (or, for a segment set aside, the whole file) holds: the whole
        # batches' records and offset range (None: no whole batch), and the bytes after the
        # last of them that hold no batch (a torn write, garbage)
        self.removed_records = 0
        self.removed_first: Optional[int] = None
        self.removed_last: Optional[int] = None
        self.torn_bytes = 0
        # The batch those bytes are the start of, when its header can be read there (a write
        # torn by a crash): its offsets and record count, from the header, lost with it (None:
        # no such bytes, or no header to read: offsets unknown)
        self.torn_first: Optional[int] = None
        self.torn_last: Optional[int] = None
        self.torn_records: Optional[int] = None

    @property
    def cut(self) -> int:
        """Bytes removed: the tail cut, or the whole file of a segment set aside."""
        return self.size - self.kept

    @property
    def bytes_cut(self) -> int:
        """Bytes cut from the end of a segment kept (0 for one set aside whole)."""
        return 0 if self.moved else self.size - self.kept

    @property
    def bytes_set_aside(self) -> int:
        """The size of a segment set aside whole (0 for one kept)."""
        return self.size if self.moved else 0

    @property
    def recovered(self) -> bool:
        """Read batch by batch and its indexes rebuilt (LogSegment.recover)."""
        return self.rule in RECOVERING and not self.moved


class PartitionPlan:
    """Everything recovery changes in one partition directory (``actions``, in order), what it
    found per segment (``segments``), and what it only reports; the inputs LogLoader took
    (``recovery_point``: None when the checkpoint lists none; ``clean_shutdown``; ``full``) and
    the log end offset recovery leaves (None: no segment)."""

    def __init__(self, directory: str, recovery_point: Optional[int] = None,
                 clean_shutdown: bool = False, full: bool = False) -> None:
        self.directory = directory
        self.actions: List[Action] = []
        self.segments: List[SegmentReport] = []
        self.notes: List[Tuple[str, str]] = []   # (file name, text): found and reported, left alone
        self.blocked: Set[str] = set()  # Kafka names held by something that is not a regular file
        self.quarantine: Optional[str] = None  # the folder ``execute`` kept things in
        self.recovery_point = recovery_point
        self.clean_shutdown = clean_shutdown
        self.full = full
        self.log_end_offset: Optional[int] = None
        self.split: Optional[Action] = None   # a split planned: segments after it not planned
        self.splits: List[Tuple[str, List[int]]] = []  # splits carried out: (log, new bases)

    @property
    def changes(self) -> bool:
        return bool(self.actions)

    @property
    def bytes_cut(self) -> int:
        """Bytes cut from the segments kept (the segments moved away whole not counted)."""
        return sum(r.bytes_cut for r in self.segments)

    @property
    def bytes_set_aside(self) -> int:
        """Bytes of the segments set aside whole."""
        return sum(r.bytes_set_aside for r in self.segments)

    @property
    def segments_set_aside(self) -> int:
        return sum(1 for r in self.segments if r.moved)

    @property
    def records_removed(self) -> int:
        """Records of the whole batches cut or set aside."""
        return sum(r.removed_records for r in self.segments)

    @property
    def torn_records(self) -> int:
        """Records of the torn batches (their headers read) cut or set aside."""
        return sum(r.torn_records or 0 for r in self.segments)

    @property
    def torn_offsets(self) -> Optional[Tuple[int, int]]:
        """(first, last) offset of the torn batches whose headers were read (None: none)."""
        known = [(r.torn_first, r.torn_last) for r in self.segments
                 if r.torn_first is not None and r.torn_last is not None]
        return (min(a for a, _ in known), max(b for _, b in known)) if known else None

    @property
    def torn_unknown(self) -> int:
        """Torn tails (bytes holding no whole batch) whose batch header cannot be read."""
        return sum(1 for r in self.segments if r.torn_bytes and r.torn_first is None)

    @property
    def removed_offsets(self) -> Optional[Tuple[int, int]]:
        """(first, last) offset of the whole batches cut or set aside (None: none)."""
        firsts = [r.removed_first for r in self.segments if r.removed_first is not None]
        lasts = [r.removed_last for r in self.segments if r.removed_last is not None]
        return (min(firsts), max(lasts)) if firsts and lasts else None

    def add(self, kind: str, name: str, why: str, **kw: Any) -> None:
        self.actions.append(Action(kind, name, why, **kw))


# -- file names -----------------------------------------------------------------------------------

def file_base(name: str) -> int:
    """The offset a Kafka file's name starts with (one ``partition_file_kind`` knows)."""
    base = names.base_offset_from_name(name)
    if base is None:
        raise ValueError("%s: the name holds no offset" % name)
    return base




@dataclass
class RecoveryTotals:
    """What the plans of a recovery run add up to (a dry run's: would). ``segments_cut``:
    segments whose log was cut; ``torn_batches_known``: torn batches whose offsets are known
    (``torn_records`` records lost with them); ``torn_batches_offsets_unknown``: torn batches
    of unknown offsets; ``log_end_offsets``: (topic, partition, log end offset) of each
    partition that changed."""

    partitions: int = 0
    changed: int = 0
    records_removed: int = 0
    bytes_cut: int = 0
    segments_cut: int = 0
    segments_set_aside: int = 0
    bytes_set_aside: int = 0
    torn_records: int = 0
    torn_batches_known: int = 0
    torn_batches_offsets_unknown: int = 0
    log_end_offsets: List[Tuple[Optional[str], Optional[int], Optional[int]]] = field(
        default_factory=list)

    @classmethod
    def of(cls, plans: Sequence["PartitionPlan"]) -> "RecoveryTotals":
        return cls(
            partitions=len(plans),
            changed=sum(1 for p in plans if p.changes),
            records_removed=sum(p.records_removed for p in plans),
            bytes_cut=sum(p.bytes_cut for p in plans),
            segments_cut=sum(1 for p in plans for r in p.segments if r.bytes_cut),
            segments_set_aside=sum(p.segments_set_aside for p in plans),
            bytes_set_aside=sum(p.bytes_set_aside for p in plans),
            torn_records=sum(p.torn_records for p in plans),
            torn_batches_known=sum(1 for p in plans for r in p.segments
                                   if r.torn_first is not None),
            torn_batches_offsets_unknown=sum(p.torn_unknown for p in plans),
            log_end_offsets=[names.topic_partition(p.directory) + (p.log_end_offset,)
                             for p in plans if p.changes])
