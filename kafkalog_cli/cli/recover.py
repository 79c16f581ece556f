"""`kafkalog recover`: the broker's recovery after an unclean shutdown, offline, losing nothing."""

from __future__ import annotations

import json
import os
import sys

import click

from ..log.files import printable_name
from ..log.indexbuild import DEFAULT_INDEX_INTERVAL
from ..log.logdir import LogDir
from ..log.recover import MOVE, REMOVE, RENAME, recover_partition
from ..log.segment import DEFAULT_MAX_MESSAGE_SIZE
from .errors import error_text
from .targets import partitions_by_log_dir

EXIT_OK, EXIT_REPAIRED, EXIT_ERROR = 0, 1, 2


class _Report:
    def __init__(self, fmt):
        self.fmt = fmt
        self.rows = []

    def emit(self, obj, text):
        if self.fmt == "json":
            click.echo(json.dumps(obj))
        else:
            click.echo(text)

    def partition(self, plan, dry_run):
        d = plan.directory
        would = "would be " if dry_run else ""
        for a in plan.actions:
            path = printable_name(os.path.join(d, a.name))
            if a.kind == MOVE:
                self.emit({"type": "moved", "file": path, "why": a.why},
                          "%s: %smoved to quarantine (%s)" % (path, would, a.why))
            elif a.kind == REMOVE:
                self.emit({"type": "removed", "file": path, "why": a.why},
                          "%s: %sremoved (%s)" % (path, would, a.why))
            elif a.kind == RENAME:
                target = printable_name(a.target)
                self.emit({"type": "renamed", "file": path, "to": target, "why": a.why},
                          "%s: %srenamed to %s (%s)" % (path, would, target, a.why))
        for name, text in plan.notes:
            path = printable_name(os.path.join(d, name))
            self.emit({"type": "note", "file": path, "note": text}, "%s: %s" % (path, text))
        for r in plan.segments:
            path = printable_name(os.path.join(d, r.name))
            for text in r.notes:
                self.emit({"type": "note", "file": path, "note": text}, "%s: %s" % (path, text))
            obj = {"type": "segment", "file": path, "size": r.size, "kept": r.kept, "cut": r.cut,
                   "moved": r.moved}
            if r.first_bad is not None:
                obj.update(first_bad_position=r.first_bad, reason=r.reason)
            for key, value in (("index_entries", r.index_entries),
                               ("timeindex_entries", r.timeindex_entries),
                               ("txnindex_entries", r.txn_entries)):
                if value is not None:
                    obj[key] = value
            self.emit(obj, "%s: %s" % (path, _segment_text(r)))
            self.rows.append((path, r))
        if plan.quarantine is not None:
            qdir = printable_name(plan.quarantine)
            self.emit({"type": "quarantine", "directory": qdir},
                      "%s: what was removed is kept in %s" % (printable_name(d), qdir))

    def summary(self, plans, dry_run):
        changed = sum(1 for p in plans if p.changes)
        cut = sum(p.bytes_cut for p in plans)
        self.emit({"type": "summary", "partitions": len(plans), "changed": changed,
                   "bytes_cut": cut, "dry_run": dry_run},
                  "%d partition%s, %d %s, %d bytes cut%s" % (
                      len(plans), "" if len(plans) == 1 else "s", changed,
                      "to repair" if dry_run else "repaired", cut,
                      " (dry run: nothing changed)" if dry_run else ""))
        if self.fmt == "text" and sys.stderr.isatty() and self.rows:
            self._table()

    def _table(self):
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table
        table = Table(title="kafkalog recover")
        for column in ("segment", "kept", "cut", "first bad", "indexes"):
            table.add_column(column, justify="left" if column in ("segment", "first bad")
                             else "right")
        for path, r in self.rows:
            table.add_row(escape(path), str(r.kept), ("[red]%d[/red]" % r.cut) if r.cut else "0",
                          "moved" if r.moved else ("" if r.first_bad is None else
                                                   escape("%d: %s" % (r.first_bad, r.reason))),
                          "" if r.index_entries is None else "rebuilt (%d/%d)" % (
                              r.index_entries, r.timeindex_entries))
        Console(stderr=True).print(table)


def _segment_text(r):
    if r.moved:
        return "after a corrupt segment: moved to quarantine (%d bytes)" % r.size
    parts = []
    if r.first_bad is None:
        parts.append("ok, %d bytes" % r.size)
    else:
        parts.append("kept %d bytes, cut %d bytes at position %d (%s)"
                     % (r.kept, r.cut, r.first_bad, r.reason))
    if r.index_entries is not None:
        parts.append("index rebuilt: %d entries, time index %d entries"
                     % (r.index_entries, r.timeindex_entries))
    if r.txn_entries is not None:
        parts.append("transaction index rebuilt: %d entries" % r.txn_entries)
    return "; ".join(parts)


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(readable=False))
@click.option("--dry-run", is_flag=True, help="Report what would change; change nothing.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: JSON Lines on stdout, for cron.")
@click.option("--index-interval-bytes", type=click.IntRange(0), default=DEFAULT_INDEX_INTERVAL,
              show_default=True,
              help="Bytes of log between two index entries (index.interval.bytes).")
@click.option("--max-message-size", type=click.IntRange(1), default=DEFAULT_MAX_MESSAGE_SIZE,
              show_default=True, help="Largest record accepted when validating batches.")
def recover(paths, dry_run, fmt, index_interval_bytes, max_message_size):
    """Recover partitions after an unclean shutdown, as a broker would, losing nothing.

    PATHS are partition directories, .log files (their partition) or log directories (every
    partition). Each segment keeps its longest valid prefix; later segments of a partition with
    a corrupt one are set aside; indexes are rebuilt where wrong; .swap, .cleaned and .deleted
    files are dealt with as the broker's loader does. Whatever is removed goes verbatim into
    kafkalog-quarantine/<UTC time>/ in the partition directory, with a manifest.json. Refuses to
    run while a broker holds the log directory. Exit status: 0 nothing to do, 1 repaired (or,
    with --dry-run, would repair), 2 errors.
    """
    report = _Report(fmt)
    plans = []
    by_log_dir, ok = partitions_by_log_dir(paths)
    status = EXIT_OK if ok else EXIT_ERROR
    for log_dir, partitions in by_log_dir.items():
        try:
            with LogDir(log_dir).lock(create=not dry_run):
                for partition in partitions:
                    try:
                        plan = recover_partition(partition, index_interval_bytes,
                                                 max_message_size, dry_run)
                    except OSError as e:
                        # This partition's error: said, and the log directory's others go on.
                        click.echo("kafkalog: " + error_text(e, partition), err=True)
                        status = EXIT_ERROR
                        continue
                    report.partition(plan, dry_run)
                    for name in sorted(plan.blocked):
                        # A Kafka file recover could not read: the partition is not known to be
                        # whole, and a reader would have refused the same file (exit 2).
                        click.echo("kafkalog: %s: not a regular file: not read, left alone"
                                   % printable_name(os.path.join(partition, name)), err=True)
                        status = EXIT_ERROR
                    plans.append(plan)
                    if plan.changes:
                        status = max(status, EXIT_REPAIRED)
        except OSError as e:  # the log directory's: held by a broker (LockHeld), unreadable
            click.echo("kafkalog: " + error_text(e, log_dir), err=True)
            status = EXIT_ERROR
    report.summary(plans, dry_run)
    sys.exit(status)



