"""`kafkalog cleaner`: why a compacted partition is (not) being cleaned; exit codes for cron."""

from __future__ import annotations

import datetime
import functools
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import click

from ..errors import UsageError
from ..log.cleaner import CleanerStatus, cleaner_statuses
from ..log.files import printable_name
from ..log.verify import TargetError
from .. import jsonvocab
from .errors import error_text, fail
from .numbers import java_int, java_long
from .output import Column, Output, human_bytes, plural, show, table
from .times import now_option

EXIT_OK, EXIT_ATTENTION, EXIT_USAGE = 0, 1, 2


def _iso(ms: Optional[int]) -> str:
    if ms is None:
        return "-"
    when = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) \
        + datetime.timedelta(milliseconds=ms)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _setting(s: CleanerStatus, name: str) -> str:
    return "%s %s (%s)" % (name, s.config.values[name], s.config.sources[name])


def _json(s: CleanerStatus) -> Dict[str, Any]:
    obj: Dict[str, Any] = {"type": "partition", "directory": printable_name(s.directory),
                           "topic": s.topic, "partition": s.partition,
                           "compacted": s.compacted}
    for name in s.__report_fields__:
        if name in ("directory", "topic", "partition", "config", "problems"):
            continue
        obj[jsonvocab.camel(name)] = getattr(s, name)
    obj["config"] = {name: {"value": value, "source": s.config.sources[name]}
                     for name, value in s.config.values.items()}
    obj["problems"] = [jsonvocab.camel_keys(p.as_dict()) for p in s.problems]
    return obj


def _lines(s: CleanerStatus) -> List[str]:
    name = printable_name(s.directory)
    if not s.compacted:
        return ["%s: not compacted (%s): the cleaner leaves it to retention"
                % (name, _setting(s, "cleanup.policy"))]
    if s.log_end_offset is None:
        return ["%s: no segment" % name]
    where = ("first dirty offset %d (%s)" % (s.first_dirty_offset or 0, s.first_dirty_reset)
             if s.first_dirty_reset else "first dirty offset %d" % (s.first_dirty_offset or 0))
    verdict = ("the cleaner would clean it now" + (" (compaction overdue by %d ms)"
                                                    % s.max_compaction_delay_ms
                                                    if s.overdue else "")
               if s.would_clean else "the cleaner would not clean it yet")
    lines = ["%s: %s; cleanable up to offset %d (stopped by the %s); dirty ratio %.3f: %s of "
             "%s dirty, %s: %s" % (
                 name, where, s.first_uncleanable_offset or 0, " and the ".join(s.stopped_by),
                 s.dirty_ratio, human_bytes(s.cleanable_bytes),
                 human_bytes(s.cleanable_bytes + s.clean_bytes),
                 _setting(s, "min.cleanable.dirty.ratio"), verdict)]
    if s.open_transactions:
        lines.append("%s: %s hold the last stable offset at %d (kafkalog transactions names "
                     "them)" % (name, plural(s.open_transactions, "open transaction"),
                                s.last_stable_offset or 0))
    if s.pass_end_offset is not None:
        full = (" (the offset map is full at offset %d: the pass would end there)"
                % s.offset_map_full_at if s.offset_map_full_at is not None else "")
        waiting = ("; %s wait for their delete horizon (the first until %s)" % (
            plural(s.tombstones_waiting, "tombstone"), _iso(s.next_tombstone_expiry_ms))
            if s.tombstones_waiting else "")
        lines.append("%s: a pass to offset %d would find %s in %s and remove %s%s%s" % (
            name, s.pass_end_offset, plural(s.dirty_keys, "distinct key"),
            plural(s.dirty_records, "dirty record"), plural(s.records_removable, "record"),
            full, waiting))
    for p in s.problems:
        lines.append("%s: problem: %s: %s" % (name, p.file, p.message))
    return lines


