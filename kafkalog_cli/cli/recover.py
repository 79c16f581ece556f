"""`kafkalog recover`: the broker's recovery of a log directory, offline, losing nothing."""

from __future__ import annotations

import json
import os
import sys

import click

from ..log.files import printable_name
from ..log.indexbuild import DEFAULT_INDEX_INTERVAL
from ..log.names import CLEAN_SHUTDOWN_FILE, LOG, SNAPSHOT, partition_file_kind
from ..log.recover import (EPOCHS, MOVE, REMOVE, RENAME, RULE_AFTER_CUT, RULE_BELOW, RULE_CLEAN,
                           RULE_FULL, RULE_NO_INDEX, RULE_RECOVERY_POINT, RULE_TXN_BELOW_BASE,
                           SPLIT, WRITE, LogDirRecovery)
from ..log.segment import DEFAULT_MAX_MESSAGE_SIZE
from .errors import error_text
from .targets import partitions_by_log_dir

EXIT_OK, EXIT_REPAIRED, EXIT_ERROR = 0, 1, 2


def _rule_text(r, plan):
    """Which of LogLoader's rules chose what happened to the segment, in words."""
    point = plan.recovery_point
    if r.rule == RULE_RECOVERY_POINT:
        if point is None:
            return "from the recovery point (none recorded: every segment)"
        return "from the recovery point %d" % point
    return {
        RULE_FULL: "--full",
        RULE_BELOW: "below the recovery point %s: sane, kept" % point,
        RULE_CLEAN: "clean shutdown: not recovered",
        RULE_NO_INDEX: "no offset index: recovered",
        RULE_TXN_BELOW_BASE: "transaction index entry below the base offset: recovered",
        RULE_AFTER_CUT: "after a corrupt segment",
    }[r.rule]


