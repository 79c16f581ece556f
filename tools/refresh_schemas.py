#!/usr/bin/env python3
"""Regenerate kafkalog_cli/format/schemas/ from Kafka's message definitions.

Kafka describes its internal records in JSON files (with // comments) under
``metadata/src/main/resources/common/metadata/`` (KRaft metadata records),
``group-coordinator/.../common/message/``, ``transaction-coordinator/.../common/message/``,
``share-coordinator/.../common/message/`` and, for the raft control records,
``clients/src/main/resources/common/message/``, and the remote log metadata records of
``storage/src/main/resources/message/``. This script reads them from a checkout of
apache/kafka (a work tree, or a git directory and a revision) and writes our transcription:
one ``<MessageName>.json`` per message and an ``index.json`` of lookups.

Usage (from the repository's root)::

    python tools/refresh_schemas.py --kafka ~/src/kafka            # a work tree at a tag
    python tools/refresh_schemas.py --git-dir kafka.git --rev 4.1.0
    python tools/refresh_schemas.py --git-dir kafka.git --rev 4.3.1 --keep-removed 4.0.2 \
        --earlier 4.0.2 --vendor tests/data/kafka-messages

``--keep-removed REV`` also takes the definitions that REV has and the main revision no longer
has (a record type Kafka dropped, whose records older clusters still hold), provided their
record type is not taken; ``--vendor DIR`` copies every definition read, unchanged, into
DIR/<folder>/ (the originals the tests encode from, tests/data/kafka-messages/).
``--earlier REV_OR_TREE`` keeps an older release's coordinator values that the newest layouts
cannot read at the same version (Kafka 4.0's early-access share group values, changed by 4.1)
as ``<Name>_<release>``, listed in the record type's ``earlierValues`` (vendored under
DIR/kafka-<release>/); the reader tries them when the newest layout fails on a value.

Our form, per message: ``name``, ``validVersions`` ``[lo, hi]``, ``flexibleVersions`` (the
lowest flexible version, or null), ``fields``. A field: ``name`` (as in Kafka's file),
``type`` (int8, int16, uint16, int32, uint32, int64, float64, bool, string, bytes, uuid,
records, struct, array), ``item`` (arrays: the element type, "struct" for structs),
``fields`` (structs and arrays of structs, common structs inlined), ``versions``,
``nullable``, ``tagged`` (each ``[lo, hi]`` or null; hi 32767 for "N+"), ``tag``, and
``default`` as a JSON value (ints parsed, "null" as null).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from typing import Any, Callable, List, Tuple

OPEN = 32767  # Short.MAX_VALUE: the top of an open range "N+"

DIRS = {
    "metadata": "metadata/src/main/resources/common/metadata",
    "group": "group-coordinator/src/main/resources/common/message",
    "transaction": "transaction-coordinator/src/main/resources/common/message",
    "share": "share-coordinator/src/main/resources/common/message",
    "clients": "clients/src/main/resources/common/message",
    # TopicBasedRemoteLogMetadataManager's records (__remote_log_metadata), framed as the
    # KRaft records are (RemoteLogMetadataSerde); the folder also holds ProducerSnapshot,
    # which is not one of them (only the "metadata" type files are taken)
    "remote": "storage/src/main/resources/message",
}

# The folder of tests/data/kafka-messages/ each group's originals are vendored in.
VENDOR = {"metadata": "metadata", "group": "group-coordinator",
          "transaction": "transaction-coordinator", "share": "share-coordinator",
          "clients": "clients", "remote": "storage"}

# Kafka's ControlRecordType ids of the raft control records, and the message each holds.
RAFT_CONTROL = {
    2: ("LEADER_CHANGE", "LeaderChangeMessage"),
    3: ("SNAPSHOT_HEADER", "SnapshotHeaderRecord"),
    4: ("SNAPSHOT_FOOTER", "SnapshotFooterRecord"),
    5: ("KRAFT_VERSION", "KRaftVersionRecord"),
    6: ("KRAFT_VOTERS", "VotersRecord"),
}

# The consumer protocol's subscription and assignment, which DumpLogSegments' offsets decoder
# expands inside GroupMetadataValue members of "consumer" groups.
CONSUMER_PROTOCOL = ("ConsumerProtocolSubscription", "ConsumerProtocolAssignment")

INTS = {"int8", "int16", "uint16", "int32", "uint32", "int64"}
PRIMITIVES = INTS | {"float64", "bool", "string", "bytes", "uuid", "records"}


def strip_comments(text: str) -> str:
    """Kafka's definition files are JSON with // line comments (outside strings)."""
    out = []
    i, n, in_string = 0, len(text), False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def version_range(spec: Any) -> list[int] | None:
    """Kafka's version strings: "none", "N", "N+", "N-M"."""
    if spec is None:
        return None
    s = str(spec).strip()
    if s == "none" or s == "":
        return None
    if s.endswith("+"):
        return [int(s[:-1]), OPEN]
    if "-" in s:
        lo, hi = s.split("-")
        return [int(lo), int(hi)]
    return [int(s), int(s)]


