"""`kafkalog dump`: print segment files like kafka-dump-log.sh, or as messages or JSON Lines."""

import os
import sys

import click

from ..log.files import NoSegmentsError, expand, os_error_text, printable_name
from ..log import names
from ..log.names import base_offset_from_name
from ..log.seek import Seek, next_bases
from ..log.segment import (DEFAULT_MAX_MESSAGE_SIZE, MAX_RELATIVE_OFFSET, RELEASE_STEP, LogFile,
                           order_problem, reach_problem)
from ..format.errors import CorruptRecordError, LimitExceededError
from ..format.records import Batch
from . import decoders
from .dump_aux import IndexOptions, dump_aux
from .render import WRITERS, DumpOptions

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
KAFKA_MAX_BYTES = 2147483647
KAFKA_FORMATS = ("3.x", "4.0", "4.1", "4.2", "4.3")
# Kafka's decoder classes, accepted for --key-decoder-class/--value-decoder-class.
_DECODER_CLASSES = {"StringDecoder": "string", "IntegerDecoder": "int", "LongDecoder": "long",
                    "DefaultDecoder": "hex"}


def _decoder_from_class(name):
    if name is None:
        return None
    short = name.rsplit(".", 1)[-1]
    if short not in _DECODER_CLASSES:
        raise click.BadParameter("unsupported decoder class %r (known: %s)"
                                 % (name, ", ".join(sorted(_DECODER_CLASSES))))
    return _DECODER_CLASSES[short]


def _targets(paths, files):
    targets = []
    for spec in files:
        targets.extend(p for p in spec.split(",") if p)
    targets.extend(paths)
    return targets


def dump_file(path, writer, opts, max_bytes, max_message_size, base_offset, resync, seek=None):
    """Dump one segment file through ``writer``; return the exit status it earns.

    With ``seek``, start where the indexes say and print only the batches holding wanted
    records (and, deep, only those records)."""
    status = EXIT_OK
    limited = max_bytes < KAFKA_MAX_BYTES
    with LogFile(path, max_message_size) as log:
        start = 0
        if seek is not None:
            start, note = seek.start_position(log)
            if note is not None:
                writer.warn(note)
        base = base_offset_from_name(path) if base_offset is None else base_offset
        if base is None:
            base = log.first_base_offset()
            source = "from the first batch"
            if base is None:
                base, source = 0, "as no batch holds one"
            writer.warn("%s: the file name holds no base offset; using %d %s (--base-offset sets it)"
                        % (printable_name(path), base, source))
        writer.begin_file(printable_name(path), base, log.buf)
        end = min(log.size, max_bytes)
        fast = writer.fast_path() if seek is None else None
        pos = min(start, end)
        prev_last = None  # the highest last offset of the valid batches so far
        beyond_reach = False
        while pos < end:
            if fast is not None:
                # From base - 1 the fast run also stops at a batch below the segment's base.
                start_last = base - 1 if prev_last is None else prev_last
                pos, prev_last = fast(log, pos, end, RELEASE_STEP, start_last)
                log.release_before(pos)
                if prev_last - base > MAX_RELATIVE_OFFSET and not beyond_reach:
                    beyond_reach = True
                    writer.warn("%s: batches before position %d reach offset %d, which does not "
                                "fit a segment based at %d" % (writer.path, pos, prev_last, base))
                    status = EXIT_INVALID
            for item in log.entries(pos, end, resync):
                pos = item.position + item.size
                if isinstance(item, Batch) and item.is_valid:
                    # Offsets going back, or out of the segment's reach: the broker's recovery
                    # stops the segment there (its index cannot take the entry), so recover
                    # cuts it: invalid data.
                    problem = (reach_problem(item.last_offset, base)
                               or order_problem(item.last_offset, prev_last))
                    if problem is None:
                        prev_last = item.last_offset
                    else:
                        writer.warn("%s: the batch at position %d: %s"
                                    % (writer.path, item.position, problem))
                        status = EXIT_INVALID
                if isinstance(item, Batch):
                    shown, past_end, error = _dump_batch(log, item, writer, opts.deep, seek)
                    if past_end:
                        pos = end
                        break
                    if not shown:
                        continue
                    if isinstance(error, LimitExceededError):
                        # A batch whose records inflate past the bound is valid (its CRC holds;
                        # the broker does not look inside): said, not counted as invalid.
                        writer.records_not_decoded(item, log.batch_limit)
                        error = None
                    if error is None and not opts.deep:
                        error = item.codec_problem
                    if error is not None:
                        writer.record_error(item, str(error))
                        status = EXIT_INVALID
                    elif not item.is_valid:
                        status = EXIT_INVALID
                    if fast is not None:
                        break  # back to the fast path
                else:
                    # A batch cut by --max-bytes is not an error, as in Kafka.
                    counted = not (limited and item.at_end and item.truncated)
                    writer.invalid(item, counted)
                    if counted:
                        status = EXIT_INVALID
            else:
                break
        writer.end_file()
    return status


