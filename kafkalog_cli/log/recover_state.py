"""The partition state a recovery leaves, planned after its segments (LogLoader's last steps):
producer snapshots (ProducerStateManager.removeStraySnapshots, UnifiedLog.rebuildProducerState),
a log start offset past the log end, and the leader epochs (LeaderEpochFileCache, rebuilt from
the batches when its file cannot be read)."""

from __future__ import annotations

import os
import time
from typing import Dict, List, Optional, Set, Tuple

from ..errors import KafkalogError
from ..format.errors import CorruptRecordError
from . import names
from .names import partition_file_kind
from .leader_epochs import LeaderEpochCache, read_checkpoint_strict
from .producer_state import load_state, stray_snapshots
from .recover_plan import CUT, EPOCHS, MOVE, WRITE, PartitionPlan, file_base
from .recovery_scan import count_removed, observe_epoch
from .segment import Segment


def plan_snapshots(plan: PartitionPlan, view: Dict[str, str], logs: List[int],
                    max_message_size: int, log_start_offset: Optional[int],
                    known: Optional[Dict[str, List[int]]] = None) -> None:
    """LogLoader's last step for producer snapshots, on the segments recovery leaves:
    ProducerStateManager.removeStraySnapshots (a snapshot at no segment's base offset, but the
    newest when it is above every base), then UnifiedLog.rebuildProducerState
    (``producer_state.load_state``: snapshots above the log end offset, at or below the log
    start offset, or unreadable, removed; the newest readable one loaded; the batches after it
    replayed, with snapshots taken at the base offsets of the last two segments the replay
    reaches and at the log end offset). Every snapshot removed is set aside; those taken are
    written where no file holds their name. The log start offset is the larger of
    ``log_start_offset`` (log-start-offset-checkpoint; None: 0) and the first segment's base
    offset, as LogLoader.load takes it. A state that cannot be rebuilt (a marker that is no end
    marker, a write outside an open transaction) is reported and nothing is changed.
    ``known``: {.log path: the positions of its batches of producers} of the segments recovery
    has scanned, which the rebuild reads there only (``producer_state.rebuild``)."""
    leo = plan.log_end_offset
    if leo is None:
        return
    found = {o: n for o, n in ((names.base_offset_from_name(n), n) for n in view
                               if partition_file_kind(n) == names.SNAPSHOT
                               and not names.lifecycle_suffix(n))
             if o is not None}
    bases = [b for b in logs if names.offset_name(b, names.LOG) in view]
    start = max(log_start_offset or 0, bases[0] if bases else 0)
    # LogLoader.recoverSegment, for each segment it recovers, runs
    # UnifiedLog.rebuildProducerState up to the segment's base offset on a new
    # ProducerStateManager, whose truncateAndReload deletes every snapshot file above that
    # base; then it takes a snapshot at the base (when the newest one left is below it) and,
    # once LogSegment.recover has replayed the segment, at its end (the next segment's base,
    # or the log end offset). So after recovery the snapshots above the first recovered
    # segment's base are the ones recovery took, with the state replayed from the log; the
    # older files there are deleted (set aside here), and a snapshot is taken at the base of
    # every recovered segment and of the segment after each (where none is).
    recovered = sorted(r.base_offset for r in plan.segments
                       if r.recovered and r.base_offset is not None and r.base_offset in bases)
    snapshot_at: Set[int] = set()
    overwritten: List[int] = []
    if recovered:
        first = recovered[0]
        for b in recovered:
            snapshot_at.add(b)
            later = [x for x in bases if x > b]
            if later:
                snapshot_at.add(later[0])
        # A file where recovery takes a snapshot again stays as it is (the broker deletes and
        # rewrites it with the state replayed from the log, which is what it holds: a second
        # run, which recovers the last segment again, stays idle); any other above the first
        # recovered base goes.
        overwritten = sorted(o for o in found if o > first and o not in snapshot_at and o != leo)
    # (those above the log end offset are out of range already: the broker's recovery of a
    # segment deletes them before its loader looks for strays; with a segment recovered, the
    # snapshot recovery takes at the log end offset is the newest, which makes every other
    # snapshot at no base a stray)
    strays = stray_snapshots([o for o in found if o <= leo and o not in overwritten]
                             + ([leo] if recovered else []), bases)
    segments = [Segment.at(os.path.join(plan.directory, view[names.offset_name(b, names.LOG)]))
                for b in bases]
    snapshots = [(o, os.path.join(plan.directory, view[n])) for o, n in sorted(found.items())
                 if o not in strays and o not in overwritten]
    # the segments as recovery leaves them: a cut one read up to its cut
    cut_at = {file_base(a.name): a.start for a in plan.actions
              if a.kind == CUT and names.file_kind(a.name) == names.LOG}
    try:
        loaded = load_state(segments, snapshots, leo, int(time.time() * 1000),
                            log_start_offset=start, clean_shutdown=plan.clean_shutdown,
                            max_message_size=max_message_size, snapshot_at=snapshot_at,
                            cut_at=cut_at, known=known)
    except (KafkalogError, CorruptRecordError, OSError) as e:
        plan.notes.append((names.offset_name(leo, names.SNAPSHOT), "producer snapshots not "
                           "written: the producer state could not be rebuilt (%s)" % e))
        return
    for offset in sorted(set(strays) | set(loaded.removed) | set(overwritten)):
        why = ("at no segment's base offset (ProducerStateManager.removeStraySnapshots)"
               if offset in strays else
               "above the base offset %d of the first segment recovered (LogLoader."
               "recoverSegment's ProducerStateManager.truncateAndReload deletes it; recovery "
               "takes its own)" % recovered[0] if offset in overwritten else
               "above the log end offset %d" % leo if offset > leo else
               "at or below the log start offset %d" % start if offset <= start else
               "cannot be read: the broker deletes it")
        plan.add(MOVE, found[offset], "producer snapshot %s" % why)
        del view[found[offset]]
    for offset, data in loaded.snapshots:
        n = names.offset_name(offset, names.SNAPSHOT)
        if n not in view and n not in plan.blocked:
            plan.add(WRITE, n, "producer state at the %s %d (UnifiedLog.rebuildProducerState)"
                     % ("log end offset" if offset == leo else "segment base offset", offset),
                     data=data)
            view[n] = n


