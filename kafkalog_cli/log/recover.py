"""Offline recovery of a partition: what a broker does when it loads a log directory
(LogManager.loadLogs, LogLoader.load of each partition, LogSegment.recover of its segments),
losing nothing.

Which segments are recovered follows LogLoader:

* Without the log directory's clean-shutdown marker (``.kafka_cleanshutdown``), every segment
  from the one holding the partition's recovery point (``recovery-point-offset-checkpoint``; a
  partition it does not list, or no such file: offset 0, every segment) to the last is
  validated batch by batch and has all its indexes (offset, time, transaction) rebuilt, whatever
  they look like: a file that differs from the rebuilt one by a byte is replaced. A cut there
  sets the later segments aside, as the broker deletes them.
* The segments below it (all of them after a clean shutdown) get LogSegment.sanityCheck's
  treatment only: no ``.index`` or a ``.txnindex`` entry below the base offset sends the segment
  to recovery (a cut then leaves the later segments where they are, as LogLoader's
  loadSegmentFiles does); a missing ``.timeindex`` is created empty. Nothing else is read.
* ``full`` recovers every segment, whatever the marker and the checkpoint say.
* A recovered segment whose offsets do not fit 32-bit offsets relative to its base is split
  (LocalLog.splitOverflowedSegment), not cut: see ``split_segment``.

Afterwards the recovery point is written back at the log end offset (``LogDirRecovery``, in
``recover_run``): every
batch below it has been validated, or was below the recovery point already, and the validated
logs are flushed before the checkpoint says so.

The clean-shutdown marker, offline. The broker deletes it when it starts loading a directory and
writes it again at a clean shutdown, if every log finished loading. A run that changes nothing
leaves it as it is. A run about to change a partition deletes it first (flushed), and writes it
back (the same bytes) only once every partition of the run was carried out without an error: a
run killed half-way, or one that failed on a partition, leaves no marker, so the broker does a
full recovery instead of trusting a directory we could not finish. The marker is the one file
removed without a copy in quarantine: it holds nothing but the fact of a clean shutdown (and a
broker epoch), and its loss only costs the broker a longer start. A run never creates a marker
that was not there: a clean shutdown is the broker's to state.

``plan_partition`` reads a partition directory and decides (each recovered segment read by
``recovery_scan``); ``recover_run.execute`` carries the plan out; ``recover_run.recover_partition``
does both. Everything removed (files, and the bytes cut from a .log) goes
verbatim into a quarantine folder inside the partition directory, which a broker ignores (it
only loads files); a file written where there was none is recorded there too (its hash), so
that ``kafkalog quarantine restore`` can take it away again. The steps are ordered so that a
crash at any moment leaves a state from which running again finishes the job: later segments
are moved away before the corrupt one is cut (so a rerun still sees why they must go), cut
bytes are saved before the log is truncated, and index files are written through temporary
files that are flushed and renamed into place. No step
replaces a file: every rename refuses an existing destination (``indexbuild.rename_noreplace``),
each run's quarantine folder is new, and each file set aside there gets a name of its own
(``Quarantine``).
"""

from __future__ import annotations

import errno
import os
import time
from typing import Dict, List, Optional, Set, Tuple

from ..errors import KafkalogError
from ..format.validity import batch_problem
from . import names
from .names import partition_file_kind
from .files import printable_name
from .index import OffsetIndex, TimeIndex
from .leader_epochs import LeaderEpochCache
from .producer_state import ProducerState
from .indexbuild import (DEFAULT_INDEX_INTERVAL, fsync_dir, rename_noreplace,
                         txn_index_bytes)
from .snapshot import read_snapshot
from .quarantine import copy_range
from .replace_segments import new_segments_found, read_intent
from .segment import BATCH_LIMIT_FACTOR, DEFAULT_MAX_MESSAGE_SIZE, Segment
from .recover_plan import (CUT, MOVE, RECOVERING, REMOVE, RENAME, RULE_AFTER_CUT, RULE_BELOW,
                           RULE_CLEAN, RULE_FULL, RULE_NO_INDEX, RULE_RECOVERY_POINT,
                           RULE_TXN_BELOW_BASE, SANITY_RECOVERY, SPLIT, WRITE, PartitionPlan,
                           SegmentReport, file_base)
