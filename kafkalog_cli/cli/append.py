"""`kafkalog append` and `kafkalog roll`: write a partition as a broker would.

The commands parse options and render what the library (log/produce.py ``append_records``,
log/append.py ``roll_partition``) reports; stdin's lines and JSON lines become records and
transaction markers in log/append_input.py.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, Optional

import click

from ..errors import KafkalogError, UsageError
from ..format import codecs
from ..log.append import plan_roll, roll_partition
from ..log.append_input import INPUT_FORMATS, InputLines
from ..log.files import printable_name
from ..log.indexbuild import DEFAULT_INDEX_INTERVAL
from ..log.names import topic_partition
from ..log.append_types import (DEFAULT_MAX_MESSAGE_BYTES, AppendResult, AppendSettings,
                                InputError)
from ..log.produce import append_records
from ..log.segment_writer import DEFAULT_SEGMENT_BYTES, DEFAULT_SEGMENT_INDEX_BYTES, RollPolicy
from .errors import error_text, exit_code, fail
from .numbers import java_int, java_long, java_short
from .output import Output


def _report_flush(out: Output) -> Callable[[int], None]:
    def report(last_offset: int) -> None:
        out.emit({"type": "flushed", "lastOffset": last_offset},
                 "flushed through offset %d" % last_offset)
    return report


def _report_appended(out: Output, result: AppendResult) -> None:
    """The run's last line; in JSON the summary object (README, "JSON output")."""
    topic, partition = topic_partition(result.directory)
    first, last = result.first_offset, result.last_offset
    written: Dict[str, Any] = {}
    if result.records:
        written.update(first_offset=first, last_offset=last)
    if result.stopped is not None:
        written.update(stopped_at_line=result.stopped.line, dropped=result.dropped)
    if first is not None and last is not None:  # (records written)
        text = ("appended %d record%s at offset%s %s to %s"
                % (result.records, "" if result.records == 1 else "s",
                   "" if result.records == 1 else "s",
                   first if result.records == 1 else "%d-%d" % (first, last), result.directory))
    else:
        text = "appended 0 records to %s" % result.directory
    out.summary("append", text, topic=topic, partition=partition, directory=result.directory,
                records=result.records, **written)


def _stopped_text(result: AppendResult, stopped: InputError) -> str:
    """Where the input stopped (``stopped``, the result's) and what that left, for stderr."""
    where = "line %d: " % stopped.line if stopped.line is not None else ""
    return ("%s%s; nothing of its batch was written (%d earlier records dropped with it); "
            "the partition now ends at offset %d"
            % (where, error_text(stopped), result.dropped,
               result.log_end_offset - 1))


@click.command(short_help="Append records from stdin to a partition directory.")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--input-format", type=click.Choice(INPUT_FORMATS), default="lines",
              show_default=True, help="lines: one value per line; jsonl: one JSON object per line "
              "(a record, with producerId/producerEpoch/sequence/transactional if any, or a "
              "{\"control\": \"commit\"|\"abort\", \"producerId\": ..} marker).")
@click.option("--key", default=None, help="lines: the key of every record (default: null).")
@click.option("--batch-records", type=java_int(1), default=1000000,
              help="Records per batch at most.")
@click.option("--batch-bytes", type=java_int(1), default=16384, show_default=True,
              help="Bytes of records per batch, about (a producer's batch.size).")
@click.option("--codec", type=click.Choice(codecs.CODEC_NAMES), default="none", show_default=True,
              help="Compression of each batch (compression.type).")
@click.option("--magic", type=click.IntRange(0, 2), default=2, show_default=True,
              help="Message format: 2, or 0/1 for fixtures of old formats.")
@click.option("--timestamp-type", type=click.Choice(["CreateTime", "LogAppendTime"]),
              default="CreateTime", show_default=True,
              help="CreateTime: the line's timestamp (default: now); LogAppendTime: now, for "
              "every record (message.timestamp.type).")
@click.option("--segment-bytes", type=java_int(1), default=DEFAULT_SEGMENT_BYTES,
              show_default=True, help="Roll when the active segment would grow past this "
              "(segment.bytes).")
@click.option("--segment-ms", type=java_long(0), default=None, help="Roll when the active "
              "segment's records span more than this (record time, as the broker measures it).")
@click.option("--segment-index-bytes", type=java_int(12), default=DEFAULT_SEGMENT_INDEX_BYTES,
              show_default=True, help="Largest index file; roll when one is full "
              "(segment.index.bytes).")
@click.option("--index-interval-bytes", type=java_int(0), default=DEFAULT_INDEX_INTERVAL,
              show_default=True, help="Bytes of batches between two index entries "
              "(index.interval.bytes).")
@click.option("--flush-messages", type=java_long(1), default=None,
              help="fsync (and report) every N messages; by default once, at the end.")
@click.option("--producer-id", type=java_long(-1), default=-1,
              help="lines: write as this idempotent producer (default: none, -1).")
@click.option("--producer-epoch", type=java_short(-1), default=-1,
              help="lines: the producer's epoch (with --producer-id).")
@click.option("--base-sequence", type=java_int(-1), default=-1,
              help="lines: the first batch's first sequence (default: the producer's next).")
