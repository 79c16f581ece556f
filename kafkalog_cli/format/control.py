"""Control records (ControlRecordType): transaction markers and the raft control records.

A control record's key is ControlRecordType's fixed layout (version int16, type int16), which
Kafka writes by hand (no message definition). The values of the raft control records (leader
change, snapshot header/footer, kraft version, voters) are message definitions: they are read
by the schema-driven decoder (``format.schema``) at the version Kafka's ControlRecordUtils
reads them (``*_CURRENT_VERSION``, 0 for all five). The end transaction marker's value
(EndTransactionMarker: version int16, coordinatorEpoch int32) stays a fixed layout here: our
layouts' Kafka commit has no definition for it (later Kafka's EndTxnMarker.json describes only
the coordinator epoch, EndTransactionMarker still reading the version before it by hand).
"""

from __future__ import annotations

import functools
import struct
from typing import Any, Optional

from .errors import CorruptRecordError

(ABORT, COMMIT, LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION,
 KRAFT_VOTERS) = range(7)

# ControlRecordUtils.*_CURRENT_VERSION: the version every raft control value is read at
KRAFT_CONTROL_VERSION = 0


@functools.lru_cache(maxsize=None)
def kraft_control_names() -> dict[int, str]:
    """The raft control types, whose values format.schema reads, with ControlRecordType's
    names (read from the schema index when first asked for: not at every command's start)."""
    from . import layouts
    names = {}
    for type_id in (LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION, KRAFT_VOTERS):
        entry = layouts.control_message(type_id)
        assert entry is not None, type_id
        names[type_id] = entry[1]
    return names


def control_type(key: Optional[bytes]) -> int:
    """The control type id in a control record's key (version int16, type int16)."""
    if key is None or len(key) < 4:
        raise CorruptRecordError("control record key is shorter than 4 bytes")
    version, type_id = struct.unpack_from(">hh", key, 0)
    if version < 0:
        raise CorruptRecordError("invalid control record key version %d" % version)
    return int(type_id)


def control_type_name(type_id: int) -> str:
    if type_id in (ABORT, COMMIT):
        return "ABORT" if type_id == ABORT else "COMMIT"
    return kraft_control_names().get(type_id, "UNKNOWN")


def end_txn_marker(value: Optional[bytes]) -> tuple[int, int]:
    """(version, coordinatorEpoch) of an ABORT/COMMIT marker value."""
    if value is None or len(value) < 6:
        raise CorruptRecordError("end transaction marker value is shorter than 6 bytes")
    version, epoch = struct.unpack_from(">hi", value, 0)
    if version < 0:
        raise CorruptRecordError("invalid end transaction marker version %d" % version)
    return version, epoch


def kraft_control_json(type_id: int, value: Optional[bytes]) -> dict[str, Any]:
    """The fields of a raft control record value as Kafka's JSON converter writes them
    (``schema.decode`` of the type's message at KRAFT_CONTROL_VERSION; bytes after the
    message are ignored, as ControlRecordUtils does)."""
    from . import layouts, schema
    entry = layouts.control_message(type_id)
    if entry is None:
        raise CorruptRecordError("no decoder for control type %d" % type_id)
    if value is None:
        raise CorruptRecordError("KRaft control record has a null value")
    return schema.decode(entry[0], KRAFT_CONTROL_VERSION, value)[0]
