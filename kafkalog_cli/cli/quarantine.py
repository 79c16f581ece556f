"""`kafkalog quarantine`: list, restore and purge what `recover` set aside."""

from __future__ import annotations

import datetime
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import click

from ..errors import KafkalogError
from ..log import names
from ..log.files import printable_name
from ..log.lock import preview_warning
from ..log.logdir import partitions_of
from ..log.quarantine_runs import (APPEND, DISPLACE, DONE, RENAME_BACK, RETURN, REWRITE, Run,
                                   RestoreStep, RunEntry, find_run, list_runs, purge_runs,
                                   restore_run)
from .output import Column, Output, human_bytes, show, table
from .errors import fail


def _partitions(path: str) -> List[str]:
    try:
        return partitions_of(path)
    except (OSError, KafkalogError) as e:
        fail(e, path)


def _topic(partition: str) -> Tuple[Optional[str], Optional[int]]:
    topic, number = names.topic_partition(partition)
    return topic, number


def _when(run: Run) -> Optional[str]:
    return run.time.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if run.time is not None else None


def _holds(e: RunEntry) -> str:
    """What a manifest entry holds, in words: bytes, byte range, offsets."""
    if e.what == "written":
        return "%s written where there was no file, sha256 %s; nothing kept" % (
            "?" if e.size is None else "%d bytes" % e.size, e.sha256[:12] if e.sha256 else "?")
    if e.what == "renamed":
        return "renamed from %s; nothing kept" % printable_name(e.target)
    parts = ["missing" if e.size is None else "%d bytes" % e.size]
    if e.what == "cut":
        parts.append("bytes %d-%d of the log" % (e.start, e.end))
    if e.offsets is not None:
        parts.append("offsets %d-%d" % e.offsets)
    return ", ".join(parts)


def _entry_json(run: Run, e: RunEntry) -> Dict[str, Any]:
    topic, number = _topic(run.partition)
    return {"topic": topic, "partition": number, "what": e.what,
            "file": printable_name(e.file),
            "earlierName": printable_name(e.earlier) if e.earlier is not None else None,
            "savedAs": printable_name(e.saved), "bytes": e.size,
            "range": [e.start, e.end] if e.what == "cut" else None,
            "firstOffset": e.offsets[0] if e.offsets else None,
            "lastOffset": e.offsets[1] if e.offsets else None, "sha256": e.sha256,
            "why": e.why}


def _run_json(run: Run) -> Dict[str, Any]:
    topic, number = _topic(run.partition)
    return {"type": "quarantineRun", "topic": topic, "partition": number,
            "directory": printable_name(run.partition), "run": printable_name(run.id),
            "time": _when(run), "tool": run.tool or None, "files": run.files,
            "bytes": run.bytes, "restored": run.restored is not None, "problem": run.problem,
            "entries": [_entry_json(run, e) for e in run.entries]}


@click.group(short_help="List, restore or purge what recover set aside.")
def quarantine() -> None:
    """List, restore or purge what `kafkalog recover` set aside.

    recover keeps every file it removes and every byte it cuts in
    <partition>/kafkalog-quarantine/<run>/, with a manifest.json; these commands read those
    manifests. PATH is a log directory or a partition directory.
    """


