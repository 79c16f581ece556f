"""Where ``recover`` keeps what it removes: one run's folder in
``<partition>/kafkalog-quarantine/``, with a ``manifest.json`` saying what each file is, where
it came from and why it was set aside. Nothing in it is ever replaced, so nothing is lost.
"""

from __future__ import annotations

import datetime
import errno
import json
import os
import stat
from typing import Any, Dict, List, Optional

from . import names
from .files import printable_name
from .indexbuild import TMP_SUFFIX, fsync_dir, rename_noreplace, write_atomically

MANIFEST = "manifest.json"


class Quarantine:
    """One run's folder in ``<partition>/kafkalog-quarantine/``, made on first use.

    Nothing in it is ever replaced: the run folder gets a name no other run holds (created with
    mkdir, which fails rather than reuse a folder: two runs in the same microsecond, or a clock
    set back, take the next free name), and each file set aside gets a name nothing in the
    folder holds yet: its own name (escaped when it is not printable UTF-8), or, when a file
    of that name was already set aside in this run, the same name in a numbered subfolder
    (``2/``, ``3/``...). ``manifest.json`` maps every saved name to where it came from and why.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path: Optional[str] = None
        self.entries: List[Dict[str, Any]] = []
        self._taken = {MANIFEST}

    def folder(self) -> str:
        if self.path is None:
            self.path = new_run_folder(self.directory)
        return self.path

    def reserve(self, name: str) -> str:
        """A relative path in the run folder, free, for a file to be saved as ``name``."""
        folder = self.folder()
        saved = printable_name(name)
        if saved.endswith(TMP_SUFFIX):
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
        doc: Dict[str, Any] = {"tool": "kafkalog recover", "partition": printable_name(partition)}
        if printable_name(partition) != partition:
            doc["partition_bytes_hex"] = os.fsencode(partition).hex()
        doc["entries"] = self.entries
        write_atomically(os.path.join(self.folder(), MANIFEST), json.dumps(doc, indent=1).encode())


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


def copy_range(src: str, start: int, end: int, dst: str) -> None:
    """Save bytes [start, end) of ``src`` to the new file ``dst`` in chunks, flushed and
    renamed into place (never over an existing file)."""
    tmp = dst + TMP_SUFFIX
    with open(src, "rb") as f, open(tmp, "wb") as out:
        f.seek(start)
        left = end - start
        while left > 0:
            chunk = f.read(min(left, 8 << 20))
            if not chunk:
                break
            out.write(chunk)
            left -= len(chunk)
        out.flush()
        os.fsync(out.fileno())
    rename_noreplace(tmp, dst)
    fsync_dir(os.path.dirname(dst))
