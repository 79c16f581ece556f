"""Carrying a recovery plan out (``execute``), a partition recovered start to end
(``recover_partition``) and a log directory recovered as LogManager.loadLogs loads it
(``LogDirRecovery``): the steps, their order and the clean-shutdown marker as
``recover``'s docstring says."""

from __future__ import annotations

import errno
import os
from typing import Callable, Dict, Iterator, List, Optional, Set, Tuple

from ..errors import KafkalogError
from . import checkpoints, names
from .files import FileFormatError, open_in_place, printable_name, read_sized
from .lock import LockHeld, LogDirLock
from .logdir import CleanShutdownMarker, LogDir
from .indexbuild import (DEFAULT_INDEX_INTERVAL, fsync_dir, rename_noreplace,
                         write_atomically, write_new)
from .quarantine import (Quarantine, copy_range, manifest_entry, renamed_entry, written_entry,
                         written_range_entry)
from .recover import plan_partition, split_segment
from .replace_segments import index_files_to_restore, read_intent, write_cleaner_checkpoint
from .recover_plan import (CUT, EPOCHS, MOVE, REMOVE, RENAME, SPLIT, WRITE, Action, PartitionPlan,
                           file_base)
from .recovery_scan import MAX_INDEX_READ
from .report import Report, report
from .segment import DEFAULT_MAX_MESSAGE_SIZE

# -- carrying a plan out -------------------------------------------------------------------------

def execute(plan: PartitionPlan, quarantine: Optional[Quarantine] = None) -> Optional[str]:
    """Carry ``plan`` out; return the quarantine folder used (None when nothing was kept).
    ``quarantine``: the run's folder, when an earlier plan of the same run made one.

    Every rename is one that cannot replace a file (``rename_noreplace``); a rebuilt index is
    written only where no file holds its name any more (its predecessor was set aside first).
    """
    q = quarantine if quarantine is not None else Quarantine(plan.directory)
    if not plan.actions:
        return q.path
    directory = plan.directory
    earlier: Dict[str, str] = {}  # name -> the .swap name it had before this run renamed it
    in_place: Set[str] = set()    # set aside by a link, to be replaced by the next action
    for a in plan.actions:
        src = os.path.join(directory, a.name)
        if a.kind == REMOVE:
            os.unlink(src)  # our own half-written temporary: the real file is intact
            fsync_dir(directory)
        elif a.kind == MOVE and a.in_place:
            # the intent first, as for a move (see below)
            saved = q.reserve(a.name)
            q.record(manifest_entry("moved", a.name, saved, a.why))
            _link_aside(src, os.path.join(q.folder(), saved))
            in_place.add(a.name)
        elif a.kind == MOVE:
            # The intent first: the manifest entry is flushed, then the file moved. A run
            # killed between the two leaves an entry whose saved file is not there while the
            # file is still in the partition, which a restore passes over and the next run
            # sets aside again; never a file in the quarantine that no manifest lists.
            saved = q.reserve(a.name)
            extra = {}
            if a.name in earlier:
                extra["earlier_name"] = printable_name(earlier.pop(a.name))
            q.record(manifest_entry("moved", a.name, saved, a.why, **extra))
            rename_noreplace(src, os.path.join(q.folder(), saved))
            fsync_dir(os.path.dirname(os.path.join(q.folder(), saved)))
            fsync_dir(directory)
        elif a.kind == RENAME:
            # recorded first: a restore renames it back (a run killed before the rename
            # leaves an entry whose rename a restore finds not done)
            q.record(renamed_entry(a.target, a.name, a.why))
            rename_noreplace(src, os.path.join(directory, a.target))
            fsync_dir(directory)
            earlier[a.target] = a.name
        elif a.kind == CUT:
            # the intent first (as for a move), then the copy, then the cut: a run killed
            # before the cut leaves the .log whole, whatever its entry says
            saved = q.reserve("%s.cut-%d-%d" % (a.name, a.start, a.end))
            q.record(manifest_entry("cut", a.name, saved, a.why, range=[a.start, a.end]))
            copy_range(src, a.start, a.end, os.path.join(q.folder(), saved))
            with os.fdopen(open_in_place(src, os.O_RDWR), "r+b") as f:  # never a symlink
                f.truncate(a.start)
                f.flush()
                os.fsync(f.fileno())
        elif a.kind == WRITE:
            if _new_name(q, a.name):
                # recorded first: a run killed before the write leaves an entry whose file is
                # not there, which a restore passes over
                q.record(written_entry(a.name, a.data, a.why))
            write_new(src, a.data)
        elif a.kind == SPLIT:
            # the original segment's files are removed by the split: their old bytes are kept
            # (hard links: no space taken), as every file replaced is, the intent first; the
            # segments the split writes are recorded before they are written, so that a
            # restore sets them aside and returns the original
            for kind in (names.LOG, names.INDEX, names.TIMEINDEX, names.TXNINDEX):
                name = names.offset_name(file_base(a.name), kind)
                path = os.path.join(directory, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    saved = q.reserve(name)
                    why = ("the segment split: " if kind == names.LOG
                           else "the index of a segment split: ")
                    q.record(manifest_entry("moved", name, saved, why + a.why))
                    _link_aside(path, os.path.join(q.folder(), saved))
            for base, start, end in a.pieces:
                q.record(written_range_entry(
                    names.offset_name(base, names.LOG), src, start, end,
                    "bytes %d-%d of the segment split (LocalLog.splitOverflowedSegment)"
                    % (start, end)))
            split_segment(directory, a.name, a.pieces)
        elif a.kind == EPOCHS:
            if a.name in in_place:
                in_place.discard(a.name)  # its old bytes are in quarantine (linked) already
            elif os.path.isfile(src):
                # a checkpoint is replaced as the broker replaces it, its old bytes kept
                # the intent first: a run killed before the copy leaves an entry whose saved
                # file is not there while the checkpoint is not rewritten yet
                saved = q.reserve(a.name)
                q.record(manifest_entry("copied", a.name, saved, a.why))
                write_new(os.path.join(q.folder(), saved), read_sized(src, MAX_INDEX_READ))
            elif _new_name(q, a.name):
                q.record(written_entry(a.name, a.data, a.why))
            write_atomically(src, a.data)
    return q.path


def _new_name(q: Quarantine, name: str) -> bool:
    """Is ``name`` one no file held when the run started (none set aside under it in this
    run)? A file the run writes there is recorded as a ``written`` manifest entry (its hash):
    ``kafkalog quarantine restore`` sets it aside, so that the partition is again what it was
    (a segment without its .index is recovered again after a clean shutdown, as the run did).
    (The segments a split writes are recorded by the split itself.)"""
    shown = printable_name(name)
    return not any(e.get("file") == shown and e.get("what") == "moved" for e in q.entries)


def _link_aside(src: str, dst: str) -> None:
    """Put the file ``src`` at ``dst`` (in quarantine) as a hard link, ``src`` left in place (a
    copy of its bytes where the file system has no hard links); both directories flushed."""
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS):
            raise
        copy_range(src, 0, os.lstat(src).st_size, dst)
    fsync_dir(os.path.dirname(dst))
    fsync_dir(os.path.dirname(src))


