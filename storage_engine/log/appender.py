"""How a :class:`~storage_engine.log.log.Log` takes writes: produce calls, their validation into
the active segment, the roll and the flush (Kafka's ``UnifiedLog.append`` over ``LocalLog.roll``
and ``LocalLog.flush``), apart from the log's loading and reads.

A ``Log`` holds one ``LogAppender(log)`` and answers its appends, rolls and flushes through it;
the log owns the segment list, the lock and the loading. Every write here runs under the
partition lock after the log re-read what other processes did (``Log._sync_locked``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import AppendFailedError, LogError, OffsetOverflowError, UndoFailedError, write_failure
from ..faults import crash_point
from ..files.naming import segment_file
from ..limits import LONG_MAX
from ..record import CompressionType
from ..record.control import ControlRecordType
from .aborted_txns import AbortedTxnTracker
from .append_validation import (
    ProducerRecord,
    ValidatedBatch,
    build_batch,
    build_end_txn_marker,
    validate_producer_batch,
)
from .segment import AppendMark, LogSegment, now_ms

if TYPE_CHECKING:
    from .log import Log

#: what a failed undo leaves (``LogAppender._undo``): the process stops writing, recovery rebuilds the log
UNDO_FAILED_NEXT = ("it takes no more writes in this process, and the next writable open of its log dir, once every "
                    "process has closed it, recovers it from its files")


@dataclass(frozen=True)
class AppendInfo:
    """What one append did (Kafka's ``LogAppendInfo``): the offsets it took, and why the log rolled first."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    record_count: int
    size_bytes: int
    rolled: str | None  # why the log rolled before this append, if it did


class LogAppender:
    """The write half of a ``Log``, composed into it (see the module docstring)."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.unflushed = 0
        self.last_flush_ms = now_ms()
        self.dirty = False  # this process appended since its last flush

    def append(
        self,
        records: Sequence[ProducerRecord],
        *,
        compression: CompressionType = CompressionType.NONE,
        now: int | None = None,
    ) -> AppendInfo:
        """Append records as one batch (a produce request from a producer with ``compression``)."""
        log = self.log
        now = now_ms() if now is None else now
        log._require_producible()
        with log.lock.hold():
            log._sync_locked()
            self._check_offsets_fit(log._leo + len(records))
            batch = build_batch(
                records, base_offset=log._leo, config=log.config, compression=compression, now_ms=now, tp=log.tp
            )
            return self._append_validated(batch, now)

    def append_all(
        self,
        batches: Sequence[Sequence[ProducerRecord]],
        *,
        compression: CompressionType = CompressionType.NONE,
        now: int | None = None,
    ) -> list[AppendInfo]:
        """Append several batches as one produce call: all of them, flushed, or none.

        Kafka appends each batch of a produce request on its own, so a disk that fills half way
        leaves the first half committed (and a torn batch until the next recovery). Here a
        failure undoes the whole call under the lock (``_rollback``) and raises
        :class:`AppendFailedError`: the log is as it was, and a caller can retry without
        duplicating anything (an undo that fails too raises :class:`UndoFailedError`, see
        ``_undo``). A kill part way through is no failure this process sees: the whole
        batches written before it stay (recovery drops a torn one), unacknowledged.
        """
        log = self.log
        now = now_ms() if now is None else now
        log._require_producible()
        with log.lock.hold():
            log._sync_locked()
            self._check_offsets_fit(log._leo + sum(len(records) for records in batches))
            mark = self._tail_mark()
            try:
                infos = [
                    self._append_validated(build_batch(records, base_offset=log._leo, config=log.config,
                                                       compression=compression, now_ms=now, tp=log.tp), now)
                    for records in batches
                ]
                self.flush_locked(now)  # durable, and the recovery point with it, before success
                log.log_dir.recovery_points.update({(log.topic, log.partition): log.recovery_point})
            except BaseException as exc:  # any failure after a batch went in (a damaged index refusing
                self._undo(mark, exc)  # its entry, say) undoes the call too: no record stays that the call did not report
                if not isinstance(exc, OSError):
                    raise
                failed = write_failure(log.tp, exc, log.active_segment.log_path)
                if log._undo_failure is not None:
                    raise UndoFailedError(f"{failed}; {log._undo_failure}; {UNDO_FAILED_NEXT}") from None
                raise AppendFailedError(f"{failed}; the produce call was undone, none of its records was appended "
                                        f"(log end offset still {log._leo})") from None
            return infos

    def _tail_mark(self) -> _TailMark:
        log = self.log
        return _TailMark(len(log.segments), log.active_segment.append_mark(), log._leo, log.recovery_point,
                         self.unflushed, self.dirty)

    def _undo(self, mark: _TailMark, failure: BaseException) -> None:
        """Undo a failed produce call (``_rollback``). When the undo fails as well, the files and
        this process's view of them may differ, so the log refuses every later write here
        (``Log._undo_failure``) and this process leaves its log dir's clean-shutdown marker
        unwritten (``LogDir.record_load_failure``): the next writable open recovers the log from
        its files, as after a crash, keeping the batches that were written whole. Writing on
        from a stale log end offset would have left a gap in the offsets."""
        try:
            self._rollback(mark)
        except (OSError, LogError) as undo:
            failure.add_note(self._undo_failed(f"undoing it failed too ({undo}), so some of its batches may be in the log"))

    def _undo_failed(self, why: str) -> str:
        """Note that this process can no longer vouch for the log; the first reason stays, and is returned."""
        log = self.log
        if log._undo_failure is None:
            log._undo_failure = why
        log.log_dir.record_load_failure((log.topic, log.partition))
        return log._undo_failure

    def _rollback(self, mark: _TailMark) -> None:
        """Undo appends and rolls since ``mark`` (lock held): segments created since are removed,
        the segment that was active gets its old length and index entries back."""
        log = self.log
        for segment in log.segments[mark.segment_count:]:
            segment.close(trim_indexes=False)
            for path in (segment.log_path, *segment.index_paths()):
                path.unlink(missing_ok=True)
        del log.segments[mark.segment_count:]
        del log._bases[mark.segment_count:]
        log.active_segment.rollback(mark.active)
        log._leo = mark.log_end_offset
        log.recovery_point = mark.recovery_point
        log._tail_position = log.active_segment.size
        self.unflushed = mark.unflushed
        self.dirty = mark.dirty
        log._load_producer_state()  # drops snapshots the undone rolls took, and the undone batches' state
        log.bump_generation()  # readers that saw the undone state reload

    def append_batch(self, data: bytes, *, now: int | None = None) -> AppendInfo:
        """Append one producer-built batch (offsets are assigned here, as a leader does)."""
        log = self.log
        now = now_ms() if now is None else now
        log._require_producible()
        with log.lock.hold():
            log._sync_locked()
            batch = validate_producer_batch(data, base_offset=log._leo, config=log.config, now_ms=now, tp=log.tp)
            self._check_offsets_fit(batch.last_offset + 1)
            return self._append_validated(batch, now)

    def append_end_txn_marker(self, producer_id: int, producer_epoch: int, *, commit: bool,
                              coordinator_epoch: int = 0, now: int | None = None) -> AppendInfo:
        """End the producer's transaction with a COMMIT or ABORT marker, as Kafka's transaction
        coordinator does through the leader (``WriteTxnMarkers``, append origin COORDINATOR:
        the one writer allowed control batches). A marker from a fenced producer epoch or
        coordinator epoch is refused in the broker's words, nothing written
        (``ProducerStateManager.check_end_txn_marker``). An ABORT that ends a non-empty
        transaction also appends its entry to the active segment's ``.txnindex``, after the
        marker and with the last stable offset just after it (``UnifiedLog.append``:
        ``segment.updateTxnIndex`` with ``producerStateManager.lastStableOffset(completedTxn)``,
        ``aborted_txns``). Nothing is flushed between the two, so the recovery point never
        passes a marker whose entry is not written: a kill between them leaves the marker past
        the recovery point, and the next writable open's recovery rebuilds the entry (``verify``
        names the gap until then). The call is flushed before it returns, and a failure undoes
        both (``_undo``)."""
        log = self.log
        now = now_ms() if now is None else now
        log._require_producible()
        with log.lock.hold():
            log._sync_locked()
            self._check_offsets_fit(log._leo + 1)
            producers = log._producer_state_locked()
            producers.check_end_txn_marker(producer_id, producer_epoch, coordinator_epoch, offset=log._leo, tp=log.tp)
            batch = build_end_txn_marker(producer_id, producer_epoch, commit=commit, coordinator_epoch=coordinator_epoch,
                                         base_offset=log._leo, config=log.config, now_ms=now)
            entry = AbortedTxnTracker(producers.open_transactions()).end(
                producer_id, batch.last_offset, ControlRecordType.COMMIT if commit else ControlRecordType.ABORT)
            mark = self._tail_mark()
            try:
                info = self._append_validated(batch, now, may_flush=False)
                if entry is not None:
                    crash_point("append.before-txn-index")
                    log.active_segment.txn_index.append(entry)
                self.flush_locked(now)
            except BaseException as exc:
                self._undo(mark, exc)
                raise
            return info

    def _check_offsets_fit(self, next_offset: int) -> None:
        """Refuse, before anything is written, an append after which the log end offset would
        be ``next_offset`` > Long.MAX_VALUE: Kafka's offsets are longs, and the recovery point
        checkpoint (which reaches the log end offset) could not be read back."""
        if next_offset > LONG_MAX:
            raise OffsetOverflowError(
                f"{self.log.tp}: appending at log end offset {self.log._leo} would pass offset {LONG_MAX}, the largest "
                f"Kafka allows (next offset {next_offset}); nothing was appended"
            )

    def _append_validated(self, batch: ValidatedBatch, now: int, *, may_flush: bool = True) -> AppendInfo:
        """Write a validated batch into the active segment (rolling first when due), then flush
        when ``flush.messages`` / ``flush.ms`` say so, unless the caller flushes itself after
        more writes that must not fall behind the recovery point (``may_flush``)."""
        log = self.log
        segment = log.active_segment
        decision = segment.should_roll(len(batch.data), batch.max_timestamp, batch.last_offset, now)
        if decision:
            segment = self.roll_locked(now)
        segment.append(batch.last_offset, batch.max_timestamp, batch.offset_of_max_timestamp, batch.data)
        log._leo = batch.last_offset + 1
        log._tail_position = segment.size
        self.unflushed += batch.record_count
        self.dirty = True
        if may_flush and (self.unflushed >= log.config.flush_messages or now - self.last_flush_ms >= log.config.flush_ms):
            self.flush_locked(now)
        return AppendInfo(
            batch.first_offset,
            batch.last_offset,
            batch.max_timestamp,
            batch.record_count,
            len(batch.data),
            decision.reason,
        )

    def roll(self, now: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (no-op when the active one is empty)."""
        log = self.log
        log._require_writable()
        with log.lock.hold():
            log._sync_locked()
            return self.roll_locked(now_ms() if now is None else now)

    def roll_locked(self, now: int) -> LogSegment:
        """``roll`` for code that already holds the lock and has synced (appends, retention)."""
        log = self.log
        new_offset = log._leo
        active = log.active_segment
        if active.base_offset == new_offset and active.size == 0:
            return active
        for stray in (segment_file(log.dir, new_offset, sfx) for sfx in (".log", ".index", ".timeindex", ".txnindex")):
            stray.unlink(missing_ok=True)
        # The old segment's final time-index entry first: a kill after the next segment exists
        # would leave it without one, past a recovery point a live writer then checkpoints.
        # A roll refused at any step (a read-only or full directory) takes the entry and the
        # trim back and removes the new segment, which is not in the segment list yet: left
        # behind, it would end the log at its base offset, past offsets never written, and a
        # trimmed active segment would refuse every later append as a full index.
        mark = active.append_mark()
        segment = None
        try:
            active.append_final_time_index_entry()
            segment = LogSegment(log.dir, new_offset, log.config, create=True, created_ms=now)
            crash_point("roll.after-new-segment")
            active.on_become_inactive()
            active.flush()
        except BaseException as exc:
            undo_errors = []  # the roll's own error is the one to report
            if segment is not None:
                try:
                    segment.close(trim_indexes=False)
                    segment.delete_files()
                except OSError as undo:
                    undo_errors.append(undo)
            if not undo_errors:  # with the new segment still there, the old one keeps its final entry
                try:
                    active.rollback(mark)
                except OSError as undo:  # a file size limit, say
                    undo_errors.append(undo)
            if undo_errors:
                self._undo_failed(f"undoing its roll failed too ({undo_errors[0]})")
                exc.add_note(f"undoing the roll failed too: {undo_errors[0]}")
            raise
        log.segments.append(segment)
        log._bases.append(new_offset)
        log._tail_position = 0
        log.recovery_point = max(log.recovery_point, new_offset)
        log.bump_generation()
        log._snapshot_producers()
        return segment

    def flush(self, now: int | None = None) -> None:
        """fsync everything appended; the recovery point moves to the log end offset."""
        with self.log.lock.hold():
            self.flush_locked(now_ms() if now is None else now)

    def flush_locked(self, now: int) -> None:
        """``flush`` for code that already holds the lock."""
        log = self.log
        for seg in log.segments[log._segment_index(log.recovery_point):]:
            seg.flush()
        log.recovery_point = max(log.recovery_point, log._leo)
        self.unflushed = 0
        self.last_flush_ms = now
        self.dirty = False


@dataclass(frozen=True)
class _TailMark:
    """The log's tail before a produce call: what ``LogAppender._rollback`` restores."""

    segment_count: int
    active: AppendMark
    log_end_offset: int
    recovery_point: int
    unflushed: int
    dirty: bool
