"""What a recovery plan is made of: the changes (``Action``, one per file), the rule that chose
each segment's fate, a segment's report and a partition's plan (``PartitionPlan``), which
``recover.plan_partition`` fills, ``recover_run.execute`` carries out and the command renders."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Set, Tuple

from . import names
from .report import Report, field, report


MOVE, RENAME, CUT, WRITE, REMOVE, SPLIT = "move", "rename", "cut", "write", "remove", "split"
EPOCHS = "epochs"  # the leader-epoch-checkpoint rewritten (a copy of the old one kept)


@report
class Action(Report):
    """One change to a partition directory.

    ``kind``: MOVE a file to quarantine, RENAME a .swap into place, CUT a .log (its tail saved
    to quarantine first), WRITE a rebuilt index file, REMOVE a file, SPLIT a .log whose offsets
    overflow (``split_segment``), or rewrite the leader-epoch-checkpoint (EPOCHS); ``name``: the
    file's name inside the partition directory; ``why``: the reason, as reported; ``target``
    (RENAME): the new name; ``start``/``end`` (CUT, byte positions): keep [0, start), save
    [start, end); ``data`` (WRITE): the new contents; ``pieces`` (SPLIT): the segments it is
    split into, [(base offset, start, end)] (byte positions); ``in_place`` (MOVE): the file
    stays under its name until the next action (EPOCHS) replaces it (a hard link to it is made
    in quarantine, not a rename: see ``plan_epochs_aside``)."""

    kind: str
    name: str
    why: str
    target: str = ""
    start: int = 0
    end: int = 0
    data: bytes = b""
    pieces: List[Tuple[int, int, int]] = field(default_factory=list)
    in_place: bool = False


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


@report
class SegmentReport(Report):
    """What recovery found and did for one segment, and which rule chose it.

    ``name``: its .log file's name; ``size``: the .log's bytes; ``rule``: which of LogLoader's
    rules chose its fate (RULE_*); ``base_offset``: the offset its name holds (None: none).
    ``bytes_kept``: the bytes of the .log kept (``size`` unless its tail is cut; 0 when it is
    set aside); ``first_bad_position``: the byte position of the first invalid entry (None:
    none found); ``reason``: why that entry is invalid; ``first_bad_offset``: the base offset
    of that first invalid batch when its header could be read (None otherwise).
    ``index_entries``, ``timeindex_entries``, ``txn_entries``: the entries of the indexes
    rebuilt (None: not rebuilt); ``set_aside``: the segment is set aside whole; ``notes``: things
    said, not changed (batches left unchecked). ``records``, ``first_offset`` and
    ``next_offset`` describe the valid batches kept when the segment was read (None when it was
    not); ``split_into``: the base offsets of the segments an offset overflow split it into;
    ``indexes_replaced``: the kinds whose file the rebuilt one replaces; ``indexes_created``:
    the kinds rebuilt where there was no file; ``timeindex_created``:
    a .timeindex written where there was none. What the cut tail (or, for a segment set aside,
    the whole file) holds: ``removed_records``, ``first_offset_removed`` and
    ``last_offset_removed``, the whole batches' records and offset range (None: no whole batch),
    and ``torn_bytes``, the bytes after the last of them that hold no batch (a torn write,
    garbage). ``torn_first_offset``, ``torn_last_offset`` and ``torn_records``: the offsets and
    record count, from its header, of the batch those bytes are the start of, when its header
    can be read there (a write torn by a crash), lost with it (None: no such bytes, or no header
    to read: offsets unknown)."""

    name: str
    size: int
    rule: str = RULE_RECOVERY_POINT
    bytes_kept: int = field(init=False)
    first_bad_position: Optional[int] = None
    reason: Optional[str] = None
    index_entries: Optional[int] = None
    timeindex_entries: Optional[int] = None
    txn_entries: Optional[int] = None
    set_aside: bool = False
    notes: List[str] = field(default_factory=list)
    base_offset: Optional[int] = field(init=False)
    records: Optional[int] = None
    first_offset: Optional[int] = None
    next_offset: Optional[int] = None
    first_bad_offset: Optional[int] = None
    split_into: List[int] = field(default_factory=list)
    indexes_replaced: List[str] = field(default_factory=list)
    indexes_created: List[str] = field(default_factory=list)
    timeindex_created: bool = False
    removed_records: int = 0
    first_offset_removed: Optional[int] = None
    last_offset_removed: Optional[int] = None
    torn_bytes: int = 0
    torn_first_offset: Optional[int] = None
    torn_last_offset: Optional[int] = None
    torn_records: Optional[int] = None

    def __post_init__(self) -> None:
        self.bytes_kept = self.size
        self.base_offset = names.base_offset_from_name(self.name)

    @property
    def cut(self) -> int:
        """Bytes removed: the tail cut, or the whole file of a segment set aside."""
        return self.size - self.bytes_kept

    @property
    def bytes_cut(self) -> int:
        """Bytes cut from the end of a segment kept (0 for one set aside whole)."""
        return 0 if self.set_aside else self.size - self.bytes_kept

    @property
    def bytes_set_aside(self) -> int:
        """The size of a segment set aside whole (0 for one kept)."""
        return self.size if self.set_aside else 0

    @property
    def recovered(self) -> bool:
        """Read batch by batch and its indexes rebuilt (LogSegment.recover)."""
        return self.rule in RECOVERING and not self.set_aside


@report
class PartitionPlan(Report):
    """Everything recovery changes in one partition directory, what it found per segment, and
    what it only reports.

    ``directory``: the partition directory; the inputs LogLoader took: ``recovery_point`` (None
    when the checkpoint lists none), ``clean_shutdown`` (the marker was there), ``full`` (every
    segment recovered); ``actions``: the changes, in order; ``segments``: what was found per
    segment; ``notes``: (file name, text) found and reported, left alone; ``blocked``: the
    Kafka names held by something that is not a regular file; ``quarantine``: the folder
    ``execute`` kept things in (None: nothing carried out), ``files_kept`` the files (or a
    file's cut tail) it set aside there (0: it only lists files written); ``log_end_offset``:
    the log end offset recovery leaves (None: no segment); ``split``: a split planned (the
    segments after it are not planned; None: none); ``splits``: the splits carried out, (log
    name, new base offsets); ``compact_end_offset``: where an interrupted `kafkalog compact`
    pass ends, when recovery finishes it (its complete new segments swapped in, then their
    indexes and the cleaner checkpoint written; None: no such pass)."""

    directory: str
    recovery_point: Optional[int] = None
    clean_shutdown: bool = False
    full: bool = False
    actions: List[Action] = field(default_factory=list)
    segments: List[SegmentReport] = field(default_factory=list)
    notes: List[Tuple[str, str]] = field(default_factory=list)
    blocked: Set[str] = field(default_factory=set)
    quarantine: Optional[str] = None
    files_kept: int = 0
    log_end_offset: Optional[int] = None
    split: Optional[Action] = None
    splits: List[Tuple[str, List[int]]] = field(default_factory=list)
    compact_end_offset: Optional[int] = None

    @property
    def changes(self) -> bool:
        return bool(self.actions) or self.compact_end_offset is not None

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
        return sum(1 for r in self.segments if r.set_aside)

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
        known = [(r.torn_first_offset, r.torn_last_offset) for r in self.segments
                 if r.torn_first_offset is not None and r.torn_last_offset is not None]
        return (min(a for a, _ in known), max(b for _, b in known)) if known else None

    @property
    def torn_unknown(self) -> int:
        """Torn tails (bytes holding no whole batch) whose batch header cannot be read."""
        return sum(1 for r in self.segments if r.torn_bytes and r.torn_first_offset is None)

    @property
    def removed_offsets(self) -> Optional[Tuple[int, int]]:
        """(first, last) offset of the whole batches cut or set aside (None: none)."""
        firsts = [r.first_offset_removed for r in self.segments
                  if r.first_offset_removed is not None]
        lasts = [r.last_offset_removed for r in self.segments
                 if r.last_offset_removed is not None]
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




@report
class RecoveryTotals(Report):
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
                                   if r.torn_first_offset is not None),
            torn_batches_offsets_unknown=sum(p.torn_unknown for p in plans),
            log_end_offsets=[names.topic_partition(p.directory) + (p.log_end_offset,)
                             for p in plans if p.changes])