def _dump_batch(log, batch, writer, deep, seek):
    """Write ``batch`` through ``writer``, its records (when ``deep``) a chunk at a time as they
    are decoded, so that a batch of millions of records never sits in memory whole.

    Returns (shown, past_end, error): whether the batch was written (with ``seek``, only a batch
    holding wanted records is, or one whose records cannot be read), whether ``seek`` says no
    later batch can be wanted, and the CorruptRecordError met in its records (the records
    before the damage are written first) or None.
    """
    if not deep and seek is None:
        writer.batch(batch, None)
        return True, False, None
    shown = False
    checked_end = seek is None
    error = None
    try:
        for recs in log.iter_records(batch):
            if not checked_end:
                checked_end = True
                if seek.past_end(batch, recs):
                    return False, True, None
            if seek is not None:
                wanted = seek.select(recs)
                if not wanted:
                    continue
                if len(wanted) != len(recs):
                    recs = recs.select(wanted)
            if shown:
                if deep:
                    writer.records(batch, recs)
                continue
            writer.batch(batch, recs if deep else None)
            shown = True
            _first_match(writer, seek)
    except CorruptRecordError as e:
        error = e
    if not checked_end and seek.past_end(batch, None):
        return False, True, None
    if not shown and (seek is None or error is not None):
        writer.batch(batch, None)
        shown = True
        _first_match(writer, seek)
    return shown, False, error


def _first_match(writer, seek):
    if seek is not None and not seek.shown:
        writer.flush()  # the first match at once: the rest may take a scan
        seek.shown = True


@click.command()
# readable=False: an unreadable path is one line of ours (exit 2), not click's usage error
@click.argument("paths", nargs=-1, type=click.Path(readable=False))
@click.option("--files", "files_arg", multiple=True, metavar="A,B,C",
              help="Comma-separated files to dump (as kafka-dump-log.sh takes them).")
@click.option("--print-data-log", is_flag=True, help="Print keys and payloads (implies --deep-iteration).")
@click.option("--deep-iteration", is_flag=True, help="Print a line per record under each batch.")
@click.option("--skip-record-metadata", is_flag=True, help="Leave the metadata out of record lines.")
@click.option("--max-bytes", type=click.IntRange(0), default=KAFKA_MAX_BYTES, show_default=True,
              help="Read only this many bytes of each log file.")
@click.option("--max-message-size", type=click.IntRange(1), default=DEFAULT_MAX_MESSAGE_SIZE,
              show_default=True, help="Largest record accepted; a batch may inflate to 16 times this.")
@click.option("--key-decoder", type=click.Choice(decoders.DECODER_NAMES), default=None,
              help="How to print keys (default string). Implies --print-data-log.")
@click.option("--value-decoder", type=click.Choice(decoders.DECODER_NAMES), default=None,
              help="How to print payloads and header values (default string). Implies --print-data-log.")
@click.option("--key-decoder-class", default=None, hidden=True)
@click.option("--value-decoder-class", default=None, hidden=True)
@click.option("--base-offset", type=click.IntRange(0), default=None,
              help="Base offset of a segment whose file name is not its offset.")
@click.option("--timestamps", type=click.Choice(["ms", "iso"]), default="ms", show_default=True,
              help="iso adds a readable UTC time beside each epoch value (text formats).")
@click.option("--format", "fmt", type=click.Choice(sorted(WRITERS)), default="kafka",
              show_default=True, help="kafka: kafka-dump-log.sh's lines; messages: one line per "
              "message; json: JSON Lines.")
@click.option("--kafka-format", type=click.Choice(KAFKA_FORMATS), default="4.2", show_default=True,
              help="Which kafka-dump-log.sh to match: the Scala tool (3.x-4.2) or 4.3's Java rewrite.")
@click.option("--skip-invalid", is_flag=True,
              help="After invalid bytes, go on at the next position where a valid batch starts.")
@click.option("--verify-index-only", is_flag=True,
              help="Index files: check the entries against the log, print no entry lines.")
@click.option("--index-sanity-check", is_flag=True,
              help="Index files: run only the broker's start-up sanity check.")
@click.option("--from-offset", type=click.IntRange(0), default=None,
              help="Only records at this offset or later (found through the offset index).")
