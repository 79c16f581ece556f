"""The runs of a partition's quarantine (``kafkalog quarantine``): each run read from its
``manifest.json`` (``read_run``, ``list_runs``), put back exactly (``plan_restore``,
``restore_run``: refused where it would overwrite or interleave newer data, what stands in the
way set aside first in a new run), and purged (``purge_runs``)."""

from __future__ import annotations

import datetime
import errno
import hashlib
import json
import os
import shutil
import stat
from typing import Any, Dict, List, Optional, Tuple

from ..errors import KafkalogError, UsageError
from . import names
from .files import open_in_place, printable_name, read_sized
from .indexbuild import fsync_dir, rename_noreplace, write_new
from .lock import LockHeld, LogDirLock
from .quarantine import Quarantine, manifest_entry, real_dir


RUN_STAMP = "%Y%m%dT%H%M%S.%fZ"
RESTORE_TOOL = "kafkalog quarantine restore"
# Files recover rebuilds from the log (LogSegment.recover, UnifiedLog.rebuildProducerState):
# one standing where a run's file is to return is set aside in a new run, whatever wrote it.
DERIVED_KINDS = (names.INDEX, names.TIMEINDEX, names.TXNINDEX, names.SNAPSHOT)
# Entries that keep no bytes in the run folder.
NOTHING_KEPT = ("written", "renamed")


class RestoreRefused(KafkalogError, OSError):
    """Restoring a run would overwrite or interleave newer data, or the run cannot be restored
    as recorded: nothing is changed (exit code 2)."""


class RunEntry:
    """One manifest entry: ``what`` ("moved": a whole file, "cut": bytes ``start``-``end`` cut
    from the end of the .log ``file``, "copied": the old bytes of a file rewritten in place,
    "written": a file the run wrote where there was none, nothing saved, ``sha256`` its hash,
    "renamed": a file the run renamed to ``file`` from ``earlier``, nothing saved),
    ``file`` (its real name), ``earlier`` (the name it had before the run renamed it from a
    .swap, or None), ``saved`` (the path inside the run folder), ``why``; ``size`` of the saved
    bytes (None: missing), ``offsets`` (first, last) of the batches they hold (None: none
    readable)."""

    __slots__ = ("what", "file", "earlier", "saved", "why", "start", "end", "size", "offsets",
                 "sha256")

    def __init__(self, what: str, file: str, saved: str, why: str) -> None:
        self.what = what
        self.file = file
        self.saved = saved
        self.why = why
        self.earlier: Optional[str] = None
        self.start = self.end = 0
        self.size: Optional[int] = None
        self.offsets: Optional[Tuple[int, int]] = None
        self.sha256: Optional[str] = None

    @property
    def target(self) -> str:
        """The name the file returns to: the one it had before the run."""
        return self.earlier if self.earlier is not None else self.file


class Run:
    """One run folder of a partition's quarantine: ``id`` (the folder's name), ``time`` (when
    the run started: the manifest's ``time``, else the folder's name, else its modification
    time), ``tool``, ``entries``, ``restored`` (the restore record, or None) and ``problem``
    (why the manifest could not be read, or None)."""

    def __init__(self, partition: str, run_id: str) -> None:
        self.partition = partition
        self.id = run_id
        self.path = os.path.join(partition, names.QUARANTINE, run_id)
        self.tool = ""
        self.time: Optional[datetime.datetime] = None
        self.entries: List[RunEntry] = []
        self.restored: Optional[Dict[str, Any]] = None
        self.problem: Optional[str] = None

    @property
    def files(self) -> int:
        """Files held in the run folder."""
        return sum(1 for e in self.entries if e.what not in NOTHING_KEPT)

    @property
    def bytes(self) -> int:
        return sum(e.size or 0 for e in self.entries if e.what not in NOTHING_KEPT)


def _entry_name(entry: Dict[str, Any], key: str) -> str:
    """A manifest's file name, as the file system has it (``<key>_bytes_hex`` when the name
    is not printable UTF-8); a name that is not a plain name in the partition is refused."""
    value = entry.get(key + "_bytes_hex")
    name = os.fsdecode(bytes.fromhex(value)) if isinstance(value, str) else entry.get(key)
    if (not isinstance(name, str) or not name or "/" in name or name in (".", "..")
            or "\0" in name):
        raise ValueError("%s %r is not a file name" % (key, name))
    return name


