"""Retention: which old segments go (a pure plan) and the crash-safe step that removes them.

The rules are Kafka's ``UnifiedLog.deleteOldSegments`` (spec section 3, seeds 000 and 001):

* three passes in order, each on what the previous one left: the log start offset (a segment
  goes when the *next* segment starts at or below it), size (``retention.bytes``: walk the
  oldest segments while the total stays at or above the limit) and time (``retention.ms``: a
  segment goes when ``now - largest timestamp > retention.ms``, the largest timestamp being
  the max record timestamp, or the file mtime when records carry none);
* each pass stops at the first segment that does not qualify: segments are never skipped;
* ``cleanup.policy=compact`` applies only the log-start-offset pass, as does the empty policy
  (KIP-1161: keep forever, ``RetentionPlan.kept_forever``); ``delete`` and ``compact,delete``
  apply all three; ``-1`` disables a limit;
* the active segment may go too: the log first rolls a new empty active segment, and a last
  segment that is empty is never deleted.

Kafka lets one record timestamped in the future stop time retention for the whole log,
silently. The plan here names that segment and how much it holds back.

Applying a plan (``apply_retention``) happens under the partition lock, in this order, so that
a kill at any point leaves the log either as it was or as planned:

1. re-plan from the live log and refuse (``LogChangedError``) if the result differs from the
   plan the caller saw (optimistic concurrency: another process changed the log);
2. roll first if every segment goes (a new empty active segment: a harmless change alone);
3. **commit**: write the new log start offset to ``log-start-offset-checkpoint`` atomically.
   From here on a reload treats every segment wholly below it as deleted (``loader.py``);
4. rename each deleted segment's files to ``.deleted`` (``.log`` first) and drop them from the
   segment list; readers that already opened them keep reading through their descriptors;
5. remove ``.deleted`` files once ``file.delete.delay.ms`` has passed by the wall clock
   (``sweep_deleted_files``; a load also removes leftovers).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..config.topic import LogConfig
from ..errors import LogChangedError
from ..faults import crash_point
from ..files.naming import DELETED_SUFFIX
from ..outcomes import CHANGED, DELETED
from .segment import now_ms as wall_clock_ms
from .stats import PartitionStats, SegmentStat, live_stats

REASON_LOG_START_OFFSET = "log-start-offset"
REASON_SIZE = "retention.bytes"
REASON_TIME = "retention.ms"


@dataclass(frozen=True)
class SegmentDeletion:
    base_offset: int
    size_bytes: int
    reason: str
    largest_timestamp: int


@dataclass(frozen=True)
class RetentionPlan:
    """What retention would do to one partition, and why."""

    topic: str
    partition: int
    now_ms: int
    deletions: tuple[SegmentDeletion, ...]
    log_start_offset: int  # before
    new_log_start_offset: int | None  # None when nothing goes
    roll_first: bool  # every segment goes, the active one included
    warnings: tuple[str, ...] = ()
    next_expiry_ms: int | None = None  # when retention.ms next deletes a segment, the files unchanged
    kept_forever: bool = False  # the empty cleanup.policy: retention.ms and retention.bytes never apply

    @property
    def bytes_to_free(self) -> int:
        return sum(d.size_bytes for d in self.deletions)

    @property
    def deleted_bases(self) -> tuple[int, ...]:
        return tuple(d.base_offset for d in self.deletions)

    def to_dict(self) -> dict:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "now_ms": self.now_ms,
            "segments_to_delete": [
                {"base_offset": d.base_offset, "size_bytes": d.size_bytes, "reason": d.reason,
                 "largest_timestamp": d.largest_timestamp}
                for d in self.deletions
            ],
            "log_start_offset": self.log_start_offset,
            "new_log_start_offset": self.new_log_start_offset,
            "bytes_to_free": self.bytes_to_free,
            "roll_first": self.roll_first,
            "warnings": list(self.warnings),
            "kept_forever": self.kept_forever,
        }


def _deletable_prefix(segments: Sequence[SegmentStat], predicate) -> int:
    """How many of the oldest segments qualify, stopping at the first that does not."""
    n = 0
    for i, seg in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        if nxt is None and seg.size_bytes == 0:
            break  # never delete the last segment when it is empty
        if not predicate(seg, nxt):
            break
        n += 1
    return n


def plan_retention(stats: PartitionStats, config: LogConfig, now_ms: int) -> RetentionPlan:
    """The retention plan for one partition; reads nothing but the stats it is given."""
    remaining = list(stats.segments)
    deletions: list[SegmentDeletion] = []
    warnings: list[str] = []
    lso = stats.log_start_offset
    next_expiry = None

    def take(n: int, reason: str) -> None:
        for seg in remaining[:n]:
            deletions.append(SegmentDeletion(seg.base_offset, seg.size_bytes, reason, seg.largest_timestamp
                                             if reason == REASON_TIME else seg.max_record_timestamp))
        del remaining[:n]

    take(_deletable_prefix(remaining, lambda seg, nxt: nxt is not None and nxt.base_offset <= lso),
         REASON_LOG_START_OFFSET)

    if config.delete:
        if config.retention_bytes >= 0:
            diff = sum(s.size_bytes for s in remaining) - config.retention_bytes
            if diff >= 0:
                budget = [diff]

                def fits(seg: SegmentStat, _nxt: SegmentStat | None) -> bool:
                    if budget[0] - seg.size_bytes >= 0:
                        budget[0] -= seg.size_bytes
                        return True
                    return False

                take(_deletable_prefix(remaining, fits), REASON_SIZE)
        if config.retention_ms >= 0:
            expired = lambda seg, _nxt: now_ms - seg.largest_timestamp > config.retention_ms  # noqa: E731
            n = _deletable_prefix(remaining, expired)
            blocker = remaining[n] if n < len(remaining) else None
            take(n, REASON_TIME)
            if blocker is not None and (len(remaining) > 1 or blocker.size_bytes > 0):  # an empty last one stays
                next_expiry = blocker.largest_timestamp + config.retention_ms + 1
            if blocker is not None and blocker.largest_timestamp > now_ms:
                held = remaining[1:]
                warnings.append(
                    f"segment {blocker.base_offset} of {stats.topic}-{stats.partition} holds records timestamped "
                    f"{blocker.largest_timestamp - now_ms} ms in the future (largest timestamp "
                    f"{blocker.largest_timestamp} > now {now_ms}): time retention cannot pass it until "
                    f"{blocker.largest_timestamp + config.retention_ms}, holding back {len(held)} later segment(s) "
                    f"of {sum(s.size_bytes for s in held)} bytes"
                )

    roll_first = bool(deletions) and not remaining
    if deletions:
        if remaining:
            new_lso = max(lso, remaining[0].base_offset)
        else:
            new_lso = None  # decided at apply time: the log end offset (the rolled segment's base)
    else:
        new_lso = None
    return RetentionPlan(stats.topic, stats.partition, now_ms, tuple(deletions), lso,
                         new_lso, roll_first, tuple(warnings), next_expiry, config.keep_forever)


@dataclass
class RetentionResult:
    """One partition's retention run: the one result of a retention, for the local engine, the
    Spark job, ``logctl`` and the platform. ``status`` is its outcome (``storage_engine.outcomes``:
    ``deleted`` once applied, ``nothing`` to delete, ``planned`` by a dry run, ``changed`` since
    its plan, ``failed``) and ``reason`` why it was not applied; ``plan`` is None only when the
    partition's stats could not be read."""

    topic: str
    partition: int
    status: str
    reason: str | None = None
    plan: RetentionPlan | None = None
    deleted_segments: list[int] = field(default_factory=list)
    bytes_freed: int = 0
    new_log_start_offset: int | None = None
    pending_files: list[str] = field(default_factory=list)  # renamed to .deleted, removed after the delay
    duration_s: float = 0.0  # this partition's own seconds in a job's task

    @classmethod
    def of(cls, plan: RetentionPlan, status: str, reason: str | None = None) -> RetentionResult:
        return cls(plan.topic, plan.partition, status, reason, plan)

    @property
    def applied(self) -> bool:
        return self.status == DELETED

    @property
    def changed(self) -> str | None:
        """Why it was not applied when the log changed since the plan (``LogChangedError``'s words)."""
        return self.reason if self.status == CHANGED else None

    @property
    def log_start_offset_after(self) -> int | None:
        return self.new_log_start_offset

    def to_dict(self) -> dict:
        """The plan's fields and what became of it: one row of ``logctl retention``, whatever the
        engine, and a compaction report's ``retention``."""
        plan = (self.plan.to_dict() if self.plan is not None else
                {"topic": self.topic, "partition": self.partition, "segments_to_delete": [], "warnings": []})
        return plan | {"applied": self.applied, "status": self.status, "reason": self.reason,
                       "deleted_segments": self.deleted_segments, "bytes_freed": self.bytes_freed,
                       "log_start_offset_after": self.new_log_start_offset, "pending_files": self.pending_files}


