"""Text files: the offset checkpoints of a log directory (Kafka's OffsetCheckpointFile over
CheckpointFile), a partition's leader-epoch-checkpoint (LeaderEpochCheckpointFile) and
partition.metadata (PartitionMetadataFile). Their names are in names.py."""

from __future__ import annotations

import base64
import io
import os
import re
from typing import IO, Collection, Dict, Iterator, List, Optional, Tuple

from .files import FileFormatError, open_sized, read_sized
from .indexbuild import write_atomically

# Text checkpoints are small: an offset checkpoint lists a log directory's partitions (some
# tens of bytes each), a leader-epoch-checkpoint a partition's epochs. A larger file is refused
# before it is read. The four offset checkpoints of a log directory share one format: "0", a
# count, then "topic partition offset" lines.
MAX_CHECKPOINT_BYTES = 64 * 1024 * 1024

_FIELDS = re.compile(r"\s+")


def _read_text(path: str) -> str:
    raw = read_sized(path, MAX_CHECKPOINT_BYTES)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FileFormatError("%s: not UTF-8 text (%s)" % (path, e.reason)) from None


def _checkpoint_lines(path: str, fields: int) -> Iterator[Tuple[int, List[str]]]:
    """The entry lines of a CheckpointFile (version 0, a count, then the entries), each split
    into ``fields`` whitespace-separated parts, checked as Kafka's reader checks them: a
    generator, one line at a time (lines end at \\n, \\r or \\r\\n, as BufferedReader's), so
    that a large file costs its text and no list of its lines; an entry count that does not
    match is raised once the lines are read (a caller keeping entries drops them then)."""
    with open_sized(path, MAX_CHECKPOINT_BYTES) as (f, _):
        try:
            yield from _split_entries(path, fields, io.TextIOWrapper(f, "utf-8", newline=None))
        except UnicodeDecodeError as e:
            raise FileFormatError("%s: not UTF-8 text (%s)" % (path, e.reason)) from None


def _split_entries(path: str, fields: int, lines: IO[str]) -> Iterator[Tuple[int, List[str]]]:
    first = lines.readline()
    if not first:
        return
    if first.rstrip("\n").strip() != "0":
        raise FileFormatError("%s: unrecognised version %r (expected 0)"
                              % (path, first.rstrip("\n").strip()))
    second = lines.readline()
    expected = java_number(second.rstrip("\n").strip(), INT32) if second else None
    if expected is None:
        raise FileFormatError("%s: missing or malformed entry count" % path)
    found = 0
    for n, line in enumerate(lines, start=3):
        line = line.rstrip("\n")
        parts = _FIELDS.split(line.strip())
        if len(parts) != fields:
            raise FileFormatError("%s: line %d: expected %d fields, found %r"
                                  % (path, n, fields, line[:200]))
        found += 1
        yield n, parts
    if found != expected:
        raise FileFormatError("%s: expected %d entries but found %d" % (path, expected, found))


# The ranges of Java's int and long, which CheckpointFile's formatters parse entries into.
INT32 = (-(1 << 31), (1 << 31) - 1)
INT64 = (-(1 << 63), (1 << 63) - 1)
# Integer.parseInt / Long.parseLong: an optional sign, then ASCII digits; nothing around them.
_JAVA_NUMBER = re.compile(r"[+-]?[0-9]+\Z")


def java_number(text: str, bounds: Tuple[int, int] = INT64) -> Optional[int]:
    """``text`` as Integer.parseInt (``bounds`` INT32) or Long.parseLong (INT64) reads it, or
    None where they throw (not a number, or out of range). The digits are counted before any
    conversion, so a number of any length costs nothing (Python's int() refuses strings past
    4300 digits, and would be slow on long ones)."""
    if not _JAVA_NUMBER.match(text):
        return None
    digits = text.lstrip("+-").lstrip("0") or "0"
    if len(digits) > 19:
        return None
    value = -int(digits) if text[0] == "-" else int(digits)
    return value if bounds[0] <= value <= bounds[1] else None


def _int(path: str, n: int, text: str, bounds: Tuple[int, int] = INT64) -> int:
    value = java_number(text, bounds)
    if value is None:
        if _JAVA_NUMBER.match(text):
            raise FileFormatError("%s: line %d: %s does not fit in %d bits (a malformed "
                                  "checkpoint, as the broker's CheckpointFile reads it)"
                                  % (path, n, text[:40] + ("..." if len(text) > 40 else ""),
                                     32 if bounds == INT32 else 64))
        raise FileFormatError("%s: line %d: %r is not a number" % (path, n, text[:40]))
    return value


def iter_offset_checkpoint(path: str) -> Iterator[Tuple[str, int, int]]:
    """(topic, partition, offset) of each entry of an offset checkpoint file, one at a time
    (a malformed file raises FileFormatError, at the latest after its last entry)."""
    for n, parts in _checkpoint_lines(path, 3):
        yield parts[0], _int(path, n, parts[1], INT32), _int(path, n, parts[2])


