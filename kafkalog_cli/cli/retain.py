"""`kafkalog retain`: the broker's retention, offline."""

from __future__ import annotations

import datetime
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import click

from ..errors import KafkalogError, UsageError
from ..log.lock import preview_warning
from ..log.names import RECOVERY_POINT_CHECKPOINT, topic_partition
from ..log.partition import Partition
from ..log.retain import DELETED, LogDirRetention, Policy, RetainedSegment, RetentionPlan
from ..log.segment_writer import AppendError
from .errors import error_text, fail
from .output import Column, Output, human_bytes, show, table, new_offsets_text, offsets_text, plural
from .targets import partitions_by_log_dir
from .numbers import java_long
from .times import now_option

# 1: a dry run that would delete something (as `recover --dry-run` exits 1 when it would repair)
EXIT_OK, EXIT_WOULD_CHANGE, EXIT_ERROR = 0, 1, 2

# The options that say what to delete; without one of them (or an explicit
# --file-delete-delay-ms: only finish earlier deletions), retain refuses to guess a policy.
_POLICY_OPTIONS = ("retention_ms", "retention_bytes", "log_start_offset", "file_delete_delay_ms")


def _require_policy(ctx: click.Context) -> None:
    """Exit 2 (one line) unless the command line names a policy: a broker's defaults (7 days,
    no size limit) are the broker's configuration, not something to assume offline."""
    given = [name for name in _POLICY_OPTIONS
             if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE]
    if not given:
        fail(UsageError("retain: no policy given: name --retention-ms, --retention-bytes "
                        "(-1: no limit) or --log-start-offset, or --file-delete-delay-ms to only "
                        "finish earlier deletions"))


def _iso(ms: Optional[int]) -> str:
    if ms is None or ms < 0:
        return "-"
    try:
        return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return str(ms)


def _where(directory: str) -> Dict[str, Any]:
    topic, number = topic_partition(directory)
    return {"topic": topic, "partition": number}


def _segment_json(plan: RetentionPlan, s: RetainedSegment, path: str,
                  dry_run: bool) -> Dict[str, Any]:
    return dict(type="segment", **_where(plan.directory), file=path, baseOffset=s.base_offset,
                firstOffset=s.first_offset, lastOffset=s.last_offset, nextOffset=s.next_offset,
                records=s.records, sizeBytes=s.size, firstTimestamp=s.first_timestamp,
                largestTimestamp=s.largest_timestamp, timestampSource=s.timestamp_source,
                fate=s.fate, why=s.why, dryRun=dry_run)


def _partition_json(plan: RetentionPlan, dry_run: bool) -> Dict[str, Any]:
    removed = plan.removed_offsets
    return dict(type="partition", **_where(plan.directory), directory=plan.directory,
                highWatermark=plan.high_watermark, highWatermarkSource=plan.high_watermark_source,
                logEndOffset=plan.log_end, previousLogStartOffset=plan.old_log_start,
                logStartOffset=plan.log_start_offset, segmentsDeleted=len(plan.deleted),
                recordsRemoved=plan.records_removed, bytesRemoved=plan.bytes_removed,
                firstOffsetRemoved=None if removed is None else removed[0],
                lastOffsetRemoved=None if removed is None else removed[1],
                deletedFilesRemoved=len(plan.deleted_files_removed),
                rollFirst=plan.roll_first, dryRun=dry_run)


def _size(n: int, human: bool) -> str:
    return human_bytes(n) if human else "%d bytes" % n


def _removal_text(plan: RetentionPlan, dry_run: bool, human: bool = False) -> str:
    """"offsets 0-299 (300 records, 2 segments, 117.6 KiB) deleted; new log start offset 300",
    in the conditional for a dry run."""
    removed = plan.removed_offsets
    if not plan.deleted:
        return "no segment to delete%s; log start offset %d" % (
            _purged_text(len(plan.deleted_files_removed), dry_run), plan.log_start_offset)
    what = ("offsets %d-%d" % removed) if removed is not None else "no batch"
    return "%s (%s, %s, %s) %s%s; new log start offset %s%d" % (
        what, plural(plan.records_removed, "record"), plural(len(plan.deleted), "segment"),
        _size(plan.bytes_removed, human), "would be deleted" if dry_run else "deleted",
        _purged_text(len(plan.deleted_files_removed), dry_run),
        "would be " if dry_run else "", plan.log_start_offset)


