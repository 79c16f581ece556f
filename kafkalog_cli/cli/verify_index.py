"""`kafkalog verify-index`: check index files against their logs; exit codes fit for cron."""

from __future__ import annotations

import functools
import sys
from typing import Any, Dict, List, Sequence, Tuple

import click

from ..log.files import printable_name
from ..log.findings import Finding
from ..log.index_check import FileReport
from ..log.segment import DEFAULT_MAX_MESSAGE_SIZE
from ..log.verify import TargetError, UnknownFile, verify_target
from .. import jsonvocab
from .errors import error_text
from .output import Column, Output, show, table
from .numbers import java_int

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2


def _error(path: str, e: BaseException) -> None:
    click.echo("kafkalog: " + error_text(e, path), err=True)


def _file_lines(out: Output, notes: Output, r: FileReport) -> None:
    """A file's lines, problems (``out``) then notes (``notes``: in text on stdout, so that a
    run that finds no problem writes nothing on stderr), then, in JSON, the file's own line;
    held for one write: an index may hold a million entries, each a finding."""
    name = printable_name(r.path)
    for p in r.problems:
        out.emit(functools.partial(_finding_json, p, p.kind),
                 "%s: %s: %s" % (name, p.kind, p.message))
    for n in r.notes:
        notes.emit(functools.partial(_finding_json, n, "note"),
                   "%s: note: %s" % (name, n.message))
    notes.flush()
    out.emit({"type": "file", "file": name, "kind": r.kind, "entries": r.entries,
              "problems": len(r.problems)}, None)
    out.flush()


def _finding_json(item: Finding, label: str) -> Dict[str, Any]:
    obj: Dict[str, Any] = jsonvocab.camel_keys(item.as_dict())
    if label == "note":
        obj["type"] = "note"
    return obj


COLUMNS = (Column("file"), Column("kind"), Column("entries", "right"), Column("problems", "right"))


def _summary_table(reports: Sequence[FileReport]) -> None:
    show(table("kafkalog verify-index", COLUMNS, [
        (printable_name(r.path), r.kind, str(r.entries),
         ("[red]%d[/red]" % len(r.problems)) if r.problems else "0") for r in reports]), err=True)


@click.command("verify-index",
               short_help="Check .index, .timeindex and .txnindex files against logs.")
# readable=False: an unreadable path is one line of ours (exit 2), not click's usage error
@click.argument("paths", nargs=-1, required=True, type=click.Path(readable=False))
@click.option("--sanity-only", is_flag=True,
              help="Run only the broker's start-up sanity check, on the files as they are.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True,
              help="json: JSON Lines on stdout (problems, notes, a line per file).")
@click.option("--max-message-size", type=java_int(1), default=DEFAULT_MAX_MESSAGE_SIZE,
              show_default=True, help="Largest record accepted when reading batches.")
def verify_index(paths: Tuple[str, ...], sanity_only: bool, fmt: str,
                 max_message_size: int) -> None:
    """Check .index, .timeindex and .txnindex files against their logs.

    PATHS are index or log files, partition directories or log directories. The offset index's
    entries must point at batch starts whose last offset they name; the time index's timestamps
    must be the max timestamps of the batches their offsets end; the transaction index must
    list the aborted transactions the log's ABORT markers close; every index must pass the
    broker's start-up sanity check. A partition's leader-epoch-checkpoint must be well-formed
    and give each v2 batch the leader epoch it carries. Exit status: 0 clean, 1 problems
    found, 2 usage error or unreadable input.
    """
    status = EXIT_OK
    # text: problems on stderr, and a summary table there on a terminal; notes on stdout (a
    # cron job that discards stdout hears of problems only). JSON: everything on stdout.
    out = Output(fmt, buffered=True, err=True)
    notes = Output(fmt, buffered=True) if not out.json else out
    reports: List[FileReport] = []
    for target in paths:
        for item in verify_target(target, sanity_only, max_message_size):
            if isinstance(item, TargetError):
                _error(item.path, item.error)
                status = EXIT_USAGE
            elif isinstance(item, UnknownFile):
                # a Kafka suffix on a name that is not Kafka's: nobody's segment or index; a
                # note, with the notes on stdout (JSON's stdout holds only JSON: stderr there)
                click.echo("Ignoring unknown file %s" % printable_name(item.path), err=out.json)
            else:
                reports.append(item)
    for r in reports:
        if r.error is not None:
            _error(r.path, r.error)
            status = EXIT_USAGE
            continue
        _file_lines(out, notes, r)
        if r.problems:
            status = max(status, EXIT_PROBLEMS)
    out.summary("verify-index", files=len(reports),
                entries=sum(r.entries or 0 for r in reports if r.error is None),
                problems=sum(len(r.problems) for r in reports if r.error is None),
                unreadable=sum(1 for r in reports if r.error is not None))
    if out.table and reports:
        _summary_table(reports)
    sys.exit(status)