COLUMNS = (Column("partition", overflow="fold"), Column("first dirty", "right", True),
           Column("cleanable to", "right", True), Column("stopped by"),
           Column("dirty ratio", "right", True), Column("min ratio", "right", True),
           Column("dirty bytes", "right", True), Column("would clean"),
           Column("keys", "right", True), Column("removable", "right", True),
           Column("tombstones waiting", "right", True), Column("problems", "right", True))


def _name(s: CleanerStatus) -> str:
    return printable_name(os.path.basename(os.path.normpath(s.directory)))


def _row(s: CleanerStatus) -> Tuple[str, ...]:
    from rich.markup import escape
    if not s.compacted or s.log_end_offset is None:
        return (escape(_name(s)), "-", "-",
                "not compacted" if not s.compacted else "no segment",
                "-", "-", "-", "no", "-", "-", "-", str(len(s.problems)))
    return (escape(_name(s)), str(s.first_dirty_offset),
            str(s.first_uncleanable_offset), ", ".join(s.stopped_by), "%.3f" % s.dirty_ratio,
            str(s.config.values["min.cleanable.dirty.ratio"]), human_bytes(s.cleanable_bytes),
            ("[red]overdue[/red]" if s.overdue else "yes") if s.would_clean else "no",
            str(s.dirty_keys), str(s.records_removable), str(s.tombstones_waiting),
            ("[red]%d[/red]" % len(s.problems)) if s.problems else "0")


SETTING_OPTIONS = (
    click.option("--now", default=None, metavar="TIME", callback=now_option,
                 help="Evaluate at this time (epoch ms or ISO 8601; default: the wall clock)."),
    click.option("--cleanup-policy", type=click.Choice(["compact", "delete", "compact,delete"]),
                 default=None, help="The topic's cleanup.policy (default: from the log "
                 "directory's __cluster_metadata-0, else delete)."),
    click.option("--min-cleanable-dirty-ratio", type=click.FloatRange(0, 1), default=None,
                 help="The topic's min.cleanable.dirty.ratio (default: as for --cleanup-policy, "
                 "else 0.5)."),
    click.option("--delete-retention-ms", type=java_long(0), default=None,
                 help="The topic's delete.retention.ms (default: as above, else 86400000)."),
    click.option("--min-compaction-lag-ms", type=java_long(0), default=None,
                 help="The topic's min.compaction.lag.ms (default: as above, else 0)."),
    click.option("--max-compaction-lag-ms", type=java_long(1), default=None,
                 help="The topic's max.compaction.lag.ms (default: as above, else unbounded)."),
    click.option("--dedupe-buffer-size", type=java_long(24), default=None,
                 help="The broker's log.cleaner.dedupe.buffer.size (default 134217728)."),
    click.option("--cleaner-threads", type=java_int(1), default=None,
                 help="The broker's log.cleaner.threads (default 1)."),
    click.option("--high-watermark", type=java_long(0), default=None,
                 help="Used instead of the partition's entry in replication-offset-checkpoint."),
)


def setting_options(f: Any) -> Any:
    """The options naming the topic's and the cleaner's settings, shared by `cleaner` and
    `compact`."""
    for option in reversed(SETTING_OPTIONS):
        f = option(f)
    return f


def given_settings(cleanup_policy: Optional[str], min_cleanable_dirty_ratio: Optional[float],
                   delete_retention_ms: Optional[int], min_compaction_lag_ms: Optional[int],
                   max_compaction_lag_ms: Optional[int], dedupe_buffer_size: Optional[int],
                   cleaner_threads: Optional[int]) -> Dict[str, object]:
    """The settings the options gave, by Kafka's names (None where not given)."""
    return {
        "cleanup.policy": cleanup_policy, "min.cleanable.dirty.ratio": min_cleanable_dirty_ratio,
        "delete.retention.ms": delete_retention_ms,
        "min.compaction.lag.ms": min_compaction_lag_ms,
        "max.compaction.lag.ms": max_compaction_lag_ms,
        "log.cleaner.dedupe.buffer.size": dedupe_buffer_size,
        "log.cleaner.threads": cleaner_threads}


