"""The input of `kafkalog append`: stdin lines made into what ``produce.append_records`` takes.

Two formats: ``lines`` (each line a value, with one key for all) and ``jsonl`` (each line a JSON
object: a record with ``key``, ``value``, ``headers``, ``timestamp`` and, for an idempotent or
transactional producer, ``producerId``, ``producerEpoch``, ``sequence``, ``transactional``; or a
transaction marker ``{"control": "commit"|"abort", "producerId": .., "producerEpoch": ..,
"coordinatorEpoch": .., "timestamp": ..}`` as a transaction coordinator writes one).

A line that makes nothing raises append_types.InputError with its line number, when the appender
asks for the next item: what came before it is written, nothing of its batch.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

import orjson

from ..format.encode import Record, encode_v2_record
from ..format.speedups import speedups
from .append import now_ms
from .append_types import InputError, Item, Marker, ProducedRecord, RecordRun

INPUT_FORMATS = ("lines", "jsonl")
INT16_MAX, INT32_MAX, INT64_MAX = 2 ** 15 - 1, 2 ** 31 - 1, 2 ** 63 - 1
INT64_MIN = -2 ** 63
PRODUCER_FIELDS = ("producerId", "producerEpoch", "sequence", "transactional")
RECORD_FIELDS = ("key", "value", "headers")
# every field a line may carry; another is most likely a typo ("val" for "value"), which would
# otherwise write a null value (a tombstone)
KNOWN_RECORD_FIELDS = RECORD_FIELDS + ("timestamp",) + PRODUCER_FIELDS
KNOWN_CONTROL_FIELDS = ("control", "producerId", "producerEpoch", "coordinatorEpoch", "timestamp")


def _bytes(value: Any, what: str, json_text: bool = False) -> Optional[bytes]:
    """A JSON value as bytes: a string as UTF-8, {"base64": ".."} decoded, null as None; with
    ``json_text``, any other JSON value (a number, true/false, an object, an array) as its
    compact JSON text, as a producer serializing JSON would write it."""
    if value is None:
        return None
    if isinstance(value, str):
        return _utf8(value, what)
    if isinstance(value, dict) and set(value) == {"base64"} and isinstance(value["base64"], str):
        try:
            return base64.b64decode(value["base64"], validate=True)
        except (binascii.Error, ValueError):
            raise InputError("%s: invalid base64" % what) from None
    if json_text:
        try:
            return _utf8(json.dumps(value, separators=(",", ":"), ensure_ascii=False,
                                    allow_nan=False), what)
        except InputError:
            raise
        except ValueError:
            raise InputError("%s: NaN and Infinity have no JSON text" % what) from None
        except RecursionError:
            raise InputError("%s: JSON nested too deeply to write" % what) from None
    raise InputError("%s must be a string, {\"base64\": ...} or null" % what)


def _utf8(text: str, what: str) -> bytes:
    """``text`` as UTF-8; InputError for a lone surrogate (json reads "\\ud800" as one), which
    UTF-8 cannot hold."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InputError("%s: a lone surrogate (\\u%04x) has no UTF-8 form"
                         % (what, ord(text[e.start]))) from None


def _check_fields(obj: Dict[str, Any], known: Tuple[str, ...]) -> None:
    unknown = [f for f in obj if f not in known]
    if unknown:
        raise InputError("unknown field%s %s (known: %s; --ignore-unknown-fields to skip them)"
                         % ("s" if len(unknown) > 1 else "",
                            ", ".join(json.dumps(f) for f in unknown), ", ".join(known)))


def _headers(value: Any) -> Tuple[Tuple[str, Optional[bytes]], ...]:
    if value is None:
        return ()
    pairs = value.items() if isinstance(value, dict) else value
    if not isinstance(pairs, (list, type({}.items()))):
        raise InputError("headers must be an object or a list of [key, value] pairs")
    out = []
    pair: Any
    for pair in pairs:
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and isinstance(pair[0], str)):
            raise InputError("each header must be a [key, value] pair with a string key")
        _utf8(pair[0], "a header key")
        out.append((pair[0], _bytes(pair[1], "header %r" % pair[0])))
    return tuple(out)


