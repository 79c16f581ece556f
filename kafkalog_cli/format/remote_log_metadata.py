"""The records of ``__remote_log_metadata`` (tiered storage), as Kafka prints them.

TopicBasedRemoteLogMetadataManager writes each event with RemoteLogMetadataSerde: the frame of
the KRaft records (unsigned varint frame version 1, apiKey, version; AbstractApiMessageSerde)
then one of the storage module's messages (apiKey 0 RemoteLogSegmentMetadataRecord, 1
RemoteLogSegmentMetadataUpdateRecord, 2 RemotePartitionDeleteMetadataRecord, 3
RemoteLogSegmentMetadataSnapshotRecord). ``metadata_record.decode_metadata_record`` reads it; the
transforms (RemoteLogSegmentMetadataTransform, ...UpdateTransform,
RemotePartitionDeleteMetadataTransform, RemoteLogSegmentMetadataSnapshotTransform) turn it into
Kafka's objects, and DumpLogSegments' RemoteMetadataLogMessageParser prints their
``toString()``. Pure functions; no files, no printing.

API:

``decode(data) -> (type_name, version, value)``
    the record in the JSON converter's form (``metadata_record.decode_metadata_record``);
    ``CorruptRecordError`` with AbstractApiMessageSerde's texts.
``describe(type_name, value) -> str``
    the ``toString()`` of the object the transform builds (RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate, RemotePartitionDeleteMetadata,
    RemoteLogSegmentMetadataSnapshot); ``CorruptRecordError`` with the message of the
    exception their constructors throw (an unknown state id, a negative start offset...).
``text(data) -> str``
    both: what ``kafka-dump-log.sh --remote-log-metadata-decoder`` prints after ``payload:``
    (without the per-record ``Error at offset`` wrapping, which is the caller's).
"""

from __future__ import annotations

import base64
from typing import Any, Iterable

from . import layouts, metadata_record
from .errors import CorruptRecordError

__all__ = ["decode", "describe", "text", "SEGMENT_STATES", "PARTITION_DELETE_STATES"]

# RemoteLogSegmentState and RemotePartitionDeleteState: id -> enum name
SEGMENT_STATES = {0: "COPY_SEGMENT_STARTED", 1: "COPY_SEGMENT_FINISHED",
                  2: "DELETE_SEGMENT_STARTED", 3: "DELETE_SEGMENT_FINISHED"}
PARTITION_DELETE_STATES = {0: "DELETE_PARTITION_MARKED", 1: "DELETE_PARTITION_STARTED",
                           2: "DELETE_PARTITION_FINISHED"}


def decode(data: Any) -> tuple[str, int, dict[str, Any]]:
    """RemoteLogMetadataSerde.deserialize's first half: the framed message."""
    return metadata_record.decode_metadata_record(data, types=layouts.remote_log_metadata_type)


def _object(name: str, fields: Iterable[tuple[str, Any]]) -> str:
    # the toString of Kafka's classes here: Name{field=value, field=value}
    return name + "{" + ", ".join("%s=%s" % (k, v) for k, v in fields) + "}"


def _topic_id_partition(tp: dict[str, Any]) -> str:
    """TopicIdPartition.toString: <topic id>:<topic>-<partition>."""
    return "%s:%s-%d" % (tp["id"], tp["name"], tp["partition"])


def _segment_id(entry: dict[str, Any]) -> str:
    return _object("RemoteLogSegmentId", (
        ("topicIdPartition", _topic_id_partition(entry["topicIdPartition"])),
        ("id", entry["id"])))


def _custom_metadata(value: dict[str, Any]) -> str:
    """Optional<CustomMetadata>.toString: Optional[CustomMetadata{<n> bytes}] or
    Optional.empty (a null customMetadata)."""
    raw = value.get("customMetadata")
    if raw is None:
        return "Optional.empty"
    return "Optional[CustomMetadata{%d bytes}]" % len(base64.b64decode(raw))


def _leader_epochs(value: dict[str, Any]) -> str:
    """The transforms' HashMap of leader epoch -> start offset (a repeated epoch keeps its
    last offset), printed as the TreeMap the objects keep: {epoch=offset, ...}."""
    epochs: dict[int, int] = {}
    for entry in value["segmentLeaderEpochs"]:
        epochs[entry["leaderEpoch"]] = entry["offset"]
    if not epochs:
        raise CorruptRecordError("segmentLeaderEpochs can not be null or empty")
    return "{" + ", ".join("%d=%d" % (k, epochs[k]) for k in sorted(epochs)) + "}"


