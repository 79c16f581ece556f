"""A partition's producer state, kept as the broker keeps it (ProducerStateManager,
ProducerAppendInfo, ProducerStateEntry), and its snapshot files (``<offset>.snapshot``).

The state is built by replaying batches as a broker loading its log does (origin REPLICATION:
sequence gaps are not errors, an older producer epoch is only logged): per producer id, the
epoch, the last data batch (last sequence, last offset, offset delta, timestamp), the last
timestamp, the coordinator epoch of its last marker and the first offset of its open
transaction. The open transactions (ProducerStateManager's ``ongoingTxns``) are an
``indexbuild.TxnTracker``, which also gives an aborted transaction's ``.txnindex`` entry with
its last stable offset: the rule lives there, once.

Snapshots are written byte for byte as ProducerStateManager.writeSnapshot writes them: the
ProducerSnapshot message (version 1), its CRC-32C over the bytes after the CRC, the entries in
the iteration order of the broker's ``HashMap<Long, ProducerStateEntry>`` (``javahash``).
They are read by ``snapshot.read_snapshot``.
"""

from __future__ import annotations

import os
from collections import deque
from typing import (Deque, Dict, Iterable, Iterator, List, NamedTuple, Optional,
                    Sequence, Tuple)

from ..format.crc import crc32c

from ..errors import InvalidDataError
from ..format import control
from ..format.errors import CorruptRecordError
from ..format.records import Batch
from . import names
from .javahash import JavaHashOrder, java_hash_order
from .indexbuild import AbortedEntry, TxnTracker, write_atomically, write_new
from .segment import DEFAULT_MAX_MESSAGE_SIZE, LogFile, Segment
from .files import FileFormatError
from .snapshot import ENTRY, HEADER, ProducerEntry, read_snapshot

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
SNAPSHOT_VERSION = 1                         # ProducerSnapshot.HIGHEST_SUPPORTED_VERSION
NUM_BATCHES_TO_RETAIN = 5                    # ProducerStateEntry.NUM_BATCHES_TO_RETAIN
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86400000  # producer.id.expiration.ms


class InvalidTxnStateError(InvalidDataError):
    """A non-transactional data batch from a producer with an open transaction: the broker's
    ProducerAppendInfo.appendDataBatch throws InvalidTxnStateException for it (whatever the
    origin), and the producer's state is left as it was."""


class InvalidProducerEpochError(InvalidDataError):
    """A batch or marker whose producer epoch is below the producer's
    (InvalidProducerEpochException: refused from a client or a coordinator)."""


class OutOfOrderSequenceError(InvalidDataError):
    """A client's batch whose first sequence does not follow the producer's last one
    (OutOfOrderSequenceException)."""