from .recover_state import (epochs_text, load_leader_epochs, plan_epochs_aside,
                            plan_leader_epochs, plan_log_start_reset, plan_snapshots,
                            rebuilt_leader_epochs)
from .recovery_scan import (SegmentScan, count_removed, same_index, same_txn_index,
                            txn_below_base, update_producer_state)

# -- planning a partition (LogLoader) --------------------------------------------------------

def _is_segment_swap(name: str) -> bool:
    """A .swap of a numbered segment's log or index file (the names the log cleaner and the
    segment split give files they are about to swap in)."""
    return (names.lifecycle_suffix(name) == names.SWAP
            and partition_file_kind(name) in names.SEGMENT_KINDS)


def _plan_odd_files(plan: PartitionPlan, entries: List[str]) -> List[str]:
    """What is not a regular file under a Kafka name (blocked: left alone, never written over),
    our own temporary files (removed), names Kafka does not give (reported). Returns the other
    regular files."""
    directory = plan.directory
    regular = [n for n in entries if os.path.isfile(os.path.join(directory, n))]
    # A FIFO, a device, a directory or a dangling symlink under a Kafka file's name: left
    # alone, and never written over (its segment's index is not rebuilt under that name).
    for n in entries:
        if partition_file_kind(n) is not None and not os.path.isfile(os.path.join(directory, n)):
            plan.blocked.add(n)
            plan.notes.append((n, "not a regular file: left alone"))
    for n in regular:
        if n.endswith(names.TMP_SUFFIX):
            plan.add(REMOVE, n, "temporary file of an interrupted kafkalog write")
    regular = [n for n in regular if not n.endswith(names.TMP_SUFFIX)]
    for n in regular:
        if (partition_file_kind(n) is None and not n.startswith(".")
                and not names.lifecycle_suffix(n) and not names.is_kraft_state_file(n)):
            plan.notes.append((n, "not a name Kafka gives a file (no segment's): left alone"))
    return regular


def _plan_leftovers(plan: PartitionPlan, regular: List[str], vouched: Set[str]
                    ) -> Tuple[Dict[str, str], List[str]]:
    """LogLoader's first pass: .deleted and .cleaned files, and .swap files of a split that did
    not finish; index .swap files without their segment's .log.swap. ``vouched``: the .cleaned
    files of an interrupted `kafkalog compact` pass whose intent vouches for them, swapped in
    as .swap files are. Returns the file names as they will be once the plan is carried out,
    each mapped to the name it has now, and the .swap (and vouched) files still to be renamed
    into place."""
    view = {n: n for n in regular}
    for n in regular:
        if names.lifecycle_suffix(n) == names.DELETED and not n.endswith(
                ".checkpoint" + names.DELETED):
            plan.add(MOVE, n, "left by the broker for deletion (.deleted)")
            del view[n]
    cleaned = [n for n in regular
               if names.lifecycle_suffix(n) == names.CLEANED and n not in vouched]
    min_cleaned = min((b for b in map(names.base_offset_from_name, cleaned) if b is not None),
                      default=None)
    swaps = sorted(vouched)
    for n in regular:
        if names.lifecycle_suffix(n) != names.SWAP:
            continue
        if not _is_segment_swap(n):
            plan.notes.append((n, "a .swap name the broker does not write: left alone"))
            continue
        if min_cleaned is not None and file_base(n) >= min_cleaned:
            plan.add(MOVE, n, "swap file of a segment split that did not finish")
            del view[n]
        else:
            swaps.append(n)
    for n in cleaned:
        plan.add(MOVE, n, "log cleaner output that was never swapped in (.cleaned)")
        del view[n]
    log_swap_bases = {file_base(n) for n in swaps if partition_file_kind(n) == names.LOG}
    for n in list(swaps):
        if file_base(n) not in log_swap_bases:
            # Not part of a segment swap: renaming it would replace the segment's index with
            # one nothing vouches for. Set aside; the index is checked and rebuilt if wrong.
            plan.add(MOVE, n, "index .swap without its segment's .log.swap (the broker's loader "
                     "deletes it and rebuilds the index)")
            del view[n]
            swaps.remove(n)
    return view, swaps


