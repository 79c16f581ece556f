"""verify-index: a segment's indexes checked against its log, as DumpLogSegments and the broker
do (the checks themselves: ``index_check``; the leader-epoch-checkpoint's: ``verify_epochs``).

``verify_segment`` checks one segment's indexes (its log's batch chain read once, when an index
first needs it), ``verify_target`` every index a path stands for, with the notes a live or
crashed broker's directory calls for.
"""

from __future__ import annotations

import os
from typing import (Callable, Dict, Iterable, Iterator, List, Optional, Protocol, Sized,
                    Tuple, TypeVar, Union)

from ..errors import KafkalogError, UsageError
from ..format.records import Batch
from ..format.scan import ZERO_FILL
from . import files, names
from .files import (ActiveSegments, FileChangedError, FileFormatError, Found, expand,
                    printable_name)
from .findings import (BROKER_STATE, MISSING_INDEX, MISSING_INDEX_NOTE, MISSING_LOG,
                       MISSING_TIME_INDEX_NOTE, NO_BATCH, SANITY, UNREADABLE, ZERO_TAIL,
                       Finding)
from .index import OffsetIndex, TimeIndex
from .index_check import (AnyIndex, BatchChain, FileReport, check_offset_index, check_time_index,
                          check_txn_index, sanity_problems)
from .segment import DEFAULT_MAX_MESSAGE_SIZE, LogFile, Segment
from .txnindex import TransactionIndex
from .verify_epochs import LeaderEpochCheck


class _HasEntries(Protocol):
    @property
    def entries(self) -> Sized: ...


_I = TypeVar("_I", bound=_HasEntries)


def _open_index(kind: str, path: str,
                reader: Callable[[str], _I]) -> Tuple[Optional[_I], FileReport]:
    """An index file read (None when it cannot be), and its report so far: an OSError is
    unreadable input (``error``), a malformed file a problem."""
    try:
        index = reader(path)
    except OSError as e:
        note = vanished_note(path, e)
        if note is not None:
            return None, FileReport(path, kind, notes=[note])
        return None, FileReport(path, kind, error=e)
    except FileFormatError as e:
        return None, FileReport(path, kind, problems=[unreadable(path, e)])
    return index, FileReport(path, kind, len(index.entries))


