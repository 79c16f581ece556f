"""Control records: transaction markers and KRaft control records (ControlRecordType)."""

from __future__ import annotations

import base64
import struct

from .errors import CorruptRecordError
from .varint import read_uvarint

(ABORT, COMMIT, LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION,
 KRAFT_VOTERS) = range(7)
CONTROL_TYPE_NAMES = {ABORT: "ABORT", COMMIT: "COMMIT", LEADER_CHANGE: "LEADER_CHANGE",
                      SNAPSHOT_HEADER: "SNAPSHOT_HEADER", SNAPSHOT_FOOTER: "SNAPSHOT_FOOTER",
                      KRAFT_VERSION: "KRAFT_VERSION", KRAFT_VOTERS: "KRAFT_VOTERS"}


def control_type(key):
    """The control type id in a control record's key (version int16, type int16)."""
    if key is None or len(key) < 4:
        raise CorruptRecordError("control record key is shorter than 4 bytes")
    version, type_id = struct.unpack_from(">hh", key, 0)
    if version < 0:
        raise CorruptRecordError("invalid control record key version %d" % version)
    return type_id


def control_type_name(type_id):
    return CONTROL_TYPE_NAMES.get(type_id, "UNKNOWN")


def end_txn_marker(value):
    """(version, coordinatorEpoch) of an ABORT/COMMIT marker value."""
    if value is None or len(value) < 6:
        raise CorruptRecordError("end transaction marker value is shorter than 6 bytes")
    version, epoch = struct.unpack_from(">hi", value, 0)
    if version < 0:
        raise CorruptRecordError("invalid end transaction marker version %d" % version)
    return version, epoch


class _Reader:
    """Reads Kafka's flexible (compact) message encoding."""

    def __init__(self, data):
        self.data = bytes(data)
        self.pos = 0

    def _take(self, n):
        if self.pos + n > len(self.data):
            raise CorruptRecordError("control record value is truncated")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int16(self):
        return struct.unpack(">h", self._take(2))[0]

    def uint16(self):
        return struct.unpack(">H", self._take(2))[0]

    def int32(self):
        return struct.unpack(">i", self._take(4))[0]

    def int64(self):
        return struct.unpack(">q", self._take(8))[0]

    def uvarint(self):
        value, self.pos = read_uvarint(self.data, self.pos, len(self.data))
        return value

    def compact_string(self):
        n = self.uvarint() - 1
        if n < 0:
            return None
        return self._take(n).decode("utf-8", "replace")

    def uuid(self):
        # Kafka prints a Uuid as URL-safe base64 without padding.
        return base64.urlsafe_b64encode(self._take(16)).decode("ascii").rstrip("=")

    def array(self, read_item):
        n = self.uvarint() - 1
        if n < 0:
            return None
        if n > len(self.data) - self.pos:
            raise CorruptRecordError("control record array length %d is too large" % n)
        return [read_item() for _ in range(n)]

    def tagged_fields(self):
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())


def _voter(r):
    voter = {"voterId": r.int32(), "voterDirectoryId": r.uuid()}

    def endpoint():
        e = {"name": r.compact_string(), "host": r.compact_string(), "port": r.uint16()}
        r.tagged_fields()
        return e

    voter["endpoints"] = r.array(endpoint)
    feature = {"minSupportedVersion": r.int16(), "maxSupportedVersion": r.int16()}
    r.tagged_fields()
    voter["kRaftVersionFeature"] = feature
    r.tagged_fields()
    return voter


def _leader_change(r):
    out = {"version": r.int16(), "leaderId": r.int32()}

    def voter():
        v = {"voterId": r.int32()}
        r.tagged_fields()
        return v

    out["voters"] = r.array(voter)
    out["grantingVoters"] = r.array(voter)
    r.tagged_fields()
    return out


def kraft_control_json(type_id, value):
    """The fields of a KRaft control record value as a dict (Kafka's JSON converter names)."""
    if value is None:
        raise CorruptRecordError("KRaft control record has a null value")
    r = _Reader(value)
    if type_id == SNAPSHOT_HEADER:
        out = {"version": r.int16(), "lastContainedLogTimestamp": r.int64()}
    elif type_id == SNAPSHOT_FOOTER:
        out = {"version": r.int16()}
    elif type_id == KRAFT_VERSION:
        out = {"version": r.int16(), "kRaftVersion": r.int16()}
    elif type_id == KRAFT_VOTERS:
        out = {"version": r.int16()}
        out["voters"] = r.array(lambda: _voter(r))
    elif type_id == LEADER_CHANGE:
        return _leader_change(r)
    else:
        raise CorruptRecordError("no decoder for control type %d" % type_id)
    r.tagged_fields()
    return out
