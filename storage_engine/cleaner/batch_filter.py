"""One batch in, the bytes to write out: Kafka's ``MemoryRecords.filterTo`` driven by the
cleaner's rules. A batch whose records all survive and that needs no delete horizon is copied
verbatim; otherwise the survivors' bytes go under a new header (``record.rewrite``).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from ..config.values import LONG_MAX
from ..record import RawBatch, Record, decode_batch, verify_batch
from ..record.control import control_type_of
from ..record.records import BatchHeader
from ..record.rewrite import (
    corrupt_batch,
    empty_batch_of,
    rebuild_legacy_batch,
    rebuild_v2_batch,
    record_bytes,
)
from ..record.v2 import walk_records as walk_v2_records
from ..record.varint import VarintError
from .offset_map import OffsetMap
from .record_decisions import filter_batch, filter_versioned_records
from .rules import (
    BatchRetention,
    LastRecord,
    RecordOutcome,
    TransactionTracker,
    batch_retention,
    is_last_batch_of_active_producer,
    retain_record,
    retain_tombstones_v2,
    retain_versioned_record,
)
from .stats import CleanerStats
from .strategy import VersionRule


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
    transactions, the producers' last records, the clock, the base offset of the round's last
    batch and the topic's compaction strategy (``versions``: None for ``offset``; otherwise the
    map is versioned and the batches must come in offset order). ``filter(raw)`` returns the
    bytes to write for that batch (or None) and counts what it removed in ``stats``.
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
        versions: VersionRule | None = None,
    ) -> None:
        self.map = offset_map
        self.versions = versions
        self.tracker = tracker
        self.last_records = last_records
        self.now_ms = now_ms
        self.delete_retention_ms = delete_retention_ms
        self.last_batch_base_offset = last_batch_base_offset
        self.stats = stats if stats is not None else CleanerStats()
        self.path = path
        self._mapped_dirty = False
        self._winners: list[int] | None = None
        self._dirty_start = 0
        self._unkeyed: dict[int, int] = {}

    def use_winners(self, winners: list[int] | None, dirty_start: int, unkeyed_by_batch: dict[int, int]) -> None:
        """Say that the map was built from the dirty range at ``dirty_start`` (every keyed record
        of it up to the map's latest offset is in the map), so batches wholly inside skip their
        records when no record of theirs wins its key: ``winners`` are the map's offsets,
        ascending (see ``OffsetMap.sorted_offsets``; None: the compiled ``keymap`` answers), and
        ``unkeyed_by_batch`` what map building counted, so the stats stay exact. The CRC of
        every batch of that range was checked when the map was built, so it is not checked again. The compiled keep/drop walk also decides the
        dirty range's records by their offsets alone (see ``record_decisions.filter_batch``)."""
        self._mapped_dirty = True
        self._winners = winners
        self._dirty_start = dirty_start
        self._unkeyed = unkeyed_by_batch

    def _in_mapped_range(self, h: BatchHeader) -> bool:
        """A batch wholly inside the range map building walked: its CRC was checked then."""
        return self._mapped_dirty and h.base_offset >= self._dirty_start and h.last_offset <= self.map.latest_offset

    def decided_by_header(self, h: BatchHeader) -> bool:
        """Whether :meth:`filter` decides this batch from its header alone, never reading its
        bytes: a v2 data batch with records, none of which wins its key (see
        :meth:`use_winners`). The recopy leaves such batches unread
        (``InputSegment.batches_skipping``)."""
        return h.magic >= 2 and not h.is_control and h.records_count > 0 and self._without_winner(h)

    def _without_winner(self, h: BatchHeader) -> bool:
        if not self._in_mapped_range(h):
            return False
        winners = self._winners
        if winners is None:
            return not self.map.keymap.has_winner_in(h.base_offset, h.last_offset)
        i = bisect_left(winners, h.base_offset)
        return i == len(winners) or winners[i] > h.last_offset

    def filter(self, raw: RawBatch, *, retain_legacy_deletes: bool = True, chunk: bytes | None = None,
               chunk_offset: int = 0) -> FilteredBatch | None:
        """The bytes to write for ``raw`` (None: nothing). ``chunk``/``chunk_offset``, when given,
        say that ``raw.data`` is ``chunk[chunk_offset:...]``, so records are read in place.
        ``raw.data`` is not read when :meth:`decided_by_header` says so (it may be empty then)."""
        h = raw.header
        stats = self.stats
        stats.bytes_read += h.size_in_bytes
        stats.batches_read += 1
        if h.magic < 2:
            verify_batch(raw, path=self.path)
            return self._filter_legacy(raw, retain_legacy_deletes)
        skip_records = self.decided_by_header(h)
        if not skip_records and not self._in_mapped_range(h):
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
                retain_tombstones = retain_tombstones_v2(h, self.now_ms)
                if self.versions is not None:
                    spans, has_tombstone, dup, tomb, unkeyed = filter_versioned_records(
                        buf, start, stop, count, h.base_offset, self.versions.for_batch(h), self.map,
                        retain_tombstones)
                else:
                    dirty_start = self._dirty_start if self._mapped_dirty else None
                    listed, has_tombstone, dup, tomb, unkeyed = filter_batch(
                        self.map, buf, start, stop, count, h.base_offset, retain_tombstones, dirty_start,
                        all_kept_as_none=True)
                    if listed is None:  # every record survives: the spans only if the batch is rebuilt
                        if not has_tombstone or h.has_delete_horizon:
                            return self._emit(raw.data, h.last_offset, h.max_timestamp, count, copied=True)
                        listed = filter_batch(self.map, buf, start, stop, count, h.base_offset, retain_tombstones,
                                              dirty_start)[0]
                    spans = listed or []  # a second call without all_kept_as_none lists them
                stats.duplicates_removed += dup
                stats.tombstones_removed += tomb
                stats.unkeyed_removed += unkeyed
        except (IndexError, VarintError, ValueError) as exc:
            raise corrupt_batch(f"malformed records in batch: {exc}", raw, self.path) from None
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
        ``spans`` are ``(start, end, timestamp delta)`` of each survivor in ``buf``; the bytes are
        the record layer's (``rebuild_v2_batch``)."""
        horizon = None
        if stamp_horizon:  # saturated: delete.retention.ms may be Long.MAX ("keep tombstones for ever")
            horizon = min(self.now_ms + self.delete_retention_ms, LONG_MAX)
            self.stats.horizons_stamped += 1
        data, max_ts = rebuild_v2_batch(h, buf, spans, horizon)
        return self._emit(data, h.last_offset, max_ts, len(spans), copied=False)

    def _filter_legacy(self, raw: RawBatch, retain_deletes: bool) -> FilteredBatch | None:
        """Magic 0/1: no producer state, no empty batches; the whole message or the survivors."""
        h = raw.header
        records = decode_batch(raw, verify=False, path=self.path)
        self.stats.records_read += len(records)
        latest = self.map.latest_offset
        kept = []
        for r in records:
            if self.versions is not None:
                verdict = self._versioned_legacy(r, retain_deletes)
            else:
                verdict = retain_record(r.offset, r.key, r.value is None, latest_offset_of_key=self.map.get(r.key)
                                        if r.key is not None else -1, map_latest_offset=latest,
                                        retain_tombstones=retain_deletes)
            if verdict is RecordOutcome.KEEP:
                kept.append(r)
            else:
                self._count_drop(verdict)
        if len(kept) == len(records) or (not kept and h.base_offset == self.last_batch_base_offset):
            # all survive, or the round's last batch (legacy has no empty header): copied as is
            return self._emit(raw.data, h.last_offset, h.max_timestamp, len(records), copied=True)
        if not kept:
            return None
        data = rebuild_legacy_batch(h, kept)
        return self._emit(data, kept[-1].offset, max(r.timestamp for r in kept), len(kept), copied=False)

    def _versioned_legacy(self, r: Record, retain_deletes: bool) -> RecordOutcome:
        """:func:`retain_versioned_record` for one magic 0/1 message (moving the map's winner
        when it beats it)."""
        latest = self.map.latest_offset
        key = r.key if r.offset <= latest else None  # a record past the map has no winner to beat
        version = self.versions.of_record(r) if key is not None else 0  # type: ignore[union-attr]
        verdict, beats = retain_versioned_record(
            r.offset, r.key, r.value is None, version, winner=self.map.winner(key) if key is not None else None,
            map_latest_offset=latest, retain_tombstones=retain_deletes, newest=self.map.newest)
        if beats and key is not None:
            self.map.take(key, version, r.offset)
        return verdict

    def _count_drop(self, verdict: int) -> None:
        if verdict is RecordOutcome.DROP_DUPLICATE:
            self.stats.duplicates_removed += 1
        elif verdict is RecordOutcome.DROP_TOMBSTONE:
            self.stats.tombstones_removed += 1
        elif verdict is RecordOutcome.DROP_UNKEYED:
            self.stats.unkeyed_removed += 1
