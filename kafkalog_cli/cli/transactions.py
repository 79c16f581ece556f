"""`kafkalog transactions`: the transactions of partitions, and the hanging ones; exit codes
fit for cron."""

from __future__ import annotations

import datetime
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import click

from ..errors import UsageError
from ..log.files import printable_name
from ..log.names import topic_partition
from ..log.segment import DEFAULT_MAX_MESSAGE_SIZE
from ..log.read import Note
from ..log.transactions import (ABORT, AGE_FROM, AGE_FROM_NOW, DEFAULT_HANGING_AFTER_MS,
                                NEWEST_TIMESTAMP, NOW_GIVEN, OPEN, PartitionSummary,
                                Transaction, transactions_of)
from ..log.verify import TargetError
from .output import Column, Output, show, table
from .errors import error_text, fail
from .numbers import java_int, java_long
from .times import now_option

EXIT_OK, EXIT_HANGING, EXIT_USAGE = 0, 1, 2

# A transaction's row of a partition's table: producer, epoch, first offset, end offset, state,
# coordinator epoch, records, .txnindex, age ms, LSO lag
Row = Tuple[str, str, str, str, str, str, str, str, str, str]


def _txn_json(directory: str, t: Transaction) -> Dict[str, Any]:
    topic, partition = topic_partition(t.directory)
    return {"type": "transaction", "topic": topic, "partition": partition,
            "directory": directory, "producerId": t.producer_id,
            "producerEpoch": t.producer_epoch, "state": t.state,
            "firstOffset": t.first_offset, "endOffset": t.end_offset,
            "firstTimestamp": t.first_timestamp, "batches": t.batches, "records": t.records,
            "markerProducerEpoch": t.marker_producer_epoch, "coordinatorEpoch": t.coordinator_epoch,
            "markerTimestamp": t.marker_timestamp, "epochBumped": t.epoch_bumped,
            "empty": t.empty, "inTxnIndex": t.in_txn_index,
            "txnIndexProblem": t.txn_index_problem, "ageMs": t.age_ms, "lsoLag": t.lso_lag,
            "hanging": t.hanging}


def _partition_json(directory: str, p: PartitionSummary) -> Dict[str, Any]:
    topic, partition = topic_partition(p.directory)
    return {"type": "partition", "topic": topic, "partition": partition,
            "directory": directory, "transactions": p.transactions,
            "committed": p.committed, "aborted": p.aborted, "empty": p.empty, "open": p.open,
            "hanging": p.hanging, "missingFromTxnIndex": p.missing_from_txn_index,
            "logEndOffset": p.log_end_offset, "lastStableOffset": p.last_stable_offset,
            "lsoLag": p.lso_lag, "newestTimestamp": p.newest_timestamp,
            "referenceMs": p.reference_ms, "referenceSource": p.reference_source,
            "hangingAfterMs": p.hanging_after_ms, "problems": p.problems}


# The offsets and epochs a transaction's state sets (its marker's, an open one's lag) are
# Optional fields of Transaction: "%s" prints them, ints, as "%d" would.


def _index_text(t: Transaction) -> str:
    if t.state != ABORT or t.empty:
        return ""
    if t.in_txn_index is None:
        return "; %s" % t.txn_index_problem
    if not t.in_txn_index:
        return "; MISSING from the .txnindex of segment %s" % t.segment
    return "; in the .txnindex" + (" (%s)" % t.txn_index_problem if t.txn_index_problem else "")


def _txn_text(t: Transaction) -> str:
    who = "producer %d epoch %d" % (t.producer_id, t.producer_epoch)
    if t.empty:
        return ("%s: %s marker at offset %s (coordinator epoch %s) with no open transaction "
                "(empty, or its data is gone from the log)"
                % (who, t.marker, t.end_offset, t.coordinator_epoch))
    size = "%d record%s in %d batch%s" % (t.records, "" if t.records == 1 else "s", t.batches,
                                         "" if t.batches == 1 else "es")
    if t.state == OPEN:
        age = "age unknown" if t.age_ms is None else "age %d ms" % t.age_ms
        return ("%s: OPEN from offset %s (%s), %s, holds the last stable offset back by %s "
                "offsets%s" % (who, t.first_offset, size, age, t.lso_lag,
                               ": HANGING" if t.hanging else ""))
    bumped = (", ended at epoch %s: the coordinator bumped the producer's epoch (a fenced "
              "producer, or transactions V2)" % t.marker_producer_epoch if t.epoch_bumped else "")
    return ("%s: offsets %s-%s %s (coordinator epoch %s%s), %s%s"
            % (who, t.first_offset, t.end_offset, t.state, t.coordinator_epoch, bumped, size,
               _index_text(t)))


def _reference_text(p: PartitionSummary) -> str:
    if p.reference_source == NEWEST_TIMESTAMP:
        return "the partition's newest timestamp %s" % (
            "-" if p.newest_timestamp is None else p.newest_timestamp)
    return "%s %s (%s)" % ("--now" if p.reference_source == NOW_GIVEN else "the wall clock",
                           p.reference_ms, _iso(p.reference_ms))


def _iso(ms: Optional[int]) -> str:
    if ms is None:
        return "-"
    try:
        when = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) \
            + datetime.timedelta(milliseconds=ms)
    except OverflowError:
        return "out of the calendar's range"
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _summary_text(p: PartitionSummary) -> str:
    missing = p.missing_from_txn_index
    reference = _reference_text(p)
    return ("%d committed, %d aborted%s, %d open (%d hanging: older than %d ms, ages against "
            "%s); log end offset %d, last stable offset %d (%d behind)"
            % (p.committed, p.aborted,
               " (%d missing from the .txnindex)" % missing if missing else "",
               p.open, p.hanging, p.hanging_after_ms, reference, p.log_end_offset,
               p.last_stable_offset, p.lso_lag))