def default_value(ftype: str, item: str | None, spec: Any) -> Any:
    """A field's default as our JSON value, by Kafka's FieldSpec rules."""
    if spec is None:
        spec_s = ""
    elif isinstance(spec, bool):
        spec_s = "true" if spec else "false"
    else:
        spec_s = str(spec).strip()
    if spec_s == "null":
        return None
    if ftype in INTS:
        if spec_s == "":
            return 0
        return int(spec_s, 16) if spec_s.lower().startswith("0x") else int(spec_s)
    if ftype == "float64":
        return float(spec_s) if spec_s else 0.0
    if ftype == "bool":
        return spec_s == "true"
    if ftype == "string":
        return spec_s
    if ftype == "uuid":
        return spec_s or "AAAAAAAAAAAAAAAAAAAAAA"  # Uuid.ZERO_UUID
    if ftype in ("bytes", "records"):
        return ""
    if ftype == "array":
        return []
    return {}  # a struct: all its fields at their defaults


def convert_fields(fields: list[dict[str, Any]], common: dict[str, list[dict[str, Any]]],
                   versions_of_parent: list[int] | None) -> list[dict[str, Any]]:
    out = []
    for f in fields:
        t = f["type"]
        item = None
        if t.startswith("[]"):
            ftype, item = "array", t[2:]
        else:
            ftype = t
        sub = f.get("fields")
        if item is not None and item not in PRIMITIVES:
            sub = sub if sub is not None else common[item]
            item = "struct"
        elif item is None and ftype not in PRIMITIVES:
            sub = sub if sub is not None else common[ftype]
            ftype = "struct"
        versions = version_range(f.get("versions"))
        field: dict[str, Any] = {
            "name": f["name"],
            "type": ftype,
            "versions": versions,
            "nullable": version_range(f.get("nullableVersions")),
            "tagged": version_range(f.get("taggedVersions")),
            "tag": None if f.get("tag") is None else int(f["tag"]),  # some files quote it
        }
        if item is not None:
            field["item"] = item
        if sub is not None:
            field["fields"] = convert_fields(sub, common, versions)
        field["default"] = default_value(ftype, item, f.get("default"))
        out.append(field)
    return out


def convert(spec: dict[str, Any]) -> dict[str, Any]:
    common = {s["name"]: s["fields"] for s in spec.get("commonStructs", [])}
    valid = version_range(spec["validVersions"])
    flexible = version_range(spec.get("flexibleVersions"))
    return {
        "name": spec["name"],
        "apiKey": spec.get("apiKey"),
        "kind": spec.get("type"),
        "validVersions": valid,
        "flexibleVersions": flexible[0] if flexible else None,
        "fields": convert_fields(spec["fields"], common, valid),
    }


