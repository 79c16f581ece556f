"""Keys and values of Kafka's internal topics, as kafka-dump-log's decoders show them
(DumpLogSegments' OffsetsMessageParser, TransactionLogMessageParser,
ShareGroupStateMessageParser).

The framing is the coordinators' (CoordinatorRecordSerde): a key is an int16 record type (the
key's version in older files) then the key struct; a value an int16 version then the value
struct; a null value is a tombstone. The structs themselves are read by ``format.schema``.

A parser takes a record's key and value (bytes, memoryview or None) and its offset and returns
``(key, payload)``: each None (nothing shown) or a ``Decoded``: the ``text`` kafka-dump-log
prints, the ``json`` value JSON output embeds (the decoded struct as an object, never a string
of JSON; ``<DELETE>`` for a tombstone), and ``error`` (True: ``text`` is Kafka's per-record
error text, and ``json`` that text). An unknown type or version, or bytes that do not decode,
is such an error, never an exception. Pure functions over bytes.
"""

from __future__ import annotations

import base64
import binascii
import struct
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple, Union

from . import jackson, jvmhash, layouts, schema
from .errors import CorruptRecordError

Bytes = Union[bytes, bytearray, memoryview]

DELETE = "<DELETE>"  # a tombstone's payload, as the decoders print it
CONSUMER_PROTOCOL_TYPE = "consumer"  # ConsumerProtocol.PROTOCOL_TYPE

# TransactionState ids and names (TransactionMetadata's TransactionState objects).
TRANSACTION_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                      "CompleteAbort", "Dead", "PrepareEpochFence")


class Decoded(NamedTuple):
    """A decoded key or payload: ``text`` as kafka-dump-log prints it, ``json`` for JSON output,
    ``error``: it says why the bytes could not be decoded."""

    text: str
    json: Any
    error: bool = False


Parsed = Tuple[Optional[Decoded], Optional[Decoded]]
Parser = Callable[[Optional[Bytes], Optional[Bytes], int], Parsed]


def _struct(value: Dict[str, Any]) -> Decoded:
    return Decoded(jackson.json_text(value), value)


def _error(text: str) -> Decoded:
    return Decoded(text, text, error=True)


class _UnknownType(Exception):
    def __init__(self, record_type: int) -> None:
        super().__init__(record_type)
        self.record_type = record_type


def _version(data: bytes, name: str) -> int:
    if len(data) < 2:
        raise CorruptRecordError("Could not read version from %s's buffer." % name)
    version: int = struct.unpack_from(">h", data, 0)[0]
    return version


def _read(message: str, version: int, data: bytes, name: str,
          shown: Optional[int] = None) -> Dict[str, Any]:
    """The struct after the int16 (CoordinatorRecordSerde.readMessage's error text, which
    names ``shown``, the version Kafka passes, when we read another)."""
    try:
        return schema.decode(message, version, data, 2)[0]
    except CorruptRecordError as e:
        raise CorruptRecordError("Could not read record with version %d from %s's buffer due "
                                 "to: %s." % (version if shown is None else shown, name, e)
                                 ) from None


Struct = Dict[str, Any]


def _coordinator_record(coordinator: str, key: bytes, value: Optional[bytes]
                        ) -> Tuple[str, int, Struct, Optional[Tuple[str, int, Struct]]]:
    """CoordinatorRecordSerde.deserialize: (key message, record type, key struct, and the value
    as (message, version, struct) or None for a tombstone)."""
    record_type = _version(key, "key")
    messages = layouts.coordinator_messages(coordinator, record_type)
    if messages is None:
        raise _UnknownType(record_type)
    key_message, value_message = messages
    # Older definitions give each key the record type as its version (OffsetCommitKey 0-1,
    # GroupMetadataKey 2...); newer ones (Kafka 4.1+'s coordinator-key files, with an apiKey)
    # have version 0 only, and Kafka reads them at the record type all the same: their fields
    # are unconditional, so the layout at version 0, with the record type in an error's text.
    lo, hi = layouts.valid_versions(key_message)
    key_struct = _read(key_message, record_type if lo <= record_type <= hi else lo, key, "key",
                       record_type)
    if value is None:
        return key_message, record_type, key_struct, None
    version = _version(value, "value")
    value_message, value_struct = _read_value(coordinator, record_type, value_message, version,
                                              value)
    return key_message, record_type, key_struct, (value_message, version, value_struct)


