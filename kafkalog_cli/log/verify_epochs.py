"""A partition's ``leader-epoch-checkpoint`` held against the leader epochs of its batches
(LeaderEpochFileCache as the broker keeps it), for verify-index."""

from __future__ import annotations

import bisect
import os
from typing import (Any, Dict, List, Optional, Tuple, cast)

from ..errors import KafkalogError
from . import names
from .files import FileFormatError
from .findings import (LEADER_EPOCH_BACKWARDS, LEADER_EPOCH_BEFORE_CACHE, LEADER_EPOCH_MISMATCH,
                       LEADER_EPOCH_MISSING, LEADER_EPOCH_PAST_END, MALFORMED_CHECKPOINT, Finding)
from .index_check import BatchChain, FileReport
from .leader_epochs import LeaderEpochCache, read_checkpoint_strict
from .partition import Partition


class _EpochRun:
    """Consecutive v2 batches with the same finding (``key``: kind, the batches' epoch, the
    epoch they are compared with): reported once, as one Finding."""

    __slots__ = ("key", "first", "last", "batches", "since")

    def __init__(self, key: Tuple[str, int, Optional[int]], first: int, last: int,
                 since: Optional[int]) -> None:
        self.key = key
        self.first = first
        self.last = last
        self.batches = 1
        self.since = since  # where the compared epoch starts (cache entry, or earlier batch)