@quarantine.command("list", short_help="Every run under PATH: when, what it holds.")
@click.argument("path", type=click.Path(readable=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="text: a table on a terminal, lines on a pipe; json: one "
              "object per run.")
def list_cmd(path: str, fmt: str) -> None:
    """Every quarantine run of every partition under PATH: when, what it holds.

    Exit status: 0 (also when there is no run), 2 unreadable PATH or manifest."""
    try:
        runs = list_runs(_partitions(path))
    except OSError as e:
        fail(e, path)
    out = Output(fmt)
    if out.table and runs:
        _table(runs)
    else:
        for run in runs:
            out.emit(_run_json(run), _run_text(run))
    out.summary("quarantine list", partitions=len({r.partition for r in runs}), runs=len(runs),
                restored=sum(1 for r in runs if r.restored is not None),
                files=sum(r.files for r in runs), bytes=sum(r.bytes for r in runs),
                problems=sum(1 for r in runs if r.problem))
    if not runs:
        click.echo("kafkalog: no quarantine runs under %s" % printable_name(path), err=True)
    sys.exit(2 if any(r.problem for r in runs) else 0)


def _run_text(run: Run) -> str:
    """A run's lines: when, what it holds, then each manifest entry."""
    lines = ["%s: run %s at %s%s: %d files, %d bytes%s"
             % (printable_name(run.partition), printable_name(run.id), _when(run),
                " (%s)" % run.tool if run.tool else "", run.files, run.bytes,
                ", restored" if run.restored is not None else "")]
    if run.problem:
        lines.append("  %s" % run.problem)
    for entry in run.entries:
        lines.append("  %s %s (%s)%s: %s"
                     % (entry.what, printable_name(entry.file), _holds(entry),
                        " was " + printable_name(entry.earlier) if entry.earlier else "",
                        entry.why))
    return "\n".join(lines)


COLUMNS = tuple(Column(header, "right" if header == "bytes" else "left", overflow="fold")
                for header in ("partition", "run", "time", "what", "file", "bytes",
                               "range / offsets", "why"))


def _table(runs: Sequence[Run]) -> None:
    rows: List[Tuple[Optional[str], ...]] = []
    for run in runs:
        part = os.path.basename(run.partition)
        state = " (restored)" if run.restored is not None else ""
        if not run.entries:
            rows.append((part, run.id + state, _when(run), "", "", "", "", run.problem or ""))
        for e in run.entries:
            extra: List[str] = []
            if e.what == "cut":
                extra.append("bytes %d-%d" % (e.start, e.end))
            if e.offsets:
                extra.append("offsets %d-%d" % e.offsets)
            if e.what == "written":
                extra.append("written where there was no file, not kept here")
            if e.what == "renamed":
                extra.append("renamed from %s, nothing kept here" % printable_name(e.target))
            rows.append((part, run.id + state, _when(run), e.what, printable_name(e.file),
                         "-" if e.size is None else human_bytes(e.size), ", ".join(extra), e.why))
    show(table("kafkalog quarantine", COLUMNS, rows))


_DONE_TEXT = {DISPLACE: ("set aside in a new quarantine run (it stands where the run's file "
                         "returns)", "would be set aside in a new quarantine run (it stands "
                         "where the run's file returns)"),
              RETURN: ("returned", "would be returned"),
              APPEND: ("cut bytes appended back", "cut bytes would be appended back"),
              REWRITE: ("old contents written back", "old contents would be written back"),
              RENAME_BACK: ("renamed back", "would be renamed back"),
              DONE: ("already back (a restore interrupted after it)",
                     "already back (a restore interrupted after it)")}


@quarantine.command("restore", short_help="Put back what run RUN set aside.")
@click.argument("path", type=click.Path(readable=False))
@click.argument("run_id", metavar="RUN")
@click.option("--dry-run", is_flag=True, help="Say what would be done; change nothing.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def restore_cmd(path: str, run_id: str, dry_run: bool, fmt: str) -> None:
    """Put back exactly what the quarantine run RUN of a partition under PATH set aside.

    Files moved are renamed back, bytes cut from a .log appended back at the position they
    were cut from (only when the .log still ends there), rewritten files get their old bytes
    back; what stands in the way (the indexes, snapshots or checkpoint recover wrote) is set
    aside first in a new quarantine run, so nothing is lost. Refuses (exit 2, nothing changed)
    while a broker holds the log directory, and when restoring would overwrite or interleave
    newer data. Run `kafkalog recover` afterwards, as a broker would. Exit status: 0 restored,
    2 refused or bad input."""
    partitions = _partitions(path)
    try:
        run = find_run(partitions, run_id)
        plan = restore_run(run, dry_run)
        if plan.lock_held is not None:
            click.echo("kafkalog: warning: " + preview_warning(plan.lock_held), err=True)
    except (OSError, KafkalogError) as e:
        fail(e, path)
    topic, number = _topic(run.partition)
    out = Output(fmt)
    if plan.recovery_point is not None:
        checkpoint, old, new = plan.recovery_point
        out.emit({"type": "recoveryPoint", "topic": topic, "partition": number,
                  "file": printable_name(checkpoint), "old": old, "new": new, "dryRun": dry_run},
                 "%s: %s-%s: recovery point %s to %d (was %d), so that what comes back is "
                 "recovered again" % (printable_name(checkpoint), topic, number,
                                      "would be lowered" if dry_run else "lowered", new, old))
    for step in plan.steps:
        where = os.path.join(run.partition, step.name)
        out.emit(_step_json(run, step, where, dry_run),
                 "%s: %s" % (printable_name(where), _step_text(step, dry_run)))
    if dry_run:
        text = ("%s: run %s would be restored (%d steps); nothing changed"
                % (printable_name(run.partition), run.id, len(plan.steps)))
    else:
        text = ("%s: run %s restored%s; run `kafkalog recover` before starting the broker"
                % (printable_name(run.partition), run.id,
                   "; what stood in the way is in run %s" % plan.displaced_run
                   if plan.displaced_run else ""))
    out.summary("quarantine restore", text, topic=topic, partition=number,
                directory=printable_name(run.partition), run=run.id, steps=len(plan.steps),
                displaced_run=plan.displaced_run, dry_run=dry_run)
    sys.exit(0)


def _step_json(run: Run, step: RestoreStep, where: str, dry_run: bool) -> Dict[str, Any]:
    topic, number = _topic(run.partition)
    obj: Dict[str, Any] = {"type": "restoreStep", "topic": topic, "partition": number,
                           "run": run.id, "action": step.kind, "file": printable_name(where),
                           "bytes": step.size, "dryRun": dry_run}
    if step.kind == APPEND:
        obj["position"] = step.entry.start + step.at
        obj["range"] = [step.entry.start, step.entry.end]
    return obj


def _step_text(step: RestoreStep, dry_run: bool) -> str:
    """What a restore step did (in the conditional for a dry run)."""
    entry = step.entry
    text = _DONE_TEXT[step.kind][1 if dry_run else 0]
    if step.kind == DISPLACE and entry.what == "written":
        text = ("%s in a new quarantine run (the run wrote it where there was no file)"
                % ("would be set aside" if dry_run else "set aside"))
    detail = ""
    if step.kind == APPEND:
        detail = " (%d bytes at byte %d%s)" % (
            step.size, entry.start + step.at,
            ", offsets %d-%d" % entry.offsets if entry.offsets else "")
    elif step.kind in (RETURN, REWRITE, DISPLACE):
        detail = " (%d bytes)" % step.size
    elif step.kind == RENAME_BACK:
        detail = " to %s (%d bytes)" % (printable_name(entry.target), step.size)
    return text + detail


@quarantine.command("purge", short_help="Delete the runs older than --older-than DAYS.")
@click.argument("path", type=click.Path(readable=False))
@click.option("--older-than", "days", type=click.FloatRange(0), required=True, metavar="DAYS",
              help="Delete the runs that started more than this many days ago.")
@click.option("--dry-run", is_flag=True, help="Say what would be deleted; delete nothing.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def purge_cmd(path: str, days: float, dry_run: bool, fmt: str) -> None:
    """Delete the quarantine runs under PATH older than --older-than DAYS.

    A run's age is the time in its manifest (else in its folder name). Nothing else is
    touched. Refuses while a broker holds the log directory (a dry run does not). Exit
    status: 0 done or nothing to do, 2 refused or bad input."""
    partitions = _partitions(path)
    try:
        runs = purge_runs(partitions, datetime.timedelta(days=days), dry_run=dry_run)
    except (OSError, KafkalogError) as e:
        fail(e, path)
    verb = "would be deleted" if dry_run else "deleted"
    out = Output(fmt)
    for run in runs:
        topic, number = _topic(run.partition)
        out.emit({"type": "purgedRun", "topic": topic, "partition": number,
                  "directory": printable_name(run.partition), "run": run.id, "time": _when(run),
                  "files": run.files, "bytes": run.bytes, "dryRun": dry_run},
                 "%s: run %s at %s (%d files, %d bytes) %s"
                 % (printable_name(run.partition), printable_name(run.id), _when(run),
                    run.files, run.bytes, verb))
    out.summary("quarantine purge", runs=len(runs), bytes=sum(r.bytes for r in runs),
                dry_run=dry_run)
    if not runs and not out.json:
        click.echo("kafkalog: no quarantine run older than %g days under %s"
                   % (days, printable_name(path)), err=True)
    sys.exit(0)