class RecoveryStopped(KafkalogError, OSError):
    """A change of recovery failed (a full disk): the partition is as the changes before it
    left it, each whole, everything set aside listed; the message says what was kept. Exit
    code 2."""


# A split leaves segments that fit by construction: one partition is split this many times at
# most in a run (each split plans the partition again).
MAX_SPLITS = 1000


def recover_partition(directory: str, interval: int = DEFAULT_INDEX_INTERVAL,
                      max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                      dry_run: bool = False, recovery_point: Optional[int] = None,
                      clean_shutdown: bool = False, full: bool = False,
                      before_change: Optional[Callable[[], None]] = None,
                      log_start_offset: Optional[int] = None) -> PartitionPlan:
    """Recover the partition ``directory`` as LogLoader would (see ``plan_partition`` for the
    inputs): plan, then (unless ``dry_run``) carry the plan out; after a split, plan and carry
    out again, as LogLoader loads the segments again. The plan returned holds every action of
    the run; ``quarantine`` is the folder that holds what was removed (None when nothing was).
    ``before_change`` is called once before the first change. The caller holds the log
    directory's lock."""
    def plan_now() -> PartitionPlan:
        return plan_partition(directory, interval, max_message_size, recovery_point,
                              clean_shutdown, full, log_start_offset)

    plan = plan_now()
    if dry_run:
        return plan
    q = Quarantine(directory)
    done: List[Action] = []
    splits: List[Tuple[str, List[int]]] = []
    try:
        for _ in range(MAX_SPLITS):
            if plan.changes and before_change is not None and not done:
                before_change()
            execute(plan, q)
            done += plan.actions
            if plan.split is None:
                break
            splits.append((plan.split.name, [b for b, _, _ in plan.split.pieces]))
            plan = plan_now()
        else:
            raise OSError(errno.EIO, "segments still overflow after %d splits" % MAX_SPLITS,
                          directory)
        if plan.compact_end_offset is not None:
            done += _finish_compaction(directory, q)
    except OSError as e:
        q.discard_if_empty()  # a run folder that failed before its first entry (a full disk)
        kept = ("%d file%s set aside so far, listed in %s"
                % (len(q.entries), "" if len(q.entries) == 1 else "s", q.path)
                if q.entries else "nothing set aside")
        raise RecoveryStopped(e.errno or errno.EIO, "%s: recovery stopped (%s); run recover "
                              "again once that is resolved" % (e.strerror or e, kept),
                              e.filename or directory) from None
    except BaseException:
        q.discard_if_empty()
        raise
    plan.actions = done
    plan.splits = splits
    plan.quarantine = q.path
    plan.files_kept = sum(1 for e in q.entries if "saved_as" in e)
    return plan