def _swap_range(directory: str, log_swaps: List[str]) -> Tuple[int, int]:
    """[min base, max next offset) of the swap segments."""
    low = high = None
    for n in log_swaps:
        base = nxt = file_base(n)
        for batch in Segment.at(os.path.join(directory, n)).batches():
            nxt = batch.last_offset + 1
        low = base if low is None else min(low, base)
        high = nxt if high is None else max(high, nxt)
    assert low is not None and high is not None  # log_swaps is not empty
    return low, high


def _plan_swaps(plan: PartitionPlan, view: Dict[str, str], swaps: List[str]) -> None:
    """LogLoader's second and third passes: the segments a swap replaces go, then the .swap
    files are renamed into place."""
    if any(names.without_lifecycle_suffix(n) in plan.blocked for n in swaps):
        for n in swaps:
            plan.notes.append((n, "swap not completed: a file that is not a regular file holds "
                                  "a name it would take"))
        return
    log_swaps = [n for n in swaps if partition_file_kind(n) == names.LOG]
    if log_swaps:
        # The segments the swap replaces go (any file whose name starts with an offset in the
        # swap's range, snapshots too).
        low, high = _swap_range(plan.directory, log_swaps)
        for n in sorted(view):
            base = names.base_offset_from_name(n)
            if (not names.lifecycle_suffix(n) and base is not None and low <= base < high
                    and partition_file_kind(n) is not None):
                plan.add(MOVE, n, "replaced by the swap segment covering offsets %d-%d"
                         % (low, high - 1))
                del view[n]
    # The .swap files renamed into place, the .log.swap first (once it is in place, the
    # segment's index .swap files are plain renames). A file still holding the final name is
    # set aside first: nothing is replaced.
    for n in sorted(swaps, key=lambda n: partition_file_kind(n) != names.LOG):
        final = names.without_lifecycle_suffix(n)
        if final in view:
            plan.add(MOVE, final, "replaced by %s (completing a swap)" % printable_name(n))
            del view[final]
        plan.add(RENAME, n, "completing a swap the broker had started", target=final)
        view[final] = view.pop(n)


def _plan_orphan_indexes(plan: PartitionPlan, view: Dict[str, str], logs: List[int]) -> None:
    """Index files of no segment go, as the broker deletes them (a log that is not a regular
    file still has its indexes)."""
    bases = set(logs) | {file_base(n) for n in plan.blocked if names.is_live_log(n)}
    for n in sorted(view):
        if (partition_file_kind(n) in (names.INDEX, names.TIMEINDEX, names.TXNINDEX)
                and not names.lifecycle_suffix(n) and file_base(n) not in bases):
            plan.add(MOVE, n, "index without a log (the broker deletes it)")
            del view[n]


class SymlinkCutError(KafkalogError, OSError):
    """A segment to be cut is a symlink: recover refuses the partition, changing nothing."""


