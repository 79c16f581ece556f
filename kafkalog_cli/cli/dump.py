"""`kafkalog dump`: print segment files like kafka-dump-log.sh, or as messages or JSON Lines."""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING

import click

from ..errors import EXIT_INVALID, EXIT_OK, EXIT_USAGE, UsageError
from ..log import names
from ..log.files import NoSegmentsError, os_error_text, printable_name
from ..log.read import BatchRead, SegmentReader, files_to_read
from ..log.seek import Seek
from ..log.segment import DEFAULT_MAX_MESSAGE_SIZE, LogFile
from . import decoders
from .dump_aux import IndexOptions, dump_aux
from .errors import fail
from .render import COORDINATOR_JSON, DumpOptions, kafka_version
from .render_kafka import KafkaWriter
from .._lazy import lazy_module
from .numbers import java_int, java_long
from .times import parse_timestamp

if TYPE_CHECKING:
    from typing import (Any, Dict, Iterator, List, NoReturn, Optional, Sequence, Tuple, Type,
                        TypedDict)

    from ..log.files import Found
    from ..log.read import Event, FastRecordsRun, FastRun
    from .parsers import Parser
    from .render import Writer

    class _Reading(TypedDict):
        """The SegmentReader options a dump reads every segment with."""

        records: bool
        max_bytes: Optional[int]
        resync: bool
        fast: Optional[FastRun]
        fast_records: Optional[FastRecordsRun]

verify = lazy_module("kafkalog_cli.log.verify")  # its notes, read when a file vanishes

KAFKA_MAX_BYTES = 2147483647
KAFKA_FORMATS = ("3.x", "4.0", "4.1", "4.2", "4.3", "4.4")
# Kafka's decoder classes, accepted for --key-decoder-class/--value-decoder-class.
_DECODER_CLASSES = {"StringDecoder": "string", "IntegerDecoder": "int", "LongDecoder": "long",
                    "DefaultDecoder": "hex"}


def _decoder_from_class(name: Optional[str]) -> Optional[str]:
    if name is None:
        return None
    short = name.rsplit(".", 1)[-1]
    if short not in _DECODER_CLASSES:
        raise click.BadParameter("unsupported decoder class %r (known: %s)"
                                 % (name, ", ".join(sorted(_DECODER_CLASSES))))
    return _DECODER_CLASSES[short]


def _schema_decoders(key_decoder: Optional[decoders.Decoder],
                     value_decoder: Optional[decoders.Decoder],
                     key_schema: Optional[str], value_schema: Optional[str],
                     schema_dir: Optional[str]) -> List[Optional[decoders.Decoder]]:
    """The key and value decoders once the Schema Registry options are applied: --key-schema
    and --value-schema imply the confluent decoder on their side, --schema-dir needs it on one
    side; a schema that cannot be used ends the run (exit 2) before anything is dumped."""
    sides: List[Optional[decoders.Decoder]] = []
    for side, decoder, schema in (("key", key_decoder, key_schema),
                                  ("value", value_decoder, value_schema)):
        if schema is not None and decoder not in (None, "confluent"):
            raise click.UsageError("--%s-schema is for --%s-decoder confluent, not %s"
                                   % (side, side, decoder))
        sides.append("confluent" if schema is not None else decoder)
    if schema_dir is not None and "confluent" not in sides:
        raise click.UsageError("--schema-dir is for --key-decoder or --value-decoder confluent")
    if (key_schema, value_schema, schema_dir) == (None, None, None):
        return sides
    try:
        dir_schemas = None if schema_dir is None else decoders.load_schema_dir(schema_dir)
        return [decoders.confluent_decoder(schema, schema_dir, dir_schemas)
                if decoder == "confluent" else decoder
                for decoder, schema in zip(sides, (key_schema, value_schema))]
    except UsageError as e:
        fail(e)


def _timestamp_option(ctx: click.Context, param: click.Parameter,
                      value: Optional[str]) -> Optional[_Timestamp]:
    """--from-timestamp/--to-timestamp: epoch ms or ISO 8601; a bad value is one line, exit 2."""
    if value is None:
        return None
    try:
        return _Timestamp(parse_timestamp(value), value)
    except ValueError as e:
        fail(UsageError("--%s %r: %s" % (param.name.replace("_", "-"), value, e)))


class _Timestamp(int):
    """Epoch ms, remembering the text it was given as (for messages)."""

    text: str

    def __new__(cls, ms: int, text: str) -> _Timestamp:
        self = super().__new__(cls, ms)
        self.text = text.strip()
        return self

    def shown(self) -> str:
        return self.text if self.text == str(int(self)) else "%s (%d)" % (self.text, self)


