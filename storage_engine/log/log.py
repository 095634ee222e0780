"""The log of one topic-partition: an ordered list of segments in ``<topic>-<partition>/``.

Kafka's ``UnifiedLog``/``LocalLog`` for one process, extended for several processes sharing the
directory (see ``partition_lock.py``): every change happens under the partition lock after re-reading
what other processes did; reads take no lock, notice a changed segment list through the
generation counter, and retry when a segment they were about to use was swapped or deleted.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..config.topic import LogConfig
from ..errors import (
    AppendFailedError,
    LogError,
    OffsetOutOfRangeError,
    OffsetOverflowError,
    PartitionReplacedError,
    UndoFailedError,
    write_failure,
)
from ..faults import crash_point
from ..files.durable import fsync_dir
from ..files.naming import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX, check_not_metadata_log, segment_file
from ..limits import LONG_MAX
from ..record import CompressionType
from .append_validation import ProducerRecord, ValidatedBatch, build_batch, validate_producer_batch
from .dir_state import LogDirState
from .loader import REFUSED_UNCHANGED, LogLoader
from .partition_lock import PartitionLock
from .producer_state import ProducerStateManager
from .reads import LogReads
from .segment import AppendMark, LogSegment, now_ms

#: what a failed undo leaves (``Log._undo``): the process stops writing, recovery rebuilds the log
UNDO_FAILED_NEXT = ("it takes no more writes in this process, and the next writable open of its log dir, once every "
                    "process has closed it, recovers it from its files")


@dataclass(frozen=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    record_count: int
    size_bytes: int
    rolled: str | None  # why the log rolled before this append, if it did


class Log(LogReads):
    """One partition. Open through ``LogManager`` (which knows the log dir and topic config)."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        log_dir: LogDirState,
        *,
        topic: str,
        partition: int,
        had_clean_shutdown: bool = True,
        read_only: bool = False,
    ) -> None:
        self.read_only = read_only
        self.dir = Path(directory)
        self.config = config
        self.log_dir = log_dir
        self.topic = topic
        self.partition = partition
        self.tp = f"{topic}-{partition}"
        self.lock = PartitionLock(self.dir, read_only=read_only)
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.load_actions: list[str] = []
        self._unflushed = 0
        self._last_flush_ms = now_ms()
        self._dirty = False  # this process appended since its last flush
        self._undo_failure: str | None = None  # why this process can no longer vouch for the log (``_undo``)
        if read_only:  # a view of what the next writable open makes of the log
            had_clean_shutdown = not log_dir.recovery_pending
        with self.lock.hold():
            self._load(had_clean_shutdown)

    # ------------------------------------------------------------------ loading and syncing

    def _load(self, had_clean_shutdown: bool) -> None:
        """(Re)build the segment list from disk; the caller holds the lock."""
        key = (self.topic, self.partition)
        lso_checkpoint = self.log_dir.log_start_offsets.get(key)
        self._cleaned_to = self.log_dir.cleaner_offsets.get(key) or 0
        rp_checkpoint = self.log_dir.recovery_points.get(key)
        result = LogLoader(
            self.dir,
            self.config,
            log_start_offset_checkpoint=lso_checkpoint,
            recovery_point=rp_checkpoint or 0,
            had_clean_shutdown=had_clean_shutdown,
            read_only=self.read_only,
        ).load()
        for seg in self.segments:
            seg.close(trim_indexes=False)
        self.segments = result.segments
        self._bases = [s.base_offset for s in self.segments]
        self.log_start_offset = result.log_start_offset
        self.recovery_point = result.recovery_point
        self._leo = result.log_end_offset
        # a read-only view of a partition without segments is an empty log (see LogLoader)
        self._tail_position = self.active_segment.refresh_size() if self.segments else 0
        self.load_warnings = result.warnings
        # this load changed the segment list (a swap completed, a stray removed): a plan made
        # from the files before it may be made again (``retention.apply_retention``)
        self.segments_repaired = result.segments_changed
        self._load_producer_state()
        # what a writable open would change (read-only views), producer snapshots included: verify reports these
        self.pending_repairs = list(self.load_warnings)
        if not self.read_only and lso_checkpoint is not None and lso_checkpoint > result.log_start_offset:
            self.log_dir.log_start_offsets.update({key: result.log_start_offset})  # ignored as damage
        if result.actions:
            self.load_actions.extend(result.actions)
            self.lock.bump_generation()
            if result.recovery_point != rp_checkpoint:
                self.log_dir.recovery_points.update({key: result.recovery_point})
        self._generation = self.lock.generation()

    def _load_producer_state(self) -> None:
        """Producer state from the latest usable snapshot (``producer_state.py``); the replay of
        the batches after it waits until state is needed (a roll, the close, the cleaner)."""
        self._producers = ProducerStateManager(self.dir)
        self._producers.load(log_start_offset=self.log_start_offset, recovery_point=self.recovery_point,
                             log_end_offset=self._leo, segment_bases=self._bases, writable=not self.read_only)
        self.load_actions.extend(self._producers.actions)
        self.load_warnings = [*self.load_warnings, *self._producers.warnings]

    def _producer_state_locked(self) -> ProducerStateManager:
        """Producer state up to the log end offset (lock held)."""
        producers = self._producers
        if producers.map_end_offset < self._leo:
            start = max(producers.map_end_offset, self.log_start_offset)
            producers.replay(self._batches_from(start), self._leo, str(self.dir))
        return producers

    def _snapshot_producers(self) -> None:
        """Kafka's snapshot at a roll and at clean shutdown. A snapshot that cannot be written
        (full disk, or a corrupt batch the replay stops at) costs only a longer replay later, so
        it does not fail the roll or the close."""
        try:
            self._producer_state_locked().take_snapshot()
        except (OSError, LogError) as exc:  # LogError: a batch the replay cannot read
            self.load_warnings.append(f"{self.tp}: producer snapshot at offset {self._leo} not written: {exc}")

    def last_records_of_active_producers(self) -> dict[int, tuple[int | None, int]]:
        """Kafka's ``UnifiedLog.lastRecordsOfActiveProducers`` (what the cleaner keeps as each
        producer's last batch): producer id -> (last data offset or None, epoch)."""
        with self.lock.hold():
            self._sync_locked()
            return self._producer_state_locked().last_records()

    def _reload(self) -> None:
        """Reload after another process changed the log (the lock held). A reload that fails
        after it repaired part of the log cannot vouch for the rest, so, as for a failed first
        load (``LogManager.load_log``), this process leaves its log dir's clean-shutdown marker
        unwritten (``LogDir.record_load_failure``) and the next first opener recovers."""
        try:
            self._load(had_clean_shutdown=not (self.read_only and self.log_dir.recovery_pending))
        except BaseException as exc:
            if not isinstance(exc, REFUSED_UNCHANGED):
                self.log_dir.record_load_failure((self.topic, self.partition))
            raise

    def _reload_changed(self) -> None:
        """Reload after another process changed the log, taking the lock. A reader first asks
        again whether the next writable open recovers the log dir, as writers come and go
        (``LogDir.refresh_recovery_pending``), and must ask before it takes the lock, which a
        recovering writer needs."""
        if self.read_only:
            self.log_dir.refresh_recovery_pending()
        with self.lock.hold():
            self._reload()

    def _changed_on_disk(self) -> bool:
        return (
            self.lock.generation() != self._generation
            or self.active_segment.refresh_size() != self._tail_position
        )

    def _require_writable(self) -> None:
        if self.read_only:
            raise LogError(f"{self.tp} was opened read-only")
        if self._undo_failure is not None:
            raise UndoFailedError(f"{self.tp}: an earlier write here failed and {self._undo_failure}; {UNDO_FAILED_NEXT}")

    def _require_producible(self) -> None:
        check_not_metadata_log(self.topic, "produce")
        self._require_writable()

    def _sync_locked(self) -> None:
        """Before a change: reload if another process changed the segment list or appended."""
        if self._changed_on_disk():
            self._reload()

    def sync_for_change(self) -> None:
        """For maintenance code about to change the log: the lock must be held."""
        self._require_writable()
        if not self.lock.held:
            raise RuntimeError("sync_for_change() needs the partition lock")
        self._sync_locked()

    def refresh(self) -> None:
        """For readers: pick up other processes' appends, and reload after segment-list changes."""
        if self.lock.generation() != self._generation or not self.segments:
            self._reload_changed()
            return
        active = self.active_segment
        size = active.refresh_size()
        if size != self._tail_position:
            for raw in active.batches(self._tail_position):
                self._leo = raw.header.next_offset
                self._tail_position = raw.position + raw.header.size_in_bytes

    def bump_generation(self) -> None:
        """Publish a change to the segment list or log start offset (lock held)."""
        self._generation = self.lock.bump_generation()

    # ------------------------------------------------------------------ facts

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def high_watermark(self) -> int:
        """Single replica: everything appended is committed."""
        return self._leo

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # ------------------------------------------------------------------ appending

    def append(
        self,
        records: Sequence[ProducerRecord],
        *,
        compression: CompressionType = CompressionType.NONE,
        now: int | None = None,
    ) -> AppendInfo:
        """Append records as one batch (a produce request from a producer with ``compression``)."""
        now = now_ms() if now is None else now
        self._require_producible()
        with self.lock.hold():
            self._sync_locked()
            self._check_offsets_fit(self._leo + len(records))
            batch = build_batch(
                records, base_offset=self._leo, config=self.config, compression=compression, now_ms=now, tp=self.tp
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
        now = now_ms() if now is None else now
        self._require_producible()
        with self.lock.hold():
            self._sync_locked()
            self._check_offsets_fit(self._leo + sum(len(records) for records in batches))
            mark = self._tail_mark()
            try:
                infos = [
                    self._append_validated(build_batch(records, base_offset=self._leo, config=self.config,
                                                       compression=compression, now_ms=now, tp=self.tp), now)
                    for records in batches
                ]
                self._flush_locked(now)  # durable, and the recovery point with it, before success
                self.log_dir.recovery_points.update({(self.topic, self.partition): self.recovery_point})
            except BaseException as exc:  # any failure after a batch went in (a damaged index refusing
                self._undo(mark, exc)  # its entry, say) undoes the call too: no record stays that the call did not report
                if not isinstance(exc, OSError):
                    raise
                failed = write_failure(self.tp, exc, self.active_segment.log_path)
                if self._undo_failure is not None:
                    raise UndoFailedError(f"{failed}; {self._undo_failure}; {UNDO_FAILED_NEXT}") from None
                raise AppendFailedError(f"{failed}; the produce call was undone, none of its records was appended "
                                        f"(log end offset still {self._leo})") from None
            return infos

    def _tail_mark(self) -> _TailMark:
        return _TailMark(len(self.segments), self.active_segment.append_mark(), self._leo, self.recovery_point,
                         self._unflushed, self._dirty)

    def _undo(self, mark: _TailMark, failure: BaseException) -> None:
        """Undo a failed produce call (``_rollback``). When the undo fails as well, the files and
        this process's view of them may differ, so the log refuses every later write here
        (``_undo_failure``) and this process leaves its log dir's clean-shutdown marker
        unwritten (``LogDir.record_load_failure``): the next writable open recovers the log from
        its files, as after a crash, keeping the batches that were written whole. Writing on
        from a stale log end offset would have left a gap in the offsets."""
        try:
            self._rollback(mark)
        except (OSError, LogError) as undo:
            failure.add_note(self._undo_failed(f"undoing it failed too ({undo}), so some of its batches may be in the log"))

    def _undo_failed(self, why: str) -> str:
        """Note that this process can no longer vouch for the log; the first reason stays, and is returned."""
        if self._undo_failure is None:
            self._undo_failure = why
        self.log_dir.record_load_failure((self.topic, self.partition))
        return self._undo_failure

    def _rollback(self, mark: _TailMark) -> None:
        """Undo appends and rolls since ``mark`` (lock held): segments created since are removed,
        the segment that was active gets its old length and index entries back."""
        for segment in self.segments[mark.segment_count:]:
            segment.close(trim_indexes=False)
            for path in (segment.log_path, *segment.index_paths()):
                path.unlink(missing_ok=True)
        del self.segments[mark.segment_count:]
        del self._bases[mark.segment_count:]
        self.active_segment.rollback(mark.active)
        self._leo = mark.log_end_offset
        self.recovery_point = mark.recovery_point
        self._tail_position = self.active_segment.size
        self._unflushed = mark.unflushed
        self._dirty = mark.dirty
        self._load_producer_state()  # drops snapshots the undone rolls took, and the undone batches' state
        self.bump_generation()  # readers that saw the undone state reload

    def append_batch(self, data: bytes, *, now: int | None = None) -> AppendInfo:
        """Append one producer-built batch (offsets are assigned here, as a leader does)."""
        now = now_ms() if now is None else now
        self._require_producible()
        with self.lock.hold():
            self._sync_locked()
            batch = validate_producer_batch(data, base_offset=self._leo, config=self.config, now_ms=now, tp=self.tp)
            self._check_offsets_fit(batch.last_offset + 1)
            return self._append_validated(batch, now)

    def _check_offsets_fit(self, next_offset: int) -> None:
        """Refuse, before anything is written, an append after which the log end offset would
        be ``next_offset`` > Long.MAX_VALUE: Kafka's offsets are longs, and the recovery point
        checkpoint (which reaches the log end offset) could not be read back."""
        if next_offset > LONG_MAX:
            raise OffsetOverflowError(
                f"{self.tp}: appending at log end offset {self._leo} would pass offset {LONG_MAX}, the largest "
                f"Kafka allows (next offset {next_offset}); nothing was appended"
            )

    def _append_validated(self, batch: ValidatedBatch, now: int) -> AppendInfo:
        segment = self.active_segment
        decision = segment.should_roll(len(batch.data), batch.max_timestamp, batch.last_offset, now)
        if decision:
            segment = self._roll_locked(now)
        segment.append(batch.last_offset, batch.max_timestamp, batch.offset_of_max_timestamp, batch.data)
        self._leo = batch.last_offset + 1
        self._tail_position = segment.size
        self._unflushed += batch.record_count
        self._dirty = True
        if self._unflushed >= self.config.flush_messages or now - self._last_flush_ms >= self.config.flush_ms:
            self._flush_locked(now)
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
        self._require_writable()
        with self.lock.hold():
            self._sync_locked()
            return self._roll_locked(now_ms() if now is None else now)

    def roll_locked(self, now: int) -> LogSegment:
        """``roll`` for maintenance code that already holds the lock and has synced."""
        return self._roll_locked(now)

    def _roll_locked(self, now: int) -> LogSegment:
        new_offset = self._leo
        active = self.active_segment
        if active.base_offset == new_offset and active.size == 0:
            return active
        for stray in (segment_file(self.dir, new_offset, sfx) for sfx in (".log", ".index", ".timeindex", ".txnindex")):
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
            segment = LogSegment(self.dir, new_offset, self.config, create=True, created_ms=now)
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
        self.segments.append(segment)
        self._bases.append(new_offset)
        self._tail_position = 0
        self.recovery_point = max(self.recovery_point, new_offset)
        self.bump_generation()
        self._snapshot_producers()
        return segment

    def flush(self, now: int | None = None) -> None:
        """fsync everything appended; the recovery point moves to the log end offset."""
        with self.lock.hold():
            self._flush_locked(now_ms() if now is None else now)

    def _flush_locked(self, now: int) -> None:
        for seg in self.segments[self._segment_index(self.recovery_point):]:
            seg.flush()
        self.recovery_point = max(self.recovery_point, self._leo)
        self._unflushed = 0
        self._last_flush_ms = now
        self._dirty = False

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def segment_path(self, offset: int) -> str:
        """The ``.log`` file holding ``offset``: what an error about a batch read there names
        (``verify`` names the segment file; the directory alone left the user to find it)."""
        return str(self.segments[self._segment_index(offset)].log_path)

    # ------------------------------------------------------------------ log start offset

    def delete_records(self, before_offset: int) -> int:
        """Advance the log start offset (kafka-delete-records); segments go with the next retention run."""
        self.check_delete_records(before_offset)
        self._require_writable()
        with self.lock.hold():
            self._sync_locked()
            self.check_delete_records(before_offset)
            self.commit_log_start_offset(before_offset)
            return self.log_start_offset

    def check_delete_records(self, before_offset: int) -> None:
        """Raise unless ``delete_records(before_offset)`` may advance the log start offset: not
        KRaft's metadata log, and an offset from 0 to the high watermark. A read-only view
        answers as the log will after recovery, so ``logctl`` asks it before a writable open."""
        check_not_metadata_log(self.topic, "delete-records")
        if before_offset > self.high_watermark or before_offset < 0:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {before_offset} of partition {self.tp} since it is "
                f"larger than the high watermark {self.high_watermark}"
                if before_offset >= 0
                else f"offset {before_offset} is negative"
            )

    def commit_log_start_offset(self, new_offset: int) -> None:
        """Persist a higher log start offset (lock held); the commit point of segment deletion."""
        if new_offset > self.log_start_offset:
            if new_offset > self.recovery_point:
                # flush first: a checkpoint beyond the durable log end can then only be damage,
                # and the loader keeps the records instead of deleting them all as Kafka does
                self._flush_locked(now_ms())
            self.log_dir.log_start_offsets.update({(self.topic, self.partition): new_offset})
            self.log_start_offset = new_offset
            self.bump_generation()

    def remove_segments(self, doomed: Sequence[LogSegment], replaced_bases: Collection[int] = ()) -> list[Path]:
        """Rename segments to ``.deleted`` (``.log`` first) and drop them from the list (lock held).

        Their producer snapshots go too, except at ``replaced_bases``, where a replacement segment
        starts (Kafka's ``deletedNotReplaced``: the state at that offset is still true).
        Returns the renamed files; they are removed after ``file.delete.delay.ms`` so readers
        that opened them a moment ago can finish.
        """
        if not doomed:
            return []
        if any(seg is self.active_segment for seg in doomed):
            raise RuntimeError("the active segment cannot be removed; roll first")
        pending: list[Path] = []
        for i, seg in enumerate(doomed):
            seg.close(trim_indexes=False)
            seg.change_file_suffix(DELETED_SUFFIX)
            pending.extend(seg.existing_files())
            crash_point(f"remove-segments.after-rename-{i}")
        self._producers.delete_snapshots(seg.base_offset for seg in doomed if seg.base_offset not in replaced_bases)
        gone = {id(s) for s in doomed}
        self.segments = [s for s in self.segments if id(s) not in gone]
        self._bases = [s.base_offset for s in self.segments]
        self.bump_generation()
        return pending

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Flush what this process appended, then close files (trimming indexes only if still current).

        A log whose directory another process deleted or replaced is only let go (the lock
        refuses with ``PartitionReplacedError``): its paths may lead into a new topic's
        directory, where trimming would create index files for this log's segment bases."""
        if not self.read_only:
            try:
                with self.lock.hold():
                    self._close_current()
            except PartitionReplacedError:
                pass
        for seg in self.segments:  # a read-only or replaced log's files, none of them trimmed
            seg.close(trim_indexes=False)
        self.lock.close()

    def _close_current(self) -> None:
        # after a failed undo nothing is written: the next writable open recovers the files
        current = self._undo_failure is None and not self._changed_on_disk()
        if current and self._dirty:
            self._flush_locked(now_ms())
            self.log_dir.recovery_points.update({(self.topic, self.partition): self.recovery_point})
        if current:
            self._snapshot_producers()
        # Kafka trims every index on close (the next writer re-extends the active one).
        for seg in self.segments:
            seg.close(trim_indexes=current)

    def __repr__(self) -> str:
        return f"Log({self.tp}, start={self.log_start_offset}, end={self._leo}, segments={len(self.segments)})"

    def replace_segments(self, new_segments: Sequence[LogSegment], old_segments: Sequence[LogSegment]) -> None:
        """Kafka's ``LocalLog.replaceSegments`` (lock held): swap ``.cleaned`` replacement
        segments in for ``old_segments``, with a crash point after every file step.

        The replacements become ``.swap`` in descending base order (the commit point is the last
        of these renames: from then on a load completes the swap, see ``temp_files``), the
        directory is fsynced, the old segments are renamed ``.deleted`` (with the producer snapshots
        no replacement starts at), the ``.swap`` files take
        their final names in ascending order, the directory is fsynced again, and the new list is
        published. A kill at any step reloads to the log before or after, never a mix.
        """
        n = 0
        for seg in sorted(new_segments, key=lambda s: s.base_offset, reverse=True):
            for path in seg.existing_files():  # .log first
                os.replace(path, path.with_name(path.name[: -len(CLEANED_SUFFIX)] + SWAP_SUFFIX))
                crash_point(f"compaction.cleaned-to-swap-{n}")
                n += 1
            seg.change_file_suffix(SWAP_SUFFIX)
        # Make the .swap names durable before any old file is renamed away.
        fsync_dir(self.dir)
        crash_point("compaction.after-swap-prepared")
        pending = self.remove_segments(old_segments, {seg.base_offset for seg in new_segments})
        crash_point("compaction.after-old-deleted")
        n = 0
        for seg in sorted(new_segments, key=lambda s: s.base_offset):
            for path in seg.existing_files():
                os.replace(path, path.with_name(path.name[: -len(SWAP_SUFFIX)]))
                crash_point(f"compaction.swap-to-final-{n}")
                n += 1
            seg.change_file_suffix("")
        fsync_dir(self.dir)
        crash_point("compaction.after-dir-fsync")
        self._install_segments(new_segments)
        if self.config.file_delete_delay_ms == 0:
            for path in pending:
                Path(path).unlink(missing_ok=True)

    def _install_segments(self, new_segments: Sequence[LogSegment]) -> None:
        """Put replacement segments whose files already have their final names into the segment
        list, and publish the change (lock held).

        The compaction swap (``cleaner.py``) renames the old segments away with
        ``remove_segments`` and its replacements into place itself, one crash point per file, so
        that a kill at any step is resolved by the loader; this is its last, in-memory step. The
        replacements lie below the active segment, which stays last.
        """
        if not self.lock.held:
            raise RuntimeError("_install_segments() needs the partition lock")
        if not new_segments:
            return
        bases = {s.base_offset for s in self.segments}
        for seg in new_segments:
            if seg.base_offset in bases:
                raise RuntimeError(f"{self.tp} already has a segment at base offset {seg.base_offset}")
            if seg.base_offset >= self.active_segment.base_offset:
                raise RuntimeError(f"replacement segment {seg.base_offset} is not below the active segment")
        self.segments = sorted([*self.segments, *new_segments], key=lambda s: s.base_offset)
        self._bases = [s.base_offset for s in self.segments]
        self.bump_generation()


@dataclass(frozen=True)
class _TailMark:
    """The log's tail before a produce call: what ``Log._rollback`` restores."""

    segment_count: int
    active: AppendMark
    log_end_offset: int
    recovery_point: int
    unflushed: int
    dirty: bool
