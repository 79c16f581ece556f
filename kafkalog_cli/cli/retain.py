"""`kafkalog retain`: the broker's retention, offline."""

from __future__ import annotations

import datetime
import json
import os
import sys

import click

from ..errors import KafkalogError, UsageError
from ..log.append import AppendError
from ..log.logdir import LogDir
from ..log.names import RECOVERY_POINT_CHECKPOINT
from ..log.partition import Partition
from ..log.retain import DELETED, Policy, retain_partition
from .errors import error_text, fail
from .targets import partitions_by_log_dir

# 1: a dry run that would delete something (as `recover --dry-run` exits 1 when it would repair)
EXIT_OK, EXIT_WOULD_CHANGE, EXIT_ERROR = 0, 1, 2

# The options that say what to delete; without one of them (or an explicit
# --file-delete-delay-ms: only finish earlier deletions), retain refuses to guess a policy.
_POLICY_OPTIONS = ("retention_ms", "retention_bytes", "log_start_offset", "file_delete_delay_ms")


def _require_policy(ctx):
    """Exit 2 (one line) unless the command line names a policy: a broker's defaults (7 days,
    no size limit) are the broker's configuration, not something to assume offline."""
    given = [name for name in _POLICY_OPTIONS
             if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE]
    if not given:
        fail(UsageError("retain: no policy given: name --retention-ms, --retention-bytes "
                        "(-1: no limit) or --log-start-offset, or --file-delete-delay-ms to only "
                        "finish earlier deletions"))


def _iso(ms):
    if ms is None or ms < 0:
        return "-"
    try:
        return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return str(ms)


def _report(plan, fmt, dry_run, rows):
    d = plan.directory
    verb = "would be deleted" if dry_run else "deleted"
    if fmt == "json":
        click.echo(json.dumps({"type": "partition", "directory": d,
                               "high_watermark": plan.high_watermark,
                               "high_watermark_source": plan.hw_source,
                               "log_end_offset": plan.log_end,
                               "new_log_start_offset": plan.new_log_start,
                               "roll_first": plan.roll_first, "dry_run": dry_run}))
    else:
        click.echo("%s: high watermark %d (%s), log end offset %d%s"
                   % (d, plan.high_watermark, plan.hw_source, plan.log_end,
                      "; the active segment is rolled first" if plan.roll_first else ""))
    for s in plan.segments:
        path = os.path.join(d, s.name)
        if fmt == "json":
            click.echo(json.dumps({"type": "segment", "file": path, "base_offset": s.base,
                                   "next_offset": s.next_offset, "size": s.size,
                                   "first_timestamp": s.first_ts,
                                   "largest_timestamp": s.largest_ts,
                                   "timestamp_source": s.ts_source, "fate": s.fate,
                                   "why": s.why}))
        else:
            click.echo("%s: %s (%s)" % (path, verb if s.fate == DELETED else "kept",
                                        s.why or "-"))
        rows.append((path, s))
    _recovery_point(plan, fmt, dry_run)


def _recovery_point(plan, fmt, dry_run):
    """The partition's recovery point raised to the new log start offset (or why not read),
    said as recover says a recovery point it sets."""
    if plan.recovery_point_problem is not None:
        if fmt == "json":
            click.echo(json.dumps({"type": "note", "directory": plan.directory,
                                   "note": plan.recovery_point_problem}))
        else:
            click.echo(plan.recovery_point_problem)
    if plan.recovery_point_raise is None:
        return
    old, new = plan.recovery_point_raise
    partition = Partition(plan.directory)
    path = os.path.join(partition.log_dir, RECOVERY_POINT_CHECKPOINT)
    topic, number = partition.topic, partition.number
    if fmt == "json":
        click.echo(json.dumps({"type": "recovery_point", "file": path, "topic": topic,
                               "partition": number, "old": old, "new": new,
                               "dry_run": dry_run}))
    else:
        click.echo("%s: %s-%d: recovery point %s to the log start offset %d (was %d)"
                   % (path, topic, number, "would be raised" if dry_run else "raised", new, old))


