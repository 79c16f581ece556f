"""`kafkalog append` and `kafkalog roll`: write a partition as a broker would.

The commands parse options and stdin and render what the library (log/produce.py
``append_records``, log/append.py ``roll_partition``) reports. Turning stdin lines into records
stays here: the lines and JSON-lines formats are this command's input; the library takes
Records, as a Python caller builds them.
"""

from __future__ import annotations

import base64
import binascii
import json
import sys

import click

from ..errors import KafkalogError, UsageError
from ..format import codecs
from ..format.encode import Record
from ..log.append import (DEFAULT_SEGMENT_BYTES, DEFAULT_SEGMENT_INDEX_BYTES, RollPolicy,
                          now_ms, roll_partition)
from ..log.indexbuild import DEFAULT_INDEX_INTERVAL
from ..log.produce import AppendResult, AppendSettings, InputError, append_records
from .errors import error_text, exit_code, fail


def _bytes(value, what):
    """A JSON value as bytes: a string as UTF-8, {"base64": ".."} decoded, null as None."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and set(value) == {"base64"} and isinstance(value["base64"], str):
        try:
            return base64.b64decode(value["base64"], validate=True)
        except (binascii.Error, ValueError):
            raise InputError("%s: invalid base64" % what) from None
    raise InputError("%s must be a string, {\"base64\": ...} or null" % what)


def _headers(value):
    if value is None:
        return ()
    pairs = value.items() if isinstance(value, dict) else value
    if not isinstance(pairs, (list, type({}.items()))):
        raise InputError("headers must be an object or a list of [key, value] pairs")
    out = []
    for pair in pairs:
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and isinstance(pair[0], str)):
            raise InputError("each header must be a [key, value] pair with a string key")
        out.append((pair[0], _bytes(pair[1], "header %r" % pair[0])))
    return tuple(out)


def parse_jsonl(line):
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise InputError("not JSON (%s)" % e) from None
    if not isinstance(obj, dict):
        raise InputError("expected a JSON object")
    ts = obj.get("timestamp")
    if ts is None:
        ts = now_ms()
    elif not isinstance(ts, int) or isinstance(ts, bool) or not -2 ** 63 <= ts < 2 ** 63:
        raise InputError("timestamp must be an integer number of ms within 64 bits")
    return Record(_bytes(obj.get("key"), "key"), _bytes(obj.get("value"), "value"), ts,
                  _headers(obj.get("headers")))


def _strip_newline(line):
    if line.endswith(b"\r\n"):
        return line[:-2]
    if line.endswith(b"\n"):
        return line[:-1]
    return line


def read_records(lines, input_format, key):
    """The records of stdin ``lines``: each line a value (``lines``, with ``key``), or a JSON
    object (``jsonl``, blank lines skipped). A line that makes no record raises InputError
    with its line number, when the library asks for it."""
    for number, line in enumerate(lines, start=1):
        if input_format == "lines":
            yield Record(key, _strip_newline(line), now_ms())
            continue
        if not line.strip():
            continue
        try:
            record = parse_jsonl(line)
        except InputError as e:
            e.line = number
            raise
        yield record


def _print(fmt, obj, text):
    sys.stdout.write((json.dumps(obj) if fmt == "json" else text) + "\n")
    sys.stdout.flush()


def _report_flush(fmt):
    def report(last_offset):
        _print(fmt, {"type": "flushed", "last_offset": last_offset},
               "flushed through offset %d" % last_offset)
    return report


def _report_appended(fmt, result: AppendResult):
    if result.records:
        _print(fmt, {"type": "appended", "directory": result.directory, "records": result.records,
                     "first_offset": result.first_offset, "last_offset": result.last_offset},
               "appended %d records at offsets %d-%d to %s"
               % (result.records, result.first_offset, result.last_offset, result.directory))
    else:
        _print(fmt, {"type": "appended", "directory": result.directory, "records": 0},
               "appended 0 records to %s" % result.directory)


def _stopped_text(result: AppendResult):
    """Where the input stopped and what that left, for stderr."""
    return ("line %d: %s; nothing of its batch was written (%d earlier records dropped with it); "
            "the partition now ends at offset %d"
            % (result.stopped.line, error_text(result.stopped), result.dropped,
               result.log_end_offset - 1))


@click.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--input-format", type=click.Choice(["lines", "jsonl"]), default="lines",
              show_default=True, help="lines: one value per line; jsonl: one JSON object per line.")
@click.option("--key", default=None, help="lines: the key of every record (default: null).")
@click.option("--batch-records", type=click.IntRange(1), default=1000000,
              help="Records per batch at most.")
@click.option("--batch-bytes", type=click.IntRange(1), default=16384, show_default=True,
              help="Bytes of records per batch, about (a producer's batch.size).")
@click.option("--codec", type=click.Choice(codecs.CODEC_NAMES), default="none", show_default=True)
@click.option("--magic", type=click.IntRange(0, 2), default=2, show_default=True,
              help="Message format: 2, or 0/1 for fixtures of old formats.")
@click.option("--timestamp-type", type=click.Choice(["CreateTime", "LogAppendTime"]),
              default="CreateTime", show_default=True)
@click.option("--segment-bytes", type=click.IntRange(1), default=DEFAULT_SEGMENT_BYTES,
              show_default=True)
@click.option("--segment-ms", type=click.IntRange(0), default=None, help="Roll when the active "
              "segment's records span more than this (record time, as the broker measures it).")
@click.option("--segment-index-bytes", type=click.IntRange(12), default=DEFAULT_SEGMENT_INDEX_BYTES,
              show_default=True)
@click.option("--index-interval-bytes", type=click.IntRange(0), default=DEFAULT_INDEX_INTERVAL,
              show_default=True)
@click.option("--flush-messages", type=click.IntRange(1), default=None,
              help="fsync (and report) every N messages; by default once, at the end.")
@click.option("--producer-id", type=int, default=-1)
@click.option("--producer-epoch", type=int, default=-1)
@click.option("--base-sequence", type=int, default=-1)
@click.option("--transactional", is_flag=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def append(directory, input_format, key, batch_records, batch_bytes, codec, magic, timestamp_type,
           segment_bytes, segment_ms, segment_index_bytes, index_interval_bytes, flush_messages,
           producer_id, producer_epoch, base_sequence, transactional, fmt):
    """Append records from stdin to the partition DIRECTORY (created when absent).

    Offsets continue from the partition's next offset; batches are written to the active
    segment, rolling as a broker would, with the indexes kept as the broker keeps them. Refuses
    while a broker holds the log directory. Exit status: 0 written, 2 bad input or errors (a bad
    line stops the run: batches before it stay, nothing of its own batch is written).
    """
    try:
        settings = AppendSettings(
            batch_records, batch_bytes, codec, magic, timestamp_type, flush_messages, producer_id,
            producer_epoch, base_sequence, transactional,
            RollPolicy(segment_bytes, segment_ms, segment_index_bytes, index_interval_bytes))
    except UsageError as e:
        raise click.UsageError(str(e)) from None
    records = read_records(sys.stdin.buffer, input_format,
                           key.encode("utf-8") if key is not None else None)
    try:
        result = append_records(directory, records, settings, _report_flush(fmt))
    except (KafkalogError, OSError) as e:
        fail(e, directory)
    if result.stopped is not None:
        click.echo("kafkalog: " + _stopped_text(result), err=True)
    _report_appended(fmt, result)
    sys.exit(exit_code(result.stopped) if result.stopped is not None else 0)


@click.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--if-bytes", type=click.IntRange(0), default=None,
              help="Roll only when the active segment holds at least this many bytes.")
@click.option("--if-older", type=click.IntRange(0), default=None, metavar="MS",
              help="Roll only when the active segment's first batch is older than this.")
def roll(directory, if_bytes, if_older):
    """Seal the active segment of partition DIRECTORY and start an empty one at the next offset.

    Does nothing (exit 0) when the active segment is empty or a condition is not met.
    """
    try:
        result = roll_partition(directory, if_bytes, if_older)
    except (KafkalogError, OSError) as e:
        fail(e, directory)
    if result.sealed is None:
        click.echo("%s: not rolled: %s" % (directory, result.reason))
    else:
        click.echo("%s: sealed %s; new active segment %s"
                   % (directory, result.sealed.name, result.active.name))
