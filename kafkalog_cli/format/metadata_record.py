"""KRaft's metadata records as MetadataRecordSerde frames them, read by ``format/schema.py``.

AbstractApiMessageSerde frames each record value: unsigned varint frame version 1, unsigned
varint apiKey, unsigned varint version, the message, nothing after it. The same frame holds the
records of ``__remote_log_metadata`` (RemoteLogMetadataSerde). Pure functions over bytes.

``decode_metadata_record(data, types=layouts.metadata_type) -> (type_name, version, value)``
    A KRaft metadata record value. ``type_name`` is MetadataRecordType's name
    (``"TOPIC_RECORD"``); ``types`` maps the frame's apiKey to (message, type name):
    ``layouts.metadata_type`` (KRaft) or ``layouts.remote_log_metadata_type``
    (``__remote_log_metadata``). Errors carry AbstractApiMessageSerde's texts; for a message
    that does not decode that is ``Failed to deserialize record with type <apiKey>``, with the
    reason as the exception's ``__cause__``.
``decode_metadata_record_text(data) -> (type_name, version, text)``
    The same for KRaft's records, with ``jackson.json_text(value)`` instead of the value,
    written while reading (the dump's fast path).
``metadata_record_texts(values) -> list[bytes | None]``
    For a list of KRaft record values, ``METADATA_RECORD_TEXT % (type_name, version, text)``
    of each as UTF-8 bytes, from the C walker (``_schemawalk.c``, which walks a compact program
    that ``format/schema.py`` compiles from the same layout: ``schema._program``); None for a
    record it does not take (``decode_metadata_record_text`` says what those hold). All None
    without the C build or under ``KAFKALOG_PURE_PYTHON=1``.
"""

from __future__ import annotations

import os
import struct
from typing import Any, Callable

from . import schema
from .errors import CorruptRecordError
from .jackson import json_text
from .layouts import metadata_type, valid_versions

__all__ = ["decode_metadata_record", "decode_metadata_record_text", "metadata_record_texts",
           "METADATA_RECORD_TEXT"]

# The optional C walker of the layouts (built from _schemawalk.c, when a compiler is there);
# KAFKALOG_PURE_PYTHON=1 leaves it out, so tests can check both.
_schemawalk: Any = None
if not os.environ.get("KAFKALOG_PURE_PYTHON"):
    try:
        from . import _schemawalk as _walker  # type: ignore[attr-defined]  # C, no stub
        _schemawalk = _walker
    except ImportError:  # pragma: no cover - depends on the build
        pass


# (apiKey << 8 | version) -> (reader, type name), for frames whose three varints are one byte
# each (every record Kafka writes today): the lookups done once per record type and version.
_METADATA_FAST: dict[int, tuple[schema.Reader, str]] = {}


def decode_metadata_record(data: Any, types: Callable[[int], tuple[str, str]] = metadata_type
                           ) -> tuple[str, int, dict[str, Any]]:
    """A KRaft metadata record value (MetadataRecordSerde): (type name, version, value).
    ``types`` maps the frame's apiKey to (message, type name): ``metadata_type`` (KRaft) or
    ``remote_log_metadata_type`` (RemoteLogMetadataSerde, the same frame)."""
    if not isinstance(data, bytes):
        data = bytes(data)
    kraft = types is metadata_type
    if kraft and len(data) >= 3 and data[0] == 1 and data[1] < 0x80 and data[2] < 0x80:
        fast = _METADATA_FAST.get(data[1] << 8 | data[2])
        if fast is not None:
            try:
                value, end = fast[0](data, 3)
            except (CorruptRecordError, IndexError, struct.error):
                pass  # the full path below says why, in Kafka's words
            else:
                if end == len(data):
                    return fast[1], data[2], value
    pos = 0

    def unsigned_short(entity: str) -> int:
        nonlocal pos
        try:
            value, pos = schema.uvarint(data, pos)
        except (IndexError, CorruptRecordError):
            raise CorruptRecordError("Error while reading " + entity) from None
        if value > 0x7FFF:
            raise CorruptRecordError("Value for %s was too large." % entity)
        return value

    frame = unsigned_short("frame version")
    if frame == 0:
        raise CorruptRecordError(
            "Could not deserialize metadata record with frame version 0. Note that upgrades "
            "from the preview release of KRaft in 2.8 to newer versions are not supported.")
    if frame != 1:
        raise CorruptRecordError("Could not deserialize metadata record due to unknown frame "
                                 "version %d(only frame version 1 is supported)" % frame)
    api_key = unsigned_short("type")
    version = unsigned_short("version")
    message, type_name = types(api_key)
    try:
        value, end = schema.decode(message, version, data, pos)
    except CorruptRecordError as e:
        # Kafka's text is only this (MetadataParseException's own message); why is kept as
        # the exception's cause
        raise CorruptRecordError("Failed to deserialize record with type %d" % api_key) from e
    if end < len(data):
        raise CorruptRecordError("Found %d byte(s) of garbage after %d" % (len(data) - end,
                                                                           api_key))
    if kraft and pos == 3:
        _METADATA_FAST[api_key << 8 | version] = (schema.compiled(message, version), type_name)
    return type_name, version, value


