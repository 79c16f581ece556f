"""`kafkalog recover`: the broker's recovery of a log directory, offline, losing nothing."""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import click

from ..log.files import printable_name
from ..log.indexbuild import DEFAULT_INDEX_INTERVAL
from ..log.lock import preview_warning
from ..log.names import (CLEAN_SHUTDOWN_FILE, LOG, SNAPSHOT, partition_file_kind,
                         topic_partition)
from ..log.recover_plan import (EPOCHS, MOVE, REMOVE, RENAME, RULE_AFTER_CUT, RULE_BELOW,
                                RULE_CLEAN, RULE_FULL, RULE_NO_INDEX, RULE_RECOVERY_POINT,
                                RULE_TXN_BELOW_BASE, SPLIT, WRITE, PartitionPlan, RecoveryTotals,
                                SegmentReport)
from ..log.recover_run import LogDirRecovery
from ..log.segment import DEFAULT_MAX_MESSAGE_SIZE
from .errors import error_text
from .output import Column, Output, human_bytes, show, table, new_offsets_text, offsets_text, plural
from .targets import partitions_by_log_dir
from .numbers import java_int

EXIT_OK, EXIT_REPAIRED, EXIT_ERROR = 0, 1, 2


def _rule_text(r: SegmentReport, plan: PartitionPlan) -> str:
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


def _removed_text(r: SegmentReport) -> str:
    """What a cut tail (or a segment set aside whole) holds: the whole batches' offsets and
    records, its bytes, and the bytes at its end that hold no batch."""
    if r.first_offset_removed is None:
        return "no whole batch, %d bytes" % r.cut
    text = "%s, %d bytes" % (offsets_text(r.first_offset_removed, r.last_offset_removed,
                                          r.removed_records), r.cut)
    if r.torn_bytes:
        text += " (the last %d hold no batch)" % r.torn_bytes
    return text


def _torn(r: SegmentReport) -> Optional[Tuple[int, int, int]]:
    """The first and last offsets and the records of the batch a torn tail is the start of,
    from its header; None when there is no torn tail or no header to read."""
    if r.torn_first_offset is None or r.torn_last_offset is None or r.torn_records is None:
        return None
    return r.torn_first_offset, r.torn_last_offset, r.torn_records


def _torn_text(r: SegmentReport, dry_run: bool) -> str:
    """The batch a torn tail is the start of: its offsets and records, from its header, lost
    (in the conditional for a dry run); or that its offsets are unknown. "" without one."""
    if not r.torn_bytes:
        return ""
    torn = _torn(r)
    if torn is None:
        return ("the last %d bytes hold no batch header that can be read: the offsets of the "
                "torn batch are unknown" % r.torn_bytes)
    first, last, records = torn
    return "the last %d bytes are the start of a torn batch, offsets %d-%d (%s): %s" % (
        r.torn_bytes, first, last, plural(records, "record"),
        "would be lost" if dry_run else "lost")


def _where(directory: str) -> Dict[str, Any]:
    topic, number = topic_partition(directory)
    return {"topic": topic, "partition": number}


def _segment_json(plan: PartitionPlan, r: SegmentReport, path: str,
                  dry_run: bool) -> Dict[str, Any]:
    obj = dict(type="segment", **_where(plan.directory))
    obj.update(file=path, baseOffset=r.base_offset, rule=r.rule,
               ruleText=_rule_text(r, plan), recovered=r.recovered, sizeBytes=r.size,
               bytesKept=r.bytes_kept, bytesCut=r.bytes_cut, setAside=r.set_aside,
               bytesSetAside=r.bytes_set_aside, recordsRemoved=r.removed_records,
               firstOffsetRemoved=r.first_offset_removed, lastOffsetRemoved=r.last_offset_removed,
               bytesWithoutBatch=r.torn_bytes, tornFirstOffset=r.torn_first_offset,
               tornLastOffset=r.torn_last_offset, tornRecords=r.torn_records,
               tornOffsetsKnown=None if not r.torn_bytes else r.torn_first_offset is not None,
               dryRun=dry_run)
    if r.records is not None:
        obj.update(records=r.records, firstOffset=r.first_offset,
                   lastOffset=None if r.next_offset is None else r.next_offset - 1,
                   nextOffset=r.next_offset)
    if r.first_bad_position is not None:
        obj.update(firstBadPosition=r.first_bad_position, reason=r.reason,
                   firstBadOffset=r.first_bad_offset)
    for key, value in (("indexEntries", r.index_entries),
                       ("timeIndexEntries", r.timeindex_entries),
                       ("txnIndexEntries", r.txn_entries)):
        if value is not None:
            obj[key] = value
    if r.recovered:
        obj["indexesReplaced"] = r.indexes_replaced
        obj["indexesCreated"] = r.indexes_created
    if r.timeindex_created:
        obj["timeIndexCreated"] = True
    if r.split_into:
        obj["splitInto"] = r.split_into
    return obj