class CoordinatorFencedError(InvalidDataError):
    """A marker whose coordinator epoch is below the one the producer's last marker carried
    (TransactionCoordinatorFencedException)."""


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """ProducerAppendInfo.inSequence: ``next_seq`` follows ``last_seq``, 0 following
    Integer.MAX_VALUE."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == 0x7FFFFFFF)


class BatchMetadata(NamedTuple):
    """One retained data batch of a producer (Kafka's BatchMetadata)."""
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        """lastSeq - offsetDelta, continuing from Integer.MAX_VALUE below 0
        (DefaultRecordBatch.decrementSequence)."""
        seq = self.last_seq - self.offset_delta
        return seq + 0x80000000 if seq < 0 else seq

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class EndMarker(NamedTuple):
    """The first record of a control batch read as an end transaction marker
    (EndTransactionMarker.deserialize): its type, coordinator epoch and the record's timestamp."""
    aborted: bool
    coordinator_epoch: int
    timestamp: int


class ProducerStateEntry:
    """One producer's state (Kafka's ProducerStateEntry): the last NUM_BATCHES_TO_RETAIN data
    batches of its current epoch, and what its markers left."""

    __slots__ = ("producer_id", "epoch", "coordinator_epoch", "last_timestamp",
                 "current_txn_first_offset", "batches")

    def __init__(self, producer_id: int, epoch: int = NO_PRODUCER_EPOCH,
                 coordinator_epoch: int = -1, last_timestamp: int = NO_TIMESTAMP,
                 current_txn_first_offset: Optional[int] = None,
                 batch: Optional[BatchMetadata] = None) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self.batches: Deque[BatchMetadata] = deque(() if batch is None else (batch,))

    @classmethod
    def from_snapshot(cls, entry: ProducerEntry) -> "ProducerStateEntry":
        """The state a snapshot entry stands for (ProducerStateManager.readSnapshot): batch
        metadata only when its last offset is >= 0, an open transaction only when its first
        offset is >= 0."""
        batch = (BatchMetadata(entry.last_sequence, entry.last_offset, entry.offset_delta,
                               entry.timestamp) if entry.last_offset >= 0 else None)
        txn = entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else None
        return cls(entry.producer_id, entry.epoch, entry.coordinator_epoch, entry.timestamp,
                   txn, batch)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def maybe_update_epoch(self, epoch: int) -> None:
        """A new epoch forgets the batches of the old one (maybeUpdateProducerEpoch)."""
        if self.epoch != epoch:
            self.batches.clear()
            self.epoch = epoch

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int,
                  timestamp: int) -> None:
        """A data batch (ProducerStateEntry.addBatch)."""
        self.maybe_update_epoch(epoch)
        if len(self.batches) == NUM_BATCHES_TO_RETAIN:
            self.batches.popleft()
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def end_transaction(self, epoch: int, coordinator_epoch: int, timestamp: int) -> None:
        """An end marker (ProducerStateEntry.update(epoch, coordinatorEpoch, timestamp))."""
        self.maybe_update_epoch(epoch)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = None
        self.last_timestamp = timestamp

    def snapshot_entry(self) -> ProducerEntry:
        """The entry ProducerStateManager.writeSnapshot writes for this producer."""
        txn = self.current_txn_first_offset
        return ProducerEntry(self.producer_id, self.epoch, self.last_seq, self.last_data_offset,
                             self.last_offset_delta, self.last_timestamp, self.coordinator_epoch,
                             -1 if txn is None else txn)

    def __repr__(self) -> str:
        return ("ProducerStateEntry(producer_id=%d, epoch=%d, last_seq=%d, last_offset=%d, "
                "coordinator_epoch=%d, last_timestamp=%d, current_txn_first_offset=%r)"
                % (self.producer_id, self.epoch, self.last_seq, self.last_data_offset,
                   self.coordinator_epoch, self.last_timestamp, self.current_txn_first_offset))


# -- the state -----------------------------------------------------------------------------------

