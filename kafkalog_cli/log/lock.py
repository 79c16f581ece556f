"""The log directory's .lock, as a broker holds it: a POSIX record lock (fcntl), which the JVM's
FileChannel.tryLock takes on Linux. BSD flock() locks do not see those, so they are not used."""

from __future__ import annotations

import errno
import fcntl
import os
import struct
from typing import Any, List, Optional, Sequence

from ..errors import KafkalogError
from .files import open_lock_file
from .names import LOCK_FILE


class LockHeld(KafkalogError, OSError):
    """A live process (a broker) holds the log directory (exit code 2; also an OSError with
    errno EAGAIN, as callers catch it)."""


def _holder_pid(fd: int) -> Optional[int]:
    """The PID of the process holding a write-conflicting lock on ``fd``, or None."""
    try:
        # struct flock: l_type, l_whence, l_start, l_len, l_pid (Linux x86-64/aarch64 layout)
        request = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, request + bytes(4))
        l_type, _, _, _, pid = struct.unpack_from("hhqqi", answer)
        return pid if l_type != fcntl.F_UNLCK else None
    except OSError:
        return None


class LogDirLock:
    """Take the log directory's lock for the whole of an operation, as a broker would, so that
    none can start beside us and we never run beside one. A .lock nobody holds (left by a crash)
    is normal and simply taken. Use as a context manager.

    The lock is taken on the real directory (symlinks resolved), and on the real log directory
    of each of ``partitions`` that lies elsewhere (a partition directory that is a symlink into
    another log directory is that directory's to lock: a broker holding it holds the
    partition), so no path through a symlink gets past a broker's lock.

    ``preview``: a read-only preview (a dry run), which changes nothing and so may read beside
    a broker: a lock held by another process is not an error then; ``held`` says who holds it
    (the LockHeld a real run would raise), for the caller to warn that the files may change
    under the preview."""

    def __init__(self, log_dir: str, create: bool = True, preview: bool = False,
                 partitions: Sequence[str] = ()) -> None:
        real = os.path.realpath(log_dir)
        others = sorted({os.path.dirname(os.path.realpath(p)) for p in partitions} - {real})
        self.paths = [os.path.join(d, LOCK_FILE) for d in [real, *others]]
        self.path = self.paths[0]
        self.create = create
        self.preview = preview
        self.held: Optional[LockHeld] = None
        self._fds: List[int] = []

    @classmethod
    def for_run(cls, log_dir: str, partitions: Sequence[str], dry_run: bool) -> "LogDirLock":
        """The lock a writing command takes for ``partitions`` of ``log_dir``: a real run's
        (created when missing, LockHeld when another process holds it), or with ``dry_run`` the
        read-only preview (nothing created; ``held`` says who holds it)."""
        return cls(log_dir, create=not dry_run, preview=dry_run, partitions=partitions)

    def __enter__(self) -> "LogDirLock":
        try:
            for path in self.paths:
                held = self._take(path)
                if held is not None:
                    if not self.preview:
                        raise held
                    if self.held is None:
                        self.held = held
        except BaseException:
            self._release()
            raise
        return self

    def _take(self, path: str) -> Optional[LockHeld]:
        """Lock ``path``; the LockHeld to raise when another process holds it, else None."""
        if not self.create and not os.path.exists(path):
            return None  # no .lock, so nobody holds it; and a dry run creates nothing
        fd = open_lock_file(path)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            pid = _holder_pid(fd)
            os.close(fd)
            if e.errno not in (errno.EACCES, errno.EAGAIN):
                raise
            return LockHeld(errno.EAGAIN, "%s is locked by a running process%s: a live broker, "
                            "or another kafkalog command writing there; let it finish first"
                            % (path, " (pid %d)" % pid if pid else ""))
        self._fds.append(fd)
        return None

    def _release(self) -> None:
        # Closing our only descriptor of the file drops our POSIX lock on it. The file stays,
        # even one we created, as a broker leaves it: unlinking it would let a broker that opened
        # it a moment before lock the unlinked file, and the next command, finding no .lock,
        # make a new one and run beside that broker.
        while self._fds:
            os.close(self._fds.pop())

    def __exit__(self, *exc: Any) -> None:
        self._release()


def preview_warning(held: LockHeld) -> str:
    """The one line a dry run says when it reads beside the process holding the lock."""
    text = str(held.strerror or held).split(": a live broker")[0]
    return ("%s: a dry run reads anyway (it changes nothing), but the files may change under it, "
            "and before a real run" % text)