# the same as _METADATA_FAST for decode_metadata_record_text without the C walker:
# (text reader, type name)
_METADATA_TEXT_FAST: dict[int, tuple[schema.Reader, str]] = {}
# and with it (decode_metadata_record_text, metadata_record_texts): (METADATA_RECORD_TEXT's
# text before the data, program, type name), added as records of each type and version are met
_METADATA_PROGRAMS: dict[int, tuple[bytes, bytes, str]] = {}

# The JSON text of {"type": type name, "version": version, "data": value} (a KRaft record as
# ClusterMetadataLogMessageParser prints it), with the data's JSON text
METADATA_RECORD_TEXT = '{"type":"%s","version":%d,"data":%s}'


def metadata_record_texts(values: list[Any]) -> list[bytes | None]:
    """For each KRaft record value of a list (bytes or None), METADATA_RECORD_TEXT of it as
    UTF-8 bytes, from the C walker; None where it does not take the record (not built, a type
    and version not met yet by decode_metadata_record_text, bytes that do not decode): that
    function says what those hold."""
    if _schemawalk is None:
        return [None] * len(values)
    texts: list[bytes | None] = _schemawalk.metadata_texts(values, _METADATA_PROGRAMS)
    return texts


def decode_metadata_record_text(data: Any) -> tuple[str, int, str]:
    """decode_metadata_record (KRaft's types) giving ``json_text(value)`` for the value,
    written while reading (the dump's path); the same errors."""
    if not isinstance(data, bytes):
        data = bytes(data)
    short = len(data) >= 3 and data[0] == 1 and data[1] < 0x80 and data[2] < 0x80
    if short and _schemawalk is not None:
        entry = _METADATA_PROGRAMS.get(data[1] << 8 | data[2]) or _metadata_program(data[1],
                                                                                   data[2])
        if entry is not None:
            got = _schemawalk.walk(entry[1], data, 3)
            if got is not None and got[1] == len(data):
                return entry[2], data[2], got[0].decode("utf-8")
    elif short:
        fast = _METADATA_TEXT_FAST.get(data[1] << 8 | data[2])
        if fast is not None:
            try:
                text, end = fast[0](data, 3)
            except (CorruptRecordError, IndexError, struct.error):
                pass  # decode_metadata_record says why, in Kafka's words
            else:
                if end == len(data):
                    return fast[1], data[2], text
    # a record neither fast path takes (the first of its type and version without the C
    # walker, or one that does not decode): the full path, with Kafka's error texts
    type_name, version, value = decode_metadata_record(data)
    if short and _schemawalk is None:
        _METADATA_TEXT_FAST[data[1] << 8 | version] = (
            schema.compiled_text(metadata_type(data[1])[0], version), type_name)
    return type_name, version, json_text(value)


def _metadata_program(api_key: int, version: int) -> tuple[bytes, bytes, str] | None:
    """The C walker's entry for a KRaft record type and version, kept in _METADATA_PROGRAMS;
    None for an unknown type or version or a layout it cannot walk."""
    try:
        message, type_name = metadata_type(api_key)
        lo, hi = valid_versions(message)
    except CorruptRecordError:
        return None
    program = schema._program(message, version) if lo <= version <= hi else None
    if program is None:
        return None
    before_data = METADATA_RECORD_TEXT.rsplit("%s", 1)[0]
    entry = ((before_data % (type_name, version)).encode(), program, type_name)
    _METADATA_PROGRAMS[api_key << 8 | version] = entry
    return entry