def read_offset_checkpoint(path: str) -> List[Tuple[str, int, int]]:
    """[(topic, partition, offset)] of an offset checkpoint file."""
    return list(iter_offset_checkpoint(path))


def offset_checkpoint_entries(path: str, keys: Optional[Collection[Tuple[str, int]]] = None
                              ) -> Dict[Tuple[str, int], int]:
    """{(topic, partition): offset} of an offset checkpoint file, only of ``keys`` when given
    (the file is read one entry at a time: a large one costs only the entries kept)."""
    out: Dict[Tuple[str, int], int] = {}
    for t, p, o in iter_offset_checkpoint(path):
        if keys is None or (t, p) in keys:
            out[(t, p)] = o
    return out


def checkpoint_bytes(lines: List[str]) -> bytes:
    """The bytes of a CheckpointFile holding the entry ``lines``: the version 0, the count,
    then the lines, every line ended by a newline (BufferedWriter.newLine on Linux)."""
    return ("\n".join(["0", str(len(lines))] + lines) + "\n").encode("utf-8")


def offset_checkpoint_bytes(entries: List[Tuple[str, int, int]]) -> bytes:
    """The bytes of an offset checkpoint listing ``entries`` [(topic, partition, offset)] in
    their order, as CheckpointFile writes them: one ``topic partition offset`` line each."""
    return checkpoint_bytes(["%s %d %d" % e for e in entries])


def write_offset_checkpoint(path: str, updates: Dict[Tuple[str, int], int]) -> bool:
    """Set the offsets of ``updates`` {(topic, partition): offset} in the offset checkpoint
    at ``path`` (CheckpointFile.write: a temporary file flushed, then renamed over the old
    one, the directory flushed). The other partitions' lines are kept, in their order; new
    partitions are added at the end; a missing file is created. Returns False (and writes
    nothing) when the file already says all of it. Raises FileFormatError, as the reader
    does, for a file that is not an offset checkpoint: it is never written over."""
    try:
        entries = read_offset_checkpoint(path)
    except FileNotFoundError:
        entries = []
    index = {(t, p): i for i, (t, p, _) in enumerate(entries)}
    new = list(entries)
    for (topic, partition), offset in updates.items():
        i = index.get((topic, partition))
        if i is None:
            index[(topic, partition)] = len(new)
            new.append((topic, partition, offset))
        else:
            new[i] = (topic, partition, offset)
    if new == entries and os.path.exists(path):
        return False
    write_atomically(path, offset_checkpoint_bytes(new))
    return True


def raise_offset_checkpoint_entry(path: str, topic: str, partition: int,
                                  offset: int) -> Optional[int]:
    """Raise the entry of (``topic``, ``partition``) in the offset checkpoint at ``path`` to
    ``offset`` when it is below it (write_offset_checkpoint: the other lines kept, in their
    order); an entry at or above it, a missing entry and a missing file are left as they are.
    Of two entries for one partition the last counts, as it does for the reader's map. Returns
    the entry's old offset when it was raised, else None. Raises FileFormatError, as the reader
    does, for a file that is not an offset checkpoint."""
    try:
        entries = read_offset_checkpoint(path)
    except FileNotFoundError:
        return None
    found = [o for t, p, o in entries if (t, p) == (topic, partition)]
    if not found or found[-1] >= offset:
        return None
    write_offset_checkpoint(path, {(topic, partition): offset})
    return found[-1]


def read_leader_epochs(path: str) -> List[Tuple[int, int]]:
    """[(epoch, start offset)] of a leader-epoch-checkpoint."""
    return [(_int(path, n, parts[0], INT32), _int(path, n, parts[1]))
            for n, parts in _checkpoint_lines(path, 2)]


def read_partition_metadata(path: str) -> Tuple[int, str]:
    """(version, topic id) of partition.metadata."""
    fields: Dict[str, str] = {}
    for n, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        parts = re.split(r":\s+", line, maxsplit=1)
        if len(parts) != 2:
            raise FileFormatError("%s: line %d: expected 'name: value', found %r" % (path, n, line))
        fields[parts[0]] = parts[1].strip()
    if "version" not in fields or "topic_id" not in fields:
        raise FileFormatError("%s: needs both 'version' and 'topic_id' lines" % path)
    version = _int(path, 1, fields["version"], INT32)
    if version < 0:
        raise FileFormatError("%s: invalid version %d" % (path, version))
    topic_id = fields["topic_id"]
    try:
        raw = base64.urlsafe_b64decode(topic_id + "==")
    except ValueError:
        raw = b""
    if len(raw) != 16:
        raise FileFormatError("%s: topic_id %r is not a base64 UUID" % (path, topic_id))
    if raw == bytes(16):
        raise FileFormatError("%s: topic_id is the all-zero UUID" % path)
    return version, topic_id