class ProducerState:
    """A partition's producers (ProducerStateManager): ``producers`` in the order the broker's
    map holds them, the open transactions (``txns``, a TxnTracker), ``end_offset`` (the offset
    up to which the state is built: ``mapEndOffset``) and ``snapshot_offset`` (the offset of
    the last snapshot taken: ``lastSnapOffset``)."""

    def __init__(self, expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        self.expiration_ms = expiration_ms
        self.producers: Dict[int, ProducerStateEntry] = {}
        self._table = JavaHashOrder()
        self.txns = TxnTracker()
        self.end_offset = 0
        self.snapshot_offset = 0

    # -- loading --------------------------------------------------------------------------------

    def is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        """ProducerStateManager.isProducerExpired: no open transaction, and its last timestamp
        at least producer.id.expiration.ms before ``now_ms``."""
        return (entry.current_txn_first_offset is None
                and now_ms - entry.last_timestamp >= self.expiration_ms)

    def _add(self, entry: ProducerStateEntry) -> None:
        self.producers[entry.producer_id] = entry
        self._table.put(entry.producer_id)

    def load(self, entries: Iterable[ProducerEntry], offset: int, now_ms: int) -> None:
        """Start from a snapshot taken at ``offset`` (its entries, as snapshot.read_snapshot
        gives them), as ProducerStateManager.loadFromSnapshot does: the producers that have
        expired by ``now_ms`` are dropped, the others added in the file's order with their open
        transactions; the state is then built up to ``offset``."""
        for e in entries:
            entry = ProducerStateEntry.from_snapshot(e)
            if self.is_expired(entry, now_ms):
                continue
            self._add(entry)
            if entry.current_txn_first_offset is not None:
                self.txns.data(entry.producer_id, entry.current_txn_first_offset)
        self.end_offset = self.snapshot_offset = offset

    def remove_expired(self, now_ms: int) -> None:
        """ProducerStateManager.removeExpiredProducers (the broker's periodic check)."""
        for pid in [p for p, e in self.producers.items() if self.is_expired(e, now_ms)]:
            del self.producers[pid]
            self._table.remove(pid)

    # -- checks of a new write (origins CLIENT and COORDINATOR) -------------------------------

    def _entry(self, producer_id: int) -> ProducerStateEntry:
        return self.producers.get(producer_id) or ProducerStateEntry(producer_id)

    def _check_epoch(self, entry: ProducerStateEntry, epoch: int, offset: int) -> None:
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                "Epoch of producer %d at offset %d is %d, which is smaller than the last seen "
                "epoch %d" % (entry.producer_id, offset, epoch, entry.epoch))

    def find_duplicate(self, producer_id: int, epoch: int, first_seq: int,
                       last_seq: int) -> Optional[BatchMetadata]:
        """The retained batch a client's batch repeats (ProducerStateEntry.findDuplicateBatch:
        same epoch, same first and last sequence): the broker does not append it again but
        answers with that batch's offsets. None when it is new."""
        entry = self.producers.get(producer_id)
        if entry is None or entry.epoch != epoch:
            return None
        for batch in entry.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def check_client_batch(self, producer_id: int, epoch: int, first_seq: int,
                           offset: int) -> None:
        """A data batch from a client, to be written at ``offset``
        (ProducerAppendInfo.maybeValidateDataBatch with origin CLIENT): raises
        InvalidProducerEpochError for an older epoch and OutOfOrderSequenceError for a first
        sequence that does not follow the producer's last one (a new epoch starts at 0; a
        producer never seen takes any). Changes nothing."""
        entry = self._entry(producer_id)
        self._check_epoch(entry, epoch, offset)
        if epoch != entry.epoch:
            if first_seq != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    "Invalid sequence number for new epoch of producer %d at offset %d: %d "
                    "(request epoch), %d (seq. number), %d (current producer epoch)"
                    % (producer_id, offset, epoch, first_seq, entry.epoch))
        elif not (entry.epoch == NO_PRODUCER_EPOCH or in_sequence(entry.last_seq, first_seq)):
            raise OutOfOrderSequenceError(
                "Out of order sequence number for producer %d at offset %d: %d (incoming seq. "
                "number), %d (current end sequence number)"
                % (producer_id, offset, first_seq, entry.last_seq))

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int,
                     offset: int) -> None:
        """An end marker from the transaction coordinator, to be written at ``offset``
        (ProducerAppendInfo.appendEndTxnMarker with origin COORDINATOR): raises
        InvalidProducerEpochError for an older producer epoch, CoordinatorFencedError for an
        older coordinator epoch. Changes nothing."""
        entry = self._entry(producer_id)
        self._check_epoch(entry, epoch, offset)
        if entry.coordinator_epoch > coordinator_epoch:
            raise CoordinatorFencedError(
                "Invalid coordinator epoch for producerId %d at offset %d: %d (zombie), %d "
                "(current)" % (producer_id, offset, coordinator_epoch, entry.coordinator_epoch))

    # -- replay ---------------------------------------------------------------------------------

    def _apply(self, entry: ProducerStateEntry, batch: Batch,
               marker: Optional[EndMarker]) -> Optional[AbortedEntry]:
        """ProducerAppendInfo.append of one batch onto ``entry``; the aborted transaction's
        .txnindex entry, or None."""
        pid = batch.producer_id
        if batch.is_control:
            if marker is None:
                return None  # an empty control batch: its transaction was cleaned away
            aborted = None
            if entry.current_txn_first_offset is not None:
                aborted = self.txns.marker(pid, batch.base_offset, marker.aborted)
            entry.end_transaction(batch.producer_epoch, marker.coordinator_epoch,
                                  marker.timestamp)
            return aborted
        if entry.current_txn_first_offset is not None and not batch.is_transactional:
            raise InvalidTxnStateError(
                "Expected transactional write from producer %d at offset %d"
                % (pid, batch.base_offset))
        entry.add_batch(batch.producer_epoch, batch.last_sequence, batch.last_offset,
                        batch.last_offset - batch.base_offset, batch.max_timestamp)
        if entry.current_txn_first_offset is None and batch.is_transactional:
            entry.current_txn_first_offset = batch.base_offset
            self.txns.data(pid, batch.base_offset)
        return None

    def append(self, batch: Batch, marker: Optional[EndMarker] = None) -> Optional[AbortedEntry]:
        """One v2 batch, as LogSegment.recover's updateProducerState replays it (and
        UnifiedLog.append after it is written): a batch of a producer (producer id >= 0)
        updates that producer; ``marker`` is a control batch's first record (None for an empty
        control batch). Returns the .txnindex entry of an aborted (non-empty) transaction it
        ends. The state then reaches the batch's last offset + 1."""
        aborted = None
        if batch.producer_id >= 0:
            entry = self.producers.get(batch.producer_id)
            new = entry is None
            if entry is None:
                entry = ProducerStateEntry(batch.producer_id)
            aborted = self._apply(entry, batch, marker)
            if new:
                self._add(entry)
        self.end_offset = batch.last_offset + 1
        return aborted

    def replay(self, batches: Iterable[Tuple[Batch, Optional[EndMarker]]]) -> List[AbortedEntry]:
        """The batches of one read of a segment, as UnifiedLog.loadProducersFromRecords replays
        them when it rebuilds the state: the producers first seen in the read join the state
        after it, in the iteration order of the read's own HashMap of every producer it saw.
        Returns the aborted transactions' entries (which rebuilding does not write to any
        .txnindex)."""
        aborted: List[AbortedEntry] = []
        fresh: Dict[int, ProducerStateEntry] = {}
        seen: Dict[int, None] = {}  # the read's map, in the order its keys were put
        for batch, marker in batches:
            if batch.producer_id < 0:
                continue
            pid = batch.producer_id
            seen[pid] = None
            entry = self.producers.get(pid) or fresh.get(pid)
            if entry is None:
                entry = fresh[pid] = ProducerStateEntry(pid)
            entry_aborted = self._apply(entry, batch, marker)
            if entry_aborted is not None:
                aborted.append(entry_aborted)
        for pid in java_hash_order(seen):
            if pid in fresh:
                self._add(fresh[pid])
        return aborted

    # -- snapshots ------------------------------------------------------------------------------

    def snapshot_entries(self) -> List[ProducerEntry]:
        """The entries of a snapshot of this state, in the order the broker writes them."""
        return [self.producers[pid].snapshot_entry() for pid in self._table.order()]

    def snapshot_bytes(self) -> bytes:
        """The snapshot file of this state (ProducerStateManager.writeSnapshot)."""
        entries = self.snapshot_entries()
        body = bytearray(HEADER.size + ENTRY.size * len(entries))
        HEADER.pack_into(body, 0, SNAPSHOT_VERSION, 0, len(entries))
        for i, e in enumerate(entries):
            ENTRY.pack_into(body, HEADER.size + i * ENTRY.size, e.producer_id, e.epoch,
                            e.last_sequence, e.last_offset, e.offset_delta, e.timestamp,
                            e.coordinator_epoch, e.current_txn_first_offset)
        HEADER.pack_into(body, 0, SNAPSHOT_VERSION, crc32c(memoryview(body)[6:]), len(entries))
        return bytes(body)

    def take_snapshot(self) -> Optional[Tuple[int, bytes]]:
        """(offset, bytes) of the snapshot ProducerStateManager.takeSnapshot writes now, or
        None when the state has not moved past the last snapshot's offset."""
        if self.end_offset <= self.snapshot_offset:
            return None
        self.snapshot_offset = self.end_offset
        return self.end_offset, self.snapshot_bytes()


