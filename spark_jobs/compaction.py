"""Distributed log compaction: the engine's cleaner, with Spark spreading the work.

Every decision and every byte is the engine's (``storage_engine.cleaner``); Spark supplies only
the distribution (``distribute.py``). A job moves work, not keys:

* **Whole partitions.** A partition no larger than one task's share of the job (the job's bytes
  over its task slots, at least ``MIN_SPLIT_BYTES``) is cleaned whole inside one task by the
  engine's own lifecycle, ``LogManager.compact``: prepare, plan, clean (pass after pass while
  the offset map fills), commit under the lock, account, then the after-steps (retention for
  ``compact,delete``, the sweep of ``.deleted`` files). Many such partitions are packed per
  task, largest first. The output is the local cleaner's because it is the local cleaner.
* **Split partitions.** A larger partition is planned on the driver, under its cleaner lock
  (the engine's ``Cleaner.prepare_pass`` and ``plan_round``), then cleaned in two stages:

  1. *Keys* (segments of the dirty range, packed per task slot): the engine's map-building
     walk, reduced inside the task to the latest offset of each key, so a task hands back one
     small map per segment, never a row per record. The driver merges them in offset order: the
     partition's exact offset map (one round reaches the first uncleanable offset, where the
     local cleaner's bounded map may need several passes to get there).
  2. *Recopy* (groups of segments, packed per task slot): the engine's ``BatchFilter`` and
     ``recopy_group`` with that map and the transaction state the header replay computed for
     the group's start, writing under a per-attempt staging directory
     (``staging.remote_staging_dir``), so retried or speculative attempts never collide.

  The maps travel as files in the partition's staging directory (``cleaner.map_file``), which
  every host sees (the jobs need the log dirs on a shared mount), not through Spark's RPC.

  The driver then moves the winning attempts' files in as ``.cleaning`` and the engine's
  ``commit_round`` swaps them in after checking that every input segment is unchanged; a
  partition that changed is reported ``changed`` and nothing of it is swapped.

  A topic with a version compaction strategy (``compaction.strategy`` ``timestamp`` or
  ``header``, KIP-280) is never split: its recopy must run in offset order, so each of its
  partitions is cleaned whole, whatever its size.

Crash safety is the engine's: staged output that never reached the swap is removed by the next
cleaner or writable load of the partition (``staging.remove_staging_if_idle``), and the swap
itself follows Kafka's ``.cleaned``/``.swap`` protocol with the loader's recovery rules. Each
partition's report times its own work (its task, or its planning, tasks and commit); the job's
wall time is :attr:`CompactionJobResult.duration_s`.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from storage_engine.cleaner import (
    AbortedTxn,
    BatchFilter,
    Cleaner,
    CleanerStats,
    CompactionReport,
    InputSegment,
    LastRecord,
    SegmentRef,
    TransactionTracker,
    discard_staged,
    recopy_group,
    segment_latest_offsets,
    transaction_states,
)
from storage_engine.cleaner.cleaner import PassResult
from storage_engine.cleaner.map_file import read_map, write_map
from storage_engine.cleaner.offset_map import OffsetMap
from storage_engine.cleaner.plan import CleaningRound
from storage_engine.cleaner.strategy import CompactionStrategy
from storage_engine.cleaner.staging import STAGING_SUFFIX, CleanerBusyError, CleanerLock, remote_staging_dir, \
    remove_stale_staging
from storage_engine.config import LogConfig
from storage_engine.errors import LogChangedError, LogError
from storage_engine.faults import crash_point
from storage_engine.manager import LogManager
from storage_engine.segment import LogSegment

from .distribute import attempt_id, each, pack, run_tasks, task_slots
from .errors import SparkJobError
from .outcomes import CHANGED, COMPACTED, FAILED, SKIPPED

#: A partition is split over several tasks only above this size, whatever the job's share per
#: task: below it the split's extra stage costs more than the parallelism saves.
MIN_SPLIT_BYTES = 256 * 1024 * 1024


# ------------------------------------------------------------------------------------------
# the work items (small and picklable: they travel to executors)


@dataclass(frozen=True)
class WholeTask:
    """A partition cleaned whole, inside one task, by the engine."""

    topic: str
    partition: int
    log_dir: str
    size_bytes: int
    broker_props: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ScanTask:
    """Split stage 1: the latest offset of each key in one segment's part of the dirty range."""

    tp: int
    segment: SegmentRef
    dirty_from: int
    dirty_to: int
    aborted: tuple[AbortedTxn, ...]  # aborted transactions reaching into this segment's dirty part
    chunk: int  # the cleaner's I/O buffer (log.cleaner.io.buffer.size)
    staging_dir: str  # where the task leaves its map (``map_file``)


