"""Hash codes of the JVM, and the iteration order of Scala 2.13's ``mutable.HashMap`` and
``mutable.HashSet``: what Kafka's Scala tools print in the order they print it.

``string_hash`` is ``String.hashCode`` (over UTF-16 code units); ``topic_partition_hash`` is
``TopicPartition.hashCode``. A Scala 2.13 mutable hash table keeps each bucket's nodes sorted by
their improved hash (``h ^ (h >>> 16)``, compared as signed ints; equal hashes in insertion
order), and a resize splits buckets keeping that order; so the iteration order is fixed by the
table's final length: bucket index, then improved hash, then insertion. ``ScalaHashTable``
follows the length (``put0``'s growth before every put, ``sizeHint`` before ``addAll``,
``addAll`` of an immutable ``HashSet`` without growth checks) and gives the order.
(``java.util.HashMap``'s order is ``log/javahash.py``'s.)
"""

from __future__ import annotations

from typing import Callable, Dict, Generic, Hashable, Iterable, List, TypeVar

K = TypeVar("K", bound=Hashable)

_LOAD_FACTOR = 0.75


def int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def string_hash(s: str) -> int:
    """java.lang.String.hashCode."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return int32(h)


def topic_partition_hash(topic: str, partition: int) -> int:
    """org.apache.kafka.common.TopicPartition.hashCode."""
    return int32(31 * (31 + partition) + string_hash(topic))


def improve_hash(h: int) -> int:
    """Scala's (and HashMap.hash's) spreading: h ^ (h >>> 16), a signed int."""
    h &= 0xFFFFFFFF
    return int32(h ^ (h >> 16))


def _table_size_for(capacity: int) -> int:
    """scala.collection.mutable.HashMap/HashSet.tableSizeFor: a power of two, at least 4."""
    n = 4
    while n < capacity:
        n *= 2
    return n


class ScalaHashTable(Generic[K]):
    """The keys of a Scala 2.13 ``mutable.HashMap``/``HashSet`` created empty (16 buckets), in
    its iteration order (``order``)."""

    def __init__(self) -> None:
        self.length = 16
        self.threshold = int(self.length * _LOAD_FACTOR)
        self.hashes: Dict[K, int] = {}  # insertion order

    def _grow(self, length: int) -> None:
        self.length = length
        self.threshold = int(length * _LOAD_FACTOR)

    def put(self, key: K, hash_code: int) -> None:
        """HashMap.put/update, HashSet.add (put0/add: the growth check comes first, for a key
        already there too)."""
        if len(self.hashes) + 1 >= self.threshold:
            self._grow(self.length * 2)
        self.hashes.setdefault(key, improve_hash(hash_code))

    def size_hint(self, size: int) -> None:
        target = _table_size_for(int((size + 1) / _LOAD_FACTOR))
        if target > self.length:
            self._grow(target)

    def add_all(self, items: List[K], hash_of: Callable[[K], int]) -> None:
        """HashSet.addAll (``++=``) of an immutable Set built from ``items`` (``toSet``): up to
        4 items it is a Set1..Set4, added one by one; more make an immutable.HashSet, whose
        elements are added without growth checks."""
        distinct = list(dict.fromkeys(items))
        self.size_hint(len(distinct))
        if len(distinct) <= 4:
            for item in distinct:
                self.put(item, hash_of(item))
        else:
            for item in distinct:
                self.hashes.setdefault(item, improve_hash(hash_of(item)))

    def order(self) -> List[K]:
        mask = self.length - 1
        keys = list(self.hashes)
        rank = {k: i for i, k in enumerate(keys)}
        return sorted(keys, key=lambda k: (self.hashes[k] & mask, self.hashes[k], rank[k]))


def scala_string_map_order(puts: Iterable[str]) -> List[str]:
    """The keys of a Scala ``mutable.Map[String, _]`` after ``put`` of each of ``puts`` (keys
    may repeat: each put is one), in its iteration order."""
    table: ScalaHashTable[str] = ScalaHashTable()
    for key in puts:
        table.put(key, string_hash(key))
    return table.order()