def _purged_text(n: int, dry_run: bool) -> str:
    """"; 3 .deleted files removed" (their --file-delete-delay-ms past), "" for none."""
    if not n:
        return ""
    return "; %d .deleted file%s %s" % (n, "" if n == 1 else "s",
                                        "would be removed" if dry_run else "removed")


class _Output(Output):
    """Each partition's plan and the summary, in one layout (a terminal's lines beside the
    tables: notes, recovery points)."""

    def __init__(self, fmt: str, dry_run: bool) -> None:
        super().__init__(fmt, beside_tables=True)
        self.dry_run = dry_run
        self.plans: List[RetentionPlan] = []

    def partition(self, plan: RetentionPlan) -> None:
        """A partition's plan, once it is carried out."""
        d = plan.directory
        dry_run = self.dry_run
        self.plans.append(plan)
        verb = "would be deleted" if dry_run else "deleted"
        if not self.table:
            self.emit(_partition_json(plan, dry_run),
                      "%s: high watermark %d (%s), log end offset %d%s; %s"
                      % (d, plan.high_watermark, plan.high_watermark_source, plan.log_end,
                         "; the active segment is rolled first" if plan.roll_first else "",
                         _removal_text(plan, dry_run)))
            for s in plan.segments:
                path = os.path.join(d, s.name)
                self.emit(_segment_json(plan, s, path, dry_run),
                          "%s: %s (%s): %s, %d bytes"
                          % (path, verb if s.fate == DELETED else "kept", s.why or "-",
                             offsets_text(s.first_offset, s.last_offset, s.records), s.size))
        self._recovery_point(plan)

    def _recovery_point(self, plan: RetentionPlan) -> None:
        """The partition's recovery point raised to the new log start offset (or why not read),
        said as recover says a recovery point it sets."""
        dry_run = self.dry_run
        where = _where(plan.directory)
        if plan.recovery_point_problem is not None:
            self.emit(dict(type="note", **where, file=plan.directory,
                           message=plan.recovery_point_problem), plan.recovery_point_problem)
        if plan.recovery_point_raise is None:
            return
        old, new = plan.recovery_point_raise
        partition = Partition(plan.directory)
        path = os.path.join(partition.log_dir, RECOVERY_POINT_CHECKPOINT)
        topic, number = partition.topic, partition.number
        self.emit(dict(type="recoveryPoint", **where, file=path, old=old, new=new,
                       dryRun=dry_run),
                  "%s: %s-%s: recovery point %s to the log start offset %d (was %d)"
                  % (path, topic, number, "would be raised" if dry_run else "raised", new, old))

    def totals(self, failed: bool = False) -> None:
        """The summary (on a terminal, the tables first, then the lines held); no summary line
        after a run that ``failed`` before any partition (its error line says it all), the
        JSON summary still."""
        plans, dry_run = self.plans, self.dry_run
        deleted = sum(len(p.deleted) for p in plans)
        purged = sum(len(p.deleted_files_removed) for p in plans)
        records = sum(p.records_removed for p in plans)
        size = sum(p.bytes_removed for p in plans)
        starts = [dict(_where(p.directory), logStartOffset=p.log_start_offset)
                  for p in plans if p.deleted]
        if self.table:
            _tables(plans, dry_run)
        if deleted:
            text = "%s: %s (%s, %s) %s" % (
                plural(len(plans), "partition"), plural(deleted, "segment"),
                plural(records, "record"), _size(size, self.table),
                "would be deleted" if dry_run else "deleted")
        else:
            text = "%s: %s" % (plural(len(plans), "partition"),
                               "no segment to delete" if purged else "nothing to delete")
        text += _purged_text(purged, dry_run)
        text += new_offsets_text("log start offset", starts, "logStartOffset")
        if dry_run:
            text += " (dry run: nothing changed)"
        self.summary("retain", None if failed and not plans else text, partitions=len(plans),
                     segments_deleted=deleted, records_removed=records, bytes_removed=size,
                     deleted_files_removed=purged, log_start_offsets=starts, dry_run=dry_run)


# the segment's name (its base offset) and its offsets are never cut short
COLUMNS = (Column("segment", no_wrap=True), Column("offsets", no_wrap=True),
           Column("records", "right"), Column("size", "right"), Column("first timestamp"),
           Column("largest timestamp"), Column("fate"), Column("why"))


