"""Carrying a cleaning pass out, and finishing one a kill interrupted (LocalLog.replaceSegments
for the cleaner's new segments): the intent written before the first rename, the .cleaned files
renamed .swap from the highest group down, the old segments renamed .deleted, the .swap files
renamed into place, the cleaner checkpoint; on a rerun after a kill and ``recover``, the intent
read back to finish the pass or drop it."""

from __future__ import annotations

import os
import zlib
from typing import TYPE_CHECKING, Dict, List, Optional, Set, Tuple

from ..errors import InvalidDataError
from . import names
from .checkpoints import write_offset_checkpoint
from .files import printable_name
from .indexbuild import IndexBuilder, fsync_dir, rename_noreplace, write_atomically
from .segment import Segment

if TYPE_CHECKING:
    from .compact import CleanedGroup
    from .partition import Partition


class CompactError(InvalidDataError):
    """The pass cannot go on (bytes that hold no batch, records that cannot be read): the
    broker's cleaner fails there and marks the partition uncleanable. Exit code 1."""


def _log_sum(path: str) -> Tuple[int, int]:
    """(size, CRC-32) of a file."""
    crc, size = 0, 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                return size, crc
            crc, size = zlib.crc32(chunk, crc), size + len(chunk)


def write_intent(partition: Partition, end_offset: int,
                  written: Dict[int, Tuple[int, int, bytes]], interval: int) -> None:
    """Write down, before the first rename, the pass's end offset and index interval, and each
    new segment: its base offset, the size and CRC-32 of its .log, its .txnindex (hex): a
    rerun after a kill finds out from it whether `recover` completed the swap (the new
    segments in place: their indexes made again where recover, as LogLoader, left others,
    then the checkpoint) or undid it (the pass is made again)."""
    lines = ["%d %d" % (end_offset, interval)]
    for base, (size, crc, aborted) in sorted(written.items()):
        lines.append("%d %d %d %s" % (base, size, crc, aborted.hex() or "-"))
    write_atomically(os.path.join(partition.directory, names.COMPACT_INTENT),
                     ("\n".join(lines) + "\n").encode())


def to_swap(directory: str, groups: List[CleanedGroup]) -> None:
    """Every group's .cleaned files renamed .swap, from the highest base offset down, each
    group's .log last: until the lowest group's .log is renamed, a kill leaves .cleaned files
    below .swap files, which LogLoader (and `recover`) takes for a swap not completed and
    undoes whole; from then on it completes the swap of every group."""
    for cleaned in sorted(groups, key=lambda g: -g.base_offset):
        for kind in (names.INDEX, names.TIMEINDEX, names.TXNINDEX, names.LOG):
            path = os.path.join(directory, names.offset_name(cleaned.base_offset, kind,
                                                             names.CLEANED))
            if os.path.lexists(path):
                rename_noreplace(path, os.path.join(directory, names.offset_name(
                    cleaned.base_offset, kind, names.SWAP)))
        fsync_dir(directory)


def write_cleaner_checkpoint(partition: Partition, end_offset: int) -> None:
    """The partition's cleaner-offset-checkpoint entry at the pass's end."""
    if partition.topic is not None and partition.number is not None:
        write_offset_checkpoint(os.path.join(partition.log_dir, names.CLEANER_OFFSET_CHECKPOINT),
                                {(partition.topic, partition.number): end_offset})


def finish(partition: Partition, end_offset: int) -> None:
    """The cleaner checkpoint at the pass's end, then the intent removed."""
    write_cleaner_checkpoint(partition, end_offset)
    intent = os.path.join(partition.directory, names.COMPACT_INTENT)
    if os.path.lexists(intent):
        os.unlink(intent)
        fsync_dir(partition.directory)


def index_files_to_restore(directory: str, base: int, interval: int, aborted: bytes
                           ) -> List[Tuple[str, bytes]]:
    """The index files of the new segment at ``base`` that differ from what the pass wrote
    (an offset and a time index entry as LogSegment.append adds them, its .txnindex as written
    down), where `recover` left others (LogLoader drops index .swap files whose .log was
    already renamed, and makes new, empty indexes): (name, the bytes the pass wrote)."""
    segment = Segment(directory, base)
    indexes = IndexBuilder(base, interval)
    for batch in segment.batches():
        indexes.add(batch.position, batch.size, batch.last_offset, batch.max_timestamp)
    indexes.finish()
    files = [(names.INDEX, indexes.offset_index_bytes()),
             (names.TIMEINDEX, indexes.time_index_bytes())]
    if aborted:
        files.append((names.TXNINDEX, aborted))
    out = []
    for kind, data in files:
        name = names.offset_name(base, kind)
        path = os.path.join(directory, name)
        if os.path.islink(path):
            continue  # never written through
        current = None
        if os.path.isfile(path):
            with open(path, "rb") as f:
                current = f.read()
        if current != data:
            out.append((name, data))
    return out


