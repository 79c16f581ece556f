"""`kafkalog describe`: a log directory, partition or segment at a glance (log/describe.py);
rich tables on a terminal, plain lines on a pipe, or JSON Lines."""

from __future__ import annotations

import datetime
import os
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import click

from ..errors import EXIT_INVALID, EXIT_OK, EXIT_USAGE, UsageError
from ..log.describe import (Description, IndexHealth, KraftSnapshotDescription,
                            PartitionDescription, SegmentDescription, describe as describe_path)
from ..log import names
from ..log.files import printable_name
from ..log.findings import Finding
from ..log.segment import DEFAULT_MAX_MESSAGE_SIZE
from .errors import error_text, fail
from .output import Column, Output, human_bytes, show, table
from .numbers import java_int


def _time(ms: Optional[int], sep: str = "T") -> str:
    """Epoch ms as ISO 8601 UTC (``sep`` " ": without the T and Z, for a table in UTC)."""
    if ms is None:
        return "-"
    try:
        when = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return when.strftime("%Y-%m-%d" + sep + "%H:%M:%S.") + "%03d%s" % (
        ms % 1000, "Z" if sep == "T" else "")


def _opt(n: object) -> str:
    return "-" if n is None else str(n)


def _index_entries(health: Optional[IndexHealth]) -> Optional[int]:
    return None if health is None else health.entries


def _segment_json(s: SegmentDescription) -> Dict[str, Any]:
    return {"type": "segment", "topic": s.topic, "partition": s.partition,
            "file": printable_name(s.path), "baseOffset": s.base_offset, "active": s.active,
            "sizeBytes": s.size, "firstOffset": s.first_offset, "lastOffset": s.last_offset,
            "nextOffset": s.next_offset, "records": s.records, "batches": s.batches,
            "minTimestamp": s.min_timestamp, "maxTimestamp": s.max_timestamp,
            "codecs": s.codecs, "magic": s.magic,
            "indexEntries": _index_entries(s.offset_index),
            "timeIndexEntries": _index_entries(s.time_index),
            "problems": len(s.problems)}


def _kraft_json(k: Optional[KraftSnapshotDescription]) -> Optional[Dict[str, Any]]:
    if k is None:
        return None
    return {"file": printable_name(k.path), "endOffset": k.end_offset, "epoch": k.epoch,
            "sizeBytes": k.size, "records": k.records, "batches": k.batches}


def _kraft_range(p: PartitionDescription) -> str:
    """The KRaft snapshots of a partition in a few words: how many, the end offsets and epochs
    they span, the newest's records and batches."""
    snaps = p.kraft_snapshots
    if not snaps:
        return "-"
    newest = snaps[-1]
    epochs = sorted(k.epoch for k in snaps if k.epoch is not None)
    return "%d, end offsets %s-%s, epochs %s-%s, newest %s (%s records, %s batches, %s)" % (
        len(snaps), _opt(snaps[0].end_offset), _opt(newest.end_offset),
        _opt(epochs[0] if epochs else None), _opt(epochs[-1] if epochs else None),
        os.path.basename(newest.path), _opt(newest.records), _opt(newest.batches),
        human_bytes(newest.size))


def _partition_json(p: PartitionDescription) -> Dict[str, Any]:
    return {"type": "partition", "topic": p.topic, "partition": p.partition,
            "directory": printable_name(p.directory), "logStartOffset": p.log_start_offset,
            "logEndOffset": p.log_end_offset, "records": p.records, "batches": p.batches,
            "sizeBytes": p.size, "segments": len(p.segments),
            "recoveryPoint": p.recovery_point, "checkpointedLogStartOffset":
                p.checkpointed_log_start_offset, "highWatermark": p.high_watermark,
            "cleanerOffset": p.cleaner_offset, "firstDirtyOffset": p.first_dirty_offset,
            "dirtyRatio": p.dirty_ratio,
            "leaderEpochs": [{"epoch": e, "startOffset": o} for e, o in p.leader_epochs],
            "producerSnapshots": [{"offset": o, "producers": n} for o, n in p.snapshots],
            "kraftSnapshots": len(p.kraft_snapshots),
            "oldestKraftSnapshot": _kraft_json(p.kraft_snapshots[0] if p.kraft_snapshots
                                               else None),
            "newestKraftSnapshot": _kraft_json(p.kraft_snapshots[-1] if p.kraft_snapshots
                                               else None),
            "problems": len(p.all_problems())}