def apply_retention(log, plan: RetentionPlan | None, now_ms: int,
                    planner: Callable[[PartitionStats, int], RetentionPlan] | None = None) -> RetentionResult:
    """Apply ``plan`` (or a fresh one when None) to an open log; see the module docstring.
    ``planner`` (default: :func:`plan_retention` with the log's config) re-plans from the live
    log under the lock: the remote tier's local retention passes its own."""
    with log.lock.hold():
        log.sync_for_change()
        fresh = (planner or (lambda stats, now: plan_retention(stats, log.config, now)))(live_stats(log), now_ms)
        already_gone = _planned_and_already_gone(plan, log)
        expected = tuple(b for b in plan.deleted_bases if b not in already_gone) if plan is not None else ()
        if plan is not None and fresh.deleted_bases != expected:
            if not (log.segments_repaired and set(fresh.deleted_bases) <= set(expected)):
                raise LogChangedError(
                    f"{log.tp} changed since retention was planned: planned to delete segments "
                    f"{list(plan.deleted_bases)}, now {list(fresh.deleted_bases)}"
                )
            # The plan was made from files that the latest load of the log then repaired (it
            # completed a swap a crash left): it described segments that no longer exist. The
            # fresh plan, made under the lock, deletes nothing the plan did not cover.
            fresh = replace(fresh, warnings=(*fresh.warnings, "planned again after the open repaired the log's "
                                             f"segments: planned {list(plan.deleted_bases)}"))
            already_gone = set()
        # the caller's plan, when the open already carried out part of it, says what this run deleted
        if plan is not None and already_gone:  # only a caller's plan has segments already gone
            result = RetentionResult.of(plan, DELETED)
            # Opening the log already removed them: they lay wholly below a log start offset that
            # delete-records (Kafka's DeleteRecords) had committed, which the loader honours.
            result.deleted_segments = sorted(already_gone)
            result.bytes_freed = sum(d.size_bytes for d in plan.deletions if d.base_offset in already_gone)
            result.new_log_start_offset = log.log_start_offset
        else:
            result = RetentionResult.of(fresh, DELETED)
        if not fresh.deletions:
            return result
        doomed = [s for s in log.segments if s.base_offset in set(fresh.deleted_bases)]
        if fresh.roll_first:
            log.roll_locked(now_ms)
            crash_point("retention.after-roll")
        new_lso = fresh.new_log_start_offset
        if new_lso is None:
            new_lso = log.segments[len(doomed)].base_offset
        log.commit_log_start_offset(max(new_lso, log.log_start_offset))
        crash_point("retention.after-checkpoint")
        pending = log.remove_segments(doomed)
        result.deleted_segments += [s.base_offset for s in doomed]
        result.bytes_freed += sum(d.size_bytes for d in fresh.deletions)
        result.new_log_start_offset = log.log_start_offset
        if log.config.file_delete_delay_ms == 0:
            sweep_deleted_files(log.dir, 0)
        result.pending_files = [str(p) for p in pending if os.path.lexists(p)]
        return result