def _read_value(coordinator: str, record_type: int, message: str, version: int, data: bytes
                ) -> Tuple[str, Struct]:
    """The value struct, and the message read. Kafka 4.1 changed 4.0's early-access share group
    records at the same version: when the newest layout fails on a value or leaves bytes
    unread, an earlier layout of the record type that reads it whole is taken instead."""
    earlier = layouts.coordinator_earlier_values(coordinator, record_type)
    if not earlier:
        return message, _read(message, version, data, "value")
    newest: Optional[Struct] = None
    try:
        newest, end = schema.decode(message, version, data, 2)
        if end == len(data):
            return message, newest
    except CorruptRecordError:
        pass
    for older in earlier:
        try:
            value, end = schema.decode(older, version, data, 2)
        except CorruptRecordError:
            continue
        if end == len(data):
            return older, value
    if newest is not None:  # bytes left over, as Kafka's reader leaves them
        return message, newest
    return message, _read(message, version, data, "value")  # the newest layout's error


def _expand_consumer_protocol(value: Dict[str, Any]) -> None:
    """DumpLogSegments.prepareGroupMetadataValue: in a "consumer" group, each member's
    subscription and assignment bytes replaced by their ConsumerProtocolSubscription and
    ConsumerProtocolAssignment (an int16 version, then the struct), where they decode; bytes
    that do not stay as they are."""
    if value.get("protocolType") != CONSUMER_PROTOCOL_TYPE:
        return
    for member in value.get("members") or ():
        for field, message in (("subscription", "ConsumerProtocolSubscription"),
                               ("assignment", "ConsumerProtocolAssignment")):
            encoded = member.get(field)
            if not isinstance(encoded, str):
                continue
            try:
                raw = base64.b64decode(encoded, validate=True)
                member[field] = schema.decode(message, _version(raw, field), raw, 2)[0]
            except (CorruptRecordError, binascii.Error, ValueError):
                pass  # kept as the bytes were, as Kafka's tool does


def _coordinator_parser(coordinator: str, topic: str, key_label: str, value_label: str,
                        expand: bool) -> Parser:
    """OffsetsMessageParser and ShareGroupStateMessageParser: key ``{"type":"<t>","data":..}``,
    value ``{"<value_label>":"<v>","data":..}`` or <DELETE>."""

    def parse(key: Optional[Bytes], value: Optional[Bytes], offset: int) -> Parsed:
        if key is None:
            return _error("Failed to decode message at offset %d using %s decoder (message had "
                          "a missing key)" % (offset, topic)), None
        try:
            _, record_type, key_struct, read = _coordinator_record(
                coordinator, bytes(key), None if value is None else bytes(value))
        except _UnknownType as e:
            return _error("Unknown record type %d at offset %d, skipping."
                          % (e.record_type, offset)), None
        except CorruptRecordError as e:
            return _error("Error at offset %d, skipping. %s" % (offset, e)), None
        key_out = _struct({key_label: str(record_type), "data": key_struct})
        if read is None:
            return key_out, Decoded(DELETE, DELETE)
        value_message, version, value_struct = read
        if expand and value_message == "GroupMetadataValue":
            _expand_consumer_protocol(value_struct)
        return key_out, _struct({value_label: str(version), "data": value_struct})

    return parse


parse_offsets = _coordinator_parser("group", "offset topic", "type", "version", expand=True)
# The share group state parser labels the value's version "type" too (DumpLogSegments).
parse_share_group_state = _coordinator_parser("share", "share group state topic", "type", "type",
                                              expand=False)


def _partitions_in_set_order(entries: Any) -> list:
    """``<topic>-<n>`` of each partition of a TransactionLogValue, in the order
    TransactionLog.readTxnRecordValue's TransactionMetadata.topicPartitions (a Scala
    mutable.HashSet[TopicPartition], each topic's partitions added with ``++=``) iterates
    them."""
    table: jvmhash.ScalaHashTable = jvmhash.ScalaHashTable()
    for tp in entries:
        table.add_all([(tp["topic"], p) for p in tp["partitionIds"]],
                      lambda item: jvmhash.topic_partition_hash(*item))
    return ["%s-%d" % item for item in table.order()]


