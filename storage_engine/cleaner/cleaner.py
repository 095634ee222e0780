"""One partition's compaction passes (Kafka's ``Cleaner.doClean``): prepare under the lock,
build the offset map and recopy without it, then check the inputs and swap under it again
(see the package docstring)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..config.cleaner import CleanerConfig
from ..config.topic import LogConfig
from ..config.values import LONG_MAX
from ..errors import LogChangedError, LogError
from ..faults import crash_point
from ..files.naming import CLEANED_SUFFIX
from ..log.segment import LogSegment
from ..record import RawBatch
from ..record.control import control_type_of
from ..record.rewrite import corrupt_batch, record_bytes
from ..record.v2 import RECORD_BATCH_OVERHEAD
from ..record.varint import VarintError
from .batch_filter import BatchFilter
from .dirty_scan import batch_keys, batch_versions, dirty_segments, dirty_start_position, map_walk
from .inputs import MIN_READ_CHUNK, InputSegment, LogSnapshot
from .offset_map import OffsetMap
from .plan import CleaningRound, LogToClean, idle_roll_at_ms, plan_round
from .recopy import discard_staged, range_of, recopy_group
from .record_decisions import map_batch
from .report import CompactionReport
from .rules import LastRecord, ProducerSnapshot, ProducerStateBuilder, TransactionTracker
from .staging import STAGING_SUFFIX, CleanerLock, remove_stale_staging
from .stats import CleanerStats
from .strategy import MISSING_VERSION, VersionRule, version_rule
from .throttler import Throttler

if TYPE_CHECKING:  # log.py does not import the cleaner; the manager imports both
    from ..log.log import Log


def reset_out_of_range_checkpoint(log: Log, ltc: LogToClean) -> None:
    """A cleaner checkpoint found out of range (below the log start offset, or past the log end:
    ``LogCleanerManager.cleanableOffsets`` says so with ``forceUpdateCheckpoint``) is rewritten
    to the first dirty offset, whether or not the partition is cleaned now."""
    if ltc.force_checkpoint_update:
        log.log_dir.cleaner_offsets.update({(log.topic, log.partition): ltc.first_dirty_offset})


@dataclass
class PreparedPass:
    """A pass up to its cleanable range: the snapshot it reads (it owns the descriptors: close
    it), the producers' facts from the header scan, the range and the pass's counters."""

    snap: LogSnapshot
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
        self.chunk = max(self.config.io_buffer_size_per_thread, MIN_READ_CHUNK)
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
        log.lock.require_current()  # the staged files and the cleaner lock go by path
        with CleanerLock(log.dir):
            remove_stale_staging(log.dir)
            while max_passes is None or report.passes < max_passes:
                result = self._one_pass(log, now_ms, force=force or report.passes > 0, report=report)
                if result is None:
                    break
                self.account(report, result)
                if not result.partial:
                    break
            else:
                if report.rounds and report.rounds[-1]["partial"]:
                    report.warnings.append(
                        f"the offset map filled up: cleaned only up to offset {report.new_checkpoint} of "
                        f"{report.first_uncleanable_offset} in {report.passes} pass(es); the next run continues there"
                    )
            if report.stats.records_without_version:
                report.warnings.append(
                    f"{report.stats.records_without_version} record(s) had no readable version in header "
                    f"'{log.config.compaction_strategy_header}' (an 8-byte big-endian long): they count as the "
                    "lowest version")
        if report.passes == 0 and report.skipped is None:
            report.skipped = "nothing to clean"
        report.duration_s = self.clock() - start
        report.throttled_s = self.throttler.slept_s - throttled_before
        return report

    def account(self, report: CompactionReport, result: PassResult) -> None:
        """Add one pass to a partition's report: this cleaner's passes, and a distributed job's
        round (whose map is exact: it reports its entries, and no capacity)."""
        self._last_stable_offset = result.last_stable_offset
        report.passes += 1
        report.add_pass(result.stats)
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

    def _snapshot(self, log: Log) -> LogSnapshot:
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
            return LogSnapshot(inputs, log.log_start_offset, log.log_end_offset, checkpoint)

    @staticmethod
    def _roll_if_idle(log: Log, now_ms: int, report: CompactionReport) -> None:
        """``logplat.roll.idle.segments``: roll the active segment once an append would have rolled
        it (``idle_roll_at_ms``), so that this cleaning reaches its records; Kafka rolls only on an
        append, so an idle partition's newest records stayed uncleaned for ever. It is the log's
        own roll (``roll_locked``), as crash-safe as an append's."""
        if not log.config.logplat_roll_idle_segments:
            return
        with log.lock.hold():
            log.sync_for_change()
            active = log.active_segment
            first = active.first_batch() if active.size else None
            at = idle_roll_at_ms(log.config, first.header.max_timestamp if first is not None else LONG_MAX)
            if at is not None and now_ms >= at:
                log.roll_locked(now_ms)
                report.rolled_idle_segment = active.base_offset

    def prepare_pass(self, log: Log, now_ms: int, *, force: bool, report: CompactionReport) -> PreparedPass | None:
        """A pass up to its cleanable range (snapshot, producer scan, range, due or not), or None
        when there is nothing to do (the report then says why). A distributed job calls this,
        then does map building and recopying in tasks, then :meth:`commit_round`."""
        self._roll_if_idle(log, now_ms, report)
        snap = self._snapshot(log)
        try:
            stats = CleanerStats()
            t0 = self.clock()
            producers = self._scan_producers(snap, stats)
            # Which batch is each producer's last comes from the log's
            # producer state (snapshot + replay, ``producer_state.py``), as Kafka's
            # ``lastRecordsOfActiveProducers``, not from this scan of the cleaned log, which
            # cannot see producers whose last batch is an emptied control batch.
            producers.last_records = {pid: LastRecord(last, epoch)
                                      for pid, (last, epoch) in log.last_records_of_active_producers().items()}
            stats.scan_seconds = self.clock() - t0
            ltc = range_of(log, snap, producers.last_stable_offset, now_ms)
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
                reset_out_of_range_checkpoint(log, ltc)
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
            # the offset map over the dirty section (Kafka's buildOffsetMap)
            t0 = self.clock()
            versions = version_rule(config.compaction_strategy, config.compaction_strategy_header)
            omap = self.offset_map
            omap.clear(versioned=versions is not None)
            unkeyed_by_batch: dict[int, int] = {}
            full = self._build_offset_map(snap, ltc, producers, omap, stats, unkeyed_by_batch, versions)
            end_offset = omap.latest_offset + 1
            stats.index_seconds = self.clock() - t0
            if end_offset <= ltc.first_dirty_offset:
                raise LogError(
                    f"{log.tp}: the offset map ({omap.capacity_bytes} usable bytes) cannot hold even one key "
                    f"at offset {ltc.first_dirty_offset}; raise log.cleaner.dedupe.buffer.size"
                )
            rnd = self.plan_round(log, prepared, end_offset, now_ms)
            # recopy every group into a staged replacement segment, without the lock (cleanSegments)
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
                versions=versions,
            )
            winners = omap.sorted_offsets() if omap.keymap is None else None  # None: the compiled map answers
            bfilter.use_winners(winners, ltc.first_dirty_offset, unkeyed_by_batch)
            for group in groups:
                cleaned.append(self._clean_group(log, group, rnd, bfilter))
            crash_point("compaction.after-cleaned-written")
            stats.clean_seconds = self.clock() - t0
            # commit under the lock (replaceSegments)
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
            if not log.lock.replaced():  # else the staged files went with the old directory
                discard_staged(cleaned)
            raise
        finally:
            prepared.close()
            self.offset_map.clear()  # give the memory back between passes and partitions

    # ------------------------------------------------------------------ reading

    def _scan_producers(self, snap: LogSnapshot, stats: CleanerStats) -> ProducerSnapshot:
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

    def _build_offset_map(self, snap: LogSnapshot, ltc: LogToClean, producers: ProducerSnapshot,
                          omap: OffsetMap, stats: CleanerStats, unkeyed_by_batch: dict[int, int],
                          versions: VersionRule | None = None) -> bool:
        """Kafka's ``buildOffsetMap``; True when the map filled before the end of the dirty section.
        Fills ``unkeyed_by_batch`` (base offset -> records without a key) for the recopy's stats.
        Under a version strategy (``versions``) the map holds each key's winning version."""
        start, end = ltc.first_dirty_offset, ltc.first_uncleanable_offset
        if versions is not None and start > 0:
            start -= 1  # the last pass's newest record, kept whatever its version: it competes again
        dirty = dirty_segments(snap.segments, start, end)
        tracker = TransactionTracker(producers.aborted_overlapping(start, end))
        exact = omap.exact_table() is not None or omap.keymap is not None
        for i, seg in enumerate(dirty):
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            path = str(seg.path)
            walk = map_walk(seg, dirty_start_position(seg, start), tracker, stats, self.throttler.maybe_throttle)
            for raw, chunk, chunk_offset, mapped in walk:
                h = raw.header
                if mapped and versions is not None:
                    if not self._map_versions(raw, chunk, chunk_offset, path, start, omap, versions, stats,
                                              unkeyed_by_batch):
                        return True
                elif mapped and h.magic >= 2 and exact:
                    try:
                        buf, b_start, b_stop = record_bytes(raw, path, chunk, chunk_offset)
                        complete, unkeyed = map_batch(omap, buf, b_start, b_stop, h.records_count, h.base_offset,
                                                      start)
                    except (IndexError, VarintError, ValueError) as exc:
                        raise corrupt_batch(f"malformed records in batch: {exc}", raw, path) from None
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

    @staticmethod
    def _map_versions(raw: RawBatch, chunk: bytes, chunk_offset: int, path: str, start: int, omap: OffsetMap,
                      versions: VersionRule, stats: CleanerStats, unkeyed_by_batch: dict[int, int]) -> bool:
        """Put one batch's records at or above ``start`` into a versioned map; False when a new key
        did not fit (the pass stops there)."""
        h = raw.header
        entries = batch_versions(raw, versions, chunk, chunk_offset, path)
        if h.magic < 2:
            stats.map_records_read += len(entries)
        unkeyed = 0
        for off, key, version in entries:
            if key is None:
                unkeyed += 1
            elif off >= start:
                if not omap.put_version(key, version, off):
                    return False
                if version == MISSING_VERSION:
                    stats.records_without_version += 1
        if unkeyed and h.magic >= 2:
            unkeyed_by_batch[h.base_offset] = unkeyed
        return True

    # ------------------------------------------------------------------ writing

    def _clean_group(self, log: Log, group: list[InputSegment], rnd: CleaningRound, bfilter: BatchFilter) -> LogSegment:
        """One staged replacement, written without the partition lock: a throttled pass can outlive
        its topic, so each group first checks that the directory is still the one it loaded."""
        log.lock.require_current()
        return recopy_group(log.dir, log.config, group, rnd.legacy_delete_horizon_ms, bfilter, tp=log.tp,
                            throttle=self.throttler.maybe_throttle, chunk_limit=self.chunk)

    # ------------------------------------------------------------------ the swap

    def commit_round(self, log: Log, inputs: list[InputSegment], cleaned: list[LogSegment], rnd: CleaningRound) -> None:
        """Swap the staged replacements in under the partition lock, after checking that every input
        segment is still there unchanged (``LogChangedError`` otherwise: nothing swapped)."""
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
        """Stage the replacements for ``Log.replace_segments`` (which owns Kafka's swap).

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
        log.replace_segments(cleaned, old)

    # ------------------------------------------------------------------ after

    def dirty_ratio_now(self, log: Log, now_ms: int, last_stable_offset: int | None = None) -> float:
        """The partition's cleanable ratio as it stands (after a pass: what is left), bounded by the
        last stable offset the pass found (open transactions stay uncleanable)."""
        snap = self._snapshot(log)
        try:
            lso = last_stable_offset if last_stable_offset is not None else self._last_stable_offset
            if lso is not None:
                lso = min(lso, snap.log_end_offset)
            return range_of(log, snap, lso, now_ms).cleanable_ratio
        finally:
            snap.close()