def _table(rows, dry_run):
    from rich.console import Console
    from rich.table import Table
    table = Table(title="kafkalog retain" + (" (dry run)" if dry_run else ""))
    for column in ("segment", "offsets", "bytes", "first timestamp", "largest timestamp", "fate",
                   "why"):
        table.add_column(column, justify="right" if column == "bytes" else "left")
    for path, s in rows:
        table.add_row(path, "%d-%d" % (s.base, s.next_offset - 1)
                      if s.next_offset > s.base else "empty",
                      str(s.size), _iso(s.first_ts), _iso(s.largest_ts),
                      "[red]deleted[/red]" if s.fate == DELETED else "kept", s.why or "")
    Console(stderr=True).print(table)


@click.command(short_help="Delete expired segments, as a broker's retention does.")
@click.argument("paths", nargs=-1, required=True, type=click.Path(readable=False))
@click.option("--retention-ms", type=int, default=None,
              help="Delete segments whose largest timestamp is older than now minus this.")
@click.option("--retention-bytes", type=int, default=None,
              help="Per partition: delete the oldest segments while it stays above this size.")
@click.option("--log-start-offset", type=click.IntRange(0), default=None,
              help="Delete segments wholly below this offset.")
@click.option("--now", type=int, default=None, metavar="MS",
              help="Evaluate at this time (epoch ms).")
@click.option("--high-watermark", type=click.IntRange(0), default=None,
              help="Used when replication-offset-checkpoint has no entry for the partition.")
@click.option("--roll-active", is_flag=True,
              help="When every segment is to go, roll first so that the active one can go too.")
@click.option("--file-delete-delay-ms", type=click.IntRange(0), default=60000, show_default=True,
              help="Remove .deleted files this long after their deletion (0: at once).")
@click.option("--dry-run", is_flag=True,
              help="Print the plan; change nothing. Exit 1 when something would be deleted.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.pass_context
def retain(ctx, paths, retention_ms, retention_bytes, log_start_offset, now, high_watermark,
           roll_active, file_delete_delay_ms, dry_run, fmt):
    """Delete expired segments of partitions as a broker's retention does.

    PATHS are partition directories or log directories. The high watermark bounds every
    deletion. Deleted segments' files are renamed to .deleted together and removed after
    --file-delete-delay-ms (by this or a later run). Refuses while a broker holds the log
    directory. At least one of --retention-ms, --retention-bytes (-1: no limit),
    --log-start-offset or --file-delete-delay-ms must be given. Exit status: 0 done or
    nothing to do, 1 a --dry-run that would delete something, 2 usage error or errors.
    """
    _require_policy(ctx)
    policy = Policy(retention_ms, retention_bytes, log_start_offset, now, high_watermark,
                    roll_active)
    rows = []
    by_log_dir, ok = partitions_by_log_dir(paths)
    status = EXIT_OK if ok else EXIT_ERROR
    for log_dir, partitions in by_log_dir.items():
        directory = log_dir  # where an error without a file name is said to be
        try:
            with LogDir(log_dir).lock(create=not dry_run):
                for directory in partitions:
                    plan = retain_partition(directory, policy, dry_run, file_delete_delay_ms)
                    _report(plan, fmt, dry_run, rows)  # what was done, once it is done
                    if dry_run and plan.deleted:
                        status = max(status, EXIT_WOULD_CHANGE)
        except AppendError as e:
            click.echo("kafkalog: cannot roll the active segment first: %s" % e, err=True)
            status = EXIT_ERROR
        except (OSError, KafkalogError) as e:  # LockHeld: a broker holds the log directory
            click.echo("kafkalog: " + error_text(e, directory), err=True)
            status = EXIT_ERROR
    if fmt == "text" and rows and sys.stderr.isatty():
        _table(rows, dry_run)
    sys.exit(status)