def _integer(obj: Dict[str, Any], name: str, low: int, high: int,
             what: str) -> Optional[int]:
    """``obj[name]`` as an integer in [low, high], or None when absent or null."""
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InputError("%s must be %s" % (name, what))
    return value


def _timestamp(obj: Dict[str, Any]) -> int:
    ts = _integer(obj, "timestamp", -2 ** 63, INT64_MAX,
                  "an integer number of ms within 64 bits")
    return now_ms() if ts is None else ts


def _producer_id(obj: Dict[str, Any]) -> Optional[int]:
    return _integer(obj, "producerId", 0, INT64_MAX, "an integer from 0 to 2^63-1")


def _producer_epoch(obj: Dict[str, Any]) -> Optional[int]:
    return _integer(obj, "producerEpoch", 0, INT16_MAX, "an integer from 0 to 32767")


def _marker(obj: Dict[str, Any]) -> Marker:
    kind = obj["control"]
    if kind not in ("commit", "abort"):
        raise InputError('control must be "commit" or "abort"')
    extra = [f for f in RECORD_FIELDS + ("sequence", "transactional") if f in obj]
    if extra:
        raise InputError("a control line carries no %s" % ", ".join(extra))
    producer_id = _producer_id(obj)
    if producer_id is None:
        raise InputError("a control line needs producerId")
    coordinator_epoch = _integer(obj, "coordinatorEpoch", 0, INT32_MAX,
                                 "an integer from 0 to 2^31-1")
    return Marker(kind == "commit", producer_id, _producer_epoch(obj),
                  0 if coordinator_epoch is None else coordinator_epoch, _timestamp(obj))


_PLAIN_FIELDS = frozenset(("key", "value", "timestamp"))