def plan_log_start_reset(plan: PartitionPlan, view: Dict[str, str], log_start_offset: int,
                          epochs: Optional[LeaderEpochCache],
                          unloadable: Optional[str] = None) -> None:
    """LogLoader.recoverLog when the log end offset is below the log start offset
    (log-start-offset-checkpoint), or no segment is left: every segment goes (set aside), the
    leader epoch cache is cleared, the producer state starts afresh at the log start offset
    (ProducerStateManager.truncateFullyAndStartAt: every snapshot goes), and an empty segment
    is created at the log start offset, last (a run killed before it finds no segment, or
    segments still ending below the log start offset, and goes on)."""
    why = "the log end offset %s is below the log start offset %d (log-start-offset-" \
        "checkpoint): the broker deletes every segment" % (plan.log_end_offset, log_start_offset)
    for report in plan.segments:
        if not report.set_aside:
            report.set_aside, report.bytes_kept = True, 0
            if report.name in view:
                count_removed(report, os.path.join(plan.directory, view[report.name]), 0)
    # what recovery meant to cut or write in the segments is moot: they go whole
    plan.actions = [a for a in plan.actions
                    if not (a.kind in (WRITE, CUT)
                            and partition_file_kind(a.name) in names.SEGMENT_KINDS)]
    moved = {a.name for a in plan.actions if a.kind == MOVE}
    for n in sorted(view):
        if (partition_file_kind(n) not in names.SEGMENT_KINDS + (names.SNAPSHOT,)
                or names.lifecycle_suffix(n)):
            continue
        if n not in moved and os.path.lexists(os.path.join(plan.directory, view[n])):
            plan.add(MOVE, n, why)   # (a file recovery meant to write is not there yet)
        del view[n]
    if unloadable is not None:
        plan_epochs_aside(plan, unloadable, LeaderEpochCache(), "leader epochs cleared: " + why)
    elif epochs is not None and epochs.entries:
        plan.add(EPOCHS, names.LEADER_EPOCH_CHECKPOINT, "leader epochs cleared: " + why,
                 data=LeaderEpochCache().checkpoint_bytes())
    for kind in (names.INDEX, names.TIMEINDEX, names.LOG):
        n = names.offset_name(log_start_offset, kind)
        if n not in plan.blocked:
            plan.add(WRITE, n, "an empty segment at the log start offset %d (LogLoader)"
                     % log_start_offset, data=b"")
    plan.log_end_offset = log_start_offset


