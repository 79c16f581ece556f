"""Run ``kafkalog ARGS`` in this process and SIGKILL it just before its STEP-th file operation.

    python tests/killshim.py STEP ARGS...
    KILLSHIM_NOTIFY_FD=FD python tests/killshim.py after:K ARGS...

A file operation is a call that changes the file system or makes data durable: opening a file
for writing, a write to a descriptor, truncate, fsync, rename (the no-replace rename through
ctypes too), unlink, mkdir, link, utime; and every write of the append path's segment writer
(``log/segment_writer.py``: its batches and index entries go through one function). STEP 0
never kills: the run ends normally and prints ``killshim: N steps`` on stderr, N the number of
operations it made. The kill is a real SIGKILL of this process, so the files are left as a
power cut that spares the page cache (or an OOM kill) leaves them. Nothing of kafkalog is
replaced: the wrapped functions count and then call the originals.
"""

import builtins
import os
import runpy
import signal
import sys

# "N": SIGKILL before the N-th operation; "after:K": write a byte to the descriptor
# KILLSHIM_NOTIFY_FD once the K-th operation has returned, for the parent to kill this process
# at a moment of its choosing (a random SIGKILL in the part of the run that changes files)
mode = sys.argv[1]
limit = int(mode) if mode.isdigit() else -1
notify_after = int(mode.split(":")[1]) if mode.startswith("after:") else -1
notify_fd = int(os.environ.get("KILLSHIM_NOTIFY_FD", "-1"))
count = 0
_os_write = os.write
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def step():
    global count
    count += 1
    if count == limit:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def counted(orig, applies=lambda *a, **kw: True):
    def call(*args, **kwargs):
        if not applies(*args, **kwargs):
            return orig(*args, **kwargs)
        step()
        try:
            return orig(*args, **kwargs)
        finally:
            if count == notify_after:
                _os_write(notify_fd, b"!")
    return call


for fname in ("replace", "rename", "renames", "fsync", "fdatasync", "unlink", "remove", "rmdir",
              "mkdir", "link", "symlink", "truncate", "ftruncate", "utime", "write",
              "posix_fallocate"):
    if hasattr(os, fname):
        setattr(os, fname, counted(getattr(os, fname)))
os.open = counted(os.open, lambda path, flags, *a, **kw: bool(flags & WRITE_FLAGS))


def _writes(file, mode="r", *args, **kwargs):
    return isinstance(mode, str) and any(c in mode for c in "wax+")


builtins.open = counted(builtins.open, _writes)

from kafkalog_cli.log import segment_writer as _segment_writer  # noqa: E402
from kafkalog_cli.log import indexbuild as _indexbuild  # noqa: E402

_segment_writer._write = counted(_segment_writer._write)
if _indexbuild._renameat2 is not None:
    _indexbuild._renameat2 = counted(_indexbuild._renameat2)

if limit == 0:
    import atexit

    atexit.register(lambda: sys.stderr.write("killshim: %d steps\n" % count))
sys.argv = ["kafkalog"] + sys.argv[2:]
runpy.run_module("kafkalog_cli", run_name="__main__", alter_sys=True)