def _range_check(from_offset: Optional[int], to_offset: Optional[int],
                 from_timestamp: Optional[_Timestamp],
                 to_timestamp: Optional[_Timestamp]) -> None:
    """An empty range is a mistake in the command line: one line, exit 2."""
    for low, high, name in ((from_offset, to_offset, "offset"),
                            (from_timestamp, to_timestamp, "timestamp")):
        if low is not None and high is not None and low > high:
            fail(UsageError("--from-%s %s is above --to-%s %s: no record can match"
                            % (name, _shown(low), name, _shown(high))))


def _shown(value: int) -> str:
    return value.shown() if isinstance(value, _Timestamp) else str(value)


def _targets(paths: Sequence[str], files: Sequence[str]) -> List[str]:
    targets: List[str] = []
    for spec in files:
        targets.extend(p for p in spec.split(",") if p)
    targets.extend(paths)
    return targets


# --format: its writer. kafka-dump-log's format is imported with the command: imported once
# the options are read, it left the heap to be trimmed and regrown by glibc at every chunk of a
# deep dump of compressed batches (measured: twice the page faults); the JSON writers, with
# their own imports, only when chosen.
WRITERS: Dict[str, Tuple[str, str]] = {"messages": ("render_json", "MessagesWriter"),
                                       "json": ("render_json", "JsonWriter"), "kafka": ("", "")}


# dump's text is kafka-dump-log.sh's: `--format text`, as every other command takes it, is kafka
_FORMAT_ALIASES = {"text": "kafka"}


def writer_class(fmt: str) -> "Type[Writer]":
    if fmt == "kafka":
        return KafkaWriter
    module, name = WRITERS[fmt]
    cls: Type[Writer] = getattr(importlib.import_module("." + module, __package__), name)
    return cls


@click.command(short_help="Print log, index and snapshot files as kafka-dump-log.sh.")
# readable=False: an unreadable path is one line of ours (exit 2), not click's usage error
@click.argument("paths", nargs=-1, type=click.Path(readable=False))
@click.option("--files", "files_arg", multiple=True, metavar="A,B,C",
              help="Comma-separated files to dump (as kafka-dump-log.sh takes them).")
@click.option("--print-data-log", is_flag=True,
              help="Print keys and payloads (implies --deep-iteration).")
@click.option("--deep-iteration", is_flag=True, help="Print a line per record under each batch.")
@click.option("--skip-record-metadata", is_flag=True,
              help="Leave the metadata out of record lines.")
@click.option("--max-bytes", type=java_int(0), default=KAFKA_MAX_BYTES, show_default=True,
              help="Read only this many bytes of each log file.")
@click.option("--max-message-size", type=java_int(1), default=DEFAULT_MAX_MESSAGE_SIZE,
              show_default=True,
              help="Largest record accepted; a batch may inflate to 16 times this.")
@click.option("--key-decoder", type=click.Choice(decoders.DECODER_NAMES), default=None,
              help="How to print keys (default string). Implies --print-data-log.")
@click.option("--value-decoder", type=click.Choice(decoders.DECODER_NAMES), default=None,
              help="How to print payloads and header values (default string). "
              "Implies --print-data-log.")
@click.option("--key-schema", type=click.Path(dir_okay=False, readable=False), default=None,
              metavar="FILE.avsc", help="Writer schema of the keys (implies --key-decoder "
              "confluent): .avsc Avro, decoded to JSON; .proto Protobuf; .json JSON Schema.")
@click.option("--value-schema", type=click.Path(dir_okay=False, readable=False), default=None,
              metavar="FILE.avsc", help="Writer schema of the payloads (implies --value-decoder "
              "confluent), as --key-schema.")
@click.option("--schema-dir", type=click.Path(file_okay=False, readable=False), default=None,
              metavar="DIR", help="Schemas by id for the confluent decoders: <id>.avsc, "
              "<id>.proto, <id>.json files.")
@click.option("--cluster-metadata-decoder", is_flag=True,
              help="Payloads as KRaft metadata records (__cluster_metadata): "
              "{\"type\":...,\"version\":...,\"data\":{...}}. Implies --print-data-log.")
@click.option("--offsets-decoder", is_flag=True,
              help="Keys and payloads as __consumer_offsets records (offset commits, group "
              "metadata, the new coordinator's records). Implies --print-data-log.")