@dataclass
class GroupTask:
    """Split stage 2: recopy one group of segments into one replacement segment."""

    tp: int
    grp: int
    directory: str
    staging_dir: str
    map_path: str  # the partition's merged offset map (``map_file``)
    config: LogConfig
    segments: tuple[SegmentRef, ...]
    legacy_delete_horizon_ms: int
    tracker: TransactionTracker
    last_records: dict[int, LastRecord]
    now_ms: int
    map_latest_offset: int
    last_batch_base_offset: int | None
    chunk: int  # read and write chunk: the local cleaner's, so index entries fall where its do


# ------------------------------------------------------------------------------------------
# executor side


def clean_whole(task: WholeTask, now_ms: int, force: bool) -> "PartitionOutcome":
    """One partition through the engine's whole compaction lifecycle; a problem of its files
    becomes its outcome (the other partitions of the job go on)."""
    started = time.monotonic()
    report = CompactionReport(task.topic, task.partition, now_ms)
    manager = LogManager([Path(task.log_dir)], dict(task.broker_props))
    try:
        report = manager.compact(task.topic, task.partition, now_ms=now_ms, force=force)
        status, reason = (COMPACTED, None) if report.skipped is None else (SKIPPED, report.skipped)
    except CleanerBusyError as exc:
        status, reason = SKIPPED, str(exc)
    except LogChangedError as exc:
        status, reason = CHANGED, str(exc)
    except (LogError, OSError) as exc:
        status, reason = FAILED, f"{type(exc).__name__}: {exc}"
    finally:
        manager.close()
    if status != COMPACTED:
        report.skipped = reason
        report.duration_s = time.monotonic() - started
    report.engine = "spark"
    return PartitionOutcome(task.topic, task.partition, status, reason, report)


def scan_segment_keys(task: ScanTask) -> tuple[int, int, str, float]:
    """``(tp, base offset, map file, seconds)``: the engine's share of the offset map from this
    segment (:func:`~storage_engine.cleaner.segment_latest_offsets`), written to a file in the
    partition's staging directory. A segment that is gone or replaced, or that cannot be read,
    leaves an empty map: its group's recopy (or the commit) notices the change or the damage and
    the partition is not swapped."""
    started = time.monotonic()
    latest: dict[bytes, int] = {}
    try:
        seg = InputSegment.from_ref(task.segment, task.chunk)
    except LogChangedError:
        seg = None
    if seg is not None:
        try:
            latest = segment_latest_offsets(seg, task.dirty_from, task.dirty_to, task.aborted)
        except LogError:
            pass
        finally:
            seg.close()
    staging = Path(task.staging_dir)
    staging.mkdir(parents=True, exist_ok=True)
    path = staging / f"keys-{task.tp}-{task.segment.base_offset}-attempt-{attempt_id()}.map"
    write_map(path, latest)
    return task.tp, task.segment.base_offset, str(path), time.monotonic() - started


def recopy_tasks(tasks: Sequence[GroupTask]) -> list[dict]:
    """One Spark task's groups, each partition's merged map read once."""
    maps: dict[str, dict[bytes, int]] = {}
    attempt = attempt_id()
    rows = []
    for task in tasks:
        if task.map_path not in maps:
            maps[task.map_path] = read_map(Path(task.map_path))
        rows.append(recopy_task(task, maps[task.map_path], attempt))
    return rows


