"""`kafkalog append` and `kafkalog roll`: write a partition as a broker would."""

import base64
import binascii
import json
import os
import sys

import click

from ..format import codecs
from ..format.encode import Record, encode_legacy, encode_v2_batch
from ..format.records import CREATE_TIME, LOG_APPEND_TIME
from ..log.append import (DEFAULT_SEGMENT_BYTES, DEFAULT_SEGMENT_INDEX_BYTES, AppendError,
                          PartitionWriter, RollPolicy, now_ms)
from ..log.indexbuild import DEFAULT_INDEX_INTERVAL
from ..log.lock import LockHeld, LogDirLock

EXIT_OK, EXIT_USAGE = 0, 2
CODECS = {name: i for i, name in enumerate(codecs.CODEC_NAMES)}


class InputError(ValueError):
    pass


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


class _Appender:
    """Groups records into batches, encodes and writes them, flushes and reports."""

    def __init__(self, writer, opts, out):
        self.writer = writer
        self.opts = opts
        self.out = out
        self.pending = []
        self.pending_bytes = 0
        self.first = None
        self.count = 0
        self.unflushed = 0

    def add(self, record):
        size = record.size_estimate()
        if self.pending and self.pending_bytes + size > self.opts["batch_bytes"]:
            self.write_pending()  # this record would overflow the batch: it opens the next
        self.pending.append(record)
        self.pending_bytes += size
        if (len(self.pending) >= self.opts["batch_records"]
                or self.pending_bytes >= self.opts["batch_bytes"]):
            self.write_pending()  # full: written now, so that a bad line later cannot drop it

    def write_pending(self):
        if not self.pending:
            return
        o = self.opts
        base = self.writer.next_offset
        n = len(self.pending)
        append_time = now_ms() if o["timestamp_type"] == LOG_APPEND_TIME else None

        def max_ts(records):
            if o["magic"] == 0:
                return -1
            return append_time if append_time is not None else max(r.timestamp for r in records)

        if o["magic"] == 2:
            seq = o["base_sequence"]
            data = encode_v2_batch(self.pending, base, o["codec"], o["timestamp_type"], append_time,
                                   o["producer_id"], o["producer_epoch"], seq, o["transactional"])
            if seq >= 0:
                o["base_sequence"] = (seq + n) % (2 ** 31)
            entries = [(data, base + n - 1, max_ts(self.pending))]
        elif o["codec"] == codecs.NONE:
            # uncompressed legacy messages are entries of their own
            entries = [(encode_legacy([r], base + i, o["magic"], codecs.NONE, o["timestamp_type"],
                                      append_time), base + i, max_ts([r]))
                       for i, r in enumerate(self.pending)]
        else:
            entries = [(encode_legacy(self.pending, base, o["magic"], o["codec"],
                                      o["timestamp_type"], append_time),
                        base + n - 1, max_ts(self.pending))]
        for data, last_offset, ts in entries:
            self.writer.append(data, last_offset, ts)
        if self.first is None:
            self.first = base
        self.count += n
        self.unflushed += n
        self.pending = []
        self.pending_bytes = 0
        if o["flush_messages"] and self.unflushed >= o["flush_messages"]:
            self.flush()

    def flush(self):
        self.writer.flush()
        if self.unflushed:
            self.report({"type": "flushed", "last_offset": self.writer.next_offset - 1},
                        "flushed through offset %d" % (self.writer.next_offset - 1))
        self.unflushed = 0

    def report(self, obj, text):
        self.out.write((json.dumps(obj) if self.opts["format"] == "json" else text) + "\n")
        self.out.flush()


def _log_dir(directory):
    return os.path.dirname(os.path.abspath(directory))


@click.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--input-format", type=click.Choice(["lines", "jsonl"]), default="lines",
              show_default=True, help="lines: one value per line; jsonl: one JSON object per line.")
@click.option("--key", default=None, help="lines: the key of every record (default: null).")
@click.option("--batch-records", type=click.IntRange(1), default=1000000, help="Records per batch at most.")
@click.option("--batch-bytes", type=click.IntRange(1), default=16384, show_default=True,
              help="Bytes of records per batch, about (a producer's batch.size).")
@click.option("--codec", type=click.Choice(codecs.CODEC_NAMES), default="none", show_default=True)
@click.option("--magic", type=click.IntRange(0, 2), default=2, show_default=True,
              help="Message format: 2, or 0/1 for fixtures of old formats.")
@click.option("--timestamp-type", type=click.Choice(["CreateTime", "LogAppendTime"]),
              default="CreateTime", show_default=True)
