"""`kafkalog dump` of the files beside the logs: indexes, snapshots, checkpoints.

Each function dumps one file through the writer and returns the exit status it earns
(0 clean, 1 invalid data found, 2 unreadable).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple

from .._lazy import lazy_module
from ..errors import EXIT_INVALID, EXIT_OK, EXIT_USAGE
from ..format.records import Batch
from ..log import files, names
from ..log.files import FileFormatError
from ..log.index import OffsetIndex, TimeIndex
from ..log.segment import DEFAULT_MAX_MESSAGE_SIZE, LogFile, Segment
from ..log.snapshot import parse_snapshot
from ..log.txnindex import TransactionIndex

# Read only when a file beside the logs is dumped: a dump of logs does without their imports.
if TYPE_CHECKING:
    from ..log import checkpoints, index_check, verify
    from ..log.findings import Finding
    from ..log.index_check import AnyIndex
else:
    checkpoints = lazy_module("kafkalog_cli.log.checkpoints")
    verify = lazy_module("kafkalog_cli.log.verify")
    index_check = lazy_module("kafkalog_cli.log.index_check")


class AuxWriter(Protocol):
    """What the dumps here need of a dump's writer (cli/render*.py)."""

    def begin_aux(self, path: str) -> None: ...

    def entry(self, kind: str, fields: Dict[str, Any]) -> None: ...

    def note(self, text: str) -> None: ...

    def warn(self, message: str) -> None: ...

    def problems(self, problems: Sequence[Finding]) -> None: ...

    def unreadable(self, problem: Finding) -> None: ...


