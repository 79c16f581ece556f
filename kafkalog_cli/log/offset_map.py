"""The log cleaner's offset map (SkimpyOffsetMap): the MD5 digest of each key to the last
offset seen for it. Kafka's holds at most log.cleaner.dedupe.buffer.size bytes (24 a slot);
``_speedups.OffsetMap`` is the C mirror of this one, in as many bytes (a table of 24-byte slots
that grows up to ``max_slots``), where this one is a dict."""

from __future__ import annotations

from typing import Dict, Optional, Type, cast

from ..format.speedups import speedups



class OffsetMap:
    """{16-byte digest: offset}: ``put``, ``get`` (-1 when absent), ``len``. ``max_slots``:
    the slots of the broker's map; a map never holds that many (OverflowError)."""

    def __init__(self, max_slots: int) -> None:
        if max_slots < 1:
            raise ValueError("an offset map needs a slot")
        self.max_slots = max_slots
        self._map: Dict[bytes, int] = {}

    def put(self, digest: bytes, offset: int) -> None:
        if len(digest) != 16:
            raise ValueError("an offset map key is a 16-byte digest")
        if offset < 0:
            raise ValueError("an offset map holds offsets >= 0")
        if digest not in self._map and len(self._map) + 1 >= self.max_slots:
            raise OverflowError("the offset map is full")
        self._map[digest] = offset

    def get(self, digest: bytes) -> int:
        if len(digest) != 16:
            raise ValueError("an offset map key is a 16-byte digest")
        return self._map.get(digest, -1)

    def __len__(self) -> int:
        return len(self._map)


# the C mirror (format/speedups.py)
_COffsetMap: Optional[type] = None if speedups is None else speedups.OffsetMap


def new_offset_map(max_slots: int) -> OffsetMap:
    """An offset map of at most ``max_slots`` slots: the C one when built (the same methods)."""
    cls: Type = _COffsetMap if _COffsetMap is not None else OffsetMap
    return cast(OffsetMap, cls(max_slots))


__all__ = ["OffsetMap", "new_offset_map"]