@click.option("--transaction-log-decoder", is_flag=True,
              help="Keys and payloads as __transaction_state records. Implies --print-data-log.")
@click.option("--share-group-state-decoder", is_flag=True,
              help="Keys and payloads as __share_group_state records. Implies --print-data-log.")
@click.option("--remote-log-metadata-decoder", is_flag=True,
              help="Payloads as __remote_log_metadata records (tiered storage), printed as "
              "Kafka's RemoteLogSegmentMetadata... objects. Implies --print-data-log.")
@click.option("--key-decoder-class", default=None, metavar="CLASS",
              help="kafka-dump-log.sh's decoder classes: StringDecoder, IntegerDecoder, "
              "LongDecoder, DefaultDecoder (as --key-decoder string, int, long, hex).")
@click.option("--value-decoder-class", default=None, metavar="CLASS",
              help="As --key-decoder-class, for payloads.")
@click.option("--base-offset", type=java_long(0), default=None,
              help="Base offset of a segment whose file name is not its offset.")
@click.option("--timestamps", type=click.Choice(["ms", "iso"]), default="ms", show_default=True,
              help="iso adds a readable UTC time beside each epoch value (text formats).")
@click.option("--format", "fmt", type=click.Choice(sorted(WRITERS) + ["text"]), default="kafka",
              show_default=True, callback=lambda ctx, param, v: _FORMAT_ALIASES.get(v, v),
              help="kafka (or text, as the other commands name their text): kafka-dump-log.sh's "
              "lines; messages: one line per message; json: JSON Lines.")
@click.option("--kafka-format", type=click.Choice(KAFKA_FORMATS), default="4.2", show_default=True,
              help="Which kafka-dump-log.sh to match: Kafka 3.9, 4.0, 4.1, 4.2 (the Scala tool), "
              "4.3 or 4.4 (the Java rewrite).")
@click.option("--skip-invalid", is_flag=True,
              help="After invalid bytes, go on at the next position where a valid batch starts.")
@click.option("--verify-index-only", is_flag=True,
              help="Index files: check the entries against the log, print no entry lines.")
@click.option("--index-sanity-check", is_flag=True,
              help="Index files: run only the broker's start-up sanity check.")
@click.option("--from-offset", type=java_long(0), default=None,
              help="Only records at this offset or later (found through the offset index).")
@click.option("--to-offset", type=java_long(0), default=None,
              help="Only records at this offset or earlier.")
@click.option("--from-timestamp", default=None, metavar="TIME", callback=_timestamp_option,
              help="Start at the first record whose timestamp is at least TIME (through the time "
              "index). TIME: epoch ms, or ISO 8601 (2024-01-01, 2024-01-01T10:00:00Z, "
              "2024-01-01T12:00:00+02:00); a date or time without a zone is UTC.")
@click.option("--to-timestamp", default=None, metavar="TIME", callback=_timestamp_option,
              help="Only records whose timestamp is at most TIME (as --from-timestamp).")
