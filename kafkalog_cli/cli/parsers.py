"""Record parsers of `dump` for Kafka's internal topics (DumpLogSegments' MessageParser).

A parser replaces the key and value decoders for every data record (control records are
printed by name as before). It has two faces, as the decoders do:

``text(offset, key, value) -> (key_text | None, payload_text | None)``
    what the line formats print after ``key:`` and ``payload:`` (None: the part is left out,
    as Kafka's parser returns None);
``json(offset, key, value) -> dict``
    the fields a JSON Lines record object gets: ``keyDecoded``/``payloadDecoded`` (JSON
    objects, never strings of JSON) or ``keyError``/``payloadError`` (Kafka's per-record error
    text, and ``payloadErrorCause``: the reason Kafka's text leaves out, when there is one).

A parser whose key part is always None may have a third face, for the dump's fast path:
``payloads(offsets, values) -> list[bytes | None]``, the payload texts of a batch's records
(``text``'s, as UTF-8 bytes) at once.

PARSERS maps a parser's name (the dump option without ``--`` and ``-decoder``) to it; the
dump options pick one by Kafka's precedence (DumpLogSegments.DumpLogSegmentsOptions).
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from ..format import coordinator, metadata_record, remote_log_metadata
from ..format.errors import CorruptRecordError

TextParse = Callable[[int, Optional[bytes], Optional[bytes]], Tuple[Optional[str], Optional[str]]]
PayloadsParse = Callable[[List[int], List[Optional[bytes]]], List[Optional[bytes]]]
JsonParse = Callable[[int, Optional[bytes], Optional[bytes]], "dict[str, Any]"]

# DumpLogSegments' precedence when several parser options are given: the first one named wins.
PRECEDENCE = ("offsets", "transaction-log", "cluster-metadata", "remote-log-metadata",
              "share-group-state")


def _metadata_object(value: Optional[bytes]) -> dict[str, Any]:
    if value is None:
        # a null value: Kafka's serde fails on its first read ("Error while reading frame
        # version"), as on an empty one
        value = b""
    type_name, version, data = metadata_record.decode_metadata_record(value)
    return {"type": type_name, "version": version, "data": data}


def cluster_metadata_text(offset: int, key: Optional[bytes],
                          value: Optional[bytes]) -> Tuple[Optional[str], Optional[str]]:
    """ClusterMetadataLogMessageParser: no key; the record as
    ``{"type":...,"version":...,"data":{...}}`` or ``Error at <offset>, skipping. <message>``."""
    try:
        # json_text of _metadata_object's dict, the data's text written while decoding
        type_name, version, data = metadata_record.decode_metadata_record_text(
            b"" if value is None else value)
        return None, metadata_record.METADATA_RECORD_TEXT % (type_name, version, data)
    except CorruptRecordError as e:
        return None, "Error at %d, skipping. %s" % (offset, e)


def cluster_metadata_payloads(offsets: List[int],
                              values: List[Optional[bytes]]) -> List[Optional[bytes]]:
    """cluster_metadata_text's payloads of a batch's records, as UTF-8 bytes: the C walker's
    texts (metadata_record.metadata_record_texts) where it takes a record, cluster_metadata_text's
    for the others (errors included)."""
    texts = metadata_record.metadata_record_texts(values)
    if None not in texts:
        return texts
    for i, text in enumerate(texts):
        if text is None:
            payload = cluster_metadata_text(offsets[i], None, values[i])[1]
            texts[i] = None if payload is None else payload.encode("utf-8", "replace")
    return texts


def cluster_metadata_json(offset: int, key: Optional[bytes],
                          value: Optional[bytes]) -> dict[str, Any]:
    try:
        return {"payloadDecoded": _metadata_object(value)}
    except CorruptRecordError as e:
        return _payload_error("Error at %d, skipping. %s" % (offset, e), e)


def _payload_error(text: str, e: CorruptRecordError) -> dict[str, Any]:
    out = {"payloadError": text}
    if e.__cause__ is not None:
        out["payloadErrorCause"] = str(e.__cause__)  # what Kafka's text leaves out
    return out


# RemoteMetadataLogMessageParser reads record.value.remaining first: a null value is the JVM's
# (helpful) NullPointerException message
_NULL_REMOTE_VALUE = ('Cannot invoke "java.nio.ByteBuffer.remaining()" because the return '
                      'value of "org.apache.kafka.common.record.Record.value()" is null')


def _remote_log_metadata(value: Optional[bytes]) -> tuple[dict[str, Any], str]:
    """The record object (as the metadata decoder's) and the toString Kafka prints."""
    if value is None:
        raise CorruptRecordError(_NULL_REMOTE_VALUE)
    type_name, version, data = remote_log_metadata.decode(value)
    text = remote_log_metadata.describe(type_name, data)
    return {"type": type_name, "version": version, "data": data}, text


def remote_log_metadata_text(offset: int, key: Optional[bytes],
                             value: Optional[bytes]) -> Tuple[Optional[str], Optional[str]]:
    """RemoteMetadataLogMessageParser: no key; the toString of the RemoteLogMetadata object,
    or ``Error at offset <offset>, skipping. <message>``."""
    try:
        return None, _remote_log_metadata(value)[1]
    except CorruptRecordError as e:
        return None, "Error at offset %d, skipping. %s" % (offset, e)


def remote_log_metadata_json(offset: int, key: Optional[bytes],
                             value: Optional[bytes]) -> dict[str, Any]:
    """``payloadDecoded``: the record as ``{"type":...,"version":...,"data":{...}}``."""
    try:
        return {"payloadDecoded": _remote_log_metadata(value)[0]}
    except CorruptRecordError as e:
        return _payload_error("Error at offset %d, skipping. %s" % (offset, e), e)


class Parser:
    __slots__ = ("name", "text", "json", "payloads")

    def __init__(self, name: str, text: TextParse, json: JsonParse,
                 payloads: Optional[PayloadsParse] = None) -> None:
        self.name = name
        self.text = text
        self.json = json
        self.payloads = payloads


def _coordinator_parser(name: str, parse: coordinator.Parser) -> Parser:
    """The two faces of a coordinator topic's decoder (format.coordinator): in JSON,
    ``keyDecoded``/``payloadDecoded`` or ``keyError`` (Kafka's per-record error text)."""

    def text(offset: int, key: Optional[bytes],
             value: Optional[bytes]) -> Tuple[Optional[str], Optional[str]]:
        k, v = parse(key, value, offset)
        return (None if k is None else k.text), (None if v is None else v.text)

    def as_json(offset: int, key: Optional[bytes], value: Optional[bytes]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for side, decoded in zip(("key", "payload"), parse(key, value, offset)):
            if decoded is not None:
                out[side + ("Error" if decoded.error else "Decoded")] = decoded.json
        return out

    return Parser(name, text, as_json)


PARSERS: dict[str, Parser] = {
    "cluster-metadata": Parser("cluster-metadata", cluster_metadata_text, cluster_metadata_json,
                               cluster_metadata_payloads),
    "remote-log-metadata": Parser("remote-log-metadata", remote_log_metadata_text,
                                  remote_log_metadata_json),
}
PARSERS.update((name, _coordinator_parser(name, parse))
               for name, parse in coordinator.PARSERS.items())
# as DumpLogSegments' CoordinatorRecordMessageParser prints them (--kafka-format 4.1 and later)
JAVA_PARSERS: dict[str, Parser] = {name: _coordinator_parser(name, parse)
                                   for name, parse in coordinator.JAVA_PARSERS.items()}
# ... and Kafka 4.4's transaction log, its transactionStatus by name (--kafka-format 4.4)
PARSERS_4_4: dict[str, Parser] = {
    "transaction-log": _coordinator_parser("transaction-log",
                                           coordinator.parse_transaction_log_4_4)}


def java_variant(parser: Parser, version: Tuple[int, ...] = (4, 3)) -> Parser:
    """The parser as DumpLogSegments of Kafka ``version`` (4.1 or later) prints its records,
    where it differs from 3.x and 4.0's."""
    if version >= (4, 4) and parser.name in PARSERS_4_4:
        return PARSERS_4_4[parser.name]
    return JAVA_PARSERS.get(parser.name, parser)


def choose(names: list[str]) -> Optional[Parser]:
    """The parser Kafka's precedence picks among the options given (None: none given)."""
    for name in PRECEDENCE:
        if name in names and name in PARSERS:
            return PARSERS[name]
    return None
