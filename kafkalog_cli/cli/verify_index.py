"""`kafkalog verify-index`: check index files against their logs; exit codes fit for cron."""

import json
import os
import sys

import click

from ..log import files
from ..log import names
from ..log.files import NoSegmentsError, expand, os_error_text, printable_name
from ..log.segment import DEFAULT_MAX_MESSAGE_SIZE
from ..log.verify import verify_segment

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2
_CHECKED = (names.LOG, names.INDEX, names.TIMEINDEX, names.TXNINDEX)


def _segments(found):
    """(log path, active, only) per segment to check: ``only`` is the one index file asked
    for, or None for all of the segment's indexes. From a directory, each segment once (and an
    index whose log is missing, to report it)."""
    out = []
    is_active = files.ActiveSegments()
    for f in found:
        log_path = names.sibling(f.path, names.LOG)
        if f.kind == names.LOG:
            out.append((log_path, is_active(log_path), None))
        elif f.kind in _CHECKED and (f.explicit or not os.path.lexists(log_path)):
            out.append((log_path, is_active(log_path), f.path))
    return out


def _error(path, e):
    click.echo("kafkalog: " + os_error_text(path, e), err=True)


def _summary_table(reports):
    from rich.console import Console
    from rich.table import Table
    table = Table(title="kafkalog verify-index")
    for column in ("file", "kind", "entries", "problems"):
        table.add_column(column, justify="right" if column in ("entries", "problems") else "left")
    for r in reports:
        table.add_row(printable_name(r.path), r.kind, str(r.entries),
                      ("[red]%d[/red]" % len(r.problems)) if r.problems else "0")
    Console(stderr=True).print(table)


@click.command("verify-index")
# readable=False: an unreadable path is one line of ours (exit 2), not click's usage error
@click.argument("paths", nargs=-1, required=True, type=click.Path(readable=False))
@click.option("--sanity-only", is_flag=True,
              help="Run only the broker's start-up sanity check, on the files as they are.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: JSON Lines on stdout (problems, notes, a line per file).")
@click.option("--max-message-size", type=click.IntRange(1), default=DEFAULT_MAX_MESSAGE_SIZE,
              show_default=True, help="Largest record accepted when reading batches.")
def verify_index(paths, sanity_only, fmt, max_message_size):
    """Check .index, .timeindex and .txnindex files against their logs.

    PATHS are index or log files, partition directories or log directories. The offset index's
    entries must point at batch starts whose last offset they name; the time index's timestamps
    must be the max timestamps of the batches their offsets end; the transaction index must
    list the aborted transactions the log's ABORT markers close; every index must pass the
    broker's start-up sanity check. Exit status: 0 clean, 1 problems found, 2 usage error or
    unreadable input.
    """
    status = EXIT_OK
    reports = []
    for target in paths:
        try:
            found = expand(target)
        except NoSegmentsError as e:
            click.echo("kafkalog: %s" % e, err=True)
            status = EXIT_USAGE
            continue
        except OSError as e:
            _error(target, e)
            status = EXIT_USAGE
            continue
        if len(found) == 1 and found[0].explicit and found[0].kind not in _CHECKED:
            click.echo("kafkalog: %s: not a log or index file" % printable_name(target), err=True)
            status = EXIT_USAGE
            continue
        checked = []
        for f in found:
            if f.error is not None:
                _error(f.path, f.error)  # a partition directory that cannot be read
                status = EXIT_USAGE
            elif f.kind is None and names.file_kind(f.path) in _CHECKED:
                # a Kafka suffix on a name that is not Kafka's: nobody's segment or index
                click.echo("Ignoring unknown file %s" % printable_name(f.path), err=True)
            elif f.kind in _CHECKED:
                checked.append(f)
        for log_path, active, only in _segments(checked):
            try:
                segment_reports = verify_segment(log_path, active, sanity_only, max_message_size)
            except OSError as e:
                _error(e.filename or log_path, e)
                status = EXIT_USAGE
                continue
            except MemoryError:
                # findings by the million (an index of garbage as large as Kafka allows)
                click.echo("kafkalog: %s: too many findings to hold in the memory available"
                           % printable_name(only or log_path), err=True)
                status = EXIT_USAGE
                continue
            reports.extend(r for r in segment_reports if only is None or r.path == only)
    for r in reports:
        name = printable_name(r.path)
        if r.error is not None:
            _error(r.path, r.error)
            status = EXIT_USAGE
            continue
        # a file's lines in one write: an index may hold a million entries, each a finding
        lines = []
        for item, label in [(p, p.kind) for p in r.problems] + [(n, "note") for n in r.notes]:
            if fmt == "json":
                obj = item.as_dict()
                if label == "note":
                    obj["type"] = "note"
                lines.append(json.dumps(obj))
            else:
                lines.append("%s: %s: %s" % (name, label, item.message))
        if fmt == "json":
            lines.append(json.dumps({"type": "file", "file": name, "kind": r.kind,
                                     "entries": r.entries, "problems": len(r.problems)}))
        if lines:
            click.echo("\n".join(lines), err=fmt != "json")
        if r.problems:
            status = max(status, EXIT_PROBLEMS)
    if fmt == "text" and reports and sys.stderr.isatty():
        _summary_table(reports)
    sys.exit(status)
