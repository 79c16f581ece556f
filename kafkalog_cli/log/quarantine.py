"""Where ``recover`` keeps what it removes: one run's folder in
``<partition>/kafkalog-quarantine/``, with a ``manifest.json`` saying what each file is, where
it came from and why it was set aside. Nothing in it is ever replaced, so nothing is lost.
"""

from __future__ import annotations

import datetime
import errno
import hashlib
import json
import os
import stat
from typing import Any, Dict, Iterator, List, Optional

from . import names
from .files import printable_name, writing_temporary
from .indexbuild import fsync_dir, rename_noreplace, write_atomically



class Quarantine:
    """One run's folder in ``<partition>/kafkalog-quarantine/``, made on first use.

    Nothing in it is ever replaced: the run folder gets a name no other run holds (created with
    mkdir, which fails rather than reuse a folder: two runs in the same microsecond, or a clock
    set back, take the next free name), and each file set aside gets a name nothing in the
    folder holds yet: its own name (escaped when it is not printable UTF-8), or, when a file
    of that name was already set aside in this run, the same name in a numbered subfolder
    (``2/``, ``3/``...). ``manifest.json`` maps every saved name to where it came from and why.
    """

    def __init__(self, directory: str, tool: str = "kafkalog recover") -> None:
        self.directory = directory
        self.tool = tool
        self.time: Optional[str] = None  # when the run folder was made (ISO 8601, UTC)
        self.path: Optional[str] = None
        self.entries: List[Dict[str, Any]] = []
        self._taken = {names.QUARANTINE_MANIFEST}
        self._made_root = False

    def folder(self) -> str:
        if self.path is None:
            self.time = datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%S.%fZ")
            self._made_root = not os.path.lexists(os.path.join(self.directory,
                                                               names.QUARANTINE))
            self.path = new_run_folder(self.directory)
        return self.path

    def discard_if_empty(self) -> None:
        """Remove the run folder when nothing was recorded in it (a run that failed before
        setting anything aside: a full disk), with its numbered subfolders and, when the run
        made it and it is empty, the quarantine directory. What is not empty stays."""
        if self.path is None or self.entries:
            return
        try:
            for name in os.listdir(self.path):
                sub = os.path.join(self.path, name)
                if name.isdigit() and real_dir(sub):
                    os.rmdir(sub)
            os.rmdir(self.path)
            if self._made_root:
                os.rmdir(os.path.join(self.directory, names.QUARANTINE))
            fsync_dir(self.directory)
        except OSError:
            return  # something is in it: kept, as everything a run leaves in its folder
        self.path = None

    def reserve(self, name: str) -> str:
        """A relative path in the run folder, free, for a file to be saved as ``name``."""
        folder = self.folder()
        saved = printable_name(name)
        if saved.endswith(names.TMP_SUFFIX):
            saved += "_"  # never mistaken for one of our temporary files
        k = 1
        rel = saved
        while rel in self._taken or os.path.lexists(os.path.join(folder, rel)):
            k += 1
            sub = os.path.join(folder, str(k))
            try:
                os.mkdir(sub)
            except FileExistsError:
                pass
            if real_dir(sub):
                rel = os.path.join(str(k), saved)
        self._taken.add(rel)
        return rel

    def record(self, entry: Dict[str, Any]) -> None:
        """Add a manifest entry and rewrite the manifest (flushed, renamed into place)."""
        self.entries.append(entry)
        partition = os.path.abspath(self.directory)
        folder = self.folder()
        doc: Dict[str, Any] = {"tool": self.tool, "time": self.time,
                               "partition": printable_name(partition)}
        if printable_name(partition) != partition:
            doc["partition_bytes_hex"] = os.fsencode(partition).hex()
        doc["entries"] = self.entries
        try:
            write_atomically(os.path.join(folder, names.QUARANTINE_MANIFEST),
                             json.dumps(doc, indent=1).encode())
        except BaseException:
            self.entries.pop()  # not recorded: the manifest on disk is the one before
            raise


def real_dir(path: str) -> bool:
    """A directory, not a symlink to one (nothing is moved out of the partition through one)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def new_run_folder(directory: str) -> str:
    root = os.path.join(directory, names.QUARANTINE)
    try:
        os.mkdir(root)
    except FileExistsError:
        if not real_dir(root):
            raise NotADirectoryError(errno.ENOTDIR, "not a directory (recover keeps what it "
                                     "sets aside in a directory of that name)", root) from None
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    for k in range(1, 100000):
        path = os.path.join(root, stamp if k == 1 else "%s-%d" % (stamp, k))
        try:
            os.mkdir(path)
        except FileExistsError:
            continue
        fsync_dir(root)
        fsync_dir(directory)
        return path
    raise FileExistsError(errno.EEXIST, "no free quarantine folder name", root)


def manifest_entry(what: str, name: str, saved: str, why: str, **extra: Any) -> Dict[str, Any]:
    entry = {"what": what, "file": printable_name(name), "saved_as": saved, "why": why}
    if printable_name(name) != name:
        entry["file_bytes_hex"] = os.fsencode(name).hex()
    entry.update(extra)
    return entry


def written_entry(name: str, data: bytes, why: str) -> Dict[str, Any]:
    """A manifest entry for a file a run wrote where there was none (nothing saved): its
    SHA-256 and size, so that a restore can tell it from newer data and set it aside
    (``kafkalog quarantine restore``). For ``Quarantine.record``."""
    return _written(name, hashlib.sha256(data).hexdigest(), len(data), why)


def renamed_entry(name: str, earlier: str, why: str) -> Dict[str, Any]:
    """A manifest entry for a file a run renamed to ``name`` from ``earlier`` (a .swap segment
    swapped into place, LogLoader's completion of a swap): nothing saved; a restore renames it
    back."""
    entry = manifest_entry("renamed", name, "", why, earlier_name=printable_name(earlier))
    if printable_name(earlier) != earlier:
        entry["earlier_name_bytes_hex"] = os.fsencode(earlier).hex()
    del entry["saved_as"]
    return entry


def written_range_entry(name: str, src: str, start: int, end: int, why: str) -> Dict[str, Any]:
    """``written_entry`` for a file that will hold bytes [start, end) of ``src`` (a segment a
    split makes), hashed in chunks."""
    h = hashlib.sha256()
    for chunk in read_range(src, start, end):
        h.update(chunk)
    return _written(name, h.hexdigest(), end - start, why)


def _written(name: str, sha256: str, size: int, why: str) -> Dict[str, Any]:
    entry = manifest_entry("written", name, "", why, sha256=sha256, size=size)
    del entry["saved_as"]
    return entry


def copy_range(src: str, start: int, end: int, dst: str) -> None:
    """Save bytes [start, end) of ``src`` to the new file ``dst`` in chunks, flushed and
    renamed into place (never over an existing file)."""
    tmp = dst + names.TMP_SUFFIX
    chunks = read_range(src, start, end)
    with writing_temporary(tmp) as out:
        for chunk in chunks:
            out.write(chunk)
    rename_noreplace(tmp, dst)
    fsync_dir(os.path.dirname(dst))


def read_range(src: str, start: int, end: int) -> Iterator[bytes]:
    """Bytes [start, end) of ``src`` (fewer if it is shorter) in chunks of at most 8 MiB; the
    file is opened at the call."""
    f = open(src, "rb")

    def chunks() -> Iterator[bytes]:
        with f:
            f.seek(start)
            left = end - start
            while left > 0:
                chunk = f.read(min(left, 8 << 20))
                if not chunk:
                    break
                yield chunk
                left -= len(chunk)
    return chunks()