@click.option("--to-offset", type=click.IntRange(0), default=None, help="Only records at this offset or earlier.")
@click.option("--from-timestamp", type=int, default=None, metavar="MS",
              help="Start at the first record whose timestamp is at least MS (through the time index).")
@click.option("--to-timestamp", type=int, default=None, metavar="MS",
              help="Only records whose timestamp is at most MS.")
def dump(paths, files_arg, print_data_log, deep_iteration, skip_record_metadata, max_bytes,
         max_message_size, key_decoder, value_decoder, key_decoder_class, value_decoder_class,
         base_offset, timestamps, fmt, kafka_format, skip_invalid, verify_index_only,
         index_sanity_check, from_offset, to_offset, from_timestamp, to_timestamp):
    """Dump Kafka log files: segments (.log, and .log.deleted/.cleaned/.swap), offset and time
    indexes, transaction indexes, producer snapshots, and the checkpoint files.

    PATHS are files, partition directories (every file in them, segment by segment in offset
    order) or log directories (their checkpoint files, then every partition). Exit status: 0 all
    valid, 1 invalid data found, 2 usage error or unreadable input.
    """
    targets = _targets(paths, files_arg)
    if not targets:
        raise click.UsageError("no files given: name segment files or directories, or use --files")
    for low, high, name in ((from_offset, to_offset, "offset"),
                            (from_timestamp, to_timestamp, "timestamp")):
        if low is not None and high is not None and low > high:
            raise click.UsageError("--from-%s %d is above --to-%s %d: no record can match"
                                   % (name, low, name, high))
    key_decoder = key_decoder or _decoder_from_class(key_decoder_class)
    value_decoder = value_decoder or _decoder_from_class(value_decoder_class)
    print_data = print_data_log or key_decoder is not None or value_decoder is not None
    opts = DumpOptions(deep=deep_iteration or fmt == "messages", print_data=print_data,
                       skip_metadata=skip_record_metadata, key_decoder=key_decoder or "string",
                       value_decoder=value_decoder or "string", iso=timestamps == "iso",
                       kafka_format=kafka_format)
    writer = WRITERS[fmt](sys.stdout.buffer, sys.stderr, opts)
    iopts = IndexOptions(verify_only=verify_index_only, sanity_only=index_sanity_check,
                         max_message_size=max_message_size)
    bounds = None
    if (from_offset, to_offset, from_timestamp, to_timestamp) != (None,) * 4:
        bounds = Seek(from_offset, to_offset, from_timestamp, to_timestamp)
    status = EXIT_OK
    try:
        for target in targets:
            try:
                found = expand(target)
            except (NoSegmentsError, OSError) as e:
                writer.warn(str(e) if isinstance(e, NoSegmentsError) else _os_error(target, e))
                status = EXIT_USAGE
                continue
            if bounds is not None:
                # Seeking reads the logs only, and of those only the segments the bounds reach.
                found = [f for f in found if f.kind == names.LOG or f.error is not None]
                following = next_bases([f.path for f in found if f.error is None])
                found = [f for f in found if f.error is not None or bounds.wants_segment(
                    base_offset_from_name(f.path), following.get(f.path))]
            seek, seek_dir = None, None
            for f in found:
                path, kind = f.path, f.kind
                if f.error is not None:
                    # a partition directory that cannot be read: named, the others go on
                    writer.warn(_os_error(path, f.error))
                    status = EXIT_USAGE
                    continue
                if bounds is not None and os.path.dirname(path) != seek_dir:
                    seek, seek_dir = bounds.fresh(), os.path.dirname(path)
                if kind is None:
                    if not f.explicit:
                        writer.ignored(printable_name(path))
                    else:
                        writer.warn("%s: unknown file kind: dump reads segments (*.log and their "
                                    ".deleted/.cleaned/.swap names), *.index, *.timeindex, "
                                    "*.txnindex, *.snapshot and checkpoint files"
                                    % printable_name(path))
                        status = EXIT_USAGE
                    continue
                try:
                    if kind == names.LOG:
                        result = dump_file(path, writer, opts, max_bytes, max_message_size,
                                           base_offset, skip_invalid, seek)
                    else:
                        result = dump_aux(kind, path, writer, iopts)
                    status = max(status, result)
                except OSError as e:
                    writer.warn(_os_error(path, e))
                    status = EXIT_USAGE
    finally:
        writer.finish()
    if writer.found_invalid:
        status = max(status, EXIT_INVALID)
    sys.exit(status)


def _os_error(path, e):
    """One line for a file or directory that cannot be read: its name, printable, and why."""
    name = e.filename if isinstance(e, OSError) and e.filename else path
    return os_error_text(name, e)