def plan_partition(directory: str, interval: int = DEFAULT_INDEX_INTERVAL,
                   max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                   recovery_point: Optional[int] = None, clean_shutdown: bool = False,
                   full: bool = False, log_start_offset: Optional[int] = None) -> PartitionPlan:
    """Everything recovery would change in ``directory``, with a report per segment.
    ``recovery_point``: the partition's entry in recovery-point-offset-checkpoint (None: it has
    none, recovery starts at the first segment); ``clean_shutdown``: the log directory holds
    the clean-shutdown marker; ``full``: recover every segment regardless;
    ``log_start_offset``: its entry in log-start-offset-checkpoint (None: it has none)."""
    plan = PartitionPlan(directory, recovery_point, clean_shutdown, full)
    regular = _plan_odd_files(plan, sorted(os.listdir(directory)))
    vouched: Set[str] = set()
    intent = read_intent(directory)
    if intent is not None and new_segments_found(directory, intent):
        # an interrupted `kafkalog compact` pass whose new segments are all complete: finished
        # (swapped in, then their indexes and the cleaner checkpoint written by recover_partition)
        plan.compact_end_offset = intent.end_offset
        vouched = {n for n in regular if names.lifecycle_suffix(n) == names.CLEANED
                   and partition_file_kind(n) in names.SEGMENT_KINDS
                   and file_base(n) in intent.bases}
    view, swaps = _plan_leftovers(plan, regular, vouched)
    _plan_swaps(plan, view, swaps)
    # Names are Kafka's (a 20-digit offset), so each log has a base offset of its own.
    logs = names.live_log_bases(view)
    _plan_orphan_indexes(plan, view, logs)
    epochs, unloadable = load_leader_epochs(plan, view)
    before = list(epochs.entries) if epochs is not None else []
    known = _plan_segments(plan, view, logs, interval, max_message_size, epochs)
    if plan.split is None and log_start_offset is not None and (
            plan.log_end_offset is None or plan.log_end_offset < log_start_offset):
        plan_log_start_reset(plan, view, log_start_offset, epochs, unloadable)
        return plan
    if unloadable is not None and plan.split is None:
        rebuilt = rebuilt_leader_epochs(plan, view, max_message_size, log_start_offset)
        plan_epochs_aside(plan, unloadable, rebuilt, "rebuilt from the log: %s (the entries "
                           "LeaderEpochFileCache.assign gives every v2 batch from the log start, "
                           "truncated at the log end offset %s)"
                           % (epochs_text(rebuilt), plan.log_end_offset))
    elif epochs is not None and plan.split is None:
        plan_leader_epochs(plan, view, epochs, before, log_start_offset)
    if plan.split is None:
        plan_snapshots(plan, view, logs, max_message_size, log_start_offset, known)
    return plan


def _first_recovered(plan: PartitionPlan, logs: List[int]) -> int:
    """Where LogLoader.recoverLog starts: the index in ``logs`` of the segment holding the
    recovery point (the largest base offset at or below it; the first segment when there is
    no recovery point or it is below every base), or len(logs) after a clean shutdown."""
    if plan.full or not logs:
        return 0
    if plan.clean_shutdown:
        return len(logs)
    point = plan.recovery_point
    if point is None:
        return 0
    return max((i for i, base in enumerate(logs) if base <= point), default=0)


def _segment_rule(plan: PartitionPlan, view: Dict[str, str], base: int, recovering: bool) -> str:
    """The rule that decides what happens to the segment based at ``base``: recovered because
    it is in the unflushed range (or --full), or because LogSegment.sanityCheck finds no
    .index or a .txnindex entry below its base; else kept as it is."""
    if recovering:
        return RULE_FULL if plan.full else RULE_RECOVERY_POINT
    index = names.offset_name(base, names.INDEX)
    if index not in view and index not in plan.blocked:
        return RULE_NO_INDEX
    txn = names.offset_name(base, names.TXNINDEX)
    if txn in view and txn_below_base(os.path.join(plan.directory, view[txn])):
        return RULE_TXN_BELOW_BASE
    return RULE_CLEAN if plan.clean_shutdown else RULE_BELOW