def _partition_json(plan: PartitionPlan, dry_run: bool) -> Dict[str, Any]:
    removed = plan.removed_offsets
    torn = plan.torn_offsets
    obj = dict(type="partition", **_where(plan.directory))
    obj.update(directory=printable_name(plan.directory), recoveryPoint=plan.recovery_point,
               cleanShutdown=plan.clean_shutdown, full=plan.full,
               logEndOffset=plan.log_end_offset, recordsRemoved=plan.records_removed,
               firstOffsetRemoved=None if removed is None else removed[0],
               lastOffsetRemoved=None if removed is None else removed[1],
               bytesCut=plan.bytes_cut, segmentsSetAside=plan.segments_set_aside,
               bytesSetAside=plan.bytes_set_aside, tornRecords=plan.torn_records,
               tornFirstOffset=None if torn is None else torn[0],
               tornLastOffset=None if torn is None else torn[1],
               tornBatchesOffsetsUnknown=plan.torn_unknown, changed=plan.changes,
               dryRun=dry_run)
    return obj


def _torn_batches(n: int) -> str:
    return "a torn batch" if n == 1 else "%d torn batches" % n


def _partition_torn_text(plan: PartitionPlan, dry_run: bool) -> str:
    """'; a torn batch, offsets 290-299 (10 records), lost' for the partition's line."""
    parts: List[str] = []
    torn = plan.torn_offsets
    if torn is not None:
        known = sum(1 for r in plan.segments if r.torn_first_offset is not None)
        parts.append("%s, offsets %d-%d (%s), %s" % (
            _torn_batches(known), torn[0], torn[1], plural(plan.torn_records, "record"),
            "would be lost" if dry_run else "lost"))
    if plan.torn_unknown:
        parts.append("%s of unknown offsets %s" % (
            _torn_batches(plan.torn_unknown),
            "would be cut" if dry_run else "cut"))
    return "".join("; " + p for p in parts)


def _removal_text(plan: PartitionPlan, dry_run: bool, human: bool = False) -> str:
    """"removed offsets 290-599 (310 records): 793 bytes cut, 1 segment (60225 bytes) set
    aside", in the conditional for a dry run; "" when nothing is removed."""
    if not plan.bytes_cut and not plan.segments_set_aside:
        return ""
    removed = plan.removed_offsets
    parts: List[str] = []
    if plan.bytes_cut:
        parts.append("%s %s" % (human_bytes(plan.bytes_cut) if human else
                                "%d bytes" % plan.bytes_cut, "would be cut" if dry_run else "cut"))
    if plan.segments_set_aside:
        parts.append("%s (%s) %s" % (plural(plan.segments_set_aside, "segment"),
                                      human_bytes(plan.bytes_set_aside) if human else
                                      "%d bytes" % plan.bytes_set_aside,
                                      "would be set aside" if dry_run else "set aside"))
    if removed is None:  # bytes holding no whole batch
        return ", ".join(parts) + " (no whole batch)" + _partition_torn_text(plan, dry_run)
    return "%s offsets %d-%d (%s): %s%s" % ("would remove" if dry_run else "removed", removed[0],
                                            removed[1], plural(plan.records_removed, "record"),
                                            ", ".join(parts), _partition_torn_text(plan, dry_run))