def snake_upper(name: str) -> str:
    """MessageGenerator.toSnakeCase(name).toUpperCase(): TopicRecord -> TOPIC_RECORD."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


def _claim(table: dict[str, Any], key: str, entry: dict[str, str], what: str) -> None:
    """One message per metadata apiKey and per coordinator record type."""
    if key in table and table[key] != entry:
        raise SystemExit("refresh_schemas: %s %s is claimed by both %s and %s"
                         % (what, key, table[key], entry))
    table[key] = entry


Reader = Tuple[Callable[[str], List[str]], Callable[[str], str]]  # (list_dir, read)


def _within(rng: list[int] | None, version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


def _same_bytes(old: list[dict[str, Any]], new: list[dict[str, Any]], version: int) -> bool:
    """Whether fields ``old`` and ``new`` read the same bytes at ``version``: the same fields
    present (tagged ones by tag), of the same types, nullability and sub-fields."""
    def present(fields: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {f["name"]: f for f in fields if _within(f["versions"] or f["tagged"], version)}

    a, b = present(old), present(new)
    for name, f in a.items():
        g = b.get(name)
        if g is None:
            if _within(f["tagged"], version):
                continue  # an unknown tag is skipped by a newer reader
            return False
        if (f["type"], f.get("item"), _within(f["tagged"], version), f["tag"],
                _within(f["nullable"], version)) != (
                g["type"], g.get("item"), _within(g["tagged"], version), g["tag"],
                _within(g["nullable"], version)):
            return False
        if "fields" in f and not _same_bytes(f["fields"], g.get("fields", []), version):
            return False
    return all(name in a or _within(g["tagged"], version) for name, g in b.items())


def compatible(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether every version of ``old`` reads the same with ``new`` (layouts that only grew)."""
    lo, hi = old["validVersions"]
    for version in range(lo, hi + 1):
        if not _within(new["validVersions"], version):
            return False
        if (old["flexibleVersions"] is not None and version >= old["flexibleVersions"]) != (
                new["flexibleVersions"] is not None and version >= new["flexibleVersions"]):
            return False
        if not _same_bytes(old["fields"], new["fields"], version):
            return False
    return True


def _earlier_values(messages: dict[str, dict[str, Any]], index: dict[str, Any],
                    earlier: list[tuple[str, Reader]], vendor: str | None) -> None:
    """A coordinator value whose older layout the newest cannot read (Kafka changed an
    early-access record at the same version: 4.0's share group records) is kept too, as
    ``<Name>_<release>``, listed in the record type's ``earlierValues``."""
    for release, (list_dir, read) in earlier:
        suffix = "_" + re.sub(r"\W", "_", release)
        for group in ("group", "transaction", "share"):
            path = DIRS[group]
            for name in sorted(list_dir(path)):
                if not name.endswith("Value.json") or name[:-5] not in messages:
                    continue
                text = read(path + "/" + name)
                msg = convert(json.loads(strip_comments(text)))
                if compatible(msg, messages[name[:-5]]):
                    continue
                msg["name"] += suffix
                messages[msg["name"]] = msg
                for entry in index["coordinators"][group].values():
                    if entry["value"] == name[:-5]:
                        entry.setdefault("earlierValues", []).append(msg["name"])
                if vendor:
                    folder = os.path.join(vendor, "kafka-" + release, VENDOR[group])
                    os.makedirs(folder, exist_ok=True)
                    with open(os.path.join(folder, name), "w", encoding="utf-8") as fh:
                        fh.write(text)