class _SegmentCheck:
    """The checks of one segment's indexes against its log (``log``: None when the segment
    has no .log), the log's batch chain read once, when an index first needs it."""

    def __init__(self, segment: Segment, log: Optional[LogFile], active: bool,
                 sanity_only: bool) -> None:
        self.segment = segment
        self.log = log
        self.active = active
        self.sanity_only = sanity_only
        self._chain: Optional[BatchChain] = None

    def chain(self, log: LogFile) -> BatchChain:
        if self._chain is None:
            self._chain = BatchChain(log)
        return self._chain

    def offset_and_time_indexes(self) -> List[FileReport]:
        """The .index, then the .timeindex (its entries are found from the offset index's)."""
        reports = []
        oindex = None
        readers: Tuple[Tuple[str, Callable[[str], AnyIndex]], ...] = (
            (names.INDEX, OffsetIndex), (names.TIMEINDEX, TimeIndex))
        for kind, reader in readers:
            path = self.segment.file(kind)
            if not os.path.lexists(path):
                report = (self.missing_offset_index(path) if kind == names.INDEX
                          else self.missing_time_index(path))
                if report is not None:
                    reports.append(report)
                continue
            index, report = _open_index(kind, path, reader)
            reports.append(report)
            if index is None:
                continue
            if isinstance(index, OffsetIndex):
                oindex = index
            self._check_index(index, oindex, report)
        return reports

    def missing_time_index(self, path: str) -> Optional[FileReport]:
        """A note on a live segment's missing .timeindex: the broker's load creates it empty and
        goes on (LogSegment.sanityCheck), without recovering the segment; the segment's time
        lookups then find nothing in it, and time retention falls back to the .log's
        modification time (LogSegment.largestTimestamp). None when there is nothing to say."""
        if self.log is None or self.segment.suffix or not os.path.lexists(self.segment.log_path):
            return None
        log_name = files.printable_name(os.path.basename(self.segment.log_path))
        note = Finding(MISSING_TIME_INDEX_NOTE,
            "the segment %s has no time index: a broker's load creates it empty "
            "(time retention of the segment then goes by the file's modification "
            "time); kafkalog recover --full rebuilds it" % log_name, path)
        return FileReport(path, names.TIMEINDEX, notes=[note])

    def missing_offset_index(self, path: str) -> Optional[FileReport]:
        """The report on a live segment's missing .index (None: nothing to say): the broker's
        load recovers such a segment (LogSegment.sanityCheck, LogLoader.loadSegmentFiles)."""
        if self.log is None or self.segment.suffix or not os.path.lexists(self.segment.log_path):
            # no log (nothing to index), or a segment being deleted, cleaned or swapped, whose
            # files go one at a time
            return None
        log_name = files.printable_name(os.path.basename(self.segment.log_path))
        if self.active:
            note = Finding(MISSING_INDEX_NOTE,
                "the active segment %s has no offset index: a broker's load recovers "
                "the segment and rebuilds it" % log_name, path)
            return FileReport(path, names.INDEX, notes=[note])
        problem = Finding(MISSING_INDEX,
            "the offset index of the sealed segment %s is missing: a broker's "
            "load recovers the segment to rebuild it (kafkalog recover does the "
            "same)" % log_name, path)
        return FileReport(path, names.INDEX, problems=[problem])

    def _check_index(self, index: AnyIndex, oindex: Optional[OffsetIndex],
                     report: FileReport) -> None:
        if index.zero_tail and not self.active:
            report.notes.append(zero_tail_note(index))
        checked = index.trimmed() if self.active and not self.sanity_only else index
        report.problems.extend(sanity_problems(checked))
        if self.sanity_only:
            return
        if self.log is None:
            note = broker_state_note(index.path)
            if note is not None:
                report.notes.append(note)
            else:
                report.problems.append(missing_log(index.path, self.segment.log_path))
        elif isinstance(index, OffsetIndex):
            report.problems.extend(check_offset_index(index, self.log, self.chain(self.log)))
        else:
            report.problems.extend(check_time_index(index, oindex, self.log,
                                                    header_timestamps=True,
                                                    chain=self.chain(self.log)))

    def log_without_batch(self) -> Optional[FileReport]:
        """A report on the .log when bytes at its position 0 are not a batch (the file holds no
        batch at all: LogSegment.recover would truncate it to nothing), None otherwise: an empty
        .log, one that starts with a batch, an active segment's zeros (a pre-allocated file,
        log.preallocate), or a segment being deleted, cleaned or swapped (not a live one)."""
        log = self.log
        if (log is None or self.sanity_only or self.segment.suffix or log.size == 0
                or len(self.chain(log).positions)):
            return None
        first = next(iter(log.entries(0)), None)
        if first is None or isinstance(first, Batch):
            return None
        if first.kind == ZERO_FILL and self.active:
            return None
        path = self.segment.log_path
        problem = Finding(NO_BATCH,
            "%s holds no batch: its %d bytes from position 0 are not a batch (%s)"
            % (files.printable_name(os.path.basename(path)), log.size, first.reason), path,
            position=0, bytes=log.size)
        return FileReport(path, names.LOG, 0, [problem])

    def txn_index(self) -> Optional[FileReport]:
        """The .txnindex's report; for a segment without one, a report only when the log has
        aborted transactions it should list."""
        path = self.segment.txn_index_path
        if os.path.lexists(path):
            txn, report = _open_index(names.TXNINDEX, path, TransactionIndex)
            if txn is not None:
                report.problems.extend(Finding(SANITY,
                    m, path) for m in txn.sanity_problems())
                if not self.sanity_only and self.log is not None:
                    report.problems.extend(check_txn_index(txn, self.log))
            return report
        if self.sanity_only or self.log is None or self.segment.suffix:
            # a segment being deleted, cleaned or swapped has its files renamed and removed one
            # at a time (LogSegment.changeFileSuffixes, deleteIfExists): one may be gone
            return None
        # The broker creates the file with the first aborted transaction: none, no file.
        problems = check_txn_index(TransactionIndex.empty(path), self.log)
        return FileReport(path, names.TXNINDEX, 0, problems) if problems else None


def verify_segment(segment: Segment, active: bool, sanity_only: bool = False,
                   max_message_size: Optional[int] = None,
                   epochs: Optional["LeaderEpochCheck"] = None) -> List[FileReport]:
    """Check the .index, .timeindex and .txnindex of ``segment`` (those that exist).

    ``active``: the partition's last segment, whose indexes a live or crashed broker leaves
    pre-allocated; their zero tail is trimmed before the sanity check, as the broker trims it on
    close. Anywhere else a zero tail is reported (a crash can leave one: KAFKA-19200), and with
    ``sanity_only`` the broker's start-up check runs on the file exactly as it is.

    ``epochs``: the partition's leader epoch check, given this segment's batches (read once,
    with the indexes' checks) when the segment is live and its log is sound to the end of
    the checks.

    Raises OSError when the log exists but cannot be opened as a regular file, and
    FileChangedError when it is truncated or replaced before the checks end (the findings
    would mix two files); an index that cannot be read is a report with ``error`` set, and
    the others are still checked.
    """
    # lexists: a symlink to a device or a FIFO is refused by the reader, not taken for no log
    log = (segment.open(max_message_size or DEFAULT_MAX_MESSAGE_SIZE)
           if os.path.lexists(segment.log_path) else None)
    try:
        check = _SegmentCheck(segment, log, active, sanity_only)
        no_batch = check.log_without_batch()
        reports = ([] if no_batch is None else [no_batch]) + check.offset_and_time_indexes()
        txn = check.txn_index()
        feed = (epochs is not None and log is not None and not sanity_only
                and not segment.suffix)
        chain = check.chain(log) if feed and log is not None else None
        if log is not None:
            # The indexes were read by name after the log was opened: a log truncated or
            # replaced meanwhile (retention, the cleaner's swap, a copy put in place) was
            # compared with indexes that are not its own. A segment already being deleted,
            # cleaned or swapped whose log is gone was finished by the broker (its .log goes
            # first): what was read of it is its own.
            try:
                log.check_unchanged()
            except FileChangedError:
                if not segment.suffix or os.path.lexists(segment.log_path):
                    raise
        if epochs is not None and chain is not None:
            epochs.add_segment(segment.base_offset, chain, active)
        return reports if txn is None else reports + [txn]
    finally:
        if log is not None:
            log.close()