def _finding_json(f: Finding, kind: str, topic: Optional[str],
                  partition: Optional[int]) -> Dict[str, Any]:
    out: Dict[str, Any] = {"type": kind, "topic": topic, "partition": partition, "file": f.file,
           "kind": f.kind, "message": f.message}
    out.update(f.fields)
    return out


class _Output(Output):
    """The description as JSON Lines or plain lines, written at once; or, on a terminal, as
    tables."""

    def __init__(self, fmt: str) -> None:
        super().__init__(fmt, buffered=True)

    def findings(self, items: Iterable[Tuple[str, Sequence[Finding]]], topic: Optional[str],
                 partition: Optional[int]) -> None:
        for kind, found in items:
            for f in found:
                self.emit(_finding_json(f, kind, topic, partition),
                          "%s: %s: %s" % (f.file, "note" if kind == "note" else f.kind,
                                          f.message))

    def segment(self, s: SegmentDescription) -> None:
        where = printable_name(s.path)
        offsets = ("no batch" if s.first_offset is None or s.last_offset is None else
                   "offsets %d-%d" % (s.first_offset, s.last_offset))
        self.emit(_segment_json(s),
                  "%s: %s, %d records, %d batches, %s (%d bytes), time %s to %s, codecs %s, "
                  "magic %s, index entries %s, time index entries %s%s"
                  % (where, offsets, s.records, s.batches, human_bytes(s.size), s.size,
                     _time(s.min_timestamp), _time(s.max_timestamp),
                     ",".join(s.codecs) or "-", ",".join(map(str, s.magic)) or "-",
                     _opt(_index_entries(s.offset_index)), _opt(_index_entries(s.time_index)),
                     " (active)" if s.active else ""))
        self.findings((("problem", s.problems), ("note", s.notes)), s.topic, s.partition)

    def kraft_snapshot(self, k: KraftSnapshotDescription) -> None:
        """A KRaft snapshot file named alone."""
        topic, partition = names.topic_partition(os.path.dirname(os.path.abspath(k.path)))
        out: Dict[str, Any] = {"type": "kraftSnapshot", "topic": topic, "partition": partition}
        out.update(_kraft_json(k) or {})
        out["problems"] = len(k.problems)
        self.emit(out, "%s: KRaft snapshot, end offset %s, epoch %s, %s records, %s batches, "
                  "%s (%d bytes)" % (printable_name(k.path), _opt(k.end_offset), _opt(k.epoch),
                                    _opt(k.records), _opt(k.batches), human_bytes(k.size),
                                    k.size))
        self.findings((("problem", k.problems),), topic, partition)

    def partition(self, p: PartitionDescription) -> None:
        where = printable_name(p.directory)
        epochs = " ".join("%d@%d" % e for e in p.leader_epochs) or "-"
        snaps = " ".join("%d(%s)" % (o, _opt(n)) for o, n in p.snapshots) or "-"
        self.emit(_partition_json(p),
                  "%s: log start offset %s, log end offset %s, %d records, %d batches, %s "
                  "(%d bytes), %d segments; recovery point %s, high watermark %s, "
                  "checkpointed log start %s, cleaner offset %s; leader epochs %s; "
                  "producer snapshots %s"
                  % (where, _opt(p.log_start_offset), _opt(p.log_end_offset), p.records,
                     p.batches, human_bytes(p.size), p.size, len(p.segments),
                     _opt(p.recovery_point), _opt(p.high_watermark),
                     _opt(p.checkpointed_log_start_offset), _opt(p.cleaner_offset), epochs, snaps)
                  + ("" if p.dirty_ratio is None else
                     "; compacted: first dirty offset %s, dirty ratio %.3f"
                     % (_opt(p.first_dirty_offset), p.dirty_ratio))
                  + ("" if not p.kraft_snapshots else "; KRaft snapshots " + _kraft_range(p)))
        for s in p.segments:
            self.segment(s)
        kraft = [f for k in p.kraft_snapshots for f in k.problems]
        self.findings((("problem", kraft + p.problems), ("note", p.notes)), p.topic,
                      p.partition)

    def totals(self, d: Description) -> None:
        """The summary: the counts of everything described."""
        segments = d.all_segments()
        problems, notes = d.all_problems(), d.all_notes()
        topics = sorted({p.topic for p in d.partitions if p.topic is not None}
                        | {s.topic for s in d.segments if s.topic is not None})
        records = sum(s.records for s in segments)
        batches = sum(s.batches for s in segments)
        size = sum(s.size for s in segments)
        kraft = len(d.all_kraft_snapshots())
        self.summary("describe",
                     "%d topics, %d partitions, %d segments, %d records, %d batches, %s; "
                     "%s%d problems, %d notes: %s"
                     % (len(topics), len(d.partitions), len(segments), records, batches,
                        human_bytes(size), "%d KRaft snapshots; " % kraft if kraft else "",
                        len(problems), len(notes),
                        "INCONSISTENT" if problems else _verdict(d)),
                     topics=len(topics), partitions=len(d.partitions), segments=len(segments),
                     kraft_snapshots=kraft,
                     records=records, batches=batches, size_bytes=size,
                     problems=len(problems), notes=len(notes), unreadable=len(d.errors),
                     consistent=not problems and not d.errors)

    def render(self, d: Description) -> None:
        if self.table:
            _tables(d)
            return
        self.findings((("problem", d.problems),), None, None)
        for s in d.segments:
            self.segment(s)
        for k in d.kraft_snapshots:
            self.kraft_snapshot(k)
        for p in d.partitions:
            self.partition(p)
        self.totals(d)