# -- reading the log -----------------------------------------------------------------------------

def end_marker(log: LogFile, batch: Batch) -> Optional[EndMarker]:
    """The first record of control ``batch`` read as an end transaction marker, None when the
    batch holds no record. Raises CorruptRecordError when it is not one
    (EndTransactionMarker.deserialize: an ABORT or COMMIT key, a marker value)."""
    for recs in log.iter_records(batch):
        if not len(recs):
            continue
        type_id = control.control_type(recs.keys[0])
        if type_id not in (control.ABORT, control.COMMIT):
            raise CorruptRecordError("control record type %d is not an end transaction marker"
                                     % type_id)
        _, coordinator_epoch = control.end_txn_marker(recs.values[0])
        return EndMarker(type_id == control.ABORT, coordinator_epoch, recs.timestamps[0])
    return None


def producer_batches(log: LogFile, start: int = 0, end: Optional[int] = None,
                     end_position: Optional[int] = None,
                     positions: Optional[Sequence[int]] = None
                     ) -> Iterator[Tuple[Batch, Optional[EndMarker]]]:
    """The v2 batches of producers (producer id >= 0) in ``log`` whose last offset is in
    ``[start, end)``, each with its end marker when it is a control batch: what
    LogSegment.read gives UnifiedLog.rebuildProducerState, read header by header
    (LogFile.headers: the records of a control batch only are read; no CRC is checked, as the
    broker's rebuild checks none). ``end_position``: where the segment is to be cut (the
    rebuild follows its recovery, which truncated it there). ``positions``: where the
    segment's batches of producers are, all of them, in order, known from its recovery scan
    (``SegmentScan.producer_positions``): only those are read."""
    for batch in (log.headers() if positions is None else log.headers_at(positions)):
        if end_position is not None and batch.position >= end_position:
            return
        if batch.last_offset < start or batch.magic < 2 or batch.producer_id < 0:
            continue
        if end is not None and batch.last_offset >= end:
            return
        yield batch, (end_marker(log, batch) if batch.is_control else None)