def zero_tail_note(index: AnyIndex) -> Finding:
    """A note on an index of a sealed segment that still has a zero tail."""
    return Finding(ZERO_TAIL,
        "%d zero-filled slots after the %d real entries of a sealed segment's index%s"
        % (index.zero_tail, index.count,
           " (left at its full pre-allocated size, as a crash can leave it: KAFKA-19200)"
           if index.preallocated else ""), index.path)


def unreadable(path: str, error: BaseException) -> Finding:
    """A Finding for a file that cannot be read at all."""
    if isinstance(error, OSError):
        message = "%s" % (error.strerror or error)
    else:
        message = str(error)
        prefix = path + ": "
        if message.startswith(prefix):
            message = message[len(prefix):]
    return Finding(UNREADABLE,
        message, path)


def broker_state_note(path: str) -> Optional[Finding]:
    """A note when the index ``path``, whose .log is missing, is one of the broker's own
    in-between states rather than damage, else None.

    LocalLog.deleteSegmentFiles renames every file of a segment to ``.deleted``
    (LogSegment.changeFileSuffixes: the .log first, then .index, .timeindex, .txnindex) and
    removes them after file.delete.delay.ms (LogSegment.deleteIfExists: the .log first again),
    so any of the renamed indexes may outlive the log; the cleaner and a segment split rename
    ``.cleaned`` to ``.swap`` and ``.swap`` to the live name the same way, and LogLoader deletes
    or completes what a crash leaves of them at start-up. A live index whose .log already bears
    a lifecycle suffix is caught in the middle of such a rename.
    """
    name = os.path.basename(path)
    suffix = names.lifecycle_suffix(name)
    log_name = os.path.basename(names.sibling(path, names.LOG))
    if suffix == names.DELETED:
        why = ("the broker is deleting this segment: it renames each of its files to .deleted "
               "and removes them one at a time, the .log first (LocalLog.deleteSegmentFiles)")
    elif suffix:
        why = ("a %s file the log cleaner or a segment split leaves until it is swapped in or "
               "LogLoader removes it at start-up" % suffix)
    else:
        renamed = [log_name + s for s in names.LIFECYCLE_SUFFIXES
                   if os.path.lexists(os.path.join(os.path.dirname(path), log_name + s))]
        if not renamed:
            return None
        why = ("its log is named %s: the broker is renaming this segment's files, the .log "
               "first (LogSegment.changeFileSuffixes)" % renamed[0])
    return Finding(BROKER_STATE,
        "no log file %s beside it: %s; "
        "entries not checked" % (log_name, why), path)


def vanished_note(path: str, error: OSError) -> Optional[Finding]:
    """A note when ``path``, a file of a segment being deleted, cleaned or swapped (a
    lifecycle suffix), was gone by the time it was read (``error``: ENOENT), as the broker
    removes such files (LogSegment.deleteIfExists after file.delete.delay.ms, LogLoader at
    start-up); None for any other file or error."""
    suffix = names.lifecycle_suffix(os.path.basename(path))
    if not suffix or not isinstance(error, FileNotFoundError):
        return None
    return Finding(BROKER_STATE,
        "removed before it could be read, as the broker removes "
        "%s files: not checked" % suffix, path)


def missing_log(path: str, log_path: str) -> Finding:
    return Finding(MISSING_LOG,
        "no log file %s beside it: entries not checked (the broker "
        "deletes such an index)" % os.path.basename(log_path), path)


# -- what a path given to verify-index stands for ------------------------------------------------

CHECKED_KINDS = (names.LOG, names.INDEX, names.TIMEINDEX, names.TXNINDEX)


