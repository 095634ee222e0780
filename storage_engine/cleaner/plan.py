"""Which part of a compacted log a cleaning may touch, how dirty a log is, and how its segments
are regrouped: Kafka's ``LogCleanerManager`` and ``Cleaner`` arithmetic as pure functions.

Nothing here opens a file. The functions take :class:`SegmentFacts` (built from a live log,
from cheap file metadata, or by hand in a test or a Spark task) and return dataclasses, so the
local cleaner, the CLI's candidate listing and a distributed job reach the same decisions from
the same inputs (Kafka's ``LogCleanerManager`` and ``Cleaner.groupSegmentsBySize``):

* the *cleanable range* starts at the cleaner checkpoint (reset to the log start offset when it
  is out of range) and ends at the first uncleanable offset: the lowest of the last stable
  offset, the active segment's base offset and, with ``min.compaction.lag.ms``, the first
  segment holding a record younger than the lag -- rounded down to a segment boundary;
* the *dirty ratio* is cleanable bytes over clean plus cleanable bytes (the uncleanable tail is
  not in the denominator); a log is due when the ratio is strictly above
  ``min.cleanable.dirty.ratio`` or when ``max.compaction.lag.ms`` is overdue and there is
  something to clean; the dirtiest due log goes first;
* segments below the map's end are recopied in groups bounded by ``segment.bytes``,
  ``segment.index.bytes`` and the int32 offset span of one segment.

Kafka's segment-range helpers have one subtle convention that every function here keeps:
``logSegments(from, to)`` is every segment whose base offset lies in ``[floor(from), to)``,
where ``floor(from)`` is the base of the segment holding ``from``. So a segment that is only
partly clean counts as both clean and cleanable bytes, exactly as in Kafka.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..config.values import INT_MAX, LONG_MAX
from ..log.segment_time import largest_timestamp, segment_ms_roll_at

if TYPE_CHECKING:
    from ..config.topic import LogConfig


@dataclass
class SegmentFacts:
    """One segment as the planner sees it.

    ``largest_timestamp`` (max record timestamp, else the mtime: what min lag judges) and
    ``first_batch_timestamp`` (the first batch's maxTimestamp: what max lag judges) may be given
    as loaders, so a planner over thousands of partitions reads them only when a decision needs
    them. Index sizes are the bytes of valid entries (entries x entry size), used for grouping.
    """

    base_offset: int
    size_bytes: int
    mtime_ms: int
    is_active: bool = False
    offset_index_bytes: int = 0
    time_index_bytes: int = 0
    largest_timestamp_value: int | None = None
    first_batch_timestamp_value: int | None = None
    largest_timestamp_loader: Callable[[], int] | None = field(default=None, repr=False, compare=False)
    first_batch_timestamp_loader: Callable[[], int] | None = field(default=None, repr=False, compare=False)

    @property
    def largest_timestamp(self) -> int:
        if self.largest_timestamp_value is None:
            ts = self.largest_timestamp_loader() if self.largest_timestamp_loader else -1
            self.largest_timestamp_value = largest_timestamp(ts, self.mtime_ms)
        return self.largest_timestamp_value

    @property
    def first_batch_timestamp(self) -> int:
        """maxTimestamp of the first batch; ``LONG_MAX`` for an empty segment (Kafka's value)."""
        if self.first_batch_timestamp_value is None:
            self.first_batch_timestamp_value = (
                self.first_batch_timestamp_loader() if self.first_batch_timestamp_loader else LONG_MAX
            )
        return self.first_batch_timestamp_value


# ------------------------------------------------------------------------------ segment ranges


def _bases(segments: Sequence[SegmentFacts]) -> list[int]:
    return [s.base_offset for s in segments]


def segments_in_range(segments: Sequence[SegmentFacts], start: int, end: int) -> list[SegmentFacts]:
    """Kafka's ``logSegments(start, end)``: bases in ``[floor(start), end)``; empty when start == end."""
    if start == end:
        return []
    bases = _bases(segments)
    i = bisect.bisect_right(bases, start) - 1
    lo = max(i, 0)
    hi = bisect.bisect_left(bases, end)
    return list(segments[lo:hi])


def non_active_segments_from(segments: Sequence[SegmentFacts], offset: int) -> list[SegmentFacts]:
    """Kafka's ``nonActiveLogSegmentsFrom(offset)``: from the segment holding ``offset`` to the
    one before the active segment."""
    active = segments[-1]
    if offset > active.base_offset:
        return []
    return segments_in_range(segments, offset, active.base_offset)


# ------------------------------------------------------------------------------ the range (Kafka's cleanableOffsets)


@dataclass(frozen=True)
class CleanableRange:
    """``[first_dirty, first_uncleanable)`` before rounding to a segment boundary."""

    first_dirty_offset: int
    uncleanable_offset: int
    force_checkpoint_update: bool  # the checkpoint was out of range and must be rewritten
    reason: str  # what bounds the range: "last stable offset", "active segment" or "min.compaction.lag.ms"
    min_lag_ends_ms: int | None = None  # when the min.compaction.lag.ms bound stops holding, if it bounds


def cleanable_range(
    segments: Sequence[SegmentFacts],
    *,
    checkpoint: int | None,
    log_start_offset: int,
    log_end_offset: int,
    last_stable_offset: int,
    now_ms: int,
    min_compaction_lag_ms: int,
) -> CleanableRange:
    """Kafka's ``LogCleanerManager.cleanableOffsets``.

    A checkpoint below the log start offset, or above the log end offset (a truncated log),
    resets the dirty section to the whole log and asks for the checkpoint to be rewritten.
    """
    dirty = log_start_offset if checkpoint is None else checkpoint
    force = False
    if dirty < log_start_offset or dirty > log_end_offset:
        dirty, force = log_start_offset, True
    bounds = [(segments[-1].base_offset, "active segment"), (last_stable_offset, "last stable offset")]
    min_lag = max(min_compaction_lag_ms, 0)
    min_lag_ends = None
    if min_lag > 0:
        for seg in non_active_segments_from(segments, dirty):
            if seg.largest_timestamp > now_ms - min_lag:
                bounds.append((seg.base_offset, "min.compaction.lag.ms"))
                min_lag_ends = seg.largest_timestamp + min_lag
                break
    bound, reason = min(bounds, key=lambda b: b[0])
    return CleanableRange(dirty, max(dirty, bound), force, reason, min_lag_ends)


# ------------------------------------------------------------------------------ dirtiness (LogToClean)


@dataclass(frozen=True)
class ErasureDeadline:
    """By when the cleaner must reach a partition's oldest uncleaned record that
    ``max.compaction.lag.ms`` covers (KIP-354), from file metadata: the dirty segment whose first
    batch is the oldest. Kafka's ``maxCompactionDelay`` judges the non-active ones only (the
    cleaner never reads the active segment); the deadline the platform shows covers the active
    segment too (``in_active_segment``), whose records Kafka leaves until an append rolls it.
    ``time_left_ms`` turns Kafka's per-partition ``max-compaction-delay-secs`` around: negative
    once the deadline is missed, by that much."""

    oldest_offset: int  # the first dirty offset of that segment
    oldest_timestamp_ms: int  # its first batch's maxTimestamp
    deadline_ms: int  # oldest_timestamp_ms + max.compaction.lag.ms
    time_left_ms: int  # deadline_ms - now
    lag_ms: int  # max.compaction.lag.ms
    in_active_segment: bool = False  # that segment is the active one: no cleaning reaches it before a roll

    @property
    def urgent(self) -> bool:
        """Half the lag is used: time to clean, so the deadline holds (compacted topics roll at
        half the lag too, ``LogConfig.max_segment_ms``)."""
        return 2 * self.time_left_ms <= self.lag_ms

    @property
    def urgent_at_ms(self) -> int:
        """The first millisecond at which :attr:`urgent` holds."""
        return self.deadline_ms - self.lag_ms // 2

    def to_dict(self) -> dict:
        return {"oldest_offset": self.oldest_offset, "oldest_timestamp_ms": self.oldest_timestamp_ms,
                "deadline_ms": self.deadline_ms, "time_left_ms": self.time_left_ms,
                "in_active_segment": self.in_active_segment}


def erasure_deadline(
    segments: Sequence[SegmentFacts], first_dirty: int, now_ms: int, max_compaction_lag_ms: int, *,
    active: bool = True,
) -> ErasureDeadline | None:
    """The partition's :class:`ErasureDeadline` over its dirty segments, the active one included
    unless ``active`` is false (then: Kafka's ``maxCompactionDelay``, which judges the non-active
    ones); None when nothing dirty has a timestamp or the lag is unlimited (Kafka's default,
    Long.MAX_VALUE)."""
    if max_compaction_lag_ms >= LONG_MAX or not segments:
        return None
    dirty = non_active_segments_from(segments, first_dirty)
    if active and segments[-1].size_bytes > 0:
        dirty.append(segments[-1])  # the active segment is never cleaned: all of it is dirty
    dated = [(s.first_batch_timestamp, max(s.base_offset, first_dirty), s.is_active) for s in dirty]
    dated = [d for d in dated if 0 < d[0] < LONG_MAX]
    if not dated:
        return None
    oldest_ts, oldest_offset, in_active = min(dated)
    deadline = oldest_ts + max(max_compaction_lag_ms, 0)
    return ErasureDeadline(oldest_offset, oldest_ts, deadline, deadline - now_ms, max_compaction_lag_ms, in_active)


def idle_roll_at_ms(config: LogConfig, first_batch_timestamp: int) -> int | None:
    """When a compaction run rolls the idle active segment whose first batch has maxTimestamp
    ``first_batch_timestamp`` (``logplat.roll.idle.segments``): once ``LogConfig.max_segment_ms``
    has passed since, the moment an append would roll it (Kafka's ``LogSegment.shouldRoll``,
    which judges the same first-batch timestamp, ``segment_ms_roll_at``; its random jitter is
    the writer's, unknown here, and ``segment.jitter.ms`` is 0 by default). None when the topic
    does not ask for it or the segment is empty or has no timestamp (magic 0 records: an append
    rolls those by the segment's creation time, which the files do not keep)."""
    if not config.logplat_roll_idle_segments or not 0 < first_batch_timestamp < LONG_MAX:
        return None
    return segment_ms_roll_at(first_batch_timestamp, config.max_segment_ms)


def max_compaction_delay_ms(deadline: ErasureDeadline | None) -> int:
    """How long the oldest dirty record has waited beyond ``max.compaction.lag.ms`` (0 if not)."""
    return max(0, -deadline.time_left_ms) if deadline is not None else 0


@dataclass(frozen=True)
class LogToClean:
    """One compacted partition's cleaning candidacy (Kafka's ``LogToClean``), with its reasons."""

    topic: str
    partition: int
    checkpoint: int | None  # as read from cleaner-offset-checkpoint
    log_start_offset: int
    log_end_offset: int
    first_dirty_offset: int
    first_uncleanable_offset: int  # rounded down to a segment boundary
    clean_bytes: int
    cleanable_bytes: int
    max_compaction_delay_ms: int
    min_cleanable_ratio: float
    force_checkpoint_update: bool
    bound_reason: str
    deadline: ErasureDeadline | None = None  # the active segment included (``erasure_deadline``)
    overdue_at_ms: int | None = None  # when Kafka's maxCompactionDelay turns positive (non-active segments)
    min_lag_ends_ms: int | None = None  # when the min.compaction.lag.ms bound stops holding
    active_base_offset: int | None = None
    idle_roll_at: int | None = None  # when a compaction run rolls the idle active segment (``idle_roll_at_ms``)
    idle_roll_due: bool = False

    @property
    def clock_transitions_ms(self) -> tuple[int, ...]:
        """The moments at which a verdict here changes by the clock alone, the files unchanged:
        the erasure deadline's urgent point and the deadline itself, Kafka's overdue moment, the
        end of the ``min.compaction.lag.ms`` bound and the idle active segment's roll."""
        d = self.deadline
        moments = (d.urgent_at_ms, d.deadline_ms) if d is not None else ()
        return tuple(m for m in (*moments, self.overdue_at_ms, self.min_lag_ends_ms, self.idle_roll_at)
                     if m is not None)

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def need_compaction_now(self) -> bool:
        return self.max_compaction_delay_ms > 0

    @property
    def overdue(self) -> bool:
        """``max.compaction.lag.ms`` has passed and there is something to clean: Kafka's cleaner
        takes such a log whatever its dirty ratio."""
        return self.need_compaction_now and self.cleanable_bytes > 0

    @property
    def kafka_due(self) -> bool:
        """Kafka's selection filter: never a log without bytes to judge (``totalBytes`` counts no
        active segment below the dirty section); max lag overdue with something to clean; or a
        ratio strictly above ``min.cleanable.dirty.ratio``."""
        if self.total_bytes == 0:
            return False
        return self.overdue or self.cleanable_ratio > self.min_cleanable_ratio

    @property
    def due(self) -> bool:
        """Kafka's rule (:attr:`kafka_due`), or an idle active segment due to roll
        (``logplat.roll.idle.segments``): only a compaction run rolls it."""
        return self.kafka_due or self.idle_roll_due

    @property
    def why(self) -> str:
        if self.idle_roll_due and not self.kafka_due:
            return ("the idle active segment is due to roll (logplat.roll.idle.segments): its first record is "
                    "older than the max segment ms")
        if self.total_bytes == 0:
            if self.bound_reason == "active segment":
                return "nothing to clean: every record is in the active segment, which is never cleaned"
            return f"nothing to clean yet: the cleanable section ends at offset {self.first_uncleanable_offset} ({self.bound_reason})"
        if self.overdue:
            return f"max.compaction.lag.ms overdue by {self.max_compaction_delay_ms} ms"
        if self.cleanable_ratio > self.min_cleanable_ratio:
            return f"dirty ratio {self.cleanable_ratio:.3f} > min.cleanable.dirty.ratio {self.min_cleanable_ratio}"
        return f"dirty ratio {self.cleanable_ratio:.3f} <= min.cleanable.dirty.ratio {self.min_cleanable_ratio}"

    def to_dict(self) -> dict:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "checkpoint": self.checkpoint,
            "log_start_offset": self.log_start_offset,
            "log_end_offset": self.log_end_offset,
            "first_dirty_offset": self.first_dirty_offset,
            "first_uncleanable_offset": self.first_uncleanable_offset,
            "bounded_by": self.bound_reason,
            "clean_bytes": self.clean_bytes,
            "cleanable_bytes": self.cleanable_bytes,
            "dirty_ratio": round(self.cleanable_ratio, 6),
            "min_cleanable_dirty_ratio": self.min_cleanable_ratio,
            "max_compaction_delay_ms": self.max_compaction_delay_ms,
            "erasure_deadline": self.deadline.to_dict() if self.deadline is not None else None,
            "idle_roll_due": self.idle_roll_due,
            "force_checkpoint_update": self.force_checkpoint_update,
            "due": self.due,
            "why": self.why,
        }


def first_uncleanable_segment_base(segments: Sequence[SegmentFacts], uncleanable_offset: int) -> int:
    """Round the uncleanable offset down to its segment (the active one when it is beyond)."""
    found = non_active_segments_from(segments, uncleanable_offset)
    return found[0].base_offset if found else segments[-1].base_offset


def log_to_clean(
    topic: str,
    partition: int,
    segments: Sequence[SegmentFacts],
    *,
    checkpoint: int | None,
    log_start_offset: int,
    log_end_offset: int,
    last_stable_offset: int | None = None,
    now_ms: int,
    config: LogConfig,
) -> LogToClean:
    """The candidacy of one partition (Kafka's ``LogCleanerManager.grabFilthiestCompactedLog``)
    under the topic's ``min.compaction.lag.ms``, ``max.compaction.lag.ms`` and
    ``min.cleanable.dirty.ratio``. ``last_stable_offset`` defaults to the log end offset (no
    open transaction), which is what a metadata-only planner can know."""
    if not segments:
        raise ValueError(f"{topic}-{partition} has no segment")
    lso = log_end_offset if last_stable_offset is None else last_stable_offset
    rng = cleanable_range(
        segments,
        checkpoint=checkpoint,
        log_start_offset=log_start_offset,
        log_end_offset=log_end_offset,
        last_stable_offset=lso,
        now_ms=now_ms,
        min_compaction_lag_ms=config.min_compaction_lag_ms,
    )
    first_uncleanable = first_uncleanable_segment_base(segments, rng.uncleanable_offset)
    clean = sum(s.size_bytes for s in segments_in_range(segments, -1, rng.first_dirty_offset))
    cleanable = sum(
        s.size_bytes
        for s in segments_in_range(segments, min(rng.first_dirty_offset, first_uncleanable), first_uncleanable)
    )
    lag = config.max_compaction_lag_ms
    kafka_deadline = erasure_deadline(segments, rng.first_dirty_offset, now_ms, lag, active=False)
    deadline = erasure_deadline(segments, rng.first_dirty_offset, now_ms, lag)
    active = segments[-1]
    roll_at = idle_roll_at_ms(config, active.first_batch_timestamp) if active.size_bytes else None
    return LogToClean(
        topic,
        partition,
        checkpoint,
        log_start_offset,
        log_end_offset,
        rng.first_dirty_offset,
        first_uncleanable,
        clean,
        cleanable,
        max_compaction_delay_ms(kafka_deadline),
        config.min_cleanable_dirty_ratio,
        rng.force_checkpoint_update,
        rng.reason,
        deadline,
        None if kafka_deadline is None else kafka_deadline.deadline_ms + 1,
        rng.min_lag_ends_ms,
        active.base_offset,
        roll_at,
        roll_at is not None and now_ms >= roll_at,
    )


def order_by_dirtiness(candidates: Sequence[LogToClean]) -> list[LogToClean]:
    """The due ones, dirtiest first (ties keep their input order, like Kafka's ``max`` over an
    iteration)."""
    return sorted((c for c in candidates if c.due), key=lambda c: -c.cleanable_ratio)


# ------------------------------------------------------------------------------ grouping (groupSegmentsBySize)


def group_segments_by_size(
    segments: Sequence[SegmentFacts], max_size: int, max_index_size: int, first_uncleanable_offset: int
) -> list[list[SegmentFacts]]:
    """Kafka's ``groupSegmentsBySize``: consecutive segments whose log bytes stay within
    ``segment.bytes``, whose offset and time index bytes each stay within ``segment.index.bytes``,
    and whose offsets fit one segment (the candidate's last offset, estimated as the next
    segment's base minus one or ``first_uncleanable_offset - 1`` for the last, minus the group's
    base offset must fit an int32). An empty candidate skips the span check."""
    groups: list[list[SegmentFacts]] = []
    rest = list(segments)
    while rest:
        first = rest.pop(0)
        group = [first]
        log_bytes = first.size_bytes
        index_bytes = first.offset_index_bytes
        time_bytes = first.time_index_bytes
        while rest:
            cand = rest[0]
            last_estimate = rest[1].base_offset - 1 if len(rest) > 1 else first_uncleanable_offset - 1
            if (
                log_bytes + cand.size_bytes <= max_size
                and index_bytes + cand.offset_index_bytes <= max_index_size
                and time_bytes + cand.time_index_bytes <= max_index_size
                and (cand.size_bytes == 0 or last_estimate - first.base_offset <= INT_MAX)
            ):
                group.append(rest.pop(0))
                log_bytes += cand.size_bytes
                index_bytes += cand.offset_index_bytes
                time_bytes += cand.time_index_bytes
            else:
                break
        groups.append(group)
    return groups


# ------------------------------------------------------------------------------ one round


@dataclass(frozen=True)
class CleaningRound:
    """What one cleaning pass recopies, once the offset map says how far it reached.

    ``end_offset`` (the map's latest offset + 1) becomes the new checkpoint. Every segment with
    a base below it is recopied (the clean section too: Kafka recopies it every pass), in
    ``groups`` of base offsets. Tombstones of magic 0/1 messages follow the old rule: kept while
    their segment's mtime is above ``legacy_delete_horizon_ms`` (the mtime of the last clean
    segment minus ``delete.retention.ms``, 0 without a clean section).
    """

    topic: str
    partition: int
    now_ms: int
    first_dirty_offset: int
    end_offset: int
    upper_bound_offset: int  # the first uncleanable offset of the LogToClean
    groups: tuple[tuple[int, ...], ...]
    legacy_delete_horizon_ms: int
    delete_retention_ms: int

    @property
    def recopied_bases(self) -> tuple[int, ...]:
        return tuple(b for g in self.groups for b in g)

    def to_dict(self) -> dict:
        return {
            "first_dirty_offset": self.first_dirty_offset,
            "end_offset": self.end_offset,
            "upper_bound_offset": self.upper_bound_offset,
            "groups": [list(g) for g in self.groups],
            "legacy_delete_horizon_ms": self.legacy_delete_horizon_ms,
        }


def legacy_delete_horizon_ms(segments: Sequence[SegmentFacts], first_dirty: int, delete_retention_ms: int) -> int:
    clean = segments_in_range(segments, 0, first_dirty)
    return clean[-1].mtime_ms - delete_retention_ms if clean else 0


def plan_round(
    ltc: LogToClean,
    segments: Sequence[SegmentFacts],
    *,
    end_offset: int,
    now_ms: int,
    segment_bytes: int,
    segment_index_bytes: int,
    delete_retention_ms: int,
) -> CleaningRound:
    """Group every segment below ``end_offset`` for recopying (Kafka's ``Cleaner.groupSegmentsBySize``)."""
    recopied = [s for s in segments_in_range(segments, 0, end_offset) if not s.is_active]
    groups = group_segments_by_size(recopied, segment_bytes, segment_index_bytes, ltc.first_uncleanable_offset)
    return CleaningRound(
        ltc.topic,
        ltc.partition,
        now_ms,
        ltc.first_dirty_offset,
        end_offset,
        ltc.first_uncleanable_offset,
        tuple(tuple(s.base_offset for s in g) for g in groups),
        legacy_delete_horizon_ms(segments, ltc.first_dirty_offset, delete_retention_ms),
        delete_retention_ms,
    )