@click.option("--transactional", is_flag=True,
              help="lines: the batches are part of the producer's open transaction.")
@click.option("--ignore-unknown-fields", is_flag=True,
              help="jsonl: skip fields append does not know (by default a line with one is an "
              "error: \"val\" for \"value\" would write a null value).")
@click.option("--force", is_flag=True,
              help="Write to DIRECTORY even when its name is not a partition's (<topic>-<n>).")
@click.option("--leader-epoch", type=click.IntRange(0, 2 ** 31 - 1), default=None,
              help="The partition leader epoch of the batches (default: the higher of the "
              "latest epoch of leader-epoch-checkpoint and the epoch of the log's last batch, "
              "else 0; one below either is refused); a newer one is added to the checkpoint.")
@click.option("--max-message-bytes", type=java_int(62), default=DEFAULT_MAX_MESSAGE_BYTES,
              show_default=True, help="The largest record batch the broker accepts "
              "(max.message.bytes): a record that cannot fit in one stops the run at its line.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="The report on stdout: text, or JSON lines.")
def append(directory: str, input_format: str, key: Optional[str], batch_records: int,
           batch_bytes: int, codec: str, magic: int, timestamp_type: str, segment_bytes: int,
           segment_ms: Optional[int], segment_index_bytes: int, index_interval_bytes: int,
           flush_messages: Optional[int], producer_id: int, producer_epoch: int,
           base_sequence: int, transactional: bool, ignore_unknown_fields: bool, force: bool,
           leader_epoch: Optional[int], max_message_bytes: int, fmt: str) -> None:
    """Append records from stdin to the partition DIRECTORY (created when absent).

    Offsets continue from the partition's next offset; batches are written to the active
    segment, rolling as a broker would, with the indexes, producer snapshots, transaction index
    and leader-epoch-checkpoint kept as the broker keeps them; producers' epochs and sequences
    are checked as the broker checks a client's. Refuses
    while a broker holds the log directory. Exit status: 0 written, 2 bad input or errors (a bad
    line stops the run: batches before it stay, nothing of its own batch is written).
    """
    try:
        settings = AppendSettings(
            batch_records, batch_bytes, codec, magic, timestamp_type, flush_messages, producer_id,
            producer_epoch, base_sequence, transactional,
            RollPolicy(segment_bytes, segment_ms, segment_index_bytes, index_interval_bytes),
            leader_epoch, max_message_bytes)
    except UsageError as e:
        raise click.UsageError(str(e)) from None
    if not force and topic_partition(directory) == (None, None):
        fail(UsageError("%s: not a partition directory's name (<topic>-<partition>, e.g. "
                        "orders-0): a log directory holds partitions, not segments; --force to "
                        "write there anyway" % printable_name(directory)))
    # each line written as it is, at once: a flush's report as the flush is done
    out = Output(fmt, verbatim=True)
    records = InputLines(sys.stdin.buffer, input_format,
                         key.encode("utf-8") if key is not None else None,
                         ignore_unknown_fields, max_message_bytes)
    try:
        result = append_records(directory, records, settings, _report_flush(out))
    except (KafkalogError, OSError) as e:
        fail(e, directory)
    if result.stopped is not None:
        click.echo("kafkalog: " + _stopped_text(result, result.stopped), err=True)
    _report_appended(out, result)
    sys.exit(exit_code(result.stopped) if result.stopped is not None else 0)


@click.command(short_help="Seal the active segment; start a new one at the next offset.")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--if-bytes", type=java_long(0), default=None,
              help="Roll only when the active segment holds at least this many bytes.")
@click.option("--if-older", type=java_long(0), default=None, metavar="MS",
              help="Roll only when the active segment's first batch is older than this.")
@click.option("--dry-run", is_flag=True,
              help="Say what would be rolled; change nothing (no lock taken, no file written).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="The report on stdout: text, or one JSON line.")
def roll(directory: str, if_bytes: Optional[int], if_older: Optional[int], dry_run: bool,
         fmt: str) -> None:
    """Seal the active segment of partition DIRECTORY and start an empty one at the next offset.

    Does nothing (exit 0) when the active segment is empty or a condition is not met. Exit
    status: 0 rolled, not rolled, or (--dry-run) either planned; 2 usage error, unreadable
    input, a damaged active segment (recover first) or a log directory a broker holds.
    """
    try:
        result = (plan_roll if dry_run else roll_partition)(directory, if_bytes, if_older)
    except (KafkalogError, OSError) as e:
        fail(e, directory)
    topic, partition = topic_partition(directory)
    if result.sealed is None:
        text = "%s: %s rolled: %s" % (directory, "would not be" if dry_run else "not",
                                       result.reason)
    elif dry_run:
        text = ("%s: %s would be sealed; new active segment %s would be created"
                % (directory, result.sealed.name, result.active.name))
    else:
        text = ("%s: sealed %s; new active segment %s"
                % (directory, result.sealed.name, result.active.name))
    Output(fmt).summary(
        "roll", text, topic=topic, partition=partition, directory=directory,
        rolled=result.sealed is not None,
        sealed=None if result.sealed is None else result.sealed.name,
        active=result.active.name, active_base_offset=result.active.base_offset,
        reason=result.reason, dry_run=dry_run)