class Rebuilt(NamedTuple):
    """What ``rebuild`` and ``load_state`` give: the state, the snapshots (offset, bytes) the
    broker takes along the way (the last at the end offset), and the offsets of the snapshot
    files it deletes (``load_state`` only: out of range, or corrupt)."""
    state: ProducerState
    snapshots: List[Tuple[int, bytes]]
    removed: List[int]


def rebuild(segments: Sequence[Segment], up_to: int, *, state: Optional[ProducerState] = None,
            log_start_offset: int = 0,
            max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
            snapshot_at: Iterable[int] = (),
            cut_at: Optional[Dict[int, int]] = None,
            known: Optional[Dict[str, List[int]]] = None) -> Rebuilt:
    """The producer state at offset ``up_to`` (UnifiedLog.rebuildProducerState after a
    snapshot was loaded): from ``state`` (one loaded from a snapshot with ``load``; a new
    one, built from ``log_start_offset``, when None), the batches of ``segments`` (a
    partition's, oldest first) from the state's end offset to ``up_to`` are replayed one
    segment at a time. A snapshot is taken on reaching the base offset of each of the last two
    segments, and at ``up_to``; also on reaching each segment base offset in ``snapshot_at``
    (the snapshots LogLoader.recoverSegment takes around the segments it recovers). Raises
    CorruptRecordError for a control batch that does not hold an end marker,
    InvalidTxnStateError as the broker's loading fails. ``cut_at``: {segment base offset: byte
    position} of the segments a recovery is about to cut there, read up to it. ``known``:
    {.log path: the positions of its batches of producers} of the segments a recovery has just
    scanned (``producer_batches``' ``positions``)."""
    if state is None:
        state = ProducerState()
        state.end_offset = state.snapshot_offset = log_start_offset
    bases = [s.base_offset for s in segments if s.base_offset is not None]
    snap_at = set(bases[-2:]) | set(snapshot_at)
    taken: List[Tuple[int, bytes]] = []
    if up_to > state.end_offset:
        for segment, next_base in zip(segments, bases[1:] + [None]):
            base = segment.base_offset
            assert base is not None
            if (next_base is not None and next_base <= state.end_offset) or base >= up_to:
                continue  # LogSegments.values(mapEndOffset, lastOffset)
            state.end_offset = max(base, state.end_offset, log_start_offset)
            if base in snap_at:
                snap = state.take_snapshot()
                if snap is not None:
                    taken.append(snap)
            with segment.open(max_message_size) as log:
                state.replay(producer_batches(log, state.end_offset, up_to,
                                              (cut_at or {}).get(base),
                                              (known or {}).get(segment.log_path)))
    state.end_offset = up_to
    snap = state.take_snapshot()
    if snap is not None:
        taken.append(snap)
    return Rebuilt(state, taken, [])