def dump(paths: Tuple[str, ...], files_arg: Tuple[str, ...], print_data_log: bool,
         deep_iteration: bool, skip_record_metadata: bool, max_bytes: int, max_message_size: int,
         key_decoder: Optional[decoders.Decoder], value_decoder: Optional[decoders.Decoder],
         key_schema: Optional[str], value_schema: Optional[str], schema_dir: Optional[str],
         cluster_metadata_decoder: bool, offsets_decoder: bool, transaction_log_decoder: bool,
         share_group_state_decoder: bool, remote_log_metadata_decoder: bool,
         key_decoder_class: Optional[str], value_decoder_class: Optional[str],
         base_offset: Optional[int], timestamps: str, fmt: str, kafka_format: str,
         skip_invalid: bool, verify_index_only: bool, index_sanity_check: bool,
         from_offset: Optional[int], to_offset: Optional[int],
         from_timestamp: Optional[_Timestamp], to_timestamp: Optional[_Timestamp]) -> NoReturn:
    """Dump Kafka log files: segments (.log, and .log.deleted/.cleaned/.swap), offset and time
    indexes, transaction indexes, producer snapshots, KRaft snapshots (<offset>-<epoch>.checkpoint,
    bootstrap.checkpoint), and the checkpoint files.

    PATHS are files, partition directories (every file in them, segment by segment in offset
    order) or log directories (their checkpoint files, then every partition). Exit status: 0 all
    valid, 1 invalid data found, 2 usage error or unreadable input.
    """
    targets = _targets(paths, files_arg)
    if not targets:
        raise click.UsageError("no files given: name segment files or directories, or use --files")
    _range_check(from_offset, to_offset, from_timestamp, to_timestamp)
    key_decoder = key_decoder or _decoder_from_class(key_decoder_class)
    value_decoder = value_decoder or _decoder_from_class(value_decoder_class)
    key_decoder, value_decoder = _schema_decoders(key_decoder, value_decoder, key_schema,
                                                  value_schema, schema_dir)
    # json: a decoder of this run's, which counts the payloads it shows as text
    key_decoder = decoders.tracked(key_decoder, "key")
    value_decoder = decoders.tracked(value_decoder, "value")
    parser = _parser([name for name, given in (
        ("cluster-metadata", cluster_metadata_decoder), ("offsets", offsets_decoder),
        ("transaction-log", transaction_log_decoder),
        ("share-group-state", share_group_state_decoder),
        ("remote-log-metadata", remote_log_metadata_decoder)) if given], kafka_format)
    print_data = (print_data_log or key_decoder is not None or value_decoder is not None
                  or parser is not None)
    opts = DumpOptions(deep=deep_iteration or fmt == "messages", print_data=print_data,
                       skip_metadata=skip_record_metadata, key_decoder=key_decoder or "string",
                       value_decoder=value_decoder or "string", iso=timestamps == "iso",
                       kafka_format=kafka_format, parser=parser)
    writer = writer_class(fmt)(sys.stdout.buffer, sys.stderr, opts)
    iopts = IndexOptions(verify_only=verify_index_only, sanity_only=index_sanity_check,
                         max_message_size=max_message_size)
    bounds = None
    if (from_offset, to_offset, from_timestamp, to_timestamp) != (None,) * 4:
        bounds = Seek(from_offset, to_offset, from_timestamp, to_timestamp)
    run = _DumpRun(writer, iopts, max_message_size, base_offset, deep=opts.deep,
                   max_bytes=max_bytes if max_bytes < KAFKA_MAX_BYTES else None,
                   resync=skip_invalid)
    # KRaft snapshots hold metadata records: in JSON and messages output decoded as such unless
    # a decoder was chosen; --format kafka prints their payloads as DumpLogSegments does
    # (through the string decoder unless --cluster-metadata-decoder is given)
    run.metadata_by_default = (fmt != "kafka" and parser is None
                               and (key_decoder, value_decoder) == (None, None))
    run.single_files = all(os.path.isfile(t) for t in targets)
    try:
        status = max([run.target(target, bounds) for target in targets])
        run.past_end_notes()
        fallbacks = decoders.fallback_note(key_decoder, value_decoder)
        if fallbacks is not None:
            writer.warn(fallbacks)   # (the exit status stays: the dump showed every record)
    finally:
        writer.finish()
    if writer.found_invalid:
        status = max(status, EXIT_INVALID)
    sys.exit(status)


