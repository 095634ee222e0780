"""Log compaction: Kafka's ``LogCleaner`` for one partition, crash-safe and optimistic.

The module has three layers, so a distributed job can reuse the first two unchanged:

1. **Rules** (pure, no I/O): :class:`ProducerStateBuilder` (what a header scan learns about
   producers: aborted transactions, each producer's last batch, the last stable offset),
   :class:`TransactionTracker` (Kafka's ``CleanedTransactionMetadata``), :func:`batch_retention`
   and :func:`retain_record` (``checkBatchRetention`` / ``shouldRetainRecord``), and
   :class:`BatchFilter`, which applies them to one batch's bytes and returns the bytes to write
   (Kafka's ``MemoryRecords.filterTo``). Retained records are copied as bytes: a batch whose
   records all survive and that needs no delete horizon is copied verbatim; otherwise the
   surviving records' bytes are concatenated under a new header (recompressed with the batch's
   codec when it has one). Only stamping a delete horizon rewrites a record, and then only its
   timestamp delta.
2. **Plan** (pure, in ``cleaner_plan.py``): the cleanable range, the dirty ratio, grouping.
3. **I/O** (:class:`Cleaner`): reads segments, writes replacement segments, swaps them in.

After map building, the map's offsets are exactly the dirty records that win their key, so a
dirty batch holding none of them is dropped without decompressing or walking it; with heavy
duplication most batches go that way.

A pass (Kafka's ``Cleaner.doClean``):

* under the partition lock, briefly: re-sync, then open every segment read-only (our own file
  descriptors: later swaps or appends by other processes do not disturb the read) and note
  each one's inode and size;
* without the lock: scan batch headers of the whole log (producer state, aborted
  transactions, the last stable offset), compute the range, build the offset map over the
  dirty section, and write the replacement segments, flushed, under the staging suffix
  ``.cleaning`` (loader.py deletes any ``.cleaned`` file it finds, which would destroy this
  output whenever another process reloads the log). A writer in another process keeps
  appending to the active segment meanwhile, and may roll;
* under the lock again: re-sync, check that every input segment is still on disk with the same
  inode and size (otherwise delete the staged files and raise ``LogChangedError``), then swap:
  ``.cleaning`` -> ``.cleaned``, then Kafka's steps: ``.cleaned`` -> ``.swap`` in descending
  base order (the commit point is the last of these renames: from then on a load completes the
  swap), fsync the directory, the old segments -> ``.deleted`` (``.log`` first), ``.swap`` ->
  final names in ascending order, fsync the directory, publish the new segment list, and only
  then write ``cleaner-offset-checkpoint``. Only one cleaner runs per partition (an ``flock``
  on ``.logplat-cleaner.lock``); another finds it busy and skips the partition.

Every file step is followed by ``crash_point("compaction.<step>")``; the kill tests check that
``loader.py`` turns a kill at any of them into the content before or after, never a mix.

Where this differs from Kafka, and why:

* One swap replaces *all* groups of a pass at once (Kafka swaps group by group), so a kill
  leaves the whole pass done or undone.
* Aborted transactions come from scanning the log's ABORT markers (there is no ``.txnindex``):
  a marker aborts its producer's transactional batches since that producer's previous marker.
* The last batch of the round (the last batch of the last recopied segment) is always kept,
  as an empty header if nothing in it survives: Kafka keeps it when its next offset is the
  round's upper bound. Keeping it always means the swap's last segment always ends where the
  replaced range ended, which is what the loader needs to find every replaced segment.
* A rebuilt batch keeps its original ``baseTimestamp`` (or its delete horizon) instead of the
  first surviving record's timestamp, so the surviving records' timestamp deltas stay valid
  and their bytes are copied unchanged; every record's timestamp reads the same.
* When the offset map is full, keys already in it are still updated; the pass stops at the
  first *new* key that does not fit (Kafka stops at the first record once full).
* A magic 0/1 compressed wrapper that loses records is rewritten as uncompressed messages
  (this engine does not write legacy compressed wrappers); one that keeps all is copied.
"""

from __future__ import annotations

import copy
import heapq
import os
import struct
import time
import zlib
from bisect import bisect_left
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from crc32c import crc32c

from .checkpoint import fsync_dir
from .cleaner_plan import (
    LONG_MAX,
    CleaningRound,
    LogToClean,
    SegmentFacts,
    log_to_clean,
    plan_round,
    segments_in_range,
)
from .config import CleanerConfig, LogConfig
from .errors import CorruptRecordError, LogChangedError, LogError
from .faults import crash_point
from .index import OffsetIndex
from .naming import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_file,
)
from .nofollow import open_nofollow
from .offset_map import KAFKA_BYTES_PER_ENTRY, OffsetMap
from .record import RawBatch, decode_batch, encode_empty_batch, scan_batches, verify_batch
from .record.compression import compress, decompress
from .record.records import BatchHeader, TimestampType
from .record.v2 import _HEAD, _TAIL, HEADER_STRUCT, RECORD_BATCH_OVERHEAD
from .record.v2 import walk_records as walk_v2_records
from .record.varint import VarintError, decode_varint, decode_varlong, encode_varint, encode_varlong
from .segment import LogSegment
from .segment import now_ms as wall_clock_ms
from .staging import (  # noqa: F401  (CLEANER_LOCK_FILE and CleanerBusyError are part of this module's API)
    CLEANER_LOCK_FILE,
    STAGING_SUFFIX,
    CleanerBusyError,
    CleanerLock,
    remove_stale_staging,
)

if TYPE_CHECKING:  # log.py does not import this module; the manager imports both
    from .log import Log

# ------------------------------------------------------------------------------------------
# constants (the batch layout itself comes from record.v2)

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_ATTR_DELETE_HORIZON = 0x40
_CONTROL_KEY = struct.Struct(">hh")
_LENGTH = struct.Struct(">qi")
_MIN_READ_CHUNK = 64 * 1024
_HEADER_HOP_READ = 16 * 1024



# ==========================================================================================
# 1. rules (pure)
# ==========================================================================================


@dataclass(frozen=True)
class AbortedTxn:
    """An aborted transaction: its producer, first data offset and the ABORT marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int


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
    marker whose transaction compaction already removed) changes nothing, as in Kafka.
    """

    def __init__(self) -> None:
        self._aborted: list[AbortedTxn] = []
        self._open: dict[int, int] = {}
        self._last_data: dict[int, int] = {}
        self._epoch: dict[int, int] = {}

    def observe(self, header: BatchHeader, control_type: int | None = None) -> None:
        pid = header.producer_id
        if header.magic < 2 or pid < 0:
            return
        if header.is_control:
            if control_type is None:
                return
            self._epoch[pid] = header.producer_epoch
            if control_type in (CONTROL_ABORT, CONTROL_COMMIT):
                first = self._open.pop(pid, None)
                if first is not None and control_type == CONTROL_ABORT:
                    self._aborted.append(AbortedTxn(pid, first, header.last_offset))
            return
        self._epoch[pid] = header.producer_epoch
        self._last_data[pid] = header.last_offset
        if header.is_transactional and pid not in self._open:
            self._open[pid] = header.base_offset

    def snapshot(self, log_end_offset: int) -> ProducerSnapshot:
        last = {pid: LastRecord(self._last_data.get(pid), epoch) for pid, epoch in self._epoch.items()}
        lso = min(self._open.values()) if self._open else log_end_offset
        return ProducerSnapshot(list(self._aborted), last, dict(self._open), min(lso, log_end_offset))


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
        self.retained_aborted: list[AbortedTxn] = []  # ABORT markers kept (Kafka's cleaned .txnindex)

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
        if control_type == CONTROL_ABORT:
            ongoing = self._aborted_ongoing.pop(pid, None)
            if ongoing is not None and ongoing[1] is not None:
                self.retained_aborted.append(ongoing[0])
                return False
            return True
        if control_type == CONTROL_COMMIT:
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
) -> int:
    """Kafka's ``shouldRetainRecord`` for a record of a batch that is neither deleted nor discarded:
    ``KEEP`` or the reason it goes.

    Records beyond the map's reach are kept whatever they hold; a record without a key goes; a
    keyed record stays if it is the latest for its key (``latest_offset_of_key`` is -1 for a key
    the map does not know) and, if a tombstone, while ``retain_tombstones`` (for magic 2: the
    batch has no delete horizon yet, or now is before it; for magic 0/1: its segment's mtime is
    above the legacy horizon).
    """
    if offset > map_latest_offset:
        return KEEP
    if key is None:
        return DROP_UNKEYED
    if offset < latest_offset_of_key:
        return DROP_DUPLICATE
    if is_tombstone and not retain_tombstones:
        return DROP_TOMBSTONE
    return KEEP


