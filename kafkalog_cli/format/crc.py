"""CRC-32C, the checksum of v2 record batches (Kafka's Crc32C) and producer-state snapshots.

crc32c(data, value=0) is the CRC-32C of a bytes-like object, continuing from ``value`` (the CRC
of the bytes before it), as the `crc32c` package computes it. With the C fast path (_crc32c.c:
the CPU's CRC-32C instructions, else a table) the `crc32c` package is not even imported: its
import costs more than a dump of an empty segment. KAFKALOG_PURE_PYTHON=1, or no compiler at
install time, uses the package.
"""

from __future__ import annotations

import os

if not os.environ.get("KAFKALOG_PURE_PYTHON"):
    try:
        from ._crc32c import crc32c
    except ImportError:  # not built (no compiler at install time)
        from crc32c import crc32c
else:
    from crc32c import crc32c

__all__ = ["crc32c"]
