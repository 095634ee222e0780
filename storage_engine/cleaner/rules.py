"""The cleaner's keep-or-drop rules, pure (no I/O): what a header scan learns about producers
(:class:`ProducerStateBuilder`: aborted transactions, each producer's last batch, the last
stable offset), transactions as the cleaner walks them (:class:`TransactionTracker`, Kafka's
``CleanedTransactionMetadata``), and the batch and record verdicts (:func:`batch_retention`,
:func:`retain_record`: Kafka's ``checkBatchRetention`` and ``shouldRetainRecord``).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum, IntEnum

from ..index import AbortedTxn
from ..log.aborted_txns import AbortedTxnTracker
from ..record.control import ControlRecordType
from ..record.records import BatchHeader


@dataclass(frozen=True)
class LastRecord:
    """Kafka's ``LastRecord`` of an active producer: the last offset of its last data batch (None
    when it has only markers in the log) and its latest epoch."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass
class ProducerSnapshot:
    """What a header scan of the whole log says about producers (our stand-in for Kafka's
    producer state manager and ``.txnindex`` files)."""

    aborted: list[AbortedTxn]
    last_records: dict[int, LastRecord]
    open_transactions: dict[int, int]  # producer id -> first offset of its undecided transaction
    last_stable_offset: int

    def aborted_overlapping(self, start: int, end: int) -> list[AbortedTxn]:
        """Kafka's ``collectAbortedTransactions(start, end)``."""
        return [a for a in self.aborted if a.last_offset >= start and a.first_offset < end]


class ProducerStateBuilder:
    """Feed every batch header of the log in offset order (with the control record type of control
    batches); get the producer facts the cleaner needs.

    An ABORT marker (control type 0) aborts its producer's transactional batches since that
    producer's previous marker; a COMMIT marker (type 1) commits them. Transactional batches
    with no marker yet form an open transaction, and the first offset of the oldest one is the
    last stable offset: the cleaner never goes beyond it. An empty control batch (a
    marker whose transaction compaction already removed) changes nothing, as in Kafka. The
    aborted transactions are the ``.txnindex`` entries the appender wrote for them
    (``AbortedTxnTracker``, the one rule), so the cleaner re-appends them as they were.
    """

    def __init__(self) -> None:
        self._aborted: list[AbortedTxn] = []
        self._txns = AbortedTxnTracker()
        self._last_data: dict[int, int] = {}
        self._epoch: dict[int, int] = {}

    def observe(self, header: BatchHeader, control_type: int | None = None) -> None:
        pid = header.producer_id
        if header.magic < 2 or pid < 0:
            return
        if header.is_control and control_type is None:
            return
        self._epoch[pid] = header.producer_epoch
        if not header.is_control:
            self._last_data[pid] = header.last_offset
        aborted = self._txns.observe(header, control_type)
        if aborted is not None:
            self._aborted.append(aborted)

    def snapshot(self, log_end_offset: int) -> ProducerSnapshot:
        last = {pid: LastRecord(self._last_data.get(pid), epoch) for pid, epoch in self._epoch.items()}
        open_txns = dict(self._txns.ongoing)
        lso = min(open_txns.values(), default=log_end_offset)
        return ProducerSnapshot(list(self._aborted), last, open_txns, min(lso, log_end_offset))


def is_last_batch_of_active_producer(header: BatchHeader, last_records: dict[int, LastRecord]) -> bool:
    """Kafka's ``isBatchLastRecordOfProducer``: the batch holding the producer's last data offset
    (it carries the last sequence number), or, for a producer with only markers, its marker of
    the current epoch (it carries the epoch fencing needs)."""
    if header.producer_id < 0:
        return False
    last = last_records.get(header.producer_id)
    if last is None:
        return False
    if last.last_data_offset is not None:
        return header.last_offset == last.last_data_offset
    return header.is_control and header.producer_epoch == last.producer_epoch


class TransactionTracker:
    """Kafka's ``CleanedTransactionMetadata``: transaction state while batches stream past.

    ``on_data_batch`` says whether a data batch belongs to an aborted transaction (then it can
    go); ``on_control_batch`` whether a marker can go: an ABORT marker once no batch of its
    transaction is left, a COMMIT marker when no batch of its transaction was seen in this
    pass. Markers are still kept until their own delete horizon (see :func:`batch_retention`).
    """

    def __init__(self, aborted: Iterable[AbortedTxn] = ()) -> None:
        self._pending: list[tuple[int, int, AbortedTxn]] = []
        for n, txn in enumerate(aborted):
            heapq.heappush(self._pending, (txn.first_offset, n, txn))
        self._aborted_ongoing: dict[int, list] = {}  # pid -> [txn, last observed batch offset or None]
        self._committed_ongoing: set[int] = set()
        self.retained_aborted: list[AbortedTxn] = []  # ABORT markers kept: the cleaned .txnindex

    def _consume_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0][0] <= offset:
            _, _, txn = heapq.heappop(pending)
            self._aborted_ongoing.setdefault(txn.producer_id, [txn, None])

    def on_control_batch(self, header: BatchHeader, control_type: int | None) -> bool:
        self._consume_up_to(header.last_offset)
        if control_type is None:
            return True  # an empty control batch was already cleaned
        pid = header.producer_id
        if control_type == ControlRecordType.ABORT:
            ongoing = self._aborted_ongoing.pop(pid, None)
            if ongoing is not None and ongoing[1] is not None:
                self.retained_aborted.append(ongoing[0])
                return False
            return True
        if control_type == ControlRecordType.COMMIT:
            if pid in self._committed_ongoing:
                self._committed_ongoing.discard(pid)
                return False
            return True
        return False

    def on_data_batch(self, header: BatchHeader) -> bool:
        self._consume_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self._aborted_ongoing.get(header.producer_id)
        if ongoing is not None:
            ongoing[1] = header.last_offset
            return True
        self._committed_ongoing.add(header.producer_id)
        return False


