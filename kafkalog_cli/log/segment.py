"""Reading a segment's .log file: memory-mapped, scanned batch by batch in bounded memory."""

import mmap
import os

from ..format import codecs
from ..format.errors import CorruptRecordError
from ..format.records import Batch, decode_records
from ..format.scan import scan

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
# A batch holds many messages: its decompressed size may reach this multiple of the
# per-message limit before it counts as a decompression bomb.
BATCH_LIMIT_FACTOR = 16
# Pages already scanned are dropped from the mapping in steps of this size, so that the
# resident size stays flat however large the file is.
RELEASE_STEP = 64 * 1024 * 1024


class LogFile:
    """A segment data file opened read-only. Use as a context manager."""

    def __init__(self, path, max_message_size=DEFAULT_MAX_MESSAGE_SIZE, record_limit_factor=1):
        self.path = path
        self.max_message_size = max_message_size * record_limit_factor  # per record
        self.batch_limit = max_message_size * BATCH_LIMIT_FACTOR  # per decompressed batch
        self._inflater = codecs.Inflater()
        self._released = 0
        self._file = open(path, "rb")
        try:
            self.size = os.fstat(self._file.fileno()).st_size
            if self.size:
                self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
                self.buf = memoryview(self._map)
            else:
                self._map = None
                self.buf = memoryview(b"")
        except BaseException:
            self._file.close()
            raise

    def close(self):
        if self._map is not None:
            self.buf.release()
            self._map.close()
            self._map = None
        self._file.close()

    def read_into(self, buffer, pos):
        """Copy the file's bytes from ``pos`` into ``buffer`` (reused by the caller); return
        how many were copied. For a straight pass over a large file this costs less than
        faulting in the mapping's pages."""
        return os.preadv(self._file.fileno(), [buffer], pos)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def release_before(self, pos):
        """Drop the mapped pages before ``pos`` from memory once a step's worth has been read
        (they are read again if needed), so that memory use stays flat."""
        if pos - self._released < RELEASE_STEP or self._map is None:
            return
        if hasattr(mmap, "MADV_DONTNEED"):
            self._map.madvise(mmap.MADV_DONTNEED, 0, pos - pos % mmap.PAGESIZE)
        self._released = pos

    def entries(self, start=0, end=None, resync=False):
        """Batches and InvalidBytes of ``[start, end)``, as ``format.scan.scan`` yields them."""
        end = self.size if end is None else min(end, self.size)
        next_release = self._released + RELEASE_STEP
        for item in scan(self.buf, start, end, resync):
            if item.position >= next_release:
                self.release_before(item.position)
                next_release = self._released + RELEASE_STEP
            yield item

    def walk(self, start=0, end=None, deep=False, resync=False):
        """Yield (entry, records, error) for each entry up to ``end``.

        ``records`` is set for batches when ``deep``; ``error``, a CorruptRecordError, says why
        a batch's records could not be decoded (records is then None; a LimitExceededError
        means they inflate past the bound, not that they are damaged). InvalidBytes come with
        (None, None).
        """
        for item in self.entries(start, end, resync):
            if deep and isinstance(item, Batch):
                try:
                    yield item, self.records(item), None
                except CorruptRecordError as e:
                    yield item, None, e
            else:
                yield item, None, None

    def records(self, batch):
        """Decode the records of ``batch``; raises CorruptRecordError on malformed contents."""
        return decode_records(self.buf, batch, self._inflater, self.max_message_size,
                              self.batch_limit)

    def first_base_offset(self):
        """The base offset of the first complete entry, or None."""
        for item in self.entries():
            return getattr(item, "base_offset", None)
        return None


__all__ = ["LogFile", "CorruptRecordError", "DEFAULT_MAX_MESSAGE_SIZE"]