def parse_transaction_log(key: Optional[Bytes], value: Optional[Bytes], offset: int) -> Parsed:
    """TransactionLog.formatRecordKeyAndValue: key
    ``transaction_metadata::transactionalId=<id>``, value ``producerId:<p>,producerEpoch:<e>,
    state=<State>,partitions=[<topic>-<n>,...],txnLastUpdateTimestamp=<ms>,txnTimeoutMs=<ms>``
    or <DELETE>; a key version Kafka does not know is ``unknown::version=<v>``. In JSON: the
    key and value structs with the version, the state's name and the partitions."""
    if key is None:
        return _error("Failed to decode message at offset %d using transaction log decoder "
                      "(message had a missing key)" % offset), None
    try:
        raw_key = bytes(key)
        key_version = _version(raw_key, "key")
        lo, hi = layouts.valid_versions("TransactionLogKey")
        if not lo <= key_version <= hi:
            return _error("unknown::version=%d" % key_version), None
        key_struct = _read("TransactionLogKey", key_version, raw_key, "key")
        txn_id = key_struct["transactionalId"]
        key_out = Decoded("transaction_metadata::transactionalId=%s" % txn_id,
                          {"version": key_version, "transactionalId": txn_id})
        if value is None:
            return key_out, Decoded(DELETE, DELETE)
        raw_value = bytes(value)
        version = _version(raw_value, "value")
        lo, hi = layouts.valid_versions("TransactionLogValue")
        if not lo <= version <= hi:
            # TransactionLog.readTxnRecordValue's words
            raise CorruptRecordError("Unknown version %d from the transaction log message value"
                                     % version)
        data = _read("TransactionLogValue", version, raw_value, "value")
        status = data["transactionStatus"]
        if not 0 <= status < len(TRANSACTION_STATES):
            raise CorruptRecordError("Unknown transaction state id %d from the transaction status "
                                     "message" % status)
    except CorruptRecordError as e:
        return _error("Error at offset %d, skipping. %s" % (offset, e)), None
    state = TRANSACTION_STATES[status]
    partitions = [] if state == "Empty" else _partitions_in_set_order(
        data.get("transactionPartitions") or ())
    text = ("producerId:%d,producerEpoch:%d,state=%s,partitions=[%s],txnLastUpdateTimestamp=%d,"
            "txnTimeoutMs=%d" % (data["producerId"], data["producerEpoch"], state,
                                 ",".join(partitions), data["transactionLastUpdateTimestampMs"],
                                 data["transactionTimeoutMs"]))
    return key_out, Decoded(text, {"version": version, "state": state, "partitions": partitions,
                                   "data": data})


# From Kafka 4.1, DumpLogSegments (CoordinatorRecordMessageParser, in the Scala tool of 4.1 and
# 4.2 and the Java tool of 4.3+) prints the three alike: the transaction log as JSON too, the
# share group value's version labelled "version", and "the specified decoder" in the
# missing-key message.
parse_offsets_java = _coordinator_parser("group", "the specified", "type", "version", expand=True)
parse_transaction_log_java = _coordinator_parser("transaction", "the specified", "type", "version",
                                                 expand=False)


def _transaction_state_name(value: Dict[str, Any]) -> None:
    """Kafka 4.4's TransactionLogMessageParser.valueAsJson: a TransactionLogValue's
    transactionStatus replaced by TransactionState.fromId(id).stateName(), or by the id as a
    string when no state has it (fromId's IllegalStateException), in place."""
    data = value.get("data")
    if isinstance(data, dict) and isinstance(data.get("transactionStatus"), int):
        status = data["transactionStatus"]
        data["transactionStatus"] = (TRANSACTION_STATES[status]
                                     if 0 <= status < len(TRANSACTION_STATES) else str(status))


def parse_transaction_log_4_4(key: Optional[Bytes], value: Optional[Bytes], offset: int) -> Parsed:
    """parse_transaction_log_java, with Kafka 4.4's transactionStatus names."""
    k, v = parse_transaction_log_java(key, value, offset)
    if v is not None and not v.error and isinstance(v.json, dict):
        _transaction_state_name(v.json)
        v = _struct(v.json)
    return k, v

parse_share_group_state_java = _coordinator_parser("share", "the specified", "type", "version",
                                                   expand=False)
JAVA_PARSERS: Dict[str, Parser] = {
    "offsets": parse_offsets_java,
    "transaction-log": parse_transaction_log_java,
    "share-group-state": parse_share_group_state_java,
}

# The coordinators' decoders by option name (--offsets-decoder...).
PARSERS: Dict[str, Parser] = {
    "offsets": parse_offsets,
    "transaction-log": parse_transaction_log,
    "share-group-state": parse_share_group_state,
}