def retain_tombstones_v2(header: BatchHeader, now_ms: int) -> bool:
    """KIP-534: a tombstone stays until the delete horizon stamped in its batch has passed."""
    horizon = header.delete_horizon_ms
    return horizon is None or now_ms < horizon


# ------------------------------------------------------------------------------------------
# record walking and batch assembly


def _corrupt(reason: str, raw: RawBatch, path: str | None) -> CorruptRecordError:
    return CorruptRecordError(reason, path=path, position=raw.position, offset=raw.header.base_offset)


def record_bytes(raw: RawBatch, path: str | None = None, chunk: bytes | None = None,
                 chunk_offset: int = 0) -> tuple[bytes, int, int]:
    """Where a v2 batch's plain record bytes are: ``(buffer, start, end)``.

    For an uncompressed batch read from ``chunk`` (``raw.data`` being ``chunk[chunk_offset:...]``)
    that is the chunk itself, so nothing is copied; otherwise a copy or the decompressed stream.
    """
    h = raw.header
    codec = h.attributes & 0x07
    if codec == 0:
        if chunk is not None:
            return chunk, chunk_offset + RECORD_BATCH_OVERHEAD, chunk_offset + h.size_in_bytes
        payload = bytes(memoryview(raw.data)[RECORD_BATCH_OVERHEAD:])
        return payload, 0, len(payload)
    try:
        plain = decompress(codec, memoryview(raw.data)[RECORD_BATCH_OVERHEAD:])
    except CorruptRecordError as exc:
        raise _corrupt(exc.reason, raw, path) from exc
    return plain, 0, len(plain)


def map_v2_records(buf: bytes, start: int, stop: int, count: int, base_offset: int, min_offset: int,
                   table: dict, remaining: int, overhead: int) -> tuple[bool, int, int, int, int]:
    """Map building's hot loop: put every keyed record of a batch at or above ``min_offset`` into
    ``table`` (key -> offset), charging ``offset_map.entry_cost`` per new key against
    ``remaining``. Stops at the first new key that does not fit.

    Returns ``(complete, remaining, new_keys, last_offset_put, unkeyed)`` (``last_offset_put`` -1
    if none; ``unkeyed`` counts records without a key).
    """
    check_min = base_offset < min_offset
    added = 0
    last = -1
    unkeyed = 0
    for _pos, _end, od, _tsd, key, _tomb in walk_v2_records(buf, count, start, stop):
        if key is None:
            unkeyed += 1
            continue
        off = base_offset + od
        if check_min and off < min_offset:
            continue
        if key in table:
            table[key] = off
        else:
            cost = overhead + ((len(key) + 48) & ~15)  # offset_map.entry_cost, inlined
            if cost > remaining:
                return False, remaining, added, last, unkeyed
            table[key] = off
            remaining -= cost
            added += 1
        last = off
    return True, remaining, added, last, unkeyed


def filter_v2_records(buf: bytes, start: int, stop: int, count: int, base_offset: int, map_latest_offset: int,
                      table_get, retain_tombstones: bool) -> tuple[list[tuple[int, int, int]], bool, int, int, int]:
    """Recopying's hot loop: :func:`retain_record` for every record of a batch (``buf[start:stop]``).

    ``table_get(key, -1)`` is the offset map's lookup. Returns ``(kept, a kept record is a
    tombstone, duplicates, tombstones, unkeyed)`` where ``kept`` holds ``(start, end, timestamp
    delta)`` per surviving record and ``buf[start:end]`` is its bytes as stored.
    """
    kept = []
    keep = kept.append
    has_tomb = False
    dup = tomb = unkeyed = 0
    for pos, end, od, tsd, key, is_tomb in walk_v2_records(buf, count, start, stop):
        off = base_offset + od
        if key is None:
            if off <= map_latest_offset:
                unkeyed += 1
                continue
        elif off <= map_latest_offset:
            if off < table_get(key, -1):
                dup += 1
                continue
            if is_tomb and not retain_tombstones:
                tomb += 1
                continue
        if is_tomb:
            has_tomb = True
        keep((pos, end, tsd))
    return kept, has_tomb, dup, tomb, unkeyed


def restamp_record(record: bytes | memoryview, new_delta: int) -> bytes:
    """A record's bytes with its timestamp delta replaced (length prefix recomputed); the rest of
    the record (offset delta, key, value, headers) is copied unchanged."""
    _, p = decode_varint(record, 0)
    attributes = record[p]
    _, q = decode_varlong(record, p + 1)
    body = b"".join((bytes((attributes,)), encode_varlong(new_delta), bytes(record[q:])))
    return encode_varint(len(body)) + body


def assemble_v2_batch(header: BatchHeader, *, attributes: int, base_timestamp: int, max_timestamp: int,
                      records_count: int, payload: bytes) -> bytes:
    """A v2 batch with ``header``'s offsets, epoch and producer fields and the given records bytes
    (already compressed if the attributes name a codec); CRC-32C over bytes 21..end."""
    tail = _TAIL.pack(
        attributes,
        header.last_offset_delta,
        base_timestamp,
        max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        records_count,
    )
    crc = crc32c(payload, crc32c(tail))
    head = _HEAD.pack(header.base_offset, 49 + len(payload), header.partition_leader_epoch, 2, crc)
    return b"".join((head, tail, payload))


def empty_batch_of(header: BatchHeader) -> bytes:
    """Kafka's ``writeEmptyHeader`` for a batch whose records all went but whose offsets and
    producer state must stay."""
    return encode_empty_batch(
        base_offset=header.base_offset,
        last_offset_delta=header.last_offset_delta,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=header.is_transactional,
        is_control=header.is_control,
        timestamp_type=header.timestamp_type,
    )


def encode_legacy_message(offset: int, magic: int, log_append_time: bool, timestamp: int,
                          key: bytes | None, value: bytes | None) -> bytes:
    """One uncompressed magic 0/1 message (``offset | size | crc | magic | attributes | [timestamp]
    | key | value``, CRC-32 over magic..end)."""
    attributes = 0x08 if (magic == 1 and log_append_time) else 0
    parts = [bytes((magic, attributes))]
    if magic == 1:
        parts.append(struct.pack(">q", timestamp))
    for blob in (key, value):
        if blob is None:
            parts.append(struct.pack(">i", -1))
        else:
            parts.append(struct.pack(">i", len(blob)))
            parts.append(blob)
    body = b"".join(parts)
    message = struct.pack(">I", zlib.crc32(body)) + body
    return _LENGTH.pack(offset, len(message)) + message


def control_type_of(raw: RawBatch, path: str | None = None) -> int | None:
    """The control record type of a control batch (0 ABORT, 1 COMMIT, ...), None when empty."""
    if raw.header.records_count == 0:
        return None
    records = decode_batch(raw, verify=False, path=path)
    if not records:
        return None
    key = records[0].key
    if key is None or len(key) < 4:
        raise _corrupt("control record key is shorter than 4 bytes", raw, path)
    return _CONTROL_KEY.unpack_from(key, 0)[1]


# ------------------------------------------------------------------------------------------
# statistics


@dataclass
class CleanerStats:
    """Counters of one pass (or, summed, of a run): what Kafka's cleaner logs, and more."""

    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_written: int = 0
    batches_read: int = 0
    batches_written: int = 0
    map_bytes_read: int = 0
    map_records_read: int = 0
    scan_bytes_read: int = 0
    duplicates_removed: int = 0
    tombstones_removed: int = 0
    unkeyed_removed: int = 0
    aborted_removed: int = 0
    markers_removed: int = 0
    batches_copied: int = 0
    batches_rebuilt: int = 0
    empty_batches_kept: int = 0
    horizons_stamped: int = 0
    scan_seconds: float = 0.0
    index_seconds: float = 0.0
    clean_seconds: float = 0.0
    swap_seconds: float = 0.0

    def add(self, other: "CleanerStats") -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)


@dataclass(frozen=True)
class FilteredBatch:
    """What to write for one input batch (``data`` may be a view of the input when copied as is)."""

    data: bytes | memoryview
    last_offset: int
    max_timestamp: int
    records: int