class Intent:
    """What ``.kafkalog-compact-intent`` says: the pass's ``end_offset`` and index
    ``interval``, and its new ``segments``: (base offset, size and CRC-32 of the .log, the
    .txnindex bytes)."""

    def __init__(self, end_offset: int, interval: int,
                 segments: List[Tuple[int, int, int, bytes]]) -> None:
        self.end_offset = end_offset
        self.interval = interval
        self.segments = segments

    @property
    def bases(self) -> Set[int]:
        return {base for base, _, _, _ in self.segments}


def read_intent(directory: str) -> Optional[Intent]:
    """The intent of an interrupted pass in ``directory`` (None: there is none, or it names no
    segment)."""
    path = os.path.join(directory, names.COMPACT_INTENT)
    if not os.path.isfile(path) or os.path.islink(path):
        return None
    with open(path) as f:
        words = [line.split() for line in f.read().splitlines()]
    try:
        segments = [(int(w[0]), int(w[1]), int(w[2]),
                     b"" if w[3] == "-" else bytes.fromhex(w[3])) for w in words[1:]]
        intent = Intent(int(words[0][0]), int(words[0][1]), segments)
    except (ValueError, IndexError):
        return None
    return intent if segments else None


def _new_log_at(directory: str, base: int, size: int, crc: int, suffix: str) -> bool:
    path = os.path.join(directory, names.offset_name(base, names.LOG, suffix))
    return (os.path.isfile(path) and not os.path.islink(path)
            and _log_sum(path) == (size, crc))


def new_segments_found(directory: str, intent: Intent, suffixes: Tuple[str, ...] = (
        "", names.SWAP, names.CLEANED)) -> bool:
    """Every new segment the intent names is in ``directory``, its .log as the pass wrote it
    (size and CRC), under one of ``suffixes`` (default: in place, .swap or .cleaned)."""
    return all(any(_new_log_at(directory, base, size, crc, suffix) for suffix in suffixes)
               for base, size, crc, _ in intent.segments)


def finish_interrupted(partition: Partition) -> Optional[int]:
    """A pass a kill interrupted, once `recover` has completed or undone its swap: when the
    new segments the intent names are in place, their indexes are written as the pass wrote
    them and the checkpoint is written (returns the pass's end offset); else the pass was
    undone and the intent goes (returns None). Raises CompactError while .swap or .cleaned
    files are still there (recover first)."""
    directory = partition.directory
    path = os.path.join(directory, names.COMPACT_INTENT)
    if not os.path.lexists(path):
        return None
    if any(names.lifecycle_suffix(n) in (names.SWAP, names.CLEANED)
           for n in os.listdir(directory)):
        raise CompactError("%s: an interrupted pass left .swap or .cleaned files: run "
                           "kafkalog recover first" % printable_name(directory))
    intent = read_intent(directory)
    if intent is not None and new_segments_found(directory, intent, ("",)):
        for base, _, _, aborted in intent.segments:
            for name, data in index_files_to_restore(directory, base, intent.interval, aborted):
                write_atomically(os.path.join(directory, name), data)
        finish(partition, intent.end_offset)
        return intent.end_offset
    os.unlink(path)
    fsync_dir(directory)
    return None


def remove_cleaned(directory: str, groups: List[CleanedGroup]) -> None:
    """The .cleaned files of ``groups`` (a pass that stops before its swaps)."""
    for cleaned in groups:
        for kind in (names.LOG, names.INDEX, names.TIMEINDEX, names.TXNINDEX):
            path = os.path.join(directory, names.offset_name(cleaned.base_offset, kind,
                                                             names.CLEANED))
            if os.path.isfile(path) and not os.path.islink(path):
                os.unlink(path)


def swap_in(directory: str, cleaned: CleanedGroup, group: List[Segment]) -> List[str]:
    """LocalLog.replaceSegments, once the new segment's files are .swap files: the old
    segments renamed .deleted (their .log last) with the producer snapshots of those the new
    one does not replace at the same base (UnifiedLog.deleteProducerSnapshots), then the .swap
    files renamed into place (the .log first). Returns the names renamed .deleted."""
    base = cleaned.base_offset
    renamed: List[str] = []
    for segment in group:
        seg_base = segment.base_offset or 0
        if seg_base != base:
            snapshot = names.offset_name(seg_base, names.SNAPSHOT)
            if os.path.lexists(os.path.join(directory, snapshot)):
                Segment.rename_aside(directory, snapshot, snapshot, names.DELETED)
                renamed.append(snapshot)
        renamed.extend(Segment(directory, seg_base).change_suffix(names.DELETED))
    fsync_dir(directory)
    for kind in (names.LOG, names.INDEX, names.TIMEINDEX, names.TXNINDEX):
        path = os.path.join(directory, names.offset_name(base, kind, names.SWAP))
        if os.path.lexists(path):
            rename_noreplace(path, os.path.join(directory, names.offset_name(base, kind)))
    fsync_dir(directory)
    return renamed