def _plain_record(line: Union[str, bytes], now: Optional[int] = None) -> Optional[Record]:
    """The Record of a line that is an object of a string or null ``key`` and ``value`` and an
    integer or null ``timestamp`` (null or absent: ``now``, else the current time), read by
    orjson (3-4x json); None for any other line, which ``parse_jsonl`` reads with json as it
    always has. Within that shape both read the same (orjson refuses the lone surrogates json
    lets through, and the NaN and the integers beyond 64 bits it would turn into floats cannot
    be there)."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return _plain_object(obj, now_ms() if now is None else now, Record)


def _plain_from_object(obj: Any, now: int, record_type: Any = Record) -> Optional[Record]:
    """``record_type(key, value, timestamp)`` of a parsed line that is a dict of at most a
    string or null ``key`` and ``value`` (UTF-8 encoded) and an integer ``timestamp`` within
    64 bits (null or absent: ``now``); None for anything else. ``_speedups.plain_record`` is
    its C mirror."""
    if type(obj) is not dict or not _PLAIN_FIELDS.issuperset(obj):
        return None
    key, value, ts = obj.get("key"), obj.get("value"), obj.get("timestamp")
    if ts is None:
        ts = now
    elif type(ts) is not int or not INT64_MIN <= ts <= INT64_MAX:
        return None
    try:
        if type(key) is str:
            key = key.encode("utf-8")
        elif key is not None:
            return None
        if type(value) is str:
            value = value.encode("utf-8")
        elif value is not None:
            return None
    except UnicodeEncodeError:
        return None
    return record_type(key, value, ts)


_plain_object = _plain_from_object if speedups is None else speedups.plain_record


def encode_jsonl(data: bytes, pos: int, end: int, now: int, base_ts: int, count: int,
                 pending_bytes: int, max_ts: int, batch_records: int, batch_bytes: int,
                 record_limit: int, plain: Callable[[bytes, int], Optional[Record]]
                 ) -> Tuple[bytes, int, int, int, int, int, int, bool]:
    """The v2 records of the plain records of the JSON lines of ``data[pos:end]`` (a line ends
    at b"\n", the last may have none), added to a batch being gathered that holds ``count``
    records of about ``pending_bytes`` bytes, the first stamped ``base_ts`` and the latest
    ``max_ts``: ``plain(line, now)`` (``_plain_record``) makes a line's record, a blank line is
    passed over. The records' offset deltas go on from ``count``, their timestamp deltas are
    from ``base_ts`` (the first record's timestamp when ``count`` is 0). Records are taken as
    RecordAppender takes a run of plain records: one that would take the batch past
    ``batch_bytes`` (counting Record.size_estimate) waits for the next batch, unless the batch
    is empty; the batch is full once it holds ``batch_records`` records or ``batch_bytes``.

    Stops at the first line that makes no plain record, or whose record is larger than
    ``record_limit`` or stamped more than 64 bits away from ``base_ts``: the caller reads that
    line (and raises the error, or writes the varint the Python writes).

    Returns (records area, position after the lines taken, lines taken (blank ones too),
    records taken, base_ts, pending_bytes, max_ts, full): ``full`` says the batch is complete
    (write it, then go on from the position). ``_speedups.encode_jsonl`` is its C mirror, which
    reads the lines of the usual shape itself and asks ``plain`` of the others only."""
    if not 0 <= pos <= end <= len(data):
        raise ValueError("positions outside the data")
    out: List[bytes] = []
    lines = taken = 0
    full = False
    while pos < end:
        nl = data.find(b"\n", pos, end)
        stop, nxt = (end, end) if nl < 0 else (nl, nl + 1)
        line = data[pos:stop]
        record = plain(line, now)
        if record is None:
            if line.strip():
                break
            lines += 1  # a blank line
            pos = nxt
            continue
        key, value, ts = record.key, record.value, record.timestamp
        size = (len(key) if key is not None else 0) + (len(value) if value is not None else 0) + 21
        if size > record_limit:
            break
        if count and pending_bytes + size > batch_bytes:
            full = True
            break
        if not count:
            base_ts = max_ts = ts
        if not INT64_MIN <= ts - base_ts <= INT64_MAX:
            break
        out.append(encode_v2_record(key, value, ts - base_ts, count, ()))
        count += 1
        taken += 1
        lines += 1
        pending_bytes += size
        max_ts = max(max_ts, ts)
        pos = nxt
        if count >= batch_records or pending_bytes >= batch_bytes:
            full = True
            break
    return b"".join(out), pos, lines, taken, base_ts, pending_bytes, max_ts, full


# its C mirror, unless KAFKALOG_PURE_PYTHON or a build without it
_encode_jsonl = getattr(speedups, "encode_jsonl", encode_jsonl)


def parse_jsonl(line: Union[str, bytes], ignore_unknown_fields: bool = False) -> Item:
    """One JSON-lines object: a Record, a ProducedRecord (with producer fields) or a Marker. A
    field it does not know is an InputError unless ``ignore_unknown_fields``."""
    plain = _plain_record(line)
    if plain is not None:
        return plain
    return _parse_object(line, ignore_unknown_fields)


def _parse_object(line: Union[str, bytes], ignore_unknown_fields: bool) -> Item:
    """``parse_jsonl`` of a line that is no plain record, by json."""
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise InputError("not JSON (%s)" % e) from None
    except RecursionError:
        raise InputError("JSON nested too deeply to read") from None
    if not isinstance(obj, dict):
        raise InputError("expected a JSON object")
    if "control" in obj:
        if not ignore_unknown_fields:
            _check_fields(obj, KNOWN_CONTROL_FIELDS + ("sequence", "transactional")
                          + RECORD_FIELDS)  # these have their own message in _marker
        return _marker(obj)
    if not ignore_unknown_fields:
        _check_fields(obj, KNOWN_RECORD_FIELDS)
    record = Record(_bytes(obj.get("key"), "key", json_text=True),
                    _bytes(obj.get("value"), "value", json_text=True),
                    _timestamp(obj), _headers(obj.get("headers")))
    producer_id = _producer_id(obj)
    if producer_id is None:
        given = [f for f in PRODUCER_FIELDS[1:] if obj.get(f) not in (None, False)]
        if given:
            raise InputError("%s need%s producerId" % (", ".join(given),
                                                       "s" if len(given) == 1 else ""))
        return record
    transactional = obj.get("transactional", False)
    if not isinstance(transactional, bool):
        raise InputError("transactional must be true or false")
    sequence = _integer(obj, "sequence", 0, INT32_MAX, "an integer from 0 to 2^31-1")
    return ProducedRecord(record, producer_id, _producer_epoch(obj), sequence, transactional)


def _strip_newline(line: bytes) -> bytes:
    if line.endswith(b"\r\n"):
        return line[:-2]
    if line.endswith(b"\n"):
        return line[:-1]
    return line


READ_SIZE = 1 << 20  # bytes asked for a read of ``lines``' fast path


def _too_long(number: int, limit: int) -> InputError:
    return InputError("longer than %d bytes: too large for a record under max.message.bytes "
                      "(--max-message-bytes); not read further" % limit, number)


def _line_chunks(read: Callable[[int], bytes], limit: Optional[int] = None,
                 taken: Optional[Callable[[], int]] = None) -> Iterator[Tuple[bytes, int, int]]:
    """The pieces of InputLines.line_chunks: a line cut by a read's end is completed from the
    next read (the bytes of that one line are copied), the rest is given in place. A line of
    more than ``limit`` bytes (its newline not counted) raises InputError with its number as
    soon as that many bytes of it are read: memory stays bounded whatever the input. The lines
    before it are counted (their newlines), or, with ``taken``, are what ``taken()`` says: the
    lines the caller took from the pieces given so far (each taken whole before the next is
    asked for)."""
    rest: List[bytes] = []  # the start of a line cut by the end of a read
    rest_len = 0
    number = 0  # the lines given so far (counted only when there is a limit)
    while True:
        data = read(READ_SIZE)
        if not data:
            if rest:
                line = b"".join(rest)
                yield line, 0, len(line)
            return
        start = 0
        if rest:
            nl = data.find(b"\n")
            if limit is not None and rest_len + (len(data) if nl < 0 else nl) > limit:
                raise _too_long(number + 1, limit)
            if nl < 0:
                rest.append(data)
                rest_len += len(data)
                continue
            rest.append(data[:nl + 1])
            line = b"".join(rest)
            yield line, 0, len(line)
            number = number + 1 if taken is None else taken()
            start = nl + 1
        cut = data.rfind(b"\n") + 1
        if cut > start:
            if limit is not None:
                if limit < cut - start:
                    # a line within this read may be longer than the limit: the lines before
                    # it are given, then the error
                    pos = start
                    for i, part in enumerate(data[start:cut - 1].split(b"\n")):
                        if len(part.rstrip(b"\r")) > limit:
                            if pos > start:
                                yield data, start, pos
                            raise _too_long(number + i + 1, limit)
                        pos += len(part) + 1
                if taken is None:
                    number += data.count(b"\n", start, cut)
            yield data, start, cut
            if taken is not None:
                number = taken()
        tail = max(cut, start)
        rest = [data[tail:]] if len(data) > tail else []
        rest_len = len(data) - tail
        if limit is not None and rest_len > limit:
            raise _too_long(number + 1, limit)


class InputLines:
    """The items of stdin ``lines``: each line a value (``lines``, with ``key``, the current
    time), or a JSON object (``jsonl``, blank lines skipped). A line that makes nothing raises
    InputError with its line number; ``line`` is the number of the line the last item came
    from (for the appender's own errors about that item)."""

    def __init__(self, lines: Iterable[bytes], input_format: str = "lines",
                 key: Optional[bytes] = None, ignore_unknown_fields: bool = False,
                 max_message_bytes: Optional[int] = None) -> None:
        if input_format not in INPUT_FORMATS:
            raise ValueError("input format must be one of %s" % ", ".join(INPUT_FORMATS))
        self.lines = lines
        self.input_format = input_format
        self.key = key
        self.ignore_unknown_fields = ignore_unknown_fields
        self.line: Optional[int] = None
        # The longest line read from a stream: one longer cannot make a record under
        # ``max_message_bytes`` (a line of ``lines`` is the value; a JSON line may spell a byte
        # in up to six characters, \u0000)
        self.max_line_bytes: Optional[int] = None
        if max_message_bytes is not None:
            self.max_line_bytes = (max_message_bytes if input_format == "lines"
                                   else 6 * max_message_bytes + 65536)

    def line_chunks(self, taken: Optional[Callable[[], int]] = None
                    ) -> Optional[Iterator[Tuple[bytes, int, int]]]:
        """For ``lines`` read from a binary stream (``read1``, as sys.stdin.buffer): the input
        as (data, start, end) pieces of whole lines, ``data[start:end]``, each taken as it
        arrives (one read at a time, so a slow writer's lines are not held back), the last
        line of the input maybe without its newline; None otherwise (iterate instead).
        ``taken()``, if given, is how many lines the caller has taken so far (the line number
        of an error about a line too long), each piece being taken whole before the next."""
        read = getattr(self.lines, "read1", None)
        if self.input_format != "lines" or read is None:
            return None
        return _line_chunks(read, self.max_line_bytes, taken)

    # -- ``jsonl`` read from a stream by RecordAppender.append_jsonl -------------------------
    def jsonl_stream(self) -> bool:
        """Is this ``jsonl`` read from a binary stream (``read1``)? RecordAppender.append_jsonl
        may then read it through ``jsonl_chunks``, ``encode_plain`` and ``jsonl_item`` (the
        plain records of a read encoded at once, no Record made) instead of iterating."""
        return self.input_format == "jsonl" and getattr(self.lines, "read1", None) is not None

    def jsonl_chunks(self, taken: Callable[[], int]) -> Iterator[Tuple[bytes, int, int]]:
        """The pieces of ``jsonl`` read from a stream, as ``line_chunks`` gives them."""
        return _line_chunks(getattr(self.lines, "read1"), self.max_line_bytes, taken)

    # encode_jsonl (or its C mirror) and the plain record of a line, for append_jsonl
    encode_plain = staticmethod(_encode_jsonl)
    plain_line = staticmethod(_plain_record)

    def jsonl_item(self, line: bytes, number: int) -> Item:
        """The item of ``line`` (with its newline, if it has one), line ``number``, which makes
        no plain record (``_plain_record``): read by json as ``__iter__`` reads it; InputError
        with the line's number."""
        self.line = number
        try:
            return _parse_object(line, self.ignore_unknown_fields)
        except InputError as e:
            e.line = number
            raise

    def __iter__(self) -> Iterator[Item]:
        read = getattr(self.lines, "read1", None)
        if self.input_format == "jsonl" and read is not None:
            yield from self._jsonl_stream(read)
            return
        for number, line in enumerate(self.lines, start=1):
            self.line = number
            if self.input_format == "lines":
                yield Record(self.key, _strip_newline(line), now_ms())
                continue
            if not line.strip():
                continue
            try:
                item = parse_jsonl(line, self.ignore_unknown_fields)
            except InputError as e:
                e.line = number
                raise
            yield item


    def _jsonl_stream(self, read: Callable[[int], bytes]) -> Iterator[Item]:
        """The items of ``jsonl`` read from a stream a read at a time: the plain records of
        consecutive lines together, as a RecordRun (up to the next other item, or the end of
        the read), every other item alone, as ``__iter__`` gives them."""
        number = 0
        ignore = self.ignore_unknown_fields
        loads, JSONDecodeError, plain_object = orjson.loads, orjson.JSONDecodeError, _plain_object
        for data, start, end in _line_chunks(read, self.max_line_bytes):
            lines = (data if start == 0 and end == len(data) else data[start:end]).split(b"\n")
            last = len(lines) - 1
            if data[end - 1] == 10:
                lines.pop()  # what follows the last newline: nothing
                last = len(lines)  # every line had its newline
            run = RecordRun()
            now = now_ms()  # the time of the read: the timestamp of a line without one
            for i, line in enumerate(lines):
                number += 1
                try:
                    plain = plain_object(loads(line), now, Record)
                except JSONDecodeError:
                    plain = None
                if plain is not None:
                    run.append(plain)
                    run.lines.append(number)
                    continue
                if i < last:
                    line += b"\n"  # as read line by line (json's messages count it)
                if not line.strip():
                    continue
                if run:
                    self.line = number - 1
                    yield run
                    run = RecordRun()
                self.line = number
                try:
                    item = _parse_object(line, ignore)
                except InputError as e:
                    e.line = number
                    raise
                yield item
            if run:
                self.line = number
                yield run


__all__: List[str] = ["INPUT_FORMATS", "InputLines", "encode_jsonl", "parse_jsonl"]