def _saved_path(run: Run, saved: Any) -> str:
    """The saved file's path, which must lie inside the run folder (no ``..``, not absolute)."""
    if not isinstance(saved, str) or not saved or os.path.isabs(saved) or "\0" in saved:
        raise ValueError("saved_as %r is not a path in the run folder" % (saved,))
    parts = saved.split("/")
    if any(p in ("", ".", "..") for p in parts) or len(parts) > 2:
        raise ValueError("saved_as %r is not a path in the run folder" % (saved,))
    return os.path.join(run.path, saved)


def _tail_offsets(path: str) -> Optional[Tuple[int, int]]:
    """(first, last) offset of the complete batches at the start of the file, or None."""
    from .segment import LogFile  # (imported here: recover imports this module)
    first = last = None
    try:
        with LogFile(path) as log:
            for batch in log.batches():
                if first is None:
                    first = batch.base_offset
                last = batch.last_offset
    except (OSError, KafkalogError, ValueError):
        return None
    return None if first is None or last is None else (first, last)


def _parse_time(text: Any) -> Optional[datetime.datetime]:
    if not isinstance(text, str):
        return None
    head, _, tail = text.rpartition("-")
    stamp = head if head.endswith("Z") and tail.isdigit() else text  # a folder's "-2", "-3"
    for fmt in (RUN_STAMP, "%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.datetime.strptime(stamp, fmt).replace(tzinfo=datetime.timezone.utc)
        except ValueError:
            continue
    return None


def _holds_saved_files(folder: str) -> bool:
    """Does the run folder hold a file other than our temporary ones (an interrupted write's
    ``*.kafkalog-tmp``) and the restore record?"""
    for dirpath, _, filenames in os.walk(folder):
        for name in filenames:
            if not name.endswith(names.TMP_SUFFIX) and name != names.QUARANTINE_RESTORED:
                return True
    return False


def read_run(partition: str, run_id: str) -> Run:
    """The run ``run_id`` of the partition directory ``partition``, from its manifest. A
    manifest that cannot be read or is malformed leaves ``problem`` set."""
    run = Run(partition, run_id)
    run.time = _parse_time(run_id)
    try:
        doc = json.loads(read_sized(os.path.join(run.path, names.QUARANTINE_MANIFEST), 64 << 20))
        if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
            raise ValueError("no entries list")
        run.tool = str(doc.get("tool", ""))
        run.time = _parse_time(doc.get("time")) or run.time
        for raw in doc["entries"]:
            if not isinstance(raw, dict) or raw.get("what") not in (
                    "moved", "cut", "copied", "written", "renamed"):
                raise ValueError("an entry of unknown kind: %r" % (raw,))
            e = RunEntry(raw["what"], _entry_name(raw, "file"), str(raw.get("saved_as", "")),
                         str(raw.get("why", "")))
            if e.what == "written":
                sha, size = raw.get("sha256"), raw.get("size")
                if not isinstance(sha, str) or len(sha) != 64 or not isinstance(size, int):
                    raise ValueError("written entry without sha256 and size: %r" % (raw,))
                e.sha256, e.size = sha.lower(), size
                run.entries.append(e)
                continue
            if e.what == "renamed":
                e.earlier = _entry_name(raw, "earlier_name")
                run.entries.append(e)
                continue
            path = _saved_path(run, raw.get("saved_as"))
            if "earlier_name" in raw:
                e.earlier = _entry_name(raw, "earlier_name")
            if e.what == "cut":
                rng = raw.get("range")
                if (not isinstance(rng, list) or len(rng) != 2
                        or not all(isinstance(x, int) and x >= 0 for x in rng)
                        or rng[0] > rng[1]):
                    raise ValueError("cut entry without a valid range: %r" % (rng,))
                e.start, e.end = rng
            try:
                e.size = os.lstat(path).st_size
            except OSError:
                e.size = None
            if e.size is not None and names.file_kind(e.file) == names.LOG:
                e.offsets = _tail_offsets(path)
            run.entries.append(e)
    except FileNotFoundError as err:
        # A run stopped before its first manifest was in place set nothing aside (every entry
        # is written before its file operation): a folder holding none of its files is an
        # empty run, not an unreadable one.
        if not _holds_saved_files(run.path):
            run.entries = []
        else:
            run.problem = "%s: manifest not read: %s" % (printable_name(os.path.join(
                run.path, names.QUARANTINE_MANIFEST)), err.strerror or err)
    except (OSError, KafkalogError, ValueError, UnicodeDecodeError) as err:
        run.problem = "%s: manifest not read: %s" % (printable_name(os.path.join(
            run.path, names.QUARANTINE_MANIFEST)), getattr(err, "strerror", None) or err)
    if run.time is None:
        try:
            run.time = datetime.datetime.fromtimestamp(os.lstat(run.path).st_mtime,
                                                       datetime.timezone.utc)
        except OSError:
            pass
    try:
        restored = json.loads(read_sized(os.path.join(run.path, names.QUARANTINE_RESTORED),
                                         1 << 20))
        run.restored = restored if isinstance(restored, dict) else {}
    except FileNotFoundError:
        pass
    except (OSError, KafkalogError, ValueError):
        run.restored = {}
    return run


def run_ids(partition: str) -> List[str]:
    """The run folders of a partition's quarantine, oldest first (none: [])."""
    root = os.path.join(partition, names.QUARANTINE)
    if not os.path.lexists(root):
        return []
    if not real_dir(root):
        raise NotADirectoryError(errno.ENOTDIR, "not a directory (recover keeps what it sets "
                                 "aside in a directory of that name)", root)
    return sorted(n for n in os.listdir(root)
                  if not n.startswith(".") and real_dir(os.path.join(root, n)))


def list_runs(partitions: List[str]) -> List[Run]:
    """Every run of every partition directory given, in partition order, oldest first."""
    return [read_run(p, r) for p in partitions for r in run_ids(p)]


def find_run(partitions: List[str], run_id: str) -> Run:
    """The run ``run_id`` among the partitions' (UsageError when none or several hold it)."""
    if not run_id or "/" in run_id or run_id.startswith("."):
        raise UsageError("%r is not a quarantine run id (`kafkalog quarantine list PATH` shows "
                         "them)" % run_id)
    holders = [p for p in partitions if run_id in run_ids(p)]
    if not holders:
        raise UsageError("no quarantine run %s under %s (`kafkalog quarantine list` shows the "
                         "runs)" % (printable_name(run_id), ", ".join(
                             printable_name(p) for p in partitions)))
    if len(holders) > 1:
        raise UsageError("quarantine run %s is in %d partitions (%s): give the partition "
                         "directory" % (printable_name(run_id), len(holders), ", ".join(
                             printable_name(p) for p in holders)))
    return read_run(holders[0], run_id)


# -- restoring a run --------------------------------------------------------------------------

DONE, DISPLACE, RETURN, APPEND, REWRITE, RENAME_BACK = (
    "done", "displace", "return", "append", "rewrite", "rename")


class RestoreStep:
    """One step of a restore: ``displace`` (the file now at ``name`` set aside in a new run),
    ``return`` (the saved file renamed back to ``name``), ``append`` (the saved tail appended to
    the .log ``name`` from byte ``at`` of the tail: 0, or where an interrupted restore stopped),
    ``rewrite`` (the saved bytes written as ``name``), ``done`` (already in place: a restore
    interrupted after it)."""

    __slots__ = ("kind", "name", "entry", "at", "size")

    def __init__(self, kind: str, name: str, entry: RunEntry, at: int = 0,
                 size: int = 0) -> None:
        self.kind = kind
        self.name = name
        self.entry = entry
        self.at = at
        self.size = size  # bytes displaced, returned, appended or written


class RestorePlan:
    """What restoring ``run`` does (``steps``, in order) and, once done, the run holding what
    was displaced (``displaced_run``: None when nothing was)."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.steps: List[RestoreStep] = []
        self.displaced_run: Optional[str] = None
        # (checkpoint path, old, new): the partition's recovery point lowered, or None
        self.recovery_point: Optional[Tuple[str, int, int]] = None
        # a dry run's: who holds the log directory's lock (a real restore raises it)
        self.lock_held: Optional[LockHeld] = None


def _refuse(path: str, why: str) -> RestoreRefused:
    return RestoreRefused(errno.EEXIST, why, path)


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _check_occupant(run: Run, name: str, returning: str) -> int:
    """The file now at ``name``, which restoring ``returning`` would displace, must be one
    recover writes in place of what it sets aside: an index or producer snapshot (rebuilt
    from the log), the leader-epoch-checkpoint, or an empty .log (the segment recover creates
    at the log start offset). Anything else is newer data: refused. Returns its size."""
    path = os.path.join(run.partition, name)
    if not _regular(path):
        raise _refuse(path, "not a regular file where %s is to return: left alone, restore "
                      "refused" % printable_name(returning))
    size = os.lstat(path).st_size
    kind = names.partition_file_kind(name)
    if not names.lifecycle_suffix(name) and (
            kind in DERIVED_KINDS or name == names.LEADER_EPOCH_CHECKPOINT
            or (kind == names.LOG and size == 0)):
        return size
    raise _refuse(path, "a file of that name is there, and it is not one recover writes "
                  "(%d bytes): restoring run %s would overwrite newer data; restore refused"
                  % (size, printable_name(run.id)))


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(8 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _check_written(run: Run, e: RunEntry) -> int:
    """A file the run wrote where there was none goes (set aside) when it is still the one the
    run wrote, or one recover rebuilds from the log anyway; anything else is newer data."""
    path = os.path.join(run.partition, e.target)
    if _regular(path) and _sha256(path) == e.sha256:
        return os.lstat(path).st_size
    return _check_occupant(run, e.target, e.target)


def _restored_since(run: Run) -> Dict[str, float]:
    """{file: when} for the files that runs made after ``run`` and restored since changed back
    (``when``: the restore's end, its restored.json written): up to then, what they hold is
    what they held before those runs (the partition as ``run``, or an older state, left it),
    not newer data, whatever their modification time says."""
    out: Dict[str, float] = {}
    if run.time is None:
        return out
    for other in list_runs([run.partition]):
        if (other.id == run.id or other.restored is None or other.time is None
                or other.time <= run.time):
            continue
        try:
            when = os.lstat(os.path.join(other.path, names.QUARANTINE_RESTORED)).st_mtime
        except OSError:
            continue
        for e in other.entries:
            out[e.target] = max(out.get(e.target, 0.0), when)
    return out


def _newer_segments(run: Run, present: Dict[str, int], exempt: List[str]) -> None:
    """Refuse when a segment (.log) with data was written after the run started and is not
    one the run touched: returning the run's segments or tails beside it would interleave
    offsets."""
    if run.time is None:
        return
    started = run.time.timestamp()
    restored = _restored_since(run)
    for name in present:
        if name in exempt or not names.is_live_log(name):
            continue
        path = os.path.join(run.partition, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if st.st_size > 0 and st.st_mtime > started and st.st_mtime > restored.get(name, 0.0):
            raise _refuse(path, "written after run %s (%d bytes): restoring the segments it "
                          "set aside would interleave them with newer data; restore refused"
                          % (printable_name(run.id), st.st_size))


def _same_file(a: str, b: str) -> bool:
    """Are ``a`` and ``b`` one file (a hard link), or regular files of the same bytes (the
    copy made where the file system has no hard links)?"""
    try:
        sa, sb = os.lstat(a), os.lstat(b)
    except OSError:
        return False
    if os.path.samestat(sa, sb):
        return True
    return (stat.S_ISREG(sa.st_mode) and stat.S_ISREG(sb.st_mode) and sa.st_size == sb.st_size
            and _sha256(a) == _sha256(b))


def _kept_in_place(run: Run, name: str) -> bool:
    """Is the file at ``name`` the very file a ``moved`` entry of ``run`` set aside?"""
    target = os.path.join(run.partition, name)
    return any(e.what == "moved" and e.target == name and e.saved
               and _same_file(target, os.path.join(run.path, e.saved)) for e in run.entries)


def _same_prefix(log: str, start: int, saved: str, length: int) -> bool:
    """Are bytes [start, start + length) of ``log`` the first ``length`` bytes of ``saved``?"""
    with open(log, "rb") as a, open(saved, "rb") as b:
        a.seek(start)
        left = length
        while left > 0:
            n = min(left, 8 << 20)
            x, y = a.read(n), b.read(n)
            if x != y or len(x) != n:
                return False
            left -= n
    return True


def plan_restore(run: Run) -> RestorePlan:
    """Every step restoring ``run`` takes, checked against the partition as it is now; raises
    RestoreRefused (nothing changed) when the run cannot be restored as recorded, or restoring
    it would overwrite or interleave newer data. The entries are undone last first, as recover
    made them (a cut tail goes back before the later segments set aside with it)."""
    if run.problem is not None:
        raise RestoreRefused(errno.EINVAL, run.problem + "; restore refused")
    if run.restored is not None:
        raise _refuse(os.path.join(run.path, names.QUARANTINE_RESTORED),
                      "run %s was restored already" % printable_name(run.id))
    plan = RestorePlan(run)
    present: Dict[str, int] = {n: 1 for n in os.listdir(run.partition)
                               if os.path.lexists(os.path.join(run.partition, n))}
    exempt = [e.file for e in run.entries if e.what in ("cut", "renamed")]
    returns_log = False
    for e in reversed(run.entries):
        target = os.path.join(run.partition, e.target)
        if e.what == "renamed":
            assert e.earlier is not None
            now = os.path.join(run.partition, e.file)
            if e.file in present and e.earlier not in present and _regular(now):
                plan.steps.append(RestoreStep(RENAME_BACK, e.file, e,
                                              size=os.lstat(now).st_size))
                del present[e.file]
                present[e.earlier] = 1
            elif e.file not in present and e.earlier in present:
                plan.steps.append(RestoreStep(DONE, e.file, e))  # never renamed, or back
            else:
                raise _refuse(now, "run %s renamed %s to this name; %s: restore refused" % (
                    printable_name(run.id), printable_name(e.earlier),
                    "both names are taken" if e.file in present else "neither name is there"))
            continue
        if e.what == "written":
            if e.target in present and _kept_in_place(run, e.target):
                # set aside by a link and never replaced (a split stopped before it renamed
                # its segments into place, undone by the next recover): nothing was written
                continue
            if e.target in present:
                size = _check_written(run, e)
                plan.steps.append(RestoreStep(DISPLACE, e.target, e, size=size))
                del present[e.target]
            continue
        saved = os.path.join(run.path, e.saved)
        has_saved = _regular(saved)
        if e.what == "moved":
            if has_saved and e.target in present and _same_file(target, saved):
                plan.steps.append(RestoreStep(DONE, e.target, e))
                continue
            if not has_saved:
                if e.target in present and not os.path.lexists(saved):
                    plan.steps.append(RestoreStep(DONE, e.target, e))
                    continue
                raise _refuse(saved, "the file run %s set aside is not in its folder: restore "
                              "refused" % printable_name(run.id))
            if e.target in present:
                size = _check_occupant(run, e.target, e.target)
                plan.steps.append(RestoreStep(DISPLACE, e.target, e, size=size))
            plan.steps.append(RestoreStep(RETURN, e.target, e, size=os.lstat(saved).st_size))
            present[e.target] = 1
            returns_log = returns_log or names.is_live_log(e.target)
        elif (e.what == "cut" and not has_saved and e.target in present and _regular(target)
              and os.lstat(target).st_size >= e.end):
            # the run was stopped between its intent and the cut: the bytes never left
            plan.steps.append(RestoreStep(DONE, e.target, e))
        elif e.what == "copied" and not has_saved and e.target in present:
            # the run was stopped between its intent and the copy: the file was not rewritten
            plan.steps.append(RestoreStep(DONE, e.target, e))
        elif not has_saved:
            raise _refuse(saved, "the bytes run %s saved are not in its folder: restore refused"
                          % printable_name(run.id))
        elif e.what == "cut":
            plan.steps.append(_plan_append(run, e, saved, target, e.target in present))
            returns_log = True
        else:  # copied: a file rewritten in place, its old bytes saved
            old = read_sized(saved, 64 << 20)
            if e.target in present and _regular(target) and read_sized(target, 64 << 20) == old:
                plan.steps.append(RestoreStep(DONE, e.target, e))
                continue
            if e.target in present:
                size = _check_occupant(run, e.target, e.target)
                plan.steps.append(RestoreStep(DISPLACE, e.target, e, size=size))
            plan.steps.append(RestoreStep(REWRITE, e.target, e, size=len(old)))
            present[e.target] = 1
    if returns_log:
        _newer_segments(run, present, exempt + [s.name for s in plan.steps if s.kind == RETURN])
    plan.recovery_point = _recovery_point_to_lower(run)
    return plan


def _recovery_point_to_lower(run: Run) -> Optional[Tuple[str, int, int]]:
    """recover wrote the partition's recovery point at the log end offset it left; the files
    a restore brings back below it were never validated there. The recovery point goes down
    to the lowest base offset of the segments whose files the run set aside or cut (a .log,
    an index: those it recovered), so that the broker, or `recover`, recovers them again as
    the run did (LogLoader recovers from the segment holding the recovery point). Lowering it
    is always safe: more is recovered. A missing entry or file already means every segment;
    an unreadable file is left alone (RestoreRefused would stop a restore for a checkpoint)."""
    from .partition import Partition
    offsets = [names.base_offset_from_name(e.target) for e in run.entries
               if not names.lifecycle_suffix(e.target)
               and names.partition_file_kind(e.target) in names.SEGMENT_KINDS]
    lowest = min((o for o in offsets if o is not None), default=None)
    if lowest is None:
        return None
    partition = Partition(run.partition)
    try:
        found = partition.checkpointed(names.RECOVERY_POINT_CHECKPOINT)
    except (OSError, KafkalogError):
        return None
    if found is None or found <= lowest:
        return None
    return os.path.join(partition.log_dir, names.RECOVERY_POINT_CHECKPOINT), found, lowest


def _plan_append(run: Run, e: RunEntry, saved: str, target: str, there: bool) -> RestoreStep:
    """The cut tail goes back where it was cut: only onto a .log whose size is the cut
    position (or, after an interrupted restore, whose bytes past it are the tail's first)."""
    tail = os.lstat(saved).st_size
    if tail != e.end - e.start:
        raise _refuse(saved, "holds %d bytes, the cut was %d-%d: restore refused"
                      % (tail, e.start, e.end))
    if not there or not _regular(target):
        raise _refuse(target, "not there (or not a regular file): the bytes cut from it "
                      "cannot go back; restore refused")
    size = os.lstat(target).st_size
    if size == e.start:
        return RestoreStep(APPEND, e.file, e, at=0, size=tail)
    if e.start < size <= e.end and _same_prefix(target, e.start, saved, size - e.start):
        if size == e.end:
            return RestoreStep(DONE, e.file, e)
        return RestoreStep(APPEND, e.file, e, at=size - e.start, size=e.end - size)
    raise _refuse(target, "%d bytes now, cut at byte %d by run %s: it changed since, and "
                  "appending the cut bytes would overwrite or interleave newer data; restore "
                  "refused" % (size, e.start, printable_name(run.id)))


def _append(log: str, pos: int, saved: str, at: int) -> None:
    """Append the bytes of ``saved`` from ``at`` on to ``log``, which holds ``pos`` bytes."""
    with os.fdopen(open_in_place(log, os.O_RDWR), "r+b") as out, open(saved, "rb") as src:
        if os.fstat(out.fileno()).st_size != pos:
            raise RestoreRefused(errno.EAGAIN, "changed size while being restored", log)
        out.seek(pos)
        src.seek(at)
        while True:
            chunk = src.read(8 << 20)
            if not chunk:
                break
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())


def restore_run(run: Run, dry_run: bool = False) -> RestorePlan:
    """Put back what ``run`` set aside (``plan_restore`` says what and refuses what it must),
    holding the lock of the log directory that really holds the partition (LockHeld while a
    broker holds it; a dry run changes nothing and reads beside a broker, ``lock_held`` saying
    who holds it). Files now standing where run's files return are set aside first in a new
    run of the quarantine (``displaced_run``), so nothing is lost. The log directory's
    clean-shutdown marker is lifted before the first change and put back once
    everything is flushed, as recover does. Every step is flushed before the next, and a
    restore interrupted at any point is finished by running it again. Once done, the run's
    folder gets ``restored.json`` (the saved tails and copies stay in it until purged)."""
    from .logdir import CleanShutdownMarker
    from .partition import Partition
    log_dir = Partition(run.partition).log_dir
    with LogDirLock.for_run(log_dir, [run.partition], dry_run) as lock:
        plan = plan_restore(run)
        if dry_run:
            plan.lock_held = lock.held
            return plan
        marker = CleanShutdownMarker(log_dir)
        q = Quarantine(run.partition, tool=RESTORE_TOOL)
        if plan.recovery_point is not None:
            # first: a restore killed half-way must leave what it brought back below the
            # recovery point, to be recovered
            from . import checkpoints
            marker.lift()
            path, _, lowest = plan.recovery_point
            topic, number = names.topic_partition(run.partition)
            assert topic is not None and number is not None
            checkpoints.write_offset_checkpoint(path, {(topic, number): lowest})
        for step in plan.steps:
            if step.kind == DONE:
                continue
            marker.lift()
            e = step.entry
            assert e is not None
            target = os.path.join(run.partition, step.name)
            saved = os.path.join(run.path, e.saved)
            if step.kind == DISPLACE:
                kept = q.reserve(step.name)
                dst = os.path.join(q.folder(), kept)
                rename_noreplace(target, dst)
                fsync_dir(os.path.dirname(dst))
                fsync_dir(run.partition)
                why = ("written by run %s where there was no file" if e.what == "written"
                       else "stood where run %%s's %s returned" % printable_name(e.target))
                q.record(manifest_entry("moved", step.name, kept, why % printable_name(run.id)
                                        + " (kafkalog quarantine restore)"))
            elif step.kind == RENAME_BACK:
                assert e.earlier is not None
                rename_noreplace(target, os.path.join(run.partition, e.earlier))
                fsync_dir(run.partition)
            elif step.kind == RETURN:
                rename_noreplace(saved, target)
                fsync_dir(run.partition)
                fsync_dir(os.path.dirname(saved))
            elif step.kind == APPEND:
                _append(target, e.start + step.at, saved, step.at)
            elif step.kind == REWRITE:
                write_new(target, read_sized(saved, 64 << 20))
        plan.displaced_run = os.path.basename(q.path) if q.path else None
        marker.restore()
        # last: a restore killed before it is finished by a rerun (every step then done)
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        write_new(os.path.join(run.path, names.QUARANTINE_RESTORED), json.dumps(
            {"tool": RESTORE_TOOL, "time": now, "displacedTo": plan.displaced_run},
            indent=1).encode())
    return plan


# -- purging old runs ---------------------------------------------------------------------------

def purge_runs(partitions: List[str], older_than: datetime.timedelta,
               now: Optional[datetime.datetime] = None, dry_run: bool = False) -> List[Run]:
    """Delete the runs of the partitions that started more than ``older_than`` before ``now``
    (the manifest's time; for a run without a readable one, the time in its folder name),
    holding the lock of each log directory that really holds them (a dry run takes none and
    deletes nothing). Returns the runs deleted (or that would be). A run is renamed to
    ``.<id>.purging`` (flushed) before it is deleted, so a run half deleted by a crash is never
    listed nor restored; a later purge finishes it."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    cutoff = now - older_than
    runs = [r for r in list_runs(partitions) if r.time is not None and r.time < cutoff]
    if dry_run:
        return runs
    by_log_dir: Dict[str, List[str]] = {}
    for p in partitions:
        by_log_dir.setdefault(os.path.dirname(os.path.abspath(p)), []).append(p)
    for log_dir, parts in by_log_dir.items():
        with LogDirLock(log_dir, partitions=parts):
            for r in runs:
                if r.partition in parts:
                    _delete_run(r)
            for p in parts:
                _remove_purging_leftovers(p)
    return runs


def _delete_run(run: Run) -> None:
    root = os.path.dirname(run.path)
    doomed = os.path.join(root, "." + run.id + names.QUARANTINE_PURGING)
    rename_noreplace(run.path, doomed)
    fsync_dir(root)
    shutil.rmtree(doomed)
    fsync_dir(root)


def _remove_purging_leftovers(partition: str) -> None:
    root = os.path.join(partition, names.QUARANTINE)
    if not real_dir(root):
        return
    for n in os.listdir(root):
        if (n.startswith(".") and n.endswith(names.QUARANTINE_PURGING)
                and real_dir(os.path.join(root, n))):
            shutil.rmtree(os.path.join(root, n))
            fsync_dir(root)