def load_leader_epochs(plan: PartitionPlan, view: Dict[str, str]
                       ) -> Tuple[Optional[LeaderEpochCache], Optional[str]]:
    """The partition's leader epoch cache as the broker loads it (empty without a file), and
    None; or (None, why) for a file the broker cannot load; (None, None) when the name is held
    by something that is not a regular file (reported, left alone).

    The file is read as LeaderEpochFileCache's constructor reads it and held to what the cache
    keeps (``read_checkpoint_strict``). A broker that cannot read it (CheckpointFile throws an
    IOException: a bad version, a malformed line, a wrong count; CheckpointFileWithFailureHandler
    turns it into a KafkaStorageException and marks the whole log directory offline) or whose
    cache refuses an entry (LeaderEpochFileCache.assign: IllegalArgumentException for a negative
    one) never loads the partition; entries that do not increase are ones no cache wrote. Such a
    file is set aside and rebuilt from the log (``plan_epochs_aside``)."""
    n = names.LEADER_EPOCH_CHECKPOINT
    if n in plan.blocked:
        return None, None
    if n not in view:
        return LeaderEpochCache(), None
    try:
        return LeaderEpochCache(read_checkpoint_strict(os.path.join(plan.directory,
                                                                    view[n]))), None
    except (OSError, KafkalogError) as e:
        return None, (e.strerror or str(e)) if isinstance(e, OSError) else _without_path(
            str(e), os.path.join(plan.directory, view[n]))


def _without_path(message: str, path: str) -> str:
    return message[len(path) + 2:] if message.startswith(path + ": ") else message


def epochs_text(cache: LeaderEpochCache) -> str:
    return ", ".join("%d@%d" % e for e in cache.entries) or "none"


def rebuilt_leader_epochs(plan: PartitionPlan, view: Dict[str, str], max_message_size: int,
                           log_start_offset: Optional[int]) -> LeaderEpochCache:
    """The leader epoch cache of the log this plan leaves: every v2 batch of the segments kept
    (as far as each is kept: a cut segment up to its cut), headers only, observed in offset
    order as LogSegment.recover observes them (LeaderEpochFileCache.assign of each epoch above
    the latest, at its batch's base offset); then truncated as LogLoader truncates the cache
    once the log is loaded: at the log end offset (truncateFromEnd) and at the log start offset
    of log-start-offset-checkpoint (truncateFromStart)."""
    cache = LeaderEpochCache()
    for report in plan.segments:
        if report.set_aside or report.name not in view:
            continue
        source = Segment.at(os.path.join(plan.directory, view[report.name]))
        with source.open(max_message_size) as log:
            for batch in source.batches(log=log):
                if batch.position + batch.size > report.bytes_kept:
                    break
                if batch.magic >= 2:
                    observe_epoch(cache, batch, source.log_path)
    if plan.log_end_offset is not None:
        cache.truncate_from_end(plan.log_end_offset)
    if log_start_offset is not None:
        cache.truncate_from_start(log_start_offset)
    return cache


def plan_epochs_aside(plan: PartitionPlan, problem: str, cache: LeaderEpochCache,
                       why: str) -> None:
    """A leader-epoch-checkpoint the broker cannot load is set aside in quarantine (MOVE) and
    ``cache`` written in its place (EPOCHS). The move is made as a hard link in quarantine and
    the file stays under its name until the atomic write (a temporary file flushed, then
    renamed) replaces it: at every instant the name holds the old file or the new one, never
    nothing. A partition without the file would be loaded with an empty cache filled from the
    recovered segments only, so a run killed between a plain move and the write would leave a
    rerun a different result; this way the rerun finds the old file and does it all again."""
    n = names.LEADER_EPOCH_CHECKPOINT
    plan.add(MOVE, n, "cannot be loaded by the broker (%s): LeaderEpochFileCache fails to read "
             "it and the log directory goes offline; set aside, replaced by one rebuilt from "
             "the log" % problem, in_place=True)
    plan.add(EPOCHS, n, why, data=cache.checkpoint_bytes())


def plan_leader_epochs(plan: PartitionPlan, view: Dict[str, str], epochs: LeaderEpochCache,
                        before: List[Tuple[int, int]], log_start_offset: Optional[int]) -> None:
    """The epochs recovered batches started (LogSegment.recover's assign), then, as LogLoader
    does once the log is loaded, the entries at or past the log end offset dropped
    (LeaderEpochFileCache.truncateFromEnd) and those at or below the log start offset of
    log-start-offset-checkpoint folded into one starting there (truncateFromStart): the
    checkpoint is rewritten when that changed it (its old bytes copied to quarantine first)."""
    if plan.log_end_offset is not None:
        epochs.truncate_from_end(plan.log_end_offset)
    if log_start_offset is not None:
        epochs.truncate_from_start(log_start_offset)
    n = names.LEADER_EPOCH_CHECKPOINT
    if epochs.entries == before and (n in view or not epochs.entries):
        return
    start = "" if log_start_offset is None else " and the log start offset %d" % log_start_offset
    plan.add(EPOCHS, n, "leader epochs %s (LeaderEpochFileCache: assigned from the recovered "
             "batches, truncated at the log end offset %s%s)"
             % (", ".join("%d@%d" % e for e in epochs.entries) or "none", plan.log_end_offset,
                start), data=epochs.checkpoint_bytes())
