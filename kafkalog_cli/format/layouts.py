"""Kafka's message definitions, as data: the layouts ``format/schema.py`` compiles.

Kafka generates a class per message from JSON definitions (MessageSpec, StructSpec, FieldSpec
read by its generator). We keep those layouts as data in ``format/schemas/`` (one JSON file per
message, written by ``tools/refresh_schemas.py``; ``index.json`` says which Kafka commit they
come from and holds the generated type tables: MetadataRecordType, the coordinators' record
types, ControlRecordType). This module reads them and says which fields a layout has at a
version, as FieldSpec's versions, nullableVersions and taggedVersions do. No files beyond the
package's own schema data, no printing.

``spec(message) -> dict``
    A message's layout (``CorruptRecordError`` for an unknown message).
``metadata_type(api_key) -> (message, type_name)``
    MetadataRecordType.fromId; ``CorruptRecordError`` for an unknown id.
``remote_log_metadata_type(api_key) -> (message, type_name)``
    The same for the records of ``__remote_log_metadata`` (the storage module's generated
    MetadataRecordType, which RemoteLogMetadataSerde frames as MetadataRecordSerde does).
``coordinator_messages(coordinator, record_type) -> (key_message, value_message) | None``
    ``coordinator`` is ``"group"`` (``__consumer_offsets``), ``"transaction"``
    (``__transaction_state``) or ``"share"`` (``__share_group_state``); ``record_type`` is the
    int16 that starts a key (the key's version in Kafka's older files, the record type in
    newer ones). None when unknown. ``coordinator_earlier_values(coordinator, record_type)``:
    the older value layouts of that type the newest cannot read, to try when it fails.
``control_message(control_type) -> (message, type_name) | None``
    The raft control records by ControlRecordType id (2 leader change, 3 snapshot header,
    4 snapshot footer, 5 kraft version, 6 voters).
``valid_versions(message) -> (lowest, highest)``, ``messages() -> list[str]``,
``source() -> dict`` (the Kafka commit/release the layouts come from).
``fields_at(fields, version)``, ``flexible(layout, version)``, ``default_json(field, version)``,
``has_double(fields)``: a layout at one version, for the reader that compiles it.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from .errors import CorruptRecordError

__all__ = [
    "spec", "messages", "source", "valid_versions", "metadata_type", "remote_log_metadata_type",
    "coordinator_messages", "coordinator_earlier_values", "control_message", "fields_at",
    "flexible", "default_json", "has_double",
]


def _load(name: str) -> Any:
    try:
        text = resources.files(__package__ + ".schemas").joinpath(name + ".json").read_text(
            encoding="utf-8")
    except (FileNotFoundError, OSError):
        return None
    return json.loads(text)


@functools.lru_cache(maxsize=None)
def _index() -> dict[str, Any]:
    idx = _load("index")
    if idx is None:
        raise RuntimeError("kafkalog_cli/format/schemas/index.json is missing")
    return dict(idx)


@functools.lru_cache(maxsize=None)
def spec(message: str) -> dict[str, Any]:
    """The layout of ``message`` (its definition as format/schemas/ holds it)."""
    layout = _load(message) if message.isidentifier() else None
    if layout is None:
        raise CorruptRecordError("Unknown message %s" % message)
    return dict(layout)


def messages() -> list[str]:
    """Every message name we hold a layout for."""
    files = resources.files(__package__ + ".schemas").iterdir()
    return sorted(f.name[:-5] for f in files if f.name.endswith(".json") and f.name != "index.json")


def source() -> dict[str, str]:
    """Where the layouts come from: repository, commit, version, release."""
    return dict(_index()["source"])


def valid_versions(message: str) -> tuple[int, int]:
    lo, hi = spec(message)["validVersions"]
    return lo, hi


def _record_type(table: str, api_key: int) -> tuple[str, str]:
    # a generated MetadataRecordType.fromId (MetadataRecordTypeGenerator), of one module
    entry = _index().get(table, {}).get(str(api_key))
    if entry is None:
        raise CorruptRecordError(
            "org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id %d"
            % api_key)
    return entry["message"], entry["type"]


def metadata_type(api_key: int) -> tuple[str, str]:
    """MetadataRecordType.fromId: (message name, enum name)."""
    return _record_type("metadata", api_key)


def remote_log_metadata_type(api_key: int) -> tuple[str, str]:
    """The storage module's MetadataRecordType.fromId (the __remote_log_metadata records)."""
    return _record_type("remoteLogMetadata", api_key)


def coordinator_messages(coordinator: str, record_type: int) -> tuple[str, str] | None:
    entry = _index()["coordinators"].get(coordinator, {}).get(str(record_type))
    if entry is None:
        return None
    return entry["key"], entry["value"]


def coordinator_earlier_values(coordinator: str, record_type: int) -> tuple[str, ...]:
    """Older layouts of a record type's value that the newest cannot read (index.json's
    ``earlierValues``: Kafka 4.0's early-access share group records, which 4.1 changed at the
    same version), as messages of their own."""
    entry = _index()["coordinators"].get(coordinator, {}).get(str(record_type)) or {}
    return tuple(entry.get("earlierValues", ()))


def control_message(control_type: int) -> tuple[str, str] | None:
    entry = _index()["raftControl"].get(str(control_type))
    if entry is None:
        return None
    return entry["message"], entry["type"]


# -- a layout at one version -----------------------------------------------------------------

def _within(rng: list[int] | None, version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


def _json_name(name: str) -> str:
    return name[:1].lower() + name[1:]


def default_json(field: dict[str, Any], version: int) -> Any:
    """The JSON converter's form of a field's default (what a new object holds)."""
    if field["type"] == "struct" and field["default"] is not None:
        return {_json_name(f["name"]): default_json(f, version) for f in field["fields"]
                if _within(f["versions"], version) and not _within(f["tagged"], version)}
    return field["default"]


def fields_at(fields: list[dict[str, Any]], version: int
              ) -> list[tuple[dict[str, Any], str, bool, bool]]:
    """The fields of a struct at ``version`` in declaration order: (field, JSON name, nullable,
    tagged). A field declared with taggedVersions only exists at those versions (FieldSpec); a
    tagged struct is never written as null (its int8 marker is not read)."""
    out = []
    for f in fields:
        if not _within(f["versions"] or f["tagged"], version):
            continue
        nullable = _within(f["nullable"], version)
        tagged = _within(f["tagged"], version)
        if tagged and f["type"] == "struct":
            nullable = False
        out.append((f, _json_name(f["name"]), nullable, tagged))
    return out


def flexible(layout: dict[str, Any], version: int) -> bool:
    """Whether ``version`` of a message is a flexible one (compact lengths, tagged fields)."""
    return layout["flexibleVersions"] is not None and version >= layout["flexibleVersions"]


def has_double(fields: list[dict[str, Any]]) -> bool:
    """Whether a struct holds a float64 field, one level down or deeper."""
    return any(f["type"] == "float64" or f.get("item") == "float64"
               or has_double(f.get("fields") or []) for f in fields)