class BatchFilter:
    """Kafka's ``filterTo`` for the batches of one cleaning round, in offset order; no I/O.

    Built with the round's offset map, a :class:`TransactionTracker` over the round's aborted
    transactions, the producers' last records, the clock and the base offset of the round's last
    batch. ``filter(raw)`` returns the bytes to write for that batch (or None) and counts what it
    removed in ``stats``.
    """

    def __init__(
        self,
        offset_map: OffsetMap,
        tracker: TransactionTracker,
        last_records: dict[int, LastRecord],
        *,
        now_ms: int,
        delete_retention_ms: int,
        last_batch_base_offset: int | None,
        stats: CleanerStats | None = None,
        path: str | None = None,
    ) -> None:
        self.map = offset_map
        self.tracker = tracker
        self.last_records = last_records
        self.now_ms = now_ms
        self.delete_retention_ms = delete_retention_ms
        self.last_batch_base_offset = last_batch_base_offset
        self.stats = stats if stats is not None else CleanerStats()
        self.path = path
        self._winners: list[int] | None = None
        self._dirty_start = 0
        self._unkeyed: dict[int, int] = {}

    def use_winners(self, winners: list[int], dirty_start: int, unkeyed_by_batch: dict[int, int]) -> None:
        """Let batches wholly inside the mapped dirty range skip their records when no record of
        theirs wins its key: ``winners`` are the map's offsets, ascending (see
        ``OffsetMap.sorted_offsets``), and ``unkeyed_by_batch`` what map building counted, so the
        stats stay exact. Such a batch's CRC was checked when the map was built."""
        self._winners = winners
        self._dirty_start = dirty_start
        self._unkeyed = unkeyed_by_batch

    def _without_winner(self, h: BatchHeader) -> bool:
        winners = self._winners
        if winners is None or h.base_offset < self._dirty_start or h.last_offset > self.map.latest_offset:
            return False
        i = bisect_left(winners, h.base_offset)
        return i == len(winners) or winners[i] > h.last_offset

    def filter(self, raw: RawBatch, *, retain_legacy_deletes: bool = True, chunk: bytes | None = None,
               chunk_offset: int = 0) -> FilteredBatch | None:
        """The bytes to write for ``raw`` (None: nothing). ``chunk``/``chunk_offset``, when given,
        say that ``raw.data`` is ``chunk[chunk_offset:...]``, so records are read in place."""
        h = raw.header
        stats = self.stats
        stats.bytes_read += h.size_in_bytes
        stats.batches_read += 1
        if h.magic < 2:
            verify_batch(raw, path=self.path)
            return self._filter_legacy(raw, retain_legacy_deletes)
        skip_records = not h.is_control and self._without_winner(h)
        if not skip_records:
            verify_batch(raw, path=self.path)
        control_type = control_type_of(raw, self.path) if h.is_control else None
        if h.is_control:
            can_discard = self.tracker.on_control_batch(h, control_type)
        else:
            can_discard = self.tracker.on_data_batch(h)
        retention, discard_records = batch_retention(
            h,
            can_discard=can_discard,
            last_of_active_producer=is_last_batch_of_active_producer(h, self.last_records),
            last_of_round=h.base_offset == self.last_batch_base_offset,
            now_ms=self.now_ms,
        )
        marker_for_empty_txn = can_discard and h.is_control
        count = h.records_count
        stats.records_read += count
        if retention is BatchRetention.DELETE or discard_records:
            if h.is_control:
                stats.markers_removed += count
            else:
                stats.aborted_removed += count
            if retention is BatchRetention.RETAIN_EMPTY:
                return self._emit_empty(h)
            return None
        if count == 0:
            # An empty header from an earlier cleaning: it stays only while Kafka's rules keep it.
            if retention is BatchRetention.RETAIN_EMPTY:
                return self._emit(raw.data, h.last_offset, h.max_timestamp, 0, copied=True)
            return None
        if skip_records:
            # No record of this batch is the latest for its key: every keyed one is a duplicate.
            unkeyed = self._unkeyed.get(h.base_offset, 0)
            stats.unkeyed_removed += unkeyed
            stats.duplicates_removed += count - unkeyed
            if retention is BatchRetention.RETAIN_EMPTY:
                return self._emit_empty(h)
            return None
        try:
            buf, start, stop = record_bytes(raw, self.path, chunk, chunk_offset)
            if h.is_control:
                spans = [(rec[0], rec[1], rec[3]) for rec in walk_v2_records(buf, count, start, stop)]
                has_tombstone = False
            else:
                table_get = self.map.raw_table_get()
                if table_get is None:
                    get = self.map.get
                    table_get = lambda key, _default: get(key)  # noqa: E731
                spans, has_tombstone, dup, tomb, unkeyed = filter_v2_records(
                    buf, start, stop, count, h.base_offset, self.map.latest_offset, table_get,
                    retain_tombstones_v2(h, self.now_ms))
                stats.duplicates_removed += dup
                stats.tombstones_removed += tomb
                stats.unkeyed_removed += unkeyed
        except (IndexError, VarintError, ValueError) as exc:
            raise _corrupt(f"malformed records in batch: {exc}", raw, self.path) from None
        if not spans:
            if retention is BatchRetention.RETAIN_EMPTY:
                return self._emit_empty(h)
            return None
        need_horizon = (has_tombstone or marker_for_empty_txn) and not h.has_delete_horizon
        if len(spans) == count and not need_horizon:
            return self._emit(raw.data, h.last_offset, h.max_timestamp, count, copied=True)
        return self._rebuild(h, buf, spans, need_horizon)

    # ------------------------------------------------------------------ outputs

    def _emit(self, data: bytes | memoryview, last_offset: int, max_ts: int, records: int, *,
              copied: bool) -> FilteredBatch:
        stats = self.stats
        stats.bytes_written += len(data)
        stats.records_written += records
        stats.batches_written += 1
        if copied:
            stats.batches_copied += 1
        else:
            stats.batches_rebuilt += 1
        return FilteredBatch(data, last_offset, max_ts, records)

    def _emit_empty(self, h: BatchHeader) -> FilteredBatch:
        self.stats.empty_batches_kept += 1
        return self._emit(empty_batch_of(h), h.last_offset, h.max_timestamp, 0, copied=False)

    def _rebuild(self, h: BatchHeader, buf: bytes, spans: list[tuple[int, int, int]], stamp_horizon: bool) -> FilteredBatch:
        """The surviving records under a new header with the original offsets and producer fields:
        ``spans`` are ``(start, end, timestamp delta)`` of each survivor in ``buf``."""
        orig_base_ts = h.base_timestamp
        if stamp_horizon:
            horizon = self.now_ms + self.delete_retention_ms
            parts = [restamp_record(buf[s:e], orig_base_ts + d - horizon) for s, e, d in spans]
            base_ts = horizon
            attributes = h.attributes | _ATTR_DELETE_HORIZON
            self.stats.horizons_stamped += 1
        else:
            parts = [buf[s:e] for s, e, _ in spans]
            base_ts = orig_base_ts
            attributes = h.attributes
        if h.timestamp_type == TimestampType.LOG_APPEND_TIME:
            max_ts = h.max_timestamp
        else:
            max_ts = orig_base_ts + max(d for _, _, d in spans)
        payload = b"".join(parts)
        codec = h.attributes & 0x07
        if codec:
            payload = compress(codec, payload)
        data = assemble_v2_batch(h, attributes=attributes, base_timestamp=base_ts, max_timestamp=max_ts,
                                 records_count=len(spans), payload=payload)
        return self._emit(data, h.last_offset, max_ts, len(spans), copied=False)

    def _filter_legacy(self, raw: RawBatch, retain_deletes: bool) -> FilteredBatch | None:
        """Magic 0/1: no producer state, no empty batches; the whole message or the survivors."""
        h = raw.header
        records = decode_batch(raw, verify=False, path=self.path)
        self.stats.records_read += len(records)
        latest = self.map.latest_offset
        kept = []
        for r in records:
            verdict = retain_record(r.offset, r.key, r.value is None, latest_offset_of_key=self.map.get(r.key)
                                    if r.key is not None else -1, map_latest_offset=latest,
                                    retain_tombstones=retain_deletes)
            if verdict == KEEP:
                kept.append(r)
            else:
                self._count_drop(verdict)
        if len(kept) == len(records) or (not kept and h.base_offset == self.last_batch_base_offset):
            # all survive, or the round's last batch (legacy has no empty header): copied as is
            return self._emit(raw.data, h.last_offset, h.max_timestamp, len(records), copied=True)
        if not kept:
            return None
        log_append = h.timestamp_type == TimestampType.LOG_APPEND_TIME
        data = b"".join(encode_legacy_message(r.offset, h.magic, log_append, r.timestamp, r.key, r.value) for r in kept)
        return self._emit(data, kept[-1].offset, max(r.timestamp for r in kept), len(kept), copied=False)

    def _count_drop(self, verdict: int) -> None:
        if verdict == DROP_DUPLICATE:
            self.stats.duplicates_removed += 1
        elif verdict == DROP_TOMBSTONE:
            self.stats.tombstones_removed += 1
        elif verdict == DROP_UNKEYED:
            self.stats.unkeyed_removed += 1