def _planned_and_already_gone(plan: RetentionPlan | None, log) -> set[int]:
    """Planned segments that no longer exist because they lay wholly below the log start offset.

    A plan is made from file metadata without opening the log; opening it for the apply drops
    segments below a committed log start offset (``delete-records``), which is the outcome the
    plan asked for, not a concurrent change.
    """
    if plan is None:
        return set()
    live = {s.base_offset for s in log.segments}
    first_live = min(live) if live else log.log_end_offset
    return {b for b in plan.deleted_bases if b not in live and b < first_live and first_live <= log.log_start_offset}


def sweep_deleted_files(directory: Path, delay_ms: int) -> list[tuple[str, int]]:
    """Remove ``.deleted`` files renamed at least ``delay_ms`` ago (Kafka's scheduled
    ``deleteSegmentFiles``); returns each removed file's name and size (what the removal freed).
    A rename sets the ctime, which is the wall clock's, so the delay is measured by the wall
    clock whatever clock retention or the cleaner judged by: with a ``--now-ms`` in the past a
    file renamed just now never looked due, and a result said nothing was pending while it
    stayed. A symbolic link named like one is removed itself, never followed. Sweeping takes no
    partition lock (a reader holding such a file open keeps reading it), so two sweepers (the
    platform's sensor and a retention run, say) may meet: a file the other removed first is
    not this one's to report."""
    removed = []
    now = wall_clock_ms()
    for entry in os.scandir(directory):
        if entry.name.endswith(DELETED_SUFFIX):
            try:
                st = entry.stat(follow_symlinks=False)
                if int(st.st_ctime * 1000) + delay_ms > now:
                    continue
                os.unlink(entry.path)
            except FileNotFoundError:
                continue
            removed.append((entry.name, st.st_size))
    return removed