class _DumpRun:
    """Each file a dump names, handed to the library's reader and to the writer; each method
    returns the exit status its part earns."""

    def __init__(self, writer: Writer, iopts: IndexOptions, max_message_size: int,
                 base_offset: Optional[int], deep: bool, max_bytes: Optional[int],
                 resync: bool) -> None:
        self.writer = writer
        self.iopts = iopts
        self.max_message_size = max_message_size
        self.base_offset = base_offset
        self.reading: _Reading = dict(records=deep, max_bytes=max_bytes, resync=resync,
                            fast=writer.fast_path(), fast_records=writer.fast_records_path())
        self.parser = writer.opts.parser
        self.metadata_by_default = False
        # partition directory: [--from-offset, furthest segment read, any batch shown, its end]
        # (int, str or None, bool, int or None)
        self.seeks: Dict[str, List[Any]] = {}
        self.single_files = False

    def target(self, target: str, bounds: Optional[Seek]) -> int:
        try:
            found = files_to_read(target, bounds)
        except (NoSegmentsError, OSError) as e:
            self.writer.warn(str(e) if isinstance(e, NoSegmentsError) else _os_error(target, e))
            return EXIT_USAGE
        return max([self.file(f, seek) for f, seek in found], default=EXIT_OK)

    def file(self, f: Found, seek: Optional[Seek]) -> int:
        if f.error is not None:
            # a partition directory that cannot be read: named, the others go on
            self.writer.warn(_os_error(f.path, f.error))
            return EXIT_USAGE
        if f.kind is None:
            if not f.explicit:
                self.writer.ignored(printable_name(f.path))
                return EXIT_OK
            self.writer.warn("%s: unknown file kind: dump reads segments (*.log and their "
                             ".deleted/.cleaned/.swap names), *.index, *.timeindex, "
                             "*.txnindex, *.snapshot, KRaft snapshots (*.checkpoint) and "
                             "checkpoint files"
                             % printable_name(f.path))
            return EXIT_USAGE
        try:
            if f.kind in (names.LOG, names.KRAFT_SNAPSHOT):
                return self.segment(f.path, seek, f.kind)
            return dump_aux(f.kind, f.path, self.writer, self.iopts)
        except OSError as e:
            note = None if f.explicit else verify.vanished_note(e.filename or f.path, e)
            if note is not None:
                # met in a directory, then removed by the broker (a .deleted file): normal
                self.writer.warn("%s: %s" % (note.file, note.message))
                return EXIT_OK
            self.writer.warn(_os_error(f.path, e))
            return EXIT_USAGE

    def segment(self, path: str, seek: Optional[Seek], kind: str) -> int:
        base = self.base_offset
        if base is None and kind == names.KRAFT_SNAPSHOT:
            base = 0  # a snapshot's records are numbered from 0 (RecordsSnapshotWriter)
        parser = self.parser
        if kind == names.KRAFT_SNAPSHOT and self.metadata_by_default:
            parser = _parser(["cluster-metadata"], self.writer.opts.kafka_format)
        self.writer.opts.parser = parser
        with LogFile(path, self.max_message_size) as log:
            reader = SegmentReader(log, base, seek=seek, **self.reading)
            watched = _Watched(reader, self.writer)
            self.writer.segment(watched)
            if seek is not None:
                self._sought(seek, log, reader.base, watched.shown)
        return EXIT_INVALID if reader.invalid else EXIT_OK

    def _sought(self, seek: Seek, log: LogFile, base: int, shown: bool) -> None:
        """Keep, per partition directory, whether a batch was shown and where the furthest
        segment read ends, for the note past_end_notes gives."""
        if seek.from_offset is None:
            return
        entry = self.seeks.setdefault(os.path.dirname(log.path), [seek.from_offset, None, False,
                                                                  None])
        entry[2] = entry[2] or shown
        if not entry[2]:
            end = seek.end_offset(log, base)
            if entry[3] is None or end >= entry[3]:
                entry[1], entry[3] = log.path, end

    def past_end_notes(self) -> None:
        """``--from-offset N`` past a partition's log end prints no record: one note on stderr
        per such partition (the exit status stays 0: an empty answer is not an error, as
        ``tail -n +N`` past a file's end)."""
        for directory, (start, path, shown, end) in self.seeks.items():
            if not shown and end is not None and start >= end:
                self.writer.warn("%s: no record at or after offset %d: the %s ends at offset %d"
                                 % (printable_name(path if self.single_files else directory),
                                    start, "segment" if self.single_files else "log", end))


class _Watched:
    """A SegmentReader as the writer reads it, which also says on stderr each batch whose CRC
    fails (its line on stdout stays as kafka-dump-log.sh prints it, ``isvalid: false``) and
    remembers whether a batch was shown."""

    def __init__(self, reader: SegmentReader, writer: Writer) -> None:
        self._reader = reader
        self._writer = writer
        self.shown = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)

    def __iter__(self) -> Iterator[Event]:
        for event in self._reader:
            yield event
            if isinstance(event, BatchRead) and event.first:
                self.shown = True
                batch = event.batch
                if not batch.is_valid:
                    self._writer.warn(
                        "%s: the batch at position %d (offsets %d-%d) is corrupt: its CRC "
                        "does not match its bytes" % (printable_name(self._reader.log.path),
                                                       batch.position, batch.base_offset,
                                                       batch.last_offset))


def _parser(named: List[str], kafka_format: str) -> Optional[Parser]:
    """The parser Kafka's precedence picks among the decoder options ``named`` (None: none);
    the parsers' modules are imported only when one is asked for."""
    if not named:
        return None
    from . import parsers
    parser = parsers.choose(named)
    if parser is not None and kafka_version(kafka_format) >= COORDINATOR_JSON:
        parser = parsers.java_variant(parser, kafka_version(kafka_format))
    return parser


def _os_error(path: str, e: OSError) -> str:
    """One line for a file or directory that cannot be read: its name, printable, and why."""
    name = e.filename if isinstance(e, OSError) and e.filename else path
    return os_error_text(name, e)