def _finish_compaction(directory: str, q: Quarantine) -> List[Action]:
    """An interrupted `kafkalog compact` pass whose new segments the plan just swapped in:
    their indexes as the pass wrote them (LogLoader drops an index .swap whose .log was renamed
    first, and makes an empty one), what held their names kept in ``q``; then the cleaner
    checkpoint at the pass's end; then the intent set aside (a kill before leaves it, and the
    next recover finishes again). Returns the actions carried out."""
    from .partition import Partition
    intent = read_intent(directory)
    if intent is None:
        return []
    actions: List[Action] = []
    for base, _, _, aborted in intent.segments:
        for name, data in index_files_to_restore(directory, base, intent.interval, aborted):
            why = "the index the interrupted compact pass wrote"
            if os.path.lexists(os.path.join(directory, name)):
                actions.append(Action(MOVE, name, "replaced by " + why))
            actions.append(Action(WRITE, name, why, data=data))
    step = PartitionPlan(directory, actions=actions)
    execute(step, q)
    write_cleaner_checkpoint(Partition(directory), intent.end_offset)
    last = PartitionPlan(directory, actions=[Action(
        MOVE, names.COMPACT_INTENT, "the interrupted compact pass is finished")])
    execute(last, q)
    return actions + last.actions


# -- a log directory (LogManager.loadLogs) ---------------------------------------------------------

@report
class PartitionResult(Report):
    """One partition of a ``LogDirRecovery``: ``directory``, the partition directory; ``plan``,
    its plan as carried out (None: an error stopped it); ``error``, the error that stopped it
    (None: it was recovered)."""

    directory: str
    plan: Optional[PartitionPlan]
    error: Optional[OSError]