class _Report:
    def __init__(self, fmt, dry_run):
        self.fmt = fmt
        self.dry_run = dry_run
        self.rows = []

    def emit(self, obj, text):
        if self.fmt == "json":
            click.echo(json.dumps(obj))
        else:
            click.echo(text)

    def partition(self, plan):
        d = plan.directory
        dry_run = self.dry_run
        would = "would be " if dry_run else ""
        self.emit({"type": "partition", "directory": printable_name(d),
                   "recovery_point": plan.recovery_point, "clean_shutdown": plan.clean_shutdown,
                   "full": plan.full, "log_end_offset": plan.log_end_offset},
                  "%s: recovery point %s%s%s; log end offset %s" % (
                      printable_name(d),
                      "none recorded" if plan.recovery_point is None else plan.recovery_point,
                      ", clean shutdown" if plan.clean_shutdown else "",
                      ", --full" if plan.full else "", plan.log_end_offset))
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
            elif a.kind == WRITE and partition_file_kind(a.name) in (SNAPSHOT, LOG):
                self.emit({"type": "written", "file": path, "why": a.why},
                          "%s: %swritten (%s)" % (path, would, a.why))
            elif a.kind == EPOCHS:
                self.emit({"type": "leader_epochs", "file": path, "why": a.why},
                          "%s: %srewritten: %s" % (path, would, a.why))
            elif a.kind == SPLIT:
                self.emit({"type": "split", "file": path, "into": [b for b, _, _ in a.pieces],
                           "why": a.why},
                          "%s: %ssplit (%s)" % (path, would, a.why))
        if dry_run and plan.split is not None:
            path = printable_name(os.path.join(d, plan.split.name))
            self.emit({"type": "note", "file": path,
                       "note": "the segments from this one on are checked after the split"},
                      "%s: the segments from this one on would be checked after the split"
                      % path)
        for name, text in plan.notes:
            path = printable_name(os.path.join(d, name))
            self.emit({"type": "note", "file": path, "note": text}, "%s: %s" % (path, text))
        for r in plan.segments:
            path = printable_name(os.path.join(d, r.name))
            for text in r.notes:
                self.emit({"type": "note", "file": path, "note": text}, "%s: %s" % (path, text))
            obj = {"type": "segment", "file": path, "rule": r.rule,
                   "rule_text": _rule_text(r, plan), "recovered": r.recovered,
                   "base_offset": r.base_offset, "size": r.size, "kept": r.kept, "cut": r.cut,
                   "moved": r.moved}
            if r.records is not None:
                obj.update(records=r.records, first_offset=r.first_offset,
                           next_offset=r.next_offset)
            if r.first_bad is not None:
                obj.update(first_bad_position=r.first_bad, reason=r.reason,
                           first_bad_offset=r.bad_offset)
            for key, value in (("index_entries", r.index_entries),
                               ("timeindex_entries", r.timeindex_entries),
                               ("txnindex_entries", r.txn_entries)):
                if value is not None:
                    obj[key] = value
            if r.recovered:
                obj["indexes_replaced"] = r.indexes_replaced
            if r.timeindex_created:
                obj["timeindex_created"] = True
            if r.split_into:
                obj["split_into"] = r.split_into
            self.emit(obj, "%s: %s: %s" % (path, _rule_text(r, plan), _segment_text(r, dry_run)))
            self.rows.append((path, r))
        for name, bases in plan.splits:
            path = printable_name(os.path.join(d, name))
            self.emit({"type": "split_done", "file": path, "into": bases},
                      "%s: split into segments at offsets %s (offset overflow)"
                      % (path, ", ".join(map(str, bases))))
        if plan.quarantine is not None:
            qdir = printable_name(plan.quarantine)
            self.emit({"type": "quarantine", "directory": qdir},
                      "%s: what was removed is kept in %s" % (printable_name(d), qdir))

    def log_dir(self, run):
        """The recovery points written (or that would be) and the clean-shutdown marker."""
        path = printable_name(run.checkpoint_path)
        for tmp in run.temporary_files:
            note = ("temporary file of an interrupted kafkalog write: %s"
                    % ("would be removed" if self.dry_run else "removed"))
            self.emit({"type": "note", "file": printable_name(tmp), "note": note},
                      "%s: %s" % (printable_name(tmp), note))
        if run.checkpoint_problem is not None:
            self.emit({"type": "note", "file": path, "note": run.checkpoint_problem},
                      run.checkpoint_problem)
        for (topic, number), (old, new) in sorted(run.checkpoint_updates.items()):
            verb = "would be set" if self.dry_run else "set"
            self.emit({"type": "recovery_point", "file": path, "topic": topic,
                       "partition": number, "old": old, "new": new, "dry_run": self.dry_run},
                      "%s: %s-%d: recovery point %s to the log end offset %d (was %s)"
                      % (path, topic, number, verb, new, "none" if old is None else old))
        if run.marker is not None:
            marker = printable_name(os.path.join(run.log_dir, CLEAN_SHUTDOWN_FILE))
            text = {"kept": "clean shutdown marker: kept",
                    "restored": "clean shutdown marker: removed while partitions changed, then "
                                "written back",
                    "removed": "clean shutdown marker: removed (a partition could not be "
                               "recovered: the broker will recover the directory in full)",
                    "would-restore": "clean shutdown marker: would be removed while partitions "
                                     "change, then written back",
                    "would-remove": "clean shutdown marker: would be removed (a partition "
                                    "could not be recovered)"}
            self.emit({"type": "clean_shutdown_marker", "file": marker, "state": run.marker},
                      "%s: %s" % (marker, text[run.marker]))

    def summary(self, plans):
        dry_run = self.dry_run
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
        for column in ("segment", "rule", "kept", "cut", "first bad", "indexes"):
            table.add_column(column, justify="left" if column in ("segment", "rule", "first bad")
                             else "right")
        for path, r in self.rows:
            table.add_row(escape(path), r.rule, str(r.kept),
                          ("[red]%d[/red]" % r.cut) if r.cut else "0",
                          "moved" if r.moved else ("" if r.first_bad is None else
                                                   escape("%d: %s" % (r.first_bad, r.reason))),
                          "" if not r.recovered else (
                              "rebuilt (%d/%d)" % (r.index_entries, r.timeindex_entries)
                              if r.indexes_replaced else "as rebuilt"))
        Console(stderr=True).print(table)


def _offsets(r):
    if r.records is None or r.first_offset is None:
        return "no batch"
    return "offsets %d-%d, %d record%s" % (r.first_offset, r.next_offset - 1, r.records,
                                         "" if r.records == 1 else "s")