def _row(t: Transaction) -> Row:
    state = t.state + (" (bumped to %s)" % t.marker_producer_epoch if t.epoch_bumped else "")
    if t.hanging:
        state = "OPEN: [red]HANGING[/red]"
    index = ""
    if t.state == ABORT and not t.empty:
        index = {True: "listed", False: "[red]missing[/red]", None: "unreadable"}[t.in_txn_index]
    return (str(t.producer_id), str(t.producer_epoch),
            "-" if t.first_offset is None else str(t.first_offset),
            "-" if t.end_offset is None else str(t.end_offset), state,
            "-" if t.coordinator_epoch is None else str(t.coordinator_epoch), str(t.records),
            index, "" if t.age_ms is None else str(t.age_ms),
            "" if t.lso_lag is None else str(t.lso_lag))


COLUMNS = (Column("producer", "right"), Column("epoch", "right"), Column("first offset", "right"),
           Column("end offset", "right"), Column("state"), Column("coord. epoch", "right"),
           Column("records", "right"), Column(".txnindex"), Column("age ms", "right"),
           Column("LSO lag", "right"))


def _table(directory: str, summary: PartitionSummary, rows: Sequence[Row]) -> None:
    from rich.markup import escape
    show(table(escape(directory), COLUMNS, rows, caption=escape(_summary_text(summary))))


class _Output(Output):
    """Renders the library's stream: a line per transaction and per partition (text or JSON),
    or, on a terminal, a table per partition."""

    def __init__(self, fmt: str) -> None:
        super().__init__(fmt)
        self.rows: List[Row] = []
        self.totals = {"partitions": 0, "transactions": 0, "committed": 0, "aborted": 0,
                       "open": 0, "hanging": 0, "problems": 0}

    def transaction(self, t: Transaction) -> None:
        directory = printable_name(t.directory)
        if self.table:
            self.rows.append(_row(t))
        else:
            self.emit(_txn_json(directory, t), "%s: %s" % (directory, _txn_text(t)))

    def partition(self, p: PartitionSummary) -> None:
        directory = printable_name(p.directory)
        totals = self.totals
        totals["partitions"] += 1
        for name in ("transactions", "committed", "aborted", "open", "hanging", "problems"):
            totals[name] += getattr(p, name)
        if self.table:
            _table(directory, p, self.rows)
            self.rows = []
        else:
            self.emit(_partition_json(directory, p), "%s: %s" % (directory, _summary_text(p)))


@click.command(short_help="List the transactions of partitions; find hanging ones.")
# readable=False: an unreadable path is one line of ours (exit 2), not click's usage error
@click.argument("paths", nargs=-1, required=True, type=click.Path(readable=False))
@click.option("--now", default=None, metavar="TIME", callback=now_option,
              help="Measure the ages of open transactions from this time (epoch ms or ISO "
                   "8601) [default: the wall clock].")
@click.option("--age-from", type=click.Choice(AGE_FROM), default=AGE_FROM_NOW,
              show_default=True,
              help="now: age open transactions against --now (else the wall clock); "
                   "newest-timestamp: against each partition's newest batch timestamp (for a "
                   "copy of a log directory taken some time ago).")
@click.option("--hanging-after-ms", type=java_long(0), default=DEFAULT_HANGING_AFTER_MS,
              show_default=True,
              help="An open transaction older than this is hanging (exit 1); the default is "
                   "Kafka's transaction.max.timeout.ms.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True,
              help="json: JSON Lines on stdout (a line per transaction, one per partition).")
@click.option("--max-message-size", type=java_int(1), default=DEFAULT_MAX_MESSAGE_SIZE,
              show_default=True, help="Largest record accepted when reading batches.")
def transactions(paths: Tuple[str, ...], now: Optional[int], age_from: str,
                 hanging_after_ms: int, fmt: str, max_message_size: int) -> None:
    """List the transactions of partitions and find the hanging ones.

    PATHS are partition directories, .log files (their partition) or log directories (every
    partition). Each transaction as its marker is met: producer id and epoch, first and end
    offsets, COMMIT or ABORT, the marker's coordinator epoch, whether each ABORT is listed in
    its segment's .txnindex; then the transactions no marker has ended (open), with their age
    (from the max timestamp of their first batch to --now, else to the wall clock, or with
    --age-from newest-timestamp to the newest timestamp in the partition) and how far they hold
    back the last stable offset; then a summary line per partition. Reads only. Exit status:
    0 none hanging, 1 an open transaction older than --hanging-after-ms, 2 usage error or
    unreadable input.
    """
    status = EXIT_OK
    output = _Output(fmt)
    if now is not None and age_from != AGE_FROM_NOW:
        fail(UsageError("--now is the time to age transactions from: not with --age-from %s"
                        % age_from))
    for target in paths:
        try:
            for item in transactions_of(target, now, hanging_after_ms, max_message_size,
                                        age_from):
                if isinstance(item, TargetError):
                    click.echo("kafkalog: " + error_text(item.error, item.path), err=True)
                    output.rows = []  # a partition left unfinished: no table of it
                    status = EXIT_USAGE
                elif isinstance(item, Note):
                    click.echo("kafkalog: " + item.message, err=True)
                elif isinstance(item, Transaction):
                    output.transaction(item)
                else:
                    output.partition(item)
                    if item.hanging:
                        status = max(status, EXIT_HANGING)
        except UsageError as e:
            fail(e)
    output.summary("transactions", None, **output.totals)
    sys.exit(status)