@click.command(short_help="Why a compacted partition is or is not being cleaned.")
@click.argument("paths", nargs=-1, required=True, type=click.Path(readable=False))
@setting_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: JSON Lines on stdout (a line per partition, then "
              "a summary).")
def cleaner(paths: Tuple[str, ...], now: Optional[int], cleanup_policy: Optional[str],
            min_cleanable_dirty_ratio: Optional[float], delete_retention_ms: Optional[int],
            min_compaction_lag_ms: Optional[int], max_compaction_lag_ms: Optional[int],
            dedupe_buffer_size: Optional[int], cleaner_threads: Optional[int],
            high_watermark: Optional[int], fmt: str) -> None:
    """Say, per compacted partition, what the broker's log cleaner would do with it.

    PATHS are partition directories, .log files (their partition) or log directories (every
    partition). Per partition: the first dirty offset (from cleaner-offset-checkpoint, reset
    to the log start when out of range), where the cleanable range stops and why (the active
    segment; the last stable offset, held by an open transaction or the high watermark;
    min.compaction.lag.ms), the dirty ratio against min.cleanable.dirty.ratio, whether the
    cleaner would choose the partition now or is overdue (max.compaction.lag.ms), and what a
    pass would find: distinct keys, records it would remove, tombstones waiting for their
    delete horizon; then what would make the cleaner fail (bytes that hold no batch, records
    that cannot be read) or split a segment (an offset overflow). Each topic setting comes
    from the option, else the log directory's cluster metadata (the topic's config, then the
    cluster default), else Kafka's default; the JSON says which. Reads only. Exit status:
    0 nothing needs attention, 1 a partition overdue or with a problem, 2 usage error or
    unreadable input.
    """
    given = given_settings(cleanup_policy, min_cleanable_dirty_ratio, delete_retention_ms,
                           min_compaction_lag_ms, max_compaction_lag_ms, dedupe_buffer_size,
                           cleaner_threads)
    out = Output(fmt, beside_tables=True)
    status = EXIT_OK
    shown: List[CleanerStatus] = []
    for target in paths:
        try:
            for item in cleaner_statuses(target, given, now, high_watermark):
                if isinstance(item, TargetError):
                    click.echo("kafkalog: " + error_text(item.error, item.path), err=True)
                    status = EXIT_USAGE
                    continue
                shown.append(item)
                if item.overdue or item.problems:
                    status = max(status, EXIT_ATTENTION)
                if not out.table:
                    out.emit(functools.partial(_json, item), "\n".join(_lines(item)))
        except UsageError as e:
            fail(e)
    _finish(out, shown, failed=status == EXIT_USAGE)
    sys.exit(status)


def _finish(out: Output, shown: Sequence[CleanerStatus], failed: bool = False) -> None:
    """The table on a terminal, and the summary: no summary line after a run that ``failed``
    before any partition (its error line says it all), the JSON summary still."""
    compacted = [s for s in shown if s.compacted]
    counts = {"partitions": len(shown), "compacted": len(compacted),
              "would_clean": sum(1 for s in compacted if s.would_clean),
              "overdue": sum(1 for s in compacted if s.overdue),
              "with_problems": sum(1 for s in shown if s.problems)}
    text = "%s, %d compacted: %d would be cleaned, %d overdue, %d with problems" % (
        plural(counts["partitions"], "partition"), counts["compacted"], counts["would_clean"],
        counts["overdue"], counts["with_problems"])
    if out.table:
        show(table("kafkalog cleaner", COLUMNS, [_row(s) for s in shown]))
        for s in shown:
            for p in s.problems:
                out.emit({}, "%s: problem: %s: %s" % (printable_name(s.directory), p.file,
                                                       p.message))
    out.summary("cleaner", None if failed and not shown else text, **counts)