def build(list_dir: Callable[[str], list[str]], read: Callable[[str], str], out_dir: str,
          source: dict[str, Any], vendor: str | None = None,
          earlier: list[tuple[str, Reader]] | None = None) -> int:
    messages: dict[str, dict[str, Any]] = {}
    index: dict[str, Any] = {"source": source, "metadata": {}, "raftControl": {},
                             "remoteLogMetadata": {},
                             "coordinators": {"group": {}, "transaction": {}, "share": {}}}
    wanted_clients = {m for _, m in RAFT_CONTROL.values()} | set(CONSUMER_PROTOCOL)
    for group, path in DIRS.items():
        for name in sorted(list_dir(path)):
            if not name.endswith(".json"):
                continue
            if group == "clients" and name[:-5] not in wanted_clients:
                continue
            text = read(path + "/" + name)
            spec = json.loads(strip_comments(text))
            if group == "remote" and spec.get("type") != "metadata":
                continue
            msg = convert(spec)
            if msg["name"] in messages:
                raise SystemExit("refresh_schemas: two definitions of %s" % msg["name"])
            messages[msg["name"]] = msg
            if vendor:
                os.makedirs(os.path.join(vendor, VENDOR[group]), exist_ok=True)
                with open(os.path.join(vendor, VENDOR[group], name), "w",
                          encoding="utf-8") as fh:
                    fh.write(text)
            if group == "metadata":
                _claim(index["metadata"], str(spec["apiKey"]),
                       {"message": msg["name"], "type": snake_upper(msg["name"])}, "apiKey")
            elif group == "remote":  # the storage module's generated MetadataRecordType
                _claim(index["remoteLogMetadata"], str(spec["apiKey"]),
                       {"message": msg["name"], "type": snake_upper(msg["name"])}, "apiKey")
    for group in ("group", "transaction", "share"):
        table = index["coordinators"][group]
        keys = [m for m in messages.values()
                if m["name"].endswith("Key") and m["name"][:-3] + "Value" in messages
                and _dir_of(m["name"], list_dir, DIRS[group])]
        for key in keys:
            value = key["name"][:-3] + "Value"
            if key["apiKey"] is not None:  # coordinator-key files of newer Kafka
                types = [key["apiKey"]]
            else:  # older files: the key's version is the record type
                lo, hi = key["validVersions"]
                types = list(range(lo, hi + 1))
            for t in types:
                _claim(table, str(t), {"key": key["name"], "value": value},
                       group + " coordinator record type")
    _earlier_values(messages, index, earlier or [], vendor)
    for type_id, (type_name, message) in RAFT_CONTROL.items():
        if message in messages:
            index["raftControl"][str(type_id)] = {"message": message, "type": type_name}
    os.makedirs(out_dir, exist_ok=True)
    for old in os.listdir(out_dir):
        if old.endswith(".json"):
            os.unlink(os.path.join(out_dir, old))
    for name, msg in messages.items():
        with open(os.path.join(out_dir, name + ".json"), "w", encoding="utf-8") as fh:
            json.dump(msg, fh, separators=(",", ":"), sort_keys=False)
            fh.write("\n")
    with open(os.path.join(out_dir, "index.json"), "w", encoding="utf-8") as fh:
        json.dump(index, fh, indent=1, sort_keys=True)
        fh.write("\n")
    return len(messages)


_listing_cache: dict[str, set[str]] = {}


def _dir_of(name: str, list_dir: Callable[[str], list[str]], path: str) -> bool:
    if path not in _listing_cache:
        _listing_cache[path] = set(list_dir(path))
    return name + ".json" in _listing_cache[path]


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True,
                          capture_output=True, text=True).stdout


def git_reader(git_dir: str, rev: str) -> tuple[str, Reader]:
    """(commit, (list_dir, read)) of a revision of a git directory."""
    commit = _git(git_dir, "rev-parse", rev + "^{commit}").strip()

    def list_dir(path: str) -> list[str]:
        try:
            return _git(git_dir, "ls-tree", "--name-only", commit + ":" + path).split()
        except subprocess.CalledProcessError:
            return []

    def read(path: str) -> str:
        return _git(git_dir, "show", commit + ":" + path)

    return commit, (list_dir, read)