def _plan_segments(plan: PartitionPlan, view: Dict[str, str], logs: List[int], interval: int,
                   max_message_size: int, epochs: Optional[LeaderEpochCache] = None
                   ) -> Dict[str, List[int]]:
    """LogLoader's load of the segments in offset order: each segment chosen by a rule is
    recovered (LogSegment.recover) and its indexes rebuilt; a cut in the unflushed range ends
    the log there. The others are kept as they are; their batches are replayed into the
    producer state when a later segment is recovered, so that its aborted transactions get the
    last stable offsets the broker's ProducerStateManager gives them. Returns {.log path: the
    positions of its batches of producers} of the segments recovered (what the producer
    state rebuild after them reads of each: ``producer_state.rebuild``'s ``known``)."""
    known: Dict[str, List[int]] = {}
    # Each segment checks the order of its own batches only: LogSegment.recover knows nothing
    # of the segment before, and the broker keeps a segment whose offsets start below the
    # previous segment's last (an offset outside the CRC damaged there, say).
    start = _first_recovered(plan, logs)
    rules = [_segment_rule(plan, view, base, i >= start) for i, base in enumerate(logs)]
    last_recovered = max((i for i, rule in enumerate(rules) if rule in RECOVERING), default=-1)
    first_recovered = min((i for i, rule in enumerate(rules) if rule in RECOVERING), default=-1)
    state, replay_from = _seed_producer_state(plan, view, logs, first_recovered)
    for i, base in enumerate(logs):
        segment = Segment(plan.directory, base)
        # the file as it is now: a .log.swap still to be renamed into place, say
        source = Segment.at(os.path.join(plan.directory, view[segment.name]))
        report = SegmentReport(segment.name, source.size(), rules[i])
        plan.segments.append(report)
        last = i == len(logs) - 1
        if rules[i] not in RECOVERING:
            if replay_from <= i < last_recovered:
                with source.open(max_message_size, record_limit_factor=BATCH_LIMIT_FACTOR) as log:
                    for batch in source.batches(log=log):
                        update_producer_state(state, log, batch)
            _plan_sane(plan, view, base, report)
            if last:
                plan.log_end_offset = source.next_offset(max_message_size)
            continue
        scan = source.recover_scan(None, state, interval, max_message_size, epochs)
        known[source.log_path] = scan.producer_positions
        report.records, report.first_offset = scan.records, scan.first_offset
        report.next_offset = scan.next_offset
        for position, first, lastoff in scan.unchecked:
            report.notes.append(
                "records of the batch at position %d (offsets %d-%d) not checked: they inflate "
                "past %d bytes (raise --max-message-size to check them); the batch is kept"
                % (position, first, lastoff, max_message_size * BATCH_LIMIT_FACTOR))
        if scan.overflow:
            _plan_split(plan, source, segment.name, base, report, max_message_size)
            return known
        cut = scan.first_bad is not None
        ends_log = cut and rules[i] not in SANITY_RECOVERY
        if cut:
            _plan_cut(plan, view, source, scan, report, logs[i + 1:] if ends_log else [])
        # The segment that ends the log after this run may keep a pre-allocated index whose
        # entries are the rebuilt ones: the broker pre-allocates the active segment's indexes
        # again once it has loaded the log (LogLoader.recoverLog: resizeIndexes), so either
        # length is its own. Whether the log was cut first does not matter: a run killed
        # after the cut and rerun must keep what an uninterrupted one keeps.
        _plan_indexes(plan, view, base, scan, last or ends_log, report)
        if ends_log or last:
            plan.log_end_offset = base if scan.next_offset is None else scan.next_offset
            return known
    return known


def _seed_producer_state(plan: PartitionPlan, view: Dict[str, str], logs: List[int],
                         first_recovered: int) -> Tuple[ProducerState, int]:
    """The producer state at the start of the segments to follow, and the index in ``logs``
    of the first segment to replay into it. As the broker's ProducerStateManager starts from
    its latest snapshot, the producer snapshot at the largest segment base offset at or below
    the first recovered segment's gives it (a snapshot taken at a roll holds the state at the
    new segment's base offset); without a readable one, every segment before is replayed."""
    state = ProducerState()
    for i in range(first_recovered, 0, -1):
        snap = names.offset_name(logs[i], names.SNAPSHOT)
        if snap not in view:
            continue
        try:
            entries = list(read_snapshot(os.path.join(plan.directory, view[snap])))
        except (OSError, KafkalogError, ValueError):
            continue
        state.load(entries, logs[i], int(time.time() * 1000))
        return state, i
    return state, 0


def _plan_sane(plan: PartitionPlan, view: Dict[str, str], base: int,
               report: SegmentReport) -> None:
    """A segment that is not recovered: LogSegment's loading creates a missing time index,
    empty (it is not rebuilt: retention then goes by the .log's modification time)."""
    tname = names.offset_name(base, names.TIMEINDEX)
    if tname not in view and tname not in plan.blocked:
        plan.add(WRITE, tname, "missing: created empty, as the broker creates it", data=b"")
        view[tname] = tname
        report.timeindex_created = True