PARTITION_COLUMNS = tuple(Column(header, "left" if header in ("leader epochs", "snapshots")
                                 else "right")
                          for header in ("partition", "log start", "log end", "records",
                                         "batches", "size", "segments", "recovery point",
                                         "high watermark", "leader epochs", "snapshots",
                                         "problems"))
SEGMENT_COLUMNS = tuple(Column(header, "right" if header in ("records", "batches", "size",
                                                             "index", "timeindex") else "left",
                               no_wrap=header not in ("partition", "codecs"))
                        for header in ("partition", "segment", "offsets", "records", "batches",
                                       "size", "min time", "max time", "codecs", "magic",
                                       "index", "timeindex"))
KRAFT_COLUMNS = tuple(Column(header, "left" if header in ("partition", "file") else "right")
                      for header in ("partition", "file", "snapshots", "end offsets", "epochs",
                                     "records", "batches", "size"))
FINDING_COLUMNS = (Column(""), Column("file"), Column("kind"), Column("message"))


def _tables(d: Description) -> None:
    from rich.markup import escape
    drawn: List[object] = []
    by_topic: Dict[Optional[str], List[PartitionDescription]] = {}
    for p in d.partitions:
        by_topic.setdefault(p.topic, []).append(p)
    for topic, parts in by_topic.items():
        drawn.append(table("topic %s" % escape(_opt(topic)), PARTITION_COLUMNS, [
            (_opt(p.partition), _opt(p.log_start_offset), _opt(p.log_end_offset),
             str(p.records), str(p.batches), human_bytes(p.size), str(len(p.segments)),
             _opt(p.recovery_point), _opt(p.high_watermark),
             " ".join("%d@%d" % e for e in p.leader_epochs) or "-",
             " ".join("%d(%s)" % (o, _opt(n)) for o, n in p.snapshots) or "-",
             ("[red]%d[/red]" % len(p.all_problems())) if p.all_problems() else "0")
            for p in parts]))
    segments = d.all_segments()
    if segments:
        drawn.append(table("segments (* active; times UTC)", SEGMENT_COLUMNS, [
            (escape("%s-%s" % (_opt(s.topic), _opt(s.partition))),
             escape(os.path.basename(s.path)) + ("*" if s.active else ""),
             "-" if s.first_offset is None or s.last_offset is None
             else "%d-%d" % (s.first_offset, s.last_offset),
             str(s.records), str(s.batches), human_bytes(s.size),
             _time(s.min_timestamp, " "), _time(s.max_timestamp, " "),
             ",".join(s.codecs) or "-", ",".join(map(str, s.magic)) or "-",
             _opt(_index_entries(s.offset_index)), _opt(_index_entries(s.time_index)))
            for s in segments]))
    kraft = _kraft_rows(d)
    if kraft:
        drawn.append(table("KRaft snapshots (the newest of each partition)", KRAFT_COLUMNS, kraft))
    findings = ([("problem", f) for f in d.all_problems()]
                + [("note", f) for f in d.all_notes()])
    if findings:
        drawn.append(table("problems and notes", FINDING_COLUMNS, [
            ("[red]problem[/red]" if kind == "problem" else "note", escape(f.file), f.kind,
             escape(f.message)) for kind, f in findings]))
    problems = d.all_problems()
    drawn.append("%d segments, %d records, %s: %s" % (
        len(segments), sum(s.records for s in segments), human_bytes(sum(s.size for s in segments)),
        "[red]%d problems[/red]" % len(problems) if problems else _verdict(d)))
    show(*drawn)