def recopy_task(task: GroupTask, latest: dict[bytes, int], attempt: str) -> dict:
    """Recopy one group with the engine's rules; a result row for the driver (never raises for a
    problem of this partition's files: the driver reports it and skips the partition)."""
    result = {"tp": task.tp, "grp": task.grp, "status": COMPACTED, "detail": None, "staging": None, "stats": None}
    omap = OffsetMap.exact(latest, task.map_latest_offset)
    stats = CleanerStats()
    bfilter = BatchFilter(
        omap,
        task.tracker,
        task.last_records,
        now_ms=task.now_ms,
        delete_retention_ms=task.config.delete_retention_ms,
        last_batch_base_offset=task.last_batch_base_offset,
        stats=stats,
        path=task.directory,
    )
    inputs: list[InputSegment] = []
    staging = Path(task.staging_dir) / f"group-{task.grp}-attempt-{attempt}"
    t0 = time.monotonic()
    try:
        inputs = [InputSegment.from_ref(ref, task.chunk) for ref in task.segments]
        staging.mkdir(parents=True, exist_ok=True)
        cleaned = recopy_group(staging, task.config, inputs, task.legacy_delete_horizon_ms, bfilter,
                               chunk_limit=task.chunk)
        cleaned.close(trim_indexes=False)
    except LogChangedError as exc:
        result.update(status=CHANGED, detail=str(exc))
        return result
    except (LogError, OSError) as exc:
        result.update(status=FAILED, detail=f"{type(exc).__name__}: {exc}")
        return result
    finally:
        for seg in inputs:
            seg.close()
    stats.clean_seconds = time.monotonic() - t0
    result.update(staging=str(staging), stats=stats)
    return result


# ------------------------------------------------------------------------------------------
# driver side


@dataclass
class PartitionOutcome:
    topic: str
    partition: int
    status: str
    reason: str | None
    report: CompactionReport

    def to_dict(self) -> dict:
        return {"status": self.status, "reason": self.reason, **self.report.to_dict()}


@dataclass
class CompactionJobResult:
    now_ms: int
    duration_s: float = 0.0
    outcomes: list[PartitionOutcome] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"now_ms": self.now_ms, "duration_s": round(self.duration_s, 6),
                "partitions": [o.to_dict() for o in self.outcomes]}


@dataclass
class _Planned:
    """A split partition the driver planned: everything the commit needs, and the lock it holds."""

    topic: str
    partition: int
    log: object
    lock: CleanerLock
    report: CompactionReport
    prepared: object  # storage_engine.cleaner.PreparedPass
    round: CleaningRound
    inputs: list[InputSegment]
    groups: int
    plan_s: float  # the driver's seconds planning it