def _tables(plans: Sequence[RetentionPlan], dry_run: bool) -> None:
    from rich.markup import escape
    show(*(table("%s%s: high watermark %d (%s), log end offset %d; %s" % (
        escape(plan.directory), " (dry run)" if dry_run else "", plan.high_watermark,
        escape(plan.high_watermark_source), plan.log_end,
        escape(_removal_text(plan, dry_run, human=True))), COLUMNS, [
        (escape(s.name), "-" if s.first_offset is None or s.last_offset is None
         else "%d-%d" % (s.first_offset, s.last_offset),
         str(s.records), human_bytes(s.size), _iso(s.first_timestamp), _iso(s.largest_timestamp),
         ("[red]%s[/red]" % ("would be deleted" if dry_run else "deleted"))
         if s.fate == DELETED else "kept", escape(s.why or ""))
        for s in plan.segments]) for plan in plans))


@click.command(short_help="Delete expired segments, as a broker's retention does.")
@click.argument("paths", nargs=-1, required=True, type=click.Path(readable=False))
@click.option("--retention-ms", type=java_long(None), default=None,
              help="Delete segments whose largest timestamp is older than now minus this.")
@click.option("--retention-bytes", type=java_long(None), default=None,
              help="Per partition: delete the oldest segments while it stays above this size.")
@click.option("--log-start-offset", type=java_long(0), default=None,
              help="The log start offset, as DeleteRecords sets it: segments wholly below it "
                   "are deleted, and it is recorded in log-start-offset-checkpoint.")
@click.option("--now", default=None, metavar="TIME", callback=now_option,
              help="Evaluate at this time (epoch ms or ISO 8601; default: the wall clock).")
@click.option("--high-watermark", type=java_long(0), default=None,
              help="Used when replication-offset-checkpoint has no entry for the partition.")
@click.option("--roll-active", is_flag=True,
              help="When every segment is to go, roll first so that the active one can go too.")
@click.option("--file-delete-delay-ms", type=java_long(0), default=60000, show_default=True,
              help="Remove .deleted files this long after their deletion (0: at once).")
@click.option("--dry-run", is_flag=True,
              help="Print the plan; change nothing. Exit 1 when something would be deleted.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.pass_context
def retain(ctx: click.Context, paths: Tuple[str, ...], retention_ms: Optional[int],
           retention_bytes: Optional[int], log_start_offset: Optional[int], now: Optional[int],
           high_watermark: Optional[int], roll_active: bool, file_delete_delay_ms: int,
           dry_run: bool, fmt: str) -> None:
    """Delete expired segments of partitions as a broker's retention does.

    PATHS are partition directories or log directories. The high watermark bounds every
    deletion. Deleted segments' files are renamed to .deleted together and removed after
    --file-delete-delay-ms (by this or a later run). Refuses while a broker holds the log
    directory (--dry-run reads anyway, with a warning). At least one of --retention-ms,
    --retention-bytes (-1: no limit), --log-start-offset or --file-delete-delay-ms must be
    given. Exit status: 0 done or
    nothing to do, 1 a --dry-run that would delete something, 2 usage error or errors.
    """
    _require_policy(ctx)
    policy = Policy(retention_ms, retention_bytes, log_start_offset, now, high_watermark,
                    roll_active)
    out = _Output(fmt, dry_run)
    by_log_dir, ok = partitions_by_log_dir(paths)
    status = EXIT_OK if ok else EXIT_ERROR
    for log_dir, partitions in by_log_dir.items():
        run = LogDirRetention(log_dir, partitions, policy, dry_run, file_delete_delay_ms)
        warned = False
        try:
            for plan in run.run():
                # a dry run only reads: beside a broker it goes on, with a warning
                if run.lock_held is not None and not warned:
                    warned = True
                    click.echo("kafkalog: warning: " + preview_warning(run.lock_held), err=True)
                out.partition(plan)  # what was done, once it is done
                if dry_run and plan.deleted:
                    status = max(status, EXIT_WOULD_CHANGE)
        except AppendError as e:
            click.echo("kafkalog: cannot roll the active segment first: %s" % e, err=True)
            status = EXIT_ERROR
        except (OSError, KafkalogError) as e:  # LockHeld: a broker holds the log directory
            if run.lock_held is not None and not warned:
                click.echo("kafkalog: warning: " + preview_warning(run.lock_held), err=True)
            click.echo("kafkalog: " + error_text(e, run.current), err=True)
            status = EXIT_ERROR
    out.totals(failed=status == EXIT_ERROR)
    sys.exit(status)