def _state(states: dict[int, str], value: dict[str, Any], field: str,
           message: str = "state can not be null") -> str:
    """State.forId: null for an unknown id, which the constructors refuse
    (Objects.requireNonNull)."""
    name = states.get(value[field])
    if name is None:
        raise CorruptRecordError(message)
    return name


def _segment_metadata(value: dict[str, Any]) -> str:
    """RemoteLogSegmentMetadataTransform: a RemoteLogSegmentMetadata built, then
    createWithUpdates(RemoteLogSegmentMetadataUpdate) for its state and custom metadata."""
    start, end = value["startOffset"], value["endOffset"]
    if start < 0:
        raise CorruptRecordError("Unexpected start offset = %d. StartOffset for a remote segment "
                                 "cannot be negative" % start)
    if end < start:
        raise CorruptRecordError("Unexpected end offset = %d. EndOffset for a remote segment "
                                 "cannot be less than startOffset = %d" % (end, start))
    epochs = _leader_epochs(value)
    state = _state(SEGMENT_STATES, value, "remoteLogSegmentState")
    return _object("RemoteLogSegmentMetadata", (
        ("remoteLogSegmentId", _segment_id(value["remoteLogSegmentId"])),
        ("startOffset", start), ("endOffset", end), ("brokerId", value["brokerId"]),
        ("maxTimestampMs", value["maxTimestampMs"]),
        ("eventTimestampMs", value["eventTimestampMs"]), ("segmentLeaderEpochs", epochs),
        ("segmentSizeInBytes", value["segmentSizeInBytes"]),
        ("customMetadata", _custom_metadata(value)), ("state", state)))


def _segment_update(value: dict[str, Any]) -> str:
    """RemoteLogSegmentMetadataUpdateTransform -> RemoteLogSegmentMetadataUpdate."""
    state = _state(SEGMENT_STATES, value, "remoteLogSegmentState")
    return _object("RemoteLogSegmentMetadataUpdate", (
        ("remoteLogSegmentId", _segment_id(value["remoteLogSegmentId"])),
        ("customMetadata", _custom_metadata(value)), ("state", state),
        ("eventTimestampMs", value["eventTimestampMs"]), ("brokerId", value["brokerId"])))


def _partition_delete(value: dict[str, Any]) -> str:
    """RemotePartitionDeleteMetadataTransform -> RemotePartitionDeleteMetadata (whose
    constructor's Objects.requireNonNull(state) has no message: Kafka prints "null")."""
    state = _state(PARTITION_DELETE_STATES, value, "remotePartitionDeleteState", "null")
    return _object("RemotePartitionDeleteMetadata", (
        ("topicPartition", _topic_id_partition(value["topicIdPartition"])), ("state", state),
        ("eventTimestampMs", value["eventTimestampMs"]), ("brokerId", value["brokerId"])))


def _segment_snapshot(value: dict[str, Any]) -> str:
    """RemoteLogSegmentMetadataSnapshotTransform -> RemoteLogSegmentMetadataSnapshot (state
    checked before the leader epochs, as its constructor does)."""
    state = _state(SEGMENT_STATES, value, "remoteLogSegmentState")
    return _object("RemoteLogSegmentMetadataSnapshot", (
        ("segmentId", value["segmentId"]), ("startOffset", value["startOffset"]),
        ("endOffset", value["endOffset"]), ("maxTimestampMs", value["maxTimestampMs"]),
        ("segmentLeaderEpochs", _leader_epochs(value)),
        ("segmentSizeInBytes", value["segmentSizeInBytes"]),
        ("customMetadata", _custom_metadata(value)), ("state", state)))


_DESCRIBE = {
    "REMOTE_LOG_SEGMENT_METADATA_RECORD": _segment_metadata,
    "REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD": _segment_update,
    "REMOTE_PARTITION_DELETE_METADATA_RECORD": _partition_delete,
    "REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD": _segment_snapshot,
}


def describe(type_name: str, value: dict[str, Any]) -> str:
    """The toString of the object RemoteLogMetadataSerde.deserialize returns."""
    render = _DESCRIBE.get(type_name)
    if render is None:  # a type our schema data knows but RemoteLogMetadataSerde does not
        raise CorruptRecordError("RemoteLogMetadataTransform for apikey: %s does not exist."
                                 % type_name)
    return render(value)


def text(data: Any) -> str:
    """RemoteLogMetadataSerde.deserialize(data).toString()."""
    type_name, _version, value = decode(data)
    return describe(type_name, value)
