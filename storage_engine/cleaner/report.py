"""What one partition's compaction run did (one or more passes): the one result of a compaction,
for the local cleaner, the Spark job, ``logctl`` and the platform."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..outcomes import COMPACTED, FAILED, SKIPPED
from .offset_map import KAFKA_BYTES_PER_ENTRY
from .stats import CleanerStats


@dataclass
class CompactionReport:
    """One partition's compaction run (one or more passes). ``status`` is its outcome
    (``storage_engine.outcomes``) and ``reason`` why it is not ``compacted``; ``skipped`` and
    ``failed`` say the same in the words the summary prints."""

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
    stats: CleanerStats = field(default_factory=CleanerStats)  # summed over passes: what was processed
    # the cleaned range before the run and after it (``add_pass``): over several passes the
    # summed reads count the earlier passes' output again
    start_bytes: int = 0
    start_records: int = 0
    end_bytes: int = 0
    end_records: int = 0
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
    rolled_idle_segment: int | None = None  # the idle active segment this run rolled (``logplat.roll.idle.segments``)
    segments_after: int = 0
    segments_recopied: int = 0
    segments_written: int = 0
    duration_s: float = 0.0
    throttled_s: float = 0.0
    rounds: list[dict] = field(default_factory=list)
    skipped: str | None = None
    # why a run over several partitions could not clean it (the others go on): a distributed
    # job, or the local run over the due ones (``compact_due``). ``logctl`` exits 1 when any failed.
    failed: str | None = None
    retention: dict | None = None
    warnings: list[str] = field(default_factory=list)
    # a tiered partition (``engine`` "remote"): the version cleaned (or the one committed), the
    # segments uploaded, and the object-store requests and bytes the run made (``counters()``)
    remote_version: int | None = None
    uploaded_segments: list[int] = field(default_factory=list)
    requests: dict[str, int] = field(default_factory=dict)
    status: str = COMPACTED
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.status == COMPACTED and (self.failed or self.skipped) is not None:
            self.status, self.reason = (FAILED, self.failed) if self.failed is not None else (SKIPPED, self.skipped)

    def settle(self, status: str, reason: str | None, *, said: str | None = None) -> None:
        """Record the run's outcome; ``said`` (default: ``reason``) is the summary's words for a
        run that did not compact (``failed`` for a failure, else ``skipped``)."""
        self.status, self.reason = status, reason
        if status == FAILED:
            self.failed = reason if said is None else said
        elif status != COMPACTED:
            self.skipped = reason if said is None else said

    def add_pass(self, stats: CleanerStats) -> None:
        """Add one pass's counters. Each pass reads the cleaned range from the log start (as
        Kafka's ``Cleaner.cleanSegments`` groups it), so it reads the previous pass's output
        again plus what is newly dirty: the run's start size is the first pass's read plus each
        later pass's read beyond the output before it, its end size the last pass's output."""
        self.start_bytes += stats.bytes_read - self.end_bytes
        self.start_records += stats.records_read - self.end_records
        self.end_bytes, self.end_records = stats.bytes_written, stats.records_written
        self.stats.add(stats)

    @property
    def mb_per_s(self) -> float:
        return self.stats.bytes_read / (1024 * 1024) / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def records_per_s(self) -> float:
        return self.stats.records_read / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def size_reduction_pct(self) -> float:
        return 100.0 * (1 - self.end_bytes / self.start_bytes) if self.start_bytes else 0.0

    @property
    def records_reduction_pct(self) -> float:
        return 100.0 * (1 - self.end_records / self.start_records) if self.start_records else 0.0

    def to_dict(self) -> dict:
        s = self.stats
        return {
            "status": self.status,
            "reason": self.reason,
            "topic": self.topic,
            "partition": self.partition,
            "engine": self.engine,
            "now_ms": self.now_ms,
            "skipped": self.skipped,
            "failed": self.failed,
            "due": self.due_reason,
            "passes": self.passes,
            "rolled_idle_segment": self.rolled_idle_segment,
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
            "start_bytes": self.start_bytes,
            "start_records": self.start_records,
            "end_bytes": self.end_bytes,
            "end_records": self.end_records,
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
            "records_without_version": s.records_without_version,
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
            "remote_version": self.remote_version,
            "uploaded_segments": self.uploaded_segments,
            "requests": self.requests,
        }

    def summary(self) -> str:
        """The cleaner's log message (Kafka's ``recordStats``), one partition."""
        tp = f"{self.topic}-{self.partition}"
        if self.failed:
            return f"{tp}: failed: {self.failed}"
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
            f"  Start size: {self.start_bytes / mb:,.1f} MB ({self.start_records:,} messages), end size: "
            f"{self.end_bytes / mb:,.1f} MB ({self.end_records:,} messages)",
            f"  {self.size_reduction_pct:.1f}% size reduction ({self.records_reduction_pct:.1f}% fewer messages): "
            f"{s.duplicates_removed:,} duplicates, {s.tombstones_removed:,} tombstones, "
            f"{s.unkeyed_removed:,} unkeyed, {s.aborted_removed:,} aborted, {s.markers_removed:,} markers removed",
            f"  dirty ratio {self.dirty_ratio_before or 0:.3f} -> {self.dirty_ratio_after or 0:.3f}; segments "
            f"{self.segments_before} -> {self.segments_after}",
        ]
        if self.retention and self.retention.get("deleted_segments"):
            lines.append(f"  retention deleted segments {self.retention['deleted_segments']}")
        if self.remote_version is not None:
            sent = ", ".join(f"{k.removeprefix('requests_').upper()} {v}" for k, v in self.requests.items()
                             if k.startswith("requests_"))
            lines.append(f"  remote version {self.remote_version} committed; {len(self.uploaded_segments)} segment(s) "
                         f"uploaded; requests: {sent or 'none'}")
        lines.extend(f"  warning: {w}" for w in self.warnings)
        return "\n".join(lines)


# ==========================================================================================
# 3. I/O
# ==========================================================================================