def _segment_text(r, dry_run):
    """What happened to a segment (in the conditional for a dry run)."""
    w = (lambda now, then: then) if dry_run else (lambda now, then: now)
    if r.moved:
        return "%s to quarantine (%d bytes)" % (w("moved", "would be moved"), r.size)
    if r.split_into:
        return "%s into segments at offsets %s (offset overflow), %d bytes" % (
            w("split", "would be split"), ", ".join(map(str, r.split_into)), r.size)
    if not r.recovered:
        text = "not read, %d bytes" % r.size
        if r.timeindex_created:
            text += "; missing time index %s empty" % w("created", "would be created")
        return text
    parts = []
    if r.first_bad is None:
        parts.append("valid: %s, %d bytes" % (_offsets(r), r.size))
    else:
        at = "" if r.bad_offset is None else ", offset %d on" % r.bad_offset
        parts.append("%s %s, %d bytes; %s %d bytes at position %d%s (%s)"
                     % (w("kept", "would keep"), _offsets(r), r.kept, w("cut", "would cut"),
                        r.cut, r.first_bad, at, r.reason))
    if r.indexes_replaced:
        parts.append("indexes rebuilt, %s %s: %d offset index entries, %d time index entries, "
                     "%d aborted transactions"
                     % (", ".join(r.indexes_replaced), w("replaced", "would be replaced"),
                        r.index_entries, r.timeindex_entries, r.txn_entries))
    else:
        parts.append("indexes rebuilt: the files are the same")
    return "; ".join(parts)


@click.command(short_help="Recover partitions as a broker's load does, losing nothing.")
@click.argument("paths", nargs=-1, required=True, type=click.Path(readable=False))
@click.option("--dry-run", is_flag=True, help="Report what would change; change nothing.")
@click.option("--full", is_flag=True,
              help="Recover every segment, whatever the recovery point and the clean-shutdown "
                   "marker say.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: JSON Lines on stdout, for cron.")
@click.option("--index-interval-bytes", type=click.IntRange(0), default=DEFAULT_INDEX_INTERVAL,
              show_default=True,
              help="Bytes of log between two index entries (index.interval.bytes).")
@click.option("--max-message-size", type=click.IntRange(1), default=DEFAULT_MAX_MESSAGE_SIZE,
              show_default=True, help="Largest record accepted when validating batches.")
def recover(paths, dry_run, full, fmt, index_interval_bytes, max_message_size):
    """Recover partitions as a broker loading its log directory would, losing nothing.

    PATHS are partition directories, .log files (their partition) or log directories (every
    partition). Without the log directory's .kafka_cleanshutdown marker, every segment from the
    one holding the partition's recovery point (recovery-point-offset-checkpoint; none: all)
    is validated and has all its indexes rebuilt; the segments below it are only checked as
    the broker checks them at start-up (a missing index sends one to recovery). --full
    recovers every segment. Each recovered segment keeps its longest valid prefix; later
    segments of a partition with a corrupt one are set aside; a segment whose offsets overflow
    is split; .swap, .cleaned and .deleted files are dealt with as the broker's loader does.
    The recovery point is then written back at the log end offset. Whatever is removed goes
    verbatim into kafkalog-quarantine/<UTC time>/ in the partition directory, with a
    manifest.json. Refuses to run while a broker holds the log directory. Exit status: 0
    nothing to do, 1 repaired (or, with --dry-run, would repair), 2 errors.
    """
    report = _Report(fmt, dry_run)
    plans = []
    by_log_dir, ok = partitions_by_log_dir(paths)
    status = EXIT_OK if ok else EXIT_ERROR
    for log_dir, partitions in by_log_dir.items():
        run = LogDirRecovery(log_dir, partitions, index_interval_bytes, max_message_size,
                             dry_run, full)
        try:
            for result in run.run():
                if result.error is not None:
                    # This partition's error: said, and the log directory's others go on.
                    click.echo("kafkalog: " + error_text(result.error, result.directory),
                               err=True)
                    status = EXIT_ERROR
                    continue
                plan = result.plan
                report.partition(plan)
                for name in sorted(plan.blocked):
                    # A Kafka file recover could not read: the partition is not known to be
                    # whole, and a reader would have refused the same file (exit 2).
                    click.echo("kafkalog: %s: not a regular file: not read, left alone"
                               % printable_name(os.path.join(result.directory, name)), err=True)
                    status = EXIT_ERROR
                plans.append(plan)
                if plan.changes:
                    status = max(status, EXIT_REPAIRED)
            report.log_dir(run)
        except OSError as e:  # the log directory's: held by a broker (LockHeld), unreadable
            click.echo("kafkalog: " + error_text(e, log_dir), err=True)
            status = EXIT_ERROR
    report.summary(plans)
    sys.exit(status)