# ------------------------------------------------------------------------------------------
# throttling


class Throttler:
    """``log.cleaner.io.max.bytes.per.second``: after each read or written chunk, if the rate over
    the last check interval (300 ms, as Kafka's) is above the target, sleep until it is not."""

    def __init__(
        self,
        bytes_per_second: float,
        *,
        check_interval_ms: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = bytes_per_second
        self.check_interval_s = check_interval_ms / 1000.0
        self.clock = clock
        self.sleep = sleep
        self._period_start = clock()
        self._observed = 0.0
        self.slept_s = 0.0

    @property
    def enabled(self) -> bool:
        return self.rate != float("inf")

    def maybe_throttle(self, n_bytes: int) -> None:
        if self.rate == float("inf"):
            return
        self._observed += n_bytes
        now = self.clock()
        elapsed = now - self._period_start
        if elapsed < self.check_interval_s:
            return
        if self._observed / elapsed > self.rate:
            pause = self._observed / self.rate - elapsed
            if pause > 0:
                self.sleep(pause)
                self.slept_s += pause
        self._period_start = self.clock()
        self._observed = 0.0


# ------------------------------------------------------------------------------------------
# the report


@dataclass
class CompactionReport:
    """One partition's compaction run (one or more passes), for the CLI and the platform."""

    topic: str
    partition: int
    now_ms: int
    engine: str = "local"
    passes: int = 0
    checkpoint_before: int | None = None
    new_checkpoint: int | None = None
    first_dirty_offset: int | None = None
    first_uncleanable_offset: int | None = None
    dirty_ratio_before: float | None = None
    dirty_ratio_after: float | None = None
    due_reason: str = ""
    stats: CleanerStats = field(default_factory=CleanerStats)
    distinct_keys: int = 0  # keys mapped, summed over passes
    map_entries: int = 0  # of the last pass
    map_entries_max: int = 0  # the most keys one pass held
    map_capacity_bytes: int = 0
    map_used_bytes: int = 0
    map_fill: float = 0.0  # highest over passes: charged bytes / (budget x load factor)
    map_bytes_per_entry: float = 0.0
    map_capacity_entries: int = 0
    map_collisions: int = 0
    segments_before: int = 0
    segments_after: int = 0
    segments_recopied: int = 0
    segments_written: int = 0
    duration_s: float = 0.0
    throttled_s: float = 0.0
    rounds: list[dict] = field(default_factory=list)
    skipped: str | None = None
    retention: dict | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def mb_per_s(self) -> float:
        return self.stats.bytes_read / (1024 * 1024) / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def records_per_s(self) -> float:
        return self.stats.records_read / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def size_reduction_pct(self) -> float:
        s = self.stats
        return 100.0 * (1 - s.bytes_written / s.bytes_read) if s.bytes_read else 0.0

    @property
    def records_reduction_pct(self) -> float:
        s = self.stats
        return 100.0 * (1 - s.records_written / s.records_read) if s.records_read else 0.0

    def to_dict(self) -> dict:
        s = self.stats
        return {
            "topic": self.topic,
            "partition": self.partition,
            "engine": self.engine,
            "now_ms": self.now_ms,
            "skipped": self.skipped,
            "due": self.due_reason,
            "passes": self.passes,
            "checkpoint_before": self.checkpoint_before,
            "new_checkpoint": self.new_checkpoint,
            "first_dirty_offset": self.first_dirty_offset,
            "first_uncleanable_offset": self.first_uncleanable_offset,
            "dirty_ratio_before": None if self.dirty_ratio_before is None else round(self.dirty_ratio_before, 6),
            "dirty_ratio_after": None if self.dirty_ratio_after is None else round(self.dirty_ratio_after, 6),
            "bytes_read": s.bytes_read,
            "bytes_written": s.bytes_written,
            "records_read": s.records_read,
            "records_written": s.records_written,
            "map_bytes_read": s.map_bytes_read,
            "map_records_read": s.map_records_read,
            "scan_bytes_read": s.scan_bytes_read,
            "distinct_keys": self.distinct_keys,
            "duplicates_removed": s.duplicates_removed,
            "tombstones_removed": s.tombstones_removed,
            "unkeyed_removed": s.unkeyed_removed,
            "aborted_records_removed": s.aborted_removed,
            "markers_removed": s.markers_removed,
            "empty_batches_kept": s.empty_batches_kept,
            "delete_horizons_stamped": s.horizons_stamped,
            "batches_copied_verbatim": s.batches_copied,
            "batches_rebuilt": s.batches_rebuilt,
            "map_entries": self.map_entries,
            "map_entries_max": self.map_entries_max,
            "map_capacity_entries": self.map_capacity_entries,
            "map_used_bytes": self.map_used_bytes,
            "map_capacity_bytes": self.map_capacity_bytes,
            "map_fill": round(self.map_fill, 6),
            "map_bytes_per_entry": round(self.map_bytes_per_entry, 1),
            "kafka_bytes_per_entry": KAFKA_BYTES_PER_ENTRY,
            "map_collisions": self.map_collisions,
            "segments_before": self.segments_before,
            "segments_after": self.segments_after,
            "segments_recopied": self.segments_recopied,
            "segments_written": self.segments_written,
            "duration_s": round(self.duration_s, 6),
            "scan_s": round(s.scan_seconds, 6),
            "index_s": round(s.index_seconds, 6),
            "clean_s": round(s.clean_seconds, 6),
            "swap_s": round(s.swap_seconds, 6),
            "throttled_s": round(self.throttled_s, 6),
            "mb_per_s": round(self.mb_per_s, 3),
            "records_per_s": round(self.records_per_s, 1),
            "size_reduction_pct": round(self.size_reduction_pct, 3),
            "records_reduction_pct": round(self.records_reduction_pct, 3),
            "rounds": self.rounds,
            "retention": self.retention,
            "warnings": self.warnings,
        }

    def summary(self) -> str:
        """The cleaner's log message (Kafka's ``recordStats``), one partition."""
        tp = f"{self.topic}-{self.partition}"
        if self.skipped:
            return f"{tp}: skipped: {self.skipped}"
        s = self.stats
        mb = 1024 * 1024
        lines = [
            f"{tp}: cleaned in {self.passes} pass(es) (dirty section = [{self.first_dirty_offset}, "
            f"{self.new_checkpoint}), checkpoint {self.checkpoint_before} -> {self.new_checkpoint})",
            f"  {s.bytes_read / mb:,.1f} MB of log processed in {self.duration_s:,.2f} seconds "
            f"({self.mb_per_s:,.1f} MB/sec, {self.records_per_s:,.0f} records/sec)",
            f"  Indexed {s.map_bytes_read / mb:,.1f} MB in {s.index_seconds:.2f} seconds; "
            f"{self.distinct_keys:,} distinct keys; map fill {100 * self.map_fill:.1f}% "
            f"({self.map_bytes_per_entry:.0f} bytes/key)",
            f"  Start size: {s.bytes_read / mb:,.1f} MB ({s.records_read:,} messages), end size: "
            f"{s.bytes_written / mb:,.1f} MB ({s.records_written:,} messages)",
            f"  {self.size_reduction_pct:.1f}% size reduction ({self.records_reduction_pct:.1f}% fewer messages): "
            f"{s.duplicates_removed:,} duplicates, {s.tombstones_removed:,} tombstones, "
            f"{s.unkeyed_removed:,} unkeyed, {s.aborted_removed:,} aborted, {s.markers_removed:,} markers removed",
            f"  dirty ratio {self.dirty_ratio_before or 0:.3f} -> {self.dirty_ratio_after or 0:.3f}; segments "
            f"{self.segments_before} -> {self.segments_after}",
        ]
        if self.retention and self.retention.get("deleted_segments"):
            lines.append(f"  retention deleted segments {self.retention['deleted_segments']}")
        lines.extend(f"  warning: {w}" for w in self.warnings)
        return "\n".join(lines)


# ==========================================================================================
# 3. I/O
# ==========================================================================================


@dataclass(frozen=True)
class SegmentRef:
    """A segment as a pass saw it, small and picklable: what a task in another process needs to
    reread exactly the bytes the pass planned with (and to notice when they are gone)."""

    path: str
    base_offset: int
    inode: int
    size: int
    mtime_ms: int


class InputSegment:
    """A segment as one pass reads it: our own read-only descriptor, opened under the partition
    lock, with the inode and size seen then (the commit compares them with the live log)."""

    def __init__(self, seg: LogSegment, is_active: bool, chunk: int) -> None:
        self.base_offset = seg.base_offset
        self.path = seg.log_path
        self.is_active = is_active
        self.fd = open_nofollow(self.path, os.O_RDONLY)
        st = os.fstat(self.fd)
        self.inode = st.st_ino
        self.size = st.st_size if not is_active else min(st.st_size, seg.size)
        self.mtime_ms = int(st.st_mtime * 1000)
        self.chunk = chunk
        self.last_batch_base: int | None = None  # filled by the header scan
        self.first_batch_max_ts: int = LONG_MAX
        index_bytes = 0
        time_bytes = 0
        if not is_active:
            index_bytes = _file_size(segment_file(seg.dir, seg.base_offset, INDEX_SUFFIX))
            time_bytes = _file_size(segment_file(seg.dir, seg.base_offset, TIME_INDEX_SUFFIX))
        self.facts = SegmentFacts(
            seg.base_offset,
            self.size,
            self.mtime_ms,
            is_active,
            index_bytes,
            time_bytes,
            largest_timestamp_loader=lambda s=seg: s.max_timestamp_so_far,
            first_batch_timestamp_loader=lambda: self.first_batch_max_ts,
        )

    @property
    def ref(self) -> SegmentRef:
        return SegmentRef(str(self.path), self.base_offset, self.inode, self.size, self.mtime_ms)

    @classmethod
    def from_ref(cls, ref: SegmentRef, chunk: int = _MIN_READ_CHUNK) -> "InputSegment":
        """Reopen a planned segment in another process; ``LogChangedError`` when the file is gone,
        was replaced or shrank (a retention or another cleaning got there first)."""
        self = cls.__new__(cls)
        self.base_offset = ref.base_offset
        self.path = Path(ref.path)
        self.is_active = False
        try:
            self.fd = open_nofollow(self.path, os.O_RDONLY)
        except FileNotFoundError:
            raise LogChangedError(f"segment {ref.path} is gone since the pass was planned") from None
        st = os.fstat(self.fd)
        if st.st_ino != ref.inode or st.st_size < ref.size:
            os.close(self.fd)
            raise LogChangedError(f"segment {ref.path} was replaced or truncated since the pass was planned")
        self.inode, self.size, self.mtime_ms, self.chunk = ref.inode, ref.size, ref.mtime_ms, chunk
        self.last_batch_base = None
        self.first_batch_max_ts = LONG_MAX
        self.facts = None
        return self

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def batches_in_chunks(self, start: int = 0) -> Iterator[tuple[RawBatch, bytes, int]]:
        """Complete batches from ``start`` to the size seen at the snapshot, read in chunks, each with
        the chunk it was read in and its offset there (so its records can be read in place)."""
        pos, end, chunk, path = start, self.size, self.chunk, str(self.path)
        while pos < end:
            buf = os.pread(self.fd, min(chunk, end - pos), pos)
            if not buf:
                return
            consumed = 0
            for raw in scan_batches(buf, path=path, base_position=pos):
                offset = raw.position - pos
                consumed = offset + raw.header.size_in_bytes
                yield raw, buf, offset
            if consumed == 0:
                if len(buf) < 12:
                    return
                _, length = _LENGTH.unpack_from(buf, 0)
                needed = length + 12
                if pos + needed > end or needed <= len(buf):
                    return
                # Kafka doubles its buffers until a batch fits and keeps them for the rest of the
                # segment; so do we (batches of one segment tend to be alike).
                chunk = max(needed, 2 * chunk)
                continue
            pos += consumed

    def headers(self) -> Iterator[tuple[BatchHeader, int]]:
        """Every batch header with its position, reading only the headers of large batches."""
        pos, end, path = 0, self.size, str(self.path)
        buf = b""
        buf_pos = 0
        while pos + 17 <= end:
            if pos + RECORD_BATCH_OVERHEAD > buf_pos + len(buf):
                buf = os.pread(self.fd, min(_HEADER_HOP_READ, end - pos), pos)
                buf_pos = pos
            i = pos - buf_pos
            base, length, _, magic = struct.unpack_from(">qiib", buf, i)
            if length < 14 or pos + 12 + length > end:
                return  # torn tail (only possible in the active segment)
            if magic == 2:
                if len(buf) - i < RECORD_BATCH_OVERHEAD:
                    return
                header = BatchHeader(*HEADER_STRUCT.unpack_from(buf, i))
            else:
                raw = self.read_batch(pos, length + 12)
                header = raw.header
            yield header, pos
            pos += 12 + length

    def read_batch(self, position: int, size: int) -> RawBatch:
        data = os.pread(self.fd, size, position)
        raws = list(scan_batches(data, path=str(self.path), base_position=position))
        if len(raws) != 1:
            raise CorruptRecordError("batch could not be re-read", path=str(self.path), position=position)
        return raws[0]


def _file_size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


@dataclass
class _Snapshot:
    segments: list[InputSegment]
    log_start_offset: int
    log_end_offset: int
    checkpoint: int | None

    @property
    def facts(self) -> list[SegmentFacts]:
        return [s.facts for s in self.segments]

    def close(self) -> None:
        for s in self.segments:
            s.close()


@dataclass
class PreparedPass:
    """A pass up to its cleanable range: the snapshot it reads (it owns the descriptors: close
    it), the producers' facts from the header scan, the range and the pass's counters."""

    snap: _Snapshot
    producers: ProducerSnapshot
    ltc: LogToClean
    stats: CleanerStats

    def groups(self, rnd: CleaningRound) -> list[list[InputSegment]]:
        by_base = {s.base_offset: s for s in self.snap.segments}
        return [[by_base[b] for b in g] for g in rnd.groups]

    def close(self) -> None:
        self.snap.close()


@dataclass
class PassResult:
    ltc: LogToClean
    round: CleaningRound | None
    stats: CleanerStats
    map_entries: int = 0
    map_used_bytes: int = 0
    map_fill: float = 0.0
    map_bytes_per_entry: float = 0.0
    map_capacity_entries: int = 0
    map_collisions: int = 0
    partial: bool = False
    segments_written: int = 0
    last_stable_offset: int | None = None


class Cleaner:
    """Compacts one partition's log per call of :meth:`clean`; see the module docstring."""

    def __init__(
        self,
        config: CleanerConfig | None = None,
        *,
        hash_fn: Callable[[bytes], int] | None = None,
        throttler: Throttler | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config or CleanerConfig()
        self.hash_fn = hash_fn
        self.throttler = throttler or Throttler(self.config.io_max_bytes_per_second)
        self.clock = clock
        self.chunk = max(self.config.io_buffer_size_per_thread, _MIN_READ_CHUNK)
        self.offset_map = OffsetMap(
            self.config.dedupe_buffer_size_per_thread, self.config.io_buffer_load_factor, hash_fn=hash_fn
        )
        self._last_stable_offset: int | None = None

    # ------------------------------------------------------------------ public

    def clean(self, log: Log, *, now_ms: int, force: bool = False, max_passes: int | None = None) -> CompactionReport:
        """Compact ``log`` if it is due (or ``force``), pass after pass until the cleanable range is
        clean or ``max_passes`` ran. Raises ``LogChangedError`` if another process changed the
        input segments (nothing changed on disk then) or is cleaning the same partition."""
        start = self.clock()
        self._last_stable_offset = None
        report = CompactionReport(log.topic, log.partition, now_ms)
        throttled_before = self.throttler.slept_s
        with CleanerLock(log.dir):
            remove_stale_staging(log.dir)
            while max_passes is None or report.passes < max_passes:
                result = self._one_pass(log, now_ms, force=force or report.passes > 0, report=report)
                if result is None:
                    break
                self._account(report, result)
                if not result.partial:
                    break
            else:
                if report.rounds and report.rounds[-1]["partial"]:
                    report.warnings.append(
                        f"the offset map filled up: cleaned only up to offset {report.new_checkpoint} of "
                        f"{report.first_uncleanable_offset} in {report.passes} pass(es); the next run continues there"
                    )
            report.segments_after = len(log.segments)
            report.dirty_ratio_after = self.dirty_ratio_now(log, now_ms)
        if report.passes == 0 and report.skipped is None:
            report.skipped = "nothing to clean"
        report.duration_s = self.clock() - start
        report.throttled_s = self.throttler.slept_s - throttled_before
        return report

    def _account(self, report: CompactionReport, result: PassResult) -> None:
        self._last_stable_offset = result.last_stable_offset
        report.passes += 1
        report.stats.add(result.stats)
        report.distinct_keys += result.map_entries
        report.map_entries = result.map_entries
        report.map_entries_max = max(report.map_entries_max, result.map_entries)
        report.map_used_bytes = result.map_used_bytes
        report.map_capacity_bytes = self.offset_map.capacity_bytes
        report.map_fill = max(report.map_fill, result.map_fill)
        report.map_bytes_per_entry = result.map_bytes_per_entry
        report.map_capacity_entries = result.map_capacity_entries
        report.map_collisions += result.map_collisions
        report.segments_recopied += len(result.round.recopied_bases) if result.round else 0
        report.segments_written += result.segments_written
        if result.round is not None:
            report.new_checkpoint = result.round.end_offset
            report.rounds.append(result.round.to_dict() | {"partial": result.partial})

    # ------------------------------------------------------------------ one pass

    def _snapshot(self, log: Log) -> _Snapshot:
        with log.lock.hold():
            log.sync_for_change()
            segs = list(log.segments)
            inputs = []
            try:
                for seg in segs:
                    inputs.append(InputSegment(seg, seg is segs[-1], self.chunk))
            except BaseException:
                for s in inputs:
                    s.close()
                raise
            checkpoint = log.log_dir.cleaner_offsets.get((log.topic, log.partition))
            return _Snapshot(inputs, log.log_start_offset, log.log_end_offset, checkpoint)

    def prepare_pass(self, log: Log, now_ms: int, *, force: bool, report: CompactionReport) -> PreparedPass | None:
        """A pass up to its cleanable range (snapshot, producer scan, range, due or not), or None
        when there is nothing to do (the report then says why). A distributed job calls this,
        then does map building and recopying in tasks, then :meth:`commit_round`."""
        snap = self._snapshot(log)
        try:
            stats = CleanerStats()
            t0 = self.clock()
            producers = self._scan_producers(snap, stats)
            # h10c hook (issue 10 item 8): which batch is each producer's last comes from the log's
            # producer state (snapshot + replay, ``producer_state.py``), as Kafka's
            # ``lastRecordsOfActiveProducers``, not from this scan of the cleaned log, which
            # cannot see producers whose last batch is an emptied control batch.
            producers.last_records = {pid: LastRecord(last, epoch)
                                      for pid, (last, epoch) in log.last_records_of_active_producers().items()}
            stats.scan_seconds = self.clock() - t0
            ltc = _range_of(log, snap, producers.last_stable_offset, now_ms)
            if report.passes == 0:
                report.checkpoint_before = snap.checkpoint
                report.first_dirty_offset = ltc.first_dirty_offset
                report.first_uncleanable_offset = ltc.first_uncleanable_offset
                report.dirty_ratio_before = ltc.cleanable_ratio
                report.due_reason = ltc.why
                report.segments_before = len(snap.segments)
            if ltc.first_dirty_offset >= ltc.first_uncleanable_offset or ltc.cleanable_bytes == 0 or not (
                force or ltc.due
            ):
                if ltc.force_checkpoint_update:
                    log.log_dir.cleaner_offsets.update({(log.topic, log.partition): ltc.first_dirty_offset})
                if report.passes == 0:
                    report.skipped = (
                        f"nothing cleanable below offset {ltc.first_uncleanable_offset} (bounded by {ltc.bound_reason})"
                        if ltc.first_dirty_offset >= ltc.first_uncleanable_offset or ltc.cleanable_bytes == 0
                        else f"not due: {ltc.why}"
                    )
                snap.close()
                return None
            return PreparedPass(snap, producers, ltc, stats)
        except BaseException:
            snap.close()
            raise

    def plan_round(self, log: Log, prepared: PreparedPass, end_offset: int, now_ms: int) -> CleaningRound:
        """The round once map building says where the dirty section ends (``end_offset``)."""
        config = log.config
        return plan_round(
            prepared.ltc,
            prepared.snap.facts,
            end_offset=end_offset,
            now_ms=now_ms,
            segment_bytes=config.segment_bytes,
            segment_index_bytes=config.segment_index_bytes,
            delete_retention_ms=config.delete_retention_ms,
        )

    def _one_pass(self, log: Log, now_ms: int, *, force: bool, report: CompactionReport) -> PassResult | None:
        prepared = self.prepare_pass(log, now_ms, force=force, report=report)
        if prepared is None:
            return None
        config: LogConfig = log.config
        snap, producers, ltc, stats = prepared.snap, prepared.producers, prepared.ltc, prepared.stats
        cleaned: list[LogSegment] = []
        try:
            # 4.4 the offset map over the dirty section
            t0 = self.clock()
            omap = self.offset_map
            omap.clear()
            unkeyed_by_batch: dict[int, int] = {}
            full = self._build_offset_map(snap, ltc, producers, omap, stats, unkeyed_by_batch)
            end_offset = omap.latest_offset + 1
            stats.index_seconds = self.clock() - t0
            if end_offset <= ltc.first_dirty_offset:
                raise LogError(
                    f"{log.tp}: the offset map ({omap.capacity_bytes} usable bytes) cannot hold even one key "
                    f"at offset {ltc.first_dirty_offset}; raise log.cleaner.dedupe.buffer.size"
                )
            rnd = self.plan_round(log, prepared, end_offset, now_ms)
            # 4.5-4.6 recopy every group into a staged replacement segment, without the lock
            t0 = self.clock()
            groups = prepared.groups(rnd)
            last_input = groups[-1][-1]
            # Every aborted transaction of the log (Kafka collects them per recopied segment, up to
            # the last segment's end): the recopy reads from the first segment, so each one's
            # marker is read after its batches.
            tracker = TransactionTracker(producers.aborted)
            bfilter = BatchFilter(
                omap,
                tracker,
                producers.last_records,
                now_ms=now_ms,
                delete_retention_ms=config.delete_retention_ms,
                last_batch_base_offset=last_input.last_batch_base,
                stats=stats,
                path=str(log.dir),
            )
            bfilter.use_winners(omap.sorted_offsets(), ltc.first_dirty_offset, unkeyed_by_batch)
            for group in groups:
                cleaned.append(self._clean_group(log, group, rnd, bfilter))
            crash_point("compaction.after-cleaned-written")
            stats.clean_seconds = self.clock() - t0
            # 4.8 commit under the lock
            t0 = self.clock()
            self.commit_round(log, [s for g in groups for s in g], cleaned, rnd)
            stats.swap_seconds = self.clock() - t0
            return PassResult(
                ltc,
                rnd,
                stats,
                map_entries=omap.size,
                map_used_bytes=omap.used_bytes,
                map_fill=omap.fill,
                map_bytes_per_entry=omap.bytes_per_entry,
                map_capacity_entries=omap.capacity_entries(),
                map_collisions=omap.collisions,
                partial=full and end_offset < ltc.first_uncleanable_offset,
                segments_written=len(cleaned),
                last_stable_offset=producers.last_stable_offset,
            )
        except BaseException:
            discard_staged(cleaned)
            raise
        finally:
            prepared.close()
            self.offset_map.clear()  # give the memory back between passes and partitions

    # ------------------------------------------------------------------ reading

    def _scan_producers(self, snap: _Snapshot, stats: CleanerStats) -> ProducerSnapshot:
        """Every batch header of the log (control batches read whole): producer facts, each segment's
        first-batch timestamp and last batch."""
        builder = ProducerStateBuilder()
        for seg in snap.segments:
            first = True
            for header, position in seg.headers():
                stats.scan_bytes_read += RECORD_BATCH_OVERHEAD
                if first:
                    seg.first_batch_max_ts = header.max_timestamp
                    first = False
                seg.last_batch_base = header.base_offset
                if header.magic >= 2 and header.producer_id >= 0:
                    control = None
                    if header.is_control:
                        control = control_type_of(seg.read_batch(position, header.size_in_bytes), str(seg.path))
                    builder.observe(header, control)
        return builder.snapshot(snap.log_end_offset)

    def _build_offset_map(self, snap: _Snapshot, ltc: LogToClean, producers: ProducerSnapshot,
                          omap: OffsetMap, stats: CleanerStats, unkeyed_by_batch: dict[int, int]) -> bool:
        """Kafka's ``buildOffsetMap``; True when the map filled before the end of the dirty section.
        Fills ``unkeyed_by_batch`` (base offset -> records without a key) for the recopy's stats."""
        start, end = ltc.first_dirty_offset, ltc.first_uncleanable_offset
        dirty = dirty_segments(snap.segments, start, end)
        tracker = TransactionTracker(producers.aborted_overlapping(start, end))
        table = omap.exact_table()
        for i, seg in enumerate(dirty):
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            path = str(seg.path)
            walk = map_walk(seg, dirty_start_position(seg, start), tracker, stats, self.throttler.maybe_throttle)
            for raw, chunk, chunk_offset, mapped in walk:
                h = raw.header
                if mapped and h.magic >= 2 and table is not None:
                    try:
                        buf, b_start, b_stop = record_bytes(raw, path, chunk, chunk_offset)
                        before = omap.capacity_bytes - omap.used_bytes
                        complete, remaining, added, last, unkeyed = map_v2_records(
                            buf, b_start, b_stop, h.records_count, h.base_offset, start, table, before,
                            omap.overhead)
                    except (IndexError, VarintError, ValueError) as exc:
                        raise _corrupt(f"malformed records in batch: {exc}", raw, path) from None
                    omap.account(added, before - remaining, last)
                    if not complete:
                        return True
                    if unkeyed:
                        unkeyed_by_batch[h.base_offset] = unkeyed
                elif mapped:
                    keyed = batch_keys(raw, chunk, chunk_offset, path)
                    if h.magic < 2:
                        stats.map_records_read += len(keyed)
                    pairs = [(off, key) for off, key in keyed if key is not None and off >= start]
                    if omap.put_all(pairs) < len(pairs):
                        return True
                    unkeyed = sum(1 for _, key in keyed if key is None)
                    if unkeyed and h.magic >= 2:
                        unkeyed_by_batch[h.base_offset] = unkeyed
                if h.last_offset >= start:
                    omap.update_latest_offset(h.last_offset)
            omap.update_latest_offset(next_start - 1)
        return False

    # ------------------------------------------------------------------ writing

    def _clean_group(self, log: Log, group: list[InputSegment], rnd: CleaningRound, bfilter: BatchFilter) -> LogSegment:
        return recopy_group(log.dir, log.config, group, rnd.legacy_delete_horizon_ms, bfilter,
                            throttle=self.throttler.maybe_throttle, chunk_limit=self.chunk)

    # ------------------------------------------------------------------ the swap

    def commit_round(self, log: Log, inputs: list[InputSegment], cleaned: list[LogSegment], rnd: CleaningRound) -> None:
        """Swap the staged replacements in under the partition lock, after checking that every input
        segment is still there unchanged (``LogChangedError`` otherwise: nothing swapped)."""
        self._commit(log, inputs, cleaned, rnd)

    # ------------------------------------------------------------------ the swap

    def _commit(self, log: Log, inputs: list[InputSegment], cleaned: list[LogSegment], rnd: CleaningRound) -> None:
        with log.lock.hold():
            log.sync_for_change()
            live = list(log.segments)
            active = log.active_segment
            last_base = inputs[-1].base_offset
            live_bases = [s.base_offset for s in live if s.base_offset <= last_base]
            problems = []
            if live_bases != [s.base_offset for s in inputs]:
                problems.append(f"segments {live_bases} where the pass read {[s.base_offset for s in inputs]}")
            else:
                by_base = {s.base_offset: s for s in live}
                for inp in inputs:
                    cur = by_base[inp.base_offset]
                    try:
                        st = os.stat(inp.path)  # the file on disk, not what any object cached
                    except FileNotFoundError:
                        problems.append(f"segment {inp.base_offset} is gone")
                        continue
                    if cur is active:
                        problems.append(f"segment {inp.base_offset} is the active segment now")
                    elif st.st_ino != inp.inode:
                        problems.append(f"segment {inp.base_offset} was replaced")
                    elif st.st_size != inp.size:
                        problems.append(f"segment {inp.base_offset} is {st.st_size} bytes, was {inp.size}")
            if problems:
                raise LogChangedError(
                    f"{log.tp} changed while it was being compacted: {'; '.join(problems)}; nothing was swapped"
                )
            old = [s for s in live if s.base_offset <= last_base]
            self._swap(log, cleaned, old)
            log.log_dir.cleaner_offsets.update({(log.topic, log.partition): rnd.end_offset})
            crash_point("compaction.after-checkpoint")

    def _swap(self, log: Log, cleaned: list[LogSegment], old: list[LogSegment]) -> None:
        """Kafka's ``replaceSegments`` with a crash point after every file step.

        The replacements were written as ``.cleaning`` without the lock: loader.py deletes any
        ``.cleaned`` file it finds, which is right for files a dead process left but would destroy
        a live cleaner's output whenever another process reloads the log. Under the lock they
        become ``.cleaned`` first, and from there the steps are Kafka's.
        """
        crash_point("compaction.before-swap")
        n = 0
        for seg in sorted(cleaned, key=lambda s: s.base_offset, reverse=True):
            for path in seg.existing_files():
                os.replace(path, path.with_name(path.name[: -len(STAGING_SUFFIX)] + CLEANED_SUFFIX))
                crash_point(f"compaction.staged-to-cleaned-{n}")
                n += 1
            seg.change_file_suffix(CLEANED_SUFFIX)
        n = 0
        for seg in sorted(cleaned, key=lambda s: s.base_offset, reverse=True):
            for path in seg.existing_files():  # .log first
                os.replace(path, path.with_name(path.name[: -len(CLEANED_SUFFIX)] + SWAP_SUFFIX))
                crash_point(f"compaction.cleaned-to-swap-{n}")
                n += 1
            seg.change_file_suffix(SWAP_SUFFIX)
        # Make the .swap names durable before any old file is renamed away.
        fsync_dir(log.dir)
        crash_point("compaction.after-swap-prepared")
        pending = log.remove_segments(old)
        crash_point("compaction.after-old-deleted")
        n = 0
        for seg in sorted(cleaned, key=lambda s: s.base_offset):
            for path in seg.existing_files():
                os.replace(path, path.with_name(path.name[: -len(SWAP_SUFFIX)]))
                crash_point(f"compaction.swap-to-final-{n}")
                n += 1
            seg.change_file_suffix("")
        fsync_dir(log.dir)
        crash_point("compaction.after-dir-fsync")
        log.install_segments(cleaned)
        if log.config.file_delete_delay_ms == 0:
            for path in pending:
                Path(path).unlink(missing_ok=True)

    # ------------------------------------------------------------------ after

    def dirty_ratio_now(self, log: Log, now_ms: int, last_stable_offset: int | None = None) -> float:
        """The partition's cleanable ratio as it stands (after a pass: what is left), bounded by the
        last stable offset the pass found (open transactions stay uncleanable)."""
        snap = self._snapshot(log)
        try:
            lso = last_stable_offset if last_stable_offset is not None else self._last_stable_offset
            if lso is not None:
                lso = min(lso, snap.log_end_offset)
            return _range_of(log, snap, lso, now_ms).cleanable_ratio
        finally:
            snap.close()


# ------------------------------------------------------------------------------------------
# map building's walk (local cleaner and remote tasks alike)


def dirty_segments(segments: list[InputSegment], start: int, end: int) -> list[InputSegment]:
    """The segments holding offsets of ``[start, end)``, in order."""
    facts = [SegmentFacts(s.base_offset, s.size, s.mtime_ms, s.is_active) for s in segments]
    wanted = {f.base_offset for f in segments_in_range(facts, start, end)}
    return [s for s in segments if s.base_offset in wanted]


def dirty_start_position(seg: InputSegment, start: int) -> int:
    """Byte position of the first batch of ``seg`` that reaches offset ``start``."""
    if seg.base_offset >= start:
        return 0
    for header, pos in seg.headers():
        if header.last_offset >= start:
            return pos
    return seg.size


def map_walk(
    seg: InputSegment,
    position: int,
    tracker: TransactionTracker,
    stats: CleanerStats,
    throttle: Callable[[int], None] = lambda n: None,
) -> Iterator[tuple[RawBatch, bytes, int, bool]]:
    """Every batch of ``seg`` from ``position``, CRC-checked (v2), with whether its records go into
    the offset map: data batches outside aborted transactions and legacy messages do; markers and
    aborted batches only move the transaction state along. Counts what it reads in ``stats``."""
    path = str(seg.path)
    for raw, chunk, chunk_offset in seg.batches_in_chunks(position):
        h = raw.header
        stats.map_bytes_read += h.size_in_bytes
        throttle(h.size_in_bytes)
        if h.magic < 2:
            yield raw, chunk, chunk_offset, True
            continue
        verify_batch(raw, path=path)
        stats.map_records_read += h.records_count
        if h.is_control:
            tracker.on_control_batch(h, control_type_of(raw, path))
            yield raw, chunk, chunk_offset, False
        elif tracker.on_data_batch(h):
            yield raw, chunk, chunk_offset, False
        else:
            yield raw, chunk, chunk_offset, h.records_count > 0


def batch_keys(raw: RawBatch, chunk: bytes | None = None, chunk_offset: int = 0,
               path: str | None = None) -> list[tuple[int, bytes | None]]:
    """``(offset, key)`` of every record of a data batch, any magic (keys None when absent)."""
    h = raw.header
    if h.magic < 2:
        return [(r.offset, r.key) for r in decode_batch(raw, path=path)]
    try:
        buf, start, stop = record_bytes(raw, path, chunk, chunk_offset)
        return [(h.base_offset + r[2], r[4]) for r in walk_v2_records(buf, h.records_count, start, stop)]
    except (IndexError, VarintError, ValueError) as exc:
        raise _corrupt(f"malformed records in batch: {exc}", raw, path) from None


def transaction_states(segments: list[InputSegment], aborted: Iterable[AbortedTxn],
                       starts: Iterable[int]) -> dict[int, TransactionTracker]:
    """The recopy's :class:`TransactionTracker` as it stands when it reaches each base offset of
    ``starts`` (group starts), from a replay of the batch headers: its state depends on headers
    and marker types only. Lets groups be recopied independently, in any order, with the same
    decisions as one pass over the whole log."""
    wanted = set(starts)
    tracker = TransactionTracker(aborted)
    out: dict[int, TransactionTracker] = {}
    for seg in segments:
        if seg.base_offset in wanted:
            out[seg.base_offset] = copy.deepcopy(tracker)
            if len(out) == len(wanted):
                break
        for header, pos in seg.headers():
            if header.magic < 2:
                continue
            if header.is_control:
                tracker.on_control_batch(header, control_type_of(seg.read_batch(pos, header.size_in_bytes), str(seg.path)))
            else:
                tracker.on_data_batch(header)
    return out


# ------------------------------------------------------------------------------------------
# recopying one group (local cleaner and remote tasks alike)


def recopy_group(
    directory: Path,
    config: LogConfig,
    group: list[InputSegment],
    legacy_delete_horizon_ms: int,
    bfilter: BatchFilter,
    *,
    throttle: Callable[[int], None] = lambda n: None,
    chunk_limit: int = _MIN_READ_CHUNK,
) -> LogSegment:
    """Filter a group of segments into one replacement segment in ``directory`` with the first
    input's base offset and the last input's mtime, flushed, under the staging suffix (see
    ``Cleaner._swap``). Deletes its output if anything fails."""
    base = group[0].base_offset
    for sfx in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        segment_file(directory, base, sfx + STAGING_SUFFIX).unlink(missing_ok=True)
    cleaned = LogSegment(directory, base, config, file_suffix=STAGING_SUFFIX, create=True)
    try:
        for seg in group:
            retain_legacy = seg.mtime_ms > legacy_delete_horizon_ms
            out: list[bytes] = []
            out_bytes = 0
            largest = -1
            max_ts, offset_of_max = -1, -1
            for raw, chunk, chunk_offset in seg.batches_in_chunks(0):
                throttle(raw.header.size_in_bytes)
                kept = bfilter.filter(raw, retain_legacy_deletes=retain_legacy, chunk=chunk,
                                      chunk_offset=chunk_offset)
                if kept is None:
                    continue
                out.append(kept.data)
                out_bytes += len(kept.data)
                largest = kept.last_offset
                if kept.max_timestamp > max_ts:
                    max_ts, offset_of_max = kept.max_timestamp, kept.last_offset
                if out_bytes >= chunk_limit:
                    cleaned.append(largest, max_ts, offset_of_max, b"".join(out))
                    throttle(out_bytes)
                    out, out_bytes, max_ts, offset_of_max = [], 0, -1, -1
            if out:
                cleaned.append(largest, max_ts, offset_of_max, b"".join(out))
                throttle(out_bytes)
        cleaned.on_become_inactive()
        cleaned.flush()
        cleaned.set_last_modified(group[-1].mtime_ms)
    except BaseException:
        cleaned.close(trim_indexes=False)
        cleaned.delete_files()
        raise
    return cleaned


def discard_staged(cleaned: Iterable[LogSegment]) -> None:
    """Delete replacement segments that never reached their swap."""
    for seg in cleaned:
        if seg.file_suffix in (STAGING_SUFFIX, CLEANED_SUFFIX):
            seg.close(trim_indexes=False)
            seg.delete_files()


def _range_of(log: Log, snap: _Snapshot, last_stable_offset: int | None, now_ms: int) -> LogToClean:
    """The partition's cleanable range and dirtiness as a snapshot of it shows them."""
    config = log.config
    return log_to_clean(
        log.topic,
        log.partition,
        snap.facts,
        checkpoint=snap.checkpoint,
        log_start_offset=snap.log_start_offset,
        log_end_offset=snap.log_end_offset,
        last_stable_offset=last_stable_offset,
        now_ms=now_ms,
        min_compaction_lag_ms=config.min_compaction_lag_ms,
        max_compaction_lag_ms=config.max_compaction_lag_ms,
        min_cleanable_ratio=config.min_cleanable_dirty_ratio,
    )


# ------------------------------------------------------------------------------------------
# metadata-only candidacy (no log opened)


def _first_batch_max_timestamp(log_path: Path) -> int:
    """maxTimestamp of a segment's first batch from its first bytes; LONG_MAX when empty."""
    try:
        fd = open_nofollow(log_path, os.O_RDONLY)
    except FileNotFoundError:
        return LONG_MAX
    try:
        head = os.pread(fd, RECORD_BATCH_OVERHEAD, 0)
    finally:
        os.close(fd)
    if len(head) < 26:
        return LONG_MAX
    magic = head[16]
    if magic == 2 and len(head) >= 43:
        return struct.unpack_from(">q", head, 35)[0]
    if magic == 1:
        return struct.unpack_from(">q", head, 18)[0]
    return -1


def _log_end_offset_on_disk(directory: Path, active_base: int) -> int:
    """Next offset of the active segment, scanning headers after its last index entry."""
    index = segment_file(directory, active_base, INDEX_SUFFIX)
    start = 0
    if index.exists():
        start = OffsetIndex.read_last_entry_only(index, active_base).position
    nxt = active_base
    try:
        fd = open_nofollow(segment_file(directory, active_base, LOG_SUFFIX), os.O_RDONLY)
    except FileNotFoundError:
        return nxt
    try:
        pos, size = start, os.fstat(fd).st_size
        while pos + 17 <= size:
            head = os.pread(fd, 17, pos)
            base, length, _, magic = struct.unpack(">qiib", head)
            if length < 14 or pos + 12 + length > size:
                break
            if magic == 2:
                delta = struct.unpack(">i", os.pread(fd, 4, pos + 23))[0]
                nxt = base + delta + 1
            else:
                nxt = base + 1
            pos += 12 + length
    finally:
        os.close(fd)
    return nxt


def candidacy_from_stats(stats, config: LogConfig, now_ms: int) -> LogToClean | None:
    """A partition's :class:`LogToClean` from ``stats.read_partition_stats`` (file metadata, the
    time index tails and the first 61 bytes of dirty segments): what ``logctl compact`` uses to
    pick and order partitions. Open transactions are not seen here (the last stable offset is
    taken as the log end offset); the cleaning pass itself scans for them."""
    if not stats.segments:
        return None
    directory = Path(stats.directory)
    facts = [
        SegmentFacts(
            s.base_offset,
            s.size_bytes,
            s.mtime_ms,
            s.is_active,
            largest_timestamp_loader=lambda s=s: s.max_record_timestamp,
            first_batch_timestamp_loader=lambda s=s: _first_batch_max_timestamp(
                segment_file(directory, s.base_offset, LOG_SUFFIX)
            ),
        )
        for s in stats.segments
    ]
    leo = _log_end_offset_on_disk(directory, facts[-1].base_offset)
    return log_to_clean(
        stats.topic,
        stats.partition,
        facts,
        checkpoint=stats.cleaner_checkpoint,
        log_start_offset=stats.log_start_offset,
        log_end_offset=leo,
        now_ms=now_ms,
        min_compaction_lag_ms=config.min_compaction_lag_ms,
        max_compaction_lag_ms=config.max_compaction_lag_ms,
        min_cleanable_ratio=config.min_cleanable_dirty_ratio,
    )


def sweep_pending(directory: Path, delay_ms: int) -> list[tuple[str, int]]:
    """Remove ``.deleted`` files older than ``file.delete.delay.ms`` by the wall clock."""
    from .retention import sweep_deleted_files

    return sweep_deleted_files(directory, wall_clock_ms(), delay_ms)