def _plan_cut(plan: PartitionPlan, view: Dict[str, str], source: Segment, scan: SegmentScan,
              report: SegmentReport, later: List[int]) -> None:
    """The segment keeps its valid prefix (UnifiedLog truncation). In the unflushed range the
    segments after it (``later``) go first; a segment recovered by the sanity check alone
    leaves them (LogLoader.loadSegmentFiles). (The producer snapshots above the new log end
    are ``plan_snapshots``'.)"""
    name = report.name
    report.bytes_kept, report.first_bad_position, report.reason = (scan.valid_end, scan.first_bad,
                                                                    scan.reason)
    report.first_bad_offset = scan.bad_offset
    count_removed(report, source.log_path, scan.valid_end)
    if (report.first_bad_offset is None and report.torn_first_offset is not None
            and report.first_bad_position == report.size - report.torn_bytes):
        report.first_bad_offset = report.torn_first_offset  # the first bad batch is the torn one
    for base in later:
        later_log = names.offset_name(base, names.LOG)
        plan.segments.append(_moved_report(plan.directory, view, later_log))
        for n in sorted(names.offset_name(base, kind) for kind in names.SEGMENT_KINDS):
            if n in view:
                plan.add(MOVE, n, "after the corrupt segment %s (the broker deletes it)" % name)
                del view[n]
    _refuse_symlink(source, "cut at byte %d" % scan.valid_end)
    plan.add(CUT, name, scan.reason or "", start=scan.valid_end, end=report.size)


def _refuse_symlink(source: Segment, what: str) -> None:
    if os.path.islink(source.log_path):
        # Changing it writes to the file the link points at, wherever it is: refused before
        # anything changes, so the partition is left as it was.
        raise SymlinkCutError(
            errno.ELOOP, "is a symlink to %s and would have to be %s; recover writes no file "
            "outside the partition directory: put a copy of the file in place of the link, "
            "then run recover again" % (printable_name(os.path.realpath(source.log_path)), what),
            source.log_path)


def _moved_report(directory: str, view: Dict[str, str], name: str) -> SegmentReport:
    path = os.path.join(directory, view[name])
    report = SegmentReport(name, os.path.getsize(path), RULE_AFTER_CUT)
    report.bytes_kept = 0
    report.set_aside = True
    count_removed(report, path, 0)
    return report


def _plan_indexes(plan: PartitionPlan, view: Dict[str, str], base: int, scan: SegmentScan,
                  active: bool, report: SegmentReport) -> None:
    """LogSegment.recover rebuilds all three indexes of a recovered segment, whatever they look
    like: each file that is not the rebuilt one byte for byte is set aside and replaced (a
    .txnindex only where an aborted transaction ends in the segment)."""
    directory = plan.directory
    rebuilt = ((names.INDEX, scan.builder.offset_index_bytes(), OffsetIndex.entry.size),
               (names.TIMEINDEX, scan.builder.time_index_bytes(), TimeIndex.entry.size),
               (names.TXNINDEX, txn_index_bytes(scan.aborted), 0))
    report.index_entries = scan.builder.offset_count
    report.timeindex_entries = scan.builder.time_count
    report.txn_entries = len(scan.aborted)
    for kind, data, entry_size in rebuilt:
        n = names.offset_name(base, kind)
        if n in plan.blocked:
            report.notes.append("%s not rebuilt: it is not a regular file" % printable_name(n))
            continue
        path = os.path.join(directory, view[n]) if n in view else None
        if kind == names.TXNINDEX:
            same = same_txn_index(path, data)
        else:
            same = path is not None and same_index(path, data, entry_size, active)
        if same:
            continue
        if path is not None:
            report.indexes_replaced.append(kind)
            plan.add(MOVE, n, "replaced by the index rebuilt from the log")
        else:
            report.indexes_created.append(kind)
        if data or kind != names.TXNINDEX:
            plan.add(WRITE, n, "rebuilt from the log (LogSegment.recover)", data=data)


# -- splitting a segment whose offsets overflow (LocalLog.splitOverflowedSegment) -----------------