def load_state(segments: Sequence[Segment], snapshots: Sequence[Tuple[int, str]], up_to: int,
               now_ms: int, *, log_start_offset: Optional[int] = None,
               clean_shutdown: bool = False,
               expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
               max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
               snapshot_at: Iterable[int] = (),
               cut_at: Optional[Dict[int, int]] = None,
               known: Optional[Dict[str, List[int]]] = None) -> Rebuilt:
    """The producer state of a partition at ``up_to`` (its log end offset) as the broker's
    log loading builds it (UnifiedLog.rebuildProducerState on a new ProducerStateManager):
    ``segments`` oldest first, ``snapshots`` the (offset, path) of its snapshot files
    (Partition.snapshot_paths), ``log_start_offset`` None for the first segment's base.

    - No snapshot after a clean shutdown: nothing is replayed; empty snapshots are taken at
      the base offsets of the last two segments and at ``up_to``.
    - Otherwise the snapshots above ``up_to`` or at or below the log start offset are removed
      (ProducerStateManager.truncateAndReload), the newest readable one is loaded with
      producers expired at ``now_ms`` dropped (a corrupt one is removed and the next older one
      tried), and the batches after it are replayed (``rebuild``, with snapshots taken at
      the base offsets in ``snapshot_at`` too).

    Nothing is written or deleted here: the caller writes ``snapshots`` and deletes
    ``removed``."""
    if log_start_offset is None:
        first = segments[0].base_offset if segments else None
        log_start_offset = 0 if first is None else first
    state = ProducerState(expiration_ms)
    if not snapshots and clean_shutdown:
        bases = [s.base_offset for s in segments if s.base_offset is not None]
        taken = []
        for offset in bases[-2:] + [up_to]:
            state.end_offset = offset
            snap = state.take_snapshot()
            if snap is not None:
                taken.append(snap)
        return Rebuilt(state, taken, [])
    removed = [off for off, _ in snapshots if off > up_to or off <= log_start_offset]
    candidates = [(off, path) for off, path in snapshots if off not in removed]
    state.end_offset = state.snapshot_offset = log_start_offset
    for off, path in sorted(candidates, reverse=True):
        try:
            entries = list(read_snapshot(path))
        except FileFormatError:
            removed.append(off)  # CorruptSnapshotException: deleted, the next older tried
            continue
        state.load(entries, off, now_ms)
        break
    rebuilt = rebuild(segments, up_to, state=state, log_start_offset=log_start_offset,
                      max_message_size=max_message_size, snapshot_at=snapshot_at,
                      cut_at=cut_at, known=known)
    return Rebuilt(rebuilt.state, rebuilt.snapshots, sorted(removed))


def stray_snapshots(snapshot_offsets: Iterable[int], segment_bases: Iterable[int]) -> List[int]:
    """The snapshots ProducerStateManager.removeStraySnapshots deletes after log loading:
    those whose offset is no segment's base offset, except the newest of them when it is
    above every segment's base offset."""
    bases = set(segment_bases)
    strays = sorted(off for off in set(snapshot_offsets) if off not in bases)
    if strays and (not bases or strays[-1] > max(bases)):
        strays.pop()
    return strays


def snapshot_path(directory: str, offset: int) -> str:
    return os.path.join(directory, names.offset_name(offset, names.SNAPSHOT))


def write_snapshot(directory: str, offset: int, data: bytes, replace: bool = True) -> str:
    """Write a snapshot's bytes (``ProducerState.snapshot_bytes`` or ``take_snapshot``) as
    ``<offset>.snapshot`` in ``directory`` through a flushed temporary file renamed into place
    (``replace``: over an existing one; else FileExistsError). Returns its path."""
    path = snapshot_path(directory, offset)
    (write_atomically if replace else write_new)(path, data)
    return path