class LeaderEpochCheck:
    """A partition's ``leader-epoch-checkpoint`` against the v2 batches of its live segments,
    given a segment at a time in offset order from the batch chains verify reads for the
    indexes (batch headers only: nothing is decompressed, the log is not read again).

    The file is read strictly (``read_checkpoint_strict``): one not written by the broker's
    LeaderEpochFileCache is a MALFORMED_CHECKPOINT problem and the batches are not judged.
    Then every v2 batch with a partitionLeaderEpoch (>= 0; v0/v1 entries carry none) must
    carry the epoch the cache gives for its base offset (LeaderEpochFileCache.epochForOffset:
    the entry starting at or before it whose successor starts after it), since UnifiedLog.append
    and LogSegment.recover assign each epoch at the base offset of its first batch: a batch
    with a higher epoch, or none in the cache, is LEADER_EPOCH_MISSING, one with a lower epoch
    LEADER_EPOCH_MISMATCH, and a batch whose epoch is below one earlier in the log
    LEADER_EPOCH_BACKWARDS (reported instead: the cache, whose epochs only increase, cannot
    hold it). Consecutive batches with one finding are one problem.

    Batches before the cache's first entry (all of them, for an empty cache) whose epoch is
    not above that entry's are a LEADER_EPOCH_BEFORE_CACHE note: the broker leaves such a log
    itself when its cache starts after them (UnifiedLog.append clears the cache when a v0/v1
    batch is appended; a partition loaded without a checkpoint starts with an empty cache, and
    LogLoader reassigns epochs from the recovered segments only), and it serves them as
    epochs older than its cache (LeaderEpochFileCache.endOffsetFor).

    Batches below the partition's log start offset (its log directory's
    log-start-offset-checkpoint) are not judged: the cache covers the log from there only
    (LeaderEpochFileCache.truncateFromStart, at every log start increase and in LogLoader).
    """

    def __init__(self, directory: str, sanity_only: bool = False) -> None:
        self.directory = directory
        self.path = os.path.join(directory, names.LEADER_EPOCH_CHECKPOINT)
        self.cache: Optional[LeaderEpochCache] = None
        self.error: Optional[OSError] = None
        self.problems: List[Finding] = []
        self.notes: List[Finding] = []
        self.log_end: Optional[int] = None  # known once the active segment is given
        self.sanity_only = sanity_only
        self.log_start: Optional[int] = None
        self._starts: List[int] = []
        self._highest: Optional[Tuple[int, int]] = None  # (epoch, base offset) so far
        self._run: Optional[_EpochRun] = None
        try:
            self.cache = LeaderEpochCache(read_checkpoint_strict(self.path))
        except OSError as e:
            self.error = e
            return
        except FileFormatError as e:
            message = str(e)
            if message.startswith(self.path + ": "):
                message = message[len(self.path) + 2:]
            self.problems.append(Finding(MALFORMED_CHECKPOINT,
                message, self.path))
            return
        self._starts = [start for _, start in self.cache.entries]
        self.log_start = _checkpointed_log_start(directory)

    @classmethod
    def of(cls, directory: str, sanity_only: bool = False) -> Optional["LeaderEpochCheck"]:
        """The check of the partition in ``directory``, or None when it has no
        leader-epoch-checkpoint (the broker starts with an empty cache: nothing to check)."""
        if not os.path.lexists(os.path.join(directory, names.LEADER_EPOCH_CHECKPOINT)):
            return None
        check = cls(directory, sanity_only)
        if isinstance(check.error, FileNotFoundError):
            return None  # removed since (a broker deleting the partition)
        return check

    @property
    def judging(self) -> bool:
        return self.cache is not None and not self.sanity_only

    def add_segment(self, base_offset: Optional[int], chain: BatchChain, active: bool) -> None:
        """The batches of a live segment (after those of the segments before it), and,
        for the ``active`` one, the log end offset (LogSegment.readNextOffset: the offset after
        its last batch, its base offset when it has none)."""
        if not self.judging:
            return
        bases, lasts, epochs = chain.bases, chain.lasts, chain.epochs
        log_start = self.log_start
        for i in range(len(bases)):
            epoch = epochs[i]
            if epoch < 0:
                continue  # v0/v1, or a v2 batch written with no epoch (-1)
            last = lasts[i]
            at = bases[i]
            if log_start is not None:
                if last < log_start:
                    continue
                at = max(at, log_start)
            self._batch(at, last, epoch)
        if active:
            self.log_end = lasts[-1] + 1 if len(lasts) else base_offset

    def _batch(self, at: int, last: int, epoch: int) -> None:
        highest = self._highest
        if highest is not None and epoch < highest[0]:
            self._extend((LEADER_EPOCH_BACKWARDS, epoch, highest[0]), at, last, highest[1])
            return
        if highest is None or epoch > highest[0]:
            self._highest = (epoch, at)
        i = bisect.bisect_right(self._starts, at) - 1
        assert self.cache is not None
        cached = self.cache.entries[i][0] if i >= 0 else None
        if cached == epoch:
            self._flush()
            return
        if cached is None:
            first_epoch, first_start = self.cache.entries[0] if self._starts else (None, None)
            if first_epoch is None or epoch <= first_epoch:
                self._extend((LEADER_EPOCH_BEFORE_CACHE, epoch, first_epoch), at, last,
                             first_start)
                return
        kind = LEADER_EPOCH_MISSING if cached is None or epoch > cached else LEADER_EPOCH_MISMATCH
        self._extend((kind, epoch, cached), at, last, self._starts[i] if i >= 0 else None)

    def _extend(self, key: Tuple[str, int, Optional[int]], at: int, last: int,
                since: Optional[int]) -> None:
        run = self._run
        if run is not None and run.key == key:
            run.last = max(run.last, last)
            run.batches += 1
            return
        self._flush()
        self._run = _EpochRun(key, at, last, since)

    def _flush(self) -> None:
        run, self._run = self._run, None
        if run is None:
            return
        kind, epoch, other = run.key
        since = cast(int, run.since)  # set for a finding that compares with an epoch
        span = ("offset %d" % run.first if run.first == run.last
                else "offsets %d to %d" % (run.first, run.last))
        where = ("the batch at %s carries" % span if run.batches == 1
                 else "the %d batches at %s carry" % (run.batches, span))
        assign = ("the broker assigns an epoch at the base offset of its first batch: "
                  "UnifiedLog.append, LogSegment.recover")
        if kind == LEADER_EPOCH_BEFORE_CACHE:
            self.notes.append(Finding(kind,
                "%s leader epoch %d, before the cache's %s: not covered by "
                "it, as when the broker's cache starts after them (no checkpoint then, or one "
                "cleared by a v0/v1 append: UnifiedLog.append)"
                % (where, epoch, "first entry (epoch %d at offset %d)" % (other, since)
                   if other is not None else "entries (it has none)"), self.path,
                offset=run.first, last_offset=run.last, batches=run.batches, epoch=epoch,
                cache_epoch=other, cache_start_offset=run.since))
            return
        if kind == LEADER_EPOCH_BACKWARDS:
            previous = cast(int, other)
            message = ("%s leader epoch %d, below epoch %d of the batch at offset %d before: "
                       "a partition's epochs only increase" % (where, epoch, previous, since))
            fields: Dict[str, Any] = {"previous_epoch": previous, "previous_offset": since}
        elif other is None:
            message = ("%s leader epoch %d, which the cache lacks: %s (%s)"
                       % (where, epoch, "it has no entry" if not self._starts else
                          "its first entry starts at offset %d" % self._starts[0], assign))
            fields = {"cache_epoch": None}
        elif kind == LEADER_EPOCH_MISSING:
            message = ("%s leader epoch %d, which the cache lacks: it gives epoch %d from "
                       "offset %d there (%s)" % (where, epoch, other, since, assign))
            fields = {"cache_epoch": other, "cache_start_offset": since}
        else:
            message = ("%s leader epoch %d, but the cache gives the later epoch %d from offset "
                       "%d there" % (where, epoch, other, since))
            fields = {"cache_epoch": other, "cache_start_offset": since}
        self.problems.append(Finding(kind,
            message, self.path, offset=run.first,
            last_offset=run.last, batches=run.batches, epoch=epoch,
            **fields))

    def report(self) -> FileReport:
        """What was found: the checkpoint's FileReport (``error`` when it could not be read)."""
        self._flush()
        if self.cache is not None and self.log_end is not None and not self.sanity_only:
            # Entries at or past the log end offset are a note, not a problem: the broker
            # drops them when it loads the log (LogLoader.load calls
            # LeaderEpochFileCache.truncateFromEndAsyncFlush at the recovered log end offset),
            # and a broker leaves them in normal operation: truncateFromEndAsyncFlush writes
            # the file in the background, so a crash keeps entries the log was truncated below
            # ("handled by another truncateFromEnd call on log loading procedure", it says),
            # and a new leader assigns its epoch at the log end offset before it writes
            # anything (UnifiedLog.maybeAssignEpochStartOffset from Partition.makeLeader).
            for epoch, start in self.cache.entries:
                if start >= self.log_end:
                    self.notes.append(Finding(LEADER_EPOCH_PAST_END,
                        "epoch %d starts at offset %d, at or past the log end offset %d: the "
                        "broker drops the entry when it loads the log (LogLoader: "
                        "LeaderEpochFileCache.truncateFromEnd)" % (epoch, start, self.log_end),
                        self.path, epoch=epoch, offset=start, log_end_offset=self.log_end))
        entries = len(self.cache.entries) if self.cache is not None else 0
        return FileReport(self.path, names.LEADER_EPOCHS, entries, self.problems, self.notes,
                          error=self.error)


def _checkpointed_log_start(directory: str) -> Optional[int]:
    """The partition's entry in its log directory's log-start-offset-checkpoint, or None (no
    file, no entry, a directory name that is no partition's, or a file that cannot be read:
    verify-index does not judge that file)."""
    try:
        return Partition(directory).checkpointed(names.LOG_START_OFFSET_CHECKPOINT)
    except (OSError, KafkalogError):
        return None