class BatchRetention(Enum):
    """Kafka's ``BatchRetention``."""

    DELETE = "delete"  # drop the batch without looking at its records
    DELETE_EMPTY = "delete-empty"  # drop it if no record survives
    RETAIN_EMPTY = "retain-empty"  # keep at least an empty header (offsets, producer state)


def batch_retention(
    header: BatchHeader,
    *,
    can_discard: bool,
    last_of_active_producer: bool,
    last_of_round: bool,
    now_ms: int,
) -> tuple[BatchRetention, bool]:
    """Kafka's ``checkBatchRetention``: the batch's fate and whether its records must all
    go (``discard_records``). ``can_discard`` comes from :class:`TransactionTracker`: for a data
    batch it means "part of an aborted transaction"; a discardable marker still stays until its
    own delete horizon has passed."""
    if header.is_control:
        horizon = header.delete_horizon_ms
        discard_records = can_discard and horizon is not None and horizon <= now_ms
    else:
        discard_records = can_discard
    if header.has_producer_id and last_of_active_producer:
        return BatchRetention.RETAIN_EMPTY, discard_records
    if last_of_round:
        return BatchRetention.RETAIN_EMPTY, discard_records
    if discard_records:
        return BatchRetention.DELETE, True
    return BatchRetention.DELETE_EMPTY, False


# Why a record was dropped (or kept): the counters of the cleaner's report.
class RecordOutcome(IntEnum):
    """What :func:`retain_record` decides for one record: kept, or why it goes (the counters
    of ``CleanerStats`` follow the reason)."""

    KEEP = 0
    DROP_DUPLICATE = 1
    DROP_TOMBSTONE = 2
    DROP_UNKEYED = 3


def retain_record(
    offset: int,
    key: bytes | None,
    is_tombstone: bool,
    *,
    latest_offset_of_key: int,
    map_latest_offset: int,
    retain_tombstones: bool,
) -> RecordOutcome:
    """Kafka's ``shouldRetainRecord`` for a record of a batch that is neither deleted nor discarded:
    ``RecordOutcome.KEEP`` or the reason it goes.

    Records beyond the map's reach are kept whatever they hold; a record without a key goes; a
    keyed record stays if it is the latest for its key (``latest_offset_of_key`` is -1 for a key
    the map does not know) and, if a tombstone, while ``retain_tombstones`` (for magic 2: the
    batch has no delete horizon yet, or now is before it; for magic 0/1: its segment's mtime is
    above the legacy horizon).
    """
    if offset > map_latest_offset:
        return RecordOutcome.KEEP
    if key is None:
        return RecordOutcome.DROP_UNKEYED
    if offset < latest_offset_of_key:
        return RecordOutcome.DROP_DUPLICATE
    if is_tombstone and not retain_tombstones:
        return RecordOutcome.DROP_TOMBSTONE
    return RecordOutcome.KEEP


def retain_versioned_record(
    offset: int,
    key: bytes | None,
    is_tombstone: bool,
    version: int,
    *,
    winner: tuple[int, int] | None,
    map_latest_offset: int,
    retain_tombstones: bool,
    newest: tuple[bytes, int, int] | None = None,
) -> tuple[RecordOutcome, bool]:
    """:func:`retain_record` under a version strategy (KIP-280, see ``strategy.py``): the verdict,
    and whether this record displaces ``winner``, its key's ``(version, offset)`` in the map.

    A record is compared as ``(version, offset)``. One below the winner goes as a duplicate,
    unless it is the newest record the round mapped (``map_latest_offset``), which stays
    whatever its version so the log end never moves. One above the winner can only come from
    the clean section (the map holds the dirty section's best), and it then becomes the winner,
    so the dirty section's record of that key goes when the recopy reaches it. A winning
    tombstone still goes after its delete horizon, and still displaces what it beat, except
    while the newest record (``newest``: the last one mapped, its key, version and offset, when
    that is ``map_latest_offset``) is a lower version of the same key: that one stays, and
    without the tombstone before it, it would bring the deleted key back. The tombstone goes in
    a later pass, once that record has lost again.
    """
    if offset > map_latest_offset:
        return RecordOutcome.KEEP, False
    if key is None:
        return RecordOutcome.DROP_UNKEYED, False
    mine = (version, offset)
    if winner is not None and mine < winner:
        return (RecordOutcome.KEEP if offset == map_latest_offset else RecordOutcome.DROP_DUPLICATE), False
    beats = winner is not None and mine > winner
    shadows_newest = (newest is not None and newest[2] == map_latest_offset and newest[0] == key
                      and newest[1] < version)
    if is_tombstone and not retain_tombstones and not shadows_newest:
        return RecordOutcome.DROP_TOMBSTONE, beats
    return RecordOutcome.KEEP, beats


def retain_tombstones_v2(header: BatchHeader, now_ms: int) -> bool:
    """KIP-534: a tombstone stays until the delete horizon stamped in its batch has passed."""
    horizon = header.delete_horizon_ms
    return horizon is None or now_ms < horizon