def split_points(segment: Segment, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
                 ) -> List[Tuple[int, int, int]]:
    """The segments LocalLog.splitOverflowedSegment makes of ``segment``: [(base offset, start,
    end)] byte ranges of its .log covering all of it, a new segment starting at each batch that
    does not fit 32-bit offsets relative to the current one's base. The first keeps the
    segment's own base offset (so that the swap range a broker computes covers the original
    segment, should the split be interrupted); the last runs to the end of the file, whatever
    follows its batches (its recovery then deals with it). Batches are followed while their
    headers are whole, their CRC holds and their offsets grow."""
    base = segment.base_offset
    assert base is not None
    pieces: List[Tuple[int, int]] = [(base, 0)]
    current = segment  # the segment being cut out: its offsets are relative to its base
    prev_last = None
    with segment.open(max_message_size) as log:
        for batch in segment.batches(log=log):
            if batch_problem(batch, None, prev_last) is not None:
                break
            if current.overflows(batch):
                current = Segment(segment.directory, batch.base_offset)
                pieces.append((batch.base_offset, batch.position))
            prev_last = batch.last_offset
        size = log.size
    ends = [start for _, start in pieces[1:]] + [size]
    return [(b, start, end) for (b, start), end in zip(pieces, ends)]


def _plan_split(plan: PartitionPlan, source: Segment, name: str, base: int,
                report: SegmentReport, max_message_size: int) -> None:
    """Split the segment (the rest of the partition is planned again once it is done, as
    LogLoader's retryOnOffsetOverflow loads the segments again)."""
    pieces = split_points(source, max_message_size)
    _refuse_symlink(source, "split")
    report.split_into = [b for b, _, _ in pieces]
    plan.add(SPLIT, name, "offsets past 32 bits from the base offset %d: split into %d segments "
             "at offsets %s (LocalLog.splitOverflowedSegment)"
             % (base, len(pieces), ", ".join(str(b) for b, _, _ in pieces)), pieces=pieces)
    plan.split = plan.actions[-1]


def split_segment(directory: str, name: str, pieces: List[Tuple[int, int, int]]) -> None:
    """Carry a split out as LocalLog.replaceSegments does, so that a crash at any step leaves
    what LogLoader (and ``plan_partition``) finishes or undoes: each new segment's .log written
    as ``<base>.log.cleaned`` (a temporary file flushed, then renamed), renamed to ``.swap`` from
    the highest base offset down (a crash in between leaves .swap files above a .cleaned one: a
    split that did not finish, undone), then the original segment's files removed and the .swap
    files renamed into place. The new segments' sizes add up to the original's (checked before
    it goes); their indexes are rebuilt by their recovery. (``execute`` keeps the original
    segment's files in the quarantine first.)"""
    src = os.path.join(directory, name)
    size = os.path.getsize(src)
    if sum(end - start for _, start, end in pieces) != size or pieces[0][1] != 0:
        raise OSError(errno.EIO, "the split does not cover the segment: left as it is", src)
    cleaned = []
    for base, start, end in pieces:
        dst = os.path.join(directory, names.offset_name(base, names.LOG, names.CLEANED))
        copy_range(src, start, end, dst)
        cleaned.append((base, dst))
    if sum(os.path.getsize(p) for _, p in cleaned) != size:
        raise OSError(errno.EIO, "the split segments do not add up to the segment", src)
    swaps = []
    for base, path in reversed(cleaned):
        swap = os.path.join(directory, names.offset_name(base, names.LOG, names.SWAP))
        rename_noreplace(path, swap)
        fsync_dir(directory)
        swaps.append((base, swap))
    original = file_base(name)
    for kind in (names.INDEX, names.TIMEINDEX, names.TXNINDEX, names.LOG):
        path = os.path.join(directory, names.offset_name(original, kind))
        # (a name held by something that is not a regular file is left alone, as everywhere)
        if kind == names.LOG or (os.path.isfile(path) and not os.path.islink(path)):
            os.unlink(path)
    fsync_dir(directory)
    for base, swap in sorted(swaps):
        rename_noreplace(swap, os.path.join(directory, names.offset_name(base, names.LOG)))
    fsync_dir(directory)
