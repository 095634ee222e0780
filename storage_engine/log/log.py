"""The log of one topic-partition: an ordered list of segments in ``<topic>-<partition>/``.

Kafka's ``UnifiedLog``/``LocalLog`` for one process, extended for several processes sharing the
directory (see ``partition_lock.py``): every change happens under the partition lock after re-reading
what other processes did; reads take no lock, notice a changed segment list through the
generation counter, and retry when a segment they were about to use was swapped or deleted.
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path

from ..config.topic import LogConfig
from ..errors import (
    CorruptRecordError,
    LogError,
    LogGapError,
    OffsetOutOfRangeError,
    PartitionReplacedError,
    UndoFailedError,
)
from ..faults import crash_point
from ..files.naming import DELETED_SUFFIX, check_not_metadata_log
from ..record import CompressionType, RawBatch, Record
from .append_validation import ProducerRecord
from .appender import UNDO_FAILED_NEXT, AppendInfo, LogAppender
from .dir_state import LogDirState
from .isolation import FetchIsolation
from .loader import REFUSED_UNCHANGED, LogLoader
from .partition_lock import PartitionLock
from .producer_state import ProducerStateManager, replay_needs_data
from .reads import LogReader
from .segment import LogSegment, now_ms
from .swap import replace_segments

__all__ = ["AppendInfo", "Log"]


class Log:
    """One partition. Open through ``LogManager`` (which knows the log dir and topic config).

    The log owns the segment list, the lock, loading and syncing with other processes, the log
    start offset, the swap and the close; it answers writes through its ``LogAppender`` and reads
    through its ``LogReader``, both composed here."""

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
        self._undo_failure: str | None = None  # why this process can no longer vouch for the log (``LogAppender._undo``)
        self.appender = LogAppender(self)
        self.reader = LogReader(self)
        if read_only:  # a view of what the next writable open makes of the log
            had_clean_shutdown = not log_dir.recovery_pending
        try:
            with self.lock.hold():
                self._load(had_clean_shutdown)
        except BaseException:
            self.lock.close()  # a refused open keeps nothing open
            raise

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
            batches = self.reader.batches_from(start, skip=lambda h: not replay_needs_data(h))
            producers.replay(batches, self._leo, str(self.dir))
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

    def last_stable_offset_locked(self) -> int:
        """Kafka's ``UnifiedLog.lastStableOffset`` (lock held): the first offset of the oldest open
        transaction, else the high watermark. Tiering copies nothing at or above it."""
        return self._producer_state_locked().first_unstable_offset(self.high_watermark)

    def last_stable_offset(self) -> int:
        """``last_stable_offset_locked`` for readers, who hold no lock: it is taken only to bring
        producer state up to the log end (what another process appended included)."""
        with self.lock.hold():
            self.refresh()
            return self.last_stable_offset_locked()

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
        """Append records as one batch (``LogAppender.append``)."""
        return self.appender.append(records, compression=compression, now=now)

    def append_all(
        self,
        batches: Sequence[Sequence[ProducerRecord]],
        *,
        compression: CompressionType = CompressionType.NONE,
        now: int | None = None,
    ) -> list[AppendInfo]:
        """Append several batches as one produce call: all of them, flushed, or none (``LogAppender.append_all``)."""
        return self.appender.append_all(batches, compression=compression, now=now)

    def append_batch(self, data: bytes, *, now: int | None = None) -> AppendInfo:
        """Append one producer-built batch (``LogAppender.append_batch``)."""
        return self.appender.append_batch(data, now=now)

    def append_end_txn_marker(self, producer_id: int, producer_epoch: int, *, commit: bool,
                              coordinator_epoch: int = 0, now: int | None = None) -> AppendInfo:
        """End a producer's transaction (``LogAppender.append_end_txn_marker``)."""
        return self.appender.append_end_txn_marker(producer_id, producer_epoch, commit=commit,
                                                   coordinator_epoch=coordinator_epoch, now=now)

    def roll(self, now: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (``LogAppender.roll``)."""
        return self.appender.roll(now)

    def roll_locked(self, now: int) -> LogSegment:
        """``roll`` for maintenance code that already holds the lock and has synced."""
        return self.appender.roll_locked(now)

    def flush(self, now: int | None = None) -> None:
        """fsync everything appended; the recovery point moves to the log end offset."""
        self.appender.flush(now)

    # ------------------------------------------------------------------ reading

    def read(
        self,
        start_offset: int,
        *,
        max_records: int | None = None,
        max_bytes: int = 1 << 20,
        include_control: bool = False,
        isolation_level: str | FetchIsolation = FetchIsolation.READ_UNCOMMITTED,
    ) -> list[Record]:
        """Records at or after ``start_offset`` as a consumer of ``isolation_level`` reads them
        (``LogReader.read``)."""
        return self.reader.read(start_offset, max_records=max_records, max_bytes=max_bytes,
                                include_control=include_control, isolation_level=isolation_level)

    def read_batches(self, start_offset: int, *, max_bytes: int = 1 << 20, max_batches: int | None = None) -> list[RawBatch]:
        """Whole batches from the one holding ``start_offset`` (``LogReader.read_batches``)."""
        return self.reader.read_batches(start_offset, max_bytes=max_bytes, max_batches=max_batches)

    def iter_batches(self, start_offset: int | None = None) -> Iterator[RawBatch]:
        """Every batch from ``start_offset`` (default: the log start) to the end (``LogReader.iter_batches``)."""
        return self.reader.iter_batches(start_offset)

    def offset_for_timestamp(self, timestamp: int, *, from_offset: int | None = None) -> tuple[int, int] | None:
        """(timestamp, offset) as ListOffsets answers it (``LogReader.offset_for_timestamp``)."""
        return self.reader.offset_for_timestamp(timestamp, from_offset=from_offset)

    def offset_order_error(self, expected: int, base_offset: int, where: str, *,
                           first: bool = False) -> CorruptRecordError | LogGapError | None:
        """What is wrong with a batch at ``base_offset`` read where ``expected`` comes next (``LogReader.offset_order_error``)."""
        return self.reader.offset_order_error(expected, base_offset, where, first=first)


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
                self.appender.flush_locked(now_ms())
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
        if current and self.appender.dirty:
            self.appender.flush_locked(now_ms())
            self.log_dir.recovery_points.update({(self.topic, self.partition): self.recovery_point})
        if current:
            self._snapshot_producers()
            # Kafka's LogSegment.close: the active segment's largest timestamp as its time index's
            # final entry. A broker loading the folder after a clean shutdown takes a segment's
            # largest timestamp from there alone (ListOffsets MAX_TIMESTAMP, time retention).
            # As in Kafka, a time index that refuses it (damaged, or a full disk) does not stop
            # the close: the entry is what a later load would otherwise read from the batches.
            with contextlib.suppress(LogError, OSError):
                self.active_segment.append_final_time_index_entry()
        # Kafka trims every index on close (the next writer re-extends the active one).
        for seg in self.segments:
            seg.close(trim_indexes=current)

    def __repr__(self) -> str:
        return f"Log({self.tp}, start={self.log_start_offset}, end={self._leo}, segments={len(self.segments)})"

    def replace_segments(self, new_segments: Sequence[LogSegment], old_segments: Sequence[LogSegment]) -> None:
        """Kafka's ``LocalLog.replaceSegments`` (lock held): swap ``.cleaned`` replacement segments
        in for ``old_segments`` (``swap.replace_segments``)."""
        replace_segments(self, new_segments, old_segments)

    def install_segments(self, new_segments: Sequence[LogSegment]) -> None:
        """Put replacement segments whose files already have their final names into the segment
        list, and publish the change (lock held).

        The swap (``swap.replace_segments``) renames the old segments away with
        ``remove_segments`` and its replacements into place itself, one crash point per file, so
        that a kill at any step is resolved by the loader; this is its last, in-memory step. The
        replacements lie below the active segment, which stays last.
        """
        if not self.lock.held:
            raise RuntimeError("install_segments() needs the partition lock")
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