class _Report(Output):
    """Each partition's plan, the log directory's checkpoint and marker, and the summary, in
    one layout (on a terminal, a table of the segments and the other lines beside it)."""

    def __init__(self, fmt: str, dry_run: bool) -> None:
        super().__init__(fmt, beside_tables=True)
        self.dry_run = dry_run
        # (plan, path, SegmentReport): the table's segments
        self.rows: List[Tuple[PartitionPlan, str, SegmentReport]] = []

    def partition(self, plan: PartitionPlan) -> None:
        d = plan.directory
        dry_run = self.dry_run
        would = "would be " if dry_run else ""
        where = _where(d)
        removal = _removal_text(plan, dry_run, self.table)
        self.emit(_partition_json(plan, dry_run),
                  "%s: recovery point %s%s%s; %slog end offset %s%s" % (
                      printable_name(d),
                      "none recorded" if plan.recovery_point is None else plan.recovery_point,
                      ", clean shutdown" if plan.clean_shutdown else "",
                      ", --full" if plan.full else "",
                      "new " if plan.changes else "", plan.log_end_offset,
                      "; " + removal if removal else ""))
        # a segment's .log moved whole or split is said once, by its segment line
        said = {r.name for r in plan.segments if r.set_aside or r.split_into}
        said.update(name for name, _ in plan.splits)
        for a in plan.actions:
            path = printable_name(os.path.join(d, a.name))
            base = dict(where, file=path, why=a.why, dryRun=dry_run)
            if a.kind == MOVE:
                if a.name in said:
                    continue
                self.emit(dict(type="moved", **base),
                          "%s: %smoved to quarantine (%s)" % (path, would, a.why))
            elif a.kind == REMOVE:
                self.emit(dict(type="removed", **base),
                          "%s: %sremoved (%s)" % (path, would, a.why))
            elif a.kind == RENAME:
                target = printable_name(a.target)
                self.emit(dict(type="renamed", to=target, **base),
                          "%s: %srenamed to %s (%s)" % (path, would, target, a.why))
            elif a.kind == WRITE and partition_file_kind(a.name) in (SNAPSHOT, LOG):
                self.emit(dict(type="written", **base),
                          "%s: %swritten (%s)" % (path, would, a.why))
            elif a.kind == EPOCHS:
                self.emit(dict(type="leaderEpochs", **base),
                          "%s: %srewritten: %s" % (path, would, a.why))
            elif a.kind == SPLIT:
                if a.name in said:
                    continue
                self.emit(dict(type="split", into=[b for b, _, _ in a.pieces], **base),
                          "%s: %ssplit (%s)" % (path, would, a.why))
        if dry_run and plan.split is not None:
            path = printable_name(os.path.join(d, plan.split.name))
            self.emit(dict(type="note", **where, file=path,
                           message="the segments from this one on are checked after the split"),
                      "%s: the segments from this one on would be checked after the split"
                      % path)
        for name, text in plan.notes:
            path = printable_name(os.path.join(d, name))
            self.emit(dict(type="note", **where, file=path, message=text), "%s: %s" % (path, text))
        for r in plan.segments:
            path = printable_name(os.path.join(d, r.name))
            for text in r.notes:
                self.emit(dict(type="note", **where, file=path, message=text),
                          "%s: %s" % (path, text))
            if self.table:
                self.rows.append((plan, path, r))
            else:
                self.emit(_segment_json(plan, r, path, dry_run), "%s: %s: %s" % (
                    path, _rule_text(r, plan), _segment_text(r, dry_run)))
        if plan.compact_end_offset is not None:
            self.emit(dict(type="compactFinished", **where, directory=printable_name(d),
                           endOffset=plan.compact_end_offset, dryRun=dry_run),
                      "%s: the interrupted compact pass up to offset %d %sfinished: its new "
                      "segments swapped in, their indexes and the cleaner checkpoint written"
                      % (printable_name(d), plan.compact_end_offset, would))
        for name, bases in plan.splits:
            path = printable_name(os.path.join(d, name))
            self.emit(dict(type="splitDone", **where, file=path, into=bases),
                      "%s: split into segments at offsets %s (offset overflow)"
                      % (path, ", ".join(map(str, bases))))
        if plan.quarantine is not None and plan.files_kept:
            qdir = printable_name(plan.quarantine)
            self.emit(dict(type="quarantine", **where, directory=qdir),
                      "%s: what was removed is kept in %s" % (printable_name(d), qdir))

    def log_dir(self, run: LogDirRecovery) -> None:
        """The recovery points written (or that would be) and the clean-shutdown marker."""
        path = printable_name(run.checkpoint_path)
        for tmp in run.temporary_files:
            note = ("temporary file of an interrupted kafkalog write: %s"
                    % ("would be removed" if self.dry_run else "removed"))
            self.emit({"type": "note", "topic": None, "partition": None,
                       "file": printable_name(tmp), "message": note},
                      "%s: %s" % (printable_name(tmp), note))
        if run.checkpoint_problem is not None:
            self.emit({"type": "note", "topic": None, "partition": None, "file": path,
                       "message": run.checkpoint_problem},
                      run.checkpoint_problem)
        for (topic, number), (old, new) in sorted(run.checkpoint_updates.items()):
            verb = "would be set" if self.dry_run else "set"
            self.emit({"type": "recoveryPoint", "topic": topic, "partition": number,
                       "file": path, "old": old, "new": new, "dryRun": self.dry_run},
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
            self.emit({"type": "cleanShutdownMarker", "topic": None, "partition": None,
                       "file": marker, "state": run.marker},
                      "%s: %s" % (marker, text[run.marker]))

    def totals(self, plans: Sequence[PartitionPlan], failed: bool = False) -> None:
        """The summary (on a terminal, after the lines held and the table); no summary line
        after a run that ``failed`` before any partition (its error line says it all), the
        JSON summary still."""
        dry_run = self.dry_run
        t = RecoveryTotals.of(plans)
        changed, cut, aside = t.changed, t.bytes_cut, t.bytes_set_aside
        segments_cut, segments_aside, records = t.segments_cut, t.segments_set_aside, \
            t.records_removed
        torn_records, torn_known = t.torn_records, t.torn_batches_known
        torn_unknown = t.torn_batches_offsets_unknown
        ends = [{"topic": topic, "partition": number, "logEndOffset": end}
                for topic, number, end in t.log_end_offsets]
        cond: Callable[[str, str], str] = ((lambda now, then: then) if dry_run
                                           else (lambda now, then: now))
        text = "%s, %d %s" % (plural(len(plans), "partition"), changed,
                              cond("repaired", "to repair"))
        if cut or segments_aside:
            parts = ["%s %s" % (plural(records, "record"), cond("removed", "would be removed"))]
            if cut:
                parts.append("%s %s from %s" % (
                    human_bytes(cut) if self.table else "%d bytes" % cut,
                    cond("cut", "would be cut"), plural(segments_cut, "segment")))
            if segments_aside:
                parts.append("%s (%s) %s" % (
                    plural(segments_aside, "segment"),
                    human_bytes(aside) if self.table else "%d bytes" % aside,
                    cond("set aside", "would be set aside")))
            if torn_known:
                parts.append("%s of %s %s" % (
                    plural(torn_records, "record"),
                    "a torn batch" if torn_known == 1 else "%d torn batches" % torn_known,
                    cond("lost", "would be lost")))
            if torn_unknown:
                parts.append("%s of unknown offsets %s" % (_torn_batches(torn_unknown),
                                                            cond("cut", "would be cut")))
            text += ": " + "; ".join(parts)
        text += new_offsets_text("log end offset", ends, "logEndOffset")
        if dry_run:
            text += " (dry run: nothing changed)"
        if self.table:
            self.flush()
            self._table()
        self.summary("recover", None if failed and not plans else text,
                     partitions=t.partitions, changed=changed,
                     records_removed=records, bytes_cut=cut, segments_cut=segments_cut,
                     segments_set_aside=segments_aside, bytes_set_aside=aside,
                     torn_records=torn_records, torn_batches=torn_known + torn_unknown,
                     torn_batches_offsets_unknown=torn_unknown, log_end_offsets=ends,
                     dry_run=dry_run)

    def _table(self) -> None:
        from rich.markup import escape
        dry_run = self.dry_run
        by_partition: Dict[str, Tuple[PartitionPlan, List[SegmentReport]]] = {}
        for plan, path, r in self.rows:
            by_partition.setdefault(plan.directory, (plan, []))[1].append(r)
        show(*(table("%s%s: new log end offset %s" % (
            escape(printable_name(directory)), " (dry run)" if dry_run else "",
            plan.log_end_offset), DRY_RUN_COLUMNS if dry_run else COLUMNS, [
            (escape(r.name), r.rule, _kept_cell(r), _removed_cell(r, dry_run),
             "" if r.first_bad_position is None else escape(
                 "position %d: %s" % (r.first_bad_position, r.reason)),
             "" if not r.recovered else (
                 "%s (%s/%s)" % ("would be rebuilt" if dry_run else "rebuilt",
                                 r.index_entries, r.timeindex_entries)
                 if r.indexes_replaced or r.indexes_created else "as rebuilt"))
            for r in reports]) for directory, (plan, reports) in by_partition.items()))


COLUMNS = (Column("segment", no_wrap=True), Column("rule"), Column("kept"), Column("removed"),
           Column("why"), Column("indexes"))
DRY_RUN_COLUMNS = COLUMNS[:3] + (Column("would be removed"),) + COLUMNS[4:]


def _kept_cell(r: SegmentReport) -> str:
    if r.set_aside:
        return "-"
    if r.records is None:
        return "not read\n%s" % human_bytes(r.bytes_kept)
    if r.first_offset is None or r.next_offset is None:
        return "no batch\n%s" % human_bytes(r.bytes_kept)
    return "offsets %d-%d\n%s\n%s" % (r.first_offset, r.next_offset - 1,
                                      plural(r.records, "record"), human_bytes(r.bytes_kept))


def _removed_cell(r: SegmentReport, dry_run: bool) -> str:
    if r.split_into:
        return "%s at offsets %s" % ("would be split" if dry_run else "split",
                                     ", ".join(map(str, r.split_into)))
    if not r.cut:
        return "-"
    lines = ["[red]%s[/red]" % ("set aside" if r.set_aside else "cut")]
    if r.first_offset_removed is not None and r.last_offset_removed is not None:
        lines.append("offsets %d-%d" % (r.first_offset_removed, r.last_offset_removed))
        lines.append(plural(r.removed_records, "record"))
    else:
        lines.append("no whole batch")
    lines.append(human_bytes(r.cut))
    if r.torn_bytes and r.first_offset_removed is not None:
        lines.append("(%s without a batch)" % human_bytes(r.torn_bytes))
    torn = _torn(r)
    if r.torn_bytes:
        lines.append("torn batch: offsets unknown" if torn is None else
                     "torn batch: offsets %d-%d, %s %s" % (
                         torn[0], torn[1], plural(torn[2], "record"),
                         "would be lost" if dry_run else "lost"))
    return "\n".join(lines)


def _segment_text(r: SegmentReport, dry_run: bool) -> str:
    """What happened to a segment (in the conditional for a dry run)."""
    w: Callable[[str, str], str] = ((lambda now, then: then) if dry_run
                                    else (lambda now, then: now))
    if r.set_aside:
        return "%s: %s%s" % (w("moved to quarantine", "would be moved to quarantine"),
                             _removed_text(r), "; " + _torn_text(r, dry_run)
                             if r.torn_bytes else "")
    if r.split_into:
        return "%s into segments at offsets %s (offset overflow), %d bytes" % (
            w("split", "would be split"), ", ".join(map(str, r.split_into)), r.size)
    if not r.recovered:
        text = "not read, %d bytes" % r.size
        if r.timeindex_created:
            text += "; missing time index %s empty" % w("created", "would be created")
        return text
    parts: List[str] = []
    kept = offsets_text(r.first_offset, None if r.next_offset is None else r.next_offset - 1,
                        r.records or 0)
    if r.first_bad_position is None:
        parts.append("valid: %s, %d bytes" % (kept, r.size))
    else:
        at = "" if r.first_bad_offset is None else ", offset %d on" % r.first_bad_offset
        parts.append("%s %s, %d bytes; %s %s, at position %d%s (%s)"
                     % (w("kept", "would keep"), kept, r.bytes_kept, w("cut:", "would be cut:"),
                        _removed_text(r), r.first_bad_position, at, r.reason))
        if r.torn_bytes:
            parts.append(_torn_text(r, dry_run))
    rebuilt = w("indexes rebuilt", "indexes would be rebuilt")
    if r.indexes_replaced or r.indexes_created:
        # (the entry counts of a recovered segment's rebuilt indexes: "%s" prints them)
        fates = (["%s %s" % (kind, w("replaced", "would be replaced"))
                  for kind in r.indexes_replaced]
                 + ["%s %s" % (kind, w("created", "would be created"))
                    for kind in r.indexes_created])
        parts.append("%s: %s: %s offset index entries, %s time index entries, "
                     "%s aborted transactions"
                     % (rebuilt, ", ".join(fates), r.index_entries, r.timeindex_entries,
                        r.txn_entries))
    else:
        parts.append("%s: the files are the same" % rebuilt)
    return "; ".join(parts)


@click.command(short_help="Recover partitions as a broker's load does, losing nothing.")
@click.argument("paths", nargs=-1, required=True, type=click.Path(readable=False))
@click.option("--dry-run", is_flag=True, help="Report what would change; change nothing.")
@click.option("--full", is_flag=True,
              help="Recover every segment, whatever the recovery point and the clean-shutdown "
                   "marker say.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: JSON Lines on stdout, for cron.")
@click.option("--index-interval-bytes", type=java_int(0), default=DEFAULT_INDEX_INTERVAL,
              show_default=True,
              help="Bytes of log between two index entries (index.interval.bytes).")
@click.option("--max-message-size", type=java_int(1), default=DEFAULT_MAX_MESSAGE_SIZE,
              show_default=True, help="Largest record accepted when validating batches.")
def recover(paths: Tuple[str, ...], dry_run: bool, full: bool, fmt: str,
            index_interval_bytes: int, max_message_size: int) -> None:
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
    manifest.json. Refuses to run while a broker holds the log directory (--dry-run reads
    anyway, with a warning). Exit status: 0
    nothing to do, 1 repaired (or, with --dry-run, would repair), 2 errors.
    """
    report = _Report(fmt, dry_run)
    plans: List[PartitionPlan] = []
    by_log_dir, ok = partitions_by_log_dir(paths)
    status = EXIT_OK if ok else EXIT_ERROR
    for log_dir, partitions in by_log_dir.items():
        run = LogDirRecovery(log_dir, partitions, index_interval_bytes, max_message_size,
                             dry_run, full)
        warned = False
        try:
            for result in run.run():
                if run.lock_held is not None and not warned:
                    warned = True
                    click.echo("kafkalog: warning: " + preview_warning(run.lock_held), err=True)
                if result.error is not None:
                    # This partition's error: said, and the log directory's others go on.
                    click.echo("kafkalog: " + error_text(result.error, result.directory),
                               err=True)
                    status = EXIT_ERROR
                    continue
                plan = result.plan
                assert plan is not None  # a partition's result: its plan, or its error
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
            if run.lock_held is not None and not warned:
                click.echo("kafkalog: warning: " + preview_warning(run.lock_held), err=True)
            report.log_dir(run)
        except OSError as e:  # the log directory's: held by a broker (LockHeld), unreadable
            click.echo("kafkalog: " + error_text(e, log_dir), err=True)
            status = EXIT_ERROR
    report.totals(plans, failed=status == EXIT_ERROR)
    sys.exit(status)