class TargetError:
    """A path, or a file or directory it stands for, that could not be checked: ``error`` says
    why (an OSError, or a KafkalogError whose message names the file)."""

    __slots__ = ("path", "error")

    def __init__(self, path: str, error: BaseException) -> None:
        self.path = path
        self.error = error


def partition_targets(path: str) -> "Iterator[Union[str, TargetError]]":
    """The partition directories ``path`` stands for (a .log file's partition, a partition
    directory, every partition of a log directory), after a TargetError for each that cannot
    be read (and for ``path`` itself when it cannot). Raises UsageError for a file that is not
    a segment."""
    from .logdir import partitions_of
    errors: List[Tuple[str, OSError]] = []
    try:
        directories = partitions_of(path, errors)
    except OSError as e:
        directories = []
        errors.append((path, e))
    for where, error in errors:
        yield TargetError(where, error)
    yield from directories


class UnknownFile:
    """A file met in a directory with a Kafka suffix on a name Kafka does not give: nobody's
    segment or index, not checked."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path


def segments_to_check(found: Iterable[Found]) -> List[Tuple[Segment, bool, Optional[str]]]:
    """(segment, active, only) per segment to check: ``only`` is the one index file asked
    for, or None for all of the segment's indexes. From a directory, each segment once (and an
    index whose log is missing, to report it)."""
    out: List[Tuple[Segment, bool, Optional[str]]] = []
    is_active = ActiveSegments()
    for f in found:
        segment = Segment.at(f.path)
        if f.kind == names.LOG:
            out.append((segment, is_active(segment.log_path), None))
        elif f.kind in CHECKED_KINDS and (f.explicit or not os.path.lexists(segment.log_path)):
            out.append((segment, is_active(segment.log_path), f.path))
    return out


def verify_target(path: str, sanity_only: bool = False,
                  max_message_size: Optional[int] = None
                  ) -> Iterator[Union[FileReport, TargetError, UnknownFile]]:
    """Verify the indexes ``path`` stands for (an index or log file, a partition directory, a
    log directory): a FileReport per index file checked, in order, and, as they are met, a
    TargetError for what cannot be checked and an UnknownFile for what is not checked."""
    try:
        found = expand(path)
    except OSError as e:  # NoSegmentsError too: its message names the path
        yield TargetError(path, e)
        return
    if len(found) == 1 and found[0].explicit and found[0].kind not in CHECKED_KINDS:
        yield TargetError(path, UsageError("%s: not a log or index file" % printable_name(path)))
        return
    checked = []
    # partition directories holding a leader-epoch-checkpoint, in order
    epoch_dirs: List[str] = []
    for f in found:
        if f.error is not None:
            yield TargetError(f.path, f.error)  # a partition directory that cannot be read
        elif f.kind is None and names.file_kind(f.path) in CHECKED_KINDS:
            yield UnknownFile(f.path)
        elif f.kind in CHECKED_KINDS:
            checked.append(f)
        elif f.kind == names.LEADER_EPOCHS and not f.explicit:
            epoch_dirs.append(os.path.dirname(f.path))
    # The leader epoch check of a partition is given the batches of its live segments, each
    # read once with its indexes' checks; its report follows the partition's segments'.
    started: Dict[str, Optional[LeaderEpochCheck]] = {}
    current: Optional[LeaderEpochCheck] = None
    for segment, active, only in segments_to_check(checked):
        directory = os.path.dirname(segment.log_path)
        if current is not None and current.directory != directory:
            yield current.report()
            current = None
        if only is None and directory not in started:
            # a segment's .log, named or met in its partition directory
            current = started[directory] = LeaderEpochCheck.of(directory, sanity_only)
        epochs = current if only is None and current is not None and current.judging else None
        try:
            reports = verify_segment(segment, active, sanity_only, max_message_size, epochs)
        except OSError as e:
            where = e.filename or segment.log_path
            note = vanished_note(where, e)
            if note is not None:
                yield FileReport(where, names.file_kind(where) or names.LOG, notes=[note])
            else:
                yield TargetError(where, e)
            continue
        except MemoryError:
            # findings by the million (an index of garbage as large as Kafka allows)
            yield TargetError(only or segment.log_path, KafkalogError(
                "%s: too many findings to hold in the memory available"
                % printable_name(only or segment.log_path)))
            continue
        for report in reports:
            if only is None or report.path == only:
                yield report
    if current is not None:
        yield current.report()
    for directory in epoch_dirs:
        if directory not in started:  # a partition with no segment to check
            check = LeaderEpochCheck.of(directory, sanity_only)
            if check is not None:
                yield check.report()


__all__ = ["FileFormatError", "FileReport", "LeaderEpochCheck", "TargetError",
           "UnknownFile",
           "broker_state_note", "check_offset_index", "check_time_index", "check_txn_index",
           "sanity_problems", "vanished_note",
           "verify_segment", "verify_target"]