def split_threshold(total_bytes: int, slots: int) -> int:
    """The size above which a partition is split: one task's share of the job, at least
    :data:`MIN_SPLIT_BYTES`."""
    return max(MIN_SPLIT_BYTES, -(-total_bytes // max(1, slots)))


class CompactionJob:
    """One distributed compaction: :meth:`plan` (driver: which partitions go whole, and the split
    ones planned under their cleaner locks), :meth:`execute` (the Spark tasks), :meth:`commit`
    (driver, split partition by partition). :meth:`close` releases everything; use it as a
    context manager. Between the steps other processes may append, roll or apply retention: the
    commit notices and skips what changed. ``split_bytes`` overrides :func:`split_threshold`
    (0 splits every partition with anything to clean)."""

    def __init__(self, spark, manager: LogManager, *, now_ms: int, force: bool = False,
                 split_bytes: int | None = None) -> None:
        self.spark = spark
        self.manager = manager
        self.now_ms = now_ms
        self.force = force
        self.split_bytes = split_bytes
        self.cleaner = Cleaner(manager.cleaner_config())
        self.job_id = f"{int(time.time())}-{uuid.uuid4().hex[:8]}"
        self.result = CompactionJobResult(now_ms)
        self.whole: list[WholeTask] = []
        self.planned: list[_Planned] = []
        self._rows: dict[int, dict[int, dict]] = {}
        self._index_s: dict[int, float] = {}  # each split partition's key tasks' seconds
        self._keys: dict[int, int] = {}  # and the keys of its merged map
        self._started = time.monotonic()

    def plan(self, partitions: Sequence[tuple[str, int]] | None = None) -> None:
        chosen = set(self.manager.compacted_partitions(partitions))
        stats = {(s.topic, s.partition): s for s in self.manager.partition_stats() if (s.topic, s.partition) in chosen}
        slots = task_slots(self.spark)
        threshold = (split_threshold(sum(s.size_bytes for s in stats.values()), slots)
                     if self.split_bytes is None else self.split_bytes)
        props = tuple(sorted(self.manager.broker_props.items()))
        for topic, partition in sorted(chosen):
            s = stats[(topic, partition)]
            if (s.size_bytes <= threshold and self.split_bytes != 0) or self._needs_order(topic):
                self.whole.append(WholeTask(topic, partition, str(Path(s.directory).parent), s.size_bytes, props))
                continue
            outcome, plan = _plan_partition(self.manager, self.cleaner, topic, partition, self.now_ms, self.force)
            if plan is not None:
                self.planned.append(plan)
            elif outcome is not None:
                self.result.outcomes.append(outcome)

    def _needs_order(self, topic: str) -> bool:
        """A version compaction strategy (KIP-280) recopies in offset order: a clean record may
        displace the dirty section's winner of its key, which a later group then drops. Split
        groups run in parallel, so such a partition is always cleaned whole, in one task."""
        return self.manager.topic_config(topic).compaction_strategy != CompactionStrategy.OFFSET

    def execute(self) -> None:
        now_ms, force = self.now_ms, self.force
        try:
            if self.whole:
                tasks = pack(self.whole, lambda t: t.size_bytes, task_slots(self.spark))
                self.result.outcomes.extend(run_tasks(self.spark, tasks, each(lambda t: clean_whole(t, now_ms, force))))
            if self.planned:
                self._rows = self._run_split()
        except Exception as exc:  # a task died for good (after Spark's retries)
            raise SparkJobError(f"compaction job {self.job_id} failed; no split partition was swapped "
                                f"(whole partitions commit as their tasks finish): {exc}") from exc
        crash_point("spark-compaction.after-tasks")

    def _run_split(self) -> dict[int, dict[int, dict]]:
        """The split partitions' two stages; result rows by partition index and group."""
        scans, groups = _tasks_for(self.planned, self.job_id, self.now_ms, self.cleaner.chunk)
        # packed per task slot, largest first: a task costs Spark tens of milliseconds of its own
        slots = task_slots(self.spark)
        maps: dict[int, dict[bytes, int]] = {tp: {} for tp in range(len(self.planned))}
        # in offset order, so a later segment's offset of a key replaces an earlier one
        for tp, _, path, seconds in sorted(run_tasks(self.spark, pack(scans, lambda t: t.segment.size, slots),
                                                     each(scan_segment_keys)), key=lambda r: (r[0], r[1])):
            maps[tp].update(read_map(Path(path)))
            os.unlink(path)
            self._index_s[tp] = self._index_s.get(tp, 0.0) + seconds
        for tp, table in maps.items():
            self._keys[tp] = len(table)
            path = Path(_map_path(self.planned[tp].log.dir, self.job_id))
            path.parent.mkdir(parents=True, exist_ok=True)
            write_map(path, table)
        rows = run_tasks(self.spark, pack(groups, lambda g: sum(ref.size for ref in g.segments), slots), recopy_tasks)
        out: dict[int, dict[int, dict]] = {}
        for row in rows:
            out.setdefault(row["tp"], {})[row["grp"]] = row
        return out

    def commit(self) -> CompactionJobResult:
        for tp_index, plan in enumerate(self.planned):
            self.result.outcomes.append(_commit_partition(self.manager, self.cleaner, plan, self._rows.get(tp_index, {}),
                                                          self._index_s.get(tp_index, 0.0), self._keys.get(tp_index, 0),
                                                          self.now_ms))
        self.result.outcomes.sort(key=lambda o: (o.topic, o.partition))
        self.result.duration_s = time.monotonic() - self._started
        return self.result

    def close(self) -> None:
        for plan in self.planned:
            plan.prepared.close()
            shutil.rmtree(remote_staging_dir(plan.log.dir, self.job_id), ignore_errors=True)
            plan.lock.release()
        self.planned = []

    def __enter__(self) -> "CompactionJob":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def compact_partitions(
    spark,
    log_dirs: Sequence[str | Path] | None = None,
    partitions: Sequence[tuple[str, int]] | None = None,
    *,
    now_ms: int,
    force: bool = False,
    broker_props: Mapping[str, str] | None = None,
    manager: LogManager | None = None,
    split_bytes: int | None = None,
) -> CompactionJobResult:
    """Compact many partitions in one Spark job (see the module docstring).

    ``partitions`` defaults to every partition of every compacted topic. ``force=False`` cleans
    only partitions Kafka's cleaner would pick (dirty ratio or ``max.compaction.lag.ms``);
    ``force=True`` cleans each that has anything cleanable. ``compact,delete`` topics also get
    retention afterwards, as Kafka's cleaner thread does. Log dirs come from ``manager`` when given.
    """
    own = manager is None
    manager = manager or LogManager([Path(d) for d in (log_dirs or [])], broker_props)
    try:
        with CompactionJob(spark, manager, now_ms=now_ms, force=force, split_bytes=split_bytes) as job:
            job.plan(partitions)
            job.execute()
            return job.commit()
    finally:
        if own:
            manager.close()


def _plan_partition(manager: LogManager, cleaner: Cleaner, topic: str, partition: int, now_ms: int,
                    force: bool) -> tuple[PartitionOutcome | None, _Planned | None]:
    log = manager.get_log(topic, partition)
    report = CompactionReport(topic, partition, now_ms, engine="spark")
    lock = CleanerLock(log.dir)
    if not lock.acquire():
        report.skipped = f"{topic}-{partition} is being cleaned by another process"
        return PartitionOutcome(topic, partition, SKIPPED, report.skipped, report), None
    t0 = time.monotonic()
    try:
        remove_stale_staging(log.dir)
        prepared = cleaner.prepare_pass(log, now_ms, force=force, report=report)
    except BaseException:
        lock.release()
        raise
    if prepared is None:
        lock.release()
        manager.after_cleaning(log, report, now_ms, cleaner)
        report.duration_s = time.monotonic() - t0
        return PartitionOutcome(topic, partition, SKIPPED, report.skipped, report), None
    rnd = cleaner.plan_round(log, prepared, prepared.ltc.first_uncleanable_offset, now_ms)
    groups = prepared.groups(rnd)
    plan = _Planned(topic, partition, log, lock, report, prepared, rnd, [s for g in groups for s in g], len(groups),
                    time.monotonic() - t0)
    return None, plan


def _tasks_for(plans: list[_Planned], job_id: str, now_ms: int, chunk: int) -> tuple[list[ScanTask], list[GroupTask]]:
    scans: list[ScanTask] = []
    groups: list[GroupTask] = []
    for tp, plan in enumerate(plans):
        prepared, rnd, log = plan.prepared, plan.round, plan.log
        ltc, producers = prepared.ltc, prepared.producers
        by_group = prepared.groups(rnd)
        starts = [g[0].base_offset for g in by_group]
        trackers = transaction_states(prepared.snap.segments, producers.aborted, starts)
        last_base = by_group[-1][-1].last_batch_base
        staging = remote_staging_dir(log.dir, job_id)
        segments = [seg for group in by_group for seg in group]
        ends = [s.base_offset for s in segments[1:]] + [rnd.end_offset]
        for seg, seg_end in zip(segments, ends):
            if seg_end > ltc.first_dirty_offset and seg.base_offset < rnd.end_offset:
                lo = max(seg.base_offset, ltc.first_dirty_offset)  # aborted transactions from its dirty part on
                scans.append(ScanTask(tp, seg.ref, ltc.first_dirty_offset, rnd.end_offset,
                                      tuple(producers.aborted_overlapping(lo, rnd.end_offset)), chunk, str(staging)))
        for grp, group in enumerate(by_group):
            groups.append(GroupTask(
                tp, grp, str(log.dir), str(staging), _map_path(log.dir, job_id), log.config, tuple(s.ref for s in group),
                rnd.legacy_delete_horizon_ms, trackers[group[0].base_offset],
                producers.last_records, now_ms, rnd.end_offset - 1, last_base, chunk,
            ))
    return scans, groups


def _map_path(directory: Path, job_id: str) -> str:
    """Where a split partition's merged offset map waits for the recopy tasks."""
    return str(remote_staging_dir(directory, job_id) / "map.map")


def _commit_partition(manager: LogManager, cleaner: Cleaner, plan: _Planned, rows: dict[int, dict],
                      index_s: float, keys: int, now_ms: int) -> PartitionOutcome:
    """Swap in one split partition's groups, or report why not. Its ``duration_s`` is its own
    work (planning, its tasks' seconds, the commit), not the job's wall time."""
    started = time.monotonic()
    report, log = plan.report, plan.log
    problems = [r for r in rows.values() if r["status"] != COMPACTED]
    missing = plan.groups - len(rows)
    if problems or missing:
        status = FAILED if any(r["status"] == FAILED for r in problems) or missing else CHANGED
        reason = "; ".join(r["detail"] for r in problems) or f"{missing} group(s) produced no result"
        report.skipped = f"nothing swapped: {reason}"
        return PartitionOutcome(plan.topic, plan.partition, status, reason, report)
    cleaned: list[LogSegment] = []
    stats = plan.prepared.stats
    stats.index_seconds += index_s
    try:
        for grp in range(plan.groups):
            row = rows[grp]
            stats.add(row["stats"])
            cleaned.append(_adopt(Path(row["staging"]), log.dir, plan.round.groups[grp][0], log.config))
        crash_point("spark-compaction.after-staged-moved")
        t0 = time.monotonic()
        cleaner.commit_round(log, plan.inputs, cleaned, plan.round)
        stats.swap_seconds = time.monotonic() - t0
    except LogChangedError as exc:
        discard_staged(cleaned)
        report.skipped = str(exc)
        return PartitionOutcome(plan.topic, plan.partition, CHANGED, str(exc), report)
    except BaseException:
        discard_staged(cleaned)
        raise
    cleaner.account(report, PassResult(plan.prepared.ltc, plan.round, stats, map_entries=keys,
                                       segments_written=len(cleaned),
                                       last_stable_offset=plan.prepared.producers.last_stable_offset))
    report.map_capacity_bytes = 0  # an exact map: no capacity of its own
    manager.after_cleaning(log, report, now_ms, cleaner, plan.prepared.producers.last_stable_offset)
    report.duration_s = plan.plan_s + index_s + stats.clean_seconds + time.monotonic() - started
    return PartitionOutcome(plan.topic, plan.partition, COMPACTED, None, report)


def _adopt(staging: Path, directory: Path, base: int, config: LogConfig) -> LogSegment:
    """Move one task's replacement segment into the partition directory, still staged."""
    for entry in sorted(os.scandir(staging), key=lambda e: e.name):
        if entry.name.endswith(STAGING_SUFFIX):
            os.replace(entry.path, Path(directory) / entry.name)
    return LogSegment(directory, base, config, file_suffix=STAGING_SUFFIX, writable=True)