def _kraft_rows(d: Description) -> List[Tuple[str, ...]]:
    """A row per KRaft snapshot file named alone, and per partition holding some: how many,
    the end offsets and epochs they span, the newest's name, records, batches and size."""
    from rich.markup import escape
    groups: List[Tuple[str, List[KraftSnapshotDescription]]] = [
        (os.path.basename(os.path.dirname(os.path.abspath(k.path))), [k])
        for k in d.kraft_snapshots]
    groups += [(os.path.basename(p.directory), p.kraft_snapshots) for p in d.partitions
               if p.kraft_snapshots]
    rows: List[Tuple[str, ...]] = []
    for where, snaps in groups:
        newest = snaps[-1]
        epochs = sorted(k.epoch for k in snaps if k.epoch is not None)
        ends = [k.end_offset for k in snaps if k.end_offset is not None]
        rows.append((escape(where), escape(os.path.basename(newest.path)), str(len(snaps)),
                     "%d-%d" % (ends[0], ends[-1]) if ends else "-",
                     "%d-%d" % (epochs[0], epochs[-1]) if epochs else "-",
                     _opt(newest.records), _opt(newest.batches), human_bytes(newest.size)))
    return rows


def _verdict(d: Description) -> str:
    """The last word when no problem was found: "consistent", unless something could not be
    read (then nothing is known of it)."""
    if d.errors:
        return "not all read (%d unreadable)" % len(d.errors)
    return "consistent"


@click.command(short_help="A log directory, partition or segment at a glance.")
# readable=False: an unreadable path is one line of ours (exit 2), not click's usage error
@click.argument("paths", nargs=-1, required=True, type=click.Path(readable=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True,
              help="json: JSON Lines on stdout (partition, segment, problem and note objects, "
                   "then a summary).")
@click.option("--crc", "check_crc", is_flag=True,
              help="Also check every batch's CRC: reads every byte (slower); by default only "
                   "batch headers are read.")
@click.option("--max-message-size", type=java_int(1), default=DEFAULT_MAX_MESSAGE_SIZE,
              show_default=True, help="Largest record accepted when opening legacy wrappers.")
def describe(paths: Tuple[str, ...], fmt: str, check_crc: bool, max_message_size: int) -> None:
    """Describe log directories, partition directories, segments' .log files or KRaft snapshot
    files at a glance.

    Per partition: log start and end offsets, records, batches, size, the checkpointed
    recovery point, high watermark and log start offset held against the log, leader epochs,
    producer snapshots and KRaft snapshots (their count, the end offsets and epochs they span,
    the newest's records and batches); per segment: offsets, records, batches, size, time
    range, codecs, magic and index health. Read from batch headers only (no v2 batch is
    decompressed; legacy compressed wrappers are opened to count their messages; --crc reads
    every byte). Several PATHS are described in one report, with one summary. Exit status
    (the worst of all PATHS): 0 consistent, 1 something is inconsistent, 2 usage error or
    unreadable input.
    """
    d = Description()
    for path in paths:
        try:
            one = describe_path(path, max_message_size, check_crc)
        except (UsageError, OSError) as e:
            if len(paths) == 1:
                fail(e, path)
            d.errors.append((path, e))  # said below; the other PATHS are still described
            continue
        d.partitions += one.partitions
        d.segments += one.segments
        d.kraft_snapshots += one.kraft_snapshots
        d.errors += one.errors
        d.problems += [f for f in one.problems if f not in d.problems]
    for where, error in d.errors:
        click.echo("kafkalog: " + error_text(error, where), err=True)
    _Output(fmt).render(d)
    if d.errors:
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_OK if d.consistent else EXIT_INVALID)