@click.option("--segment-bytes", type=click.IntRange(1), default=DEFAULT_SEGMENT_BYTES, show_default=True)
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
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def append(directory, input_format, key, batch_records, batch_bytes, codec, magic, timestamp_type,
           segment_bytes, segment_ms, segment_index_bytes, index_interval_bytes, flush_messages,
           producer_id, producer_epoch, base_sequence, transactional, fmt):
    """Append records from stdin to the partition DIRECTORY (created when absent).

    Offsets continue from the partition's next offset; batches are written to the active
    segment, rolling as a broker would, with the indexes kept as the broker keeps them. Refuses
    while a broker holds the log directory. Exit status: 0 written, 2 bad input or errors (a bad
    line stops the run: batches before it stay, nothing of its own batch is written).
    """
    if magic < 2 and (codec == "zstd" or transactional or producer_id >= 0):
        raise click.UsageError("zstd, producer ids and transactions need --magic 2")
    if transactional and producer_id < 0:
        raise click.UsageError("--transactional needs --producer-id")
    if producer_id >= 0:
        # an idempotent producer's batches carry an epoch and sequences: a new producer's by default
        producer_epoch = 0 if producer_epoch < 0 else producer_epoch
        base_sequence = 0 if base_sequence < 0 else base_sequence
    elif producer_epoch >= 0 or base_sequence >= 0:
        raise click.UsageError("--producer-epoch and --base-sequence need --producer-id")
    opts = {"batch_records": batch_records, "batch_bytes": batch_bytes, "codec": CODECS[codec],
            "magic": magic, "timestamp_type": LOG_APPEND_TIME if timestamp_type == "LogAppendTime"
            else CREATE_TIME, "flush_messages": flush_messages, "producer_id": producer_id,
            "producer_epoch": producer_epoch, "base_sequence": base_sequence,
            "transactional": transactional, "format": fmt}
    key_bytes = key.encode("utf-8") if key is not None else None
    policy = RollPolicy(segment_bytes, segment_ms, segment_index_bytes, index_interval_bytes)
    status = EXIT_OK
    try:
        os.makedirs(_log_dir(directory), exist_ok=True)  # the partition's log directory too
        with LogDirLock(_log_dir(directory)), PartitionWriter(directory, policy) as writer:
            app = _Appender(writer, opts, sys.stdout)
            for number, line in enumerate(sys.stdin.buffer, start=1):
                try:
                    if input_format == "lines":
                        rec = Record(key_bytes, _strip_newline(line), now_ms())
                    else:
                        if not line.strip():
                            continue
                        rec = parse_jsonl(line)
                except InputError as e:
                    dropped = len(app.pending)
                    app.pending = []
                    app.flush()
                    click.echo("kafkalog: line %d: %s; nothing of its batch was written (%d earlier "
                               "records dropped with it); the partition now ends at offset %d"
                               % (number, e, dropped, writer.next_offset - 1), err=True)
                    status = EXIT_USAGE
                    break
                app.add(rec)
            else:
                app.write_pending()
                app.flush()
            if app.count:
                app.report({"type": "appended", "directory": directory, "records": app.count,
                            "first_offset": app.first, "last_offset": app.first + app.count - 1},
                           "appended %d records at offsets %d-%d to %s"
                           % (app.count, app.first, app.first + app.count - 1, directory))
            else:
                app.report({"type": "appended", "directory": directory, "records": 0},
                           "appended 0 records to %s" % directory)
    except (LockHeld, AppendError) as e:
        click.echo("kafkalog: %s" % (e.strerror if isinstance(e, LockHeld) else e), err=True)
        status = EXIT_USAGE
    except OSError as e:
        click.echo("kafkalog: %s: %s" % (e.filename or directory, e.strerror or e), err=True)
        status = EXIT_USAGE
    sys.exit(status)


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
        with LogDirLock(_log_dir(directory)), PartitionWriter(directory) as writer:
            a = writer.active
            reason = None
            if a.size == 0:
                reason = "the active segment is empty"
            elif if_bytes is not None and a.size < if_bytes:
                reason = "the active segment holds %d bytes, fewer than %d" % (a.size, if_bytes)
            elif if_older is not None and (a.first_batch_ts is None
                                           or a.first_batch_ts >= now_ms() - if_older):
                reason = "the active segment's first batch is not older than %d ms" % if_older
            if reason is not None:
                click.echo("%s: not rolled: %s" % (directory, reason))
            else:
                old = a.log_path
                writer.roll()
                click.echo("%s: sealed %s; new active segment %s"
                           % (directory, os.path.basename(old),
                              os.path.basename(writer.active.log_path)))
    except (LockHeld, AppendError) as e:
        click.echo("kafkalog: %s" % (e.strerror if isinstance(e, LockHeld) else e), err=True)
        sys.exit(EXIT_USAGE)
    except OSError as e:
        click.echo("kafkalog: %s: %s" % (e.filename or directory, e.strerror or e), err=True)
        sys.exit(EXIT_USAGE)