def tree_reader(tree: str) -> tuple[str, Reader]:
    """(commit or "", (list_dir, read)) of a work tree."""
    commit = subprocess.run(["git", "-C", tree, "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()

    def list_dir(path: str) -> list[str]:
        full = os.path.join(tree, path)
        return os.listdir(full) if os.path.isdir(full) else []

    def read(path: str) -> str:
        with open(os.path.join(tree, path), encoding="utf-8") as fh:
            return fh.read()

    return commit, (list_dir, read)


def kafka_version(read: Callable[[str], str]) -> str:
    m = re.search(r"^version=(.*)$", read("gradle.properties"), re.M)
    return m.group(1).strip() if m else ""


def main(argv: list[str] | None = None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.join(os.path.dirname(here), "kafkalog_cli", "format", "schemas")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kafka", help="a work tree of apache/kafka (checked out at a release tag)")
    p.add_argument("--git-dir", help="a git directory of apache/kafka (with --rev)")
    p.add_argument("--rev", default="HEAD", help="tag or commit to read with --git-dir")
    p.add_argument("--keep-removed", metavar="REV", action="append", default=[],
                   help="with --git-dir: also the definitions REV has and --rev no longer has")
    p.add_argument("--earlier", metavar="REV_OR_TREE", action="append", default=[],
                   help="an older release (a revision of --git-dir, or a work tree) whose "
                        "coordinator values the newest layouts cannot read: kept as well")
    p.add_argument("--release", default="", help="the release name to record in index.json")
    p.add_argument("--vendor", metavar="DIR",
                   help="copy the definitions read, unchanged, into DIR/<folder>/")
    p.add_argument("--out", default=default_out)
    a = p.parse_args(argv)
    if bool(a.kafka) == bool(a.git_dir):
        p.error("give one of --kafka or --git-dir")
    if a.keep_removed and not a.git_dir:
        p.error("--keep-removed needs --git-dir")
    if not a.git_dir and not all(os.path.isdir(e) for e in a.earlier):
        p.error("--earlier takes a work tree, or a revision with --git-dir")

    kept: dict[str, str] = {}
    list_dir: Callable[[str], list[str]]
    read: Callable[[str], str]
    if a.git_dir:
        commit, (list_main, read_main) = git_reader(a.git_dir, a.rev)
        older = [git_reader(a.git_dir, r) for r in a.keep_removed]

        def list_with_kept(path: str) -> list[str]:
            names = list_main(path)
            for rev, (list_old, _) in older:  # the files --rev dropped, from the first REV
                for name in list_old(path):
                    if name not in names:
                        names.append(name)
                        kept.setdefault(path + "/" + name, rev)
            return names

        def read_with_kept(path: str) -> str:
            if path in kept:  # index.json says which files come from an older revision
                source.setdefault("kept", {})[path] = kept[path]
                return _git(a.git_dir, "show", kept[path] + ":" + path)
            return read_main(path)

        list_dir, read = list_with_kept, read_with_kept
    else:
        commit, (list_dir, read) = tree_reader(a.kafka)
    earlier = []
    for where in a.earlier:
        old_commit, reader = tree_reader(where) if os.path.isdir(where) else \
            git_reader(a.git_dir, where)
        release = kafka_version(reader[1])
        earlier.append((release, reader))
    source: dict[str, Any] = {"repository": "apache/kafka", "commit": commit,
                              "version": kafka_version(read), "release": a.release or a.rev}
    if earlier:
        source["earlier"] = [release for release, _ in earlier]
    if a.vendor:
        folders = [os.path.join(a.vendor, f) for f in VENDOR.values()]
        folders += [os.path.join(a.vendor, d, f) for d in os.listdir(a.vendor)
                    if d.startswith("kafka-") for f in VENDOR.values()] \
            if os.path.isdir(a.vendor) else []
        for full in folders:
            for old in os.listdir(full) if os.path.isdir(full) else ():
                if old.endswith(".json"):
                    os.unlink(os.path.join(full, old))
    n = build(list_dir, read, a.out, source, a.vendor, earlier)
    print("wrote %d message definitions to %s" % (n, a.out), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