class IndexOptions:
    def __init__(self, verify_only: bool = False, sanity_only: bool = False,
                 max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
        self.verify_only = verify_only
        self.sanity_only = sanity_only
        self.max_message_size = max_message_size
        self.is_active = files.ActiveSegments()  # each directory listed once per run


def _status(problems: Sequence[Finding]) -> int:
    return EXIT_INVALID if problems else EXIT_OK


def _open_log(path: str,
              max_message_size: int) -> Tuple[Optional[LogFile], Optional[Finding]]:
    log_path = names.sibling(path, names.LOG)
    if not os.path.lexists(log_path):
        return None, verify.missing_log(path, log_path)
    # a log that is not a regular file (a FIFO, a device) raises: unreadable input
    return LogFile(log_path, max_message_size), None


def _check(index: AnyIndex, log: LogFile) -> List[Finding]:
    """An index's entries checked against its log."""
    if isinstance(index, OffsetIndex):
        return index_check.check_offset_index(index, log)
    index_path = names.sibling(index.path, names.INDEX)
    try:
        oindex = OffsetIndex(index_path) if os.path.isfile(index_path) else None
    except (OSError, FileFormatError):
        oindex = None  # scanned from the start instead; the offset index tells its own error
    return index_check.check_time_index(index, oindex, log)


# kind: (reader, names of an entry's fields in print order)
_INDEXES: Dict[str, Tuple[Callable[[str], AnyIndex], Tuple[str, str]]] = {
    names.INDEX: (OffsetIndex, ("offset", "position")),
    names.TIMEINDEX: (TimeIndex, ("timestamp", "offset"))}


def _dump_index(kind: str, path: str, writer: AuxWriter, iopts: IndexOptions) -> int:
    """An offset or time index: its entries up to the zero tail, each checked against the log
    as DumpLogSegments checks them (or only the sanity check, or only the checks)."""
    reader, fields = _INDEXES[kind]
    index = reader(path)
    writer.begin_aux(files.printable_name(path))
    if kind == names.INDEX and index.slots == 0:
        # Kafka says so for an offset index only
        writer.note("%s is empty." % files.printable_name(path))
        return EXIT_OK
    if iopts.sanity_only:
        return _sanity(index, writer)
    shown = index
    if index.count == 0 and index.slots and getattr(writer, "kafka_index_view", False):
        # A pre-allocated index whose slot 0 is all zeros: DumpLogSegments reads slot 0 as an
        # entry (it stops at a zero slot only after the first: dumpIndex, dumpTimeIndex) and
        # prints and checks ``offset: <base> position: 0`` / ``timestamp: 0 offset: <base>``;
        # --format kafka prints what it prints (the broker, and every other output, see no
        # entry)
        shown = _slot_zero(index)
    status = EXIT_OK
    try:
        log, missing = _open_log(path, iopts.max_message_size)
    except OSError as e:
        # the log is named on its own when dumped; here: why the entries go unchecked
        writer.warn("%s: entries not checked: %s: %s" % (
            files.printable_name(path), files.printable_name(e.filename or "its log"),
            e.strerror or e))
        log, missing, status = None, None, EXIT_USAGE
    if log is not None:
        with log:
            if shown is not index and kind == names.INDEX and not _batch_at_start(log):
                # Kafka's tool stops the whole run here (NoSuchElementException: no batch
                # for slot 0's position 0); kafkalog shows no entry and goes on
                shown = index
            problems = _check(shown, log)
    else:
        problems = [missing] if missing is not None else []
        note = verify.broker_state_note(path) if missing is not None else None
        if note is not None:
            writer.warn("%s: %s" % (note.file, note.message))  # the broker's own state
            problems = []
    _note_zero_tail(index, path, writer, iopts)
    if not iopts.verify_only:
        for entry in shown.entries:
            writer.entry(kind, dict(zip(fields, entry)))
    writer.problems(problems)
    if shown is not index:
        # slot 0's findings are Kafka's reading of zeros, printed as it prints them; the index
        # is valid as the broker reads it
        return status
    return max(status, _status(problems))


def _slot_zero(index: AnyIndex) -> AnyIndex:
    """An index seen as DumpLogSegments sees one whose slot 0 is all zeros: that slot as its
    one entry (the index keeps slot 0's bytes when it has no entry)."""
    import copy  # here: only an index whose slot 0 is all zeros needs it
    shown = copy.copy(index)
    shown.count = 1
    return shown


def _batch_at_start(log: LogFile) -> bool:
    """Does a batch start at position 0 of ``log``, whole (what FileRecords.slice(0,
    maxMessageSize).batches() yields first)?"""
    return isinstance(Segment.at(log.path).batch_at(0, log), Batch)


def dump_index(path: str, writer: AuxWriter, iopts: IndexOptions) -> int:
    return _dump_index(names.INDEX, path, writer, iopts)


def dump_time_index(path: str, writer: AuxWriter, iopts: IndexOptions) -> int:
    return _dump_index(names.TIMEINDEX, path, writer, iopts)


def _note_zero_tail(index: AnyIndex, path: str, writer: AuxWriter,
                    iopts: IndexOptions) -> None:
    if index.zero_tail and not iopts.is_active(names.sibling(path, names.LOG)):
        writer.warn("%s: %s" % (files.printable_name(path), verify.zero_tail_note(index).message))


def _sanity(index: AnyIndex, writer: AuxWriter) -> int:
    problems = index_check.sanity_problems(index)
    if not problems:
        writer.note("%s passed sanity check." % files.printable_name(index.path))
    writer.problems(problems)
    return _status(problems)


def dump_txn_index(path: str, writer: AuxWriter, iopts: IndexOptions) -> int:
    txn = TransactionIndex(path)
    writer.begin_aux(files.printable_name(path))
    for e in txn.entries:
        writer.entry(names.TXNINDEX, {"version": e.version, "producerId": e.producer_id,
                                      "firstOffset": e.first_offset, "lastOffset": e.last_offset,
                                      "lastStableOffset": e.last_stable_offset})
    return EXIT_OK


def dump_snapshot(path: str, writer: AuxWriter, iopts: IndexOptions) -> int:
    data = files.read_sized(path)  # a file that cannot be read: no "Dumping" line
    writer.begin_aux(files.printable_name(path))
    for e in parse_snapshot(data):  # a corrupt one: after it, as Kafka's tool prints it
        fields: Dict[str, Any] = {"producerId": e.producer_id, "producerEpoch": e.epoch,
                  "coordinatorEpoch": e.coordinator_epoch,
                  "currentTxnFirstOffset": (e.current_txn_first_offset
                                            if e.current_txn_first_offset >= 0 else None),
                  "lastTimestamp": e.timestamp}
        if e.has_batch_metadata:
            fields.update(firstSequence=e.first_sequence, lastSequence=e.last_sequence,
                          lastOffset=e.last_offset, offsetDelta=e.offset_delta,
                          timestamp=e.timestamp)
        writer.entry(names.SNAPSHOT, fields)
    return EXIT_OK


def dump_offset_checkpoint(path: str, writer: AuxWriter, iopts: IndexOptions) -> int:
    # Read twice, one entry at a time: checked whole first (a malformed file prints nothing,
    # as CheckpointFile.read throws before any entry is used), then printed; no list of them.
    for _ in checkpoints.iter_offset_checkpoint(path):
        pass
    writer.begin_aux(files.printable_name(path))
    for topic, partition, offset in checkpoints.iter_offset_checkpoint(path):
        writer.entry(names.OFFSET_CHECKPOINT, {"topic": topic, "partition": partition,
                                               "offset": offset})
    return EXIT_OK


def dump_leader_epochs(path: str, writer: AuxWriter, iopts: IndexOptions) -> int:
    entries = checkpoints.read_leader_epochs(path)
    writer.begin_aux(files.printable_name(path))
    for epoch, start in entries:
        writer.entry(names.LEADER_EPOCHS, {"epoch": epoch, "startOffset": start})
    return EXIT_OK


def dump_partition_metadata(path: str, writer: AuxWriter, iopts: IndexOptions) -> int:
    version, topic_id = checkpoints.read_partition_metadata(path)
    writer.begin_aux(files.printable_name(path))
    writer.entry(names.PARTITION_METADATA, {"version": version, "topicId": topic_id})
    return EXIT_OK


DUMPERS: Dict[str, Callable[[str, AuxWriter, IndexOptions], int]] = {
    names.INDEX: dump_index, names.TIMEINDEX: dump_time_index,
    names.TXNINDEX: dump_txn_index, names.SNAPSHOT: dump_snapshot,
    names.OFFSET_CHECKPOINT: dump_offset_checkpoint, names.LEADER_EPOCHS: dump_leader_epochs,
    names.PARTITION_METADATA: dump_partition_metadata}


def dump_aux(kind: str, path: str, writer: AuxWriter, iopts: IndexOptions) -> int:
    """Dump a non-log file; a file that cannot be read as its kind is one line on stderr."""
    try:
        return DUMPERS[kind](path, writer, iopts)
    except FileFormatError as e:
        writer.unreadable(verify.unreadable(path, e))
        return EXIT_INVALID
    except MemoryError:
        # a file within its kind's size limit, but more than the memory left holds
        writer.warn("%s: too large to read into the memory available" % files.printable_name(path))
        return EXIT_USAGE