class LogDirRecovery:
    """Recover ``partitions`` (directories) of the log directory ``log_dir`` as LogManager loads
    them: the clean-shutdown marker and the recovery points read first, each partition
    recovered (``run`` yields its result as it is done), then the recovery points written back
    at the partitions' log end offsets (the logs validated flushed first) and the marker handled
    as the module's docstring says. After ``run``: ``clean_shutdown`` (the marker was there),
    ``marker`` (what became of it: None, "kept", "removed" (a change, then a failure: left
    out), "restored"; in a dry run "would-restore", "would-remove"), ``checkpoint_updates``
    {(topic, n): (old or None, new)} of the recovery point entries written (or, in a dry run,
    that would be), ``checkpoint_problem`` (why the checkpoint was not read or written, or None)."""

    def __init__(self, log_dir: str, partitions: List[str],
                 interval: int = DEFAULT_INDEX_INTERVAL,
                 max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE, dry_run: bool = False,
                 full: bool = False) -> None:
        self.log_dir = log_dir
        self.partitions = partitions
        self.interval = interval
        self.max_message_size = max_message_size
        self.dry_run = dry_run
        self.full = full
        self.clean_shutdown = False
        self.marker: Optional[str] = None
        self.checkpoint_path = os.path.join(log_dir, names.RECOVERY_POINT_CHECKPOINT)
        self.checkpoint_updates: Dict[Tuple[str, int], Tuple[Optional[int], int]] = {}
        self.checkpoint_problem: Optional[str] = None
        self.temporary_files: List[str] = []  # ours, of an interrupted write: removed
        self.lock_held: Optional[LockHeld] = None  # a dry run's: who holds the lock
        self.results: List[PartitionResult] = []  # run_all's
        self._marker = CleanShutdownMarker(log_dir)

    def run(self) -> Iterator[PartitionResult]:
        """Take the log directory's lock (OSError when a broker holds it), recover each
        partition, then write the recovery points and settle the marker."""
        # A dry run only reads: beside a broker holding the lock it goes on (``lock_held``
        # says so, for the caller's warning); a real run refuses.
        with LogDirLock.for_run(self.log_dir, self.partitions, self.dry_run) as lock:
            self.lock_held = lock.held
            self.temporary_files = remove_temporary_files(self.log_dir, self.dry_run)
            self.clean_shutdown = self._marker.present()
            if self.clean_shutdown:
                self.marker = "kept"
            points: Dict[Tuple[str, int], int] = {}
            readable = True
            # the entries of the partitions recovered
            wanted: Set[Tuple[str, int]] = set()
            for topic, number in map(names.topic_partition, self.partitions):
                if topic is not None and number is not None:
                    wanted.add((topic, number))
            log_dir = LogDir(self.log_dir)
            try:
                points = log_dir.offset_checkpoint(names.RECOVERY_POINT_CHECKPOINT, wanted)
            except (OSError, FileFormatError) as e:
                # LogManager reads an unreadable checkpoint as an empty one: every segment is
                # recovered. It is not written over: what it holds is not ours to lose.
                readable = False
                self.checkpoint_problem = "%s: not read (%s): every segment recovered; not " \
                    "written" % (printable_name(self.checkpoint_path), e)
            try:
                starts = log_dir.offset_checkpoint(names.LOG_START_OFFSET_CHECKPOINT, wanted)
            except (OSError, FileFormatError):
                starts = {}  # LogManager: every log start at its first segment's base
            failed = changed = False
            ends: Dict[Tuple[str, int], int] = {}
            flushed: List[Tuple[str, PartitionPlan]] = []
            for partition in self.partitions:
                topic, number = names.topic_partition(partition)
                key = (topic, number) if topic is not None and number is not None else None
                try:
                    plan = recover_partition(
                        partition, self.interval, self.max_message_size, self.dry_run,
                        points.get(key) if key is not None else None, self.clean_shutdown,
                        self.full, self._remove_marker,
                        starts.get(key) if key is not None else None)
                except OSError as e:
                    failed = True
                    yield PartitionResult(partition, None, e)
                    continue
                changed = changed or plan.changes
                if plan.blocked:
                    failed = True  # a file not read: the partition is not known to be whole
                elif key is not None and plan.log_end_offset is not None:
                    ends[key] = plan.log_end_offset
                    flushed.append((partition, plan))
                yield PartitionResult(partition, plan, None)
            for key, end in ends.items():
                if points.get(key) != end:
                    self.checkpoint_updates[key] = (points.get(key), end)
            if self.dry_run:
                if self.clean_shutdown and changed:
                    self.marker = "would-restore" if not failed else "would-remove"
                return
            if readable and self.checkpoint_updates:
                for partition, plan in flushed:
                    _flush_recovered(plan)
                checkpoints.write_offset_checkpoint(
                    self.checkpoint_path, {k: new for k, (_, new) in
                                           self.checkpoint_updates.items()})
            if not failed and self._marker.restore():
                self.marker = "restored"

    def run_all(self) -> "LogDirRecovery":
        """``run`` to its end, each partition's result kept in ``results``."""
        self.results = list(self.run())
        return self

    def _remove_marker(self) -> None:
        """Before a partition of this log directory changes: a broker must not trust a clean
        shutdown we may not finish."""
        if self.clean_shutdown and self._marker.lift():
            self.marker = "removed"


def remove_temporary_files(log_dir: str, dry_run: bool = False) -> List[str]:
    """Our temporary files in the log directory itself (a checkpoint or the clean-shutdown
    marker being written when a run was killed): each is a copy about to be renamed into
    place, so it holds nothing the directory lacks. Removed (with ``dry_run``, only listed);
    returns their paths."""
    found = sorted(os.path.join(log_dir, n) for n in os.listdir(log_dir)
                   if n.endswith(names.TMP_SUFFIX) and os.path.isfile(os.path.join(log_dir, n)))
    if found and not dry_run:
        for path in found:
            os.unlink(path)
        fsync_dir(log_dir)
    return found


def _flush_recovered(plan: PartitionPlan) -> None:
    """Flush the logs recovery validated (read, perhaps from memory not yet written): the
    recovery point only moves over data on disk."""
    for r in plan.segments:
        if r.recovered:
            path = os.path.join(plan.directory, r.name)
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
